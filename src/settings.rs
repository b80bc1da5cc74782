//! Render settings: one type for what the `render` flags, the job-spec fields and the render share.
//!
//! ripgrep's pattern: raw input (flags through clap, a spec through [`RenderSettings::from_spec`])
//! becomes a checked [`RenderSettings`], and the render takes only that. A field added to
//! [`RenderSettings`] (or [`LookSettings`]) is at once a `talker render` flag, a job-spec field (its
//! serde name; `from_spec` must read it, or its struct literal does not compile, and
//! [`RenderSettings::SPEC_FIELDS`] must list it, or a unit test fails) and part of a job's content hash (which covers the serialised
//! job); both readers check it against the same limits below. What changes frames must also go
//! into the chunk cache key (`look::prepare`), which covers the look rather than the job.
//!
//! [`RenderOptions`] is what one render needs: the settings plus paths, assets, cache and the
//! per-process speech setup.

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::assets::Assets;
use crate::cache::CacheLocation;
use crate::media::loudness::Standard;
use crate::media::{AudioFormat, SubtitleFormat, X264_PRESETS};
pub use crate::script::Layout;
use crate::script::kind;
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
    /// Output size WIDTHxHEIGHT, both even [default: the script's size, else the portrait's, at most 1080].
    #[cfg_attr(feature = "cli", arg(long, value_name = "WxH", value_parser = parse_wxh))]
    pub size: Option<(u32, u32)>,
    /// Frames per second [default: the script's fps, else 25].
    #[cfg_attr(feature = "cli", arg(long, value_parser = clap::value_parser!(u32).range(FPS)))]
    pub fps: Option<u32>,
    /// What the frame shows.
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = Framing::Full))]
    pub framing: Framing,
    /// How the portrait fills the frame [default: the script's, else fill, or fit when the frame's shape is far from the portrait's (a 16:9 frame from a square or upright portrait)].
    #[cfg_attr(feature = "cli", arg(long, value_enum))]
    pub layout: Option<Layout>,
    /// Around a fit portrait: blur (the portrait itself, blurred and darkened), a colour #RRGGBB, or a PNG/JPEG image scaled to cover the frame.
    #[cfg_attr(feature = "cli", arg(long, value_name = "blur|#RRGGBB|IMAGE", default_value = "blur"))]
    pub background: Background,
    /// No idle head motion (blinks stay).
    #[cfg_attr(feature = "cli", arg(long))]
    pub still: bool,
    /// Seed for blinks and head motion; the same seed renders the same video.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0))]
    pub seed: u64,
}

/// Everything about a render's video that a job spec may set. Serialised flat, in this order:
/// the job's content hash depends on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct RenderSettings {
    /// Voice: a name in the assets' voices/ folder or a path to a Piper .onnx [default: the script's, else en_US-joe-medium].
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
}

impl Default for RenderSettings {
    fn default() -> RenderSettings {
        RenderSettings {
            voice: None,
            look: LookSettings::default(),
            crf: DEFAULT_CRF,
            preset: DEFAULT_PRESET.to_owned(),
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
        "still",
        "seed",
        "crf",
        "preset",
    ];

    /// Reads and checks the settings of a job spec's JSON object; absent fields take the same
    /// defaults as the flags. Unknown fields are the caller's to refuse.
    pub(crate) fn from_spec(obj: &Map<String, Value>) -> Result<RenderSettings, Fail> {
        let voice = obj.get("voice").map(|v| string(v, "voice")).transpose()?;
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
                None => return fail("layout", format!("must be \"fill\" or \"fit\", found {v}")),
            },
        };
        let background = match obj.get("background") {
            None => Background::Blur,
            Some(v) => match string(v, "background")?.parse() {
                Ok(b) => b,
                Err(e) => return fail("background", e),
            },
        };
        let still = match obj.get("still") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => return fail("still", format!("must be true or false, found {}", kind(v))),
        };
        let seed = match obj.get("seed") {
            None => 0,
            Some(v) => match v.as_u64() {
                Some(n) => n,
                None => return fail("seed", format!("must be a whole number ≥ 0, found {v}")),
            },
        };
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
        Ok(RenderSettings {
            voice,
            look: LookSettings {
                size,
                fps,
                framing,
                layout,
                background,
                still,
                seed,
            },
            crf,
            preset,
        })
    }
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

/// Options of `talker render` that job specs do not have: output kind, subtitle sidecar, extra
/// lexicons.
#[derive(Debug, Clone, Default)]
pub struct ExtraOptions {
    /// `--format`: overrides the kind the output's extension implies.
    pub format: Option<OutputKind>,
    /// `--subtitles`: a sidecar next to the output, one cue per sentence.
    pub subtitles: Option<SubtitleFormat>,
    /// `--lexicon` files, applied after the script's own lexicon (later entries win).
    pub lexicons: Vec<PathBuf>,
    /// `--matter`, `--notes`, `--chapter-depth`: how a book is read (a job reads the defaults).
    pub book: crate::book::BookOptions,
    /// `--loudness`: `None` is the output's default (ACX for audio only, off for an MP4).
    pub loudness: Option<Loudness>,
}

/// `--loudness`: the standard an output is brought to, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loudness {
    Off,
    To(Standard),
}

impl Loudness {
    /// What `loudness` means for `kind` when not given.
    pub fn resolve(loudness: Option<Loudness>, kind: OutputKind) -> Option<Standard> {
        match (loudness, kind) {
            (Some(Loudness::To(s)), _) => Some(s),
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
    /// Voice, size, fps, look and encoder: override the script's where given.
    pub settings: RenderSettings,
    pub threads: usize,
    /// Piper's sampling noise (on by default, as Piper does; off makes speech deterministic).
    pub noise: bool,
    /// Backend, precision, engines and batching (a worker's renders share one service).
    pub speech: SpeechSetup,
    pub extra: ExtraOptions,
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
        inputs.extend(self.extra.lexicons.iter().map(|l| ("lexicon", l.as_path())));
        if let Background::Image(path) = &self.settings.look.background {
            inputs.push(("background image", path.as_path()));
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

    #[test]
    fn serialised_flat_in_field_order() {
        let json = serde_json::to_string(&RenderSettings::default()).unwrap();
        assert_eq!(
            json,
            r#"{"voice":null,"size":null,"fps":null,"framing":"full","layout":null,"background":"blur","still":false,"seed":0,"crf":20,"preset":"veryfast"}"#
        );
        let at: Vec<usize> = RenderSettings::SPEC_FIELDS
            .iter()
            .map(|f| json.find(&format!("\"{f}\":")).expect(f))
            .collect();
        assert!(at.is_sorted(), "{json}");
        assert_eq!(json.matches("\":").count(), at.len(), "{json}");
    }
}
