//! The arithmetic work of a program run, counted from the shapes each step actually sees: the
//! multiply-accumulates of convolutions, transposed convolutions and matrix products (everything
//! else is memory traffic, not arithmetic worth counting). Both executors add up [`step_macs`]
//! per run, so `talker engine bench` can print MACs per audio second and the share of the GPU's
//! dense FP16 bound reached.

use super::op::Op;
use crate::tts::cuda::tensor::numel;

/// Dense FP16/BF16 matrix throughput of one H200 (TFLOP/s), the bound the bench compares with.
pub const H200_DENSE_FP16_TFLOPS: f64 = 790.0;

/// MACs of one step, given its inputs' and first output's shapes (`None` for an absent input);
/// 0 for ops that do no matrix arithmetic.
///
/// Layout-free on purpose: the device stores ConvTranspose weights transposed and FP16 weights
/// packed, but every weight element is still used once per output position (Conv) or per input
/// position (ConvTranspose), and a MatMul does `k` MACs per output element.
pub fn step_macs(op: &Op, inputs: &[Option<&[usize]>], output: &[usize]) -> u64 {
    let shape = |k: usize| inputs.get(k).copied().flatten();
    let macs = match op {
        Op::Conv(_) => match (shape(1), output) {
            (Some(w), [b, _, t_out, ..]) => b * t_out * numel(w),
            _ => 0,
        },
        Op::ConvTranspose(_) => match (shape(0), shape(1)) {
            (Some([b, _, t_in, ..]), Some(w)) => b * t_in * numel(w),
            _ => 0,
        },
        Op::MatMul => match shape(0) {
            Some(a) if a.len() >= 2 => numel(output) * a[a.len() - 1],
            _ => 0,
        },
        _ => 0,
    };
    macs as u64
}

/// Work of a run (or of many): MACs, and FLOPs as two per MAC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub macs: u64,
}

impl Work {
    pub fn flops(&self) -> f64 {
        2.0 * self.macs as f64
    }

    /// The bench's figures for this work done in `seconds`, producing `audio_seconds` of audio.
    pub fn report(&self, audio_seconds: f64, seconds: f64) -> serde_json::Value {
        let tflops = self.flops() / seconds.max(1e-12) / 1e12;
        serde_json::json!({
            "macs": self.macs,
            "macs_per_audio_second": self.macs as f64 / audio_seconds.max(1e-12),
            "achieved_tflops": tflops,
            "h200_dense_fp16_tflops": H200_DENSE_FP16_TFLOPS,
            "share_of_h200_bound": tflops / H200_DENSE_FP16_TFLOPS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tts::cuda::program::op::ConvSpec;

    fn spec(kernel: usize, stride: usize, group: usize) -> ConvSpec {
        ConvSpec::plain(kernel, stride, 1, 0, group)
    }

    #[test]
    fn conv_transpose_and_matmul_macs_follow_their_shapes() {
        // Conv: 2 items, 4 → 8 channels, kernel 3, 10 output frames: 2·10·(8·4·3).
        let conv = Op::Conv(spec(3, 1, 1));
        let (x, w) = ([2, 4, 12], [8, 4, 3]);
        assert_eq!(
            step_macs(&conv, &[Some(&x), Some(&w), None], &[2, 8, 10]),
            2 * 10 * 8 * 4 * 3
        );
        // Depthwise: 4 channels, kernel 5: every output does 5 MACs.
        let dw = Op::Conv(spec(5, 1, 4));
        assert_eq!(
            step_macs(&dw, &[Some(&[1, 4, 9]), Some(&[4, 1, 5])], &[1, 4, 5]),
            4 * 5 * 5
        );
        // ConvTranspose, ONNX layout [in, out, k] or the device's [out·k, in]: same count.
        let ct = Op::ConvTranspose(spec(16, 8, 1));
        let x = [1, 256, 7];
        let onnx = step_macs(&ct, &[Some(&x), Some(&[256, 128, 16])], &[1, 128, 64]);
        let dev = step_macs(&ct, &[Some(&x), Some(&[128 * 16, 256])], &[1, 128, 64]);
        assert_eq!((onnx, dev), (7 * 256 * 128 * 16, 7 * 256 * 128 * 16));
        // MatMul [3, 5, 6] × [6, 7]: 3·5·7 outputs of 6 MACs.
        assert_eq!(
            step_macs(&Op::MatMul, &[Some(&[3, 5, 6]), Some(&[6, 7])], &[3, 5, 7]),
            3 * 5 * 7 * 6
        );
        assert_eq!(step_macs(&Op::Identity, &[Some(&[4])], &[4]), 0);
    }

    #[test]
    fn work_reports_the_share_of_the_bound() {
        let w = Work { macs: 395_000_000 };
        let r = w.report(2.0, 1e-3);
        assert_eq!(r["macs_per_audio_second"], 197_500_000.0);
        let tflops = r["achieved_tflops"].as_f64().unwrap();
        assert!((tflops - 0.79).abs() < 1e-9, "{tflops}");
        let share = r["share_of_h200_bound"].as_f64().unwrap();
        assert!((share - 0.001).abs() < 1e-12, "{share}");
    }
}
