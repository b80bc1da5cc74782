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
    /// `bilinear_u8` does. On x86-64 with AVX2 eight pixels are sampled a step, bit for bit
    /// the scalar path's bytes (the close-ups' frames spend most of their time here).
    pub fn sample_row(&self, row: &mut [u8], a: [f32; 2], b: [f32; 2], c: [f32; 2]) {
        let steps = RowSteps::new(a, b, c);
        #[cfg(target_arch = "x86_64")]
        if self.data.len() <= i32::MAX as usize && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present (checked just above) and the data's offsets fit the
            // gathers' 32-bit indices.
            return unsafe { self.sample_row_avx2(row, steps) };
        }
        self.sample_row_scalar(row, steps);
    }

    /// The portable row sampler, one pixel a step.
    fn sample_row_scalar(&self, row: &mut [u8], s: RowSteps) {
        let RowSteps {
            mut x,
            mut y,
            mut dx,
            mut dy,
            ddx,
            ddy,
        } = s;
        // Top-left corners of the 2×2 neighbourhood stop one short of the last row and
        // column; a position on them (or past them) weighs the far pixel fully instead.
        for px in row.chunks_exact_mut(3) {
            self.fixed_u8(x, y, px);
            x = x.wrapping_add(dx);
            y = y.wrapping_add(dy);
            dx = dx.wrapping_add(ddx);
            dy = dy.wrapping_add(ddy);
        }
    }

    /// One pixel at `(x, y)` in 16.16 fixed point (already rounded to the 8-bit weights' grid,
    /// see [`RowSteps`]) into `px`. Top-left corners of the 2×2 neighbourhood stop one short of
    /// the last row and column; a position on them (or past them) weighs the far pixel fully.
    #[inline]
    fn fixed_u8(&self, x: i32, y: i32, px: &mut [u8]) {
        let (cx, cy) = ((self.width - 2) as i32, (self.height - 2) as i32);
        let stride = self.width * 3;
        let d = &self.data;
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
    }

    /// Fills `row` (RGB24) with [`bilinear_u8`](Self::bilinear_u8) at the source positions
    /// `xs`, `ys` (one per pixel, image coordinates), bit for bit: for pixels whose sources are
    /// not a smooth quadratic along the row (the head motion's weight map), so they are given
    /// one by one, and drawn as the exact renderer draws them. AVX2 eight pixels a step where
    /// present.
    pub fn sample_points(&self, row: &mut [u8], xs: &[f32], ys: &[f32]) {
        assert!(row.len() == 3 * xs.len() && xs.len() == ys.len());
        #[cfg(target_arch = "x86_64")]
        if self.data.len() <= i32::MAX as usize && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present (checked just above) and the data's offsets fit the
            // gathers' 32-bit indices.
            return unsafe { self.sample_points_avx2(row, xs, ys) };
        }
        for ((px, &x), &y) in row.chunks_exact_mut(3).zip(xs).zip(ys) {
            let (x, y) = self.truncated(x, y);
            self.fixed_u8(x, y, px);
        }
    }

    /// `(x, y)` clamped to the image and cut to 1/256 px (as [`bilinear_u8`](Self::bilinear_u8)
    /// cuts its weights; exact, the scaling being by a power of two), in 16.16 fixed point.
    #[inline]
    fn truncated(&self, x: f32, y: f32) -> (i32, i32) {
        let cut = |v: f32, max: usize| ((v.clamp(0.0, max as f32) * 256.0) as i32) << 8;
        (cut(x, self.width - 1), cut(y, self.height - 1))
    }

    /// [`sample_points`](Self::sample_points) eight pixels a step.
    ///
    /// # Safety
    /// The CPU must support AVX2, and `self.data.len()` must fit in an `i32`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn sample_points_avx2(&self, row: &mut [u8], xs: &[f32], ys: &[f32]) {
        use std::arch::x86_64::*;
        let n = xs.len();
        let scale = _mm256_set1_ps(256.0);
        let zero = _mm256_setzero_ps();
        let (xm, ym) = (
            _mm256_set1_ps((self.width - 1) as f32),
            _mm256_set1_ps((self.height - 1) as f32),
        );
        let mut done = 0;
        while done + 8 <= n {
            // SAFETY: `done + 8 <= n`, the length of both.
            let (vx, vy) = unsafe {
                (
                    _mm256_loadu_ps(xs.as_ptr().add(done)),
                    _mm256_loadu_ps(ys.as_ptr().add(done)),
                )
            };
            // As `truncated`: clamped, cut to 1/256 px, 16.16.
            let cut = |v, max| {
                let v = _mm256_mul_ps(_mm256_min_ps(_mm256_max_ps(v, zero), max), scale);
                _mm256_slli_epi32::<8>(_mm256_cvttps_epi32(v))
            };
            // SAFETY: AVX2 as this function; the data's length was checked by the caller.
            let out = unsafe { self.eight_avx2(cut(vx, xm), cut(vy, ym)) };
            row[done * 3..(done + 8) * 3].copy_from_slice(&out[..24]);
            done += 8;
        }
        for ((px, &x), &y) in row[done * 3..]
            .chunks_exact_mut(3)
            .zip(&xs[done..])
            .zip(&ys[done..])
        {
            let (x, y) = self.truncated(x, y);
            self.fixed_u8(x, y, px);
        }
    }

    /// [`sample_row_scalar`](Self::sample_row_scalar) eight pixels a step: the same positions
    /// (the forward differences advanced eight pixels at once, exact in wrapping arithmetic),
    /// the same 2×2 neighbourhoods, the same integer weights.
    ///
    /// # Safety
    /// The CPU must support AVX2, and `self.data.len()` must fit in an `i32`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn sample_row_avx2(&self, row: &mut [u8], s: RowSteps) {
        use std::arch::x86_64::*;
        let n = row.len() / 3;
        // Lane k starts at pixel k: x(k) = x + k·dx + k(k - 1)/2·ddx, dx(k) = dx + k·ddx
        // (exact in wrapping arithmetic, as the scalar steps are).
        let k = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let tri = _mm256_setr_epi32(0, 0, 1, 3, 6, 10, 15, 21);
        let lanes = |v: i32, d: i32, dd: i32| {
            let (d, dd) = (_mm256_set1_epi32(d), _mm256_set1_epi32(dd));
            let at = _mm256_add_epi32(_mm256_mullo_epi32(d, k), _mm256_mullo_epi32(dd, tri));
            (
                _mm256_add_epi32(_mm256_set1_epi32(v), at),
                _mm256_add_epi32(d, _mm256_mullo_epi32(dd, k)),
            )
        };
        let (mut vx, mut vdx) = lanes(s.x, s.dx, s.ddx);
        let (mut vy, mut vdy) = lanes(s.y, s.dy, s.ddy);
        // Eight pixels on: x(k + 8) = x(k) + 8·dx(k) + 28·ddx, dx(k + 8) = dx(k) + 8·ddx.
        let (jx, jy) = (
            _mm256_set1_epi32(s.ddx.wrapping_mul(28)),
            _mm256_set1_epi32(s.ddy.wrapping_mul(28)),
        );
        let (jdx, jdy) = (
            _mm256_set1_epi32(s.ddx.wrapping_mul(8)),
            _mm256_set1_epi32(s.ddy.wrapping_mul(8)),
        );
        let mut done = 0;
        while done < n {
            // SAFETY: AVX2 as this function; the data's length was checked by the caller.
            let out = unsafe { self.eight_avx2(vx, vy) };
            // A whole step's 24 bytes are a copy of a known length (a few moves); only a row's
            // last pixels pay for a copy whose length is known at run time (a call to memcpy).
            let m = (n - done).min(8);
            if m == 8 {
                row[done * 3..(done + 8) * 3].copy_from_slice(&out[..24]);
            } else {
                row[done * 3..(done + m) * 3].copy_from_slice(&out[..m * 3]);
            }
            done += m;
            vx = _mm256_add_epi32(_mm256_add_epi32(vx, _mm256_slli_epi32::<3>(vdx)), jx);
            vy = _mm256_add_epi32(_mm256_add_epi32(vy, _mm256_slli_epi32::<3>(vdy)), jy);
            vdx = _mm256_add_epi32(vdx, jdx);
            vdy = _mm256_add_epi32(vdy, jdy);
        }
    }

    /// Eight pixels at the 16.16 fixed-point positions `vx`, `vy` (rounded as [`RowSteps`]
    /// rounds), as [`fixed_u8`](Self::fixed_u8) samples each: the 2×2 neighbourhoods read as
    /// [`neighbourhoods_avx2`](Self::neighbourhoods_avx2) reads them, the same integer weights.
    /// Their 24 bytes lead the result.
    ///
    /// # Safety
    /// The CPU must support AVX2, and `self.data.len()` must fit in an `i32`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn eight_avx2(
        &self,
        vx: std::arch::x86_64::__m256i,
        vy: std::arch::x86_64::__m256i,
    ) -> [u8; 28] {
        use std::arch::x86_64::*;
        let (cx, cy) = ((self.width - 2) as i32, (self.height - 2) as i32);
        let stride = (self.width * 3) as i32;
        let zero = _mm256_setzero_si256();
        let (vcx, vcy) = (_mm256_set1_epi32(cx), _mm256_set1_epi32(cy));
        let full = _mm256_set1_epi32(256);
        let vstride = _mm256_set1_epi32(stride);
        let half = _mm256_set1_epi32(32768);
        // Each pixel's three bytes from its 32-bit lane, twelve to a 128-bit half.
        let pack = _mm256_setr_epi8(
            0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12,
            13, 14, -1, -1, -1, -1,
        );
        let (xs, ys) = (_mm256_srai_epi32::<8>(vx), _mm256_srai_epi32::<8>(vy));
        let x0 = _mm256_min_epi32(_mm256_max_epi32(_mm256_srai_epi32::<8>(xs), zero), vcx);
        let y0 = _mm256_min_epi32(_mm256_max_epi32(_mm256_srai_epi32::<8>(ys), zero), vcy);
        let clamp_w = |v| _mm256_min_epi32(_mm256_max_epi32(v, zero), full);
        let fx = clamp_w(_mm256_sub_epi32(xs, _mm256_slli_epi32::<8>(x0)));
        let fy = clamp_w(_mm256_sub_epi32(ys, _mm256_slli_epi32::<8>(y0)));
        let i = _mm256_add_epi32(
            _mm256_mullo_epi32(y0, vstride),
            _mm256_add_epi32(_mm256_add_epi32(x0, x0), x0),
        );
        let i2 = _mm256_add_epi32(i, vstride);
        // SAFETY: AVX2 as this function; x0 <= width - 2 and y0 <= height - 2, as asked.
        let [top, bottom] = unsafe { self.neighbourhoods_avx2(x0, y0, i, i2) };
        // Each row's left and right byte weighed in one multiply-add of 16-bit pairs:
        // a·(256 - fx) + b·fx, the same integer as (a << 8) + (b - a)·fx.
        let wx = _mm256_or_si256(_mm256_sub_epi32(full, fx), _mm256_slli_epi32::<16>(fx));
        let mut px = _mm256_setzero_si256();
        macro_rules! channel {
            ($k:literal) => {{
                let t = _mm256_madd_epi16(top[$k], wx);
                let b = _mm256_madd_epi16(bottom[$k], wx);
                let d = _mm256_mullo_epi32(_mm256_sub_epi32(b, t), fy);
                let v = _mm256_add_epi32(_mm256_slli_epi32::<8>(t), d);
                let v = _mm256_srli_epi32::<16>(_mm256_add_epi32(v, half));
                px = _mm256_or_si256(px, _mm256_slli_epi32::<{ 8 * $k }>(v));
            }};
        }
        channel!(0);
        channel!(1);
        channel!(2);
        let packed = _mm256_shuffle_epi8(px, pack);
        let mut out = [0u8; 28];
        // SAFETY: `out` has 28 bytes: 16 at 0 and 16 at 12.
        unsafe {
            _mm_storeu_si128(out.as_mut_ptr().cast(), _mm256_castsi256_si128(packed));
            _mm_storeu_si128(
                out.as_mut_ptr().add(12).cast(),
                _mm256_extracti128_si256::<1>(packed),
            );
        }
        out
    }
}

