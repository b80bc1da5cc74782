//! Small geometry helpers for the warps: 2-D points, smoothstep, a local frame, a sampled curve.
//!
//! Input: landmark points in pixels. Output: frame coordinates and curve look-ups.
//! Invariants: [`Curve`] is defined for every abscissa (clamped at its ends) and is a
//! shape-preserving (Fritsch–Carlson) cubic through its knots, so lips never overshoot.

pub(crate) type P = [f32; 2];

pub(crate) fn sub(a: P, b: P) -> P {
    [a[0] - b[0], a[1] - b[1]]
}

pub(crate) fn add(a: P, b: P) -> P {
    [a[0] + b[0], a[1] + b[1]]
}

pub(crate) fn scale(a: P, k: f32) -> P {
    [a[0] * k, a[1] * k]
}

pub(crate) fn dot(a: P, b: P) -> f32 {
    a[0] * b[0] + a[1] * b[1]
}

pub(crate) fn len(a: P) -> f32 {
    dot(a, a).sqrt()
}

pub(crate) fn mean(points: &[P]) -> P {
    let n = points.len().max(1) as f32;
    let s = points.iter().fold([0.0, 0.0], |acc, &p| add(acc, p));
    scale(s, 1.0 / n)
}

/// Hermite smoothstep: 0 at or below `e0`, 1 at or above `e1`, C1 in between.
#[inline]
pub(crate) fn smoothstep(e0: f32, e1: f32, x: f32) -> f32 {
    ramp((x - e0) / (e1 - e0))
}

/// [`smoothstep`] over `[0, 1]`: `ramp((x - e0) * k)` with `k = 1 / (e1 - e0)` worked out once
/// is `smoothstep(e0, e1, x)` with a multiplication where it divides (per-pixel fades whose
/// widths are fixed per portrait).
#[inline]
pub(crate) fn ramp(t: f32) -> f32 {
    let t = t.clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

/// A smoothstep whose edges are fixed per portrait, its reciprocal width worked out once: a
/// per-pixel fade multiplies where [`smoothstep`] divides (equal to within rounding).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fade {
    from: f32,
    k: f32,
}

impl Fade {
    /// The fade from 0 at `e0` to 1 at `e1` (as `smoothstep(e0, e1, x)`).
    pub fn new(e0: f32, e1: f32) -> Fade {
        Fade {
            from: e0,
            k: 1.0 / (e1 - e0),
        }
    }

    /// The fade's value at `x`.
    #[inline]
    pub fn at(self, x: f32) -> f32 {
        ramp((x - self.from) * self.k)
    }
}

/// An orthonormal frame: `u` along the feature (left to right in the image), `v` = `u` turned
/// 90° clockwise, i.e. "down" for an upright face.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub origin: P,
    pub u: P,
    pub v: P,
}

impl Frame {
    /// Frame at `origin` with `u` along `dir` (must be non-zero).
    pub fn new(origin: P, dir: P) -> Frame {
        let l = len(dir);
        let u = [dir[0] / l, dir[1] / l];
        Frame {
            origin,
            u,
            v: [-u[1], u[0]],
        }
    }

    /// Image point → frame coordinates.
    #[inline]
    pub fn to_local(&self, p: P) -> P {
        let d = sub(p, self.origin);
        [dot(d, self.u), dot(d, self.v)]
    }

    /// Frame coordinates → image point.
    #[inline]
    pub fn to_image(&self, l: P) -> P {
        [
            self.origin[0] + l[0] * self.u[0] + l[1] * self.v[0],
            self.origin[1] + l[0] * self.u[1] + l[1] * self.v[1],
        ]
    }
}

/// A function y(x) sampled on a uniform grid, linear between samples.
#[derive(Debug, Clone)]
pub(crate) struct Curve {
    x0: f32,
    step: f32,
    ys: Vec<f32>,
}

impl Curve {
    /// Samples `f` at `n` points over `[x0, x1]`.
    pub fn sample(x0: f32, x1: f32, n: usize, f: impl Fn(f32) -> f32) -> Curve {
        let step = (x1 - x0) / (n - 1) as f32;
        Curve {
            x0,
            step,
            ys: (0..n).map(|i| f(x0 + step * i as f32)).collect(),
        }
    }

    /// Monotone cubic through `knots` (x, y), sorted by x; knots closer than `1e-3` in x are
    /// averaged. Flat outside the knots.
    pub fn through(knots: &[P], x0: f32, x1: f32, n: usize) -> Curve {
        let k = dedup_sorted(knots);
        Curve::sample(x0, x1, n, |x| hermite(&k, x))
    }

    /// Same grid, values mapped by `f(x, y)`.
    pub fn map(&self, f: impl Fn(f32, f32) -> f32) -> Curve {
        Curve {
            x0: self.x0,
            step: self.step,
            ys: self
                .ys
                .iter()
                .enumerate()
                .map(|(i, &y)| f(self.x0 + self.step * i as f32, y))
                .collect(),
        }
    }

    #[inline]
    pub fn at(&self, x: f32) -> f32 {
        self.at_knot(self.knot(x))
    }

    /// Where `x` falls on this curve's grid. The mouth looks up half a dozen curves sampled on
    /// one grid at the same abscissa for every pixel: one division then serves them all.
    #[inline]
    pub fn knot(&self, x: f32) -> Knot {
        let last = self.ys.len() - 1;
        let t = ((x - self.x0) / self.step).clamp(0.0, last as f32);
        let i = (t as usize).min(last - 1);
        Knot { i, f: t - i as f32 }
    }

