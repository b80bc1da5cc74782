//! The mouth model: lip curves from the 20 lip landmarks and a backward warp per pose.
//!
//! Input: the portrait and landmarks 48..67 (+ nose base 33 and chin 8 for the fade limits).
//! Output: for a destination pixel and a [`MouthPose`], the colour to draw there, or `None`
//! when the pixel is outside the mouth's influence (then it is the portrait's own pixel).
//! Invariants:
//! - All geometry lives in a mouth frame (origin between the outer corners, `u` along the
//!   mouth, unit W = half the mouth width), so any face size and tilt behaves alike.
//! - The pose sets new inner lip edges; above them the upper lip moves (fading out at the
//!   nose base), below them the lower lip moves with its own profile and the jaw/chin drops
//!   as a body (fading out below the chin and towards the jaw's sides); the lips' width scales
//!   about the mouth's middle, corners and their shadows included, fading out over the cheeks
//!   before the nose and the chin; rounded lips also level a smiling (or frowning) portrait's
//!   corners towards the lips' middle, as a pucker does. All fades are smoothsteps reaching
//!   exactly 0, so there is no box and no seam.
//! - The lips always map to lips: the new inner edges sample the portrait's lips slightly
//!   inside their edges, whose opening is taken from outer corner to outer corner, so a
//!   closed mouth is lip-coloured even when the portrait smiles with teeth; what lies between
//!   the new edges is drawn by `interior.rs`.
//! - Shifts are clamped against their fade lengths so the map never folds (tested).

mod colours;
mod interior;

use super::geometry::{Curve, Fade, Frame, P, mean, ramp, smoothstep};
use super::sample::{Rgb, mix, mul};
use crate::lipsync::MouthPose;
use colours::Colours;

/// Samples per lip curve over `s` ∈ [-S_MAX, S_MAX].
const LUT: usize = 257;
const S_MAX: f32 = 1.6;
/// Half-width of the mouth's influence, in half mouth widths.
const REACH: f32 = 2.3;

/// The four lip edges as y' over s = x' / W.
#[derive(Debug, Clone)]
struct Lips {
    up_out: Curve,
    up_in: Curve,
    lo_in: Curve,
    lo_out: Curve,
}

#[derive(Debug, Clone)]
pub(crate) struct MouthRig {
    frame: Frame,
    /// Half the mouth width (outer corners) in pixels: the unit of every mouth distance.
    w: f32,
    up_in: Curve,
    lo_in: Curve,
    lo_thick: Curve,
    up_thick: Curve,
    /// Source inner-lip gap (≥ 0).
    gap0: Curve,
    /// How far inside the lips the new inner edges sample.
    inset: Curve,
    /// Inner corners as `s` (left negative, right positive).
    s_left: f32,
    s_right: f32,
    /// y' of the nose base, the mouth's vertical centre and the chin.
    nose: f32,
    centre: f32,
    /// y' of the closed lips' seam at the middle: above 0 when the corners turn up (a smile).
    seam: f32,
    chin: f32,
    lip: [f32; 3],
    teeth: [f32; 3],
    /// The portrait shows its upper teeth: the opening reuses them where they are.
    own_teeth: bool,
    cavity: [f32; 3],
    tongue: [f32; 3],
    /// Local-coordinate limits of the influence.
    reach: f32,
    top: f32,
    bottom: f32,
    fades: Fades,
}

/// The fixed fades of [`MouthRig::locate`], so that a pixel multiplies where it would divide.
#[derive(Debug, Clone)]
struct Fades {
    /// 1 / W.
    inv_w: f32,
    /// 1 / (0.8 W): the jaw's drop fading in below the new lower lip edge.
    inv_jaw: f32,
    /// The lips' vertical reach, over the distance above and below the mouth's centre.
    above: Fade,
    below: Fade,
    /// Below the chin (over y'), and towards the jaw's sides (over |x'|).
    chin: Fade,
    jaw_side: Fade,
    /// The closed lips' seam thinning towards the left and the right inner corner (over |s|).
    seam: [Fade; 2],
}

