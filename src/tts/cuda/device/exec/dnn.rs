//! Convolutions through cuDNN (the library PyTorch's eager convolutions come from): Conv as a
//! forward convolution, ConvTranspose as the backward-data pass of the convolution it transposes,
//! both as NCHW with H = 1 (`program::dnn` maps the shapes). FP16 steps cast their input to FP16,
//! run with FP16 data and FP32 compute on tensor cores, and widen the FP16 output back to the
//! FP32 the next step reads; FP32 steps run FP32 with FMA maths only (no TF32), so the duration
//! path rounds as it does on the GEMM path. Steps that read or write FP16 activations (an FP16
//! engine's decoder) stay on the GEMM path.
//!
//! The algorithm is cuDNN's heuristic first choice (no timed search: a timed search at every new
//! shape is what made ONNX Runtime's EXHAUSTIVE mode take 38 s to warm), chosen once per step and
//! shape class (batch and length rounded up to powers of two) and kept for the executor's life;
//! descriptors and workspace size are kept per exact shape, so a repeated shape costs one cuDNN
//! call (measured on the H200: 0.47 → 0.30 ms a call at batch 1; the rest is cuDNN's own).
//! Everything runs on the executor's stream, workspaces come from its stream-ordered pool, so a
//! CUDA graph captures the convolutions like any other step. cuDNN's fused bias + activation
//! (`cudnnConvolutionBiasActivationForward`) offers ReLU but not the LeakyReLU these voices use,
//! so bias and activation stay in the fused elementwise kernels.

use std::ffi::c_void;

use cudarc::cudnn::result as dnn;
use cudarc::cudnn::sys::{
    cudnnConvolutionBwdDataAlgo_t as BwdAlgo, cudnnConvolutionFwdAlgo_t as FwdAlgo,
    cudnnConvolutionMode_t, cudnnDataType_t as DnnType, cudnnHandle_t, cudnnMathType_t,
    cudnnStatus_t, cudnnTensorFormat_t,
};

use super::DeviceExecutor;
use crate::tts::cuda::device::GpuError;
use crate::tts::cuda::device::memory::{self, DevTensor, Params};
use crate::tts::cuda::program::dnn::DnnConv;
use crate::tts::cuda::program::op::{ConvSpec, Precision};
use crate::tts::cuda::tensor::DType;

/// The most workspace one convolution may ask for (larger algorithms are passed over).
const MAX_WORKSPACE: usize = 256 << 20;

/// Chosen algorithms (and prepared calls) kept per executor; past this a cache is cleared (shapes
/// follow the predicted durations, so a long-lived renderer must not grow it without bound).
const MAX_ALGOS: usize = 8192;

/// A chosen algorithm: forward (Conv) or backward data (ConvTranspose).
#[derive(Debug, Clone, Copy)]
pub(super) enum Algo {
    Fwd(FwdAlgo),
    Bwd(BwdAlgo),
}

/// The cache key: step, batch and length rounded up to powers of two.
pub(super) type AlgoKey = (usize, usize, usize);

/// Tensor, filter and convolution descriptors of one call, destroyed on drop.
struct Descriptors {
    x: cudarc::cudnn::sys::cudnnTensorDescriptor_t,
    w: cudarc::cudnn::sys::cudnnFilterDescriptor_t,
    y: cudarc::cudnn::sys::cudnnTensorDescriptor_t,
    conv: cudarc::cudnn::sys::cudnnConvolutionDescriptor_t,
}

fn dims(d: [usize; 4]) -> Result<[i32; 4], GpuError> {
    let mut out = [0i32; 4];
    for (o, v) in out.iter_mut().zip(d) {
        *o = i32::try_from(v)
            .map_err(|_| GpuError::Other(format!("a dimension of {d:?} exceeds cuDNN's i32")))?;
    }
    Ok(out)
}

