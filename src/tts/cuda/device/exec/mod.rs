//! The device executor: runs a plan on the GPU, step by step, on one stream.
//!
//! Input: an engine's plan, its compiled module and a [`Feed`]. Output: the plan's [`Outputs`].
//! Float tensors live on the device; shape arithmetic (int64 tensors derived from shapes) runs on
//! the host with the reference kernels, and values cross over only when an op needs them on the
//! other side (e.g. the frame count that sizes the decoder: one sync per batch, plus the duration
//! predictor's data-dependent `NonZero`s). Convolutions are im2col + cuBLAS GEMMs in the step's
//! precision: FP32; FP16 operands with FP32 accumulation (tensor cores); INT8 operands with INT32
//! accumulation, dequantised per output channel.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

use cudarc::cublas::sys::{
    cublasComputeType_t as Compute, cublasGemmAlgo_t, cublasOperation_t as OpT,
    cudaDataType_t as Dt,
};
use cudarc::driver::sys::CUstream;
use cudarc::driver::{CudaFunction, CudaModule};
use half::f16;

use super::memory::{self, DevTensor, Params, dims, strides};
use super::{Gpu, GpuError};
use crate::tts::cuda::io::{Feed, Outputs};
use crate::tts::cuda::ops::{self, broadcast, linalg, movement};
use crate::tts::cuda::program::cost::{Work, step_macs};
use crate::tts::cuda::program::op::{ConvSpec, Op, Precision, ReduceKind};
use crate::tts::cuda::program::{Plan, Step, ValueId};
use crate::tts::cuda::tensor::{DType, Data, Tensor, numel};

use super::kernels::{module_source, type_suffix};

mod graph;

pub use graph::{GraphStats, from_env as graphs_from_env, padded_width};

/// Where a value is: host, device, or both (after a copy, which is kept).
#[derive(Clone)]
enum Slot {
    Host(Tensor),
    Dev(DevTensor),
    Both(Tensor, DevTensor),
}

pub use crate::tts::cuda::reference::{Hook, Hooks};

pub struct DeviceExecutor {
    pub gpu: Gpu,
    pub plan: Plan,
    _module: Arc<CudaModule>,
    funcs: HashMap<String, CudaFunction>,
    fused: HashMap<usize, String>,
    consts: HashMap<ValueId, DevTensor>,
    wscales: HashMap<usize, DevTensor>,
    last_use: Vec<usize>,
    seed: u64,
    /// Device→host copies in the last run (each one waits for the stream).
    pub syncs: usize,
    /// When set, every step waits for the GPU and its time is added here under its op kind
    /// (convolutions also by precision): where the time goes, at the price of speed.
    pub profile: Option<HashMap<String, (usize, f64)>>,
    /// Matrix work of every run so far, counted at the shapes each step saw.
    pub work: Work,
    graphs: graph::Graphs,
    /// Set while a graph is captured: what the segment reads from before its start.
    capture_log: Option<graph::CaptureLog>,
    /// Whether the current step copied between host and device.
    moved: bool,
}

fn step_err(i: usize, s: &Step, msg: impl Into<String>) -> GpuError {
    GpuError::Step {
        index: i,
        op: s.op.name(),
        name: s.name.clone(),
        msg: msg.into(),
    }
}

fn slot_shape(s: &Slot) -> &[usize] {
    match s {
        Slot::Dev(d) => &d.shape,
        Slot::Host(t) | Slot::Both(t, _) => &t.shape,
    }
}

/// ConvTranspose weights `[in, out·k]` → `[out·k, in]`, the GEMM's B operand.
fn transpose_weight(w: &Tensor) -> Tensor {
    let (cin, rest) = (w.shape[0], w.shape[1] * w.shape[2]);
    let v = w.as_f32().unwrap_or(&[]);
    let mut t = vec![0.0f32; v.len()];
    for i in 0..cin {
        for j in 0..rest {
            t[j * cin + i] = v[i * rest + j];
        }
    }
    Tensor::f32(vec![rest, cin], t)
}

