//! The markup narrators write into plain text: SSML's `<break/>` makes a pause, every other tag
//! is dropped (never read aloud, never shown in subtitles).
//!
//! `<break time="1.5s"/>`, `<break time="700ms"/>` and `<break strength="strong"/>` are the subset
//! TTS users already write (SSML 1.1, section 3.2.3). A break with neither attribute is `medium`.
//! The strengths follow the common cloud voices' lengths: none 0 ms, x-weak 250, weak 500, medium
//! 750, strong 1000, x-strong 1250. A `time` wins over a `strength`, as SSML says. Pauses longer
//! than a minute are refused: in a narration they are typing mistakes ("70s" for "700ms").

use std::ops::Range;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// The longest pause a break may ask for.
pub const MAX_BREAK_MS: u32 = 60_000;
const MEDIUM_MS: u32 = 750;

/// A stretch of text with no markup, and the pause that follows it (`None` after the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub text: String,
    pub pause_after_ms: Option<u32>,
}

/// A `<break>` tag this module cannot read, and how to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakError {
    pub tag: String,
    pub message: String,
}

/// Byte ranges of the tag-like runs of `text` (`<break time="1s"/>`, `</speak>`): `<`, an
/// optional `/`, an ASCII letter, then `>` within 200 bytes and before any other `<`. "a < b" and
/// "<3" are not tags.
fn tags(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    let bytes = text.as_bytes();
    text.match_indices('<').filter_map(move |(i, _)| {
        let name = i + 1 + usize::from(bytes.get(i + 1) == Some(&b'/'));
        if !bytes.get(name).is_some_and(u8::is_ascii_alphabetic) {
            return None;
        }
        let rest = &text[i..text.len().min(i + 200)];
        let end = rest.find('>')?;
        (!rest[1..end].contains('<')).then_some(i..i + end + 1)
    })
}

/// The first tag other than `<break>` (which talker drops, with a warning).
pub fn first_other_tag(text: &str) -> Option<&str> {
    tags(text).map(|r| &text[r]).find(|tag| !is_break(tag))
}

/// Whether `text` holds any tag at all (the common case is none: nothing to split).
pub fn has_tags(text: &str) -> bool {
    tags(text).next().is_some()
}

/// `text` with every tag dropped (breaks too): what a cue shows.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for range in tags(text) {
        out.push_str(&text[from..range.start]);
        if !out.ends_with(char::is_whitespace) {
            out.push(' ');
        }
        from = range.end;
    }
    out.push_str(&text[from..]);
    out
}

/// Whether `tag` (one tag, `<` to `>`) is a `<break>` or its end tag.
pub fn is_break(tag: &str) -> bool {
    let name = tag
        .trim_start_matches('<')
        .trim_start_matches('/')
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or("");
    name.eq_ignore_ascii_case("break")
}

/// Splits `text` at its `<break>` tags and drops every other tag. Consecutive breaks add up; text
/// before the first break may be empty (a pause that starts the segment).
pub fn split(text: &str) -> Result<Vec<Run>, BreakError> {
    let mut runs = Vec::new();
    let mut current = String::new();
    let mut pause: Option<u32> = None;
    let mut from = 0;
    for range in tags(text) {
        let between = &text[from..range.start];
        end_run_before(between, &mut runs, &mut current, &mut pause);
        current.push_str(between);
        let tag = &text[range.clone()];
        from = range.end;
        if is_break(tag) {
            if !tag.starts_with("</") {
                let ms = break_ms(tag)?;
                pause = Some(pause.unwrap_or(0).saturating_add(ms).min(MAX_BREAK_MS));
            }
        } else if !current.ends_with(char::is_whitespace) {
            // A dropped tag between two words must not join them.
            current.push(' ');
        }
    }
    let tail = &text[from..];
    end_run_before(tail, &mut runs, &mut current, &mut pause);
    current.push_str(tail);
    runs.push(Run {
        text: current,
        pause_after_ms: pause,
    });
    Ok(runs)
}

/// Words after a pending pause start a new run: the one before them ends with that pause.
fn end_run_before(next: &str, runs: &mut Vec<Run>, current: &mut String, pause: &mut Option<u32>) {
    if next.trim().is_empty() {
        return;
    }
    if let Some(ms) = pause.take() {
        runs.push(Run {
            text: std::mem::take(current),
            pause_after_ms: Some(ms),
        });
    }
}

