//! `MouthPose`: the renderer-facing description of one mouth shape.
//!
//! Input: nothing (plain data). Output: poses, their blends and distances.
//! Invariant: every field of a pose made by [`MouthPose::clamped`] lies in its documented range;
//! the renderer relies on those ranges (it clamps again, so out-of-range input cannot fold the warp).

/// One mouth shape. All fields are unitless and relative to the portrait's own mouth, so the same
/// pose works on any face size; the renderer turns them into pixels.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MouthPose {
    /// 0..1 inner-lip opening: 0 = lips sealed (m, b, p), 1 = the widest speech opening ("father").
    /// At 1 the lip gap is about 0.55 × half the mouth width and the chin drops with it.
    pub open: f32,
    /// -1..1 mouth width: -1 = puckered (≈ 36 % narrower than the portrait), 0 = the portrait's
    /// own width, 1 = spread (≈ 26 % wider, as in "see").
    pub width: f32,
    /// 0..1 lip rounding: a rounder, shorter opening with the corners drawn in (o, u, w).
    pub round: f32,
    /// 0..1 upper-lip raise, uncovering the upper teeth (f, v, "ee").
    pub upper_lip: f32,
    /// 0..1 lower lip drawn up and in under the upper teeth, so it looks thinner (f, v).
    pub lower_lip_tuck: f32,
    /// 0..1 how much of the teeth shows inside the opening (0 = lips cover them, dark mouth only).
    pub teeth: f32,
    /// 0..1 tongue raised behind the teeth and visible (l, n, th).
    pub tongue: f32,
}

impl MouthPose {
    /// Relaxed, lips together: the shape between sentences (Rhubarb's X).
    pub const REST: MouthPose = MouthPose {
        open: 0.0,
        width: 0.0,
        round: 0.0,
        upper_lip: 0.0,
        lower_lip_tuck: 0.0,
        teeth: 0.0,
        tongue: 0.0,
    };

    /// The same pose with every field forced into its documented range (NaN becomes 0).
    pub fn clamped(self) -> MouthPose {
        let unit = |v: f32| if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) };
        MouthPose {
            open: unit(self.open),
            width: if self.width.is_nan() {
                0.0
            } else {
                self.width.clamp(-1.0, 1.0)
            },
            round: unit(self.round),
            upper_lip: unit(self.upper_lip),
            lower_lip_tuck: unit(self.lower_lip_tuck),
            teeth: unit(self.teeth),
            tongue: unit(self.tongue),
        }
    }

    /// Linear blend, `t` = 0 gives `self`, 1 gives `other`.
    pub fn lerp(&self, other: &MouthPose, t: f32) -> MouthPose {
        let l = |a: f32, b: f32| a + (b - a) * t;
        MouthPose {
            open: l(self.open, other.open),
            width: l(self.width, other.width),
            round: l(self.round, other.round),
            upper_lip: l(self.upper_lip, other.upper_lip),
            lower_lip_tuck: l(self.lower_lip_tuck, other.lower_lip_tuck),
            teeth: l(self.teeth, other.teeth),
            tongue: l(self.tongue, other.tongue),
        }
    }

    /// How different two shapes look (largest field difference, width counted at half weight
    /// because its range is twice as wide). Drives tween lengths and merging decisions.
    pub fn distance(&self, other: &MouthPose) -> f32 {
        [
            (self.open - other.open).abs(),
            0.5 * (self.width - other.width).abs(),
            (self.round - other.round).abs(),
            (self.upper_lip - other.upper_lip).abs(),
            (self.lower_lip_tuck - other.lower_lip_tuck).abs(),
            0.5 * (self.teeth - other.teeth).abs(),
            0.5 * (self.tongue - other.tongue).abs(),
        ]
        .into_iter()
        .fold(0.0, f32::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamped_forces_ranges_and_nan() {
        let p = MouthPose {
            open: 2.0,
            width: -3.0,
            round: f32::NAN,
            upper_lip: -1.0,
            lower_lip_tuck: 0.5,
            teeth: 9.0,
            tongue: f32::INFINITY,
        }
        .clamped();
        assert_eq!(p.open, 1.0);
        assert_eq!(p.width, -1.0);
        assert_eq!(p.round, 0.0);
        assert_eq!(p.upper_lip, 0.0);
        assert_eq!(p.lower_lip_tuck, 0.5);
        assert_eq!(p.teeth, 1.0);
        assert_eq!(p.tongue, 1.0);
    }

    #[test]
    fn lerp_ends_and_distance() {
        let a = MouthPose::REST;
        let b = MouthPose {
            open: 1.0,
            width: 1.0,
            ..MouthPose::REST
        };
        assert_eq!(a.lerp(&b, 0.0), a);
        assert_eq!(a.lerp(&b, 1.0), b);
        assert_eq!(a.lerp(&b, 0.5).open, 0.5);
        assert_eq!(a.distance(&b), 1.0);
        assert_eq!(a.distance(&a), 0.0);
    }
}
