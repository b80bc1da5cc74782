//! Small rigid head motion (shift + roll about the neck) blended into a still background.
//!
//! Input: image size and landmarks. Output: per destination pixel, the source position after
//! undoing the head motion.
//! Invariants: the motion weight is 1 on the head, falls smoothly to 0 around it, and is
//! exactly 0 within [`border_margin`] of the image edge, so the frame border and the
//! background far from the face never change; the weight map is computed once.

use super::HeadPose;
use super::geometry::{Frame, P, len, mean, smoothstep, sub};

/// Width of the image border that head motion never touches.
pub(crate) fn border_margin(width: usize, height: usize) -> f32 {
    (0.12 * width.min(height) as f32).max(8.0)
}

#[derive(Debug, Clone)]
pub(crate) struct HeadRig {
    /// Weight box in image pixels: x0, y0, width, height.
    x0: usize,
    y0: usize,
    bw: usize,
    bh: usize,
    weight: Vec<f32>,
    pivot: P,
    /// Inter-ocular distance: the unit of [`HeadPose`] shifts.
    iod: f32,
}

/// The motion of one frame.
pub(crate) struct HeadFrame {
    t: P,
    cos: f32,
    sin: f32,
}

impl HeadRig {
    pub fn new(width: usize, height: usize, lm: &[P; 68]) -> HeadRig {
        let eye_l = mean(&lm[36..42]);
        let eye_r = mean(&lm[42..48]);
        let iod = len(sub(eye_r, eye_l));
        let brow = mean(&lm[17..27]);
        let chin = lm[8];
        let face_h = len(sub(chin, brow)).max(iod);
        let face_w = len(sub(lm[16], lm[0])).max(iod);
        // Head ellipse in the eye-line frame: centre a quarter of the way from brows to chin.
        let centre = [
            brow[0] + 0.25 * (chin[0] - brow[0]),
            brow[1] + 0.25 * (chin[1] - brow[1]),
        ];
        let frame = Frame::new(centre, sub(eye_r, eye_l));
        let (a, b_up, b_down) = (0.75 * face_w, 1.0 * face_h, 0.85 * face_h);
        let (fade_up, fade_down) = (1.6f32, 1.35f32);
        let margin = border_margin(width, height);
        let ramp = (0.08 * width.min(height) as f32).max(8.0);
        let reach = a.max(b_up).max(b_down) * fade_up;
        let clampi = |v: f32, hi: usize| v.clamp(0.0, hi as f32) as usize;
        let x0 = clampi(centre[0] - reach, width);
        let x1 = clampi(centre[0] + reach + 1.0, width);
        let y0 = clampi(centre[1] - reach, height);
        let y1 = clampi(centre[1] + reach + 1.0, height);
        let (bw, bh) = (x1 - x0, y1 - y0);
        let mut weight = vec![0.0f32; bw * bh];
        for y in 0..bh {
            for x in 0..bw {
                let p = [(x0 + x) as f32, (y0 + y) as f32];
                let [lx, ly] = frame.to_local(p);
                let (b, fade) = if ly < 0.0 {
                    (b_up, fade_up)
                } else {
                    (b_down, fade_down)
                };
                let r = ((lx / a).powi(2) + (ly / b).powi(2)).sqrt();
                let border = p[0]
                    .min(p[1])
                    .min((width - 1) as f32 - p[0])
                    .min((height - 1) as f32 - p[1]);
                weight[y * bw + x] =
                    (1.0 - smoothstep(1.0, fade, r)) * smoothstep(margin, margin + ramp, border);
            }
        }
        HeadRig {
            x0,
            y0,
            bw,
            bh,
            weight,
            pivot: [
                chin[0] + 0.3 * (chin[0] - brow[0]),
                chin[1] + 0.3 * (chin[1] - brow[1]),
            ],
            iod,
        }
    }

    /// Image-space bounding box of the moving region, grown by the largest displacement.
    pub fn bounds(&self, f: &HeadFrame) -> [f32; 4] {
        let grow = self.max_shift(f);
        [
            self.x0 as f32 - grow,
            self.y0 as f32 - grow,
            (self.x0 + self.bw) as f32 + grow,
            (self.y0 + self.bh) as f32 + grow,
        ]
    }

    /// The largest distance any pixel moves in this frame, plus a pixel of margin.
    pub fn max_shift(&self, f: &HeadFrame) -> f32 {
        let corners = [
            [self.x0 as f32, self.y0 as f32],
            [(self.x0 + self.bw) as f32, self.y0 as f32],
            [self.x0 as f32, (self.y0 + self.bh) as f32],
            [(self.x0 + self.bw) as f32, (self.y0 + self.bh) as f32],
        ];
        corners
            .iter()
            .map(|&c| len(self.delta(f, c)))
            .fold(0.0, f32::max)
            + 1.0
    }

    /// `None` when the pose does not move the head.
    pub fn frame(&self, pose: &HeadPose) -> Option<HeadFrame> {
        let c = |v: f32, lim: f32| {
            if v.is_finite() {
                v.clamp(-lim, lim)
            } else {
                0.0
            }
        };
        let (dx, dy, roll) = (c(pose.dx, 0.15), c(pose.dy, 0.15), c(pose.roll, 0.1));
        if dx == 0.0 && dy == 0.0 && roll == 0.0 {
            return None;
        }
        Some(HeadFrame {
            t: [dx * self.iod, dy * self.iod],
            cos: roll.cos(),
            sin: roll.sin(),
        })
    }

    #[inline]
    fn delta(&self, f: &HeadFrame, p: P) -> P {
        let d = sub(p, self.pivot);
        [
            f.t[0] + d[0] * (f.cos - 1.0) - d[1] * f.sin,
            f.t[1] + d[0] * f.sin + d[1] * (f.cos - 1.0),
        ]
    }

    /// Where destination pixel `(x, y)` comes from once the head motion is undone.
    #[inline]
    pub fn source(&self, f: &HeadFrame, x: usize, y: usize) -> P {
        let p = [x as f32, y as f32];
        if x < self.x0 || y < self.y0 || x >= self.x0 + self.bw || y >= self.y0 + self.bh {
            return p;
        }
        let w = self.weight[(y - self.y0) * self.bw + (x - self.x0)];
        if w == 0.0 {
            return p;
        }
        let d = self.delta(f, p);
        [p[0] - w * d[0], p[1] - w * d[1]]
    }
}
