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

mod eyes;
pub mod framing;
mod geometry;
mod head;
mod idle;
mod mouth;
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

/// Integer pixel box, end-exclusive.
#[derive(Debug, Clone, Copy)]
struct Roi {
    x0: usize,
    y0: usize,
    x1: usize,
    y1: usize,
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

    /// Width in pixels of the frame border that head motion never touches (12 % of the
    /// shorter side, at least 8 px).
    pub fn border(&self) -> u32 {
        head::border_margin(self.base.width, self.base.height) as u32
    }

    /// Renders one frame into `out` (RGB24, `width × height × 3` bytes).
    ///
    /// The changing region is walked in cells of [`CELL`] pixels. Where the warp is smooth (away
    /// from the mouth opening and its lip edges, outside a blinking eye) the source position is
    /// computed exactly at a cell's corners and interpolated between them, and each pixel costs
    /// one fixed-point bilinear sample. A cell whose centre the interpolation misses by more
    /// than [`SMOOTH_TOLERANCE`] px, or that comes near the opening, is split in four, down to
    /// [`MIN_CELL`]; what is still not smooth then, and every cell over a blinking eye, is shaded
    /// pixel by pixel as [`render_exact`](Self::render_exact) does. So a frame costs in
    /// proportion to the pixels the pose moves, with a small constant, however large the face.
    ///
    /// # Panics
    /// If `out` has the wrong length.
    pub fn render(&self, frame: &FramePose, out: &mut [u8]) {
        let (f, roi) = self.prepare(frame, out);
        let xs = grid(roi.x0, roi.x1);
        let ys = grid(roi.y0, roi.y1);
        let mut above: Vec<Warp> = xs.iter().map(|&x| self.warp(&f, x, ys[0])).collect();
        let mut below = Vec::with_capacity(xs.len());
        for rows in ys.windows(2) {
            let (y0, y1) = (rows[0], rows[1]);
            below.clear();
            below.extend(xs.iter().map(|&x| self.warp(&f, x, y1)));
            for (i, cols) in xs.windows(2).enumerate() {
                let cell = Roi {
                    x0: cols[0],
                    y0,
                    x1: cols[1],
                    y1,
                };
                let corners = [above[i], above[i + 1], below[i], below[i + 1]];
                self.fill_cell(&f, cell, corners, out);
            }
            std::mem::swap(&mut above, &mut below);
        }
    }

