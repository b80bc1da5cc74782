//! The work of a program run, counted from the shapes each step actually sees: the
//! multiply-accumulates of convolutions, transposed convolutions and matrix products, and the
//! bytes the device engine moves through memory (every step's inputs and outputs as the plan
//! stores them, plus the convolutions' own operand buffers). Both executors add up [`step_macs`]
//! and [`step_bytes`] per run, so `talker engine bench` can print both per audio second beside
//! the shares of the GPU's compute and memory bounds reached: the engine is far from the first,
//! and the second says whether its kernels or its design are what is slow.

use super::dnn::dnn_conv;
use super::op::{ConvPath, ConvSpec, Op, Precision};
use crate::tts::cuda::tensor::numel;

/// Dense FP16/BF16 matrix throughput of one H200 (TFLOP/s), the bound the bench compares with.
const H200_DENSE_FP16_TFLOPS: f64 = 790.0;

/// Memory bandwidth of one H200 (TB/s, NVIDIA's figure for the SXM part).
const H200_MEMORY_TBPS: f64 = 4.8;

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

fn operand_size(p: Precision) -> usize {
    match p {
        Precision::F32 => 4,
        Precision::F16 => 2,
        Precision::I8 => 1,
    }
}

/// Bytes one step moves through device memory, given its inputs' and outputs' shapes with their
/// element sizes (`None` for an absent input): each is read or written once, weights included
/// (at the plan's 4 bytes, a slight overcount for FP16 and INT8 weights, which are small; so is a
/// fused input read through a view, counted at its source's size, which the executors see). A
/// convolution also writes and reads its GEMM operand (im2col, or the cast of a transposed
/// convolution's input), INT8 its 32-bit accumulators, and a transposed convolution its
/// `[out·k, t]` product before col2im, as the device executor runs them.
///
/// On the cuDNN path (`path`, for the convolutions [`dnn_conv`] maps) there is no operand: an FP16
/// convolution instead writes and reads its input cast to FP16 and its FP16 output before the
/// widening; an FP32 one moves only its tensors (cuDNN's own workspace traffic is not counted).
pub fn step_bytes(
    op: &Op,
    inputs: &[Option<(&[usize], usize)>],
    outputs: &[(&[usize], usize)],
    path: ConvPath,
) -> u64 {
    let tensors = tensor_bytes(inputs, outputs);
    let shape = |k: usize| inputs.get(k).copied().flatten().map(|(s, _)| s);
    let out = outputs.first().map(|(s, _)| *s);
    // FP16 activations (2-byte values) in or out keep a convolution on the GEMM path.
    let half_in = inputs
        .first()
        .copied()
        .flatten()
        .is_some_and(|(_, size)| size == 2);
    let half_out = outputs.first().is_some_and(|&(_, size)| size == 2);
    if let (ConvPath::Cudnn, Op::Conv(c) | Op::ConvTranspose(c), Some(x), Some(w), Some(y)) =
        (path, op, shape(0), shape(1), out)
        && !half_in
        && !half_out
        && dnn_conv(op, x, w).is_some()
    {
        let casts = if c.precision == Precision::F16 {
            2 * 2 * (numel(x) + numel(y))
        } else {
            0
        };
        return tensors + casts as u64;
    }
    let internal = match (op, shape(0), shape(1), out) {
        (Op::Conv(c), Some([b, cin, ..]), Some([_, _, k, ..]), Some([_, cout, t_out, ..]))
            if c.group == 1 =>
        {
            let direct = conv_is_direct(c, *k, half_in);
            let col = if direct {
                0
            } else {
                b * cin * k * t_out * operand_size(c.precision)
            };
            let acc = if c.precision == Precision::I8 {
                b * cout * t_out * 4
            } else {
                0
            };
            2 * (col + acc)
        }
        (Op::ConvTranspose(c), Some([b, cin, t, ..]), Some(_), Some([_, cout, ..])) => {
            let k = c.kernel.max(1);
            let cast = if c.precision == Precision::F32 || half_in {
                0
            } else {
                b * cin * t * operand_size(c.precision)
            };
            let acc = if c.precision == Precision::I8 {
                b * cout * k * t * 4
            } else {
                0
            };
            2 * (cast + acc + b * cout * k * t * 4)
        }
        _ => 0,
    };
    tensors + internal as u64
}

