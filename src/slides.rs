//! The `slides` layout: the script's slides fill the frame (letterboxed) and the speaker sits in
//! a corner, picture-in-picture.
//!
//! Input: the script's `slide` fields (checked here as every other input is), the frame size,
//! `--pip`, `--pip-size` and the bars' colour. Output: a [`Deck`] that gives each chunk the frame
//! its slide makes (composed once per slide, a few kept at a time) and pastes the face rig's small
//! frames into it through a precomputed alpha mask, and the slide bytes' hash for each chunk key.
//!
//! Cost: the face rig draws only the picture-in-picture box; a frame costs that box plus its
//! paste, whatever the frame's size. Memory: the slides are read when a chunk needs one; at most
//! [`BASES_KEPT`] composed frames are held, however many slides the script names.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use image::RgbImage;
use image::imageops::{FilterType, replace, resize};
use sha2::{Digest, Sha256};

use crate::cache::{Key, KeyBuilder};
use crate::error::{Error, Result};
use crate::script::{Layout, Script, Slide};

/// The frame size of a slides render that names none (`--size`, a script's `size`).
pub const DEFAULT_SIZE: (u32, u32) = (1280, 720);
/// Largest slide file: a 4K PNG screenshot is a few MiB.
pub const MAX_SLIDE_BYTES: u64 = 32 << 20;
/// Composed slide frames kept for the chunk workers (each is width × height × 3 bytes).
const BASES_KEPT: usize = 4;
/// The picture-in-picture box's distance from the frame's edges, in frame heights.
const MARGIN: f32 = 0.03;
/// Corner radius of the box, in box heights, and the soft edge's width in pixels.
const RADIUS: f32 = 0.1;
const FEATHER_PX: f32 = 1.5;
/// The box's shape follows the portrait's, within these width/height ratios.
const ASPECT: (f32, f32) = (0.75, 4.0 / 3.0);

/// `--pip`: the corner the speaker sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Corner {
    TopLeft,
    TopRight,
    BottomLeft,
    #[default]
    BottomRight,
}

impl Corner {
    /// The names flags and specs take.
    pub const NAMES: &[&str] = &["top-left", "top-right", "bottom-left", "bottom-right"];

    pub fn is_default(&self) -> bool {
        *self == Corner::default()
    }

    fn tag(self) -> &'static str {
        Corner::NAMES[self as usize]
    }
}

/// `--pip-size`: the speaker's box height as a fraction of the frame's, kept in thousandths so
/// that settings compare and hash exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct PipSize(u16);

impl PipSize {
    /// Smaller boxes leave too small a face to animate at 720p; larger ones hide the slide.
    pub const RANGE: std::ops::RangeInclusive<f64> = 0.15..=0.5;

    pub fn is_default(&self) -> bool {
        *self == PipSize::default()
    }

    pub fn fraction(self) -> f32 {
        f32::from(self.0) / 1000.0
    }
}

impl Default for PipSize {
    fn default() -> PipSize {
        PipSize(280)
    }
}

impl TryFrom<f64> for PipSize {
    type Error = String;

    fn try_from(f: f64) -> std::result::Result<PipSize, String> {
        if !PipSize::RANGE.contains(&f) {
            return Err(format!(
                "must be a fraction of the frame's height from {} to {}, found {f}; 0.28 is the default",
                PipSize::RANGE.start(),
                PipSize::RANGE.end()
            ));
        }
        Ok(PipSize((f * 1000.0).round() as u16))
    }
}

impl From<PipSize> for f64 {
    fn from(p: PipSize) -> f64 {
        f64::from(p.0) / 1000.0
    }
}

impl std::str::FromStr for PipSize {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<PipSize, String> {
        let f: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number; give a fraction such as 0.28"))?;
        PipSize::try_from(f)
    }
}

impl std::fmt::Display for PipSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", f64::from(*self))
    }
}

/// Where the speaker goes: the box, in frame pixels, both sides even.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipBox {
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

