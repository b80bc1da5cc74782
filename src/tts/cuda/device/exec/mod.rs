//! The device executor: runs a plan on the GPU, step by step, on one stream.
//!
//! Input: an engine's plan, its compiled module and a [`Feed`]. Output: the plan's [`Outputs`].
//! Float tensors live on the device; shape arithmetic (int64 tensors derived from shapes) runs on
//! the host with the reference kernels, and values cross over only when an op needs them on the
//! other side (e.g. the frame count that sizes the decoder: one sync per batch, plus the duration
//! predictor's data-dependent `NonZero`s). Convolutions are im2col + cuBLAS GEMMs in the step's
//! precision: FP32; FP16 operands with FP32 accumulation (tensor cores); INT8 operands with INT32
//! accumulation, dequantised per output channel.
//!
//! This file holds the executor (values, host↔device moves, the run loop) and the dispatcher;
//! each op family's device code is in its own file: `elementwise` (fused chains), `movement`
//! (reshapes, views, Concat, Pad), `index` (Gather*, ScatterND), `source` (ConstantOfShape,
//! RandomNormalLike), `reduce` (CumSum, Reduce, Softmax), `linalg` (MatMul, Conv, ConvTranspose,
//! the cuBLAS GEMM), and `graph` (CUDA graphs over the static stretches of a run).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::sys::CUstream;
use cudarc::driver::{CudaFunction, CudaModule};
use rustc_hash::{FxHashMap, FxHashSet};

use super::memory::{self, DevTensor};
use super::{Gpu, GpuError};
use crate::tts::cuda::io::{Feed, Outputs};
use crate::tts::cuda::ops;
use crate::tts::cuda::program::cost::{Work, step_bytes, step_macs, tensor_bytes};
use crate::tts::cuda::program::dnn::dnn_conv;
use crate::tts::cuda::program::op::{ConvPath, Op, Precision, ReduceKind};
use crate::tts::cuda::program::{Plan, Step, ValueId};
use crate::tts::cuda::tensor::{DType, Tensor};

use super::kernels::{kernel_names, mma, module_source};

mod dnn;
mod elementwise;
mod graph;
mod index;
mod linalg;
mod movement;
mod reduce;
mod source;

pub use graph::{GraphMode, GraphStats, frame_bucket, from_env as graphs_from_env, padded_width};

/// The live values of a run, by id.
type Slots = FxHashMap<ValueId, Slot>;

/// What an op family's device step gives: its outputs, or `None` when this case has no device
/// kernel (the step then runs on the host).
type Family = Result<Option<Vec<DevTensor>>, GpuError>;

/// Where a value is: host, device, or both (after a copy, which is kept).
#[derive(Clone)]
enum Slot {
    Host(Tensor),
    Dev(DevTensor),
    Both(Tensor, DevTensor),
}

pub use crate::tts::cuda::reference::{Hook, Hooks};

