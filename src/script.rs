//! The script file: JSON → a validated [`Script`].
//!
//! Format v1 (documented in the README):
//! `{"title"?, "author"?, "lexicon"? (object or path), "voice"?, "speed"? (0.5..=2), "fps"? (25), "size"? [w, h],
//!   "layout"? ("fill" | "fit" | "slides"), "segments": [{"text", "say"?, "pause_ms"? (300), "chapter"?,
//!   "voice"?, "speaker"?, "speed"?, "slide"? (a PNG or JPEG, relative to the script)}, ...]}`.
//! Validation is strict: unknown fields are refused with a "did you mean" hint, and every error
//! names the file, the JSON path (`segments[3].text`) and what to do, so a nightly batch fails on
//! the first bad script instead of rendering nonsense.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use crate::json::ScriptError;
pub(crate) use crate::json::{did_you_mean, join, kind, parse_json};
use crate::lexicon::Lexicon;

/// Scripts larger than this are refused before parsing: a ten-hour book is a few MB, and planning
/// holds every sentence's phonemes, so this bounds its memory (documented in the README).
pub const MAX_SCRIPT_BYTES: u64 = 16 << 20;
const MAX_TEXT_CHARS: usize = 200_000;
pub const DEFAULT_PAUSE_MS: u32 = 300;
pub const DEFAULT_FPS: u32 = 25;
/// Frames per second a script, `--fps` or a job spec may ask for: chunk audio is cut between
/// frames on exact sample positions, so any whole rate works; 120 covers high-frame-rate players.
pub const FPS: std::ops::RangeInclusive<i64> = 1..=120;
/// Longest side of the default output size, taken from the portrait.
pub const DEFAULT_MAX_SIDE: u32 = 1080;

#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub title: Option<String>,
    /// The book's author (MP4/M4B `artist` tag).
    pub author: Option<String>,
    /// Pronunciations (inline, or read from the file the field names, relative to the script).
    pub lexicon: Option<Lexicon>,
    pub voice: Option<String>,
    pub speed: f32,
    pub fps: u32,
    pub size: Option<(u32, u32)>,
    /// `"layout"`: how the portrait fills the frame (flags override it).
    pub layout: Option<Layout>,
    /// The book's cover (an EPUB's), embedded in outputs that take one; `--cover` replaces it.
    pub cover: Option<crate::cover::Cover>,
    pub segments: Vec<Segment>,
}

/// How the portrait fills the frame (`--layout`, a script's or a job spec's `"layout"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// The portrait covers the frame, cropped to the frame's shape; the face must stay in it.
    Fill,
    /// The portrait, framed as `fill` frames it at its own shape, sits whole inside the frame
    /// on a background (`--background`).
    Fit,
    /// The script's slides fill the frame, letterboxed; the speaker is a picture-in-picture in
    /// a corner (`--pip`, `--pip-size`).
    Slides,
}

impl Layout {
    /// The name in job specs, scripts, flags and cache keys.
    pub fn tag(self) -> &'static str {
        match self {
            Layout::Fill => "fill",
            Layout::Fit => "fit",
            Layout::Slides => "slides",
        }
    }

    /// The layout a name stands for (`fill`, `fit`, `slides`).
    pub fn from_tag(tag: &str) -> Option<Layout> {
        [Layout::Fill, Layout::Fit, Layout::Slides]
            .into_iter()
            .find(|l| l.tag() == tag)
    }

    /// What a bad `"layout"` value is told.
    pub const EXPECTED: &str = "must be \"fill\", \"fit\" or \"slides\"";
}

#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// What the subtitles show, and what is spoken unless `say` is given.
    pub text: String,
    /// What is spoken instead of `text`, when the printed form misleads a voice (a book's heading
    /// "I" marked as a Roman ordinal is spoken "One" and still shown "I").
    pub say: Option<String>,
    pub pause_ms: u32,
    pub chapter: Option<String>,
    /// A voice of its own instead of the render's (a name in the assets' `voices/`, or a path to
    /// an `.onnx`, relative to the script); checked against the voice files before any work.
    pub voice: Option<String>,
    /// The speaker of a multi-speaker voice (Piper's `sid`); 0 when not given.
    pub speaker: Option<u32>,
    /// This segment's pace instead of the script's `speed`.
    pub speed: Option<f32>,
    /// The slide shown from this segment on (`slides` layout).
    pub slide: Option<Slide>,
}

