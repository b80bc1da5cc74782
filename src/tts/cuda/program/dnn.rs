//! How a 1-D convolution of the plan maps onto cuDNN's 2-D descriptors (NCHW with H = 1), and
//! which convolutions cuDNN can take at all: host-side maths, so it is tested without a GPU.
//!
//! cuDNN's legacy convolution takes one symmetric padding per axis. A Conv therefore needs equal
//! padding at both ends. A ConvTranspose runs as the backward-data pass of the convolution it
//! transposes: its input is that convolution's output gradient, its output the input gradient,
//! and ONNX's `output_padding` (folded into a smaller end padding by the parser) is what makes
//! the forward length round down to the input's length, so it must stay below the stride.

use super::op::{ConvSpec, Op, Precision};

/// The cuDNN view of one convolution: NCHW dims of input, filter and output, and the W-axis
/// padding, stride and dilation (the H axis is 1 with no padding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnnConv {
    /// Conv: the input `x`; ConvTranspose: the forward convolution's output gradient (`dy`).
    pub x: [usize; 4],
    /// `[K, C, 1, k]`: Conv `[cout, cin, 1, k]`; ConvTranspose `[cin, cout, 1, k]`.
    pub w: [usize; 4],
    /// Conv: the output `y`; ConvTranspose: the input gradient `dx`, which is its output.
    pub y: [usize; 4],
    pub pad: usize,
    pub stride: usize,
    pub dilation: usize,
    /// Backward data (ConvTranspose) rather than forward.
    pub transposed: bool,
}

/// The forward length cuDNN computes for an input of `len`.
fn forward_len(len: usize, k: usize, c: &ConvSpec) -> Option<usize> {
    let span = c.dilation * (k - 1) + 1;
    (len + 2 * c.pad_begin)
        .checked_sub(span)
        .map(|r| r / c.stride + 1)
}

