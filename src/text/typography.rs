//! Character-level clean-up before tokenising.
//!
//! Input: any UTF-8 text. Output: text in Unicode NFKC form (fullwidth letters, ligatures, "℃", "…" and
//! non-breaking spaces become their plain forms) with typography made plain for the voice:
//! curly quotes → `'`/`"`, em dashes and `--` → a comma pause, en dashes → `-` between numbers (a range)
//! and a comma pause elsewhere, Unicode hyphens and the minus sign → `-`, vulgar fractions → " 1/2",
//! zero-width, bidi and soft-hyphen characters, emoji and dingbats removed, Arabic-Indic and Devanagari
//! digits → ASCII digits, `\r\n`/`\r` → `\n`, other control characters → space.
//! Invariants: never panics; introduces no character that is not already in the input except ASCII
//! punctuation, digits, spaces and the words of the fraction/number-sign table; keeps `²`/`³` (units read
//! them) which NFKC would fold into digits.

use unicode_normalization::UnicodeNormalization;

/// Characters deleted outright: they are invisible and espeak would at best ignore them.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
            // Trade and registered marks: narrators don't read them, espeak would say "trade mark".
            | '\u{2122}'
            | '\u{00AE}'
            // Emoji, pictographs and dingbats with their variation selectors and tags: espeak would say
            // "grinning face" or "heart suit".
            | '\u{2600}'..='\u{27BF}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{1F000}'..='\u{1FAFF}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// Replacements applied before NFKC, for characters that NFKC would turn into something misleading
/// ("3½" would become "31⁄2").
fn pre_nfkc(c: char) -> Option<&'static str> {
    Some(match c {
        '½' => "1/2",
        '⅓' => "1/3",
        '⅔' => "2/3",
        '¼' => "1/4",
        '¾' => "3/4",
        '⅕' => "1/5",
        '⅖' => "2/5",
        '⅗' => "3/5",
        '⅘' => "4/5",
        '⅙' => "1/6",
        '⅚' => "5/6",
        '⅛' => "1/8",
        '⅜' => "3/8",
        '⅝' => "5/8",
        '⅞' => "7/8",
        '№' => "number ",
        _ => return None,
    })
}

/// Arabic-Indic and Devanagari digits, which espeak's English voice skips silently, as ASCII digits
/// (NFKC already folds fullwidth and circled ones).
fn native_digit(c: char) -> Option<char> {
    let zero = match c {
        '\u{0660}'..='\u{0669}' => 0x0660,
        '\u{06F0}'..='\u{06F9}' => 0x06F0,
        '\u{0966}'..='\u{096F}' => 0x0966,
        _ => return None,
    };
    char::from_digit(u32::from(c) - zero, 10)
}

/// Characters NFKC must leave alone because a later stage reads them (`m²` → "square meters").
fn keep_from_nfkc(c: char) -> bool {
    matches!(c, '²' | '³')
}

/// Cleans `text` as described in the module header.
pub fn clean(text: &str) -> String {
    let staged = stage_one(text);
    let folded = fold_compat(&staged);
    stage_two(&folded)
}

/// Invisible characters, line ends, fractions.
fn stage_one(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if is_invisible(c) {
            continue;
        }
        if c == '\r' {
            out.push('\n');
            if chars.peek() == Some(&'\n') {
                chars.next();
            }
            continue;
        }
        if let Some(d) = native_digit(c) {
            out.push(d);
            continue;
        }
        if let Some(rep) = pre_nfkc(c) {
            if rep.starts_with(|d: char| d.is_ascii_digit())
                && out.ends_with(|d: char| d.is_ascii_digit())
            {
                out.push(' ');
            }
            out.push_str(rep);
            continue;
        }
        out.push(c);
    }
    out
}

/// NFKC over everything but the characters in [`keep_from_nfkc`]; ASCII text is returned as is.
fn fold_compat(text: &str) -> String {
    if text.is_ascii() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut run_start = 0;
    for (i, c) in text.char_indices() {
        if keep_from_nfkc(c) {
            out.extend(text[run_start..i].nfkc());
            out.push(c);
            run_start = i + c.len_utf8();
        }
    }
    out.extend(text[run_start..].nfkc());
    out
}