impl Fades {
    fn new(w: f32, centre: f32, nose: f32, chin: f32, corners: [f32; 2]) -> Fades {
        let span = (centre - nose).max(0.5 * w);
        Fades {
            inv_w: 1.0 / w,
            inv_jaw: 1.0 / (0.8 * w),
            above: Fade::new(0.3 * span, span),
            below: Fade::new(0.7 * 0.75 * w, 1.5 * 0.75 * w),
            chin: Fade::new(chin - 0.2 * w, chin + w),
            jaw_side: Fade::new(0.9 * w, 2.0 * w),
            seam: corners.map(|e| Fade::new(0.6 * e, e)),
        }
    }
}

/// Where one destination pixel comes from (see [`MouthRig::locate`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located {
    /// Source point for the lips/skin, image coordinates.
    pub src: P,
    /// 0..1 coverage of the pixel by the mouth opening.
    pub cover: f32,
    /// The pixel in mouth coordinates, its lip abscissa and the opening's edges there.
    pub local: P,
    pub s: f32,
    pub top: f32,
    pub bot: f32,
}

/// Everything about one pose that does not depend on the pixel.
pub(crate) struct MouthFrame {
    k: f32,
    ud: Curve,
    ld: Curve,
    du: Curve,
    dl: Curve,
    tuck: Curve,
    jaw: f32,
    teeth: f32,
    tongue: f32,
    /// Height of the tongue tip in front of the teeth, as a fraction of the opening.
    tongue_tip: f32,
    open_extent: (f32, f32),
    /// 0..1 rounding: pushed-forward lips roll their inner edges into shadow.
    round: f32,
    /// How far rounded lips lower (or raise) their corners towards the seam's middle.
    level: f32,
    /// Width (px) of the band beyond the opening's edges where [`MouthRig::shade`] does more
    /// than sample the warped portrait: lip cleaning, and the pout's shadow on rounded lips.
    band: f32,
}

impl MouthRig {
    pub fn new(img: &Rgb, lm: &[P; 68]) -> MouthRig {
        let (l, r) = (lm[48], lm[54]);
        let origin = mean(&[l, r]);
        let frame = Frame::new(origin, [r[0] - l[0], r[1] - l[1]]);
        let w = 0.5 * super::geometry::len([r[0] - l[0], r[1] - l[1]]);
        let local = |i: usize| {
            let p = frame.to_local(lm[i]);
            [p[0] / w, p[1]]
        };
        let curve = |idx: &[usize]| {
            let knots: Vec<P> = idx.iter().map(|&i| local(i)).collect();
            Curve::through(&knots, -S_MAX, S_MAX, LUT)
        };
        let up_out = curve(&[48, 49, 50, 51, 52, 53, 54]);
        let lo_out = curve(&[48, 59, 58, 57, 56, 55, 54]);
        // The portrait's opening runs from outer corner to outer corner: the inner corners
        // (60, 64) sit a pixel or two inside the dark mouth corners, which would otherwise
        // count as lip and survive a closed mouth.
        let up_in_raw = curve(&[48, 61, 62, 63, 54]);
        let lo_in_raw = curve(&[48, 67, 66, 65, 54]);
        // Noisy landmarks may cross: a crossed pair means closed lips at their average.
        let up_in = up_in_raw.map(|s, u| u.min(lo_in_raw.at(s)).max(up_out.at(s)));
        let lo_in = lo_in_raw.map(|s, l| {
            let u = up_in_raw.at(s);
            if l < u { 0.5 * (l + u) } else { l }.min(lo_out.at(s))
        });
        let up_in = up_in.map(|s, u| u.min(lo_in.at(s)));
        let gap0 = up_in.map(|s, u| (lo_in.at(s) - u).max(0.0));
        let lo_thick = lo_in.map(|s, l| (lo_out.at(s) - l).max(0.0));
        let up_thick = up_in.map(|s, u| (u - up_out.at(s)).max(0.0));
        let s_left = local(60)[0].clamp(-1.0, -0.5);
        let s_right = local(64)[0].clamp(0.5, 1.0);
        let inset_px = (0.06 * w).clamp(0.6, 4.0);
        let inset = Curve::sample(-S_MAX, S_MAX, LUT, |s| {
            let edge = if s < 0.0 { -s_left } else { s_right };
            let bump = 1.0 - smoothstep(0.55 * edge, edge, s.abs());
            let thin = 0.35 * up_thick.at(s).min(lo_thick.at(s));
            bump * inset_px.min(thin)
        });
        let centre = 0.5 * (up_out.at(0.0) + lo_out.at(0.0));
        let mouth_bottom = lo_out.at(0.0);
        let nose = frame.to_local(lm[33])[1].min(up_out.at(0.0) - 0.25 * w);
        let chin = frame.to_local(lm[8])[1].max(mouth_bottom + 0.6 * w);
        let lips = Lips {
            up_out,
            up_in: up_in.clone(),
            lo_in: lo_in.clone(),
            lo_out,
        };
        let colours = Colours::measure(img, &frame, w, &lips, lm);
        let seam = 0.5 * (up_in.at(0.0) + lo_in.at(0.0));
        MouthRig {
            frame,
            w,
            up_in,
            lo_in,
            lo_thick,
            up_thick,
            gap0,
            inset,
            s_left,
            s_right,
            nose,
            centre,
            seam,
            chin,
            lip: colours.lip,
            teeth: colours.teeth,
            own_teeth: colours.own_teeth,
            cavity: colours.cavity,
            tongue: colours.tongue,
            reach: REACH * w,
            top: nose - 1.0,
            bottom: chin + 1.05 * w,
            fades: Fades::new(w, centre, nose, chin, [-s_left, s_right]),
        }
    }