impl PipBox {
    /// The box for a portrait of `portrait` shape in a `frame`, `size` high, in `corner`.
    pub fn place(portrait: (u32, u32), frame: (u32, u32), corner: Corner, size: PipSize) -> PipBox {
        let fh = frame.1 as f32;
        let aspect = (portrait.0 as f32 / portrait.1.max(1) as f32).clamp(ASPECT.0, ASPECT.1);
        let even = |v: f32| ((v / 2.0).round() as u32 * 2).max(2);
        let h = even(fh * size.fraction());
        let w = even(h as f32 * aspect).min(frame.0 & !1);
        let margin = even(fh * MARGIN);
        let right = frame.0.saturating_sub(w + margin);
        let bottom = frame.1.saturating_sub(h + margin);
        let (x, y) = match corner {
            Corner::TopLeft => (margin, margin),
            Corner::TopRight => (right, margin),
            Corner::BottomLeft => (margin, bottom),
            Corner::BottomRight => (right, bottom),
        };
        PipBox { x, y, w, h }
    }

    /// Coverage of each box pixel (255 inside, 0 outside): a rounded rectangle with a soft edge.
    fn mask(&self) -> Vec<u8> {
        let (w, h) = (self.w as f32, self.h as f32);
        let r = (RADIUS * h).min(w / 2.0);
        let mut mask = Vec::with_capacity(self.w as usize * self.h as usize);
        for y in 0..self.h {
            for x in 0..self.w {
                // Signed distance from the pixel's centre to the rounded rectangle's edge.
                let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
                let qx = (px - w / 2.0).abs() - (w / 2.0 - r);
                let qy = (py - h / 2.0).abs() - (h / 2.0 - r);
                let outside = (qx.max(0.0).powi(2) + qy.max(0.0).powi(2)).sqrt();
                let d = outside + qx.max(qy).min(0.0) - r;
                let a = (0.5 - d / FEATHER_PX).clamp(0.0, 1.0);
                mask.push((a * 255.0).round() as u8);
            }
        }
        mask
    }
}

/// One slide file the script names: where (for messages) and its bytes' hash (for chunk keys).
#[derive(Debug, Clone)]
pub struct SlideFile {
    pub slide: Slide,
    pub hash: [u8; 32],
}

/// The distinct slides of a script, and which one each segment shows.
#[derive(Debug, Clone)]
pub struct SlideList {
    pub files: Vec<SlideFile>,
    /// Index into `files` for each segment: its own slide or the last one before it; segments
    /// before the first slide show the first.
    pub shown: Vec<usize>,
}

/// Whether the script names any slide.
pub fn named(script: &Script) -> bool {
    script.segments.iter().any(|s| s.slide.is_some())
}

/// Whether a video of `script` shows its slides: the layout asked for (a flag or spec field,
/// else the script's) is `slides`, or none is asked for and the script names slides.
pub fn shown(asked: Option<Layout>, script: &Script) -> bool {
    match asked.or(script.layout) {
        Some(layout) => layout == Layout::Slides,
        None => named(script),
    }
}

/// The distinct slide files a script names, in order of first use (for a job's content hash).
pub fn files(script: &Script) -> Vec<&Path> {
    let mut out: Vec<&Path> = Vec::new();
    for slide in script.segments.iter().filter_map(|s| s.slide.as_ref()) {
        if !out.contains(&slide.path.as_path()) {
            out.push(&slide.path);
        }
    }
    out
}

