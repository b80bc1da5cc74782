//! The base image as packed RGB24 plus bilinear sampling.
//!
//! Input: the portrait. Output: colours at any real-valued position.
//! Invariants: a sample at integer coordinates returns the stored pixel exactly, so a zero
//! displacement reproduces the portrait bit for bit; positions outside the image are clamped.

use super::geometry::Frame;

#[derive(Debug, Clone)]
pub(crate) struct Rgb {
    pub width: usize,
    pub height: usize,
    pub data: Vec<u8>,
}

impl Rgb {
    pub fn from_image(img: &image::RgbImage) -> Rgb {
        Rgb {
            width: img.width() as usize,
            height: img.height() as usize,
            data: img.as_raw().clone(),
        }
    }

    /// Bilinear sample at frame-local coordinates.
    #[inline]
    pub fn bilinear_local(&self, frame: &Frame, l: [f32; 2]) -> [f32; 3] {
        let p = frame.to_image(l);
        self.bilinear(p[0], p[1])
    }

    /// Bilinear sample at `(x, y)` (pixel centres at integers).
    #[inline]
    pub fn bilinear(&self, x: f32, y: f32) -> [f32; 3] {
        let xm = (self.width - 1) as f32;
        let ym = (self.height - 1) as f32;
        let x = x.clamp(0.0, xm);
        let y = y.clamp(0.0, ym);
        let x0 = x as usize;
        let y0 = y as usize;
        let fx = x - x0 as f32;
        let fy = y - y0 as f32;
        let x1 = (x0 + 1).min(self.width - 1);
        let y1 = (y0 + 1).min(self.height - 1);
        let row0 = y0 * self.width;
        let row1 = y1 * self.width;
        let d = &self.data;
        let mut out = [0.0f32; 3];
        for (c, o) in out.iter_mut().enumerate() {
            let a = f32::from(d[(row0 + x0) * 3 + c]);
            let b = f32::from(d[(row0 + x1) * 3 + c]);
            let e = f32::from(d[(row1 + x0) * 3 + c]);
            let f = f32::from(d[(row1 + x1) * 3 + c]);
            let top = a + (b - a) * fx;
            let bottom = e + (f - e) * fx;
            *o = top + (bottom - top) * fy;
        }
        out
    }
}

impl Rgb {
    /// Bilinear sample straight to bytes with 8-bit fixed-point weights: the head warp moves most
    /// of a frame's changed pixels, and this is about twice as fast as the float path. Integer
    /// coordinates still return the stored pixel exactly.
    #[inline]
    pub fn bilinear_u8(&self, x: f32, y: f32) -> [u8; 3] {
        let x = x.clamp(0.0, (self.width - 1) as f32);
        let y = y.clamp(0.0, (self.height - 1) as f32);
        let (x0, y0) = (x as usize, y as usize);
        let fx = ((x - x0 as f32) * 256.0) as u32;
        let fy = ((y - y0 as f32) * 256.0) as u32;
        let x1 = (x0 + 1).min(self.width - 1);
        let y1 = (y0 + 1).min(self.height - 1);
        let (r0, r1) = (y0 * self.width, y1 * self.width);
        let d = &self.data;
        let (ia, ib, ie, i_f) = ((r0 + x0) * 3, (r0 + x1) * 3, (r1 + x0) * 3, (r1 + x1) * 3);
        let mut out = [0u8; 3];
        for (c, o) in out.iter_mut().enumerate() {
            let top = u32::from(d[ia + c]) * (256 - fx) + u32::from(d[ib + c]) * fx;
            let bottom = u32::from(d[ie + c]) * (256 - fx) + u32::from(d[i_f + c]) * fx;
            *o = ((top * (256 - fy) + bottom * fy + 32768) >> 16) as u8;
        }
        out
    }
}