    /// Image-space bounding box of everything this rig may change: (x0, y0, x1, y1).
    pub fn bounds(&self) -> [f32; 4] {
        let corners = [
            [-self.reach, self.top],
            [self.reach, self.top],
            [-self.reach, self.bottom],
            [self.reach, self.bottom],
        ];
        let pts: Vec<P> = corners.iter().map(|&c| self.frame.to_image(c)).collect();
        let xs = pts.iter().map(|p| p[0]);
        let ys = pts.iter().map(|p| p[1]);
        [
            xs.clone().fold(f32::MAX, f32::min),
            ys.clone().fold(f32::MAX, f32::min),
            xs.fold(f32::MIN, f32::max),
            ys.fold(f32::MIN, f32::max),
        ]
    }

    pub fn frame(&self, pose: &MouthPose) -> MouthFrame {
        let p = pose.clamped();
        let w = self.w;
        // Rounded lips pucker to about 64 % of the rest width (as a full "oo" does), spread lips
        // reach about 126 %.
        let k = 1.0 + 0.26 * p.width.max(0.0) + 0.36 * p.width.min(0.0);
        let round_in = 1.0 - 0.3 * p.round;
        let (el, er) = (-self.s_left * round_in, self.s_right * round_in);
        // Opening profile 1 - |t|^n: a lens, fuller when rounded, with a finite slope at the
        // corners (a (1 - t²)^p cusp would shear the lips there hard enough to fold).
        let expo = 2.5 + 0.5 * p.round;
        let gmax = 0.6 * w;
        let gap = |s: f32| {
            let e = if s < 0.0 { el } else { er };
            let t = (s / e).abs();
            if t >= 1.0 {
                0.0
            } else {
                p.open * gmax * (1.0 - t.powf(expo))
            }
        };
        let raise = |s: f32| {
            let e = if s < 0.0 { -self.s_left } else { self.s_right };
            let t = (s / e).abs().min(1.0);
            p.upper_lip * 0.2 * w * (1.0 - t * t)
        };
        let mid = |s: f32| self.up_in.at(s) + 0.35 * self.gap0.at(s);
        let ud = Curve::sample(-S_MAX, S_MAX, LUT, |s| mid(s) - 0.3 * gap(s) - raise(s));
        let ld = Curve::sample(-S_MAX, S_MAX, LUT, |s| mid(s) + 0.7 * gap(s));
        // Shifts at the edges, clamped to 45 % of the fade length so the map stays monotone.
        let du = ud.map(|s, u| {
            let shift = u - (self.up_in.at(s) - self.inset.at(s));
            let room = 0.45 * (self.up_in.at(s) - self.nose).max(0.0);
            shift.clamp(-room, room)
        });
        let fade_below = 0.8 * w;
        let dl = ld.map(|s, l| {
            let shift = l - (self.lo_in.at(s) + self.inset.at(s));
            shift.clamp(-0.55 * fade_below, 0.55 * fade_below)
        });
        let jaw = (0.9 * (ld.at(0.0) - self.lo_in.at(0.0))).clamp(-0.4 * w, 0.5 * w);
        let tuck = self.lo_thick.map(|_, t| p.lower_lip_tuck * 0.55 * t);
        MouthFrame {
            k,
            ud,
            ld,
            du,
            dl,
            tuck,
            jaw,
            teeth: p.teeth,
            tongue: p.tongue,
            tongue_tip: 0.6 * smoothstep(0.5, 1.0, p.tongue),
            open_extent: (el, er),
            round: p.round,
            // At most 0.2 W, so the vertical map's slope stays under 0.75 (no fold).
            level: p.round * self.seam.clamp(-0.2 * w, 0.2 * w),
            band: if p.round > 0.0 { 0.2 } else { 0.12 } * w + 0.5,
        }
    }