    /// Checks `out`, fills it with the portrait and prepares the pose: what every pixel needs,
    /// and the region the pose can change.
    fn prepare(&self, frame: &FramePose, out: &mut [u8]) -> (Pose, Roi) {
        assert_eq!(
            out.len(),
            self.base.data.len(),
            "frame buffer must be width × height × 3 bytes"
        );
        out.copy_from_slice(&self.base.data);
        let (w, h) = (self.base.width, self.base.height);
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
            band: self.mouth.smooth_margin(&frame.mouth),
        };
        (f, roi)
    }

    /// The same frame as [`render`](Self::render), every pixel of the changing region shaded
    /// exactly (no interpolation): the reference `render` is measured against, several times
    /// slower on a large face.
    ///
    /// # Panics
    /// If `out` has the wrong length.
    pub fn render_exact(&self, frame: &FramePose, out: &mut [u8]) {
        let (f, roi) = self.prepare(frame, out);
        let w = self.base.width;
        for y in roi.y0..roi.y1 {
            for x in roi.x0..roi.x1 {
                let i = (y * w + x) * 3;
                self.shade_pixel(&f, x, y, &mut out[i..i + 3]);
            }
        }
    }

    /// Where destination pixel `(x, y)` takes its colour from, and how far it is from where
    /// the mouth does more than move pixels.
    fn warp(&self, f: &Pose, x: usize, y: usize) -> Warp {
        let q = match &f.head {
            Some(hf) => self.head.source(hf, x, y),
            None => [x as f32, y as f32],
        };
        let plain = Warp {
            src: q,
            clear: f32::INFINITY,
        };
        if !f.mouth_roi.contains(x, y) {
            return plain;
        }
        match self.mouth.locate(&f.mouth, q) {
            Some(at) => {
                let y = at.local[1];
                Warp {
                    src: at.src,
                    clear: (at.top - f.band - y).max(y - at.bot - f.band),
                }
            }
            None => plain,
        }
    }

    /// Draws one cell from its corners' warps (top-left, top-right, bottom-left, bottom-right;
    /// the right and bottom corners are the next cells' first pixels).
    fn fill_cell(&self, f: &Pose, cell: Roi, c: [Warp; 4], out: &mut [u8]) {
        let (cw, ch) = (cell.x1 - cell.x0, cell.y1 - cell.y0);
        if f.eye_roi.is_some_and(|e| e.overlaps(cell)) {
            return self.shade_cell(f, cell, out);
        }
        // Room for the lip edges to curve and the pixels to lie anywhere in the cell.
        let room = 1.5 * cw.max(ch) as f32 + 1.0;
        let (mx, my) = (cell.x0 + cw / 2, cell.y0 + ch / 2);
        let centre = self.warp(f, mx, my);
        let guess = bilerp(
            &c,
            (mx - cell.x0) as f32 / cw as f32,
            (my - cell.y0) as f32 / ch as f32,
        );
        let smooth = c.iter().chain([&centre]).all(|w| w.clear >= room)
            && (centre.src[0] - guess[0]).abs() <= SMOOTH_TOLERANCE
            && (centre.src[1] - guess[1]).abs() <= SMOOTH_TOLERANCE;
        if smooth {
            return self.sample_cell(f, cell, &c, out);
        }
        if cw.min(ch) < 2 * MIN_CELL {
            return self.shade_cell(f, cell, out);
        }
        let (top, bottom) = (self.warp(f, mx, cell.y0), self.warp(f, mx, cell.y1));
        let (left, right) = (self.warp(f, cell.x0, my), self.warp(f, cell.x1, my));
        let quarters = [
            (cell.x0, cell.y0, mx, my, [c[0], top, left, centre]),
            (mx, cell.y0, cell.x1, my, [top, c[1], centre, right]),
            (cell.x0, my, mx, cell.y1, [left, centre, c[2], bottom]),
            (mx, my, cell.x1, cell.y1, [centre, right, bottom, c[3]]),
        ];
        for (x0, y0, x1, y1, corners) in quarters {
            self.fill_cell(f, Roi { x0, y0, x1, y1 }, corners, out);
        }
    }

    /// A smooth cell: each pixel one fixed-point bilinear sample at the interpolated source.
    /// Nothing to do when the pose moves none of its corners; a cell where it moves only some
    /// lies on the edge of the moving region and is shaded exactly, so that every pixel the
    /// pose does not move stays the portrait's, bit for bit.
    fn sample_cell(&self, f: &Pose, cell: Roi, c: &[Warp; 4], out: &mut [u8]) {
        let still = [
            c[0].src == [cell.x0 as f32, cell.y0 as f32],
            c[1].src == [cell.x1 as f32, cell.y0 as f32],
            c[2].src == [cell.x0 as f32, cell.y1 as f32],
            c[3].src == [cell.x1 as f32, cell.y1 as f32],
        ];
        if still.iter().all(|&s| s) {
            return;
        }
        if still.iter().any(|&s| s) {
            return self.shade_cell(f, cell, out);
        }
        let (cw, ch) = ((cell.x1 - cell.x0) as f32, (cell.y1 - cell.y0) as f32);
        let w = self.base.width;
        for y in cell.y0..cell.y1 {
            let ty = (y - cell.y0) as f32 / ch;
            let start = bilerp(c, 0.0, ty);
            let end = bilerp(c, 1.0, ty);
            let step = [(end[0] - start[0]) / cw, (end[1] - start[1]) / cw];
            let row = &mut out[(y * w + cell.x0) * 3..(y * w + cell.x1) * 3];
            self.base.sample_row(row, start, step);
        }
    }

    /// Every pixel of `cell` shaded exactly.
    fn shade_cell(&self, f: &Pose, cell: Roi, out: &mut [u8]) {
        let w = self.base.width;
        for y in cell.y0..cell.y1 {
            for x in cell.x0..cell.x1 {
                let i = (y * w + x) * 3;
                self.shade_pixel(f, x, y, &mut out[i..i + 3]);
            }
        }
    }

    /// One pixel the exact way: the mouth, else a blinking eye, else the head warp alone.
    fn shade_pixel(&self, f: &Pose, x: usize, y: usize, px: &mut [u8]) {
        let q = match &f.head {
            Some(hf) => self.head.source(hf, x, y),
            None => [x as f32, y as f32],
        };
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

/// Side of the cells a frame is walked in (see [`FaceRig::render`]), and of the smallest a
/// cell is split into.
const CELL: usize = 16;
const MIN_CELL: usize = 2;
/// How far (px) the interpolated source position may miss the exact one at a cell's centre.
const SMOOTH_TOLERANCE: f32 = 0.25;

/// Grid lines every [`CELL`] pixels from `a`, ending exactly at `b` (the last cell may be
/// narrower).
fn grid(a: usize, b: usize) -> Vec<usize> {
    let mut g: Vec<usize> = (a..b).step_by(CELL).collect();
    g.push(b);
    g
}

/// One frame's pose, prepared: what every pixel of the frame needs.
struct Pose {
    mouth: mouth::MouthFrame,
    blink: f32,
    head: Option<head::HeadFrame>,
    mouth_roi: Roi,
    eye_roi: Option<Roi>,
    /// Width (px, mouth frame) of the band about the opening where the mouth shades more than
    /// it moves.
    band: f32,
}

/// The warp at one grid point.
#[derive(Debug, Clone, Copy)]
struct Warp {
    src: P,
    /// Distance (px, mouth frame) to the band about the opening where the mouth shades more
    /// than it moves; infinite outside the mouth.
    clear: f32,
}

/// The source position at `(tx, ty)` ∈ [0, 1]² of a cell, from its corners' warps.
#[inline]
fn bilerp(c: &[Warp; 4], tx: f32, ty: f32) -> P {
    let lerp = |a: P, b: P, t: f32| [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t];
    lerp(
        lerp(c[0].src, c[1].src, tx),
        lerp(c[2].src, c[3].src, tx),
        ty,
    )
}

#[cfg(test)]
mod tests;
