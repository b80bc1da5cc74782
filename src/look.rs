//! The picture side of a render: portrait → framed base image, its landmarks, the face rig, and a
//! key for everything that changes how frames look.
//!
//! Input: the portrait, its face analysis, `--framing`, the output size and fps/encoder settings.
//! Output: a [`Look`] and its cache key. The landmarks are found once on the full-resolution
//! portrait and carried through the same crop and scaling as the pixels.

use image::imageops::{FilterType, crop_imm, fast_blur, replace, resize};
use image::{Rgb, RgbImage};

use crate::cache::{Key, KeyBuilder};
use crate::error::{Error, Result};
use crate::face::Landmarks;
use crate::media::VideoSettings;
use crate::render::{FaceRig, framing};
use crate::script::DEFAULT_MAX_SIDE;
use crate::settings::{Framing, Layout};
use crate::slides::{Corner, Deck, PipBox, PipSize};

/// Everything about the picture, shared by all chunks of a render.
pub struct Look {
    pub rig: FaceRig,
    /// The 68 landmarks in the rig's frame coordinates (for crops and checks, not for drawing).
    pub landmarks: [[f32; 2]; 68],
    /// `slides`: where the rig's frames go on the frame (the rig draws only that box).
    pub pip: Option<PipBox>,
    /// `slides`: the slides the rig's frames are pasted onto (set once the script's are read).
    pub slides: Option<Deck>,
    pub video: VideoSettings,
    pub still: bool,
    pub seed: u64,
}

/// Output size when neither `--size` nor the script gives one: the portrait's, longest side
/// capped at 1080, both sides even (yuv420p needs even sides).
pub fn default_size(width: u32, height: u32) -> (u32, u32) {
    let scale = (DEFAULT_MAX_SIDE as f64 / width.max(height) as f64).min(1.0);
    let even = |v: u32| ((f64::from(v) * scale / 2.0).round() as u32 * 2).max(64);
    (even(width), even(height))
}

/// Scales `img` to cover `w`×`h` and crops the centre; landmarks follow.
fn cover(img: &RgbImage, lm: &[[f32; 2]; 68], w: u32, h: u32) -> (RgbImage, [[f32; 2]; 68]) {
    cover_with(img, lm, w, h, FilterType::Lanczos3)
}

fn cover_with(
    img: &RgbImage,
    lm: &[[f32; 2]; 68],
    w: u32,
    h: u32,
    filter: FilterType,
) -> (RgbImage, [[f32; 2]; 68]) {
    if img.dimensions() == (w, h) {
        return (img.clone(), *lm);
    }
    let (iw, ih) = (img.width() as f32, img.height() as f32);
    let scale = (w as f32 / iw).max(h as f32 / ih);
    let (cw, ch) = (
        (w as f32 / scale).round().clamp(1.0, iw) as u32,
        (h as f32 / scale).round().clamp(1.0, ih) as u32,
    );
    let (x0, y0) = ((img.width() - cw) / 2, (img.height() - ch) / 2);
    let crop = crop_imm(img, x0, y0, cw, ch).to_image();
    let out = resize(&crop, w, h, filter);
    let (sx, sy) = (w as f32 / cw as f32, h as f32 / ch as f32);
    let moved = lm.map(|p| {
        [
            (p[0] - x0 as f32 + 0.5) * sx - 0.5,
            (p[1] - y0 as f32 + 0.5) * sy - 0.5,
        ]
    });
    (out, moved)
}

/// What a `fit` frame shows around the portrait, its pixels loaded.
pub enum Backdrop {
    Blur,
    Color([u8; 3]),
    Image(RgbImage),
}

/// Everything but the encoder settings that changes frames.
#[derive(Clone, Copy)]
pub struct LookOptions<'a> {
    pub framing: Framing,
    pub layout: Layout,
    pub background: &'a Backdrop,
    pub pip: Corner,
    pub pip_size: PipSize,
    pub size: (u32, u32),
    pub still: bool,
    pub seed: u64,
}

/// Frame shapes within this factor of the portrait's are filled by default; farther ones (16:9
/// from a square or upright portrait) fit the portrait inside.
const FILL_ASPECT_SPREAD: f64 = 1.2;