impl Descriptors {
    fn new(m: &DnnConv, p: Precision) -> Result<Descriptors, GpuError> {
        let (data, math) = match p {
            Precision::F16 => (
                DnnType::CUDNN_DATA_HALF,
                cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
            ),
            _ => (DnnType::CUDNN_DATA_FLOAT, cudnnMathType_t::CUDNN_FMA_MATH),
        };
        let nchw = cudnnTensorFormat_t::CUDNN_TENSOR_NCHW;
        let d = Descriptors {
            x: dnn::create_tensor_descriptor()?,
            w: dnn::create_filter_descriptor()?,
            y: dnn::create_tensor_descriptor()?,
            conv: dnn::create_convolution_descriptor()?,
        };
        let int = |v: usize| i32::try_from(v).map_err(|_| GpuError::Other("conv geometry".into()));
        // SAFETY: the descriptors were just created and are destroyed only by `drop`.
        unsafe {
            dnn::set_tensor4d_descriptor(d.x, nchw, data, dims(m.x)?)?;
            dnn::set_filter4d_descriptor(d.w, data, nchw, dims(m.w)?)?;
            dnn::set_tensor4d_descriptor(d.y, nchw, data, dims(m.y)?)?;
            dnn::set_convolution2d_descriptor(
                d.conv,
                0,
                int(m.pad)?,
                1,
                int(m.stride)?,
                1,
                int(m.dilation)?,
                cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                DnnType::CUDNN_DATA_FLOAT,
            )?;
            dnn::set_convolution_math_type(d.conv, math)?;
        }
        Ok(d)
    }

    /// cuDNN's heuristic choices for this call, best first, that succeed within the workspace
    /// limit; the first is taken.
    fn choose(&self, h: cudnnHandle_t, transposed: bool) -> Result<Algo, GpuError> {
        const N: usize = 8;
        let mut count = 0;
        let none = || GpuError::Other("cuDNN offers no algorithm for this convolution".into());
        // SAFETY: the handle and descriptors are live; the result arrays hold N entries.
        unsafe {
            if transposed {
                let mut perf = [std::mem::zeroed::<
                    cudarc::cudnn::sys::cudnnConvolutionBwdDataAlgoPerf_t,
                >(); N];
                dnn::get_convolution_backward_data_algorithm(
                    h,
                    self.w,
                    self.x,
                    self.conv,
                    self.y,
                    N as i32,
                    &mut count,
                    perf.as_mut_ptr(),
                )?;
                perf[..count.max(0) as usize]
                    .iter()
                    .find(|p| {
                        p.status == cudnnStatus_t::CUDNN_STATUS_SUCCESS && p.memory <= MAX_WORKSPACE
                    })
                    .map(|p| Algo::Bwd(p.algo))
                    .ok_or_else(none)
            } else {
                let mut perf =
                    [std::mem::zeroed::<cudarc::cudnn::sys::cudnnConvolutionFwdAlgoPerf_t>(); N];
                dnn::get_convolution_forward_algorithm(
                    h,
                    self.x,
                    self.w,
                    self.conv,
                    self.y,
                    N as i32,
                    &mut count,
                    perf.as_mut_ptr(),
                )?;
                perf[..count.max(0) as usize]
                    .iter()
                    .find(|p| {
                        p.status == cudnnStatus_t::CUDNN_STATUS_SUCCESS && p.memory <= MAX_WORKSPACE
                    })
                    .map(|p| Algo::Fwd(p.algo))
                    .ok_or_else(none)
            }
        }
    }
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once here.
        unsafe {
            let _ = dnn::destroy_tensor_descriptor(self.x);
            let _ = dnn::destroy_filter_descriptor(self.w);
            let _ = dnn::destroy_tensor_descriptor(self.y);
            let _ = dnn::destroy_convolution_descriptor(self.conv);
        }
    }
}

/// What one step at one exact input shape needs at every call: its descriptors, algorithm and
/// workspace size, so a repeated shape makes one cuDNN call.
pub(super) struct Prepared {
    d: Descriptors,
    algo: Algo,
    ws_bytes: usize,
}

/// The prepared-call key: step and its input's dims.
pub(super) type PreparedKey = (usize, [usize; 4]);

