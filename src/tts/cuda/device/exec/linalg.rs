//! Matrix steps: MatMul and convolutions through cuBLAS GEMMs in the step's precision (im2col
//! or a cast first; FP16 operands with FP32 accumulation; INT8 with INT32 accumulation, dequantised
//! per output channel), depthwise convolutions with their own kernel, ConvTranspose as GEMM +
//! col2im.

use std::ffi::c_void;

use cudarc::cublas::sys::{
    cublasComputeType_t as Compute, cublasGemmAlgo_t, cublasOperation_t as OpT,
    cudaDataType_t as Dt,
};

use super::{DeviceExecutor, Family, Slots, step_err};
use crate::tts::cuda::device::GpuError;
use crate::tts::cuda::device::kernels::mma;
use crate::tts::cuda::device::memory::{self, DevTensor, Params};
use crate::tts::cuda::ops::{broadcast, linalg};
use crate::tts::cuda::program::Step;
use crate::tts::cuda::program::dnn::dnn_conv;
use crate::tts::cuda::program::op::{ConvPath, ConvSpec, Op, Precision};
use crate::tts::cuda::tensor::{DType, numel};

impl DeviceExecutor {
    /// Runs a linalg step on the device; `None` when this case has no device kernel.
    pub(super) fn linalg_step(&mut self, i: usize, s: &Step, slots: &mut Slots) -> Family {
        Ok(Some(match &s.op {
            Op::MatMul => {
                let a = self.in_dev(slots, s, 0)?;
                let b = self.in_dev(slots, s, 1)?;
                vec![
                    self.matmul(&a, &b)
                        .map_err(|m| step_err(i, s, m.to_string()))?,
                ]
            }
            Op::Conv(spec) | Op::ConvTranspose(spec) => {
                let x = self.in_dev(slots, s, 0)?;
                let out_half = s.outputs.first().is_some_and(|&o| self.plan.values[o].half);
                // cuDNN's path reads and writes FP32 activations.
                let on_dnn = if self.conv_path == ConvPath::Cudnn && !x.half && !out_half {
                    self.weight_shape(s)
                        .and_then(|w| dnn_conv(&s.op, &x.shape, w))
                } else {
                    None
                };
                let transposed = matches!(s.op, Op::ConvTranspose(_));
                let out = match on_dnn {
                    Some(m) => {
                        let w = match (transposed, s.inputs.get(1).copied().flatten()) {
                            (true, Some(id)) => {
                                self.dnn_weights.get(&id).cloned().ok_or_else(|| {
                                    step_err(i, s, "no cuDNN weight layout uploaded")
                                })?
                            }
                            _ => self.in_dev(slots, s, 1)?,
                        };
                        self.conv_dnn(i, &x, &w, spec, &m)
                    }
                    None => {
                        let w = self.in_dev(slots, s, 1)?;
                        if transposed {
                            self.conv_transpose(i, (&x, out_half), &w, spec)
                        } else {
                            self.conv(i, (&x, out_half), &w, spec)
                        }
                    }
                };
                vec![out.map_err(|m| step_err(i, s, m.to_string()))?]
            }
            _ => return Ok(None),
        }))
    }