impl Rgb {
    /// The 2×2 neighbourhoods of eight pixels whose top-left corners are `(x0, y0)`, at byte
    /// offsets `i` (top) and `i2` (bottom): for each row (top, bottom) and channel, each
    /// pixel's lane holds the left pixel's byte in its low 16 bits and the right one's in its
    /// high 16. Where [`window_avx2`](Self::window_avx2) allows, each half's two rows are loaded
    /// once and the bytes shuffled out; otherwise they are gathered, which costs most of a
    /// sample on CPUs whose gathers are slow (AMD's Zen 4 among them). Both give the same bytes.
    ///
    /// # Safety
    /// The CPU must support AVX2; `0 <= x0 <= width - 2`, `0 <= y0 <= height - 2` and the
    /// offsets are theirs (`i = y0·stride + 3·x0`, `i2 = i + stride`) and fit an `i32`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn neighbourhoods_avx2(
        &self,
        x0: std::arch::x86_64::__m256i,
        y0: std::arch::x86_64::__m256i,
        i: std::arch::x86_64::__m256i,
        i2: std::arch::x86_64::__m256i,
    ) -> [[std::arch::x86_64::__m256i; 3]; 2] {
        use std::arch::x86_64::*;
        let base = self.data.as_ptr();
        if let Some(span) = self.window_avx2(x0, y0, i2) {
            let stride = self.width * 3;
            let (lo, hi) = (
                _mm256_extract_epi32::<0>(i) as usize,
                _mm256_extract_epi32::<4>(i) as usize,
            );
            // SAFETY: both halves' offsets plus a row plus 16 bytes are inside the data
            // (`window_avx2` checked it for every lane).
            let (top, bottom) = unsafe {
                (
                    _mm256_loadu2_m128i(base.add(hi).cast(), base.add(lo).cast()),
                    _mm256_loadu2_m128i(base.add(hi + stride).cast(), base.add(lo + stride).cast()),
                )
            };
            // Lane k's bytes start 3·span bytes into its half's window (at most 9, so the
            // right pixel's last byte, 5 further on, is still in the window's 16).
            let off = _mm256_add_epi32(_mm256_add_epi32(span, span), span);
            let spread = _mm256_setr_epi8(
                0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8,
                8, 8, 12, 12, 12, 12,
            );
            let at = _mm256_shuffle_epi8(off, spread);
            // Channel c's bytes, left and right, into a lane's two 16-bit halves (0x80: zero).
            let pairs = |row| {
                [0u8, 1, 2].map(|c| {
                    let pick = i32::from_le_bytes([c, 0x80, c + 3, 0x80]);
                    _mm256_shuffle_epi8(row, _mm256_add_epi32(at, _mm256_set1_epi32(pick)))
                })
            };
            return [pairs(top), pairs(bottom)];
        }
        // SAFETY: x0 <= width - 2 and y0 <= height - 2, so the four bytes at i and at
        // i + 2 (the pixel and its right neighbour), and at those plus one row, end at
        // most at (height - 1)·stride + width·3, the data's length; the offsets fit an i32.
        let [ta, tb, ba, bb] = unsafe {
            [
                _mm256_i32gather_epi32::<1>(base.cast(), i),
                _mm256_i32gather_epi32::<1>(base.add(2).cast(), i),
                _mm256_i32gather_epi32::<1>(base.cast(), i2),
                _mm256_i32gather_epi32::<1>(base.add(2).cast(), i2),
            ]
        };
        // Channel c: the left pixel's byte c of the first word, the right one's byte c + 1 of
        // the second (read two bytes on).
        let pairs = |a, b| {
            [0, 1, 2].map(|c| {
                // SAFETY: both tables have 32 bytes, what an unaligned 256-bit load reads.
                let (left, right) = unsafe {
                    (
                        _mm256_loadu_si256(PAIR_LEFT[c].as_ptr().cast()),
                        _mm256_loadu_si256(PAIR_RIGHT[c].as_ptr().cast()),
                    )
                };
                _mm256_or_si256(_mm256_shuffle_epi8(a, left), _mm256_shuffle_epi8(b, right))
            })
        };
        [pairs(ta, tb), pairs(ba, bb)]
    }

    /// Each pixel's column past its half's first (pixels 0-3 and 4-7), when every half lies on
    /// one source row within four pixels of its first, and sixteen bytes from each half's
    /// first offset, top and bottom, lie inside the data (at the last row's right end they do
    /// not): a warp that moves pixels by a smooth, small amount, as the head's and most of the
    /// mouth's do. `None` otherwise.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    fn window_avx2(
        &self,
        x0: std::arch::x86_64::__m256i,
        y0: std::arch::x86_64::__m256i,
        i2: std::arch::x86_64::__m256i,
    ) -> Option<std::arch::x86_64::__m256i> {
        use std::arch::x86_64::*;
        let span = _mm256_sub_epi32(x0, _mm256_shuffle_epi32::<0>(x0));
        let near = _mm256_cmpeq_epi32(_mm256_min_epu32(span, _mm256_set1_epi32(3)), span);
        let one_row = _mm256_cmpeq_epi32(y0, _mm256_shuffle_epi32::<0>(y0));
        let room = _mm256_cmpgt_epi32(_mm256_set1_epi32(self.data.len() as i32 - 15), i2);
        let ok = _mm256_and_si256(_mm256_and_si256(near, one_row), room);
        (_mm256_movemask_epi8(ok) == -1).then_some(span)
    }
}