/// Reads, checks and hashes every slide the script names (each distinct file once); `decode`
/// also decodes each, so a broken file is refused before any work. Errors are exit 2 naming the
/// script, the segment (or Markdown line) and the file.
pub fn list(script: &Script, script_path: &Path, decode: bool) -> Result<SlideList> {
    let mut files: Vec<SlideFile> = Vec::new();
    let mut shown = Vec::with_capacity(script.segments.len());
    for segment in &script.segments {
        if let Some(slide) = &segment.slide {
            match files.iter().position(|f| f.slide.path == slide.path) {
                Some(i) => shown.push(i),
                None => {
                    let bytes = read(slide, script_path)?;
                    if decode {
                        decode_slide(&bytes, slide, script_path)?;
                    }
                    files.push(SlideFile {
                        slide: slide.clone(),
                        hash: Sha256::digest(&bytes).into(),
                    });
                    shown.push(files.len() - 1);
                }
            }
        } else {
            shown.push(files.len().saturating_sub(1));
        }
    }
    if files.is_empty() {
        return Err(Error::Usage(format!(
            "{}: --layout slides, but the script names no slide; give a segment \"slide\": \"slides/01.png\" (or a Markdown image line ![](slides/01.png)), or choose --layout fit",
            script_path.display()
        )));
    }
    Ok(SlideList { files, shown })
}

fn refuse(slide: &Slide, script_path: &Path, why: impl std::fmt::Display) -> Error {
    Error::Usage(format!(
        "{}: {}: the slide {} {why}; give a PNG or JPEG file",
        script_path.display(),
        slide.at,
        slide.path.display()
    ))
}

/// The slide's bytes: a regular file only (a FIFO would block), at most [`MAX_SLIDE_BYTES`].
fn read(slide: &Slide, script_path: &Path) -> Result<Vec<u8>> {
    crate::script::read_input(&slide.path, MAX_SLIDE_BYTES)
        .map_err(|e| refuse(slide, script_path, e))
}

/// A PNG or JPEG of at most the portrait's largest side, decoded.
fn decode_slide(bytes: &[u8], slide: &Slide, script_path: &Path) -> Result<RgbImage> {
    let reader = image::ImageReader::new(std::io::Cursor::new(bytes));
    crate::face::decode_picture(reader, |why| refuse(slide, script_path, why))
}

/// The slides of a render laid out at its size: bars, box, mask and the frames composed so far.
pub struct Deck {
    list: SlideList,
    /// The script's path, for messages.
    script: std::path::PathBuf,
    size: (u32, u32),
    /// The background behind a letterboxed slide, composed once.
    bars: RgbImage,
    pip: PipBox,
    mask: Vec<u8>,
    /// The last few composed slide frames (slide index, RGB24 bytes), most recent last.
    bases: Mutex<VecDeque<(usize, Arc<Vec<u8>>)>>,
}

impl Deck {
    pub fn new(list: SlideList, script: &Path, bars: RgbImage, pip: PipBox) -> Deck {
        Deck {
            list,
            script: script.to_path_buf(),
            size: bars.dimensions(),
            mask: pip.mask(),
            bars,
            pip,
            bases: Mutex::new(VecDeque::new()),
        }
    }

    pub fn pip(&self) -> PipBox {
        self.pip
    }

    /// What the look key holds of the layout: box, corner-independent geometry and bars.
    pub fn key(&self, corner: Corner) -> Key {
        KeyBuilder::new("slides-layout")
            .str("corner", corner.tag())
            .u64("x", u64::from(self.pip.x))
            .u64("y", u64::from(self.pip.y))
            .u64("w", u64::from(self.pip.w))
            .u64("h", u64::from(self.pip.h))
            .bytes("bars", self.bars.as_raw())
            .finish()
    }

    /// Each chunk's key bound to the bytes of the slide it shows: editing a slide changes the
    /// keys of the chunks that show it and of no other.
    pub fn key_chunks(&self, plan: &mut crate::plan::Plan) {
        for chunk in &mut plan.chunks {
            let file = &self.list.files[self.list.shown[chunk.segment]];
            let key = KeyBuilder::new("slide-chunk")
                .bytes("chunk", &chunk.key().0)
                .bytes("slide", &file.hash)
                .finish();
            chunk.key = Some(key);
        }
    }

