//! Frame synthesis: the portrait + one [`FramePose`] → one RGB24 frame of the portrait's size.
//!
//! Input: the portrait (RGB) and its 68 iBUG landmarks (pixel units, pixel centres at integer
//! coordinates), once; then a pose per frame. Output: RGB24 frames.
//! Invariants:
//! - Everything that does not depend on the pose (lip curves, colours, the head weight map) is
//!   computed in [`FaceRig::new`]; a frame copies the portrait and then recomputes only the
//!   pixels inside the regions the pose can change (mouth + jaw, blinking eyes, moving head).
//! - One backward warp per pixel, bilinear sampling of the portrait (never of a warped
//!   frame), so nothing is resampled twice and the mouth stays as sharp as the portrait.
//! - All displacements fade to exactly zero with smoothstep falloffs: no box, no seam; pixels
//!   outside the regions are bit-identical to the portrait. Head motion never reaches the
//!   outer [`border`](FaceRig::border) of the frame; the mouth and eye regions are local to
//!   the face (they reach the border only if the face itself touches it).
//! - The mouth is synthesised from the pose, not from the portrait's expression: a smiling,
//!   open mouth closes fully (lips drawn together, lip texture, a thin seam).
//!
//! Head motion and blinks come from [`Idle`] (or any caller); `--still` means no head motion but
//! blinks stay (see [`Idle`]).

mod cells;
mod eyes;
pub mod framing;
mod geometry;
mod head;
mod idle;
mod mouth;
mod rows;
mod sample;

use crate::lipsync::MouthPose;
use geometry::{P, len, mean, sub};
use sample::{Rgb, put};

pub use idle::Idle;

/// Small rigid head motion. Shifts are in inter-ocular distances (so the same pose suits any
/// portrait size; 0.02 ≈ 1.2 px for eyes 60 px apart), roll in radians about the neck. The
/// renderer clamps shifts to ±0.15 and roll to ±0.1.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HeadPose {
    pub dx: f32,
    pub dy: f32,
    pub roll: f32,
}

/// Everything that varies per frame.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FramePose {
    pub mouth: MouthPose,
    /// 0 = eyes open (as in the portrait) .. 1 = closed.
    pub blink: f32,
    pub head: HeadPose,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    #[error("portrait is {width}x{height} px; at least 32x32 is needed")]
    ImageTooSmall { width: u32, height: u32 },
    #[error("landmark {index} at ({x}, {y}) is not a usable point inside the portrait")]
    BadLandmark { index: usize, x: f32, y: f32 },
    #[error(
        "face too small to animate: mouth {mouth_px:.1} px, eyes {iod_px:.1} px apart (need 8 and 10)"
    )]
    FaceTooSmall { mouth_px: f32, iod_px: f32 },
    #[error(
        "face too small to animate: an eye is {eye_px:.1} px from corner to corner (need 4); use a larger photo or crop closer to the face"
    )]
    EyeTooSmall { eye_px: f32 },
    #[error("landmarks do not describe an upright face: {0}")]
    NotAFace(&'static str),
    #[error("output size {width}x{height} is not between 1 and 16384 on each side")]
    BadOutputSize { width: u32, height: u32 },
}

/// Checks the portrait and landmarks are usable.
pub(crate) fn validate(img: &image::RgbImage, lm: &[[f32; 2]; 68]) -> Result<(), RenderError> {
    let (w, h) = (img.width(), img.height());
    if w < 32 || h < 32 {
        return Err(RenderError::ImageTooSmall {
            width: w,
            height: h,
        });
    }
    let (wf, hf) = (w as f32, h as f32);
    for (index, &[x, y]) in lm.iter().enumerate() {
        // The jaw line may leave a tight crop; the features we move must be inside.
        let slack = if index < 17 { wf.max(hf) } else { 0.5 };
        let ok = x.is_finite()
            && y.is_finite()
            && x >= -slack
            && y >= -slack
            && x <= wf - 1.0 + slack
            && y <= hf - 1.0 + slack;
        if !ok {
            return Err(RenderError::BadLandmark { index, x, y });
        }
    }
    let mouth_px = len(sub(lm[54], lm[48]));
    let eye_line = sub(mean(&lm[42..48]), mean(&lm[36..42]));
    let iod_px = len(eye_line);
    if mouth_px < 8.0 || iod_px < 10.0 {
        return Err(RenderError::FaceTooSmall { mouth_px, iod_px });
    }
    if eye_line[0] <= eye_line[1].abs() {
        return Err(RenderError::NotAFace("eye line tilted more than 45°"));
    }
    let mouth_dir = sub(lm[54], lm[48]);
    if geometry::dot(mouth_dir, eye_line) < 0.7 * mouth_px * iod_px {
        return Err(RenderError::NotAFace(
            "mouth and eye lines differ by more than 45°",
        ));
    }
    // "Down" (eye line turned clockwise) must point from the eyes to the mouth.
    let down = [-eye_line[1], eye_line[0]];
    let to_mouth = sub(mean(&lm[48..68]), mean(&lm[36..48]));
    if geometry::dot(down, to_mouth) < 0.5 * iod_px * iod_px {
        return Err(RenderError::NotAFace("mouth is not below the eyes"));
    }
    for first in [36, 42] {
        let eye_px = len(sub(lm[first + 3], lm[first]));
        if eye_px < 4.0 {
            return Err(RenderError::EyeTooSmall { eye_px });
        }
    }
    Ok(())
}

