//! Render settings: one type for what the `render` flags, the job-spec fields and the render share.
//!
//! ripgrep's pattern: raw input (flags through clap, a spec through [`RenderSettings::from_spec`])
//! becomes a checked [`RenderSettings`], and the render takes only that. A field added to
//! [`RenderSettings`] (or [`LookSettings`], or the book's `BookOptions`) is at once a
//! `talker render` flag, a job-spec field (its serde name; `from_spec` must read it, or its struct
//! literal does not compile, and [`RenderSettings::SPEC_FIELDS`] must list it, or a unit test
//! fails; the binary's tests fail on a `render` flag that no spec field carries) and part of a
//! job's content hash (which covers the serialised job); both readers check it against the same
//! limits below. Fields added after the first release are left out of the serialised job while
//! they hold their default, so jobs already in a queue keep their hashes. What changes frames
//! must also go into the chunk cache key (`look::prepare`), which covers the look rather than the
//! job.
//!
//! [`RenderOptions`] is what one render needs: the settings plus paths, assets, cache and the
//! per-process speech setup.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::assets::Assets;
use crate::book::{BookOptions, MAX_CHAPTER_DEPTH, Matter, NotesMode};
use crate::cache::CacheLocation;
use crate::media::loudness::Standard;
use crate::media::{AudioFormat, SubtitleFormat, X264_PRESETS};
use crate::pool::ChunkPool;
pub use crate::script::Layout;
use crate::script::{did_you_mean, kind};
pub use crate::slides::{Corner, PipSize};
use crate::tts::select::SpeechSetup;

/// Frames per second, for `--fps` and a spec's `fps`.
pub const FPS: RangeInclusive<i64> = crate::script::FPS;
/// x264's constant rate factor.
pub const CRF: RangeInclusive<i64> = 0..=51;
/// Each side of the output, in pixels (both even: H.264 yuv420p).
const SIDE: RangeInclusive<i64> = 64..=4096;
const DEFAULT_CRF: u8 = 20;
const DEFAULT_PRESET: &str = "veryfast";

/// `--framing`: what the frame shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Framing {
    /// The whole portrait, scaled to cover the output size.
    #[default]
    Full,
    /// Head and shoulders around the face, upscaled.
    Head,
}

impl Framing {
    /// The name in job specs, flags and cache keys.
    pub fn tag(self) -> &'static str {
        match self {
            Framing::Full => "full",
            Framing::Head => "head",
        }
    }
}

/// `--background`: what a `fit` frame shows around the portrait.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Background {
    /// The portrait itself scaled to cover the frame, blurred and darkened (as phone video apps do).
    #[default]
    Blur,
    /// One colour, `#RRGGBB`.
    Color([u8; 3]),
    /// A PNG or JPEG, scaled to cover the frame (an input: never overwritten, in the cache keys).
    Image(PathBuf),
}

impl Background {
    fn is_blur(&self) -> bool {
        *self == Background::Blur
    }
}

impl std::str::FromStr for Background {
    type Err = String;

    fn from_str(s: &str) -> Result<Background, String> {
        let s = s.trim();
        if s == "blur" {
            return Ok(Background::Blur);
        }
        if let Some(hex) = s.strip_prefix('#') {
            let digits: Option<Vec<u8>> = (hex.len() == 6 && hex.is_ascii())
                .then(|| {
                    (0..3)
                        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                        .collect()
                })
                .flatten();
            return match digits.as_deref() {
                Some(&[r, g, b]) => Ok(Background::Color([r, g, b])),
                _ => Err(format!(
                    "\"{s}\" is not a colour; write six hex digits, such as #1e2a3c"
                )),
            };
        }
        if s.is_empty() {
            return Err("is empty; give blur, a colour such as #1e2a3c, or an image file".into());
        }
        Ok(Background::Image(PathBuf::from(s)))
    }
}

impl From<Background> for String {
    fn from(b: Background) -> String {
        match b {
            Background::Blur => "blur".to_owned(),
            Background::Color([r, g, b]) => format!("#{r:02x}{g:02x}{b:02x}"),
            Background::Image(path) => path.to_string_lossy().into_owned(),
        }
    }
}

impl TryFrom<String> for Background {
    type Error = String;

