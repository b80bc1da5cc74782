//! Host matrix kernels: MatMul, 1-D Conv and ConvTranspose, through `matrixmultiply`'s SGEMM.
//!
//! Input: float tensors (`[batch, channels, time]` for convolutions). Output: float tensors.
//! A convolution whose plan precision is FP16 or INT8 is *emulated* here: operands are rounded
//! exactly as the CUDA engine rounds them (weights arrive already converted by the planner), so
//! the host executor predicts the engine's numerics and tests them without a GPU.

use half::f16;

use super::broadcast::broadcast_shape;
use crate::tts::cuda::program::op::{ConvSpec, Precision};
use crate::tts::cuda::quant;
use crate::tts::cuda::tensor::{OpResult, Tensor, numel, op_err};

/// `c[m×n] = a[m×k] · b[k×n]` with explicit row/column strides.
#[allow(clippy::too_many_arguments)]
fn sgemm(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    (rsa, csa): (isize, isize),
    b: &[f32],
    (rsb, csb): (isize, isize),
    c: &mut [f32],
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    debug_assert!(c.len() >= m * n);
    // SAFETY: callers pass slices that hold every element the strides address (checked by the
    // shape arithmetic of each caller); c is dense m×n.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            rsa,
            csa,
            b.as_ptr(),
            rsb,
            csb,
            if accumulate { 1.0 } else { 0.0 },
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

pub fn matmul(a: &Tensor, b: &Tensor) -> OpResult<Tensor> {
    let (av, bv) = (a.as_f32()?, b.as_f32()?);
    let mut ash = a.shape.clone();
    let mut bsh = b.shape.clone();
    let (a1, b1) = (ash.len() == 1, bsh.len() == 1);
    if a1 {
        ash.insert(0, 1);
    }
    if b1 {
        bsh.push(1);
    }
    if ash.len() < 2 || bsh.len() < 2 {
        return op_err("MatMul of scalars");
    }
    let (m, k) = (ash[ash.len() - 2], ash[ash.len() - 1]);
    let (k2, n) = (bsh[bsh.len() - 2], bsh[bsh.len() - 1]);
    if k != k2 {
        return op_err(format!("MatMul {:?} × {:?}", a.shape, b.shape));
    }
    let abatch = &ash[..ash.len() - 2];
    let bbatch = &bsh[..bsh.len() - 2];
    let batch = broadcast_shape(&[abatch, bbatch])?;
    let nb = numel(&batch);
    let mut out = vec![0.0f32; nb * m * n];
    let bst = crate::tts::cuda::ops::broadcast::broadcast_strides;
    let (sa, sb) = (bst(abatch, &batch), bst(bbatch, &batch));
    let bs = crate::tts::cuda::tensor::strides(&batch);
    for i in 0..nb {
        let (mut oa, mut ob) = (0, 0);
        for d in 0..batch.len() {
            let c = (i / bs[d]) % batch[d];
            oa += c * sa[d];
            ob += c * sb[d];
        }
        sgemm(
            (m, k, n),
            &av[oa * m * k..],
            (k as isize, 1),
            &bv[ob * k * n..],
            (n as isize, 1),
            &mut out[i * m * n..(i + 1) * m * n],
            false,
        );
    }
    let mut shape = batch;
    if !a1 {
        shape.push(m);
    }
    if !b1 {
        shape.push(n);
    }
    Ok(Tensor::f32(shape, out))
}

/// Rounds a GEMM operand the way the engine stores it (no-op in FP32).
fn round_operand(v: f32, spec: &ConvSpec) -> f32 {
    match spec.precision {
        Precision::F32 => v,
        Precision::F16 => f16::from_f32(v).to_f32(),
        Precision::I8 => quant::quantize(v, quant::scale(spec.input_amax.unwrap_or(0.0))) as f32,
    }
}

/// Undoes INT8 scaling on an accumulated output channel (1 for float precisions).
fn out_scale(spec: &ConvSpec, channel: usize) -> f32 {
    match (spec.precision, &spec.weight_scales) {
        (Precision::I8, Some(ws)) => {
            ws.get(channel).copied().unwrap_or(0.0) * quant::scale(spec.input_amax.unwrap_or(0.0))
        }
        _ => 1.0,
    }
}

fn check3(x: &Tensor, w: &Tensor) -> OpResult<()> {
    if x.shape.len() != 3 || w.shape.len() != 3 {
        return op_err(format!(
            "only 1-D convolutions ([batch, channels, time]) are supported, got {:?} and weights {:?}",
            x.shape, w.shape
        ));
    }
    Ok(())
}

/// Output length of a convolution over `t` steps with a `kernel`-tap filter.
pub fn conv_out_len(t: usize, kernel: usize, s: &ConvSpec) -> OpResult<usize> {
    let span = s.dilation * (kernel.max(1) - 1) + 1;
    let padded = t + s.pad_begin + s.pad_end;
    if padded < span {
        return op_err(format!(
            "input of {t} steps is shorter than the kernel's span {span}"
        ));
    }
    Ok((padded - span) / s.stride + 1)
}

pub fn conv(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, s: &ConvSpec) -> OpResult<Tensor> {
    check3(x, w)?;
    let (nb, cin, t) = (x.shape[0], x.shape[1], x.shape[2]);
    let (cout, cig, k) = (w.shape[0], w.shape[1], w.shape[2]);
    let g = s.group;
    if (s.kernel != 0 && k != s.kernel) || cig * g != cin || cout % g != 0 {
        return op_err(format!(
            "Conv weights {:?} for input {:?} in {g} groups",
            w.shape, x.shape
        ));
    }
    let cog = cout / g;
    let tout = conv_out_len(t, k, s)?;
    let (xv, wv) = (x.as_f32()?, w.as_f32()?);
    let mut out = vec![0.0f32; nb * cout * tout];
    let rows = cig * k;
    let mut col = vec![0.0f32; rows * tout];
    for b in 0..nb {
        for gi in 0..g {
            for ci in 0..cig {
                let xrow = &xv[(b * cin + gi * cig + ci) * t..][..t];
                for kk in 0..k {
                    let dst = &mut col[(ci * k + kk) * tout..][..tout];
                    for (to, d) in dst.iter_mut().enumerate() {
                        let pos = (to * s.stride + kk * s.dilation) as isize - s.pad_begin as isize;
                        *d = if pos >= 0 && (pos as usize) < t {
                            round_operand(xrow[pos as usize], s)
                        } else {
                            0.0
                        };
                    }
                }
            }
            let wg = &wv[gi * cog * rows..(gi + 1) * cog * rows];
            let o = &mut out[(b * cout + gi * cog) * tout..][..cog * tout];
            sgemm(
                (cog, rows, tout),
                wg,
                (rows as isize, 1),
                &col,
                (tout as isize, 1),
                o,
                false,
            );
        }
    }
    finish(out, nb, cout, tout, bias, s)
}

/// Applies INT8 output scales and the bias, channel by channel.
fn finish(
    mut out: Vec<f32>,
    nb: usize,
    cout: usize,
    tout: usize,
    bias: Option<&Tensor>,
    s: &ConvSpec,
) -> OpResult<Tensor> {
    let bv = bias.map(Tensor::as_f32).transpose()?;
    if bv.is_some_and(|b| b.len() != cout) {
        return op_err("bias length differs from the output channels");
    }
    for b in 0..nb {
        for c in 0..cout {
            let (scale, add) = (out_scale(s, c), bv.map_or(0.0, |v| v[c]));
            for v in &mut out[(b * cout + c) * tout..][..tout] {
                *v = *v * scale + add;
            }
        }
    }
    Ok(Tensor::f32(vec![nb, cout, tout], out))
}

pub fn conv_transpose(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    s: &ConvSpec,
) -> OpResult<Tensor> {
    check3(x, w)?;
    let (nb, cin, t) = (x.shape[0], x.shape[1], x.shape[2]);
    let (wcin, cout, k) = (w.shape[0], w.shape[1], w.shape[2]);
    if s.group != 1 || wcin != cin || (s.kernel != 0 && k != s.kernel) || t == 0 {
        return op_err(format!(
            "ConvTranspose weights {:?} for input {:?}",
            w.shape, x.shape
        ));
    }
    let full = (t - 1) * s.stride + s.dilation * (k - 1) + 1;
    if full < s.pad_begin + s.pad_end {
        return op_err("ConvTranspose pads exceed its output");
    }
    let tout = full - s.pad_begin - s.pad_end;
    let (xv, wv) = (x.as_f32()?, w.as_f32()?);
    let ck = cout * k;
    let mut z = vec![0.0f32; ck * t];
    let mut xr = vec![0.0f32; cin * t];
    let mut out = vec![0.0f32; nb * cout * tout];
    for b in 0..nb {
        for (d, &v) in xr.iter_mut().zip(&xv[b * cin * t..(b + 1) * cin * t]) {
            *d = round_operand(v, s);
        }
        // z[(co,k), t] = Σ_ci w[ci, (co,k)] · x[ci, t]
        sgemm(
            (ck, cin, t),
            wv,
            (1, ck as isize),
            &xr,
            (t as isize, 1),
            &mut z,
            false,
        );
        let o = &mut out[b * cout * tout..(b + 1) * cout * tout];
        for co in 0..cout {
            for kk in 0..k {
                let zr = &z[(co * k + kk) * t..][..t];
                for (ti, &v) in zr.iter().enumerate() {
                    let pos = (ti * s.stride + kk * s.dilation) as isize - s.pad_begin as isize;
                    if pos >= 0 && (pos as usize) < tout {
                        o[co * tout + pos as usize] += v;
                    }
                }
            }
        }
    }
    finish(out, nb, cout, tout, bias, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kernel: usize, stride: usize, dilation: usize, pad: usize, group: usize) -> ConvSpec {
        ConvSpec::plain(kernel, stride, dilation, pad, group)
    }

    /// Direct definition of a 1-D convolution, for checking the GEMM path.
    fn naive(x: &[f32], cin: usize, t: usize, w: &[f32], cout: usize, s: &ConvSpec) -> Vec<f32> {
        let k = s.kernel;
        let cig = cin / s.group;
        let cog = cout / s.group;
        let tout = conv_out_len(t, k, s).unwrap();
        let mut o = vec![0.0; cout * tout];
        for co in 0..cout {
            let g = co / cog;
            for to in 0..tout {
                let mut acc = 0.0;
                for ci in 0..cig {
                    for kk in 0..k {
                        let p = (to * s.stride + kk * s.dilation) as isize - s.pad_begin as isize;
                        if p >= 0 && (p as usize) < t {
                            acc += x[(g * cig + ci) * t + p as usize] * w[(co * cig + ci) * k + kk];
                        }
                    }
                }
                o[co * tout + to] = acc;
            }
        }
        o
    }

    fn rand(n: usize, seed: u64) -> Vec<f32> {
        let mut r = fastrand::Rng::with_seed(seed);
        (0..n).map(|_| r.f32() * 2.0 - 1.0).collect()
    }

    #[test]
    fn conv_matches_the_definition() {
        for s in [
            spec(3, 1, 2, 2, 1),
            spec(5, 2, 1, 1, 1),
            spec(3, 1, 3, 3, 4),
        ] {
            let (cin, cout, t) = (4, 8, 13);
            let x = rand(cin * t, 1);
            let w = rand(cout * (cin / s.group) * s.kernel, 2);
            let got = conv(
                &Tensor::f32(vec![1, cin, t], x.clone()),
                &Tensor::f32(vec![cout, cin / s.group, s.kernel], w.clone()),
                None,
                &s,
            )
            .unwrap();
            let want = naive(&x, cin, t, &w, cout, &s);
            for (a, b) in got.as_f32().unwrap().iter().zip(&want) {
                assert!((a - b).abs() < 1e-5, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn conv_transpose_is_the_adjoint_of_conv() {
        // <conv(x), y> == <x, conv_transpose(y)> for the same weights and no padding.
        let s = spec(4, 2, 1, 0, 1);
        let (cin, cout, t) = (3, 2, 8);
        let x = rand(cin * t, 3);
        let w = rand(cout * cin * 4, 4); // Conv: [cout, cin, k]; ConvTranspose reads it as [in=cout, out=cin, k]
        let cx = conv(
            &Tensor::f32(vec![1, cin, t], x.clone()),
            &Tensor::f32(vec![cout, cin, 4], w.clone()),
            None,
            &s,
        )
        .unwrap();
        let tout = cx.shape[2];
        let y = rand(cout * tout, 5);
        let ty = conv_transpose(
            &Tensor::f32(vec![1, cout, tout], y.clone()),
            &Tensor::f32(vec![cout, cin, 4], w),
            None,
            &s,
        )
        .unwrap();
        let lhs: f32 = cx
            .as_f32()
            .unwrap()
            .iter()
            .zip(&y)
            .map(|(a, b)| a * b)
            .sum();
        let rhs: f32 = ty
            .as_f32()
            .unwrap()
            .iter()
            .zip(&x)
            .map(|(a, b)| a * b)
            .sum();
        assert!((lhs - rhs).abs() < 1e-4, "{lhs} vs {rhs}");
    }

    #[test]
    fn matmul_broadcasts_batches() {
        let a = Tensor::f32(vec![2, 1, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let b = Tensor::f32(vec![2, 1], vec![10.0, 1.0]);
        let c = matmul(&a, &b).unwrap();
        assert_eq!(c.shape, [2, 1, 1]);
        assert_eq!(c.as_f32().unwrap(), [12.0, 34.0]);
        let v = matmul(&Tensor::f32(vec![2], vec![1.0, 1.0]), &b).unwrap();
        assert_eq!(
            (v.shape.clone(), v.as_f32().unwrap().to_vec()),
            (vec![1], vec![11.0])
        );
        assert!(matmul(&a, &Tensor::f32(vec![3, 1], vec![0.0; 3])).is_err());
    }

    #[test]
    fn bad_convolutions_are_refused() {
        let x = Tensor::f32(vec![1, 2, 4], vec![0.0; 8]);
        assert!(
            conv(
                &x,
                &Tensor::f32(vec![1, 3, 1], vec![0.0; 3]),
                None,
                &spec(1, 1, 1, 0, 1)
            )
            .is_err()
        );
        assert!(
            conv(
                &x,
                &Tensor::f32(vec![1, 2, 9], vec![0.0; 18]),
                None,
                &spec(9, 1, 1, 0, 1)
            )
            .is_err()
        );
        assert!(
            conv(
                &Tensor::f32(vec![2, 4], vec![0.0; 8]),
                &x,
                None,
                &spec(1, 1, 1, 0, 1)
            )
            .is_err()
        );
        let w = Tensor::f32(vec![1, 2, 1], vec![0.0; 2]);
        assert!(
            conv(
                &x,
                &w,
                Some(&Tensor::f32(vec![2], vec![0.0; 2])),
                &spec(1, 1, 1, 0, 1)
            )
            .is_err()
        );
        assert!(
            conv_transpose(
                &x,
                &Tensor::f32(vec![2, 1, 2], vec![0.0; 4]),
                None,
                &spec(2, 1, 1, 3, 1)
            )
            .is_err()
        );
    }
}