/// A slide a segment names: the file (relative paths already joined to the script's folder) and
/// where the script names it, for error messages (`segments[3].slide`, `line 12`).
#[derive(Debug, Clone, PartialEq)]
pub struct Slide {
    pub path: PathBuf,
    pub at: String,
}

impl Script {
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let fail = |message: String| ScriptError {
            file: path.to_path_buf(),
            at: String::new(),
            message,
        };
        let bytes = read_input(path, MAX_SCRIPT_BYTES).map_err(|e| fail(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            fail(format!(
                "is not UTF-8 text (invalid byte at offset {}); save it as UTF-8",
                e.utf8_error().valid_up_to()
            ))
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        Script::parse_in(&text, base).map_err(|mut e| {
            if e.file.as_os_str().is_empty() {
                e.file = path.to_path_buf();
            }
            e
        })
    }

    /// Parses script text; errors carry an empty `file` that [`Script::load`] fills in.
    pub fn parse(text: &str) -> Result<Script, ScriptError> {
        Script::parse_in(text, Path::new(""))
    }

    /// As [`Script::parse`], with a `lexicon` path read relative to `base`.
    fn parse_in(text: &str, base: &Path) -> Result<Script, ScriptError> {
        let value = parse_json(text, Path::new(""))?;
        let mut v = Validator {
            error: None,
            base: base.to_path_buf(),
        };
        let script = v.script(&value);
        match (script, v.error) {
            (Some(s), None) => Ok(s),
            (_, Some(e)) => Err(e),
            (None, None) => unreachable!("the validator returns None only with an error"),
        }
    }
}

/// Why an input file cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "is not a regular file (a FIFO, device or socket); save it to a file and give that path"
    )]
    NotRegular,
    #[error("is a directory; give the path of a file inside it")]
    Directory,
    #[error("is larger than {} MiB; split it into several files", .0 >> 20)]
    TooLarge(u64),
}

/// Reads a small input file whole: a regular file only (opened without blocking, so a FIFO is
/// refused instead of waiting for a writer) and at most `max` bytes (read with a limit, so a file
/// that grows, or lies about its size, cannot exhaust memory). Job specs use it too.
pub(crate) fn read_input(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(ReadError::Directory);
    }
    if !meta.is_file() {
        return Err(ReadError::NotRegular);
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge(max));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge(max));
    }
    Ok(bytes)
}

/// Walks the JSON value, remembering the first error.
struct Validator {
    error: Option<ScriptError>,
    /// Where a `lexicon` path is relative to.
    base: PathBuf,
}

const TOP_FIELDS: &[&str] = &[
    "title", "author", "lexicon", "voice", "speed", "fps", "size", "layout", "segments",
];
const SEGMENT_FIELDS: &[&str] = &[
    "text", "say", "pause_ms", "chapter", "voice", "speaker", "speed", "slide",
];
/// Speaker ids a segment may name; the voice's own `num_speakers` is checked when it loads.
const SPEAKERS: std::ops::RangeInclusive<u64> = 0..=65_535;

impl Validator {
    fn fail<T>(&mut self, at: &str, message: impl Into<String>) -> Option<T> {
        if self.error.is_none() {
            self.error = Some(ScriptError {
                file: PathBuf::new(),
                at: at.to_owned(),
                message: message.into(),
            });
        }
        None
    }