    fn try_from(s: String) -> Result<Background, String> {
        s.parse()
    }
}

impl std::fmt::Display for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from(self.clone()))
    }
}

/// What changes the picture apart from the encoder: shared by `render` and `preview`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct LookSettings {
    /// Output size WIDTHxHEIGHT, both even [default: the script's size, else 1280x720 for slides, else the portrait's, at most 1080].
    #[cfg_attr(feature = "cli", arg(long, value_name = "WxH", value_parser = parse_wxh))]
    pub size: Option<(u32, u32)>,
    /// Frames per second [default: the script's fps, else 25].
    #[cfg_attr(feature = "cli", arg(long, value_parser = clap::value_parser!(u32).range(FPS)))]
    pub fps: Option<u32>,
    /// What the frame shows.
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = Framing::Full))]
    pub framing: Framing,
    /// How the portrait fills the frame [default: the script's, else slides when the script names slides, else fill, or fit when the frame's shape is far from the portrait's (a 16:9 frame from a square or upright portrait)].
    #[cfg_attr(feature = "cli", arg(long, value_enum))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<Layout>,
    /// Around a fit portrait: blur (the portrait itself, blurred and darkened), a colour #RRGGBB, or a PNG/JPEG image scaled to cover the frame; around a letterboxed slide: the colour or image (black for blur).
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "blur|#RRGGBB|IMAGE", default_value = "blur")
    )]
    #[serde(default, skip_serializing_if = "Background::is_blur")]
    pub background: Background,
    /// Where the speaker sits on a slide (`--layout slides`).
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = Corner::BottomRight))]
    #[serde(default, skip_serializing_if = "Corner::is_default")]
    pub pip: Corner,
    /// The speaker's height on a slide, as a fraction of the frame's height (0.15 to 0.5).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FRACTION", default_value_t = PipSize::default()))]
    #[serde(default, skip_serializing_if = "PipSize::is_default")]
    pub pip_size: PipSize,
    /// No idle head motion (blinks stay).
    #[cfg_attr(feature = "cli", arg(long))]
    pub still: bool,
    /// Seed for blinks and head motion; the same seed renders the same video.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0))]
    pub seed: u64,
}

/// Everything about a render's output that a job spec may set. Serialised flat, in this order:
/// the job's content hash depends on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct RenderSettings {
    /// Voice: a name in the assets' voices/ folder or a path to a Piper .onnx [default: the script's, else en_US-joe-medium]; a script segment that names its own voice keeps it.
    #[cfg_attr(feature = "cli", arg(long))]
    pub voice: Option<String>,
    #[cfg_attr(feature = "cli", command(flatten))]
    #[serde(flatten)]
    pub look: LookSettings,
    /// x264 constant rate factor: lower is better and larger.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = DEFAULT_CRF, value_parser = clap::value_parser!(u8).range(CRF)))]
    pub crf: u8,
    /// x264 preset: slower ones make smaller files at equal quality.
    #[cfg_attr(feature = "cli", arg(long, default_value = DEFAULT_PRESET, value_parser = clap::builder::PossibleValuesParser::new(X264_PRESETS)))]
    pub preset: String,
    /// Write this kind whatever the output's extension.
    #[cfg_attr(feature = "cli", arg(long, value_enum))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<Format>,
    /// One file per chapter: -o names a directory (created if missing) that receives
    /// "NN - Title.ext" for each chapter, each with its track number; the kind comes from
    /// --format, which is then required.
    #[cfg_attr(feature = "cli", arg(long, value_enum, requires = "format"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<Split>,
    /// Also write subtitles next to the output (book.m4b → book.srt), one cue per sentence.
    #[cfg_attr(feature = "cli", arg(long, value_enum))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtitles: Option<SubtitleFormat>,
    /// Bring the whole book to a loudness standard: measured over all of it (ITU BS.1770), one
    /// gain, a peak limiter [default: acx for audio-only outputs, off for MP4 video, which takes
    /// no other value].
    #[cfg_attr(feature = "cli", arg(long, value_enum))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loudness: Option<Loudness>,
    /// Pronunciation lexicon (JSON: {"Nguyen": "win", "Siobhan": {"ipa": "ʃɪvˈɔːn"}}), applied
    /// after the script's own; repeat for several, later ones winning.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lexicon: Vec<PathBuf>,
    /// Cover art (JPEG or PNG, at most 4096 px a side and 10 MiB) embedded in MP4, M4B, M4A and
    /// MP3 [default: the EPUB's cover image, if it has one]; WAV takes none.
    #[cfg_attr(feature = "cli", arg(long, value_name = "IMAGE"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cover: Option<PathBuf>,
    #[cfg_attr(feature = "cli", command(flatten))]
    #[serde(flatten)]
    pub book: BookOptions,
    /// Turn off the voice's sampling noise: the same text always sounds exactly the same.
    #[cfg_attr(feature = "cli", arg(long))]
    #[serde(default, skip_serializing_if = "is_false")]
    pub deterministic: bool,
}

