//! What the mouth shows inside the opening (teeth, cavity, tongue) and at the new lip edges.
//!
//! Input: a destination pixel already located by the mouth warp. Output: its colour.
//! Invariants: the portrait's own teeth are reused where they are (teeth are fixed to the
//! skull and do not stretch with the lips); otherwise a shaded synthetic band; colours come
//! from the portrait (measured once in `colours.rs`), so the interior matches its lighting.

use super::{Located, MouthFrame, MouthRig, colours::saturation};
use crate::render::geometry::{P, smoothstep};
use crate::render::sample::{Rgb, luma, mix, mul};

impl MouthRig {
    /// Near the new inner lip edges, a sample that looks like teeth (bright, unsaturated) or
    /// like the dark mouth corner is replaced by lip sampled further inside the lip:
    /// landmarks are a pixel or two off, and a closed mouth must not keep slivers of the
    /// portrait's open mouth.
    #[inline]
    pub(super) fn clean_lip(&self, at: &Located, img: &Rgb, c: [f32; 3]) -> [f32; 3] {
        let y = at.local[1];
        let upper = y < 0.5 * (at.top + at.bot);
        let e = if upper { at.top - y } else { y - at.bot };
        let band = 0.12 * self.w + 0.5;
        let edge = if at.s < 0.0 {
            -self.s_left
        } else {
            self.s_right
        };
        // Not at the corners: the lips are too thin there to sample "deeper", and a dark
        // crease is what a mouth corner looks like anyway.
        let near = (1.0 - smoothstep(0.5 * band, band, e))
            * (1.0 - smoothstep(0.7 * edge, 0.9 * edge, at.s.abs()));
        if near <= 0.0 {
            return c;
        }
        let lum = luma(self.lip).max(1.0);
        let rho = luma(c) / lum;
        let sat_lip = saturation(self.lip);
        let teeth =
            smoothstep(0.45 * sat_lip, 0.25 * sat_lip, saturation(c)) * smoothstep(1.0, 1.15, rho);
        let dark = smoothstep(0.7, 0.45, rho);
        let k = teeth.max(dark) * near;
        if k <= 0.0 {
            return c;
        }
        let depth = if upper { -band } else { band };
        let v = self.frame.v;
        let deeper = img.bilinear(at.src[0] + v[0] * depth, at.src[1] + v[1] * depth);
        mix(c, deeper, k)
    }

    /// Inside the opening: upper teeth hanging from the upper jaw, then the dark cavity, the
    /// tongue and a hint of lower teeth at the bottom. `l` = the pixel in mouth coordinates
    /// (unscaled: teeth do not stretch with the lips), `a` = depth below the upper lip edge,
    /// `g` = opening height, both in pixels.
    pub(super) fn interior(
        &self,
        f: &MouthFrame,
        img: &Rgb,
        l: P,
        s: f32,
        a: f32,
        g: f32,
    ) -> [f32; 3] {
        let w = self.w;
        let (el, er) = f.open_extent;
        let e = if s < 0.0 { el } else { er };
        let sn = (s / e.max(0.05)).clamp(-1.0, 1.0);
        let side = 1.0 - 0.55 * sn * sn;
        let from_bottom = g - a;
        // Cavity, lit a little near the lips.
        let depth = smoothstep(0.0, 0.5 * g.max(1.0), a.min(from_bottom));
        let mut c = mul(self.cavity, side * (1.15 - 0.35 * depth));
        // Tongue: a low mound, higher with `tongue`.
        let tongue_h = g * (0.18 + 0.32 * f.tongue) * (1.0 - sn * sn);
        let t_cov = (tongue_h - from_bottom + 0.5).clamp(0.0, 1.0);
        if t_cov > 0.0 {
            let shade = 0.75 + 0.25 * smoothstep(0.0, tongue_h.max(1.0), tongue_h - from_bottom);
            c = mix(c, mul(self.tongue, side * shade), t_cov);
        }
        // Lower teeth: only when the mouth is well open, in the lower lip's shadow.
        let lower_h = f.teeth * (g - 0.6 * w).clamp(0.0, 0.12 * w);
        let l_cov = (lower_h - from_bottom + 0.5).clamp(0.0, 1.0);
        if l_cov > 0.0 {
            c = mix(c, mul(self.teeth, side * 0.6), l_cov);
        }
        // Upper teeth, in the upper lip's shadow at the top; a lowered upper lip edge hides
        // their top geometrically, `teeth` < 1 hides their lower part.
        let shadow = 0.78 + 0.22 * smoothstep(0.0, 0.08 * w + 0.6, a);
        let (tooth, u_cov) = if self.own_teeth {
            // The portrait's own teeth, fixed to the skull: sample them where they are; above
            // the portrait's lip edge (lip raised) repeat their top row.
            // `teeth` < 1: the lips cover all but the top of them (a rounded "oo").
            let s0 = l[0] / w;
            let top = self.up_in.at(s0) + 0.6;
            let bottom = self.lo_in.at(s0) - 0.6;
            let edge = l[1] - a;
            let shown = edge + (0.15 + 0.85 * f.teeth) * (bottom - edge);
            if bottom - top < 0.5 {
                ([0.0; 3], 0.0)
            } else {
                let ys = l[1].clamp(top, bottom - 0.5);
                let t = img.bilinear_local(&self.frame, [l[0], ys]);
                (t, (shown - l[1] + 0.5).clamp(0.0, 1.0))
            }
        } else {
            // Synthetic: a band whose edge curves up towards the corners (the smile line),
            // with a faint gap between the central incisors (each ≈ 0.34 W wide) and
            // fainter ones beside them.
            let gaps = [(0.0f32, 0.12f32), (0.34, 0.07), (0.6, 0.05)]
                .iter()
                .map(|&(b, k)| {
                    let d = (s.abs() - b) * w;
                    k * (-(d * d) / 0.2).exp()
                })
                .sum::<f32>();
            let band = f.teeth * g.min(0.3 * w * (1.0 - 0.3 * sn * sn));
            // Teeth catch more light than the cavity: a gentler fall-off to the corners.
            (
                mul(self.teeth, (1.0 - 0.35 * sn * sn) * (1.0 - gaps)),
                (band - a + 0.5).clamp(0.0, 1.0),
            )
        };
        if u_cov > 0.0 {
            c = mix(c, mul(tooth, shadow), u_cov);
        }
        // Tongue tip pushed up in front of the teeth (th, l).
        let tip = f.tongue_tip * g * (1.0 - (sn / 0.45).powi(2)).max(0.0);
        let tip_cov = (tip - from_bottom + 0.5).clamp(0.0, 1.0) * f32::from(tip > 0.0);
        if tip_cov > 0.0 {
            c = mix(c, mul(self.tongue, 1.1), tip_cov);
        }
        c
    }
}