impl DeviceExecutor {
    /// Descriptors, algorithm (cuDNN's heuristic choice, kept per shape class) and workspace size
    /// of `step` at the shape `m`.
    fn prepare(
        &mut self,
        h: cudnnHandle_t,
        step: usize,
        m: &DnnConv,
        p: Precision,
    ) -> Result<Prepared, GpuError> {
        let d = Descriptors::new(m, p)?;
        let key = (
            step,
            m.x[0].next_power_of_two(),
            m.x[3].max(m.y[3]).next_power_of_two(),
        );
        let algo = match self.dnn_algos.get(&key) {
            Some(a) => *a,
            None => {
                let a = d.choose(h, m.transposed)?;
                if self.dnn_algos.len() >= MAX_ALGOS {
                    self.dnn_algos.clear();
                }
                self.dnn_algos.insert(key, a);
                a
            }
        };
        // SAFETY: live handle and descriptors.
        let ws_bytes = unsafe {
            match algo {
                Algo::Fwd(a) => {
                    dnn::get_convolution_forward_workspace_size(h, d.x, d.w, d.conv, d.y, a)?
                }
                Algo::Bwd(a) => {
                    dnn::get_convolution_backward_data_workspace_size(h, d.w, d.x, d.conv, d.y, a)?
                }
            }
        };
        Ok(Prepared { d, algo, ws_bytes })
    }

    /// Runs a Conv (forward) or ConvTranspose (backward data) through cuDNN; `w` is the weight in
    /// the plan's layout, stored in the step's precision.
    pub(super) fn conv_dnn(
        &mut self,
        step: usize,
        x: &DevTensor,
        w: &DevTensor,
        spec: &ConvSpec,
        m: &DnnConv,
    ) -> Result<DevTensor, GpuError> {
        let h = self
            .gpu
            .dnn
            .ok_or_else(|| GpuError::Other("cuDNN is not loaded".into()))?;
        let st = self.stream();
        if !self.dnn_prepared.contains_key(&(step, m.x)) {
            let p = self.prepare(h, step, m, spec.precision)?;
            if self.dnn_prepared.len() >= MAX_ALGOS {
                self.dnn_prepared.clear();
            }
            self.dnn_prepared.insert((step, m.x), p);
        }
        let p = &self.dnn_prepared[&(step, m.x)];
        let (d, algo, ws_bytes) = (&p.d, p.algo, p.ws_bytes);
        let ws = memory::alloc(st, ws_bytes)?;
        let half = spec.precision == Precision::F16;
        let xin = if half {
            let unit = ConvSpec {
                stride: 1,
                dilation: 1,
                pad_begin: 0,
                pad_end: 0,
                ..spec.clone()
            };
            Some(self.operand(x, 1, m.x[3], &unit, false)?)
        } else {
            None
        };
        let xp = xin.as_ref().map_or(x.ptr(), DevTensor::ptr);
        let out_shape = vec![m.y[0], m.y[1], m.y[3]];
        let out = memory::empty(st, DType::F32, out_shape.clone())?;
        let y16 = if half {
            Some(DevTensor {
                buf: memory::alloc(st, out.len() * 2)?,
                shape: out_shape,
                dtype: DType::F32,
                half: true,
            })
        } else {
            None
        };
        let yp = y16.as_ref().map_or(out.ptr(), DevTensor::ptr);
        let (one, zero) = (1.0f32, 0.0f32);
        let (alpha, beta): (*const c_void, *const c_void) =
            ((&one as *const f32).cast(), (&zero as *const f32).cast());
        // SAFETY: every pointer addresses a device buffer sized for the descriptors' dims in the
        // descriptors' data type (FP16 buffers hold 2 bytes an element); the workspace is the
        // size cuDNN asked for; alpha and beta are FP32 as cuDNN wants for FP16 and FP32 data.
        unsafe {
            match algo {
                Algo::Fwd(a) => dnn::convolution_forward(
                    h,
                    alpha,
                    d.x,
                    xp as *const c_void,
                    d.w,
                    w.ptr() as *const c_void,
                    d.conv,
                    a,
                    ws.ptr as *mut c_void,
                    ws_bytes,
                    beta,
                    d.y,
                    yp as *mut c_void,
                )?,
                Algo::Bwd(a) => dnn::convolution_backward_data(
                    h,
                    alpha,
                    d.w,
                    w.ptr() as *const c_void,
                    d.x,
                    xp as *const c_void,
                    d.conv,
                    a,
                    ws.ptr as *mut c_void,
                    ws_bytes,
                    beta,
                    d.y,
                    yp as *mut c_void,
                )?,
            }
        }
        if let Some(y16) = &y16 {
            let mut p = Params::new();
            p.push(out.len() as i64).push(out.ptr()).push(y16.ptr());
            p.launch(self.f("half_to_f32")?, st, out.len())?;
        }
        Ok(out)
    }
}
