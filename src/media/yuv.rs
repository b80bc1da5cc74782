//! RGB24 → YUV 4:2:0 planes (BT.601 matrix, limited range), one rectangle at a time.
//!
//! Why not swscale: a frame differs from its chunk's still picture only where the face moves, so
//! the writer converts the still picture once and each frame only around the face. That needs a
//! conversion whose result for a pixel does not depend on how much of the frame is converted, which
//! one integer formula used for both gives exactly (see [`expand`]).
//!
//! The filters are swscale's for RGB24 → YUV420P at the same size (what chunks used before), so
//! the planes stay within a level of its: luma per pixel; chroma the mean of a pixel pair across,
//! then the taps 1, 3, 3, 1 (/8) down over rows `2j-1 ..= 2j+2` (chroma sited between the two
//! rows), edge rows repeated. Integer arithmetic only: the same bytes on every machine.

/// Luma weights ×2^16 (0.299, 0.587, 0.114 scaled to 219 levels).
const Y_COEF: [i32; 3] = [16829, 33039, 6416];
/// Cb and Cr weights ×2^16 (scaled to 224 levels).
const U_COEF: [i32; 3] = [-9714, -19071, 28784];
const V_COEF: [i32; 3] = [28784, -24103, -4681];
/// Vertical chroma taps for rows `2j-1, 2j, 2j+1, 2j+2`.
const TAPS: [i32; 4] = [1, 3, 3, 1];

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

    pub fn is_empty(&self) -> bool {
        self.x0 >= self.x1 || self.y0 >= self.y1
    }
}

/// The rectangle to convert when the frame differs from its base only inside `changed`: clamped
/// to the frame, corners on even coordinates (one chroma sample covers 2x2 pixels), and two rows
/// more above and below, because a chroma row reads the rows next to its pair. Every plane sample
/// outside the result is then the base's.
pub fn expand(changed: Rect, width: usize, height: usize) -> Rect {
    let even_up = |v: usize, hi: usize| (v.div_ceil(2) * 2).min(hi);
    Rect {
        x0: (changed.x0.min(width) / 2) * 2,
        y0: (changed.y0.saturating_sub(2).min(height) / 2) * 2,
        x1: even_up(changed.x1, width),
        y1: even_up(changed.y1.saturating_add(2), height),
    }
}

/// One plane to write: its bytes and row stride.
pub struct Plane<'a> {
    pub data: &'a mut [u8],
    pub stride: usize,
}

/// Converts the pixels of `rect` (even corners, see [`expand`]) of the `width × height` RGB24
/// frame `rgb` into luma plane `y` (full size) and chroma planes `u`, `v` (half size, rounded up).
///
/// # Panics
/// If `rgb` or a plane is too short for the frame.
pub fn convert(
    rgb: &[u8],
    width: usize,
    height: usize,
    rect: Rect,
    y: Plane<'_>,
    u: Plane<'_>,
    v: Plane<'_>,
) {
    assert!(rgb.len() >= width * height * 3, "RGB frame too short");
    if rect.is_empty() {
        return;
    }
    for row in rect.y0..rect.y1 {
        let src = &rgb[(row * width + rect.x0) * 3..(row * width + rect.x1) * 3];
        let dst = &mut y.data[row * y.stride + rect.x0..row * y.stride + rect.x1];
        for (out, px) in dst.iter_mut().zip(src.chunks_exact(3)) {
            let px = [i32::from(px[0]), i32::from(px[1]), i32::from(px[2])];
            let acc = dot(Y_COEF, px) + (16 << 16) + (1 << 15);
            *out = (acc >> 16) as u8;
        }
    }
    let (cx0, cx1) = (rect.x0 / 2, rect.x1.div_ceil(2));
    let (cy0, cy1) = (rect.y0 / 2, rect.y1.div_ceil(2));
    let mut pairs = vec![[0i32; 2]; cx1 - cx0];
    let mut sums = vec![[0i32; 2]; cx1 - cx0];
    let (uv_w, last) = (width.div_ceil(2), height - 1);
    assert!(
        u.data.len() >= (cy1 - 1) * u.stride + uv_w && v.data.len() >= (cy1 - 1) * v.stride + uv_w,
        "chroma plane too short"
    );
    for cy in cy0..cy1 {
        sums.iter_mut().for_each(|s| *s = [0, 0]);
        for (tap, weight) in TAPS.iter().enumerate() {
            let row = (2 * cy + tap).saturating_sub(1).min(last);
            pair_sums(
                &rgb[row * width * 3..(row + 1) * width * 3],
                cx0,
                &mut pairs,
            );
            for (s, p) in sums.iter_mut().zip(&pairs) {
                s[0] += weight * p[0];
                s[1] += weight * p[1];
            }
        }
        // Weights total 2 × 8 = 16 = 2^4, on top of the coefficients' 2^16.
        let round = (128 << 20) + (1 << 19);
        let (u_row, v_row) = (cy * u.stride, cy * v.stride);
        for (i, s) in sums.iter().enumerate() {
            u.data[u_row + cx0 + i] = ((s[0] + round) >> 20) as u8;
            v.data[v_row + cx0 + i] = ((s[1] + round) >> 20) as u8;
        }
    }
}

