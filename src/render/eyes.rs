//! Blinks: a skin-coloured upper lid slides down over the eye and the lower lid rises a little.
//!
//! Input: the six landmarks of one eye (36..41 or 42..47), the brow above it, and the portrait.
//! Output: for a destination pixel and a blink amount, the colour there, or `None` outside the
//! eye's influence.
//! Invariants:
//! - The lid is the portrait's own lid skin (between the brow and the lid margin) stretched down,
//!   without the portrait's dark lash margin, and pulled towards the skin's colour (the lid and
//!   the cheek below, measured once) while keeping its texture; it darkens towards the crease at
//!   its top and curls a little darker into the lash line.
//! - The closing edge follows the eye's own lower curve and carries a thin synthetic lash line
//!   (the portrait's lash colour), thinning towards the corners; a half-closed lid casts a soft
//!   shadow on the eye below it.
//! - Every change scales with how far the lid has travelled at that point, which is 0 at the
//!   corners, at the top of the lid skin and at blink 0: nothing moves outside the eye's own
//!   box, there is no seam, and blink 0 reproduces the portrait exactly.

use super::geometry::{Curve, Frame, P, len, mean, smoothstep, sub};
use super::sample::{Rgb, luma, mean3, median, mix, mul};

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
    /// The portrait's dark lash margin above the upper lid edge, dropped from the stretched skin.
    margin: f32,
    /// Thickness of the synthetic lash line at the middle of the lid.
    lash_px: f32,
    /// Width of the anti-aliasing ramp (wider on upscaled, softer faces).
    aa: f32,
    /// How far below the lower lid its rise fades out.
    lower_fade: f32,
    /// Median luma of the lid skin (the texture's reference) and the colour the lid takes.
    lid_luma: f32,
    skin: [f32; 3],
    lash: [f32; 3],
}

impl EyeRig {
    /// `first` = 36 (image-left eye) or 42; `brow` = the brow point above its middle.
    pub fn new(img: &Rgb, lm: &[P; 68], first: usize, brow: P) -> EyeRig {
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
        let frame = Frame::new(grown(0), sub(grown(3), grown(0)));
        let l = len(sub(grown(3), grown(0)));
        let loc = |i: usize| frame.to_local(grown(i));
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
        let margin = (0.1 * l).min(0.4 * k);
        let at = |x: f32, y: f32| img.bilinear_local(&frame, [x, y]);
        // Lid skin: the middle 80 % of the lid, between the crease and the margin.
        let mut lid = Vec::new();
        let mut lash = Vec::new();
        for i in 0..=16 {
            let x = l * (0.1 + 0.8 * i as f32 / 16.0);
            let u = up.at(x);
            for j in 0..=6 {
                lid.push(at(x, u - k + (k - margin) * j as f32 / 6.0));
            }
            for j in 0..=4 {
                lash.push(at(x, u - margin + (margin + 0.5) * j as f32 / 4.0));
            }
        }
        // The cheek below the eye, from a third to two thirds of the eye's length under it.
        let mut cheek = Vec::new();
        for i in 0..=12 {
            let x = l * (0.15 + 0.7 * i as f32 / 12.0);
            for j in 0..=4 {
                cheek.push(at(x, lo.at(x) + l * (0.3 + 0.35 * j as f32 / 4.0)));
            }
        }
        let lid_skin = median(&mut lid);
        let cheek = median(&mut cheek);
        // The lid keeps its own tone (often a shade darker or pinker than the cheek) unless it
        // is far from the skin's (shadow, make-up, or lashes caught in the samples): then it is
        // pulled to within Delta E 6 of the cheek.
        let far = delta_e(lid_skin, cheek);
        let skin = mix(lid_skin, cheek, (1.0 - 6.0 / far.max(1e-3)).clamp(0.0, 1.0));
        lash.sort_by(|a, b| luma(*a).total_cmp(&luma(*b)));
        let darkest = &lash[..(lash.len() / 4).max(1)];
        let lash = mul(mean3(darkest), 0.85);
        EyeRig {
            frame,
            l,
            up,
            lo,
            k,
            over,
            margin,
            lash_px: (0.04 * l).clamp(0.6, 3.0),
            aa: (0.04 * l).max(1.0),
            lower_fade: 0.3 * l,
            lid_luma: luma(lid_skin).max(1.0),
            skin,
            lash,
        }
    }