/// Quotes, dashes, hyphens, controls.
fn stage_two(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => out.push('\''),
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '«' | '»' => {
                out.push('"')
            }
            '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2212}' | '\u{FE63}' | '\u{FF0D}' => {
                out.push('-')
            }
            '\u{2044}' | '\u{2215}' => out.push('/'),
            '\u{2013}' if joins_numbers(&chars, i) => {
                trim_trailing_spaces(&mut out);
                out.push('-');
                i = skip_spaces(&chars, i + 1);
                continue;
            }
            '\u{2013}' | '\u{2014}' | '\u{2015}' | '\u{2E3A}' | '\u{2E3B}' => {
                i = pause(&mut out, &chars, i + 1);
                continue;
            }
            '-' if chars.get(i + 1) == Some(&'-') => {
                let mut j = i;
                while chars.get(j) == Some(&'-') {
                    j += 1;
                }
                i = pause(&mut out, &chars, j);
                continue;
            }
            '\n' | '\t' | ' ' => out.push(c),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// True if the dash at `i` sits between two numbers ("1990–1995", "3 – 5", "$5–$10").
fn joins_numbers(chars: &[char], i: usize) -> bool {
    let before = chars[..i].iter().rev().find(|c| **c != ' ');
    let after = chars[i + 1..].iter().find(|c| **c != ' ');
    matches!(before, Some(c) if c.is_ascii_digit() || *c == '%')
        && matches!(after, Some(c) if c.is_ascii_digit() || matches!(c, '$' | '£' | '€' | '¥'))
}

fn trim_trailing_spaces(out: &mut String) {
    let len = out.trim_end_matches(' ').len();
    out.truncate(len);
}

fn skip_spaces(chars: &[char], mut i: usize) -> usize {
    while chars.get(i) == Some(&' ') {
        i += 1;
    }
    i
}

/// Writes a dash as a comma pause ("word—word" → "word, word") and returns the index after the spaces
/// that followed it. No comma at the start of a line or after other punctuation.
fn pause(out: &mut String, chars: &[char], next: usize) -> usize {
    trim_trailing_spaces(out);
    let after = skip_spaces(chars, next);
    let continues =
        after < chars.len() && !matches!(chars[after], '\n' | '.' | ',' | ';' | ':' | '!' | '?');
    match out.chars().last() {
        None | Some('\n') => return after,
        Some(c) if continues && (c.is_alphanumeric() || matches!(c, '"' | '\'' | ')' | '%')) => {
            out.push(',')
        }
        Some(_) => {}
    }
    if continues {
        out.push(' ');
    }
    after
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn typography_table() {
        let cases = [
            ("“Hello,” she said.", "\"Hello,\" she said."),
            ("It’s ‘fine’", "It's 'fine'"),
            ("wait—what", "wait, what"),
            ("wait — what", "wait, what"),
            ("wait -- what", "wait, what"),
            ("wait---what", "wait, what"),
            ("—Yes, he said.", "Yes, he said."),
            ("He stopped—.", "He stopped."),
            ("pages 3–5", "pages 3-5"),
            ("1990 – 1995", "1990-1995"),
            ("London – Paris", "London, Paris"),
            ("a\u{00A0}b", "a b"),
            ("zero\u{200B}width\u{FEFF}", "zerowidth"),
            ("soft\u{00AD}hyphen", "softhyphen"),
            ("Wait…", "Wait..."),
            ("ﬁne", "fine"),
            ("ＡＢＣ１２３", "ABC123"),
            ("25℃", "25°C"),
            ("3½ cups", "3 1/2 cups"),
            ("¾ cup", "3/4 cup"),
            ("5 m²", "5 m²"),
            ("−5", "-5"),
            ("line\r\nend\rx", "line\nend\nx"),
            ("a\u{0007}b", "a b"),
            ("Apple™ and Foo®", "Apple and Foo"),
            ("№ 5", "number  5"),
            ("e\u{0301}", "é"),
            ("hi 😀 there ❤\u{FE0F}!", "hi  there !"),
            ("👍🏽", ""),
            ("\u{0663}\u{0664}", "34"),
        ];
        for (input, want) in cases {
            assert_eq!(clean(input), want, "clean({input:?})");
        }
    }
}