/// A portrait prepared for fast frame synthesis.
#[derive(Debug, Clone)]
pub struct FaceRig {
    base: Rgb,
    mouth: mouth::MouthRig,
    eyes: [eyes::EyeRig; 2],
    head: head::HeadRig,
}

/// Integer pixel box, end-exclusive: the region a frame's pose can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roi {
    pub x0: usize,
    pub y0: usize,
    pub x1: usize,
    pub y1: usize,
}

impl Roi {
    fn from_bounds(b: [f32; 4], w: usize, h: usize) -> Roi {
        let c = |v: f32, hi: usize| v.clamp(0.0, hi as f32) as usize;
        Roi {
            x0: c(b[0].floor() - 1.0, w),
            y0: c(b[1].floor() - 1.0, h),
            x1: c(b[2].ceil() + 2.0, w),
            y1: c(b[3].ceil() + 2.0, h),
        }
    }

    fn contains(&self, x: usize, y: usize) -> bool {
        x >= self.x0 && x < self.x1 && y >= self.y0 && y < self.y1
    }

    fn overlaps(&self, o: Roi) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    fn union(self, o: Roi) -> Roi {
        Roi {
            x0: self.x0.min(o.x0),
            y0: self.y0.min(o.y0),
            x1: self.x1.max(o.x1),
            y1: self.y1.max(o.y1),
        }
    }
}

impl FaceRig {
    /// Prepares `portrait` with its 68 landmarks. Fails on a portrait under 32 px, landmarks
    /// outside it or non-finite, a face too small to animate, or landmarks that are not an
    /// upright face (tilts up to ~45° are accepted).
    pub fn new(
        portrait: &image::RgbImage,
        landmarks: &[[f32; 2]; 68],
    ) -> Result<FaceRig, RenderError> {
        validate(portrait, landmarks)?;
        let base = Rgb::from_image(portrait);
        let lm: [P; 68] = *landmarks;
        let mouth = mouth::MouthRig::new(&base, &lm);
        let eyes = [
            eyes::EyeRig::new(&base, &lm, 36, lm[19]),
            eyes::EyeRig::new(&base, &lm, 42, lm[24]),
        ];
        let head = head::HeadRig::new(base.width, base.height, &lm);
        Ok(FaceRig {
            base,
            mouth,
            eyes,
            head,
        })
    }

    pub fn width(&self) -> u32 {
        self.base.width as u32
    }

    pub fn height(&self) -> u32 {
        self.base.height as u32
    }

    /// The portrait as the rig holds it (RGB24): every frame's pixels outside the region
    /// [`render`](Self::render) returns.
    pub fn base_frame(&self) -> &[u8] {
        &self.base.data
    }

    /// Width in pixels of the frame border that head motion never touches (12 % of the
    /// shorter side, at least 8 px).
    pub fn border(&self) -> u32 {
        head::border_margin(self.base.width, self.base.height) as u32
    }

    /// Renders one frame into `out` (RGB24, `width × height × 3` bytes) and returns the region
    /// outside which it is bit-identical to [`base_frame`](Self::base_frame) (what an encoder
    /// needs to convert again).
    ///
    /// Outside the boxes the mouth and a blinking eye can reach, only the head moves a pixel:
    /// its exact source is worked out row by row and the pixel drawn as
    /// [`render_exact`](Self::render_exact) draws it, bit for bit (see `rows.rs`). Inside them,
    /// where the warp only moves pixels (away from the mouth opening and its lips' edges,
    /// outside a blinking eye) its source positions are computed exactly on a grid and
    /// interpolated between, one fixed-point bilinear sample a pixel; everything else is shaded
    /// exactly (see `cells.rs`). A frame so costs in proportion to the pixels the pose moves,
    /// with a small constant, however large the face; its source positions stay within about a
    /// tenth of a pixel of the exact frame's.
    ///
    /// # Panics
    /// If `out` has the wrong length.
    pub fn render(&self, frame: &FramePose, out: &mut [u8]) -> Roi {
        let (f, roi) = self.prepare(frame, out, None);
        self.render_regions(&f, roi, out);
        roi
    }