fn is_false(b: &bool) -> bool {
    !b
}

/// `--format`: what `-o` writes, when its extension should not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Talking-portrait video (H.264 + AAC, subtitles, chapters).
    Mp4,
    /// Audiobook: AAC with chapters, title and author; no portrait needed.
    M4b,
    /// AAC with chapters, title and author; no portrait needed.
    M4a,
    /// 16-bit PCM at the voice's sample rate; no portrait needed.
    Wav,
    /// MP3 (LAME, constant bit rate, 44.1 kHz mono) with ID3 title, author, album and chapters.
    Mp3,
}

/// `--split`: how the output is cut into files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// One file per chapter of the book, in the output directory.
    Chapters,
}

impl Split {
    /// The names flags and specs take.
    pub const NAMES: &[&str] = &["chapters"];
}

impl Format {
    /// The names flags and specs take, in declaration order.
    pub const NAMES: &[&str] = crate::media::OUTPUT_EXTENSIONS;

    /// The extension of the files written in this format (its name).
    pub fn extension(self) -> &'static str {
        match self {
            Format::Mp4 => "mp4",
            Format::M4b => "m4b",
            Format::M4a => "m4a",
            Format::Wav => "wav",
            Format::Mp3 => "mp3",
        }
    }

    pub fn kind(self) -> OutputKind {
        match self {
            Format::Mp4 => OutputKind::Mp4,
            Format::M4b => OutputKind::Audio(AudioFormat::M4b),
            Format::M4a => OutputKind::Audio(AudioFormat::M4a),
            Format::Wav => OutputKind::Audio(AudioFormat::Wav),
            Format::Mp3 => OutputKind::Audio(AudioFormat::Mp3),
        }
    }
}

impl Default for RenderSettings {
    fn default() -> RenderSettings {
        RenderSettings {
            voice: None,
            look: LookSettings::default(),
            crf: DEFAULT_CRF,
            preset: DEFAULT_PRESET.to_owned(),
            format: None,
            split: None,
            subtitles: None,
            loudness: None,
            lexicon: Vec::new(),
            cover: None,
            book: BookOptions::default(),
            deterministic: false,
        }
    }
}

/// A field that cannot be used: (where, what is wrong and how to fix it).
pub(crate) type Fail = (String, String);

pub(crate) fn fail<T>(at: &str, message: impl Into<String>) -> Result<T, Fail> {
    Err((at.to_owned(), message.into()))
}

impl RenderSettings {
    /// The job-spec fields these settings read, in the order errors list them.
    pub const SPEC_FIELDS: &[&str] = &[
        "voice",
        "size",
        "fps",
        "framing",
        "layout",
        "background",
        "pip",
        "pip_size",
        "still",
        "seed",
        "crf",
        "preset",
        "format",
        "split",
        "subtitles",
        "loudness",
        "lexicon",
        "cover",
        "matter",
        "notes",
        "chapter_depth",
        "chapters",
        "deterministic",
    ];

    /// What `output` is written as: `format` where given, else by its extension.
    pub fn output_kind(&self, output: &Path) -> OutputKind {
        self.format
            .map_or_else(|| OutputKind::of(output), Format::kind)
    }

