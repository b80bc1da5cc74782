//! `--framing head`: crop a head-and-shoulders box around the face and scale it to the output.
//!
//! Input: the portrait, its 68 landmarks and the output size. Output: the framed image and the
//! landmarks moved into it.
//! Invariants: the box has the output's aspect ratio, lies inside the portrait (shrunk if it
//! would not fit), puts the eyes about 40 % from the top and keeps the top of the head and the
//! shoulders; resampling is Lanczos3 (image's `resize`), landmarks follow the same mapping.

use super::RenderError;
use super::geometry::{P, len, mean, sub};
use image::RgbImage;
use image::imageops::{FilterType, crop_imm, resize};

/// Largest output side accepted (guards against absurd allocations).
const MAX_SIDE: u32 = 16384;

/// Crops `img` around the face and resizes the crop to `out_w` × `out_h`.
pub fn head_and_shoulders(
    img: &RgbImage,
    landmarks: &[[f32; 2]; 68],
    out_w: u32,
    out_h: u32,
) -> Result<(RgbImage, [[f32; 2]; 68]), RenderError> {
    if out_w == 0 || out_h == 0 || out_w > MAX_SIDE || out_h > MAX_SIDE {
        return Err(RenderError::BadOutputSize {
            width: out_w,
            height: out_h,
        });
    }
    super::validate(img, landmarks)?;
    let (iw, ih) = (img.width() as f32, img.height() as f32);
    let brow = mean(&landmarks[17..27]);
    let eyes = mean(&landmarks[36..48]);
    let chin = landmarks[8];
    let face_h = len(sub(chin, brow));
    let aspect = out_w as f32 / out_h as f32;
    // Top of the head ≈ 0.8 face heights above the brows, shoulders ≈ 1.3 below the chin.
    let mut h = 3.1 * face_h;
    let mut w = h * aspect;
    let fit = (iw / w).min(ih / h).min(1.0);
    w *= fit;
    h *= fit;
    let cx = eyes[0];
    let top = eyes[1] - 0.4 * h;
    let x0 = (cx - 0.5 * w).clamp(0.0, iw - w);
    let y0 = top.clamp(0.0, ih - h);
    let (cx0, cy0) = (x0.round() as u32, y0.round() as u32);
    let cw = (w.round() as u32).clamp(1, img.width() - cx0);
    let ch = (h.round() as u32).clamp(1, img.height() - cy0);
    let crop = crop_imm(img, cx0, cy0, cw, ch).to_image();
    let out = resize(&crop, out_w, out_h, FilterType::Lanczos3);
    // Pixel edges map to pixel edges: centre i of the crop ↦ (i + ½)·scale − ½.
    let (sx, sy) = (out_w as f32 / cw as f32, out_h as f32 / ch as f32);
    let moved = landmarks.map(|p: P| {
        [
            (p[0] - cx0 as f32 + 0.5) * sx - 0.5,
            (p[1] - cy0 as f32 + 0.5) * sy - 0.5,
        ]
    });
    Ok((out, moved))
}