/// Shuffles of gathered words into [`Rgb::neighbourhoods_avx2`]'s pairs, per channel `c`: byte
/// `c` of each word to its low 16 bits ([`PAIR_LEFT`]), byte `c + 1` to its high 16
/// ([`PAIR_RIGHT`]); 0x80 writes a zero.
const PAIR_LEFT: [[u8; 32]; 3] = [
    pair_table(0, 0x80),
    pair_table(1, 0x80),
    pair_table(2, 0x80),
];
const PAIR_RIGHT: [[u8; 32]; 3] = [
    pair_table(0x80, 1),
    pair_table(0x80, 2),
    pair_table(0x80, 3),
];

/// A `vpshufb` table that moves, in each 32-bit word, its byte `low` to byte 0 and its byte
/// `high` to byte 2 (0x80: a zero there), the word's other bytes zero.
const fn pair_table(low: u8, high: u8) -> [u8; 32] {
    let mut t = [0x80u8; 32];
    let mut i = 0;
    while i < 8 {
        let word = (i % 4) as u8 * 4;
        if low != 0x80 {
            t[i * 4] = word + low;
        }
        if high != 0x80 {
            t[i * 4 + 2] = word + high;
        }
        i += 1;
    }
    t
}

/// A row's positions in 16.16 fixed point: the first pixel's, and its first and second
/// forward differences.
#[derive(Debug, Clone, Copy)]
struct RowSteps {
    x: i32,
    y: i32,
    dx: i32,
    dy: i32,
    ddx: i32,
    ddy: i32,
}