/// The pause one `<break ...>` tag asks for.
fn break_ms(tag: &str) -> Result<u32, BreakError> {
    let fail = |message: String| BreakError {
        tag: tag.to_owned(),
        message,
    };
    let mut reader = Reader::from_str(tag);
    let start = match reader.read_event() {
        Ok(Event::Empty(e) | Event::Start(e)) => e,
        _ => {
            return Err(fail(
                "is not a well-formed tag; write it as <break time=\"1.5s\"/>".to_owned(),
            ));
        }
    };
    let (time, strength) = attributes(&start).map_err(fail)?;
    if let Some(time) = time {
        return parse_time(&time).map_err(fail);
    }
    match strength.as_deref() {
        None | Some("medium") => Ok(MEDIUM_MS),
        Some("none") => Ok(0),
        Some("x-weak") => Ok(250),
        Some("weak") => Ok(500),
        Some("strong") => Ok(1000),
        Some("x-strong") => Ok(1250),
        Some(other) => Err(fail(format!(
            "has strength=\"{other}\"; use none, x-weak, weak, medium, strong or x-strong, or a time such as time=\"700ms\""
        ))),
    }
}

type Attributes = (Option<String>, Option<String>);

fn attributes(start: &BytesStart<'_>) -> Result<Attributes, String> {
    let (mut time, mut strength) = (None, None);
    for attribute in start.attributes() {
        let attribute = attribute.map_err(|e| {
            format!("has a malformed attribute ({e}); write it as <break time=\"1.5s\"/>")
        })?;
        let value = attribute.value.trim().to_owned();
        match attribute.key.as_ref() {
            "time" => time = Some(value),
            "strength" => strength = Some(value),
            other => {
                return Err(format!(
                    "has the attribute \"{other}\", which a break does not take; use time=\"700ms\" or strength=\"strong\""
                ));
            }
        }
    }
    Ok((time, strength))
}

/// "1.5s", "700ms", "2 s" to milliseconds.
fn parse_time(time: &str) -> Result<u32, String> {
    let (number, scale) = if let Some(n) = time.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = time.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return Err(format!(
            "has time=\"{time}\" without a unit; write seconds (\"1.5s\") or milliseconds (\"700ms\")"
        ));
    };
    let number = number.trim();
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0 && !number.starts_with('+'))
        .ok_or_else(|| {
            format!(
                "has time=\"{time}\", which is not a length of time; write \"1.5s\" or \"700ms\""
            )
        })?;
    let ms = (value * scale).round();
    if ms > f64::from(MAX_BREAK_MS) {
        return Err(format!(
            "asks for {time}, longer than the one-minute limit of a pause; split it or shorten it"
        ));
    }
    // In range: checked just above.
    Ok(ms as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, ms: Option<u32>) -> Run {
        Run {
            text: text.to_owned(),
            pause_after_ms: ms,
        }
    }

    #[test]
    fn breaks_split_and_other_tags_drop() {
        assert_eq!(
            split("No tags here.").unwrap(),
            [run("No tags here.", None)]
        );
        assert_eq!(
            split(r#"Wait <break time="1.5s"/> now."#).unwrap(),
            [run("Wait ", Some(1500)), run(" now.", None)]
        );
        assert_eq!(
            split(r#"A<break time='700ms'/>B <break strength="strong"/><break/>C"#).unwrap(),
            [run("A", Some(700)), run("B ", Some(1750)), run("C", None)]
        );
        assert_eq!(
            split(r#"<break time="2s"/>Late start. <emphasis>Loud</emphasis>words"#).unwrap(),
            [run("", Some(2000)), run("Late start. Loud words", None)]
        );
        assert_eq!(
            split(r#"Ends in a pause.<break time="3s"></break>"#).unwrap(),
            [run("Ends in a pause.", Some(3000))]
        );
        assert_eq!(split("a < b and <3").unwrap(), [run("a < b and <3", None)]);
        assert_eq!(plain(r#"One<break/>two <b>three</b>"#), "One two three ");
    }

    #[test]
    fn bad_breaks_are_named() {
        for (text, says) in [
            (r#"<break time="2"/>"#, "without a unit"),
            (r#"<break time="-1s"/>"#, "not a length of time"),
            (r#"<break time="abcms"/>"#, "not a length of time"),
            (r#"<break time="70s"/>"#, "one-minute limit"),
            (r#"<break strength="huge"/>"#, "strength=\"huge\""),
            (r#"<break pause="1s"/>"#, "attribute \"pause\""),
            (r#"<break time=1s/>"#, "malformed attribute"),
        ] {
            let e = split(&format!("Hi {text} there")).unwrap_err();
            assert!(e.message.contains(says), "{text}: {}", e.message);
            assert_eq!(e.tag, text);
        }
    }

    #[test]
    fn other_tags_are_found_and_comparisons_are_not() {
        assert_eq!(
            first_other_tag(r#"Wait <break time="1s"/> <emphasis>now</emphasis>."#),
            Some("<emphasis>")
        );
        assert_eq!(first_other_tag("<speak>Hi</speak>"), Some("<speak>"));
        assert_eq!(first_other_tag(r#"Only <break/> here"#), None);
        for plain in ["a < b and c > d", "I <3 you", "1<2>0", "no tags"] {
            assert_eq!(first_other_tag(plain), None, "{plain}");
            assert!(!has_tags(plain));
        }
    }
}