    /// The frame segment `segment`'s slide makes (letterboxed on the bars), composed on first
    /// use; the slide's bytes must still be those hashed for the keys.
    pub fn base(&self, segment: usize) -> Result<Arc<Vec<u8>>> {
        let index = self.list.shown[segment];
        let lock = || {
            self.bases
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some((_, base)) = lock().iter().find(|(i, _)| *i == index) {
            return Ok(base.clone());
        }
        let file = &self.list.files[index];
        let bytes = read(&file.slide, &self.script)?;
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        if hash != file.hash {
            return Err(refuse(
                &file.slide,
                &self.script,
                "changed during the render; render again",
            ));
        }
        let slide = decode_slide(&bytes, &file.slide, &self.script)?;
        drop(bytes);
        let base = Arc::new(letterbox(&slide, &self.bars).into_raw());
        let mut bases = lock();
        // Another worker may have composed it meanwhile: one copy is kept.
        if let Some((_, kept)) = bases.iter().find(|(i, _)| *i == index) {
            return Ok(kept.clone());
        }
        bases.push_back((index, base.clone()));
        while bases.len() > BASES_KEPT {
            bases.pop_front();
        }
        Ok(base)
    }

    /// Pastes the rig's box-sized frame `pip` into `frame` over `base` through the mask. Pixels
    /// outside the box are left as they are (the base, copied once per chunk).
    pub fn paste(&self, pip: &[u8], base: &[u8], frame: &mut [u8]) {
        let (fw, b) = (self.size.0 as usize, self.pip);
        let (bw, bh) = (b.w as usize, b.h as usize);
        for y in 0..bh {
            let row = ((b.y as usize + y) * fw + b.x as usize) * 3;
            let out = &mut frame[row..row + bw * 3];
            let under = &base[row..row + bw * 3];
            let over = &pip[y * bw * 3..(y + 1) * bw * 3];
            let alpha = &self.mask[y * bw..(y + 1) * bw];
            for (x, &a) in alpha.iter().enumerate() {
                let i = x * 3;
                match a {
                    255 => out[i..i + 3].copy_from_slice(&over[i..i + 3]),
                    0 => {}
                    _ => {
                        let (a, na) = (u16::from(a), 255 - u16::from(a));
                        for c in i..i + 3 {
                            let v = u16::from(over[c]) * a + u16::from(under[c]) * na;
                            out[c] = ((v + 127) / 255) as u8;
                        }
                    }
                }
            }
        }
    }
}

/// `slide` scaled to fit inside the bars' frame (never stretched), centred on them.
pub fn letterbox(slide: &RgbImage, bars: &RgbImage) -> RgbImage {
    let (w, h) = bars.dimensions();
    let (sw, sh) = (slide.width() as f64, slide.height() as f64);
    let scale = (f64::from(w) / sw).min(f64::from(h) / sh);
    let fit = |v: f64, max: u32| (v * scale).round().clamp(1.0, f64::from(max)) as u32;
    let (iw, ih) = (fit(sw, w), fit(sh, h));
    let mut canvas = bars.clone();
    let inner = if (iw, ih) == slide.dimensions() {
        slide.clone()
    } else {
        resize(slide, iw, ih, FilterType::Lanczos3)
    };
    replace(
        &mut canvas,
        &inner,
        i64::from((w - iw) / 2),
        i64::from((h - ih) / 2),
    );
    canvas
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::Rgb;

    #[test]
    fn the_box_sits_in_its_corner_with_a_margin() {
        let size = PipSize::default();
        let b = PipBox::place((512, 512), (1280, 720), Corner::BottomRight, size);
        assert_eq!((b.w, b.h), (202, 202));
        assert_eq!((b.x + b.w + 22, b.y + b.h + 22), (1280, 720));
        let b = PipBox::place((512, 512), (1920, 1080), Corner::TopLeft, size);
        assert_eq!((b.x, b.y, b.h), (32, 32, 302));
        // An upright portrait keeps its shape, a very wide one is held to 4:3.
        let b = PipBox::place((600, 800), (1280, 720), Corner::TopRight, size);
        assert_eq!((b.w, b.h), (152, 202));
        let b = PipBox::place((2000, 500), (1280, 720), Corner::TopRight, size);
        assert_eq!((b.w, b.h), (270, 202));
    }

    /// Slides show when asked for, or when the script names them and no other layout is asked
    /// for; a slides layout without a slide is refused, naming the fix.
    #[test]
    fn slides_show_when_named_or_asked_for() {
        let with = Script::parse(r#"{"segments": [{"text": "A.", "slide": "a.png"}]}"#).unwrap();
        let without = Script::parse(r#"{"segments": [{"text": "A."}]}"#).unwrap();
        let asked = Script::parse(r#"{"layout": "slides", "segments": [{"text": "A."}]}"#).unwrap();
        assert!(shown(None, &with));
        assert!(!shown(Some(Layout::Fit), &with));
        assert!(!shown(None, &without));
        assert!(shown(None, &asked) && !shown(Some(Layout::Fill), &asked));
        let e = list(&asked, Path::new("talk.json"), true).unwrap_err();
        assert!(e.to_string().contains("names no slide"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn pip_sizes_parse_within_their_range() {
        assert_eq!("0.28".parse::<PipSize>(), Ok(PipSize::default()));
        assert_eq!(PipSize::try_from(0.5).map(f64::from), Ok(0.5));
        for bad in ["0.1", "0.6", "x", "NaN"] {
            assert!(bad.parse::<PipSize>().is_err(), "{bad}");
        }
        assert_eq!(PipSize::default().to_string(), "0.28");
    }

    #[test]
    fn the_mask_is_opaque_inside_and_round_at_the_corners() {
        let b = PipBox {
            x: 0,
            y: 0,
            w: 100,
            h: 80,
        };
        let m = b.mask();
        assert_eq!(m[40 * 100 + 50], 255);
        assert_eq!(m[0], 0, "the corner is cut");
        assert_eq!(m[40 * 100 + 1], 255, "the middle of the left edge is in");
        assert!(m.iter().any(|&a| a > 0 && a < 255), "a soft edge");
    }

    #[test]
    fn a_slide_is_letterboxed_never_stretched() {
        let slide = RgbImage::from_pixel(400, 300, Rgb([200, 10, 10]));
        let bars = RgbImage::from_pixel(1280, 720, Rgb([0, 0, 255]));
        let out = letterbox(&slide, &bars);
        // 4:3 in 16:9: 960x720 in the middle, bars of 160 either side.
        assert_eq!(out.get_pixel(159, 360).0, [0, 0, 255]);
        assert_eq!(out.get_pixel(161, 360).0, [200, 10, 10]);
        assert_eq!(out.get_pixel(1118, 360).0, [200, 10, 10]);
        assert_eq!(out.get_pixel(1121, 360).0, [0, 0, 255]);
        assert_eq!(out.get_pixel(640, 0).0, [200, 10, 10]);
    }

    #[test]
    fn the_paste_blends_only_inside_the_box() {
        let bars = RgbImage::from_pixel(64, 64, Rgb([0, 0, 0]));
        let pip = PipBox {
            x: 20,
            y: 20,
            w: 40,
            h: 40,
        };
        let list = SlideList {
            files: Vec::new(),
            shown: Vec::new(),
        };
        let deck = Deck::new(list, Path::new("s.json"), bars, pip);
        let base = vec![10u8; 64 * 64 * 3];
        let mut frame = base.clone();
        deck.paste(&[250u8; 40 * 40 * 3], &base, &mut frame);
        let at = |x: usize, y: usize| frame[(y * 64 + x) * 3];
        assert_eq!(at(50, 40), 250);
        assert_eq!(at(19, 40), 10);
        assert_eq!(at(20, 20), 10, "the rounded corner shows the slide");
        let edge = at(20, 40);
        assert!(edge > 10 && edge <= 250, "{edge}");
    }
}
