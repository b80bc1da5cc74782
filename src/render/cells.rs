//! The fast path of [`FaceRig::render`] where the mouth or a blinking eye can change pixels:
//! their boxes walked in cells, the smooth warp interpolated inside them (the rest of the
//! changing region is `rows.rs`'s).
//!
//! Input: a prepared [`Pose`] and a box of the region it can change. Output: the frame's pixels there.
//! Invariants:
//! - A cell is interpolated only when the exact warp, evaluated at its corners, edge midpoints
//!   and centre, is met by the corners' bilinear interpolation to within [`TOLERANCE`] px at
//!   each of the five inner points: a kink of the warp inside the cell (the lips' corners, where
//!   the horizontal scaling stops; the opening's ends) misses its midpoints by at least half of
//!   its largest miss, so no pixel is more than twice [`TOLERANCE`] off.
//! - It must also lie clear of the mouth's opening and lip band ([`MouthRig::clear`] at all
//!   these points, by room for the band's edges to curve within the cell) and of a blinking
//!   eye. Any other cell is split in four down to
//!   [`MIN_CELL`] px, then shaded pixel by pixel exactly as [`FaceRig::render_exact`] does.
//! - A cell the pose moves nowhere stays the portrait's, bit for bit; one the pose moves only
//!   in part is split or shaded exactly, so the moving region's edge is exact too.
//!
//! [`MouthRig::clear`]: super::mouth::MouthRig::clear

use super::geometry::P;
use super::{FaceRig, Pose, Roi};

/// Side (px) of the cells a frame is first cut into.
const CELL: usize = 16;
/// The smallest cell a split makes; a cell that would split into smaller ones is shaded pixel
/// by pixel instead: a 2-px cell's checks cost more warps than its 4 pixels cost to shade.
const MIN_CELL: usize = 4;
/// How far (px) the interpolated source may miss the exact one at a cell's checked points.
const TOLERANCE: f32 = 0.05;

/// The exact warp at one grid point.
#[derive(Debug, Clone, Copy)]
struct Warp {
    src: P,
    /// Distance (px) from where the mouth does more than move pixels; infinite off the mouth.
    clear: f32,
    /// The pose does not move this point at all.
    still: bool,
}

/// The exact warps at a cell's corners, edge midpoints and centre: `g[j][i]` at
/// x = (x0, xm, x1)[i], y = (y0, ym, y1)[j], with xm = (x0 + x1) / 2 and ym alike.
type Grid = [[Warp; 3]; 3];

impl FaceRig {
    /// Fills `roi` of `out` (which holds the portrait) for pose `f`.
    pub(super) fn render_cells(&self, f: &Pose, roi: Roi, out: &mut [u8]) {
        let xs = grid(roi.x0, roi.x1);
        let ys = grid(roi.y0, roi.y1);
        // Cell edges and midpoints along x: each cell's three columns of warps.
        let mut cols = vec![xs[0]];
        for pair in xs.windows(2) {
            cols.extend([(pair[0] + pair[1]) / 2, pair[1]]);
        }
        let row = |y: usize| -> Vec<Warp> { cols.iter().map(|&x| self.warp(f, x, y)).collect() };
        let mut top = row(ys[0]);
        for pair in ys.windows(2) {
            let (y0, y1) = (pair[0], pair[1]);
            let mid = row((y0 + y1) / 2);
            let bottom = row(y1);
            for (i, xp) in xs.windows(2).enumerate() {
                let cell = Roi {
                    x0: xp[0],
                    y0,
                    x1: xp[1],
                    y1,
                };
                let at = |r: &[Warp]| [r[2 * i], r[2 * i + 1], r[2 * i + 2]];
                self.fill_cell(f, cell, [at(&top), at(&mid), at(&bottom)], out);
            }
            top = bottom;
        }
    }

    /// The exact warp at `(x, y)`; any integer point, inside the image or on its far edges.
    fn warp(&self, f: &Pose, x: usize, y: usize) -> Warp {
        let q = self.head_source(f, x, y);
        let p = [x as f32, y as f32];
        let plain = Warp {
            src: q,
            clear: f32::INFINITY,
            still: q == p,
        };
        if !f.mouth_roi.contains(x, y) {
            return plain;
        }
        match self.mouth.locate(&f.mouth, q) {
            Some(at) => Warp {
                src: at.src,
                clear: self.mouth.clear(&f.mouth, &at),
                still: at.src == p,
            },
            None => plain,
        }
    }