/// `fit` when the frame's shape is far from the portrait's, else `fill`.
pub fn default_layout(portrait: (u32, u32), frame: (u32, u32)) -> Layout {
    let aspect = |(w, h): (u32, u32)| f64::from(w) / f64::from(h.max(1));
    let ratio = aspect(frame) / aspect(portrait);
    if ratio.max(1.0 / ratio) > FILL_ASPECT_SPREAD {
        Layout::Fit
    } else {
        Layout::Fill
    }
}

/// The largest box of the portrait's shape inside `w`×`h`, both sides even.
fn inner_box(portrait: (u32, u32), w: u32, h: u32) -> (u32, u32) {
    let (pw, ph) = (f64::from(portrait.0), f64::from(portrait.1.max(1)));
    let scale = (f64::from(w) / pw).min(f64::from(h) / ph);
    let even = |v: f64, max: u32| ((v / 2.0).floor() as u32 * 2).clamp(2, max);
    (even(pw * scale, w), even(ph * scale, h))
}

/// What a `slides` frame shows around a letterboxed slide: the colour or image asked for, black
/// for `blur` (a slide has no portrait behind it).
pub fn bars(background: &Backdrop, w: u32, h: u32) -> RgbImage {
    match background {
        Backdrop::Blur => RgbImage::new(w, h),
        other => backdrop(other, &RgbImage::new(1, 1), w, h),
    }
}

/// The background of a `fit` frame, composed once per render.
fn backdrop(background: &Backdrop, portrait: &RgbImage, w: u32, h: u32) -> RgbImage {
    match background {
        Backdrop::Color(c) => RgbImage::from_pixel(w, h, Rgb(*c)),
        Backdrop::Image(img) => cover_with(img, &[[0.0; 2]; 68], w, h, FilterType::Lanczos3).0,
        Backdrop::Blur => {
            // Blurred small, then scaled up: the cost does not grow with the blur's radius.
            let (sw, sh) = ((w / 16).max(8), (h / 16).max(8));
            let small = cover_with(portrait, &[[0.0; 2]; 68], sw, sh, FilterType::Triangle).0;
            let mut out = resize(&fast_blur(&small, 2.0), w, h, FilterType::Triangle);
            for p in out.pixels_mut() {
                p.0 = p.0.map(|v| (f32::from(v) * 0.55).round() as u8);
            }
            out
        }
    }
}

/// The picture-in-picture box of a `slides` frame.
fn pip_box(portrait: &RgbImage, opts: &LookOptions<'_>) -> Option<PipBox> {
    (opts.layout == Layout::Slides)
        .then(|| PipBox::place(portrait.dimensions(), opts.size, opts.pip, opts.pip_size))
}

/// The portrait framed as `opts` ask (at the frame's size, or the picture-in-picture box's for
/// `slides`), and its landmarks there.
fn frame_portrait(
    portrait: &RgbImage,
    lm: &[[f32; 2]; 68],
    opts: &LookOptions<'_>,
) -> Result<(RgbImage, [[f32; 2]; 68])> {
    let (w, h) = opts.size;
    let framed = |fw: u32, fh: u32| -> Result<(RgbImage, [[f32; 2]; 68])> {
        Ok(match opts.framing {
            Framing::Full => cover(portrait, lm, fw, fh),
            Framing::Head => framing::head_and_shoulders(portrait, lm, fw, fh)?,
        })
    };
    match opts.layout {
        Layout::Fill => framed(w, h),
        Layout::Slides => match pip_box(portrait, opts) {
            Some(b) => framed(b.w, b.h),
            None => framed(w, h),
        },
        Layout::Fit => {
            let (iw, ih) = inner_box(portrait.dimensions(), w, h);
            let (inner, lm) = framed(iw, ih)?;
            let mut canvas = backdrop(opts.background, portrait, w, h);
            let (x0, y0) = ((w - iw) / 2, (h - ih) / 2);
            replace(&mut canvas, &inner, i64::from(x0), i64::from(y0));
            let moved = lm.map(|p| [p[0] + x0 as f32, p[1] + y0 as f32]);
            Ok((canvas, moved))
        }
    }
}