    /// The subtitle sidecar beside `output` (`book.m4b` → `book.srt`), when asked for. A split
    /// output is a directory: each of its files has its own (see [`crate::split`]).
    pub fn sidecar(&self, output: &Path) -> Option<PathBuf> {
        if self.split.is_some() {
            return None;
        }
        self.subtitles.map(|f| output.with_extension(f.extension()))
    }

    /// What only the output's kind decides: a loudness standard on a video is refused, with the
    /// message `render` gives for it.
    pub fn check_output(&self, output: &Path) -> Result<(), String> {
        if self.output_kind(output) != OutputKind::Mp4 {
            return Ok(());
        }
        match Loudness::resolve(self.loudness, OutputKind::Mp4) {
            Some(standard) => Err(format!(
                "--loudness {} is for audio-only outputs (.m4b, .m4a, .mp3, .wav), not the video {}; leave it off (the default for MP4) or render -o book.m4b",
                standard.name(),
                output.display()
            )),
            None => Ok(()),
        }
    }

    /// Reads and checks the settings of a job spec's JSON object; absent fields take the same
    /// defaults as the flags. Unknown fields are the caller's to refuse.
    pub(crate) fn from_spec(obj: &Map<String, Value>) -> Result<RenderSettings, Fail> {
        let voice = obj.get("voice").map(|v| string(v, "voice")).transpose()?;
        let crf = obj
            .get("crf")
            .map(|v| integer(v, "crf", CRF, "x264 quality; lower is better").map(|n| n as u8))
            .transpose()?
            .unwrap_or(DEFAULT_CRF);
        let preset = match obj.get("preset") {
            None => DEFAULT_PRESET.to_owned(),
            Some(v) => {
                let p = string(v, "preset")?;
                if !X264_PRESETS.contains(&p.as_str()) {
                    return fail(
                        "preset",
                        format!(
                            "{p:?} is not an x264 preset; use one of {}",
                            X264_PRESETS.join(", ")
                        ),
                    );
                }
                p
            }
        };
        let cover = obj
            .get("cover")
            .map(|v| path(v, "cover").map(PathBuf::from))
            .transpose()?;
        Ok(RenderSettings {
            voice,
            look: look_from_spec(obj)?,
            crf,
            preset,
            format: choice(obj, "format", Format::NAMES)?,
            split: choice(obj, "split", Split::NAMES)?,
            subtitles: choice(obj, "subtitles", SubtitleFormat::NAMES)?,
            loudness: choice(obj, "loudness", Loudness::NAMES)?,
            lexicon: lexicon_from_spec(obj)?,
            cover,
            book: book_from_spec(obj)?,
            deterministic: flag(obj, "deterministic")?,
        })
    }
}

/// A spec's `true`/`false` field, `false` when absent.
fn flag(obj: &Map<String, Value>, at: &str) -> Result<bool, Fail> {
    match obj.get(at) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => fail(at, format!("must be true or false, found {}", kind(v))),
    }
}

/// The look fields of a job spec (`size` to `seed`).
fn look_from_spec(obj: &Map<String, Value>) -> Result<LookSettings, Fail> {
    let size = obj.get("size").map(size).transpose()?;
    let fps = obj
        .get("fps")
        .map(|v| integer(v, "fps", FPS, "frames per second").map(|n| n as u32))
        .transpose()?;
    let framing = match obj.get("framing") {
        None => Framing::Full,
        Some(v) => match v.as_str() {
            Some("full") => Framing::Full,
            Some("head") => Framing::Head,
            _ => {
                return fail(
                    "framing",
                    format!("must be \"full\" or \"head\", found {v}"),
                );
            }
        },
    };
    let layout = match obj.get("layout") {
        None => None,
        Some(v) => match v.as_str().and_then(Layout::from_tag) {
            Some(layout) => Some(layout),
            None => return fail("layout", format!("{}, found {v}", Layout::EXPECTED)),
        },
    };
    let background = match obj.get("background") {
        None => Background::Blur,
        Some(v) => match string(v, "background")?.parse() {
            Ok(b) => b,
            Err(e) => return fail("background", e),
        },
    };
    let pip = choice(obj, "pip", Corner::NAMES)?.unwrap_or_default();
    let pip_size = match obj.get("pip_size") {
        None => PipSize::default(),
        Some(v) => match v
            .as_f64()
            .ok_or(format!("must be a number, found {}", kind(v)))
        {
            Ok(f) => PipSize::try_from(f).or_else(|e| fail("pip_size", e))?,
            Err(e) => return fail("pip_size", e),
        },
    };
    let still = flag(obj, "still")?;
    let seed = match obj.get("seed") {
        None => 0,
        Some(v) => match v.as_u64() {
            Some(n) => n,
            None => return fail("seed", format!("must be a whole number ≥ 0, found {v}")),
        },
    };
    Ok(LookSettings {
        size,
        fps,
        framing,
        layout,
        background,
        pip,
        pip_size,
        still,
        seed,
    })
}