impl Rgb {
    /// Fills `row` (RGB24) with [`bilinear_u8`](Self::bilinear_u8) samples along a row of an
    /// interpolated cell: pixel `k` samples at `a + b·k + c·k²` (the row's quadratic), stepped
    /// by forward differences in 16.16 fixed point. Positions are clamped to the image, as
    /// `bilinear_u8` does.
    pub fn sample_row(&self, row: &mut [u8], a: [f32; 2], b: [f32; 2], c: [f32; 2]) {
        let fixed = |v: f32| (v * 65536.0) as i32;
        // Half a 1/256 px up front: positions round to the weights' grid, so a warp that moves
        // a pixel by less than that copies it exactly, as the float path does.
        let (mut x, mut y) = (fixed(a[0]) + 128, fixed(a[1]) + 128);
        let (mut dx, mut dy) = (fixed(b[0] + c[0]), fixed(b[1] + c[1]));
        let (ddx, ddy) = (fixed(2.0 * c[0]), fixed(2.0 * c[1]));
        // Top-left corners of the 2×2 neighbourhood stop one short of the last row and
        // column; a position on them (or past them) weighs the far pixel fully instead.
        let (cx, cy) = ((self.width - 2) as i32, (self.height - 2) as i32);
        let stride = self.width * 3;
        let d = &self.data;
        for px in row.chunks_exact_mut(3) {
            let (xs, ys) = (x >> 8, y >> 8);
            let (x0, y0) = ((xs >> 8).clamp(0, cx), (ys >> 8).clamp(0, cy));
            let fx = (xs - (x0 << 8)).clamp(0, 256) as u32;
            let fy = (ys - (y0 << 8)).clamp(0, 256) as u32;
            let i = y0 as usize * stride + x0 as usize * 3;
            let (top, bottom) = (&d[i..i + 6], &d[i + stride..i + stride + 6]);
            for k in 0..3 {
                let t = u32::from(top[k]) * (256 - fx) + u32::from(top[k + 3]) * fx;
                let b = u32::from(bottom[k]) * (256 - fx) + u32::from(bottom[k + 3]) * fx;
                px[k] = ((t * (256 - fy) + b * fy + 32768) >> 16) as u8;
            }
            x = x.wrapping_add(dx);
            y = y.wrapping_add(dy);
            dx = dx.wrapping_add(ddx);
            dy = dy.wrapping_add(ddy);
        }
    }
}

/// Writes a colour, rounded and clamped to 0..=255.
#[inline]
pub(crate) fn put(out: &mut [u8], i: usize, c: [f32; 3]) {
    for k in 0..3 {
        out[i + k] = (c[k] + 0.5).clamp(0.0, 255.0) as u8;
    }
}

#[inline]
pub(crate) fn mix(a: [f32; 3], b: [f32; 3], t: f32) -> [f32; 3] {
    [
        a[0] + (b[0] - a[0]) * t,
        a[1] + (b[1] - a[1]) * t,
        a[2] + (b[2] - a[2]) * t,
    ]
}

#[inline]
pub(crate) fn mul(a: [f32; 3], k: f32) -> [f32; 3] {
    [a[0] * k, a[1] * k, a[2] * k]
}

pub(crate) fn luma(c: [f32; 3]) -> f32 {
    0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]
}

/// Mean of colour samples per channel (black for none): the colour a region is painted with.
pub(crate) fn mean3(cs: &[[f32; 3]]) -> [f32; 3] {
    let n = cs.len().max(1) as f32;
    let s = cs
        .iter()
        .fold([0.0; 3], |a, c| [a[0] + c[0], a[1] + c[1], a[2] + c[2]]);
    [s[0] / n, s[1] / n, s[2] / n]
}

/// Median of colour samples per channel: a region's tone without its highlights and shadows.
pub(crate) fn median(cs: &mut [[f32; 3]]) -> [f32; 3] {
    let mut out = [0.0; 3];
    for (k, o) in out.iter_mut().enumerate() {
        let mut v: Vec<f32> = cs.iter().map(|c| c[k]).collect();
        v.sort_by(f32::total_cmp);
        *o = v.get(v.len() / 2).copied().unwrap_or(0.0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_samples_are_exact_and_edges_clamp() {
        let img =
            image::RgbImage::from_fn(3, 2, |x, y| image::Rgb([x as u8 * 50, y as u8 * 70, 9]));
        let r = Rgb::from_image(&img);
        assert_eq!(r.bilinear(2.0, 1.0), [100.0, 70.0, 9.0]);
        assert_eq!(r.bilinear(-5.0, 9.0), [0.0, 70.0, 9.0]);
        assert_eq!(r.bilinear(0.5, 0.5), [25.0, 35.0, 9.0]);
        let mut out = [0u8; 3];
        put(&mut out, 0, [300.0, -4.0, 12.4]);
        assert_eq!(out, [255, 0, 12]);
    }
}