    /// [`render`](Self::render) into `out` that holds the last frame this rig rendered, whose
    /// region was `last`: only `last` goes back to the portrait, not the whole frame (that copy
    /// was 4% of a 1280x720 `fit` render's CPU, and grows with the frame, not the face).
    ///
    /// # Panics
    /// If `out` has the wrong length.
    pub fn render_over(&self, frame: &FramePose, out: &mut [u8], last: Roi) -> Roi {
        let (f, roi) = self.prepare(frame, out, Some(last));
        self.render_regions(&f, roi, out);
        roi
    }

    /// The same frame as [`render`](Self::render) with every pixel of the changing region shaded
    /// exactly, nothing interpolated: the reference `render` is measured against, about 4-5
    /// times slower on a close-up.
    ///
    /// # Panics
    /// If `out` has the wrong length.
    pub fn render_exact(&self, frame: &FramePose, out: &mut [u8]) {
        let (f, roi) = self.prepare(frame, out, None);
        let w = self.base.width;
        for y in roi.y0..roi.y1 {
            for x in roi.x0..roi.x1 {
                let i = (y * w + x) * 3;
                self.shade_pixel(&f, x, y, &mut out[i..i + 3]);
            }
        }
    }

    /// Checks `out`, fills it with the portrait (only inside `last`, when `out` is the frame
    /// whose region that was) and prepares the pose: what every pixel needs, and the region the
    /// pose can change.
    fn prepare(&self, frame: &FramePose, out: &mut [u8], last: Option<Roi>) -> (Pose, Roi) {
        assert_eq!(
            out.len(),
            self.base.data.len(),
            "frame buffer must be width × height × 3 bytes"
        );
        let (w, h) = (self.base.width, self.base.height);
        match last {
            Some(r) => {
                let cols = r.x0.min(w) * 3..r.x1.min(w) * 3;
                for y in r.y0..r.y1.min(h) {
                    let row = y * w * 3;
                    let span = row + cols.start..row + cols.end;
                    out[span.clone()].copy_from_slice(&self.base.data[span]);
                }
            }
            None => out.copy_from_slice(&self.base.data),
        }
        let mf = self.mouth.frame(&frame.mouth);
        let blink = if frame.blink.is_finite() {
            frame.blink.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let head = self.head.frame(&frame.head);
        // Regions in destination pixels: where the mouth and the eyes can reach once the head
        // has moved them, and the union of everything that can change.
        let shift = head.as_ref().map_or(0.0, |hf| self.head.max_shift(hf));
        let grown = |b: [f32; 4]| [b[0] - shift, b[1] - shift, b[2] + shift, b[3] + shift];
        let mouth_roi = Roi::from_bounds(grown(self.mouth.bounds()), w, h);
        let eye_roi = (blink > 0.0).then(|| {
            let [a, b] = &self.eyes;
            Roi::from_bounds(grown(a.bounds()), w, h).union(Roi::from_bounds(
                grown(b.bounds()),
                w,
                h,
            ))
        });
        let mut roi = mouth_roi;
        if let Some(e) = eye_roi {
            roi = roi.union(e);
        }
        if let Some(hf) = &head {
            roi = roi.union(Roi::from_bounds(self.head.bounds(hf), w, h));
        }
        let f = Pose {
            mouth: mf,
            blink,
            head,
            mouth_roi,
            eye_roi,
        };
        (f, roi)
    }

    /// Where destination pixel `(x, y)` comes from once the head motion is undone.
    #[inline]
    fn head_source(&self, f: &Pose, x: usize, y: usize) -> P {
        match &f.head {
            Some(hf) => self.head.source(hf, x, y),
            None => [x as f32, y as f32],
        }
    }

    /// One pixel the exact way: the mouth, else a blinking eye, else the head warp alone.
    fn shade_pixel(&self, f: &Pose, x: usize, y: usize, px: &mut [u8]) {
        let q = self.head_source(f, x, y);
        let c = if f.mouth_roi.contains(x, y) {
            self.mouth.shade(&f.mouth, &self.base, q)
        } else {
            None
        }
        .or_else(|| match f.eye_roi {
            Some(e) if e.contains(x, y) => self.eyes[0]
                .shade(&self.base, f.blink, q)
                .or_else(|| self.eyes[1].shade(&self.base, f.blink, q)),
            _ => None,
        });
        match c {
            Some(c) => put(px, 0, c),
            None if q != [x as f32, y as f32] => {
                px.copy_from_slice(&self.base.bilinear_u8(q[0], q[1]));
            }
            None => {}
        }
    }
}

/// One frame's pose, prepared: what every pixel of the frame needs. A pure function of the
/// [`FramePose`] and the rig, so a frame has no state beyond its pose.
struct Pose {
    mouth: mouth::MouthFrame,
    blink: f32,
    head: Option<head::HeadFrame>,
    mouth_roi: Roi,
    eye_roi: Option<Roi>,
}

#[cfg(test)]
mod tests;
