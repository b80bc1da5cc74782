//! The few neural-network operations the two face-api nets need, on `f32` feature maps.
//!
//! Input and output: [`FeatureMap`]s in height × width × channel order (channels contiguous, so
//! the inner loops run over channels and the compiler vectorises them). Filters use the
//! TensorFlow.js layouts: conv `[kh, kw, cin, cout]`, depthwise `[kh, kw, c]`, pointwise
//! `[cin, cout]`. Padding follows TensorFlow: explicit zero borders, and "same" puts the odd extra
//! row/column after (bottom/right), which matters for stride 2 and is why it is spelled out here.

/// A height × width × channels activation tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureMap {
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub data: Vec<f32>,
}

impl FeatureMap {
    pub fn zeros(h: usize, w: usize, c: usize) -> FeatureMap {
        FeatureMap {
            h,
            w,
            c,
            data: vec![0.0; h * w * c],
        }
    }

    fn pixel(&self, y: usize, x: usize) -> &[f32] {
        let at = (y * self.w + x) * self.c;
        &self.data[at..at + self.c]
    }
}

/// Zero borders added around the input before a valid convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pad {
    pub top: usize,
    pub left: usize,
    pub bottom: usize,
    pub right: usize,
}

impl Pad {
    pub const NONE: Pad = Pad::uniform(0);

    pub const fn uniform(p: usize) -> Pad {
        Pad {
            top: p,
            left: p,
            bottom: p,
            right: p,
        }
    }

    /// TensorFlow "same" padding for a square `k`×`k` window over an `h`×`w` input.
    pub fn same(h: usize, w: usize, k: usize, stride: usize) -> Pad {
        let split = |n: usize| {
            let out = n.div_ceil(stride);
            let total = ((out - 1) * stride + k).saturating_sub(n);
            (total / 2, total - total / 2)
        };
        let (top, bottom) = split(h);
        let (left, right) = split(w);
        Pad {
            top,
            left,
            bottom,
            right,
        }
    }
}

fn out_len(n: usize, before: usize, after: usize, k: usize, stride: usize) -> usize {
    (n + before + after - k) / stride + 1
}

/// Full 3×3 convolution plus bias; `filters` is `[3, 3, cin, cout]`.
pub fn conv3x3(
    x: &FeatureMap,
    filters: &[f32],
    bias: &[f32],
    stride: usize,
    pad: Pad,
) -> FeatureMap {
    let cout = bias.len();
    debug_assert_eq!(filters.len(), 9 * x.c * cout);
    let oh = out_len(x.h, pad.top, pad.bottom, 3, stride);
    let ow = out_len(x.w, pad.left, pad.right, 3, stride);
    let mut out = FeatureMap::zeros(oh, ow, cout);
    for (oy, row) in out.data.chunks_exact_mut(ow * cout).enumerate() {
        for (ox, acc) in row.chunks_exact_mut(cout).enumerate() {
            acc.copy_from_slice(bias);
            for ky in 0..3 {
                let Some(iy) = (oy * stride + ky).checked_sub(pad.top).filter(|&v| v < x.h) else {
                    continue;
                };
                for kx in 0..3 {
                    let Some(ix) = (ox * stride + kx)
                        .checked_sub(pad.left)
                        .filter(|&v| v < x.w)
                    else {
                        continue;
                    };
                    let taps = &filters[(ky * 3 + kx) * x.c * cout..][..x.c * cout];
                    for (&v, w) in x.pixel(iy, ix).iter().zip(taps.chunks_exact(cout)) {
                        for (a, &k) in acc.iter_mut().zip(w) {
                            *a += v * k;
                        }
                    }
                }
            }
        }
    }
    out
}

/// Depthwise 3×3 convolution (channel multiplier 1, no bias); `filters` is `[3, 3, c]`.
pub fn depthwise3x3(x: &FeatureMap, filters: &[f32], stride: usize, pad: Pad) -> FeatureMap {
    let c = x.c;
    debug_assert_eq!(filters.len(), 9 * c);
    let oh = out_len(x.h, pad.top, pad.bottom, 3, stride);
    let ow = out_len(x.w, pad.left, pad.right, 3, stride);
    let mut out = FeatureMap::zeros(oh, ow, c);
    for (oy, row) in out.data.chunks_exact_mut(ow * c).enumerate() {
        for (ox, acc) in row.chunks_exact_mut(c).enumerate() {
            for ky in 0..3 {
                let Some(iy) = (oy * stride + ky).checked_sub(pad.top).filter(|&v| v < x.h) else {
                    continue;
                };
                for kx in 0..3 {
                    let Some(ix) = (ox * stride + kx)
                        .checked_sub(pad.left)
                        .filter(|&v| v < x.w)
                    else {
                        continue;
                    };
                    let taps = &filters[(ky * 3 + kx) * c..][..c];
                    for ((a, &v), &k) in acc.iter_mut().zip(x.pixel(iy, ix)).zip(taps) {
                        *a += v * k;
                    }
                }
            }
        }
    }
    out
}