pub struct DeviceExecutor {
    pub plan: Plan,
    _module: Arc<CudaModule>,
    funcs: FxHashMap<String, CudaFunction>,
    /// Each fused step's kernels, found once: flat, by rows, by rows in vectors.
    fused: FxHashMap<usize, [CudaFunction; 3]>,
    consts: FxHashMap<ValueId, DevTensor>,
    wscales: HashMap<usize, DevTensor>,
    last_use: Vec<usize>,
    seed: u64,
    /// Device→host copies in the last run (each one waits for the stream).
    pub syncs: usize,
    /// When set, every step waits for the GPU and its time is added here under its op kind
    /// (convolutions also by precision): where the time goes, at the price of speed.
    pub profile: Option<HashMap<String, ProfileEntry>>,
    /// Wall seconds spent in [`DeviceExecutor::run`] so far (the bench sets it against a pass's).
    pub run_seconds: f64,
    /// Matrix work of every run so far, counted at the shapes each step saw.
    pub work: Work,
    graphs: graph::Graphs,
    /// Set while a graph is captured: what the segment reads from before its start.
    capture_log: Option<graph::CaptureLog>,
    /// Whether the current step copied between host and device in a way a graph cannot hold
    /// (a download, or an upload of a value that depends on the batch's data).
    moved: bool,
    /// Values of this run that depend on the batch's data (the feed, downloads, and what is
    /// computed from them; a `Shape` is not): uploading one breaks a graph, uploading any other
    /// host value (shape arithmetic) does not.
    tainted: FxHashSet<ValueId>,
    /// Values of this run whose *shape* depends on the batch's data (a `NonZero`, the frames
    /// that follow the predicted durations): a stretch that starts with one live is not worth a
    /// graph (its key would not recur).
    shape_tainted: FxHashSet<ValueId>,
    /// The batch's frame count (the maximum of the per-item frames), which sizes the flow and the
    /// decoder: padded to a [`frame_bucket`] in [`GraphMode::Frames`].
    frame_max: Option<ValueId>,
    /// How the ungrouped FP32/FP16 convolutions run (cuDNN only where the GPU has it loaded).
    conv_path: ConvPath,
    /// cuDNN's algorithm per (step, batch, length) class, chosen at first use.
    dnn_algos: HashMap<dnn::AlgoKey, dnn::Algo>,
    /// Descriptors, algorithm and workspace size per (step, exact input shape).
    dnn_prepared: HashMap<dnn::PreparedKey, dnn::Prepared>,
    /// ConvTranspose weights in the plan's `[in, out, k]` layout for cuDNN (the GEMM path keeps
    /// them transposed); uploaded only where cuDNN is loaded.
    dnn_weights: HashMap<ValueId, DevTensor>,
    /// Weights packed for the tensor-core convolution (`kernels::mma`), by step: the FP16
    /// convolutions it fits, on GPUs with FP16 `mma.sync` (compute capability 8.0 and later).
    mma_weights: HashMap<usize, DevTensor>,
    /// The GPU's multiprocessors: how many blocks fill it (`mma::splits`).
    sms: usize,
    /// Last, so it is dropped last: every buffer and graph above is freed on its stream.
    pub gpu: Gpu,
}

/// One op kind's share of a profiled pass: steps, seconds (synced after each step), and the
/// multiply-accumulates and bytes those steps did, to set against the GPU's bounds.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProfileEntry {
    pub steps: usize,
    pub seconds: f64,
    /// The part of `seconds` the host spent queueing the steps (allocation, argument packing,
    /// library calls) before waiting for the GPU: what a faster kernel cannot win back.
    pub host_seconds: f64,
    pub work: Work,
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

/// The weights of every FP16 convolution the tensor-core kernel fits (ungrouped, stride 1,
/// `kernels::mma::fits`), packed in its order and uploaded as FP16, by step.
fn pack_mma_weights(stream: CUstream, plan: &Plan) -> Result<HashMap<usize, DevTensor>, GpuError> {
    let mut packed = HashMap::new();
    for (i, s) in plan.steps.iter().enumerate() {
        if let (Op::Conv(c), Some(Some(w))) = (&s.op, s.inputs.get(1))
            && c.precision == Precision::F16
            && c.group == 1
            && c.stride == 1
            && let Some(t) = plan.constants.get(w)
            && let [cout, cin, k] = t.shape[..]
            && mma::fits(cin, k, c.dilation)
        {
            let v = t.as_f32().map_err(|e| GpuError::Other(e.0))?;
            let p = mma::pack_weight(v, cout, cin, k);
            packed.insert(
                i,
                memory::upload_half(stream, &Tensor::f32(vec![p.len()], p))?,
            );
        }
    }
    Ok(packed)
}

/// A weight uploaded as-is in its convolution's precision (FP16 as 16-bit values).
fn upload_in(stream: CUstream, w: &Tensor, p: Precision) -> Result<DevTensor, GpuError> {
    if p == Precision::F16 {
        memory::upload_half(stream, w)
    } else {
        memory::upload(stream, w)
    }
}

