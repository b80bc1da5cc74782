//! A frame's changing region split by what can change it: the mouth's and a blinking eye's
//! boxes are drawn in cells (`cells.rs`), every other pixel is moved by the head alone and is
//! sampled at its exact source, row by row.
//!
//! Input: a prepared [`Pose`] and the region it can change. Output: the frame's pixels there.
//! Invariants:
//! - The boxes are grown to the grid lines that cells of the whole region would have, so the
//!   pixels inside them are those cells' pixels, bit for bit.
//! - Outside the mouth's and the eyes' boxes a pixel's source is [`HeadRig::source`] bit for
//!   bit (worked out along the row, so it vectorises), sampled as the cells sample: no grid,
//!   no checks, no interpolation error, and pixels whose weight is zero are not touched.
//! - Each pixel of the region is drawn once: by the cells inside the boxes, by a row outside.
//!
//! [`HeadRig::source`]: super::head::HeadRig::source

use super::{FaceRig, Pose, Roi, cells};

/// Pixels a row's sources are worked out for at a time (kept on the stack).
const CHUNK: usize = 64;

impl FaceRig {
    /// Fills `roi` of `out` (which holds the portrait) for pose `f`.
    pub(super) fn render_regions(&self, f: &Pose, roi: Roi, out: &mut [u8]) {
        let boxes = boxes(
            cells::snap(roi, f.mouth_roi),
            f.eye_roi.map(|e| cells::snap(roi, e)),
        );
        for b in &boxes {
            self.render_cells(f, *b, out);
        }
        let Some(hf) = &f.head else {
            return;
        };
        let w = self.base.width;
        let (mut xs, mut ys) = ([0.0f32; CHUNK], [0.0f32; CHUNK]);
        let mut spans = Vec::with_capacity(boxes.len() + 1);
        for y in roi.y0..roi.y1 {
            outside(&boxes, y, roi.x0, roi.x1, &mut spans);
            for &(a, b) in &spans {
                let Some((a, b)) = self.head.moving(y, a, b) else {
                    continue;
                };
                for start in (a..b).step_by(CHUNK) {
                    let n = CHUNK.min(b - start);
                    let (xs, ys) = (&mut xs[..n], &mut ys[..n]);
                    self.head.row_sources(hf, y, start, xs, ys);
                    let row = &mut out[(y * w + start) * 3..(y * w + start + n) * 3];
                    self.base.sample_points(row, xs, ys);
                }
            }
        }
    }
}

/// The boxes drawn in cells: the mouth's, and a blinking eyes' (merged with the mouth's where
/// they overlap, so no pixel is in two).
fn boxes(mouth: Roi, eyes: Option<Roi>) -> Vec<Roi> {
    match eyes {
        Some(e) if e.overlaps(mouth) => vec![mouth.union(e)],
        Some(e) => vec![mouth, e],
        None => vec![mouth],
    }
}

/// The spans of `[a, b)` along row `y` outside every box (boxes do not overlap) into `spans`,
/// which is reused row after row: no allocation per row.
fn outside(boxes: &[Roi], y: usize, a: usize, b: usize, spans: &mut Vec<(usize, usize)>) {
    spans.clear();
    // At most two boxes (`boxes`), so their cuts fit on the stack.
    let (mut cuts, mut n) = ([(0, 0); 2], 0);
    for r in boxes
        .iter()
        .filter(|r| y >= r.y0 && y < r.y1 && r.x0 < r.x1)
    {
        cuts[n] = (r.x0, r.x1);
        n += 1;
    }
    cuts[..n].sort_unstable();
    let mut at = a;
    for &(x0, x1) in &cuts[..n] {
        if x0 > at {
            spans.push((at, x0.min(b)));
        }
        at = at.max(x1);
    }
    if at < b {
        spans.push((at, b));
    }
    spans.retain(|s| s.0 < s.1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roi(x0: usize, y0: usize, x1: usize, y1: usize) -> Roi {
        Roi { x0, y0, x1, y1 }
    }

    fn spans(boxes: &[Roi], y: usize, a: usize, b: usize) -> Vec<(usize, usize)> {
        let mut v = vec![(7, 7)];
        outside(boxes, y, a, b, &mut v);
        v
    }

    #[test]
    fn rows_skip_the_boxes_and_nothing_else() {
        let mouth = roi(40, 60, 80, 90);
        let eyes = roi(10, 10, 120, 30);
        let both = boxes(mouth, Some(eyes));
        assert_eq!(both, vec![mouth, eyes]);
        assert_eq!(spans(&both, 5, 0, 100), vec![(0, 100)]);
        assert_eq!(spans(&both, 20, 0, 100), vec![(0, 10)]);
        assert_eq!(spans(&both, 20, 10, 100), vec![]);
        assert_eq!(spans(&both, 60, 0, 100), vec![(0, 40), (80, 100)]);
        assert_eq!(spans(&both, 89, 50, 100), vec![(80, 100)]);
        assert_eq!(spans(&both, 90, 50, 100), vec![(50, 100)]);
        // Boxes that overlap are drawn as one, so no pixel is drawn twice.
        let merged = boxes(mouth, Some(roi(70, 20, 120, 70)));
        assert_eq!(merged, vec![roi(40, 20, 120, 90)]);
        assert_eq!(spans(&merged, 50, 0, 200), vec![(0, 40), (120, 200)]);
        assert_eq!(boxes(mouth, None), vec![mouth]);
        // Two boxes on one row, given in either order.
        let two = [roi(50, 0, 60, 10), roi(10, 0, 20, 10)];
        assert_eq!(spans(&two, 3, 0, 70), vec![(0, 10), (20, 50), (60, 70)]);
    }
}