impl DeviceExecutor {
    /// Loads the module, uploads the constants (weights in their device form).
    pub fn new(gpu: Gpu, plan: Plan, cubin: Vec<u8>) -> Result<DeviceExecutor, GpuError> {
        let module = gpu
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))?;
        let (_, fused) = module_source(&plan);
        let mut funcs = HashMap::new();
        let mut names: Vec<String> = fused.values().cloned().collect();
        for base in [
            "view",
            "place",
            "pad",
            "fill",
            "gather",
            "gather_elements",
            "gather_nd",
            "scatter_nd",
        ] {
            for t in [DType::F32, DType::I64, DType::Bool] {
                names.push(format!("{base}_{}", type_suffix(t)));
            }
        }
        for n in [
            "cumsum_f32",
            "cumsum_i64",
            "reduce_f32",
            "reduce_i64",
            "softmax_f32",
            "im2col_f32",
            "im2col_f16",
            "im2col_i8",
            "col2im_f32",
            "dequant_i32",
            "dwconv_f32",
            "randn_f32",
        ] {
            names.push(n.to_owned());
        }
        for n in names {
            if let Entry::Vacant(slot) = funcs.entry(n) {
                let f = module.load_function(slot.key())?;
                slot.insert(f);
            }
        }
        let stream = gpu.stream.cu_stream();
        let mut consts = HashMap::new();
        let mut wscales = HashMap::new();
        let mut weight_of: HashMap<ValueId, (Precision, bool)> = HashMap::new();
        for (i, s) in plan.steps.iter().enumerate() {
            if let (Op::Conv(c) | Op::ConvTranspose(c), Some(Some(w))) = (&s.op, s.inputs.get(1)) {
                let transposed = matches!(s.op, Op::ConvTranspose(_));
                weight_of.insert(
                    *w,
                    (
                        if c.group == 1 {
                            c.precision
                        } else {
                            Precision::F32
                        },
                        transposed,
                    ),
                );
                if let Some(sc) = &c.weight_scales {
                    wscales.insert(
                        i,
                        memory::upload(stream, &Tensor::f32(vec![sc.len()], sc.clone()))?,
                    );
                }
            }
        }
        for (id, t) in &plan.constants {
            let dev = match weight_of.get(id) {
                Some(&(p, transposed)) => {
                    let w = if transposed {
                        transpose_weight(t)
                    } else {
                        t.clone()
                    };
                    let v = w.as_f32().map_err(|e| GpuError::Other(e.0))?;
                    let (bytes, dtype): (Vec<u8>, DType) = match p {
                        Precision::F32 => (memory::host_bytes(&w), DType::F32),
                        Precision::F16 => (
                            v.iter()
                                .flat_map(|x| f16::from_f32(*x).to_bits().to_le_bytes())
                                .collect(),
                            DType::F32,
                        ),
                        Precision::I8 => (v.iter().map(|x| *x as i8 as u8).collect(), DType::F32),
                    };
                    DevTensor {
                        buf: memory::upload_bytes(stream, &bytes)?,
                        shape: w.shape.clone(),
                        dtype,
                    }
                }
                None => memory::upload(stream, t)?,
            };
            consts.insert(*id, dev);
        }
        gpu.sync()?;
        let last_use = plan.last_uses();
        let graphs = graph::Graphs::new(&plan);
        Ok(DeviceExecutor {
            gpu,
            plan,
            _module: module,
            funcs,
            fused,
            consts,
            wscales,
            last_use,
            seed: 0x7a1c,
            syncs: 0,
            profile: None,
            work: Work::default(),
            graphs,
            capture_log: None,
            moved: false,
        })
    }

    fn stream(&self) -> CUstream {
        self.gpu.stream.cu_stream()
    }

    fn f(&self, name: &str) -> Result<&CudaFunction, GpuError> {
        self.funcs
            .get(name)
            .ok_or_else(|| GpuError::Other(format!("kernel {name} missing from the engine")))
    }

    /// The value on the host (copying it down if it only lives on the device).
    fn host(&mut self, slots: &mut HashMap<ValueId, Slot>, v: ValueId) -> Result<Tensor, GpuError> {
        if let Some(t) = self.plan.constants.get(&v) {
            return Ok(t.clone());
        }
        let slot = slots
            .get(&v)
            .ok_or_else(|| GpuError::Other(format!("value {v} not computed")))?;
        match slot {
            Slot::Host(t) | Slot::Both(t, _) => {
                if let Some(log) = self.capture_log.as_mut() {
                    log.read_host(v, t);
                }
                Ok(t.clone())
            }
            Slot::Dev(d) => {
                if self.capture_log.is_some() {
                    return Err(GpuError::CaptureBreak);
                }
                let d = d.clone();
                let t = memory::download(self.stream(), &d)?;
                self.syncs += 1;
                self.moved = true;
                slots.insert(v, Slot::Both(t.clone(), d));
                Ok(t)
            }
        }
    }

    /// The value on the device (copying it up if it only lives on the host).
    fn dev(
        &mut self,
        slots: &mut HashMap<ValueId, Slot>,
        v: ValueId,
    ) -> Result<DevTensor, GpuError> {
        if let Some(d) = self.consts.get(&v) {
            return Ok(d.clone());
        }
        let slot = slots
            .get(&v)
            .ok_or_else(|| GpuError::Other(format!("value {v} not computed")))?;
        match slot {
            Slot::Dev(d) | Slot::Both(_, d) => {
                if let Some(log) = self.capture_log.as_mut() {
                    log.read_dev(v);
                }
                Ok(d.clone())
            }
            Slot::Host(t) => {
                if self.capture_log.is_some() {
                    return Err(GpuError::CaptureBreak);
                }
                let t = t.clone();
                let d = memory::upload(self.stream(), &t)?;
                self.moved = true;
                slots.insert(v, Slot::Both(t, d.clone()));
                Ok(d)
            }
        }
    }

    /// A live value's shape, wherever it is.
    fn shape_of(&self, slots: &HashMap<ValueId, Slot>, v: ValueId) -> Option<Vec<usize>> {
        match (slots.get(&v), self.consts.get(&v)) {
            (Some(s), _) => Some(slot_shape(s).to_vec()),
            (None, Some(d)) => Some(d.shape.clone()),
            (None, None) => self.plan.constants.get(&v).map(|t| t.shape.clone()),
        }
    }

    fn on_device(&self, slots: &HashMap<ValueId, Slot>, v: ValueId) -> bool {
        !self.plan.constants.contains_key(&v)
            && matches!(slots.get(&v), Some(Slot::Dev(_) | Slot::Both(..)))
    }

    /// Turns CUDA graphs on or off for later runs (captured graphs are kept).
    pub fn set_graphs(&mut self, on: bool) {
        self.graphs.on = on;
    }

    pub fn graphs_on(&self) -> bool {
        self.graphs.on
    }

    pub fn graph_stats(&self) -> GraphStats {
        self.graphs.stats
    }

    pub fn run(&mut self, feed: &Feed, mut hooks: Hooks<'_>) -> Result<Outputs, GpuError> {
        let steps = std::mem::take(&mut self.plan.steps);
        let out = self.run_steps(&steps, feed, &mut hooks);
        self.plan.steps = steps;
        out
    }

    fn run_steps(
        &mut self,
        steps: &[Step],
        feed: &Feed,
        hooks: &mut Hooks<'_>,
    ) -> Result<Outputs, GpuError> {
        self.syncs = 0;
        let mut slots: HashMap<ValueId, Slot> = HashMap::new();
        let inputs = self.plan.inputs;
        slots.insert(inputs.ids, Slot::Host(feed.ids.clone()));
        slots.insert(inputs.lengths, Slot::Host(feed.lengths.clone()));
        slots.insert(inputs.scales, Slot::Host(feed.scales.clone()));
        if let Some(s) = inputs.speaker {
            slots.insert(s, Slot::Host(feed.speaker.clone()));
        }
        let mut rng = fastrand::Rng::with_seed(self.seed);
        // Graphs replace the static stretches before the first device→host copy; tracing and
        // profiling need every step, so they run eagerly.
        let graphs = self.graphs.on
            && self.profile.is_none()
            && hooks.conv_input.is_none()
            && hooks.step_output.is_none();
        let mut i = 0;
        while i < steps.len() {
            if graphs
                && self.syncs == 0
                && let Some(end) = self.graphs.segment(i)
                && self.run_segment(steps, (i, end), &mut slots, &mut rng)?
            {
                i = end;
                continue;
            }
            self.step_eager(i, &steps[i], &mut slots, &mut rng, Some(hooks))?;
            if graphs {
                self.graphs.stats.eager_steps += 1;
            }
            i += 1;
        }
        let o = self.plan.outputs;
        let audio = self.host(&mut slots, o.audio)?;
        let durations = self.host(&mut slots, o.durations)?;
        let frames = self.host(&mut slots, o.frames)?;
        self.seed = self.seed.wrapping_add(1);
        Ok(Outputs {
            audio,
            durations,
            frames,
        })
    }

    /// Runs one step now (or into the graph being captured), frees what it used last and
    /// learns whether it moves data between host and device.
    fn step_eager(
        &mut self,
        i: usize,
        step: &Step,
        slots: &mut HashMap<ValueId, Slot>,
        rng: &mut fastrand::Rng,
        hooks: Option<&mut Hooks<'_>>,
    ) -> Result<(), GpuError> {
        self.moved = false;
        let mut hooks = hooks;
        if let (Some(h), Op::Conv(_) | Op::ConvTranspose(_), Some(Some(x))) = (
            hooks.as_mut().and_then(|h| h.conv_input.as_mut()),
            &step.op,
            step.inputs.first(),
        ) {
            let t = self.host(slots, *x)?;
            h(i, &t);
        }
        let started = self.profile.is_some().then(Instant::now);
        let shapes: Vec<Option<Vec<usize>>> = match step.op {
            Op::Conv(_) | Op::ConvTranspose(_) | Op::MatMul => step
                .inputs
                .iter()
                .map(|v| v.and_then(|v| self.shape_of(slots, v)))
                .collect(),
            _ => Vec::new(),
        };
        let outs = self.step(i, step, slots, rng)?;
        if let Some(o) = outs.first().filter(|_| !shapes.is_empty()) {
            let ins: Vec<Option<&[usize]>> = shapes.iter().map(Option::as_deref).collect();
            self.work.macs += step_macs(&step.op, &ins, slot_shape(o));
        }
        if let (Some(t), Some(_)) = (started, self.profile.as_ref()) {
            self.gpu.sync()?;
            let key = match &step.op {
                Op::Conv(c) | Op::ConvTranspose(c) => {
                    format!("{} {:?}", step.op.name(), c.precision)
                }
                op => op.name().to_owned(),
            };
            if let Some(p) = self.profile.as_mut() {
                let e = p.entry(key).or_default();
                e.0 += 1;
                e.1 += t.elapsed().as_secs_f64();
            }
        }
        for v in step.inputs.iter().flatten() {
            if self.last_use[*v] == i {
                slots.remove(v);
            }
        }
        for (id, s) in step.outputs.iter().zip(outs) {
            slots.insert(*id, s);
        }
        if let Some(h) = hooks.and_then(|h| h.step_output.as_mut()) {
            for o in &step.outputs {
                let t = self.host(slots, *o)?;
                h(i, &t);
            }
        }
        if self.moved {
            self.graphs.mark_boundary(i);
        }
        Ok(())
    }

    fn step(
        &mut self,
        i: usize,
        s: &Step,
        slots: &mut HashMap<ValueId, Slot>,
        rng: &mut fastrand::Rng,
    ) -> Result<Vec<Slot>, GpuError> {
        let out_dtype = s.outputs.first().map(|&o| self.plan.values[o].dtype);
        let data_on_device = s.inputs.iter().flatten().any(|&v| self.on_device(slots, v));
        let capable = !matches!(s.op, Op::Shape | Op::NonZero | Op::Range);
        if capable
            && (out_dtype == Some(DType::F32) || data_on_device)
            && let Some(outs) = self.device_step(i, s, slots)?
        {
            return Ok(outs.into_iter().map(Slot::Dev).collect());
        }
        if let (Op::Shape, Some(Some(x))) = (&s.op, s.inputs.first()) {
            let shape = match slots.get(x) {
                Some(Slot::Dev(d)) => d.shape.clone(),
                Some(Slot::Host(t) | Slot::Both(t, _)) => t.shape.clone(),
                None => self
                    .plan
                    .constants
                    .get(x)
                    .map(|t| t.shape.clone())
                    .unwrap_or_default(),
            };
            return Ok(vec![Slot::Host(Tensor::i64(
                vec![shape.len()],
                shape.iter().map(|&d| d as i64).collect(),
            ))]);
        }
        let mut ins = Vec::with_capacity(s.inputs.len());
        for v in &s.inputs {
            ins.push(match v {
                Some(v) => Some(self.host(slots, *v)?),
                None => None,
            });
        }
        let refs: Vec<Option<&Tensor>> = ins.iter().map(Option::as_ref).collect();
        let outs = ops::run(&s.op, &refs, rng).map_err(|e| step_err(i, s, e.0))?;
        Ok(outs.into_iter().map(Slot::Host).collect())
    }

    fn in_dev(
        &mut self,
        slots: &mut HashMap<ValueId, Slot>,
        s: &Step,
        k: usize,
    ) -> Result<DevTensor, GpuError> {
        let v = s
            .inputs
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| GpuError::Other(format!("{} needs input {k}", s.op.name())))?;
        self.dev(slots, v)
    }

    fn in_host(
        &mut self,
        slots: &mut HashMap<ValueId, Slot>,
        s: &Step,
        k: usize,
    ) -> Result<Option<Tensor>, GpuError> {
        match s.inputs.get(k).copied().flatten() {
            Some(v) => Ok(Some(self.host(slots, v)?)),
            None => Ok(None),
        }
    }

    fn ints(
        &mut self,
        slots: &mut HashMap<ValueId, Slot>,
        s: &Step,
        k: usize,
    ) -> Result<Vec<i64>, GpuError> {
        let t = self
            .in_host(slots, s, k)?
            .ok_or_else(|| GpuError::Other(format!("{} needs input {k}", s.op.name())))?;
        t.ints().map_err(|e| GpuError::Other(e.0))
    }

    /// Runs a step on the device; `None` when this case has no device kernel (the host runs it).
    fn device_step(
        &mut self,
        i: usize,
        s: &Step,
        slots: &mut HashMap<ValueId, Slot>,
    ) -> Result<Option<Vec<DevTensor>>, GpuError> {
        let e = |m: crate::tts::cuda::tensor::OpError| step_err(i, s, m.0);
        let st = self.stream();
        Ok(Some(match &s.op {
            Op::Fused(_) => {
                let mut ins = Vec::new();
                for k in 0..s.inputs.len() {
                    ins.push(self.in_dev(slots, s, k)?);
                }
                let shapes: Vec<&[usize]> = ins.iter().map(|t| t.shape.as_slice()).collect();
                let shape = broadcast::broadcast_shape(&shapes).map_err(e)?;
                let dtype = self.plan.values[s.outputs[0]].dtype;
                let out = memory::empty(st, dtype, shape.clone())?;
                let mut p = Params::new();
                p.push(numel(&shape) as i64)
                    .push(dims(&shape)?)
                    .push(out.ptr());
                for t in &ins {
                    let bs: Vec<isize> = broadcast::broadcast_strides(&t.shape, &shape)
                        .iter()
                        .map(|&v| v as isize)
                        .collect();
                    p.push(t.ptr())
                        .push(strides(&bs))
                        .push(i32::from(t.shape == shape));
                }
                let name = self
                    .fused
                    .get(&i)
                    .cloned()
                    .ok_or_else(|| step_err(i, s, "no kernel"))?;
                p.launch(self.f(&name)?, st, numel(&shape))?;
                vec![out]
            }
            Op::Identity => vec![self.in_dev(slots, s, 0)?],
            Op::Reshape { allow_zero } => {
                let x = self.in_dev(slots, s, 0)?;
                let spec = self.ints(slots, s, 1)?;
                let shape = movement::reshape_target(&x.shape, &spec, *allow_zero).map_err(e)?;
                vec![x.reshaped(shape)]
            }
            Op::Unsqueeze => {
                let x = self.in_dev(slots, s, 0)?;
                let axes = self.ints(slots, s, 1)?;
                vec![x.reshaped(movement::unsqueeze_shape(&x.shape, &axes).map_err(e)?)]
            }
            Op::Squeeze => {
                let x = self.in_dev(slots, s, 0)?;
                let axes = self
                    .in_host(slots, s, 1)?
                    .map(|t| t.ints())
                    .transpose()
                    .map_err(e)?;
                vec![x.reshaped(movement::squeeze_shape(&x.shape, axes.as_deref()).map_err(e)?)]
            }
            Op::Transpose { perm } => {
                let x = self.in_dev(slots, s, 0)?;
                let st_in = crate::tts::cuda::tensor::strides(&x.shape);
                if perm.len() != x.shape.len() {
                    return Err(step_err(i, s, "perm rank"));
                }
                let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
                let vs: Vec<isize> = perm.iter().map(|&p| st_in[p] as isize).collect();
                vec![self.view(&x, shape, 0, &vs)?]
            }
            Op::Slice => {
                let x = self.in_dev(slots, s, 0)?;
                let (starts, ends) = (self.ints(slots, s, 1)?, self.ints(slots, s, 2)?);
                let axes = self
                    .in_host(slots, s, 3)?
                    .map(|t| t.ints())
                    .transpose()
                    .map_err(e)?;
                let steps = self
                    .in_host(slots, s, 4)?
                    .map(|t| t.ints())
                    .transpose()
                    .map_err(e)?;
                let (shape, off, vs) = movement::slice_view(
                    &x.shape,
                    &starts,
                    &ends,
                    axes.as_deref(),
                    steps.as_deref(),
                )
                .map_err(e)?;
                vec![self.view(&x, shape, off, &vs)?]
            }
            Op::Split { axis, outputs } => {
                let x = self.in_dev(slots, s, 0)?;
                let sizes = self
                    .in_host(slots, s, 1)?
                    .map(|t| t.ints())
                    .transpose()
                    .map_err(e)?;
                let a = crate::tts::cuda::tensor::axis(*axis, x.shape.len()).map_err(e)?;
                let dim = x.shape[a];
                let sizes: Vec<usize> = match sizes {
                    Some(v) => v.iter().map(|&n| n.max(0) as usize).collect(),
                    None => {
                        let part = dim.div_ceil((*outputs).max(1));
                        (0..*outputs)
                            .map(|k| part.min(dim.saturating_sub(k * part)))
                            .collect()
                    }
                };
                if sizes.iter().sum::<usize>() != dim {
                    return Err(step_err(i, s, "split sizes"));
                }
                let stv: Vec<isize> = crate::tts::cuda::tensor::strides(&x.shape)
                    .iter()
                    .map(|&v| v as isize)
                    .collect();
                let mut at = 0;
                let mut outs = Vec::new();
                for n in sizes {
                    let mut shape = x.shape.clone();
                    shape[a] = n;
                    outs.push(self.view(&x, shape, at as isize * stv[a], &stv)?);
                    at += n;
                }
                outs
            }
            Op::Expand => {
                let x = self.in_dev(slots, s, 0)?;
                let target: Vec<usize> = self
                    .ints(slots, s, 1)?
                    .iter()
                    .map(|&d| d.max(0) as usize)
                    .collect();
                let shape = broadcast::broadcast_shape(&[&x.shape, &target]).map_err(e)?;
                let bs: Vec<isize> = broadcast::broadcast_strides(&x.shape, &shape)
                    .iter()
                    .map(|&v| v as isize)
                    .collect();
                vec![self.view(&x, shape, 0, &bs)?]
            }
            Op::Concat { axis } => {
                let mut ins = Vec::new();
                for k in 0..s.inputs.len() {
                    ins.push(self.in_dev(slots, s, k)?);
                }
                let first = ins.first().ok_or_else(|| step_err(i, s, "no inputs"))?;
                let a = crate::tts::cuda::tensor::axis(*axis, first.shape.len()).map_err(e)?;
                let mut shape = first.shape.clone();
                shape[a] = ins.iter().map(|t| t.shape[a]).sum();
                let out = memory::empty(st, first.dtype, shape.clone())?;
                let ost: Vec<isize> = crate::tts::cuda::tensor::strides(&shape)
                    .iter()
                    .map(|&v| v as isize)
                    .collect();
                let f = self
                    .f(&format!("place_{}", type_suffix(first.dtype)))?
                    .clone();
                let mut at = 0isize;
                for t in &ins {
                    let mut p = Params::new();
                    p.push(t.len() as i64)
                        .push(dims(&t.shape)?)
                        .push(out.ptr())
                        .push((at * ost[a]) as i64)
                        .push(strides(&ost))
                        .push(t.ptr());
                    p.launch(&f, st, t.len())?;
                    at += t.shape[a] as isize;
                }
                vec![out]
            }
            Op::Pad => {
                let x = self.in_dev(slots, s, 0)?;
                let pads = self.ints(slots, s, 1)?;
                let fill = self
                    .in_host(slots, s, 2)?
                    .map(|t| t.scalar())
                    .transpose()
                    .map_err(e)?
                    .unwrap_or(0.0);
                let r = x.shape.len();
                if pads.len() != 2 * r {
                    return Err(step_err(i, s, "pads"));
                }
                let shape: Vec<usize> = (0..r)
                    .map(|d| (x.shape[d] as i64 + pads[d] + pads[r + d]).max(0) as usize)
                    .collect();
                let out = memory::empty(st, x.dtype, shape.clone())?;
                let mut lo = dims(&x.shape)?;
                lo.d[..r].copy_from_slice(&pads[..r]);
                let mut p = Params::new();
                p.push(numel(&shape) as i64)
                    .push(dims(&shape)?)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(dims(&x.shape)?)
                    .push(lo);
                match x.dtype {
                    DType::F32 => p.push(fill as f32),
                    DType::I64 => p.push(fill as i64),
                    DType::Bool => p.push(u8::from(fill != 0.0)),
                };
                p.launch(
                    self.f(&format!("pad_{}", type_suffix(x.dtype)))?,
                    st,
                    numel(&shape),
                )?;
                vec![out]
            }
            Op::ConstantOfShape(v) => {
                let shape: Vec<usize> = self
                    .ints(slots, s, 0)?
                    .iter()
                    .map(|&d| d.max(0) as usize)
                    .collect();
                let t = crate::tts::cuda::ops::elementwise::scalar_tensor(*v);
                let out = memory::empty(st, t.dtype(), shape.clone())?;
                let mut p = Params::new();
                p.push(numel(&shape) as i64).push(out.ptr());
                match &t.data {
                    Data::F32(v) => p.push(v[0]),
                    Data::I64(v) => p.push(v[0]),
                    Data::Bool(v) => p.push(u8::from(v[0])),
                };
                p.launch(
                    self.f(&format!("fill_{}", type_suffix(t.dtype())))?,
                    st,
                    numel(&shape),
                )?;
                vec![out]
            }
            Op::Gather { axis } => {
                let x = self.in_dev(slots, s, 0)?;
                let idx = self.in_dev(slots, s, 1)?;
                let a = crate::tts::cuda::tensor::axis(*axis, x.shape.len()).map_err(e)?;
                let mut shape = x.shape[..a].to_vec();
                shape.extend_from_slice(&idx.shape);
                shape.extend_from_slice(&x.shape[a + 1..]);
                let inner: usize = x.shape[a + 1..].iter().product();
                let out = memory::empty(st, x.dtype, shape.clone())?;
                let mut p = Params::new();
                p.push(numel(&shape) as i64)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(idx.ptr())
                    .push(idx.len() as i64)
                    .push(x.shape[a] as i64)
                    .push(inner.max(1) as i64);
                p.launch(
                    self.f(&format!("gather_{}", type_suffix(x.dtype)))?,
                    st,
                    numel(&shape),
                )?;
                vec![out]
            }
            Op::GatherElements { axis } => {
                let x = self.in_dev(slots, s, 0)?;
                let idx = self.in_dev(slots, s, 1)?;
                let a = crate::tts::cuda::tensor::axis(*axis, x.shape.len()).map_err(e)?;
                let ds: Vec<isize> = crate::tts::cuda::tensor::strides(&x.shape)
                    .iter()
                    .map(|&v| v as isize)
                    .collect();
                let out = memory::empty(st, x.dtype, idx.shape.clone())?;
                let mut p = Params::new();
                p.push(idx.len() as i64)
                    .push(dims(&idx.shape)?)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(strides(&ds))
                    .push(idx.ptr())
                    .push(a as i32)
                    .push(x.shape[a] as i64);
                p.launch(
                    self.f(&format!("gather_elements_{}", type_suffix(x.dtype)))?,
                    st,
                    idx.len(),
                )?;
                vec![out]
            }
            Op::GatherND { batch_dims: 0 } | Op::ScatterND => {
                let x = self.in_dev(slots, s, 0)?;
                let idx = self.in_dev(slots, s, 1)?;
                let q = idx.shape.len();
                let k = *idx
                    .shape
                    .last()
                    .ok_or_else(|| step_err(i, s, "scalar indices"))?;
                if q == 0 || k > x.shape.len() {
                    return Err(step_err(i, s, "indices"));
                }
                let slice: usize = x.shape[k..].iter().product();
                let tuples: usize = idx.shape[..q - 1].iter().product();
                let ds: Vec<isize> = crate::tts::cuda::tensor::strides(&x.shape)
                    .iter()
                    .map(|&v| v as isize)
                    .collect();
                let sfx = type_suffix(x.dtype);
                if matches!(s.op, Op::ScatterND) {
                    let upd = self.in_dev(slots, s, 2)?;
                    if upd.len() != tuples * slice {
                        return Err(step_err(i, s, "updates"));
                    }
                    let dense: Vec<isize> = ds.clone();
                    let out = self.view(&x, x.shape.clone(), 0, &dense)?;
                    let mut p = Params::new();
                    p.push((tuples * slice) as i64)
                        .push(out.ptr())
                        .push(idx.ptr())
                        .push(k as i32)
                        .push(slice.max(1) as i64)
                        .push(dims(&x.shape)?)
                        .push(strides(&ds))
                        .push(upd.ptr());
                    p.launch(self.f(&format!("scatter_nd_{sfx}"))?, st, tuples * slice)?;
                    vec![out]
                } else {
                    let mut shape = idx.shape[..q - 1].to_vec();
                    shape.extend_from_slice(&x.shape[k..]);
                    let out = memory::empty(st, x.dtype, shape)?;
                    let mut p = Params::new();
                    p.push((tuples * slice) as i64)
                        .push(out.ptr())
                        .push(x.ptr())
                        .push(idx.ptr())
                        .push(k as i32)
                        .push(slice.max(1) as i64)
                        .push(dims(&x.shape)?)
                        .push(strides(&ds));
                    p.launch(self.f(&format!("gather_nd_{sfx}"))?, st, tuples * slice)?;
                    vec![out]
                }
            }
            Op::CumSum { exclusive, reverse } => {
                let x = self.in_dev(slots, s, 0)?;
                if x.dtype == DType::Bool {
                    return Ok(None);
                }
                let axis = self
                    .in_host(slots, s, 1)?
                    .ok_or_else(|| step_err(i, s, "axis"))?
                    .scalar()
                    .map_err(e)? as i64;
                let a = crate::tts::cuda::tensor::axis(axis, x.shape.len()).map_err(e)?;
                let inner: usize = x.shape[a + 1..].iter().product();
                let outer: usize = x.shape[..a].iter().product();
                let out = memory::empty(st, x.dtype, x.shape.clone())?;
                let mut p = Params::new();
                p.push((outer * inner) as i64)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(x.shape[a] as i64)
                    .push(inner.max(1) as i64)
                    .push(i32::from(*exclusive))
                    .push(i32::from(*reverse));
                p.launch(
                    self.f(&format!("cumsum_{}", type_suffix(x.dtype)))?,
                    st,
                    outer * inner,
                )?;
                vec![out]
            }
            Op::Reduce {
                kind,
                axes,
                keep_dims,
            } => {
                let x = self.in_dev(slots, s, 0)?;
                if x.dtype == DType::Bool {
                    return Ok(None);
                }
                let axes = match axes {
                    Some(a) => a.clone(),
                    None => self
                        .in_host(slots, s, 1)?
                        .map(|t| t.ints())
                        .transpose()
                        .map_err(e)?
                        .unwrap_or_default(),
                };
                let r = x.shape.len();
                let mut ax: Vec<usize> = if axes.is_empty() {
                    (0..r).collect()
                } else {
                    axes.iter()
                        .map(|&a| crate::tts::cuda::tensor::axis(a, r))
                        .collect::<Result<_, _>>()
                        .map_err(e)?
                };
                ax.sort_unstable();
                ax.dedup();
                let contiguous = ax.windows(2).all(|w| w[1] == w[0] + 1);
                if !contiguous || ax.is_empty() {
                    return Ok(None);
                }
                let (a0, a1) = (ax[0], ax[ax.len() - 1]);
                let outer: usize = x.shape[..a0].iter().product();
                let dim: usize = x.shape[a0..=a1].iter().product();
                let inner: usize = x.shape[a1 + 1..].iter().product();
                let shape: Vec<usize> = (0..r)
                    .filter_map(|d| {
                        if ax.contains(&d) {
                            keep_dims.then_some(1)
                        } else {
                            Some(x.shape[d])
                        }
                    })
                    .collect();
                let out = memory::empty(st, x.dtype, shape)?;
                let k = match kind {
                    ReduceKind::Mean => 0,
                    ReduceKind::Sum => 1,
                    ReduceKind::Max => 2,
                };
                let mut p = Params::new();
                p.push((outer * inner) as i64)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(dim as i64)
                    .push(inner.max(1) as i64)
                    .push(k);
                p.launch(
                    self.f(&format!("reduce_{}", type_suffix(x.dtype)))?,
                    st,
                    outer * inner,
                )?;
                vec![out]
            }
            Op::Softmax { axis } => {
                let x = self.in_dev(slots, s, 0)?;
                let a = crate::tts::cuda::tensor::axis(*axis, x.shape.len()).map_err(e)?;
                let inner: usize = x.shape[a + 1..].iter().product();
                let outer: usize = x.shape[..a].iter().product();
                let out = memory::empty(st, DType::F32, x.shape.clone())?;
                let mut p = Params::new();
                p.push((outer * inner) as i64)
                    .push(out.ptr())
                    .push(x.ptr())
                    .push(x.shape[a] as i64)
                    .push(inner.max(1) as i64);
                p.launch(self.f("softmax_f32")?, st, outer * inner)?;
                vec![out]
            }
            Op::MatMul => {
                let a = self.in_dev(slots, s, 0)?;
                let b = self.in_dev(slots, s, 1)?;
                vec![
                    self.matmul(&a, &b)
                        .map_err(|m| step_err(i, s, m.to_string()))?,
                ]
            }
            Op::Conv(spec) => {
                let x = self.in_dev(slots, s, 0)?;
                let w = self.in_dev(slots, s, 1)?;
                vec![
                    self.conv(i, &x, &w, spec)
                        .map_err(|m| step_err(i, s, m.to_string()))?,
                ]
            }
            Op::ConvTranspose(spec) => {
                let x = self.in_dev(slots, s, 0)?;
                let w = self.in_dev(slots, s, 1)?;
                vec![
                    self.conv_transpose(i, &x, &w, spec)
                        .map_err(|m| step_err(i, s, m.to_string()))?,
                ]
            }
            Op::RandomNormalLike { mean, scale } => {
                let shape = match s
                    .inputs
                    .first()
                    .copied()
                    .flatten()
                    .and_then(|v| slots.get(&v))
                {
                    Some(Slot::Dev(d) | Slot::Both(_, d)) => d.shape.clone(),
                    Some(Slot::Host(t)) => t.shape.clone(),
                    None => return Err(step_err(i, s, "input")),
                };
                let out = memory::empty(st, DType::F32, shape.clone())?;
                self.seed = self
                    .seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let mut p = Params::new();
                p.push(numel(&shape) as i64)
                    .push(out.ptr())
                    .push(self.seed)
                    .push(*mean)
                    .push(*scale);
                p.launch(self.f("randn_f32")?, st, numel(&shape))?;
                vec![out]
            }
            _ => return Ok(None),
        }))
    }

    /// A dense copy of the strided view `off + Σ c·vs` of `x`.
    fn view(
        &self,
        x: &DevTensor,
        shape: Vec<usize>,
        off: isize,
        vs: &[isize],
    ) -> Result<DevTensor, GpuError> {
        let st = self.stream();
        let out = memory::empty(st, x.dtype, shape.clone())?;
        let mut p = Params::new();
        p.push(numel(&shape) as i64)
            .push(dims(&shape)?)
            .push(out.ptr())
            .push(x.ptr())
            .push(off as i64)
            .push(strides(vs));
        p.launch(
            self.f(&format!("view_{}", type_suffix(x.dtype)))?,
            st,
            numel(&shape),
        )?;
        Ok(out)
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

    /// The GEMM operand of a convolution input: im2col (or a cast) in the step's precision.
    #[allow(clippy::too_many_arguments)]
    fn operand(
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
        let (name, size) = match spec.precision {
            Precision::F32 => ("im2col_f32", 4),
            Precision::F16 => ("im2col_f16", 2),
            Precision::I8 => ("im2col_i8", 1),
        };
        let st = self.stream();
        let col = DevTensor {
            buf: memory::alloc(st, n * size)?,
            shape: vec![b, rows, t_out],
            dtype: DType::F32,
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
            .push(spec.pad_begin as i64)
            .push(i32::from(tn))
            .push(inv);
        p.launch(self.f(name)?, st, n)?;
        Ok(col)
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

    fn conv(
        &self,
        step: usize,
        x: &DevTensor,
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
        let out = memory::empty(st, DType::F32, vec![b, cout, t_out])?;
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
        let rows = cin * k;
        let direct = spec.precision == Precision::F32
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
                    (out.ptr(), Dt::CUDA_R_32F, t_out, cout * t_out),
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

    fn conv_transpose(
        &self,
        step: usize,
        x: &DevTensor,
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
                let xh = self.operand(x, 1, t, &unit, false)?;
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
        let out = memory::empty(st, DType::F32, vec![b, cout, t_out])?;
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
        p.launch(self.f("col2im_f32")?, st, out.len())?;
        Ok(out)
    }
}