impl DeviceExecutor {
    /// The plan's shape of a convolution step's weight (Conv `[out, in, k]`, ConvTranspose
    /// `[in, out, k]`), which is a constant.
    fn weight_shape(&self, s: &Step) -> Option<&[usize]> {
        let w = s.inputs.get(1).copied().flatten()?;
        self.plan.constants.get(&w).map(|t| t.shape.as_slice())
    }

    /// Loads the module, uploads the constants (weights in their device form).
    pub fn new(gpu: Gpu, plan: Plan, cubin: Vec<u8>) -> Result<DeviceExecutor, GpuError> {
        let module = gpu
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))?;
        let (_, fused_names) = module_source(&plan);
        let mut funcs = FxHashMap::default();
        for n in kernel_names(&fused_names) {
            if let Entry::Vacant(slot) = funcs.entry(n) {
                let f = module.load_function(slot.key())?;
                slot.insert(f);
            }
        }
        let found = |n: &str| {
            funcs
                .get(n)
                .cloned()
                .ok_or_else(|| GpuError::Other(format!("kernel {n} missing from the engine")))
        };
        let mut fused = FxHashMap::default();
        for (i, name) in &fused_names {
            let kernels = [
                found(name)?,
                found(&format!("{name}_rows"))?,
                found(&format!("{name}_vec"))?,
            ];
            fused.insert(*i, kernels);
        }
        let stream = gpu.stream.cu_stream();
        let mut consts = FxHashMap::default();
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
                    match p {
                        Precision::F32 | Precision::F16 => upload_in(stream, &w, p)?,
                        Precision::I8 => {
                            let v = w.as_f32().map_err(|e| GpuError::Other(e.0))?;
                            let bytes: Vec<u8> = v.iter().map(|x| *x as i8 as u8).collect();
                            DevTensor {
                                buf: memory::upload_bytes(stream, &bytes)?,
                                shape: w.shape.clone(),
                                dtype: DType::F32,
                                half: false,
                            }
                        }
                    }
                }
                None => memory::upload(stream, t)?,
            };
            consts.insert(*id, dev);
        }
        let mma_weights = if gpu.identity.capability.0 >= 8 {
            pack_mma_weights(stream, &plan)?
        } else {
            HashMap::new()
        };
        gpu.sync()?;
        let sms = gpu.ctx.attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )?;
        let last_use = plan.last_uses();
        let graphs = graph::Graphs::new(&plan);
        let frame_max = plan
            .steps
            .iter()
            .find(|s| {
                matches!(
                    s.op,
                    Op::Reduce {
                        kind: ReduceKind::Max,
                        ..
                    }
                ) && s.inputs.first() == Some(&Some(plan.outputs.frames))
            })
            .and_then(|s| s.outputs.first().copied());
        DeviceExecutor {
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
            run_seconds: 0.0,
            work: Work::default(),
            graphs,
            capture_log: None,
            moved: false,
            tainted: FxHashSet::default(),
            shape_tainted: FxHashSet::default(),
            frame_max,
            conv_path: gpu.conv_path(),
            dnn_algos: HashMap::new(),
            dnn_prepared: HashMap::new(),
            dnn_weights: HashMap::new(),
            mma_weights,
            sms: sms.max(1) as usize,
            gpu,
        }
        .with_dnn_weights()
    }

    /// Uploads the ConvTranspose weights in the layout cuDNN reads, where cuDNN is loaded.
    fn with_dnn_weights(mut self) -> Result<DeviceExecutor, GpuError> {
        if self.gpu.dnn.is_some() {
            self.upload_dnn_weights()?;
        }
        Ok(self)
    }

    fn upload_dnn_weights(&mut self) -> Result<(), GpuError> {
        let stream = self.stream();
        for s in &self.plan.steps {
            if let (Op::ConvTranspose(c), Some(Some(w))) = (&s.op, s.inputs.get(1))
                && c.group == 1
                && c.precision != Precision::I8
                && !self.dnn_weights.contains_key(w)
                && let Some(t) = self.plan.constants.get(w)
            {
                self.dnn_weights
                    .insert(*w, upload_in(stream, t, c.precision)?);
            }
        }
        self.gpu.sync()
    }

    /// Switches the convolution path (the bench's A/B), loading cuDNN for `Cudnn` if needed.
    pub fn set_conv_path(&mut self, path: ConvPath) -> Result<(), GpuError> {
        if path == ConvPath::Cudnn && self.gpu.dnn.is_none() {
            self.gpu.load_dnn()?;
            self.upload_dnn_weights()?;
        }
        if path != self.conv_path {
            self.conv_path = path;
            self.graphs.clear();
        }
        Ok(())
    }

    pub fn conv_path(&self) -> ConvPath {
        self.conv_path
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
    fn host(&mut self, slots: &mut Slots, v: ValueId) -> Result<Tensor, GpuError> {
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
                if self.graphs.mode == GraphMode::Frames && Some(v) == self.frame_max {
                    // The frame axis padded to its bucket (masked by the per-item frames, like a
                    // shorter item in a batch): a value that recurs, not data.
                    let padded = Tensor::i64(
                        t.shape.clone(),
                        t.ints()
                            .map_err(|e| GpuError::Other(e.0))?
                            .into_iter()
                            .map(frame_bucket)
                            .collect(),
                    );
                    slots.insert(v, Slot::Host(padded.clone()));
                    return Ok(padded);
                }
                self.tainted.insert(v);
                slots.insert(v, Slot::Both(t.clone(), d));
                Ok(t)
            }
        }
    }

    /// The value on the device (copying it up if it only lives on the host).
    fn dev(&mut self, slots: &mut Slots, v: ValueId) -> Result<DevTensor, GpuError> {
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
                let half = self.plan.values[v].half;
                let data_dependent = self.tainted.contains(&v) || half;
                let t = t.clone();
                let stream = self.stream();
                let d = match (self.capture_log.as_mut(), data_dependent) {
                    (Some(_), true) => return Err(GpuError::CaptureBreak),
                    // Shape arithmetic: the same at every replay of this graph (a value from
                    // before the segment is checked at each replay, like any host read).
                    (Some(log), false) => {
                        log.read_host(v, &t);
                        let d = memory::upload_sync(stream, &t)?;
                        log.keep(&d);
                        d
                    }
                    (None, _) => {
                        self.moved |= data_dependent;
                        if half {
                            memory::upload_half(stream, &t)?
                        } else {
                            memory::upload(stream, &t)?
                        }
                    }
                };
                slots.insert(v, Slot::Both(t, d.clone()));
                Ok(d)
            }
        }
    }

    /// A live value's shape, wherever it is.
    fn shape_ref<'a>(&'a self, slots: &'a Slots, v: ValueId) -> Option<&'a [usize]> {
        match (slots.get(&v), self.consts.get(&v)) {
            (Some(s), _) => Some(slot_shape(s)),
            (None, Some(d)) => Some(&d.shape),
            (None, None) => self.plan.constants.get(&v).map(|t| t.shape.as_slice()),
        }
    }

    fn on_device(&self, slots: &Slots, v: ValueId) -> bool {
        !self.plan.constants.contains_key(&v)
            && matches!(slots.get(&v), Some(Slot::Dev(_) | Slot::Both(..)))
    }

    /// Sets what CUDA graphs do in later runs (captured graphs are kept).
    pub fn set_graphs(&mut self, mode: GraphMode) {
        self.graphs.mode = mode;
    }

    pub fn graphs_on(&self) -> bool {
        self.graphs.on()
    }

    pub fn graph_stats(&self) -> GraphStats {
        self.graphs.stats
    }

    pub fn run(&mut self, feed: &Feed, mut hooks: Hooks<'_>) -> Result<Outputs, GpuError> {
        let started = Instant::now();
        let steps = std::mem::take(&mut self.plan.steps);
        let out = self.run_steps(&steps, feed, &mut hooks);
        self.plan.steps = steps;
        self.run_seconds += started.elapsed().as_secs_f64();
        out
    }

    fn run_steps(
        &mut self,
        steps: &[Step],
        feed: &Feed,
        hooks: &mut Hooks<'_>,
    ) -> Result<Outputs, GpuError> {
        self.syncs = 0;
        let mut slots = Slots::default();
        let inputs = self.plan.inputs;
        self.tainted.clear();
        self.shape_tainted.clear();
        if self.graphs.on() {
            self.tainted
                .extend([inputs.ids, inputs.lengths, inputs.scales]);
            self.tainted.extend(inputs.speaker);
        }
        slots.insert(inputs.ids, Slot::Host(feed.ids.clone()));
        slots.insert(inputs.lengths, Slot::Host(feed.lengths.clone()));
        slots.insert(inputs.scales, Slot::Host(feed.scales.clone()));
        if let Some(s) = inputs.speaker {
            slots.insert(s, Slot::Host(feed.speaker.clone()));
        }
        let mut rng = fastrand::Rng::with_seed(self.seed);
        // Graphs replace the stretches whose shapes follow from the feed's alone; tracing and
        // profiling need every step, so they run eagerly.
        let graphs = self.graphs.on()
            && self.profile.is_none()
            && hooks.conv_input.is_none()
            && hooks.step_output.is_none();
        if graphs {
            self.graphs.begin_run();
        }
        let mut i = 0;
        while i < steps.len() {
            if graphs
                && let Some(end) = self.graphs.segment(i)
                && !slots.keys().any(|v| self.shape_tainted.contains(v))
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

    /// Follows which of the step's outputs depend on the batch's data, in value or in shape
    /// (what graphs need; skipped when they are off).
    fn track_taint(&mut self, step: &Step) {
        let data: Vec<bool> = step
            .inputs
            .iter()
            .map(|v| v.is_some_and(|v| self.tainted.contains(&v)))
            .collect();
        let shape: Vec<bool> = step
            .inputs
            .iter()
            .map(|v| v.is_some_and(|v| self.shape_tainted.contains(&v)))
            .collect();
        // A shape's content is data-dependent exactly when the shape is.
        let tainted = match step.op {
            Op::Shape => shape.first() == Some(&true),
            _ => data.contains(&true),
        };
        if tainted {
            self.tainted.extend(step.outputs.iter().copied());
        }
        if graph::shape_taint(&step.op, &shape, &data) {
            self.shape_tainted.extend(step.outputs.iter().copied());
        }
    }

    /// Runs one step now (or into the graph being captured), frees what it used last and
    /// learns whether it moves data between host and device.
    fn step_eager(
        &mut self,
        i: usize,
        step: &Step,
        slots: &mut Slots,
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
        let outs = self.step(i, step, slots, rng)?;
        // Counted after the step, from shapes borrowed where the inputs still live (they are
        // freed below): nothing is copied on this per-step path.
        let size = |v: Option<ValueId>| {
            v.map_or(4, |v| match &self.plan.values[v] {
                x if x.half => 2,
                x => x.dtype.size(),
            })
        };
        let ins: Vec<Option<(&[usize], usize)>> = step
            .inputs
            .iter()
            .map(|v| {
                v.and_then(|id| self.shape_ref(slots, id))
                    .map(|s| (s, size(*v)))
            })
            .collect();
        let out_shapes: Vec<(&[usize], usize)> = outs
            .iter()
            .zip(&step.outputs)
            .map(|(o, v)| (slot_shape(o), size(Some(*v))))
            .collect();
        let macs = out_shapes.first().map_or(0, |(o, _)| {
            let ins: Vec<Option<&[usize]>> = ins.iter().map(|i| i.map(|(s, _)| s)).collect();
            step_macs(&step.op, &ins, o)
        });
        // FP16 activations (2-byte values in or out) keep a convolution off cuDNN; the others
        // that cuDNN maps run there when it is the path.
        let on_dnn = matches!(step.op, Op::Conv(_) | Op::ConvTranspose(_))
            && self.conv_path == ConvPath::Cudnn
            && out_shapes.first().is_some_and(|&(_, size)| size == 4)
            && ins.first().copied().flatten().is_some_and(|(x, size)| {
                size == 4
                    && self
                        .weight_shape(step)
                        .is_some_and(|w| dnn_conv(&step.op, x, w).is_some())
            });
        let mma = !on_dnn && self.mma_weights.contains_key(&i);
        let bytes = if mma {
            tensor_bytes(&ins, &out_shapes)
        } else {
            step_bytes(&step.op, &ins, &out_shapes, self.conv_path)
        };
        let key = started.map(|_| match &step.op {
            Op::Conv(c) | Op::ConvTranspose(c) => format!(
                "{} {:?} {}",
                step.op.name(),
                c.precision,
                match (on_dnn, mma) {
                    (true, _) => "cudnn",
                    (false, true) => "mma",
                    (false, false) => "gemm",
                }
            ),
            op => op.name().to_owned(),
        });
        self.work.macs += macs;
        self.work.bytes += bytes;
        if let (Some(t), Some(key)) = (started, key) {
            let queued = t.elapsed().as_secs_f64();
            self.gpu.sync()?;
            if let Some(p) = self.profile.as_mut() {
                let e = p.entry(key).or_default();
                e.steps += 1;
                e.seconds += t.elapsed().as_secs_f64();
                e.host_seconds += queued;
                e.work.macs += macs;
                e.work.bytes += bytes;
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
        if self.graphs.on() {
            self.track_taint(step);
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
        slots: &mut Slots,
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

    fn in_dev(&mut self, slots: &mut Slots, s: &Step, k: usize) -> Result<DevTensor, GpuError> {
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
        slots: &mut Slots,
        s: &Step,
        k: usize,
    ) -> Result<Option<Tensor>, GpuError> {
        match s.inputs.get(k).copied().flatten() {
            Some(v) => Ok(Some(self.host(slots, v)?)),
            None => Ok(None),
        }
    }

    fn ints(&mut self, slots: &mut Slots, s: &Step, k: usize) -> Result<Vec<i64>, GpuError> {
        self.opt_ints(slots, s, k)?
            .ok_or_else(|| GpuError::Other(format!("{} needs input {k}", s.op.name())))
    }

    /// An optional integer input (axes, steps, sizes), on the host.
    fn opt_ints(
        &mut self,
        slots: &mut Slots,
        s: &Step,
        k: usize,
    ) -> Result<Option<Vec<i64>>, GpuError> {
        self.in_host(slots, s, k)?
            .map(|t| t.ints().map_err(|e| GpuError::Other(e.0)))
            .transpose()
    }

    /// Runs a step on the device, by op family; `None` when this case has no device kernel (the
    /// host runs it).
    fn device_step(
        &mut self,
        i: usize,
        s: &Step,
        slots: &mut Slots,
    ) -> Result<Option<Vec<DevTensor>>, GpuError> {
        match &s.op {
            Op::Fused(_) => self.fused_step(i, s, slots),
            Op::Identity
            | Op::Reshape { .. }
            | Op::Unsqueeze
            | Op::Squeeze
            | Op::Transpose { .. }
            | Op::Slice
            | Op::Split { .. }
            | Op::Expand
            | Op::Concat { .. }
            | Op::Pad => self.movement_step(i, s, slots),
            Op::Gather { .. } | Op::GatherElements { .. } | Op::GatherND { .. } | Op::ScatterND => {
                self.index_step(i, s, slots)
            }
            Op::ConstantOfShape(_) | Op::RandomNormalLike { .. } => self.source_step(i, s, slots),
            Op::CumSum { .. } | Op::Reduce { .. } | Op::Softmax { .. } => {
                self.reduce_step(i, s, slots)
            }
            Op::MatMul | Op::Conv(_) | Op::ConvTranspose(_) => self.linalg_step(i, s, slots),
            _ => Ok(None),
        }
    }
}