    /// Draws one cell from the exact warps `g` at its corners, edge midpoints and centre (its
    /// right and bottom edges are the next cells' first pixels).
    fn fill_cell(&self, f: &Pose, cell: Roi, g: Grid, out: &mut [u8]) {
        let (cw, ch) = (cell.x1 - cell.x0, cell.y1 - cell.y0);
        if cw < 2 || ch < 2 || f.eye_roi.is_some_and(|e| e.overlaps(cell)) {
            return self.shade_cell(f, cell, out);
        }
        if cw.min(ch) < 2 * MIN_CELL && doomed(&g, room(cw, ch)) {
            return self.shade_cell(f, cell, out);
        }
        let (mx, my) = ((cell.x0 + cell.x1) / 2, (cell.y0 + cell.y1) / 2);
        let qx = [(cell.x0 + mx) / 2, (mx + cell.x1) / 2];
        let qy = [(cell.y0 + my) / 2, (my + cell.y1) / 2];
        let checks = [
            [self.warp(f, qx[0], qy[0]), self.warp(f, qx[1], qy[0])],
            [self.warp(f, qx[0], qy[1]), self.warp(f, qx[1], qy[1])],
        ];
        let all = g.iter().flatten().chain(checks.iter().flatten());
        let still = all.clone().filter(|w| w.still).count();
        if still == 13 {
            return;
        }
        let room = room(cw, ch);
        let clear = all.clone().map(|w| w.clear);
        if clear.clone().fold(f32::MIN, f32::max) <= -room {
            // Deep in the opening or its lip band: nothing here is a plain warp.
            return self.shade_cell(f, cell, out);
        }
        let quad = Quad::new(&cell, mx, my);
        // The checks' Lagrange weights, two columns and two rows, shared by the four checks.
        let lx = qx.map(|x| quad.x.weights((x - cell.x0) as f32));
        let ly = qy.map(|y| quad.y.weights((y - cell.y0) as f32));
        let smooth = still == 0
            && clear.clone().all(|c| c >= room)
            && (0..2).all(|j| {
                (0..2).all(|i| {
                    let guess = Quad::at(&g, lx[i], ly[j]);
                    let exact = checks[j][i].src;
                    (exact[0] - guess[0]).abs() <= TOLERANCE
                        && (exact[1] - guess[1]).abs() <= TOLERANCE
                })
            });
        if smooth {
            return self.sample_cell(cell, &quad, &g, out);
        }
        if cw.min(ch) < 2 * MIN_CELL || quarters_doomed(&cell, mx, my, g[1][1]) {
            return self.shade_cell(f, cell, out);
        }
        // Split in four: the 5×5 warps at the quarters, of which the parent has 13.
        let xs5 = [cell.x0, qx[0], mx, qx[1], cell.x1];
        let ys5 = [cell.y0, qy[0], my, qy[1], cell.y1];
        let mut g5 = [[g[0][0]; 5]; 5];
        for (j, &y) in ys5.iter().enumerate() {
            for (i, &x) in xs5.iter().enumerate() {
                g5[j][i] = match (j % 2, i % 2) {
                    (0, 0) => g[j / 2][i / 2],
                    (1, 1) => checks[j / 2][i / 2],
                    _ => self.warp(f, x, y),
                };
            }
        }
        for b in 0..2 {
            for a in 0..2 {
                let sub = Roi {
                    x0: xs5[2 * a],
                    y0: ys5[2 * b],
                    x1: xs5[2 * a + 2],
                    y1: ys5[2 * b + 2],
                };
                let part = |j: usize| [g5[j][2 * a], g5[j][2 * a + 1], g5[j][2 * a + 2]];
                self.fill_cell(f, sub, [part(2 * b), part(2 * b + 1), part(2 * b + 2)], out);
            }
        }
    }