/// The cuDNN descriptors of `op` for input shape `x` and the plan's weight shape `w` (Conv
/// `[cout, cin, k]`, ConvTranspose `[cin, cout, k]`), or `None` where cuDNN does not run it:
/// INT8, grouped convolutions (the depthwise ones have their own kernel), and paddings its
/// symmetric descriptor cannot express.
pub fn dnn_conv(op: &Op, x: &[usize], w: &[usize]) -> Option<DnnConv> {
    let (c, transposed) = match op {
        Op::Conv(c) => (c, false),
        Op::ConvTranspose(c) => (c, true),
        _ => return None,
    };
    let [b, cin, t] = <[usize; 3]>::try_from(x).ok()?;
    let [w0, w1, k] = <[usize; 3]>::try_from(w).ok()?;
    if c.precision == Precision::I8 || c.group != 1 || k == 0 || c.stride == 0 || c.dilation == 0 {
        return None;
    }
    if w0.max(w1) == 0 || t == 0 {
        return None;
    }
    if !transposed {
        if c.pad_begin != c.pad_end || w1 != cin {
            return None;
        }
        let t_out = forward_len(t, k, c)?;
        return Some(DnnConv {
            x: [b, cin, 1, t],
            w: [w0, w1, 1, k],
            y: [b, w0, 1, t_out],
            pad: c.pad_begin,
            stride: c.stride,
            dilation: c.dilation,
            transposed,
        });
    }
    let output_padding = c.pad_begin.checked_sub(c.pad_end)?;
    if output_padding >= c.stride || w0 != cin {
        return None;
    }
    let full = (t - 1) * c.stride + c.dilation * (k - 1) + 1;
    let t_out = full.checked_sub(c.pad_begin + c.pad_end)?;
    (forward_len(t_out, k, c)? == t).then_some(DnnConv {
        x: [b, cin, 1, t],
        w: [w0, w1, 1, k],
        y: [b, w1, 1, t_out],
        pad: c.pad_begin,
        stride: c.stride,
        dilation: c.dilation,
        transposed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tts::cuda::ops::linalg;

    fn conv(k: usize, s: usize, d: usize, pb: usize, pe: usize) -> ConvSpec {
        ConvSpec {
            pad_begin: pb,
            pad_end: pe,
            precision: Precision::F16,
            ..ConvSpec::plain(k, s, d, 0, 1)
        }
    }

    #[test]
    fn conv_dims_match_the_host_convolution() {
        for (k, s, d, p, t) in [
            (3, 1, 1, 1, 10),
            (7, 1, 1, 3, 5),
            (3, 1, 5, 5, 9),
            (4, 2, 1, 1, 9),
        ] {
            let c = conv(k, s, d, p, p);
            let m = dnn_conv(&Op::Conv(c.clone()), &[2, 4, t], &[8, 4, k]).unwrap();
            let t_out = linalg::conv_out_len(t, k, &c).unwrap();
            assert_eq!(m.y, [2, 8, 1, t_out], "k{k} s{s} d{d} p{p}");
            assert_eq!((m.x, m.w), ([2, 4, 1, t], [8, 4, 1, k]));
            assert_eq!(
                (m.pad, m.stride, m.dilation, m.transposed),
                (p, s, d, false)
            );
        }
    }

    #[test]
    fn what_cudnn_cannot_take_stays_on_the_gemm_path() {
        let x = [1, 4, 10];
        assert!(dnn_conv(&Op::Conv(conv(3, 1, 1, 2, 0)), &x, &[8, 4, 3]).is_none());
        let int8 = ConvSpec {
            precision: Precision::I8,
            ..conv(3, 1, 1, 1, 1)
        };
        assert!(dnn_conv(&Op::Conv(int8), &x, &[8, 4, 3]).is_none());
        let depthwise = ConvSpec::plain(3, 1, 1, 1, 4);
        assert!(dnn_conv(&Op::Conv(depthwise), &x, &[4, 1, 3]).is_none());
        assert!(dnn_conv(&Op::Conv(conv(3, 1, 1, 1, 1)), &[1, 4, 10, 1], &[8, 4, 3]).is_none());
        assert!(dnn_conv(&Op::Conv(conv(3, 1, 1, 1, 1)), &x, &[8, 5, 3]).is_none());
        assert!(dnn_conv(&Op::Conv(conv(9, 1, 1, 0, 0)), &x, &[8, 4, 9]).is_some());
        assert!(dnn_conv(&Op::Conv(conv(11, 1, 1, 0, 0)), &x, &[8, 4, 11]).is_none());
        // A transposed conv whose output padding reaches the stride has no forward twin.
        assert!(dnn_conv(&Op::ConvTranspose(conv(4, 2, 1, 3, 1)), &x, &[4, 8, 4]).is_none());
        assert!(dnn_conv(&Op::ConvTranspose(conv(4, 2, 1, 0, 1)), &x, &[4, 8, 4]).is_none());
    }

    #[test]
    fn transposed_dims_invert_the_forward_convolution() {
        // Piper's upsampling: k 16 s 8 p 4, k 8 s 4 p 2, k 4 s 2 p 1 (output padding 0), and an
        // output padding of 1 at stride 2.
        for (k, s, pb, pe, t) in [
            (16, 8, 4, 4, 7),
            (8, 4, 2, 2, 56),
            (4, 2, 1, 1, 5),
            (3, 2, 1, 0, 6),
        ] {
            let c = conv(k, s, 1, pb, pe);
            let m = dnn_conv(&Op::ConvTranspose(c.clone()), &[3, 8, t], &[8, 4, k]).unwrap();
            let t_out = (t - 1) * s + k - pb - pe;
            assert_eq!(m.y, [3, 4, 1, t_out]);
            assert_eq!((m.x, m.w, m.transposed), ([3, 8, 1, t], [8, 4, 1, k], true));
            assert_eq!(forward_len(t_out, k, &c), Some(t));
        }
    }
}