    /// The colour at destination pixel `q` for pose frame `f`, or `None` outside the influence.
    #[inline]
    pub fn shade(&self, f: &MouthFrame, img: &Rgb, q: P) -> Option<[f32; 3]> {
        let at = self.locate(f, q)?;
        let [_, y] = at.local;
        if at.cover >= 1.0 {
            return Some(self.interior(f, img, at.local, at.s, y - at.top, at.bot - at.top));
        }
        let lip = self.clean_lip(&at, img, img.bilinear(at.src[0], at.src[1]));
        let lip = self.pout(f, &at, lip);
        if at.cover <= 0.0 {
            return Some(lip);
        }
        let hole = self.interior(f, img, at.local, at.s, y - at.top, at.bot - at.top);
        Some(mix(lip, hole, at.cover))
    }

    /// How far (px) `at` lies from where [`shade`](Self::shade) does more than sample the
    /// portrait at `at.src`: past the opening's edges by more than the lip band, or beyond the
    /// inner corners (`s` changes by at most 2 / W per destination pixel, hence the half). A
    /// pixel at a positive distance `d` has colour `bilinear(at.src)` and so have its neighbours
    /// up to about `d / 3` px away (the edges' slopes stay under 2).
    #[inline]
    pub fn clear(&self, f: &MouthFrame, at: &Located) -> f32 {
        let y = at.local[1];
        let across = (at.top - f.band - y).max(y - at.bot - f.band);
        let edge = if at.s < 0.0 {
            -self.s_left
        } else {
            self.s_right
        };
        across.max(0.5 * self.w * (at.s.abs() - edge))
    }

    /// Rounded lips are pushed forward: their inner edges turn away from the light, so the lip
    /// darkens towards the opening (most in the middle, none at the corners or on the skin).
    #[inline]
    fn pout(&self, f: &MouthFrame, at: &Located, c: [f32; 3]) -> [f32; 3] {
        if f.round <= 0.0 || at.s <= self.s_left || at.s >= self.s_right {
            return c;
        }
        let y = at.local[1];
        let e = if y < 0.5 * (at.top + at.bot) {
            at.top - y
        } else {
            y - at.bot
        };
        let band = 0.2 * self.w + 0.5;
        let edge = if at.s < 0.0 {
            -self.s_left
        } else {
            self.s_right
        };
        let along = 1.0 - smoothstep(0.5 * edge, edge, at.s.abs());
        let k = 1.0 - 0.35 * f.round * along * (1.0 - smoothstep(0.0, band, e));
        mul(c, k)
    }

