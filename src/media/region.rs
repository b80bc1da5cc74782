//! Which part of a frame the chunk writer converts to YUV again when the frame differs from its
//! chunk's still picture only inside a rectangle (the face).
//!
//! swscale's RGB24 → YUV420P at the same size filters luma per pixel and chroma over a pixel pair
//! across and the rows `2j-1 ..= 2j+2` down, so a plane sample depends on nothing further away:
//! converting a rectangle with two rows of context above and below gives exactly the samples of
//! converting the whole frame.

/// A pixel rectangle, end-exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub x0: usize,
    pub y0: usize,
    pub x1: usize,
    pub y1: usize,
}

impl Rect {
    pub fn full(width: usize, height: usize) -> Rect {
        Rect {
            x0: 0,
            y0: 0,
            x1: width,
            y1: height,
        }
    }
}

/// Rows of context converted above and below a rectangle (chroma reads one row past its pair).
pub(crate) const CONTEXT_ROWS: usize = 2;

/// Corners snap to this grid, so the rectangle's size, and with it the scaler, changes seldom.
const GRID: usize = 16;

/// The rectangle to convert again when the frame differs from its base only inside `changed`:
/// clamped to the `width × height` frame (both even), corners on the grid (even, as 4:2:0 needs)
/// and grown by the context rows, so that every plane sample outside it is the base's.
pub(crate) fn expand(changed: Rect, width: usize, height: usize) -> Rect {
    let down = |v: usize, hi: usize| (v.min(hi) / GRID) * GRID;
    let up = |v: usize, hi: usize| (v.div_ceil(GRID) * GRID).min(hi);
    Rect {
        x0: down(changed.x0, width),
        y0: down(changed.y0.saturating_sub(CONTEXT_ROWS), height),
        x1: up(changed.x1, width),
        y1: up(changed.y1.saturating_add(CONTEXT_ROWS), height),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expand_snaps_outward_grows_by_the_context_and_stays_inside() {
        let r = expand(
            Rect {
                x0: 17,
                y0: 17,
                x1: 20,
                y1: 30,
            },
            64,
            48,
        );
        assert_eq!(
            r,
            Rect {
                x0: 16,
                y0: 0,
                x1: 32,
                y1: 32
            }
        );
        let r = expand(
            Rect {
                x0: 40,
                y0: 20,
                x1: 63,
                y1: 47,
            },
            64,
            48,
        );
        assert_eq!(
            r,
            Rect {
                x0: 32,
                y0: 16,
                x1: 64,
                y1: 48
            }
        );
        let r = expand(
            Rect {
                x0: 5,
                y0: 31,
                x1: 9,
                y1: 32,
            },
            64,
            48,
        );
        assert_eq!(
            r,
            Rect {
                x0: 0,
                y0: 16,
                x1: 16,
                y1: 48
            }
        );
    }
}