/// 1×1 convolution plus bias; `weights` is `[cin, cout]`.
pub fn pointwise(x: &FeatureMap, weights: &[f32], bias: &[f32]) -> FeatureMap {
    let cout = bias.len();
    debug_assert_eq!(weights.len(), x.c * cout);
    let mut out = FeatureMap::zeros(x.h, x.w, cout);
    for (src, acc) in x
        .data
        .chunks_exact(x.c)
        .zip(out.data.chunks_exact_mut(cout))
    {
        acc.copy_from_slice(bias);
        for (&v, w) in src.iter().zip(weights.chunks_exact(cout)) {
            for (a, &k) in acc.iter_mut().zip(w) {
                *a += v * k;
            }
        }
    }
    out
}

/// 2×2 max pooling with TensorFlow "same" padding (padded cells never win).
pub fn max_pool2(x: &FeatureMap, stride: usize) -> FeatureMap {
    let oh = x.h.div_ceil(stride);
    let ow = x.w.div_ceil(stride);
    let pad = Pad::same(x.h, x.w, 2, stride);
    let mut out = FeatureMap::zeros(oh, ow, x.c);
    for (oy, row) in out.data.chunks_exact_mut(ow * x.c).enumerate() {
        for (ox, acc) in row.chunks_exact_mut(x.c).enumerate() {
            acc.fill(f32::NEG_INFINITY);
            for ky in 0..2 {
                let Some(iy) = (oy * stride + ky).checked_sub(pad.top).filter(|&v| v < x.h) else {
                    continue;
                };
                for kx in 0..2 {
                    let Some(ix) = (ox * stride + kx)
                        .checked_sub(pad.left)
                        .filter(|&v| v < x.w)
                    else {
                        continue;
                    };
                    for (a, &v) in acc.iter_mut().zip(x.pixel(iy, ix)) {
                        *a = a.max(v);
                    }
                }
            }
        }
    }
    out
}

/// `k`×`k` average pooling without padding ("valid").
pub fn avg_pool_valid(x: &FeatureMap, k: usize, stride: usize) -> FeatureMap {
    let oh = out_len(x.h, 0, 0, k, stride);
    let ow = out_len(x.w, 0, 0, k, stride);
    let mut out = FeatureMap::zeros(oh, ow, x.c);
    let norm = 1.0 / (k * k) as f32;
    for (oy, row) in out.data.chunks_exact_mut(ow * x.c).enumerate() {
        for (ox, acc) in row.chunks_exact_mut(x.c).enumerate() {
            for iy in oy * stride..oy * stride + k {
                for ix in ox * stride..ox * stride + k {
                    for (a, &v) in acc.iter_mut().zip(x.pixel(iy, ix)) {
                        *a += v;
                    }
                }
            }
            acc.iter_mut().for_each(|a| *a *= norm);
        }
    }
    out
}

/// Maps raw 0..255 RGB to the nets' input scale: `(v - mean) / 255` per channel.
pub fn normalise_rgb(x: &mut FeatureMap, mean: [f32; 3]) {
    for px in x.data.chunks_exact_mut(3) {
        for (v, m) in px.iter_mut().zip(mean) {
            *v = (*v - m) / 255.0;
        }
    }
}

/// Leaky ReLU with slope `alpha` for negative inputs, in place.
pub fn leaky_relu(x: &mut FeatureMap, alpha: f32) {
    x.data.iter_mut().for_each(|v| *v = v.max(*v * alpha));
}

/// ReLU, in place.
pub fn relu(x: &mut FeatureMap) {
    x.data.iter_mut().for_each(|v| *v = v.max(0.0));
}

/// Element-wise `a += b`; both maps must have the same shape.
pub fn add_assign(a: &mut FeatureMap, b: &FeatureMap) {
    debug_assert_eq!((a.h, a.w, a.c), (b.h, b.w, b.c));
    a.data.iter_mut().zip(&b.data).for_each(|(x, &y)| *x += y);
}

/// Fully connected layer: `x · weights + bias`, `weights` being `[x.len(), bias.len()]`.
pub fn dense(x: &[f32], weights: &[f32], bias: &[f32]) -> Vec<f32> {
    let mut out = bias.to_vec();
    for (&v, w) in x.iter().zip(weights.chunks_exact(bias.len())) {
        for (o, &k) in out.iter_mut().zip(w) {
            *o += v * k;
        }
    }
    out
}