    /// The backward map: where destination pixel `q` takes its lips/skin from, and how much
    /// of it the opening covers. `None` outside the influence.
    #[inline]
    pub fn locate(&self, f: &MouthFrame, q: P) -> Option<Located> {
        let [x, y] = self.frame.to_local(q);
        if x.abs() > self.reach || y < self.top || y > self.bottom {
            return None;
        }
        let w = self.w;
        let k = f.k;
        // Horizontal: the lips scale by `k` about the middle, out to `c` half-widths when they
        // narrow: past the corner landmarks (which sit inside the visible corners), so the
        // corners' shadow and the lips' tapering ends move with them instead of staying behind
        // as a lip line at the rest width. Beyond, the shift fades out over the cheek (slope
        // between 0.55 and 1.4, so the map never folds) and ends inside `reach`, so it is
        // exactly 0 there.
        let (c, fade): (f32, f32) = if k < 1.0 { (1.15, 1.45) } else { (1.0, 1.05) };
        let fade = fade.min(REACH - k * c);
        // Vertically it fades out before the chin and, over the whole upper lip, at the nose
        // base, so the face's outline stays put and the smile folds bend gently instead of
        // kinking at the corners.
        let fades = &self.fades;
        let dy = y - self.centre;
        let v = 1.0
            - if dy < 0.0 {
                fades.above.at(-dy)
            } else {
                fades.below.at(dy)
            };
        // Rounded lips lose the portrait's smile (or frown): the corners move towards the
        // seam's height, most at the corners, fading out over the cheek and towards the nose
        // and the chin. This comes first, so the lips and the opening move together.
        let y = if f.level != 0.0 {
            let a = x.abs() / (k * w);
            let along = smoothstep(0.0, 1.0, a) * (1.0 - smoothstep(c, c + fade / k, a));
            let span = if dy < 0.0 {
                self.centre - self.nose
            } else {
                self.chin - self.centre
            };
            let across = 1.0 - smoothstep(0.2, 1.0, dy.abs() / span.max(0.5 * w));
            y - f.level * along * across
        } else {
            y
        };
        let a = x.abs() * fades.inv_w;
        let scaled = if a <= k * c {
            a / k
        } else {
            a + (1.0 - k) * c * (1.0 - smoothstep(k * c, k * c + fade, a))
        };
        let s = x.signum() * (a + (scaled - a) * v);
        let xs = s * w;
        // Every curve of the rig and the frame shares one grid: one look-up position for all.
        let kn = f.ud.knot(s);
        let ud = f.ud.at_knot(kn);
        let ld = f.ld.at_knot(kn);
        // Above the lip line the upper lip moves, fading out at the nose base; below it the
        // lower lip moves with its own profile near the lip, with the jaw further down, fading
        // out below the chin and towards the jaw's sides.
        // Rounded lips are pushed forward and look fuller: each lip's outer edge moves out by
        // up to 30 % of its thickness (the lip is stretched, the skin beyond it shifted).
        let pout = 0.3 * f.round;
        let ys = if y <= 0.5 * (ud + ld) {
            let thick = self.up_thick.at_knot(kn).max(0.5);
            let outer = ud - thick;
            let fuller = pout
                * thick
                * if y <= outer {
                    smoothstep(self.nose, outer, y)
                } else {
                    1.0 - smoothstep(outer, ud, y)
                };
            y - f.du.at_knot(kn) * smoothstep(self.nose, ud, y) + fuller
        } else {
            let beta = ramp((y - ld) * fades.inv_jaw);
            let lat = 1.0 - fades.jaw_side.at(xs.abs());
            let gamma = 1.0 - fades.chin.at(y);
            let dl = f.dl.at_knot(kn);
            let shift = (dl + (f.jaw * lat - dl) * beta) * gamma;
            let thick = self.lo_thick.at_knot(kn).max(0.5);
            let tuck = f.tuck.at_knot(kn) - pout * thick;
            y - shift + tuck * smoothstep(ld, ld + thick, y) * gamma
        };
        // The opening between the new edges; closed lips keep a thin dark seam (a minimum
        // opening that fades out at the corners) instead of a hard line.
        let inside = s > self.s_left && s < self.s_right;
        let seam = 0.5 * (1.0 - fades.seam[usize::from(s >= 0.0)].at(s.abs()));
        let (top, bot) = if inside && ld - ud < seam {
            let m = 0.5 * (ud + ld);
            (m - 0.5 * seam, m + 0.5 * seam)
        } else {
            (ud, ld)
        };
        // Box-filter coverage of the pixel row by the opening.
        let cover = if inside {
            ((y + 0.5).min(bot) - (y - 0.5).max(top)).clamp(0.0, 1.0)
        } else {
            0.0
        };
        Some(Located {
            src: self.frame.to_image([xs, ys]),
            cover,
            local: [x, y],
            s,
            top,
            bot,
        })
    }
}