/// A job spec's `lexicon`: one file name or an array of them.
fn lexicon_from_spec(obj: &Map<String, Value>) -> Result<Vec<PathBuf>, Fail> {
    Ok(match obj.get("lexicon") {
        None => Vec::new(),
        Some(Value::String(_)) => vec![PathBuf::from(path(&obj["lexicon"], "lexicon")?)],
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| path(v, &format!("lexicon[{i}]")).map(PathBuf::from))
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return fail(
                "lexicon",
                format!(
                    "must be a file name or an array of them (JSON lexicons, relative to this spec file), found {}",
                    kind(v)
                ),
            );
        }
    })
}

/// A job spec's book options (`matter` to `chapters`).
fn book_from_spec(obj: &Map<String, Value>) -> Result<BookOptions, Fail> {
    let defaults = BookOptions::default();
    Ok(BookOptions {
        matter: choice(obj, "matter", Matter::NAMES)?.unwrap_or(defaults.matter),
        notes: choice(obj, "notes", NotesMode::NAMES)?.unwrap_or(defaults.notes),
        chapter_depth: obj
            .get("chapter_depth")
            .map(|v| {
                integer(
                    v,
                    "chapter_depth",
                    1..=i64::from(MAX_CHAPTER_DEPTH),
                    "levels of the table of contents",
                )
                .map(|n| n as u8)
            })
            .transpose()?
            .unwrap_or(defaults.chapter_depth),
        chapters: match obj.get("chapters") {
            None => None,
            Some(v) => match string(v, "chapters")?.parse() {
                Ok(list) => Some(list),
                Err(e) => return fail("chapters", e),
            },
        },
    })
}

fn choice<T: serde::de::DeserializeOwned>(
    obj: &Map<String, Value>,
    at: &str,
    names: &[&str],
) -> Result<Option<T>, Fail> {
    let Some(v) = obj.get(at) else {
        return Ok(None);
    };
    let allowed = names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    match v.as_str() {
        Some(s) if names.contains(&s) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| (at.to_owned(), e.to_string())),
        Some(s) => {
            let hint = did_you_mean(s, names)
                .map(|n| format!("; did you mean \"{n}\"?"))
                .unwrap_or_default();
            fail(at, format!("must be one of {allowed}, found {v}{hint}"))
        }
        None => fail(at, format!("must be one of {allowed}, found {}", kind(v))),
    }
}

/// A non-empty path string without NUL.
fn path(v: &Value, at: &str) -> Result<String, Fail> {
    let s = string(v, at)?;
    if s.contains('\0') {
        return fail(at, "contains a NUL character");
    }
    Ok(s)
}

/// A non-empty JSON string of at most 4096 bytes.
pub(crate) fn string(v: &Value, at: &str) -> Result<String, Fail> {
    match v.as_str() {
        Some(s) if !s.trim().is_empty() && s.len() <= 4096 => Ok(s.to_owned()),
        Some(s) if s.len() > 4096 => fail(at, "is longer than 4096 bytes"),
        Some(_) => fail(at, "must not be empty"),
        None => fail(at, format!("must be a string, found {}", kind(v))),
    }
}

/// A JSON whole number within `range`; `what` says what it means.
pub(crate) fn integer(
    v: &Value,
    at: &str,
    range: RangeInclusive<i64>,
    what: &str,
) -> Result<i64, Fail> {
    match v.as_i64() {
        Some(n) if range.contains(&n) => Ok(n),
        _ => fail(
            at,
            format!(
                "must be a whole number from {} to {} ({what}), found {v}",
                range.start(),
                range.end()
            ),
        ),
    }
}