    fn object<'v>(
        &mut self,
        v: &'v Value,
        at: &str,
        allowed: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Some(obj) = v.as_object() else {
            return self.fail(at, format!("must be an object, found {}", kind(v)));
        };
        for key in obj.keys() {
            if !allowed.contains(&key.as_str()) {
                let field = join(at, key);
                let hint = did_you_mean(key, allowed)
                    .map(|s| format!("did you mean \"{s}\"?"))
                    .unwrap_or_else(|| format!("allowed fields: {}", allowed.join(", ")));
                return self.fail(&field, format!("unknown field; {hint}"));
            }
        }
        Some(obj)
    }

    fn string(&mut self, v: &Value, at: &str, max_chars: usize) -> Option<String> {
        let Some(s) = v.as_str() else {
            return self.fail(at, format!("must be a string, found {}", kind(v)));
        };
        if s.trim().is_empty() {
            return self.fail(at, "must not be empty; remove the field or give it text");
        }
        if s.chars().count() > max_chars {
            return self.fail(
                at,
                format!("is longer than {max_chars} characters; split it into several segments"),
            );
        }
        Some(s.to_owned())
    }

    /// A title or chapter name: it goes into the MP4's metadata, which holds no control characters.
    fn label(&mut self, v: &Value, at: &str) -> Option<String> {
        let s = self.string(v, at, 500)?;
        if let Some((i, c)) = s.chars().enumerate().find(|(_, c)| c.is_control()) {
            return self.fail(
                at,
                format!(
                    "contains the control character U+{:04X} at character {i}; MP4 metadata holds only printable text: remove it",
                    u32::from(c)
                ),
            );
        }
        Some(s)
    }

    fn integer(
        &mut self,
        v: &Value,
        at: &str,
        range: std::ops::RangeInclusive<u64>,
        what: &str,
    ) -> Option<u32> {
        match v.as_u64() {
            Some(n) if range.contains(&n) => Some(n as u32),
            _ => self.fail(
                at,
                format!(
                    "must be a whole number from {} to {} ({what}), found {v}",
                    range.start(),
                    range.end()
                ),
            ),
        }
    }

    fn script(&mut self, root: &Value) -> Option<Script> {
        let obj = self.object(root, "", TOP_FIELDS)?;
        let title = obj.get("title").map(|v| self.label(v, "title"));
        let author = obj.get("author").map(|v| self.label(v, "author"));
        let lexicon = obj.get("lexicon").map(|v| self.lexicon(v));
        let voice = obj.get("voice").map(|v| self.string(v, "voice", 4096));
        let speed = match obj.get("speed") {
            None => Some(1.0),
            Some(v) => self.speed(v, "speed"),
        };
        let fps = match obj.get("fps") {
            None => Some(DEFAULT_FPS),
            Some(v) => self.integer(
                v,
                "fps",
                *FPS.start() as u64..=*FPS.end() as u64,
                "frames per second; 25 is the default",
            ),
        };
        let size = obj.get("size").map(|v| self.size(v));
        let layout = match obj.get("layout") {
            None => Some(None),
            Some(v) => match v.as_str().and_then(Layout::from_tag) {
                Some(l) => Some(Some(l)),
                None => self.fail("layout", format!("{}, found {v}", Layout::EXPECTED)),
            },
        };
        let segments = match obj.get("segments") {
            None => self.fail("segments", "is missing; a script needs at least one segment, e.g. \"segments\": [{\"text\": \"Hello.\"}]"),
            Some(v) => self.segments(v),
        };
        Some(Script {
            title: title.map_or(Some(None), |t| t.map(Some))?,
            author: author.map_or(Some(None), |t| t.map(Some))?,
            lexicon: lexicon.map_or(Some(None), |l| l.map(Some))?,
            voice: voice.map_or(Some(None), |t| t.map(Some))?,
            speed: speed?,
            fps: fps?,
            size: size.map_or(Some(None), |s| s.map(Some))?,
            layout: layout?,
            cover: None,
            segments: segments?,
        })
    }

    fn speed(&mut self, v: &Value, at: &str) -> Option<f32> {
        match v.as_f64() {
            Some(s) if (0.5..=2.0).contains(&s) => Some(s as f32),
            _ => self.fail(
                at,
                format!(
                    "must be a number from 0.5 to 2.0 (1.0 is the voice's own pace), found {v}"
                ),
            ),
        }
    }

    /// Inline entries, or a path to a lexicon file (whose own errors name that file).
    fn lexicon(&mut self, v: &Value) -> Option<Lexicon> {
        let result = match v {
            Value::String(p) if !p.trim().is_empty() => Lexicon::load(&self.base.join(p)),
            _ => Lexicon::from_json(v, Path::new(""), "lexicon"),
        };
        match result {
            Ok(l) => Some(l),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }

    fn size(&mut self, v: &Value) -> Option<(u32, u32)> {
        let fix = "give [width, height] in pixels, both even, from 64 to 4096, e.g. [720, 720]";
        let Some([w, h]) = v.as_array().map(Vec::as_slice) else {
            return self.fail("size", format!("must be a two-number array; {fix}"));
        };
        let w = self.integer(w, "size[0]", 64..=4096, "pixels")?;
        let h = self.integer(h, "size[1]", 64..=4096, "pixels")?;
        if w % 2 != 0 || h % 2 != 0 {
            return self.fail(
                "size",
                format!("{w}x{h} has an odd side, which H.264 in yuv420p cannot encode; {fix}"),
            );
        }
        Some((w, h))
    }

    fn segments(&mut self, v: &Value) -> Option<Vec<Segment>> {
        let Some(items) = v.as_array() else {
            return self.fail(
                "segments",
                format!("must be an array of objects, found {}", kind(v)),
            );
        };
        if items.is_empty() {
            return self.fail("segments", "is empty; add at least one {\"text\": \"...\"}");
        }
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let at = format!("segments[{i}]");
            let obj = self.object(item, &at, SEGMENT_FIELDS)?;
            let text_at = format!("{at}.text");
            let text = match obj.get("text") {
                None => self.fail(
                    &text_at,
                    "is missing; every segment needs the text to speak",
                ),
                Some(t) => self.string(t, &text_at, MAX_TEXT_CHARS),
            }?;
            // The text becomes subtitles, where a BEL or ESC shows as garbage or drives a terminal.
            if let Some((i, c)) = text
                .chars()
                .enumerate()
                .find(|(_, c)| c.is_control() && !c.is_whitespace())
            {
                return self.fail(
                    &text_at,
                    format!(
                        "contains the control character U+{:04X} at character {i}; remove it (tabs and line breaks are fine)",
                        u32::from(c)
                    ),
                );
            }
            if !crate::text::is_speakable(&text) {
                return self.fail(&text_at, "has nothing a voice can say (no letters or digits); give it words or remove the segment");
            }
            let say_at = format!("{at}.say");
            let say = match obj.get("say") {
                None => None,
                Some(t) => Some(self.string(t, &say_at, MAX_TEXT_CHARS)?),
            };
            if say
                .as_deref()
                .is_some_and(|s| !crate::text::is_speakable(s))
            {
                return self.fail(&say_at, "has nothing a voice can say (no letters or digits); give it words or remove the field");
            }
            for (field, value) in [(&text_at, Some(&text)), (&say_at, say.as_ref())] {
                if let Some(e) = value.and_then(|v| crate::text::markup::split(v).err()) {
                    return self.fail(field, format!("the tag {} {}", e.tag, e.message));
                }
            }
            let pause_ms = match obj.get("pause_ms") {
                None => DEFAULT_PAUSE_MS,
                Some(p) => self.integer(
                    p,
                    &format!("{at}.pause_ms"),
                    0..=60_000,
                    "milliseconds of silence after the segment",
                )?,
            };
            let chapter = match obj.get("chapter") {
                None => None,
                Some(c) => Some(self.label(c, &format!("{at}.chapter"))?),
            };
            let voice = match obj.get("voice") {
                None => None,
                Some(v) => Some(self.string(v, &format!("{at}.voice"), 4096)?),
            };
            let speaker = match obj.get("speaker") {
                None => None,
                Some(v) => Some(self.integer(
                    v,
                    &format!("{at}.speaker"),
                    SPEAKERS,
                    "the speaker id of a multi-speaker voice",
                )?),
            };
            let speed = match obj.get("speed") {
                None => None,
                Some(v) => Some(self.speed(v, &format!("{at}.speed"))?),
            };
            let slide_at = format!("{at}.slide");
            let slide = match obj.get("slide") {
                None => None,
                Some(p) => {
                    let given = self.string(p, &slide_at, 4096)?;
                    Some(Slide {
                        path: self.base.join(given),
                        at: slide_at,
                    })
                }
            };
            out.push(Segment {
                text,
                say,
                pause_ms,
                chapter,
                voice,
                speaker,
                speed,
                slide,
            });
        }
        Some(out)
    }
}

