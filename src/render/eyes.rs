//! Blinks: the upper eyelid slides down over the eye.
//!
//! Input: the six landmarks of one eye (36..41 or 42..47) and the brow above it.
//! Output: for a destination pixel and a blink amount, the colour there, or `None` outside the
//! eye's influence.
//! Invariants: the lid skin between the brow and the lid margin is stretched down (real skin
//! texture, not a flat fill), its dark margin becomes the closing lash line, and the eye below
//! the lid is left where it is; the stretch is 0 at the eye corners and at the top of the lid
//! skin, so nothing moves outside the eye's own box; blink 0 reproduces the portrait exactly.

use super::geometry::{Curve, Frame, P, len, mean, sub};
use super::sample::{Rgb, mix};

const LUT: usize = 65;

#[derive(Debug, Clone)]
pub(crate) struct EyeRig {
    frame: Frame,
    /// Corner-to-corner length.
    l: f32,
    up: Curve,
    lo: Curve,
    /// Height of lid skin above the margin that is stretched.
    k: f32,
    /// How far below the lower-lid landmarks a full blink reaches (covers landmark error).
    over: f32,
}

impl EyeRig {
    /// `first` = 36 (image-left eye) or 42; `brow` = the brow point above its middle.
    pub fn new(lm: &[P; 68], first: usize, brow: P) -> EyeRig {
        // The eye outline grown by 10 % along and 12 % across (+0.3 px) about its centre:
        // landmark models place the corners and lids a pixel or two inside the visible eye,
        // and whatever stays outside the lid would peek out of a closed eye.
        let axis = Frame::new(lm[first], sub(lm[first + 3], lm[first]));
        let centre = axis.to_local(mean(&lm[first..first + 6]));
        let grown = |i: usize| {
            let q = axis.to_local(lm[first + i]);
            let dy = q[1] - centre[1];
            axis.to_image([
                centre[0] + 1.1 * (q[0] - centre[0]),
                centre[1] + 1.12 * dy + 0.3 * dy.signum(),
            ])
        };
        let p = |i: usize| grown(i);
        let frame = Frame::new(p(0), sub(p(3), p(0)));
        let l = len(sub(p(3), p(0)));
        let loc = |i: usize| frame.to_local(p(i));
        let up = Curve::through(&[loc(0), loc(1), loc(2), loc(3)], 0.0, l, LUT);
        let lo_raw = Curve::through(&[loc(0), loc(5), loc(4), loc(3)], 0.0, l, LUT);
        let lo = lo_raw.map(|x, y| y.max(up.at(x)));
        let brow_gap = up.at(0.5 * l) - frame.to_local(brow)[1];
        // Stay clear of the brow: only the lid skin below it is stretched.
        let k = (0.55 * brow_gap).clamp(0.2 * l, 0.5 * l);
        let height = (0..LUT)
            .map(|i| {
                let x = l * i as f32 / (LUT - 1) as f32;
                lo.at(x) - up.at(x)
            })
            .fold(0.0, f32::max);
        let over = 0.12 * height + 0.3;
        EyeRig {
            frame,
            l,
            up,
            lo,
            k,
            over,
        }
    }

    /// Image-space bounding box (x0, y0, x1, y1) of what a blink may change.
    pub fn bounds(&self) -> [f32; 4] {
        let top = (0..LUT)
            .map(|i| self.up.at(self.l * i as f32 / (LUT - 1) as f32))
            .fold(f32::MAX, f32::min)
            - self.k;
        let bottom = (0..LUT)
            .map(|i| self.lo.at(self.l * i as f32 / (LUT - 1) as f32))
            .fold(f32::MIN, f32::max)
            + self.over
            + 1.0;
        let c = [[0.0, top], [self.l, top], [0.0, bottom], [self.l, bottom]]
            .map(|c| self.frame.to_image(c));
        [
            c.iter().map(|p| p[0]).fold(f32::MAX, f32::min),
            c.iter().map(|p| p[1]).fold(f32::MAX, f32::min),
            c.iter().map(|p| p[0]).fold(f32::MIN, f32::max),
            c.iter().map(|p| p[1]).fold(f32::MIN, f32::max),
        ]
    }

    /// Colour at destination pixel `q` with the lid `blink` closed (0..1).
    #[inline]
    pub fn shade(&self, img: &Rgb, blink: f32, q: P) -> Option<[f32; 3]> {
        let [x, y] = self.frame.to_local(q);
        if x <= 0.0 || x >= self.l {
            return None;
        }
        let up = self.up.at(x);
        let lo = self.lo.at(x);
        let top = up - self.k;
        if y < top || y > lo + self.over + 1.0 {
            return None;
        }
        // The lid margin travels to a little below the lower lid, fading out at the corners.
        let bump = (std::f32::consts::PI * x / self.l).sin();
        let m = blink * (lo - up + self.over * bump);
        let edge = up + m;
        // The lid skin stretches more at the top than at the lashes, so the lash line stays
        // thin: the map's slope falls linearly from s1 at the margin to 0.35·s1 at the top,
        // with s1 chosen so the whole lid (k tall in the portrait) fills k + m.
        let span = self.k + m;
        let s1 = (2.0 * self.k / (1.35 * span)).min(1.0);
        let s0 = 2.0 * self.k / span - s1;
        let lid = |y: f32| {
            let u = (y - top) / span;
            top + span * (s0 * u + 0.5 * (s1 - s0) * u * u)
        };
        let at = |ys: f32| img.bilinear_local(&self.frame, [x, ys]);
        // Box-filter coverage of the pixel by the lid.
        let cover = (edge - (y - 0.5)).clamp(0.0, 1.0);
        Some(if cover >= 1.0 {
            at(lid(y))
        } else if cover <= 0.0 {
            at(y)
        } else {
            mix(at(y), at(lid(y)), cover)
        })
    }
}