/// Cb and Cr weighted sums (unscaled) of each pixel pair `cx0 + i` of one RGB24 row; a pair
/// past the row's end repeats its last pixel.
fn pair_sums(row: &[u8], cx0: usize, out: &mut [[i32; 2]]) {
    let last = row.len() / 3 - 1;
    for (i, o) in out.iter_mut().enumerate() {
        let x = 2 * (cx0 + i);
        let (a, b) = (x * 3, (x + 1).min(last) * 3);
        let px = [
            i32::from(row[a]) + i32::from(row[b]),
            i32::from(row[a + 1]) + i32::from(row[b + 1]),
            i32::from(row[a + 2]) + i32::from(row[b + 2]),
        ];
        *o = [dot(U_COEF, px), dot(V_COEF, px)];
    }
}

#[inline]
fn dot(c: [i32; 3], px: [i32; 3]) -> i32 {
    c[0] * px[0] + c[1] * px[1] + c[2] * px[2]
}

/// A frame's three planes, rows packed (strides `width` and `width / 2` rounded up).
#[derive(Debug, Clone)]
pub struct Yuv420 {
    pub width: usize,
    pub height: usize,
    pub y: Vec<u8>,
    pub u: Vec<u8>,
    pub v: Vec<u8>,
}

impl Yuv420 {
    pub fn new(width: usize, height: usize) -> Yuv420 {
        let chroma = width.div_ceil(2) * height.div_ceil(2);
        Yuv420 {
            width,
            height,
            y: vec![0; width * height],
            u: vec![128; chroma],
            v: vec![128; chroma],
        }
    }

    /// Converts `rect` of the RGB24 frame `rgb` (of this size) into these planes.
    pub fn convert(&mut self, rgb: &[u8], rect: Rect) {
        let cw = self.width.div_ceil(2);
        convert(
            rgb,
            self.width,
            self.height,
            rect,
            Plane {
                data: &mut self.y,
                stride: self.width,
            },
            Plane {
                data: &mut self.u,
                stride: cw,
            },
            Plane {
                data: &mut self.v,
                stride: cw,
            },
        );
    }

    /// The planes in order Y, U, V with their strides.
    pub fn planes(&self) -> [(&[u8], usize); 3] {
        let cw = self.width.div_ceil(2);
        [(&self.y, self.width), (&self.u, cw), (&self.v, cw)]
    }
}