fn size(v: &Value) -> Result<(u32, u32), Fail> {
    let fix = "give [width, height] in pixels, both even, from 64 to 4096, e.g. [256, 256]";
    let Some([w, h]) = v.as_array().map(Vec::as_slice) else {
        return fail("size", format!("must be a two-number array; {fix}"));
    };
    let w = integer(w, "size[0]", SIDE, "pixels")? as u32;
    let h = integer(h, "size[1]", SIDE, "pixels")? as u32;
    if !w.is_multiple_of(2) || !h.is_multiple_of(2) {
        return fail("size", format!("{w}x{h} has an odd side; {fix}"));
    }
    Ok((w, h))
}

/// `--size WxH`, checked against the same limits as a spec's `size`.
#[cfg(feature = "cli")]
fn parse_wxh(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or("expected WIDTHxHEIGHT, e.g. 720x720")?;
    let p = |v: &str| {
        v.trim()
            .parse::<u32>()
            .map_err(|_| format!("{v:?} is not a whole number"))
    };
    let (w, h) = (p(w)?, p(h)?);
    if !SIDE.contains(&i64::from(w)) || !SIDE.contains(&i64::from(h)) {
        return Err(format!(
            "each side must be {} to {} pixels",
            SIDE.start(),
            SIDE.end()
        ));
    }
    if w % 2 != 0 || h % 2 != 0 {
        return Err("both sides must be even (H.264 yuv420p)".into());
    }
    Ok((w, h))
}

/// What `-o` writes: the talking-portrait MP4, or audio only (no portrait, no face stages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    Mp4,
    Audio(AudioFormat),
}

impl OutputKind {
    /// By extension: `.m4b`, `.m4a`, `.mp3`, `.wav` are audio only; anything else is an MP4.
    pub fn of(path: &Path) -> OutputKind {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("m4b") => OutputKind::Audio(AudioFormat::M4b),
            Some("m4a") => OutputKind::Audio(AudioFormat::M4a),
            Some("wav") => OutputKind::Audio(AudioFormat::Wav),
            Some("mp3") => OutputKind::Audio(AudioFormat::Mp3),
            _ => OutputKind::Mp4,
        }
    }
}

/// `--loudness`: the standard an output is brought to, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Loudness {
    /// ACX: -20 dB RMS, peaks limited under -3 dBFS, room tone (a -70 dB noise) under all of
    /// it with 0.75 s before and 2 s after; .mp3 and .m4b at 44.1 kHz, .mp3 at 192 kbps.
    Acx,
    /// -19 LUFS (the mono podcast target), true peak under -1 dBTP.
    Podcast,
    /// EBU R128: -23 LUFS, true peak under -1 dBTP.
    Broadcast,
    /// The speech as the voice made it.
    Off,
}

impl Loudness {
    /// The names flags and specs take, in declaration order.
    pub const NAMES: &[&str] = &["acx", "podcast", "broadcast", "off"];

    /// What `loudness` means for `kind` when not given.
    pub fn resolve(loudness: Option<Loudness>, kind: OutputKind) -> Option<Standard> {
        match (loudness, kind) {
            (Some(Loudness::Acx), _) => Some(Standard::Acx),
            (Some(Loudness::Podcast), _) => Some(Standard::Podcast),
            (Some(Loudness::Broadcast), _) => Some(Standard::Broadcast),
            (Some(Loudness::Off), _) | (None, OutputKind::Mp4) => None,
            (None, OutputKind::Audio(_)) => Some(Standard::Acx),
        }
    }
}

/// One render: its inputs and output, its settings, and what the process lends it.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// A JSON script, an EPUB, Markdown or plain-text file (see `book`).
    pub script: PathBuf,
    /// Empty for audio-only outputs, which need no portrait.
    pub portrait: PathBuf,
    pub output: PathBuf,
    pub assets: Assets,
    pub cache: CacheLocation,
    /// Everything that changes the output (voice, look, encoder, format, subtitles, loudness,
    /// lexicons, book options, noise): what a job spec holds too.
    pub settings: RenderSettings,
    pub threads: usize,
    /// The process's chunk slots, shared by all its renders (`batch`, `worker`); `None`: a pool
    /// of `threads` slots for this render alone.
    pub pool: Option<ChunkPool>,
    /// Backend, precision, engines and batching (a worker's renders share one service).
    pub speech: SpeechSetup,
}

