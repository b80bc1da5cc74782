//! Reduced-precision maths shared by the planner, the host emulation and the CUDA kernels.
//!
//! INT8 is symmetric: a value `v` with scale `s` becomes `clamp(round_half_even(v / s), -127, 127)`
//! (the CUDA kernels use `__float2int_rn`, which rounds the same way). Weights get one scale per
//! output channel (`max |w| / 127`); activations one scale per tensor from calibration: the
//! `percentile`-th quantile of `|x|` on each calibration batch, the largest over all batches
//! (clipping rare outliers keeps resolution for the bulk, as TensorRT's percentile calibrator does).
//! FP16 weights are rounded to nearest even, as `cvt.rn.f16.f32` does on the device.

use half::f16;

/// Largest INT8 magnitude used (symmetric range, -128 unused).
const QMAX: f32 = 127.0;

/// The scale for a calibrated absolute maximum; a zero range gets a harmless positive scale.
pub fn scale(amax: f32) -> f32 {
    if amax > 0.0 && amax.is_finite() {
        amax / QMAX
    } else {
        1.0 / QMAX
    }
}

pub fn quantize(v: f32, scale: f32) -> i8 {
    let q = (v / scale).round_ties_even();
    q.clamp(-QMAX, QMAX) as i8
}

/// Per-output-channel INT8 weights: the integers (as f32, exact) and one scale per channel.
/// `channel_of(i)` names the output channel of flat element `i` (`< channels`).
pub fn quantize_weights(
    w: &[f32],
    channels: usize,
    channel_of: impl Fn(usize) -> usize,
) -> (Vec<f32>, Vec<f32>) {
    let mut amax = vec![0.0f32; channels];
    for (i, v) in w.iter().enumerate() {
        let c = channel_of(i);
        amax[c] = amax[c].max(v.abs());
    }
    let scales: Vec<f32> = amax.into_iter().map(scale).collect();
    let q = w
        .iter()
        .enumerate()
        .map(|(i, &v)| f32::from(quantize(v, scales[channel_of(i)])))
        .collect();
    (q, scales)
}

/// Rounds every value to the nearest FP16 value (kept as f32, so the conversion later is exact).
pub fn round_to_f16(w: &mut [f32]) {
    for v in w {
        *v = f16::from_f32(*v).to_f32();
    }
}

/// The `p`-quantile (0 < p ≤ 1) of `|x|`; 0 for no values.
pub fn abs_quantile(x: &[f32], p: f64) -> f32 {
    let mut a: Vec<f32> = x
        .iter()
        .map(|v| v.abs())
        .filter(|v| v.is_finite())
        .collect();
    if a.is_empty() {
        return 0.0;
    }
    let k = ((a.len() as f64 * p.clamp(0.0, 1.0)).ceil() as usize).clamp(1, a.len()) - 1;
    let (_, v, _) = a.select_nth_unstable_by(k, f32::total_cmp);
    *v
}

/// Signal-to-noise ratio of `test` against `reference`, in dB (∞ when identical).
pub fn snr_db(reference: &[f32], test: &[f32]) -> f64 {
    let n = reference.len().min(test.len());
    let (mut sig, mut err) = (0.0f64, 0.0f64);
    for i in 0..n {
        let r = f64::from(reference[i]);
        sig += r * r;
        let e = r - f64::from(test[i]);
        err += e * e;
    }
    // Samples missing from one side count fully as error.
    for v in reference[n..].iter().chain(&test[n..]) {
        err += f64::from(*v) * f64::from(*v);
    }
    if err == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (sig / err).log10()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_rounding_and_clamping() {
        let s = scale(12.7);
        assert!((s - 0.1).abs() < 1e-7);
        assert_eq!(quantize(0.25, 0.1), 2); // 2.5 → 2 (ties to even)
        assert_eq!(quantize(0.35, 0.1), 4); // 3.5 → 4
        assert_eq!(quantize(-0.25, 0.1), -2);
        assert_eq!(quantize(100.0, 0.1), 127);
        assert_eq!(quantize(-100.0, 0.1), -127);
        assert_eq!(scale(0.0), 1.0 / 127.0);
        assert_eq!(scale(f32::NAN), 1.0 / 127.0);
    }

    #[test]
    fn per_channel_weights_use_the_full_range() {
        let w = [0.5, -1.0, 0.25, 0.02, 0.01, -0.04];
        let (q, s) = quantize_weights(&w, 2, |i| i / 3);
        assert_eq!(&q[..3], [64.0, -127.0, 32.0]);
        assert_eq!(q[5], -127.0);
        assert!((s[1] - 0.04 / 127.0).abs() < 1e-9);
        // Dequantised weights are within half a step of the originals.
        for (c, row) in w.chunks(3).enumerate() {
            for (i, &v) in row.iter().enumerate() {
                assert!((q[c * 3 + i] * s[c] - v).abs() <= s[c] / 2.0 + 1e-9);
            }
        }
        let (zq, zs) = quantize_weights(&[0.0; 4], 2, |i| i % 2);
        assert_eq!(zq, [0.0; 4]);
        assert_eq!(zs.len(), 2);
    }

    #[test]
    fn f16_rounding_is_exact_afterwards() {
        let mut w = [0.1f32, 1.0 / 3.0, 65504.0, 1e-8];
        round_to_f16(&mut w);
        for v in w {
            assert_eq!(f16::from_f32(v).to_f32(), v);
        }
        assert_eq!(w[2], 65504.0);
    }

    #[test]
    fn quantiles_and_snr() {
        let x: Vec<f32> = (1..=100)
            .map(|i| i as f32 * if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert_eq!(abs_quantile(&x, 1.0), 100.0);
        assert_eq!(abs_quantile(&x, 0.5), 50.0);
        assert_eq!(abs_quantile(&[], 0.5), 0.0);
        assert_eq!(abs_quantile(&[f32::NAN, 2.0], 1.0), 2.0);
        let r = [1.0, -1.0, 1.0, -1.0];
        assert_eq!(snr_db(&r, &r), f64::INFINITY);
        let t = [1.1, -1.0, 1.0, -1.0];
        assert!((snr_db(&r, &t) - 10.0 * (4.0f64 / 0.01).log10()).abs() < 1e-4);
        assert!(snr_db(&r, &r[..2]) < 10.0);
    }
}