impl RowSteps {
    fn new(a: [f32; 2], b: [f32; 2], c: [f32; 2]) -> RowSteps {
        let step = |v: f32| (v * 65536.0) as i32;
        RowSteps {
            x: fixed(a[0]),
            y: fixed(a[1]),
            dx: step(b[0] + c[0]),
            dy: step(b[1] + c[1]),
            ddx: step(2.0 * c[0]),
            ddy: step(2.0 * c[1]),
        }
    }
}

/// A position in 16.16 fixed point with half a 1/256 px added up front: positions round to the
/// weights' grid, so a warp that moves a pixel by less than that copies it exactly, as the
/// float path does.
#[inline]
fn fixed(v: f32) -> i32 {
    (v * 65536.0) as i32 + 128
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

    /// A `w`×`h` portrait of random bytes.
    fn noise(rng: &mut fastrand::Rng, w: u32, h: u32) -> Rgb {
        let img = image::RgbImage::from_fn(w, h, |_, _| {
            image::Rgb([rng.u8(..), rng.u8(..), rng.u8(..)])
        });
        Rgb::from_image(&img)
    }

    /// Whether this CPU runs the AVX2 samplers (saying so when it does not: their tests then
    /// check nothing here).
    #[cfg(target_arch = "x86_64")]
    fn avx2_here() -> bool {
        let here = std::arch::is_x86_feature_detected!("avx2");
        if !here {
            eprintln!("no AVX2 on this CPU: only the scalar samplers run here");
        }
        here
    }

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

    /// The AVX2 row sampler writes the scalar one's bytes exactly: random portraits (down to
    /// 2×2), rows of 0 to 40 pixels starting inside, on and past the edges, with steep and
    /// curved steps that cross the edges mid-row.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_rows_match_the_scalar_rows_byte_for_byte() {
        if !avx2_here() {
            return;
        }
        let mut rng = fastrand::Rng::with_seed(18);
        let mut rows = 0;
        for _ in 0..300 {
            let (w, h) = (rng.u32(2..40), rng.u32(2..40));
            let r = noise(&mut rng, w, h);
            let (wf, hf) = (w as f32, h as f32);
            for _ in 0..20 {
                let mut pick = |lo: f32, hi: f32| -> f32 {
                    match rng.u8(0..4) {
                        // Whole and half pixels, edges included.
                        0 => (rng.i32(-2..(hi as i32 + 3)) as f32) * 0.5,
                        _ => lo + rng.f32() * (hi - lo),
                    }
                };
                let a = [pick(-4.0, wf + 4.0), pick(-4.0, hf + 4.0)];
                let mut step = || (rng.f32() - 0.5) * 3.0;
                let b = [step(), step()];
                let c = [step() * 0.05, step() * 0.05];
                let n = rng.usize(0..41);
                let (mut simd, mut scalar) = (vec![1u8; n * 3], vec![2u8; n * 3]);
                let s = RowSteps::new(a, b, c);
                // SAFETY: AVX2 was detected above; the data is far below i32::MAX bytes.
                unsafe { r.sample_row_avx2(&mut simd, s) };
                r.sample_row_scalar(&mut scalar, s);
                assert_eq!(simd, scalar, "{w}x{h}, a {a:?}, b {b:?}, c {c:?}, {n} px");
                rows += 1;
            }
        }
        assert_eq!(rows, 6000);
    }

    /// The rows loaded once and shuffled give the pixels' bytes, as the gathers do: for eight
    /// neighbourhoods along smooth rows (the window), and for scattered ones, ones crossing a
    /// row, and ones at the image's last row (gathered); the window is taken where it may be
    /// and only there.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn windowed_neighbourhoods_are_the_gathered_ones() {
        use std::arch::x86_64::*;
        if !avx2_here() {
            return;
        }
        let mut rng = fastrand::Rng::with_seed(12);
        let (mut windowed, mut gathered) = (0, 0);
        for _ in 0..200 {
            let (w, h) = (rng.usize(8..60), rng.usize(2..30));
            let r = noise(&mut rng, w as u32, h as u32);
            for _ in 0..50 {
                // Smooth: one row, steps of 0 to 1 px; else any corners.
                let smooth = rng.bool();
                let (mut x, y) = (rng.i32(0..w as i32 - 1), rng.i32(0..h as i32 - 1));
                let corners: [(i32, i32); 8] = std::array::from_fn(|_| {
                    if smooth {
                        x = (x + rng.i32(0..2)).min(w as i32 - 2);
                        (x, y)
                    } else {
                        (rng.i32(0..w as i32 - 1), rng.i32(0..h as i32 - 1))
                    }
                });
                let stride = (w * 3) as i32;
                let lanes = |f: &dyn Fn((i32, i32)) -> i32| {
                    let v = corners.map(f);
                    // SAFETY: `v` has the eight i32 an unaligned 256-bit load reads.
                    unsafe { _mm256_loadu_si256(v.as_ptr().cast()) }
                };
                let x0 = lanes(&|c| c.0);
                let y0 = lanes(&|c| c.1);
                let i = lanes(&|c| c.1 * stride + 3 * c.0);
                let i2 = lanes(&|c| (c.1 + 1) * stride + 3 * c.0);
                // SAFETY: AVX2 was detected above; the corners are inside, one short of the
                // last row and column, and the offsets theirs.
                let (fits, got) = unsafe {
                    (
                        r.window_avx2(x0, y0, i2).is_some(),
                        r.neighbourhoods_avx2(x0, y0, i, i2),
                    )
                };
                for (k, &(cx, cy)) in corners.iter().enumerate() {
                    // Row r's channel c: the left pixel's byte, and the right one's << 16.
                    let want: [[u32; 3]; 2] = std::array::from_fn(|row| {
                        let at = ((cy as usize + row) * w + cx as usize) * 3;
                        std::array::from_fn(|c| {
                            u32::from(r.data[at + c]) | u32::from(r.data[at + 3 + c]) << 16
                        })
                    });
                    let got = got.map(|row| {
                        row.map(|v| {
                            let mut out = [0u32; 8];
                            // SAFETY: `out` has the 32 bytes an unaligned 256-bit store writes.
                            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) };
                            out[k]
                        })
                    });
                    assert_eq!(got, want, "{w}x{h}, lane {k} of {corners:?}");
                }
                let past_end = corners
                    .iter()
                    .any(|c| ((c.1 + 1) * stride + 3 * c.0 + 16) as usize > r.data.len());
                if smooth && !past_end {
                    assert!(fits, "{w}x{h}: {corners:?} lie in one window");
                }
                if fits {
                    windowed += 1;
                } else {
                    gathered += 1;
                }
            }
        }
        assert!(
            windowed > 3000 && gathered > 3000,
            "{windowed} windowed, {gathered} gathered"
        );
    }

    /// Sampling given points writes `bilinear_u8`'s bytes exactly, eight a step or one by one
    /// (random portraits down to 2×2, points inside, on and past the edges, 0 to 40 a row), and
    /// points on pixel centres return the stored pixels, as a still pixel must.
    #[test]
    fn sampled_points_match_the_scalar_path_and_pixel_centres_are_exact() {
        let mut rng = fastrand::Rng::with_seed(81);
        for _ in 0..300 {
            let (w, h) = (rng.u32(2..40), rng.u32(2..40));
            let r = noise(&mut rng, w, h);
            for _ in 0..20 {
                let n = rng.usize(0..41);
                let mut pick = |hi: u32| match rng.u8(0..3) {
                    0 => rng.i32(-2..hi as i32 + 3) as f32 * 0.5,
                    _ => -4.0 + rng.f32() * (hi as f32 + 8.0),
                };
                let xs: Vec<f32> = (0..n).map(|_| pick(w)).collect();
                let ys: Vec<f32> = (0..n).map(|_| pick(h)).collect();
                let mut fast = vec![1u8; n * 3];
                r.sample_points(&mut fast, &xs, &ys);
                let exact: Vec<u8> = xs
                    .iter()
                    .zip(&ys)
                    .flat_map(|(&x, &y)| r.bilinear_u8(x, y))
                    .collect();
                assert_eq!(fast, exact, "{w}x{h}: {xs:?} {ys:?}");
            }
            let (xs, ys): (Vec<f32>, Vec<f32>) =
                (0..w * h).map(|i| ((i % w) as f32, (i / w) as f32)).unzip();
            let mut all = vec![0u8; (w * h * 3) as usize];
            r.sample_points(&mut all, &xs, &ys);
            assert_eq!(all, r.data);
        }
    }
}
