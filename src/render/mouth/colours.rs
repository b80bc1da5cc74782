//! Colours of the portrait's mouth, measured once: lips, teeth, mouth cavity, tongue.
//!
//! Input: the portrait, the mouth frame and lip curves, the landmarks. Output: [`Colours`].
//! Invariants: medians (robust to highlights and landmark error); teeth are measured only
//! when the portrait's own opening shows bright, unsaturated pixels, else derived from the
//! skin's brightness.

use super::Lips;
use crate::render::geometry::{Frame, P, mean};
use crate::render::sample::{Rgb, luma, mean3, median};

pub(super) struct Colours {
    pub lip: [f32; 3],
    pub teeth: [f32; 3],
    pub own_teeth: bool,
    pub cavity: [f32; 3],
    pub tongue: [f32; 3],
}

impl Colours {
    /// Lip colour from the middle of both lips, skin from the cheeks, teeth from the bright
    /// pixels of the portrait's own opening when it shows teeth (else an off-white matched
    /// to the skin's brightness).
    pub(super) fn measure(img: &Rgb, frame: &Frame, w: f32, lips: &Lips, lm: &[P; 68]) -> Colours {
        let Lips {
            up_out,
            up_in,
            lo_in,
            lo_out,
        } = lips;
        let at = |s: f32, y: f32| img.bilinear_local(frame, [s * w, y]);
        let mut lips = Vec::new();
        for i in 0..=10 {
            let s = -0.6 + 0.12 * i as f32;
            lips.push(at(s, 0.5 * (up_in.at(s) + up_out.at(s))));
            lips.push(at(s, 0.5 * (lo_in.at(s) + lo_out.at(s))));
        }
        let lip = median(&mut lips);
        let mut skin: Vec<[f32; 3]> = [(31, 3), (35, 13), (41, 2), (46, 14)]
            .iter()
            .map(|&(a, b)| {
                let p = mean(&[lm[a], lm[b]]);
                img.bilinear(p[0], p[1])
            })
            .collect();
        let skin = median(&mut skin);
        let mut inner = Vec::new();
        for i in 0..=20 {
            let s = -0.5 + 0.05 * i as f32;
            let (u, l) = (up_in.at(s), lo_in.at(s));
            let mut y = u + 0.75;
            while y < l - 0.75 {
                inner.push(at(s, y));
                y += 0.5;
            }
        }
        inner.sort_by(|a, b| luma(*b).total_cmp(&luma(*a)));
        let bright: Vec<[f32; 3]> = inner
            .iter()
            .take((inner.len() / 3).max(1))
            .copied()
            .filter(|c| luma(*c) > 0.9 * luma(skin) && saturation(*c) < 0.35)
            .collect();
        let own_teeth = bright.len() >= 6;
        let teeth = if own_teeth {
            mean3(&bright)
        } else {
            let l = (luma(skin) * 1.35).clamp(150.0, 250.0);
            [l, l * 0.95, l * 0.85]
        };
        Colours {
            lip,
            teeth,
            own_teeth,
            cavity: [lip[0] * 0.3, lip[1] * 0.16, lip[2] * 0.14],
            tongue: [lip[0] * 0.85, lip[1] * 0.62, lip[2] * 0.62],
        }
    }
}

pub(super) fn saturation(c: [f32; 3]) -> f32 {
    let hi = c[0].max(c[1]).max(c[2]);
    let lo = c[0].min(c[1]).min(c[2]);
    if hi <= 0.0 { 0.0 } else { (hi - lo) / hi }
}