/// Samples a `size`×`size` RGB input like `tf.image.resizeBilinear(alignCorners = false,
/// halfPixelCenters = false)` on a virtual `src_w`×`src_h` image whose raw pixels `fetch`
/// returns. Sampling lazily avoids building the padded square for large photos.
pub fn resize_bilinear(
    src_w: usize,
    src_h: usize,
    size: usize,
    fetch: impl Fn(usize, usize) -> [f32; 3],
) -> FeatureMap {
    let axis = |n: usize| -> Vec<(usize, usize, f32)> {
        let scale = n as f64 / size as f64;
        (0..size)
            .map(|i| {
                let src = scale * i as f64;
                let lo = src.floor() as usize;
                let hi = (src.ceil() as usize).min(n - 1);
                (lo, hi, (src - lo as f64) as f32)
            })
            .collect()
    };
    let xs = axis(src_w);
    let ys = axis(src_h);
    let mut out = FeatureMap::zeros(size, size, 3);
    for (&(y0, y1, fy), row) in ys.iter().zip(out.data.chunks_exact_mut(size * 3)) {
        for (&(x0, x1, fx), px) in xs.iter().zip(row.chunks_exact_mut(3)) {
            let (tl, tr, bl, br) = (fetch(x0, y0), fetch(x1, y0), fetch(x0, y1), fetch(x1, y1));
            for ch in 0..3 {
                let top = tl[ch] + (tr[ch] - tl[ch]) * fx;
                let bottom = bl[ch] + (br[ch] - bl[ch]) * fx;
                px[ch] = top + (bottom - top) * fy;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(h: usize, w: usize, c: usize, data: &[f32]) -> FeatureMap {
        FeatureMap {
            h,
            w,
            c,
            data: data.to_vec(),
        }
    }

    #[test]
    fn same_padding_puts_the_extra_cell_after() {
        assert_eq!(
            Pad::same(112, 112, 3, 2),
            Pad {
                top: 0,
                left: 0,
                bottom: 1,
                right: 1
            }
        );
        assert_eq!(Pad::same(13, 13, 2, 1).bottom, 1);
        assert_eq!(Pad::same(13, 13, 2, 1).top, 0);
        assert_eq!(Pad::same(56, 56, 3, 1), Pad::uniform(1));
    }

    #[test]
    fn conv3x3_matches_hand_computation() {
        // 3x3 single-channel input, all-ones kernel, two output channels (second kernel = 2x).
        let x = map(3, 3, 1, &[1., 2., 3., 4., 5., 6., 7., 8., 9.]);
        let filters: Vec<f32> = (0..9).flat_map(|_| [1.0, 2.0]).collect();
        let valid = conv3x3(&x, &filters, &[0.5, 0.0], 1, Pad::NONE);
        assert_eq!((valid.h, valid.w, valid.c), (1, 1, 2));
        assert_eq!(valid.data, vec![45.5, 90.0]);
        let strided = conv3x3(&x, &filters, &[0.0, 0.0], 2, Pad::same(3, 3, 3, 2));
        // Output 2x2 with one zero border all round; the first window covers rows/cols 0..=1.
        assert_eq!((strided.h, strided.w), (2, 2));
        assert_eq!(strided.data[0], 1. + 2. + 4. + 5.);
        assert_eq!(strided.data[2], 2. + 3. + 5. + 6.);
    }

    #[test]
    fn depthwise_pointwise_pool_and_dense() {
        let x = map(2, 2, 2, &[1., -1., 2., -2., 3., -3., 4., -4.]);
        let dw = depthwise3x3(&x, &[1.0; 18], 1, Pad::uniform(1));
        assert_eq!(dw.data, vec![10., -10., 10., -10., 10., -10., 10., -10.]);
        let pw = pointwise(&x, &[1.0, 0.5, 1.0, 0.5], &[0.0, 1.0]);
        assert_eq!(pw.data[..2], [0.0, 1.0]);
        let pooled = max_pool2(&x, 2);
        assert_eq!(pooled.data, vec![4.0, -1.0]);
        let same = max_pool2(&x, 1);
        assert_eq!((same.h, same.w), (2, 2));
        assert_eq!(same.data[6..], [4.0, -4.0]);
        let avg = avg_pool_valid(&x, 2, 2);
        assert_eq!(avg.data, vec![2.5, -2.5]);
        assert_eq!(
            dense(&[1.0, 2.0], &[1.0, 0.0, 0.0, 1.0], &[0.5, 0.5]),
            vec![1.5, 2.5]
        );
        let mut l = x.clone();
        leaky_relu(&mut l, 0.1);
        assert!((l.data[1] + 0.1).abs() < 1e-6);
        relu(&mut l);
        assert_eq!(l.data[1], 0.0);
        add_assign(&mut l, &x);
        assert_eq!(l.data[0], 2.0);
        let mut rgb = map(1, 1, 3, &[255.0, 0.0, 100.0]);
        normalise_rgb(&mut rgb, [0.0, 51.0, 100.0]);
        assert_eq!(rgb.data, vec![1.0, -0.2, 0.0]);
    }

    #[test]
    fn resize_matches_tensorflow_legacy_sampling() {
        // 4 -> 2 samples source 0 and 2 exactly; 2 -> 4 interpolates at 0, .5, 1, 1 (clamped).
        let down = resize_bilinear(4, 4, 2, |x, y| [x as f32, y as f32, 0.0]);
        assert_eq!(down.data[3], 2.0);
        assert_eq!(down.data[3 * 2 + 1], 2.0);
        let up = resize_bilinear(2, 2, 4, |x, _| [x as f32 * 10.0, 0.0, 0.0]);
        let row: Vec<f32> = up.data.chunks(3).take(4).map(|p| p[0]).collect();
        assert_eq!(row, vec![0.0, 5.0, 10.0, 10.0]);
    }
}