    /// How far beyond each corner the lid replaces the portrait's flared lashes.
    fn ext(&self) -> f32 {
        0.12 * self.l
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
            + self.over.max(self.lower_fade)
            + 1.0;
        let (x0, x1) = (-self.ext(), self.l + self.ext());
        let c = [[x0, top], [x1, top], [x0, bottom], [x1, bottom]].map(|c| self.frame.to_image(c));
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
        let ext = self.ext();
        if x <= -ext || x >= self.l + ext {
            return None;
        }
        let up = self.up.at(x);
        let lo = self.lo.at(x);
        let top = up - self.k;
        if y < top || y > lo + self.over.max(self.lower_fade) + 1.0 {
            return None;
        }
        let at = |ys: f32| img.bilinear_local(&self.frame, [x, ys]);
        // The lid margin travels to a little below the lower lid, which itself rises by 15 %
        // of the opening; both fade out at the corners.
        let bump = (std::f32::consts::PI * x / self.l).sin().max(0.0);
        let rise = blink * 0.15 * (lo - up);
        let lo_b = lo - rise;
        let m = blink * (lo_b - up + self.over * bump);
        let edge = up + m;
        // How much of the synthetic lid shows here: it fades in with the blink and, so that
        // the portrait's own lash margin does not survive as wings at the corners, within the
        // eye's corners and a little beyond them.
        let shown = smoothstep(0.0, 0.25, blink) * smoothstep(-ext, ext, x.min(self.l - x));
        // The lid skin [top, up - margin·shown] of the portrait fills [top, edge].
        // Twice the margin at the corners, where lashes and liner flare out.
        let src_bottom = up - self.margin * (2.0 - bump) * shown;
        let span = edge - top;
        let lid = |y: f32| {
            let u = ((y - top) / span).clamp(0.0, 1.0);
            let c = at(top + (src_bottom - top) * u);
            // Skin-coloured, with the texture's relative brightness; darker towards the crease
            // and where the lid curls into the lashes.
            let detail = (luma(c) / self.lid_luma).clamp(0.75, 1.25);
            let crease = 1.0 - 0.1 * (1.0 - smoothstep(0.0, 0.4, u));
            let curl = 1.0 - 0.1 * smoothstep(0.7, 1.0, u);
            let skin = mul(self.skin, (1.0 + 0.7 * (detail - 1.0)) * crease * curl);
            mix(c, skin, shown * smoothstep(0.0, 0.5, u))
        };
        // Below the lid: the raised lower lid (its skin stretched up from below), else the eye
        // in the lid's soft shadow.
        let below = |y: f32| {
            if y >= lo_b {
                let d = lo + self.lower_fade - lo_b;
                at(lo + (y - lo_b) * self.lower_fade / d.max(1e-3))
            } else {
                let s = 0.08 * self.l + 0.5;
                let shadow = 1.0 - 0.25 * shown * (1.0 - ((y - edge) / s).clamp(0.0, 1.0));
                mul(at(y), shadow)
            }
        };
        // Coverage of the pixel (an `aa`-wide box) by the lid skin and by the lash line.
        let t = self.lash_px * (0.45 + 0.55 * bump) * shown;
        let h = 0.5 * self.aa;
        let part = |a: f32, b: f32| ((y + h).min(b) - (y - h).max(a)).clamp(0.0, self.aa) / self.aa;
        let skin_cov = part(f32::MIN, edge - t);
        let lash_cov = part(edge - t, edge);
        let rest = (1.0 - skin_cov - lash_cov).max(0.0);
        if rest >= 1.0 {
            return Some(if y > lo + self.over.max(self.lower_fade) || m <= 0.0 {
                at(y)
            } else {
                below(y)
            });
        }
        let skin = lid(y.min(edge));
        let mut c = mul(skin, skin_cov);
        if lash_cov > 0.0 {
            let lash = mix(skin, self.lash, 0.8);
            c = [0, 1, 2].map(|i| c[i] + lash[i] * lash_cov);
        }
        if rest > 0.0 {
            let b = below(y);
            c = [0, 1, 2].map(|i| c[i] + b[i] * rest);
        }
        Some(c)
    }
}

/// CIE76 colour difference of two sRGB colours (0..255), via CIELAB (D65).
fn delta_e(a: [f32; 3], b: [f32; 3]) -> f32 {
    let (p, q) = (lab(a), lab(b));
    ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt()
}

fn lab(c: [f32; 3]) -> [f32; 3] {
    let lin = |v: f32| {
        let v = v / 255.0;
        if v <= 0.04045 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    let [r, g, b] = c.map(lin);
    let f = |t: f32| {
        if t > 0.008856 {
            t.cbrt()
        } else {
            7.787 * t + 16.0 / 116.0
        }
    };
    let fx = f((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047);
    let fy = f(0.2126 * r + 0.7152 * g + 0.0722 * b);
    let fz = f((0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883);
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}