impl Script {
    /// The script as JSON, in the format [`Script::parse`] reads (defaults left out); what
    /// `talker script convert` writes.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_owned(), v);
        };
        if let Some(t) = &self.title {
            put("title", t.as_str().into());
        }
        if let Some(a) = &self.author {
            put("author", a.as_str().into());
        }
        if let Some(l) = &self.lexicon {
            put("lexicon", l.to_json());
        }
        if let Some(v) = &self.voice {
            put("voice", v.as_str().into());
        }
        if self.speed != 1.0 {
            put("speed", f64::from(self.speed).into());
        }
        if self.fps != DEFAULT_FPS {
            put("fps", self.fps.into());
        }
        if let Some(layout) = self.layout {
            put("layout", layout.tag().into());
        }
        if let Some((w, h)) = self.size {
            put("size", serde_json::json!([w, h]));
        }
        let segments = self
            .segments
            .iter()
            .map(|s| {
                let mut o = Map::new();
                o.insert("text".into(), s.text.as_str().into());
                if let Some(say) = &s.say {
                    o.insert("say".into(), say.as_str().into());
                }
                if s.pause_ms != DEFAULT_PAUSE_MS {
                    o.insert("pause_ms".into(), s.pause_ms.into());
                }
                if let Some(c) = &s.chapter {
                    o.insert("chapter".into(), c.as_str().into());
                }
                if let Some(v) = &s.voice {
                    o.insert("voice".into(), v.as_str().into());
                }
                if let Some(n) = s.speaker {
                    o.insert("speaker".into(), n.into());
                }
                if let Some(speed) = s.speed {
                    o.insert("speed".into(), f64::from(speed).into());
                }
                if let Some(slide) = &s.slide {
                    // Absolute, so the converted script finds it wherever it is written.
                    let path = std::path::absolute(&slide.path).unwrap_or(slide.path.clone());
                    o.insert("slide".into(), path.to_string_lossy().into_owned().into());
                }
                Value::Object(o)
            })
            .collect();
        put("segments", Value::Array(segments));
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ScriptError {
        Script::parse(text).unwrap_err()
    }

    #[test]
    fn minimal_script_gets_defaults() {
        let s = Script::parse(r#"{"segments":[{"text":"Hello."}]}"#).unwrap();
        assert_eq!(s.fps, 25);
        assert_eq!(s.speed, 1.0);
        assert_eq!(s.segments[0].pause_ms, 300);
        assert_eq!(s.size, None);
    }

    /// A slide is read relative to the script, and named by its segment for messages.
    #[test]
    fn slides_are_relative_to_the_script() {
        let s = Script::parse_in(
            r#"{"layout": "slides", "segments": [{"text": "One."}, {"text": "Two.", "slide": "s/2.png"}]}"#,
            Path::new("talks"),
        )
        .unwrap();
        assert_eq!(s.layout, Some(Layout::Slides));
        assert_eq!(s.segments[0].slide, None);
        let slide = s.segments[1].slide.as_ref().unwrap();
        assert_eq!(
            (slide.path.as_path(), slide.at.as_str()),
            (Path::new("talks/s/2.png"), "segments[1].slide")
        );
        let e = err(r#"{"segments": [{"text": "One.", "slide": ""}]}"#);
        assert_eq!(e.at, "segments[0].slide");
        let e = err(r#"{"layout": "slide", "segments": [{"text": "One."}]}"#);
        assert!(e.message.contains("\"slides\""), "{e}");
        let json = s.to_json();
        let written = json["segments"][1]["slide"].as_str().unwrap();
        assert!(
            Path::new(written).is_absolute() && written.ends_with("talks/s/2.png"),
            "{written}"
        );
    }

    #[test]
    fn full_script_parses() {
        let s = Script::parse(
            r#"{"title":"T","voice":"v","speed":1.25,"fps":30,"size":[640,360],
                "segments":[{"text":"One.","pause_ms":0,"chapter":"Intro"},{"text":"Two."}]}"#,
        )
        .unwrap();
        assert_eq!(s.size, Some((640, 360)));
        assert_eq!(s.segments[0].chapter.as_deref(), Some("Intro"));
        assert_eq!(s.segments.len(), 2);
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let e = err("{\n  \"segments\": [\n    {\"text\": \"a\",}\n  ]\n}");
        assert!(e.at.starts_with("line 3"), "{e}");
        assert!(e.message.contains("invalid JSON"));
    }

    #[test]
    fn unknown_fields_get_a_hint() {
        let e = err(r#"{"segments":[{"txt":"hi"}]}"#);
        assert_eq!(e.at, "segments[0].txt");
        assert!(e.message.contains("did you mean \"text\""), "{e}");
        let e = err(r#"{"segments":[{"text":"hi"}],"titel":"x"}"#);
        assert!(e.message.contains("did you mean \"title\""), "{e}");
        let e = err(r#"{"segments":[{"text":"hi"}],"zzzz":1}"#);
        assert!(e.message.contains("allowed fields"), "{e}");
    }

    #[test]
    fn each_field_is_checked() {
        let cases = [
            (r#"[]"#, "", "must be an object"),
            (r#"{}"#, "segments", "is missing"),
            (r#"{"segments":[]}"#, "segments", "is empty"),
            (r#"{"segments":{}}"#, "segments", "must be an array"),
            (r#"{"segments":[1]}"#, "segments[0]", "must be an object"),
            (r#"{"segments":[{}]}"#, "segments[0].text", "is missing"),
            (
                r#"{"segments":[{"text":""}]}"#,
                "segments[0].text",
                "must not be empty",
            ),
            (
                r#"{"segments":[{"text":5}]}"#,
                "segments[0].text",
                "must be a string",
            ),
            (
                r#"{"segments":[{"text":"..."}]}"#,
                "segments[0].text",
                "nothing a voice can say",
            ),
            (
                r#"{"segments":[{"text":"a","pause_ms":-1}]}"#,
                "segments[0].pause_ms",
                "whole number",
            ),
            (
                r#"{"segments":[{"text":"a","pause_ms":1.5}]}"#,
                "segments[0].pause_ms",
                "whole number",
            ),
            (
                r#"{"segments":[{"text":"a","chapter":""}]}"#,
                "segments[0].chapter",
                "must not be empty",
            ),
            (
                r#"{"segments":[{"text":"a"}],"speed":3}"#,
                "speed",
                "0.5 to 2.0",
            ),
            (
                r#"{"segments":[{"text":"a"}],"speed":"fast"}"#,
                "speed",
                "0.5 to 2.0",
            ),
            (r#"{"segments":[{"text":"a"}],"fps":0}"#, "fps", "1 to 120"),
            (
                r#"{"segments":[{"text":"a"}],"size":[641,360]}"#,
                "size",
                "odd side",
            ),
            (
                r#"{"segments":[{"text":"a"}],"size":[640]}"#,
                "size",
                "two-number array",
            ),
            (
                r#"{"segments":[{"text":"a"}],"size":[32,32]}"#,
                "size[0]",
                "64 to 4096",
            ),
            (
                r#"{"segments":[{"text":"a"}],"title":7}"#,
                "title",
                "must be a string",
            ),
            (
                r#"{"segments":[{"text":"a"}],"voice":" "}"#,
                "voice",
                "must not be empty",
            ),
            (
                r#"{"segments":[{"text":"I","say":"..."}]}"#,
                "segments[0].say",
                "nothing a voice can say",
            ),
            (
                r#"{"segments":[{"text":"a"},{"text":"b","voice":5}]}"#,
                "segments[1].voice",
                "must be a string",
            ),
            (
                r#"{"segments":[{"text":"a","voice":""}]}"#,
                "segments[0].voice",
                "must not be empty",
            ),
            (
                r#"{"segments":[{"text":"a","speaker":-1}]}"#,
                "segments[0].speaker",
                "whole number from 0 to 65535",
            ),
            (
                r#"{"segments":[{"text":"a","speaker":"two"}]}"#,
                "segments[0].speaker",
                "whole number",
            ),
            (
                r#"{"segments":[{"text":"a","speaker":1.5}]}"#,
                "segments[0].speaker",
                "whole number",
            ),
            (
                r#"{"segments":[{"text":"a"},{"text":"b","speed":0.4}]}"#,
                "segments[1].speed",
                "0.5 to 2.0",
            ),
            (
                r#"{"segments":[{"text":"a","speed":"slow"}]}"#,
                "segments[0].speed",
                "0.5 to 2.0",
            ),
            (
                r#"{"segments":[{"text":"a","speeed":1}]}"#,
                "segments[0].speeed",
                "did you mean \"speed\"",
            ),
        ];
        for (text, at, msg) in cases {
            let e = err(text);
            assert_eq!(e.at, at, "{text}: {e}");
            assert!(e.message.contains(msg), "{text}: {e}");
        }
    }

    #[test]
    fn segments_may_name_a_voice_speaker_and_speed() {
        let s = Script::parse(
            r#"{"speed":1.25,"segments":[{"text":"a"},
                {"text":"b","voice":"voices/other.onnx","speaker":3,"speed":0.7}]}"#,
        )
        .unwrap();
        let (plain, own) = (&s.segments[0], &s.segments[1]);
        assert_eq!(
            (&plain.voice, plain.speaker, plain.speed),
            (&None, None, None)
        );
        assert_eq!(own.voice.as_deref(), Some("voices/other.onnx"));
        assert_eq!((own.speaker, own.speed), (Some(3), Some(0.7)));
        assert_eq!(s.speed, 1.25, "the script's pace stays for the others");
    }

    #[test]
    fn to_json_round_trips() {
        let s = Script::parse(
            r#"{"title":"T","author":"A","lexicon":{"Nguyen":"win"},"speed":1.5,"fps":30,"size":[64,64],
                "segments":[{"text":"One.","pause_ms":0,"chapter":"Intro"},{"text":"II","say":"Two"},
                {"text":"Three.","voice":"other","speaker":2,"speed":0.75}]}"#,
        )
        .unwrap();
        assert_eq!(s.segments[1].say.as_deref(), Some("Two"));
        assert_eq!(s.segments[2].speaker, Some(2));
        let again = Script::parse(&s.to_json().to_string()).unwrap();
        assert_eq!(again, s);
        assert_eq!(s.author.as_deref(), Some("A"));
    }

    #[test]
    fn lexicon_paths_are_relative_to_the_script() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("names.json"), r#"{"Nguyen": "win"}"#).unwrap();
        let script = dir.path().join("s.json");
        std::fs::write(
            &script,
            r#"{"lexicon":"names.json","segments":[{"text":"Hi."}]}"#,
        )
        .unwrap();
        let s = Script::load(&script).unwrap();
        assert_eq!(s.lexicon.unwrap().entries().len(), 1);
        std::fs::write(
            &script,
            r#"{"lexicon":"nope.json","segments":[{"text":"Hi."}]}"#,
        )
        .unwrap();
        let e = Script::load(&script).unwrap_err();
        assert!(e.file.ends_with("nope.json"), "{e}");
        std::fs::write(
            &script,
            r#"{"lexicon":{"x":1},"segments":[{"text":"Hi."}]}"#,
        )
        .unwrap();
        let e = Script::load(&script).unwrap_err();
        assert_eq!(e.at, "lexicon[\"x\"]");
        assert_eq!(e.file, script);
    }

    #[test]
    fn later_segments_are_named_by_index() {
        let e = err(r#"{"segments":[{"text":"fine"},{"text":"fine"},{"text":"   "}]}"#);
        assert_eq!(e.at, "segments[2].text");
    }

    #[test]
    fn too_long_text_is_refused() {
        let long = "a".repeat(MAX_TEXT_CHARS + 1);
        let e = err(&format!(r#"{{"segments":[{{"text":"{long}"}}]}}"#));
        assert!(e.message.contains("split it"), "{e}");
    }

    #[test]
    fn load_names_the_file() {
        let dir = std::env::temp_dir().join(format!("talker-script-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"segments":[{"text":"x","pause":1}]}"#).unwrap();
        let e = Script::load(&bad).unwrap_err();
        assert!(e.to_string().starts_with(&bad.display().to_string()), "{e}");
        assert!(e.to_string().contains("did you mean \"pause_ms\""), "{e}");
        let latin1 = dir.join("latin1.json");
        std::fs::write(&latin1, b"{\"segments\":[{\"text\":\"caf\xe9\"}]}").unwrap();
        assert!(
            Script::load(&latin1)
                .unwrap_err()
                .message
                .contains("not UTF-8")
        );
        assert!(
            Script::load(&dir)
                .unwrap_err()
                .message
                .contains("is a directory")
        );
        assert!(
            Script::load(&dir.join("missing.json"))
                .unwrap_err()
                .message
                .contains("cannot read")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
