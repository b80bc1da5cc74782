//! The picture side of a render: portrait → framed base image, its landmarks, the face rig, and a
//! key for everything that changes how frames look.
//!
//! Input: the portrait, its face analysis, `--framing`, the output size and fps/encoder settings.
//! Output: a [`Look`] and its cache key. The landmarks are found once on the full-resolution
//! portrait and carried through the same crop and scaling as the pixels.

use image::RgbImage;
use image::imageops::{FilterType, crop_imm, resize};

use crate::cache::{Key, KeyBuilder};
use crate::error::{Error, Result};
use crate::face::Landmarks;
use crate::media::VideoSettings;
use crate::render::{FaceRig, framing};
use crate::script::DEFAULT_MAX_SIDE;
use crate::settings::Framing;

/// Everything about the picture, shared by all chunks of a render.
pub struct Look {
    pub rig: FaceRig,
    /// The 68 landmarks in frame coordinates (for crops and checks, not for drawing).
    pub landmarks: [[f32; 2]; 68],
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
    let out = resize(&crop, w, h, FilterType::Lanczos3);
    let (sx, sy) = (w as f32 / cw as f32, h as f32 / ch as f32);
    let moved = lm.map(|p| {
        [
            (p[0] - x0 as f32 + 0.5) * sx - 0.5,
            (p[1] - y0 as f32 + 0.5) * sy - 0.5,
        ]
    });
    (out, moved)
}

/// Everything but the encoder settings that changes frames.
pub struct LookOptions {
    pub framing: Framing,
    pub size: (u32, u32),
    pub still: bool,
    pub seed: u64,
}

/// Builds the look and its key.
pub fn prepare(
    portrait: &RgbImage,
    landmarks: &Landmarks,
    opts: &LookOptions,
    video: VideoSettings,
) -> Result<(Look, Key)> {
    let (w, h) = opts.size;
    let (base, lm) = match opts.framing {
        Framing::Full => cover(portrait, &landmarks.points, w, h),
        Framing::Head => framing::head_and_shoulders(portrait, &landmarks.points, w, h)?,
    };
    let rig = FaceRig::new(&base, &lm)?;
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