/// Builds the look and its key.
pub fn prepare(
    portrait: &RgbImage,
    landmarks: &Landmarks,
    opts: &LookOptions<'_>,
    video: VideoSettings,
) -> Result<(Look, Key)> {
    let (w, h) = opts.size;
    let (base, lm) = frame_portrait(portrait, &landmarks.points, opts)?;
    let rig = FaceRig::new(&base, &lm)?;
    let pip = pip_box(portrait, opts);
    let lm_bits: Vec<u8> = lm
        .iter()
        .flat_map(|p| p.iter().flat_map(|v| v.to_bits().to_le_bytes()))
        .collect();
    let key = KeyBuilder::new("look")
        .bytes("pixels", base.as_raw())
        .u64("width", u64::from(w))
        .u64("height", u64::from(h))
        .bytes("landmarks", &lm_bits)
        .str("framing", opts.framing.tag())
        .u64("still", u64::from(opts.still))
        .u64("seed", opts.seed)
        .u64("fps", u64::from(video.fps))
        .u64("crf", u64::from(video.crf))
        .str("preset", &video.preset)
        .finish();
    if video.width != w || video.height != h {
        return Err(Error::Usage(format!(
            "video settings {}x{} differ from the framed size {w}x{h}",
            video.width, video.height
        )));
    }
    Ok((
        Look {
            rig,
            landmarks: lm,
            pip,
            slides: None,
            video,
            still: opts.still,
            seed: opts.seed,
        },
        key,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_size_caps_and_evens() {
        assert_eq!(default_size(512, 512), (512, 512));
        assert_eq!(default_size(2000, 1500), (1080, 810));
        assert_eq!(default_size(513, 301), (514, 302));
    }

    #[test]
    fn far_shapes_fit_and_the_box_keeps_the_portraits_shape() {
        assert_eq!(default_layout((512, 512), (1280, 720)), Layout::Fit);
        assert_eq!(default_layout((512, 512), (600, 560)), Layout::Fill);
        assert_eq!(default_layout((600, 800), (1920, 1080)), Layout::Fit);
        assert_eq!(inner_box((512, 512), 1280, 720), (720, 720));
        assert_eq!(inner_box((600, 800), 1920, 1080), (810, 1080));
        assert_eq!(inner_box((2000, 800), 1280, 720), (1280, 512));
    }

    #[test]
    fn a_fit_portrait_sits_in_the_middle_on_its_background() {
        let mut img = RgbImage::from_pixel(100, 100, Rgb([200, 200, 200]));
        img.put_pixel(50, 50, Rgb([255, 0, 0]));
        let mut lm = [[50.0f32, 50.0]; 68];
        lm[0] = [10.0, 20.0];
        let background = Backdrop::Color([1, 2, 3]);
        let opts = LookOptions {
            framing: Framing::Full,
            layout: Layout::Fit,
            background: &background,
            pip: Corner::default(),
            pip_size: PipSize::default(),
            size: (400, 200),
            still: true,
            seed: 0,
        };
        let (out, moved) = frame_portrait(&img, &lm, &opts).unwrap();
        assert_eq!(out.dimensions(), (400, 200));
        assert_eq!(out.get_pixel(5, 100).0, [1, 2, 3]);
        assert_eq!(out.get_pixel(395, 100).0, [1, 2, 3]);
        // 200x200 in the middle: 100..300, scaled 2x.
        assert!(
            (moved[0][0] - 120.5).abs() < 0.6 && (moved[0][1] - 40.5).abs() < 0.6,
            "{:?}",
            moved[0]
        );
        let centre = out
            .get_pixel(moved[1][0].round() as u32, moved[1][1].round() as u32)
            .0;
        assert!(centre[0] > 220 && centre[1] < 120, "{centre:?}");
    }

    #[test]
    fn cover_keeps_landmarks_on_the_same_pixels() {
        let mut img = RgbImage::new(200, 100);
        img.put_pixel(150, 50, image::Rgb([255, 0, 0]));
        let mut lm = [[100.0f32, 50.0]; 68];
        lm[0] = [150.0, 50.0];
        let (out, moved) = cover(&img, &lm, 100, 100);
        assert_eq!(out.dimensions(), (100, 100));
        assert!((moved[0][0] - 100.0).abs() < 0.6, "{:?}", moved[0]);
        assert!((moved[1][0] - 50.0).abs() < 0.6);
    }
}