    /// Row-major `C[b] = A[b] · B[b]` through cuBLAS (column-major: Cᵀ = Bᵀ·Aᵀ).
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        &self,
        (m, n, k): (usize, usize, usize),
        (a, a_t, a_ld, a_stride): (u64, Dt, usize, usize),
        a_trans: bool,
        (b, b_t, b_ld, b_stride): (u64, Dt, usize, usize),
        (c, c_t, c_ld, c_stride): (u64, Dt, usize, usize),
        batch: usize,
    ) -> Result<(), GpuError> {
        let int = c_t == Dt::CUDA_R_32I;
        let (one_f, zero_f) = (1.0f32, 0.0f32);
        let (one_i, zero_i) = (1i32, 0i32);
        let (alpha, beta): (*const c_void, *const c_void) = if int {
            (
                (&one_i as *const i32).cast(),
                (&zero_i as *const i32).cast(),
            )
        } else {
            (
                (&one_f as *const f32).cast(),
                (&zero_f as *const f32).cast(),
            )
        };
        let compute = if int {
            Compute::CUBLAS_COMPUTE_32I
        } else {
            Compute::CUBLAS_COMPUTE_32F
        };
        // SAFETY: pointers address device buffers sized by the callers for these dimensions;
        // alpha/beta live until the call returns (host pointer mode).
        unsafe {
            cudarc::cublas::result::gemm_strided_batched_ex(
                self.gpu.blas,
                if a_trans {
                    OpT::CUBLAS_OP_T
                } else {
                    OpT::CUBLAS_OP_N
                },
                OpT::CUBLAS_OP_N,
                m as i32,
                n as i32,
                k as i32,
                alpha,
                a as *const c_void,
                a_t,
                a_ld as i32,
                a_stride as i64,
                b as *const c_void,
                b_t,
                b_ld as i32,
                b_stride as i64,
                beta,
                c as *mut c_void,
                c_t,
                c_ld as i32,
                c_stride as i64,
                batch as i32,
                compute,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )?;
        }
        Ok(())
    }

    fn matmul(&self, a: &DevTensor, b: &DevTensor) -> Result<DevTensor, GpuError> {
        let (ra, rb) = (a.shape.len(), b.shape.len());
        if ra < 2 || rb < 2 {
            return Err(GpuError::Other("MatMul of vectors runs on the host".into()));
        }
        let (m, k) = (a.shape[ra - 2], a.shape[ra - 1]);
        let (k2, n) = (b.shape[rb - 2], b.shape[rb - 1]);
        if k != k2 {
            return Err(GpuError::Other(format!(
                "MatMul {:?} × {:?}",
                a.shape, b.shape
            )));
        }
        let (ab, bb) = (&a.shape[..ra - 2], &b.shape[..rb - 2]);
        let batch_shape =
            broadcast::broadcast_shape(&[ab, bb]).map_err(|e| GpuError::Other(e.0))?;
        let nb = numel(&batch_shape);
        // Each side is either the full batch or one matrix shared by all (stride 0).
        let trim =
            |s: &[usize]| -> Vec<usize> { s.iter().copied().skip_while(|&d| d == 1).collect() };
        let full = trim(&batch_shape);
        let stride_of = |own: &[usize], size: usize| -> Result<usize, GpuError> {
            if numel(own) == 1 {
                Ok(0)
            } else if trim(own) == full {
                Ok(size)
            } else {
                Err(GpuError::Other(
                    "MatMul batch broadcast not supported on the device".into(),
                ))
            }
        };
        let (sa, sb) = (stride_of(ab, m * k)?, stride_of(bb, k * n)?);
        let mut shape = batch_shape;
        shape.extend([m, n]);
        let out = memory::empty(self.stream(), DType::F32, shape)?;
        self.gemm(
            (n, m, k),
            (b.ptr(), Dt::CUDA_R_32F, n, sb),
            false,
            (a.ptr(), Dt::CUDA_R_32F, k, sa),
            (out.ptr(), Dt::CUDA_R_32F, n, m * n),
            nb,
        )?;
        Ok(out)
    }

    /// The GEMM operand of a convolution input: im2col (or a cast) in the step's precision, from
    /// FP32 or (FP16 steps) FP16 activations.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn operand(
        &self,
        x: &DevTensor,
        k: usize,
        t_out: usize,
        spec: &ConvSpec,
        tn: bool,
    ) -> Result<DevTensor, GpuError> {
        let (b, cin, t) = (x.shape[0], x.shape[1], x.shape[2]);
        let rows = cin * k;
        let n = b * rows * t_out;
        // Only FP16 steps read FP16 activations (`Plan::validate`).
        let (name, size) = match spec.precision {
            Precision::F32 => ("im2col_f32", 4),
            Precision::F16 if x.half => ("im2col_f16_h", 2),
            Precision::F16 => ("im2col_f16", 2),
            Precision::I8 => ("im2col_i8", 1),
        };
        let st = self.stream();
        let col = DevTensor {
            buf: memory::alloc(st, n * size)?,
            shape: vec![b, rows, t_out],
            dtype: DType::F32,
            half: size == 2,
        };
        let inv = 1.0 / crate::tts::cuda::quant::scale(spec.input_amax.unwrap_or(0.0));
        let mut p = Params::new();
        p.push(n as i64)
            .push(col.ptr())
            .push(x.ptr())
            .push(cin as i64)
            .push(t as i64)
            .push(k as i64)
            .push(t_out as i64)
            .push(spec.stride as i64)
            .push(spec.dilation as i64)
            .push(spec.pad_begin as i64);
        // The "nn" layout's rows are (item, channel, tap): one row kernel block per row part.
        match memory::row_grid(t_out, b * rows).filter(|_| !tn && spec.precision != Precision::I8) {
            Some(g) => p.launch_grid(self.f(&format!("{name}_rows"))?, st, g)?,
            None => {
                p.push(i32::from(tn)).push(inv);
                p.launch_unrolled(self.f(name)?, st, n)?;
            }
        }
        Ok(col)
    }

    /// cuBLAS's type of an activation as stored.
    fn activation_type(t: &DevTensor) -> Dt {
        if t.half {
            Dt::CUDA_R_16F
        } else {
            Dt::CUDA_R_32F
        }
    }

    fn dtype_of(p: Precision) -> Dt {
        match p {
            Precision::F32 => Dt::CUDA_R_32F,
            Precision::F16 => Dt::CUDA_R_16F,
            Precision::I8 => Dt::CUDA_R_8I,
        }
    }

    /// `acc` is `[items][rows][cols]`; row `r` has weight scale `r / rows_per_scale`.
    fn dequant(
        &self,
        step: usize,
        acc: &DevTensor,
        (rows, cols, rows_per_scale): (usize, usize, usize),
        spec: &ConvSpec,
        out: &DevTensor,
    ) -> Result<(), GpuError> {
        let ws = self
            .wscales
            .get(&step)
            .ok_or_else(|| GpuError::Other("INT8 step without weight scales".into()))?;
        let n = out.len();
        let mut p = Params::new();
        p.push(n as i64)
            .push(out.ptr())
            .push(acc.ptr())
            .push(rows as i64)
            .push(cols as i64)
            .push(rows_per_scale as i64)
            .push(ws.ptr())
            .push(crate::tts::cuda::quant::scale(
                spec.input_amax.unwrap_or(0.0),
            ));
        p.launch(self.f("dequant_i32")?, self.stream(), n)
    }

    /// `out_half`: the output is an FP16 activation (then `spec` is FP16: the GEMM writes FP16).
    fn conv(
        &self,
        step: usize,
        (x, out_half): (&DevTensor, bool),
        w: &DevTensor,
        spec: &ConvSpec,
    ) -> Result<DevTensor, GpuError> {
        if x.shape.len() != 3 || w.shape.len() != 3 {
            return Err(GpuError::Other("only 1-D convolutions".into()));
        }
        let (b, cin, t) = (x.shape[0], x.shape[1], x.shape[2]);
        let (cout, cig, k) = (w.shape[0], w.shape[1], w.shape[2]);
        let t_out = linalg::conv_out_len(t, k, spec).map_err(|e| GpuError::Other(e.0))?;
        let st = self.stream();
        let out = memory::empty_f32(st, vec![b, cout, t_out], out_half)?;
        if spec.group != 1 {
            if cig != 1 || spec.group != cin || cout % cin != 0 {
                return Err(GpuError::Other(
                    "grouped convolutions other than depthwise".into(),
                ));
            }
            let mut p = Params::new();
            p.push(out.len() as i64)
                .push(out.ptr())
                .push(x.ptr())
                .push(w.ptr())
                .push(cin as i64)
                .push((cout / cin) as i64)
                .push(t as i64)
                .push(k as i64)
                .push(t_out as i64)
                .push(spec.stride as i64)
                .push(spec.dilation as i64)
                .push(spec.pad_begin as i64);
            p.launch(self.f("dwconv_f32")?, st, out.len())?;
            return Ok(out);
        }
        if cig != cin {
            return Err(GpuError::Other(format!(
                "Conv weights {:?} for input {:?}",
                w.shape, x.shape
            )));
        }
        if let Some(wp) = self
            .mma_weights
            .get(&step)
            .filter(|_| b <= 65_535 && t_out > 0)
        {
            self.conv_mma(wp, x, &out, (cout, k), spec)?;
            return Ok(out);
        }
        let rows = cin * k;
        // A 1x1 convolution reads its input as the GEMM operand when it is stored in the
        // operand's type already (FP32 steps, FP16 steps over FP16 activations).
        let direct = x.half == (spec.precision == Precision::F16)
            && spec.precision != Precision::I8
            && k == 1
            && spec.stride == 1
            && spec.pad_begin == 0
            && spec.pad_end == 0;
        match spec.precision {
            Precision::F32 | Precision::F16 => {
                let col = if direct {
                    None
                } else {
                    Some(self.operand(x, k, t_out, spec, false)?)
                };
                let a = col.as_ref().map_or(x.ptr(), DevTensor::ptr);
                let dt = Self::dtype_of(spec.precision);
                self.gemm(
                    (t_out, cout, rows),
                    (a, dt, t_out, rows * t_out),
                    false,
                    (w.ptr(), dt, rows, 0),
                    (out.ptr(), Self::activation_type(&out), t_out, cout * t_out),
                    b,
                )?;
            }
            Precision::I8 => {
                let col = self.operand(x, k, t_out, spec, true)?;
                let acc = memory::empty(st, DType::F32, vec![b, cout, t_out])?;
                self.gemm(
                    (t_out, cout, rows),
                    (col.ptr(), Dt::CUDA_R_8I, rows, rows * t_out),
                    true,
                    (w.ptr(), Dt::CUDA_R_8I, rows, 0),
                    (acc.ptr(), Dt::CUDA_R_32I, t_out, cout * t_out),
                    b,
                )?;
                self.dequant(step, &acc, (cout, t_out, 1), spec, &out)?;
            }
        }
        Ok(out)
    }

    /// An FP16 convolution on the tensor cores (`kernels::mma`), from the weights packed for it:
    /// no im2col operand.
    fn conv_mma(
        &self,
        packed: &DevTensor,
        x: &DevTensor,
        out: &DevTensor,
        (cout, k): (usize, usize),
        spec: &ConvSpec,
    ) -> Result<(), GpuError> {
        let (b, cin, t) = (x.shape[0], x.shape[1], x.shape[2]);
        let t_out = out.shape[2];
        let tile = mma::tile(cout);
        let grid = (
            t_out.div_ceil(tile.t) as u32,
            cout.div_ceil(tile.co) as u32,
            b as u32,
        );
        let splits = mma::splits(
            (grid.0 * grid.1 * grid.2) as usize,
            cin / mma::SLICE,
            self.sms,
        );
        let st = self.stream();
        // Split: the parts' FP32 partial sums, then one pass that adds them into `out`.
        let parts = (splits > 1)
            .then(|| memory::empty(st, DType::F32, vec![splits * out.len()]))
            .transpose()?;
        let name = match parts {
            Some(_) => mma::split_name(cout, x.half),
            None => mma::name(cout, x.half, out.half),
        };
        let mut p = Params::new();
        p.push(parts.as_ref().unwrap_or(out).ptr())
            .push(x.ptr())
            .push(packed.ptr());
        for v in [
            cout,
            cin,
            t,
            t_out,
            k,
            spec.dilation,
            spec.pad_begin,
            splits,
        ] {
            p.push(i32::try_from(v).map_err(|_| {
                GpuError::Other(format!("{v} exceeds the convolution kernel's 32-bit sizes"))
            })?);
        }
        p.launch_grid(self.f(&name)?, st, (grid.0, grid.1, grid.2 * splits as u32))?;
        if let Some(parts) = parts {
            let mut p = Params::new();
            p.push(out.len() as i64)
                .push(out.ptr())
                .push(parts.ptr())
                .push(splits as i32);
            p.launch(self.f(mma::sum_name(out.half))?, st, out.len())?;
        }
        Ok(())
    }

    /// Reads FP16 activations directly as its FP16 operand; `out_half`: col2im writes FP16.
    fn conv_transpose(
        &self,
        step: usize,
        (x, out_half): (&DevTensor, bool),
        w: &DevTensor,
        spec: &ConvSpec,
    ) -> Result<DevTensor, GpuError> {
        if x.shape.len() != 3 || w.shape.len() != 2 || spec.group != 1 {
            return Err(GpuError::Other("only 1-D ungrouped ConvTranspose".into()));
        }
        let (b, cin, t) = (x.shape[0], x.shape[1], x.shape[2]);
        let (ck, wcin) = (w.shape[0], w.shape[1]);
        let k = spec.kernel.max(1);
        if wcin != cin || ck % k != 0 || t == 0 {
            return Err(GpuError::Other(format!(
                "ConvTranspose weights {:?} for input {:?}",
                w.shape, x.shape
            )));
        }
        let cout = ck / k;
        let full = (t - 1) * spec.stride + spec.dilation * (k - 1) + 1;
        let t_out = full
            .checked_sub(spec.pad_begin + spec.pad_end)
            .ok_or_else(|| GpuError::Other("ConvTranspose pads exceed its output".into()))?;
        let st = self.stream();
        let z = memory::empty(st, DType::F32, vec![b, ck, t])?;
        let unit = ConvSpec {
            stride: 1,
            dilation: 1,
            pad_begin: 0,
            pad_end: 0,
            ..spec.clone()
        };
        match spec.precision {
            Precision::F32 => self.gemm(
                (t, ck, cin),
                (x.ptr(), Dt::CUDA_R_32F, t, cin * t),
                false,
                (w.ptr(), Dt::CUDA_R_32F, cin, 0),
                (z.ptr(), Dt::CUDA_R_32F, t, ck * t),
                b,
            )?,
            Precision::F16 => {
                let cast = if x.half {
                    None
                } else {
                    Some(self.operand(x, 1, t, &unit, false)?)
                };
                let xh = cast.as_ref().unwrap_or(x);
                self.gemm(
                    (t, ck, cin),
                    (xh.ptr(), Dt::CUDA_R_16F, t, cin * t),
                    false,
                    (w.ptr(), Dt::CUDA_R_16F, cin, 0),
                    (z.ptr(), Dt::CUDA_R_32F, t, ck * t),
                    b,
                )?;
            }
            Precision::I8 => {
                let xq = self.operand(x, 1, t, &unit, true)?;
                let acc = memory::empty(st, DType::F32, vec![b, ck, t])?;
                self.gemm(
                    (t, ck, cin),
                    (xq.ptr(), Dt::CUDA_R_8I, cin, cin * t),
                    true,
                    (w.ptr(), Dt::CUDA_R_8I, cin, 0),
                    (acc.ptr(), Dt::CUDA_R_32I, t, ck * t),
                    b,
                )?;
                self.dequant(step, &acc, (ck, t, k), spec, &z)?;
            }
        }
        let out = memory::empty_f32(st, vec![b, cout, t_out], out_half)?;
        let mut p = Params::new();
        p.push(out.len() as i64)
            .push(out.ptr())
            .push(z.ptr())
            .push(cout as i64)
            .push(k as i64)
            .push(t as i64)
            .push(t_out as i64)
            .push(spec.stride as i64)
            .push(spec.dilation as i64)
            .push(spec.pad_begin as i64);
        let name = if out.half { "col2im_f16" } else { "col2im_f32" };
        p.launch_unrolled(self.f(name)?, st, out.len())?;
        Ok(out)
    }
}