    /// The value at a [`knot`](Self::knot) of a curve on the same grid: bit for bit
    /// [`at`](Self::at) of the abscissa it was taken at.
    #[inline]
    pub fn at_knot(&self, k: Knot) -> f32 {
        debug_assert!(k.i + 1 < self.ys.len(), "knot from a curve on another grid");
        self.ys[k.i] + (self.ys[k.i + 1] - self.ys[k.i]) * k.f
    }
}

/// A grid cell and the fraction across it (see [`Curve::knot`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Knot {
    i: usize,
    f: f32,
}

fn dedup_sorted(knots: &[P]) -> Vec<P> {
    let mut k: Vec<P> = knots.to_vec();
    k.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let mut out: Vec<P> = Vec::with_capacity(k.len());
    let mut count = 1.0f32;
    for p in k {
        match out.last_mut() {
            Some(last) if p[0] - last[0] < 1e-3 => {
                // Running average of coincident knots.
                count += 1.0;
                last[1] += (p[1] - last[1]) / count;
            }
            _ => {
                count = 1.0;
                out.push(p);
            }
        }
    }
    out
}

/// Fritsch–Carlson monotone cubic Hermite interpolation.
fn hermite(k: &[P], x: f32) -> f32 {
    match k.len() {
        0 => return 0.0,
        1 => return k[0][1],
        _ => {}
    }
    if x <= k[0][0] {
        return k[0][1];
    }
    if x >= k[k.len() - 1][0] {
        return k[k.len() - 1][1];
    }
    let i = k.partition_point(|p| p[0] <= x) - 1;
    let slope = |j: usize| (k[j + 1][1] - k[j][1]) / (k[j + 1][0] - k[j][0]);
    let tangent = |j: usize| -> f32 {
        if j == 0 {
            slope(0)
        } else if j == k.len() - 1 {
            slope(j - 1)
        } else {
            let (a, b) = (slope(j - 1), slope(j));
            if a * b <= 0.0 {
                0.0
            } else {
                2.0 / (1.0 / a + 1.0 / b)
            }
        }
    };
    let h = k[i + 1][0] - k[i][0];
    let t = (x - k[i][0]) / h;
    let (m0, m1) = (tangent(i) * h, tangent(i + 1) * h);
    let (t2, t3) = (t * t, t * t * t);
    (2.0 * t3 - 3.0 * t2 + 1.0) * k[i][1]
        + (t3 - 2.0 * t2 + t) * m0
        + (-2.0 * t3 + 3.0 * t2) * k[i + 1][1]
        + (t3 - t2) * m1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curve_passes_through_knots_without_overshoot() {
        let knots = [[-1.0, 0.0], [-0.5, 2.0], [0.0, 3.0], [0.5, 2.0], [1.0, 0.0]];
        let c = Curve::through(&knots, -1.5, 1.5, 301);
        for k in knots {
            assert!((c.at(k[0]) - k[1]).abs() < 0.02, "{k:?} {}", c.at(k[0]));
        }
        for i in 0..=300 {
            let y = c.at(-1.5 + 0.01 * i as f32);
            assert!((0.0..=3.0 + 1e-4).contains(&y));
        }
        assert_eq!(c.at(-9.0), 0.0);
        assert_eq!(c.at(9.0), 0.0);
    }

    #[test]
    fn a_shared_knot_reads_every_curve_of_the_grid_as_at_does() {
        let a = Curve::sample(-1.6, 1.6, 257, |x| x * x - 0.3);
        let b = a.map(|x, y| (3.0 * x).sin() + y);
        for i in 0..=4000 {
            let x = -2.0 + 0.001 * i as f32;
            let k = a.knot(x);
            assert_eq!(a.at_knot(k).to_bits(), a.at(x).to_bits(), "{x}");
            assert_eq!(b.at_knot(k).to_bits(), b.at(x).to_bits(), "{x}");
        }
    }

    #[test]
    fn fades_and_ramps_with_a_reciprocal_are_smoothstep() {
        for (e0, e1) in [(0.3f32, 1.0f32), (-2.0, 7.5), (12.0, 12.4), (5.0, -3.0)] {
            let (fade, k) = (Fade::new(e0, e1), 1.0 / (e1 - e0));
            for i in 0..=1000 {
                let x = e0.min(e1) - 1.0 + ((e1 - e0).abs() + 2.0) * i as f32 / 1000.0;
                let b = smoothstep(e0, e1, x);
                for a in [fade.at(x), ramp((x - e0) * k)] {
                    assert!((a - b).abs() < 1e-5, "{e0} {e1} {x}: {a} {b}");
                }
            }
        }
        assert_eq!(ramp(-3.0), 0.0);
        assert_eq!(ramp(3.0), 1.0);
    }

    #[test]
    fn coincident_knots_are_averaged() {
        let c = Curve::through(&[[0.0, 1.0], [0.0, 3.0], [1.0, 2.0]], 0.0, 1.0, 11);
        assert!((c.at(0.0) - 2.0).abs() < 1e-5);
    }

    #[test]
    fn frame_round_trips() {
        let f = Frame::new([10.0, 20.0], [3.0, 1.0]);
        let p = [17.5, -4.25];
        let q = f.to_image(f.to_local(p));
        assert!((p[0] - q[0]).abs() < 1e-4 && (p[1] - q[1]).abs() < 1e-4);
        // v points "down" for an upright frame.
        assert_eq!(Frame::new([0.0, 0.0], [1.0, 0.0]).v, [0.0, 1.0]);
    }
}