    /// A smooth cell: each pixel one fixed-point bilinear sample at the interpolated source.
    fn sample_cell(&self, cell: Roi, quad: &Quad, g: &Grid, out: &mut [u8]) {
        let w = self.base.width;
        // The row quadratic's coefficients are linear in the nodes, so each pixel row's are
        // the Lagrange blend of the three grid rows' (worked out once per cell, not per row).
        let coef = g.map(|r| quad.x.powers([r[0].src, r[1].src, r[2].src]));
        for y in cell.y0..cell.y1 {
            let ly = quad.y.weights((y - cell.y0) as f32);
            let [a, b, c] = [0, 1, 2].map(|t| {
                let mut p = [0.0f32; 2];
                for (l, row) in ly.iter().zip(&coef) {
                    p[0] += l * row[t][0];
                    p[1] += l * row[t][1];
                }
                p
            });
            let row = &mut out[(y * w + cell.x0) * 3..(y * w + cell.x1) * 3];
            self.base.sample_row(row, a, b, c);
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
}

/// Quadratic (Lagrange) interpolation through a cell's three nodes on each axis.
struct Quad {
    x: Nodes,
    y: Nodes,
}

/// Three nodes at 0, `m` and `n` pixels from a cell's first pixel (`0 < m < n`).
struct Nodes {
    m: f32,
    n: f32,
}

impl Nodes {
    /// The quadratic through values `r` at the three nodes, in powers of the distance `t` from
    /// the first: `[a, b, c]` with `r(t) = a + b·t + c·t²` (via its Newton form).
    #[inline]
    fn powers(&self, r: [P; 3]) -> [P; 3] {
        let (m, n) = (self.m, self.n);
        let mut b = [0.0f32; 2];
        let mut c = [0.0f32; 2];
        for k in 0..2 {
            let d01 = (r[1][k] - r[0][k]) / m;
            let d12 = (r[2][k] - r[1][k]) / (n - m);
            c[k] = (d12 - d01) / n;
            b[k] = d01 - m * c[k];
        }
        [r[0], b, c]
    }

    /// The three Lagrange weights at `t` pixels from the first node.
    #[inline]
    fn weights(&self, t: f32) -> [f32; 3] {
        let (m, n) = (self.m, self.n);
        [
            (t - m) * (t - n) / (m * n),
            t * (t - n) / (m * (m - n)),
            t * (t - m) / (n * (n - m)),
        ]
    }
}

impl Quad {
    fn new(cell: &Roi, mx: usize, my: usize) -> Quad {
        Quad {
            x: Nodes {
                m: (mx - cell.x0) as f32,
                n: (cell.x1 - cell.x0) as f32,
            },
            y: Nodes {
                m: (my - cell.y0) as f32,
                n: (cell.y1 - cell.y0) as f32,
            },
        }
    }

    /// The interpolated source at the point with Lagrange weights `lx` across and `ly` down.
    fn at(g: &Grid, lx: [f32; 3], ly: [f32; 3]) -> P {
        let mut p = [0.0f32; 2];
        for (j, row) in g.iter().enumerate() {
            for (i, w) in row.iter().enumerate() {
                p[0] += ly[j] * lx[i] * w.src[0];
                p[1] += ly[j] * lx[i] * w.src[1];
            }
        }
        p
    }
}

/// `b` grown out to the grid lines that cells of all of `roi` would have (within `roi`): its
/// cells are then the same cells, with the same warps, as those of the whole region.
pub(super) fn snap(roi: Roi, b: Roi) -> Roi {
    let down = |v: usize, o: usize| o + (v - o) / CELL * CELL;
    let up = |v: usize, o: usize, end: usize| (o + (v - o).div_ceil(CELL) * CELL).min(end);
    Roi {
        x0: down(b.x0, roi.x0),
        y0: down(b.y0, roi.y0),
        x1: up(b.x1, roi.x0, roi.x1),
        y1: up(b.y1, roi.y0, roi.y1),
    }
}

/// Grid lines every [`CELL`] pixels from `a`, ending exactly at `b` (the last cell may be
/// narrower).
fn grid(a: usize, b: usize) -> Vec<usize> {
    let mut g: Vec<usize> = (a..b).step_by(CELL).collect();
    g.push(b);
    g
}

/// Every pixel is within a quarter of the cell's side (plus a little) of one of the 13 points,
/// and `clear` changes by at most about 5 px per pixel (the lip edges' slopes and the level
/// shift on top of the pixel's own step): room for that.
fn room(cw: usize, ch: usize) -> f32 {
    1.5 * cw.max(ch) as f32 + 1.0
}

/// Whether the grid points alone rule a cell out of being smooth: one of them moves and another
/// is still or lies within `room` of the mouth's opening. A cell too small to split is then
/// shaded exactly whatever its four checks say, so they need not be worked out.
fn doomed(g: &Grid, room: f32) -> bool {
    let all = || g.iter().flatten();
    all().any(|w| !w.still) && all().any(|w| w.still || w.clear < room)
}

/// Whether every quarter of `cell` (split at `mx`, `my`) would be [`doomed`] by its centre
/// `c` alone, a corner of all four: it moves and lies near the opening, and no quarter can split
/// further. The cell is then shaded exactly without the split's 12 warps.
fn quarters_doomed(cell: &Roi, mx: usize, my: usize, c: Warp) -> bool {
    let (w, h) = ([mx - cell.x0, cell.x1 - mx], [my - cell.y0, cell.y1 - my]);
    let (w_max, h_max) = (w[0].max(w[1]), h[0].max(h[1]));
    !c.still && w_max.min(h_max) < 2 * MIN_CELL && c.clear < room(w[0].min(w[1]), h[0].min(h[1]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::geometry::{add, scale};

    /// A small cell is ruled out by its grid alone when one point moves and another is still or
    /// near the opening; a cell all of whose points move clear of it, or none of whose points
    /// move, still needs its checks.
    #[test]
    fn doomed_cells_are_the_ones_their_checks_could_not_save() {
        let room = room(4, 4);
        let moving = Warp {
            src: [10.5, 20.25],
            clear: room,
            still: false,
        };
        let g = [[moving; 3]; 3];
        assert!(!doomed(&g, room), "smooth candidate");
        let mut near = g;
        near[2][1].clear = room - 0.01;
        assert!(doomed(&near, room), "a point near the opening");
        let mut part = g;
        part[0][0].still = true;
        assert!(doomed(&part, room), "partly still");
        let still = [[Warp {
            clear: f32::NEG_INFINITY,
            still: true,
            ..moving
        }; 3]; 3];
        assert!(!doomed(&still, room), "a cell that may stay the portrait's");
        let mut deep = [[Warp {
            clear: -2.0 * room,
            ..moving
        }; 3]; 3];
        assert!(doomed(&deep, room), "deep in the opening");
        deep[1][1].still = true;
        assert!(doomed(&deep, room), "deep and partly still");
    }

    /// An 8-px cell whose moving centre lies near the opening has four doomed quarters; a still
    /// centre, one clear of the opening, or quarters that could split again leave it to split.
    #[test]
    fn quarters_are_doomed_by_a_moving_centre_near_the_opening() {
        let cell = |side: usize| Roi {
            x0: 32,
            y0: 48,
            x1: 32 + side,
            y1: 48 + side,
        };
        let centre = |clear: f32, still: bool| Warp {
            src: [1.0, 2.0],
            clear,
            still,
        };
        let (c8, near) = (cell(8), room(4, 4) - 0.5);
        assert!(quarters_doomed(&c8, 36, 52, centre(near, false)));
        assert!(!quarters_doomed(&c8, 36, 52, centre(near, true)), "still");
        assert!(
            !quarters_doomed(&c8, 36, 52, centre(room(4, 4), false)),
            "clear"
        );
        // A narrower last cell (13 px: quarters of 6 and 7) uses its smallest quarter's room.
        let c13 = Roi { x1: 45, ..c8 };
        assert!(quarters_doomed(
            &c13,
            38,
            52,
            centre(room(6, 4) - 0.5, false)
        ));
        assert!(!quarters_doomed(&c13, 38, 52, centre(room(6, 4), false)));
        // 16-px quarters split again: their own grids decide.
        assert!(!quarters_doomed(&cell(16), 40, 56, centre(-100.0, false)));
    }

    /// The rows' quadratics blended from the grid rows' coefficients trace the same sources as
    /// each row's own quadratic through its interpolated nodes (what the cells did before).
    #[test]
    fn blended_row_coefficients_trace_each_rows_own_quadratic() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let (cw, ch) = (rng.usize(2..=16), rng.usize(2..=16));
            let cell = Roi {
                x0: 100,
                y0: 50,
                x1: 100 + cw,
                y1: 50 + ch,
            };
            let quad = Quad::new(&cell, 100 + cw / 2, 50 + ch / 2);
            let mut g = [[Warp {
                src: [0.0; 2],
                clear: 0.0,
                still: false,
            }; 3]; 3];
            for (j, row) in g.iter_mut().enumerate() {
                for (i, w) in row.iter_mut().enumerate() {
                    let jitter = |r: &mut fastrand::Rng| 3.0 * (r.f32() - 0.5);
                    w.src = [
                        900.0 + 8.0 * i as f32 + jitter(&mut rng),
                        700.0 + 8.0 * j as f32 + jitter(&mut rng),
                    ];
                }
            }
            let coef = g.map(|r| quad.x.powers([r[0].src, r[1].src, r[2].src]));
            for y in 0..ch {
                let ly = quad.y.weights(y as f32);
                let node = |i: usize| -> P {
                    let p = (0..3).map(|j| scale(g[j][i].src, ly[j]));
                    p.fold([0.0; 2], add)
                };
                let own = quad.x.powers([node(0), node(1), node(2)]);
                let blend = |t: usize| (0..3).map(|j| scale(coef[j][t], ly[j])).fold([0.0; 2], add);
                for k in 0..cw {
                    let k = k as f32;
                    let at = |p: [P; 3]| add(add(p[0], scale(p[1], k)), scale(p[2], k * k));
                    let (a, b) = (at(own), at([blend(0), blend(1), blend(2)]));
                    assert!(
                        (a[0] - b[0]).abs() < 1e-3 && (a[1] - b[1]).abs() < 1e-3,
                        "{a:?} {b:?}"
                    );
                }
            }
        }
    }
}