/// Copies the samples of `rect` (even corners) of plane `index` (0 = Y) from `src` into `dst`.
pub fn copy_rect(src: (&[u8], usize), dst: Plane<'_>, index: usize, rect: Rect) {
    if rect.is_empty() {
        return;
    }
    let (x0, y0, x1, y1) = if index == 0 {
        (rect.x0, rect.y0, rect.x1, rect.y1)
    } else {
        (
            rect.x0 / 2,
            rect.y0 / 2,
            rect.x1.div_ceil(2),
            rect.y1.div_ceil(2),
        )
    };
    let (data, stride) = src;
    for row in y0..y1 {
        dst.data[row * dst.stride + x0..row * dst.stride + x1]
            .copy_from_slice(&data[row * stride + x0..row * stride + x1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic noise (a small LCG), so the pictures have edges everywhere.
    fn noise(n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 24) as u8
            })
            .collect()
    }

    fn full(rgb: &[u8], w: usize, h: usize) -> Yuv420 {
        let mut out = Yuv420::new(w, h);
        out.convert(rgb, Rect::full(w, h));
        out
    }

    #[test]
    fn black_white_and_primaries_land_on_the_limited_range_levels() {
        let cases: [([u8; 3], [u8; 3]); 5] = [
            ([0, 0, 0], [16, 128, 128]),
            ([255, 255, 255], [235, 128, 128]),
            ([255, 0, 0], [81, 90, 240]),
            ([0, 255, 0], [145, 54, 34]),
            ([0, 0, 255], [41, 240, 110]),
        ];
        for (rgb, yuv) in cases {
            let img: Vec<u8> = rgb.iter().copied().cycle().take(4 * 4 * 3).collect();
            let out = full(&img, 4, 4);
            assert_eq!([out.y[5], out.u[3], out.v[3]], yuv, "{rgb:?}");
        }
    }

    /// Converting the base once and then only the expanded changed rectangle gives exactly the
    /// planes of converting the whole changed frame, wherever the rectangle lies.
    #[test]
    fn a_changed_rectangle_converts_to_the_whole_frames_planes() {
        let (w, h) = (37, 22);
        let base = noise(w * h * 3, 1);
        let rects = [
            Rect {
                x0: 5,
                y0: 3,
                x1: 9,
                y1: 8,
            },
            Rect {
                x0: 0,
                y0: 0,
                x1: 1,
                y1: 1,
            },
            Rect {
                x0: 30,
                y0: 17,
                x1: 37,
                y1: 22,
            },
            Rect {
                x0: 12,
                y0: 10,
                x1: 13,
                y1: 11,
            },
            Rect {
                x0: 0,
                y0: 0,
                x1: 37,
                y1: 22,
            },
        ];
        for (i, &changed) in rects.iter().enumerate() {
            let mut frame = base.clone();
            let patch = noise(w * h * 3, 7 + i as u32);
            for y in changed.y0..changed.y1 {
                let row = (y * w + changed.x0) * 3..(y * w + changed.x1) * 3;
                frame[row.clone()].copy_from_slice(&patch[row]);
            }
            let mut planes = full(&base, w, h);
            planes.convert(&frame, expand(changed, w, h));
            let whole = full(&frame, w, h);
            assert_eq!(planes.y, whole.y, "{changed:?}");
            assert_eq!(planes.u, whole.u, "{changed:?}");
            assert_eq!(planes.v, whole.v, "{changed:?}");
        }
    }

    #[test]
    fn expand_aligns_to_even_corners_and_stays_inside() {
        let r = expand(
            Rect {
                x0: 5,
                y0: 5,
                x1: 9,
                y1: 9,
            },
            10,
            10,
        );
        assert_eq!(
            r,
            Rect {
                x0: 4,
                y0: 2,
                x1: 10,
                y1: 10
            }
        );
        let r = expand(
            Rect {
                x0: 0,
                y0: 1,
                x1: 2,
                y1: 2,
            },
            10,
            10,
        );
        assert_eq!(
            r,
            Rect {
                x0: 0,
                y0: 0,
                x1: 2,
                y1: 4
            }
        );
    }
}
