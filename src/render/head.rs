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
    /// Per weight row, the columns (relative to `x0`) from its first to past its last non-zero
    /// weight: the pixels of that row the motion can move.
    spans: Vec<(usize, usize)>,
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
        let spans = weight
            .chunks(bw.max(1))
            .map(|row| {
                let first = row.iter().position(|&w| w != 0.0).unwrap_or(0);
                let end = row.iter().rposition(|&w| w != 0.0).map_or(0, |i| i + 1);
                (first, end.max(first))
            })
            .collect();
        HeadRig {
            x0,
            y0,
            bw,
            bh,
            weight,
            spans,
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

    /// The part of `[a, b)` along row `y` that the motion moves (its weights are non-zero
    /// somewhere in it and zero outside it), or `None`: elsewhere [`source`](Self::source) is
    /// the pixel itself.
    pub fn moving(&self, y: usize, a: usize, b: usize) -> Option<(usize, usize)> {
        if y < self.y0 || y >= self.y0 + self.bh {
            return None;
        }
        let (first, end) = self.spans[y - self.y0];
        let (a, b) = (a.max(self.x0 + first), b.min(self.x0 + end));
        (a < b).then_some((a, b))
    }

    /// [`source`](Self::source) for pixels `a..a + xs.len()` of row `y`, into `xs` and `ys`: the
    /// same arithmetic (bit for bit), one row at a time so that it vectorises. The pixels must lie inside the
    /// weight box (as [`moving`](Self::moving) returns them).
    pub fn row_sources(&self, f: &HeadFrame, y: usize, a: usize, xs: &mut [f32], ys: &mut [f32]) {
        let start = (y - self.y0) * self.bw + (a - self.x0);
        let weight = &self.weight[start..start + xs.len()];
        let py = y as f32;
        for (k, ((&w, sx), sy)) in weight.iter().zip(xs.iter_mut()).zip(ys).enumerate() {
            let p = [(a + k) as f32, py];
            let d = self.delta(f, p);
            *sx = p[0] - w * d[0];
            *sy = p[1] - w * d[1];
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows' sources are `source`'s bit for bit, and a row's moving span holds every pixel
    /// whose source is not the pixel itself.
    #[test]
    fn row_sources_are_source_bit_for_bit_and_spans_hold_every_moved_pixel() {
        let (w, h) = (300, 260);
        let mut lm = [[0.0f32; 2]; 68];
        for (i, p) in lm.iter_mut().enumerate() {
            // A face-like spread of points about (150, 130).
            let t = i as f32;
            *p = [
                150.0 + 60.0 * (0.37 * t).cos(),
                130.0 + 50.0 * (0.37 * t).sin(),
            ];
        }
        lm[8] = [150.0, 200.0];
        // The eyes, level: what the head's ellipse is laid along.
        for (i, p) in lm[36..48].iter_mut().enumerate() {
            *p = [120.0 + 5.0 * i as f32, 110.0];
        }
        let rig = HeadRig::new(w, h, &lm);
        let f = rig
            .frame(&HeadPose {
                dx: 0.07,
                dy: -0.04,
                roll: 0.05,
            })
            .expect("a moving pose");
        let mut moved = 0;
        for y in 0..h {
            let (mut xs, mut ys) = (vec![0.0; w], vec![0.0; w]);
            let span = rig.moving(y, 0, w);
            if let Some((a, b)) = span {
                rig.row_sources(&f, y, a, &mut xs[..b - a], &mut ys[..b - a]);
            }
            for x in 0..w {
                let s = rig.source(&f, x, y);
                match span {
                    Some((a, b)) if x >= a && x < b => {
                        assert_eq!([xs[x - a], ys[x - a]], s, "({x}, {y})");
                        moved += usize::from(s != [x as f32, y as f32]);
                    }
                    _ => assert_eq!(s, [x as f32, y as f32], "({x}, {y}) moves outside its span"),
                }
            }
        }
        assert!(moved > 5_000, "{moved} pixels moved");
        assert_eq!(rig.moving(5, 100, 100), None);
    }
}