/// Bytes of a step's own inputs and outputs, each read or written once: all that a step with no
/// intermediate operand moves (the tensor-core convolution, `device::kernels::mma`).
pub fn tensor_bytes(inputs: &[Option<(&[usize], usize)>], outputs: &[(&[usize], usize)]) -> u64 {
    inputs
        .iter()
        .flatten()
        .chain(outputs)
        .map(|(s, size)| numel(s) * size)
        .sum::<usize>() as u64
}

/// Whether the device runs this convolution as a GEMM straight on its input (1×1, no stride or
/// padding, the input stored in the operand's type: FP32, or FP16 activations of an FP16 step),
/// without an im2col operand.
fn conv_is_direct(c: &ConvSpec, kernel: usize, half_in: bool) -> bool {
    c.precision != Precision::I8
        && half_in == (c.precision == Precision::F16)
        && kernel == 1
        && c.stride == 1
        && c.pad_begin == 0
        && c.pad_end == 0
}

/// Work of a run (or of many): MACs (FLOPs as two per MAC) and bytes moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub macs: u64,
    pub bytes: u64,
}

impl Work {
    fn flops(&self) -> f64 {
        2.0 * self.macs as f64
    }

    /// The bench's figures for this work done in `seconds`, producing `audio_seconds` of audio.
    pub fn report(&self, audio_seconds: f64, seconds: f64) -> serde_json::Value {
        let tflops = self.flops() / seconds.max(1e-12) / 1e12;
        let tbps = self.bytes as f64 / seconds.max(1e-12) / 1e12;
        serde_json::json!({
            "macs": self.macs,
            "macs_per_audio_second": self.macs as f64 / audio_seconds.max(1e-12),
            "achieved_tflops": tflops,
            "h200_dense_fp16_tflops": H200_DENSE_FP16_TFLOPS,
            "share_of_h200_bound": tflops / H200_DENSE_FP16_TFLOPS,
            "bytes": self.bytes,
            "bytes_per_audio_second": self.bytes as f64 / audio_seconds.max(1e-12),
            "achieved_tb_per_s": tbps,
            "h200_memory_tb_per_s": H200_MEMORY_TBPS,
            "share_of_h200_memory_bound": tbps / H200_MEMORY_TBPS,
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
        let w = Work {
            macs: 395_000_000,
            bytes: 9_600_000_000,
        };
        let r = w.report(2.0, 1e-3);
        assert_eq!(r["macs_per_audio_second"], 197_500_000.0);
        let tflops = r["achieved_tflops"].as_f64().unwrap();
        assert!((tflops - 0.79).abs() < 1e-9, "{tflops}");
        let share = r["share_of_h200_bound"].as_f64().unwrap();
        assert!((share - 0.001).abs() < 1e-12, "{share}");
        assert_eq!(r["bytes_per_audio_second"], 4_800_000_000.0);
        let memory = r["share_of_h200_memory_bound"].as_f64().unwrap();
        assert!((memory - 2.0).abs() < 1e-9, "{memory}");
    }

    const GEMM: ConvPath = ConvPath::Gemm;

    #[test]
    fn bytes_count_tensors_and_the_convolutions_own_buffers() {
        let f = |s: &'static [usize]| Some((s, 4));
        // Elementwise: two inputs and the output, once each.
        let add = Op::Binary(crate::tts::cuda::program::op::Binary::Add);
        assert_eq!(
            step_bytes(&add, &[f(&[2, 3]), f(&[1, 3])], &[(&[2, 3], 4)], GEMM),
            (6 + 3 + 6) * 4
        );
        // FP16 conv, 2 items, 4 → 8 channels, kernel 3, 10 output frames: x, w, out, and the
        // im2col operand (2·12 rows·10 columns of 2 bytes) written and read.
        let conv = Op::Conv(ConvSpec {
            precision: Precision::F16,
            ..spec(3, 1, 1)
        });
        let tensors = (2 * 4 * 12 + 8 * 4 * 3 + 2 * 8 * 10) * 4;
        assert_eq!(
            step_bytes(
                &conv,
                &[f(&[2, 4, 12]), f(&[8, 4, 3]), None],
                &[(&[2, 8, 10], 4)],
                GEMM
            ),
            (tensors + 2 * (2 * 12 * 10 * 2)) as u64
        );
        // On cuDNN the same conv (no padding: symmetric) casts its input and output instead.
        assert_eq!(
            step_bytes(
                &conv,
                &[f(&[2, 4, 12]), f(&[8, 4, 3]), None],
                &[(&[2, 8, 10], 4)],
                ConvPath::Cudnn
            ),
            (tensors + 2 * 2 * (2 * 4 * 12 + 2 * 8 * 10)) as u64
        );
        // An FP32 1×1 conv is a GEMM on its input: no operand buffer.
        let direct = Op::Conv(spec(1, 1, 1));
        assert_eq!(
            step_bytes(
                &direct,
                &[f(&[1, 4, 5]), f(&[8, 4, 1])],
                &[(&[1, 8, 5], 4)],
                GEMM
            ),
            ((20 + 32 + 40) * 4) as u64
        );
        // FP32 ConvTranspose 256 → 128, k 16, 7 frames: the [128·16, 7] product, written and read.
        let ct = Op::ConvTranspose(spec(16, 8, 1));
        let tensors = (256 * 7 + 256 * 128 * 16 + 128 * 64) * 4;
        assert_eq!(
            step_bytes(
                &ct,
                &[f(&[1, 256, 7]), f(&[256, 128, 16])],
                &[(&[1, 128, 64], 4)],
                GEMM
            ),
            (tensors + 2 * 128 * 16 * 7 * 4) as u64
        );
        // An FP32 transposed conv on cuDNN moves only its tensors.
        assert_eq!(
            step_bytes(
                &ct,
                &[f(&[1, 256, 7]), f(&[256, 128, 16])],
                &[(&[1, 128, 64], 4)],
                ConvPath::Cudnn
            ),
            tensors as u64
        );
    }

    #[test]
    fn fp16_activations_are_counted_as_stored_and_stay_off_cudnn() {
        let h = |s: &'static [usize]| Some((s, 2));
        let f = |s: &'static [usize]| Some((s, 4));
        // An FP16 1×1 conv over FP16 activations is a GEMM on its input, on either path.
        let direct = Op::Conv(ConvSpec {
            precision: Precision::F16,
            ..spec(1, 1, 1)
        });
        for path in [GEMM, ConvPath::Cudnn] {
            assert_eq!(
                step_bytes(
                    &direct,
                    &[h(&[1, 4, 5]), f(&[8, 4, 1])],
                    &[(&[1, 8, 5], 2)],
                    path
                ),
                (20 * 2 + 32 * 4 + 40 * 2) as u64
            );
        }
        // An FP16 ConvTranspose reads FP16 activations as its operand: no cast.
        let ct = Op::ConvTranspose(ConvSpec {
            precision: Precision::F16,
            ..spec(16, 8, 1)
        });
        let tensors = 256 * 7 * 2 + 256 * 128 * 16 * 4 + 128 * 64 * 2;
        assert_eq!(
            step_bytes(
                &ct,
                &[h(&[1, 256, 7]), f(&[256, 128, 16])],
                &[(&[1, 128, 64], 2)],
                GEMM
            ),
            (tensors + 2 * 128 * 16 * 7 * 4) as u64
        );
    }
}