impl RenderOptions {
    /// What the output must never be: every input, named for the error message.
    pub fn inputs<'a>(
        &'a self,
        voice_model: &'a Path,
        voice_config: &'a Path,
    ) -> Vec<(&'a str, &'a Path)> {
        let mut inputs = vec![
            ("script", self.script.as_path()),
            ("voice model", voice_model),
            ("voice config", voice_config),
        ];
        if !self.portrait.as_os_str().is_empty() {
            inputs.push(("portrait", self.portrait.as_path()));
        }
        inputs.extend(
            self.settings
                .lexicon
                .iter()
                .map(|l| ("lexicon", l.as_path())),
        );
        if let Background::Image(path) = &self.settings.look.background {
            inputs.push(("background image", path.as_path()));
        }
        if let Some(path) = &self.settings.cover {
            inputs.push(("cover image", path.as_path()));
        }
        inputs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "cli")]
    #[test]
    fn wxh_parses_and_checks() {
        assert_eq!(parse_wxh("720x404"), Ok((720, 404)));
        assert!(parse_wxh("721x404").unwrap_err().contains("even"));
        assert!(parse_wxh("32x32").unwrap_err().contains("64"));
        assert!(parse_wxh("720").is_err());
    }

    #[cfg(feature = "cli")]
    #[test]
    fn spec_defaults_are_the_flag_defaults() {
        use clap::Parser;
        #[derive(Parser)]
        struct Flags {
            #[command(flatten)]
            settings: RenderSettings,
        }
        let flags = Flags::parse_from(["talker"]).settings;
        assert_eq!(flags, RenderSettings::default());
        assert_eq!(RenderSettings::from_spec(&Map::new()), Ok(flags));
    }

    /// Every field set, so every one is serialised.
    fn all_set() -> RenderSettings {
        RenderSettings {
            voice: Some("v".into()),
            look: LookSettings {
                size: Some((128, 96)),
                fps: Some(10),
                framing: Framing::Head,
                layout: Some(Layout::Slides),
                background: Background::Color([1, 2, 3]),
                pip: Corner::TopLeft,
                pip_size: PipSize::try_from(0.4).unwrap(),
                still: true,
                seed: 7,
            },
            crf: 30,
            preset: "ultrafast".into(),
            format: Some(Format::M4b),
            split: Some(Split::Chapters),
            subtitles: Some(SubtitleFormat::Srt),
            loudness: Some(Loudness::Podcast),
            lexicon: vec!["/l.json".into()],
            cover: Some("/c.png".into()),
            book: BookOptions {
                matter: Matter::All,
                notes: NotesMode::End,
                chapter_depth: 3,
                chapters: Some("2-3,5".parse().unwrap()),
            },
            deterministic: true,
        }
    }

    #[test]
    fn backgrounds_parse_and_print_back() {
        for text in ["blur", "#1e2a3c", "slides/bg.png"] {
            let b: Background = text.parse().unwrap();
            assert_eq!(String::from(b), text);
        }
        assert_eq!("#FFFFFF".parse(), Ok(Background::Color([255; 3])));
        for bad in ["#12345", "#12345g", "#1234567", " "] {
            assert!(bad.parse::<Background>().is_err(), "{bad}");
        }
    }

    #[test]
    fn serialised_flat_in_field_order() {
        // The first release's fields only while the later ones hold their defaults: a job
        // queued before them keeps its content hash.
        let json = serde_json::to_string(&RenderSettings::default()).unwrap();
        assert_eq!(
            json,
            r#"{"voice":null,"size":null,"fps":null,"framing":"full","still":false,"seed":0,"crf":20,"preset":"veryfast"}"#
        );
        let json = serde_json::to_string(&all_set()).unwrap();
        let at: Vec<usize> = RenderSettings::SPEC_FIELDS
            .iter()
            .map(|f| json.find(&format!("\"{f}\":")).expect(f))
            .collect();
        assert!(at.is_sorted(), "{json}");
        assert_eq!(json.matches("\":").count(), at.len(), "{json}");
        assert_eq!(
            serde_json::from_str::<RenderSettings>(&json).unwrap(),
            all_set()
        );
    }

    #[test]
    fn a_spec_reads_every_field_as_serialised() {
        let json = serde_json::to_value(all_set()).unwrap();
        let mut obj = json.as_object().unwrap().clone();
        // A spec gives `size` as an array and one lexicon as a plain string.
        obj.insert("lexicon".into(), Value::from("/l.json"));
        assert_eq!(RenderSettings::from_spec(&obj), Ok(all_set()));
    }

    #[test]
    fn spec_choices_name_the_allowed_values() {
        let bad = |field: &str, v: Value| {
            let mut obj = Map::new();
            obj.insert(field.into(), v);
            RenderSettings::from_spec(&obj).unwrap_err()
        };
        let (at, m) = bad("loudness", Value::from("acz"));
        assert_eq!(at, "loudness");
        assert!(
            m.contains("\"acx\", \"podcast\"") && m.contains("did you mean \"acx\""),
            "{m}"
        );
        let (at, m) = bad("subtitles", Value::from(1));
        assert_eq!(
            (at.as_str(), m.contains("a number")),
            ("subtitles", true),
            "{m}"
        );
        let (at, m) = bad("chapter_depth", Value::from(7));
        assert_eq!(
            (at.as_str(), m.contains("1 to 6")),
            ("chapter_depth", true),
            "{m}"
        );
        let (at, _) = bad("lexicon", serde_json::json!(["a.json", ""]));
        assert_eq!(at, "lexicon[1]");
        let (at, m) = bad("lexicon", Value::from(3));
        assert_eq!(
            (at.as_str(), m.contains("an array of them")),
            ("lexicon", true),
            "{m}"
        );
        let (at, m) = bad("deterministic", Value::from("yes"));
        assert_eq!(
            (at.as_str(), m.contains("true or false")),
            ("deterministic", true)
        );
        assert!(bad("matter", Value::from("front")).1.contains("\"body\""));
        assert!(bad("notes", Value::from("foot")).1.contains("\"end\""));
        assert!(bad("format", Value::from("mov")).1.contains("\"m4b\""));
        assert!(
            bad("split", Value::from("parts"))
                .1
                .contains("\"chapters\"")
        );
        assert!(bad("pip", Value::from("top")).1.contains("\"top-left\""));
        assert!(bad("pip_size", Value::from(0.9)).1.contains("0.15 to 0.5"));
        assert!(bad("pip_size", Value::from("big")).1.contains("a number"));
        assert!(bad("layout", Value::from("slide")).1.contains("\"slides\""));
    }

    #[test]
    fn loudness_on_a_video_is_refused_as_render_refuses_it() {
        let mut s = RenderSettings {
            loudness: Some(Loudness::Acx),
            ..RenderSettings::default()
        };
        assert!(s.check_output(Path::new("a.m4b")).is_ok());
        let e = s.check_output(Path::new("a.mp4")).unwrap_err();
        assert!(
            e.starts_with("--loudness acx is for audio-only outputs"),
            "{e}"
        );
        s.format = Some(Format::Wav);
        assert!(s.check_output(Path::new("a.mp4")).is_ok());
        s.loudness = Some(Loudness::Off);
        s.format = None;
        assert!(s.check_output(Path::new("a.mp4")).is_ok());
    }

    /// The names specs take are the flags' own.
    #[cfg(feature = "cli")]
    #[test]
    fn spec_names_are_the_flag_values() {
        fn names<T: clap::ValueEnum>() -> Vec<String> {
            T::value_variants()
                .iter()
                .filter_map(|v| v.to_possible_value())
                .map(|p| p.get_name().to_owned())
                .collect()
        }
        assert_eq!(names::<Format>(), Format::NAMES);
        assert_eq!(names::<Split>(), Split::NAMES);
        assert_eq!(names::<Loudness>(), Loudness::NAMES);
        assert_eq!(names::<SubtitleFormat>(), SubtitleFormat::NAMES);
        assert_eq!(names::<Matter>(), Matter::NAMES);
        assert_eq!(names::<NotesMode>(), NotesMode::NAMES);
    }
}
