//! CUDA graphs over the static stretches of a run, so small batches stop paying one kernel
//! launch per step (`TALKER_CUDA_GRAPHS=1`, `talker engine bench|validate --graphs`).
//!
//! A run is an interpreter over the program: some steps move data between host and device in a
//! way a graph cannot hold — a download (the duration predictor's `NonZero`s, the frame count that
//! sizes the decoder) or the upload of a value that depends on the batch's data (the feed, or
//! what is computed from it or from a download) — or draw noise, and those always run eagerly
//! ("boundaries", learned from the runs themselves). Uploads of shape arithmetic (host values
//! computed from shapes and constants only) stay inside a graph: while capturing they are copied
//! outside any stream into memory the graph record keeps, since they are the same at every
//! replay (a capture runs in relaxed mode for that). A
//! *segment* is a stretch of at least [`MIN_STEPS`] steps between boundaries that starts with no
//! live value whose shape depends on the data (a `NonZero`'s, or the frames that follow the
//! predicted durations; see [`shape_taint`]): its shapes follow from the batch's (bucket-padded)
//! input shape alone, so it recurs for every batch of the same bucket and size. The first time a
//! segment is met with a given key it is captured into a graph (and launched); later it is
//! replayed.
//!
//! Correctness rests on the key and on stable addresses:
//! - the key is the segment's start and every live value's place (host/device/both), shape and
//!   type; the host values the segment read during capture are stored and must be equal at a
//!   replay (a segment whose host reads vary per batch, e.g. the lengths, gives up after
//!   [`MAX_VARIANTS`] and stays eager);
//! - every device value live at the segment's start is copied into a buffer the record owns
//!   before capture, and at a replay the current values are copied into those buffers first;
//! - buffers allocated inside the capture are the graph's (fixed addresses, reallocated on each
//!   launch: instantiated with auto-free-on-launch); the segment's outputs are handed out as
//!   borrowed views of them, valid until the same graph's next launch (a later run; everything
//!   is on one stream);
//! - a host↔device copy attempted while capturing aborts the capture: the segment's state is
//!   restored, the step becomes a boundary and the segment runs eagerly.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::rc::Rc;

use cudarc::driver::CudaGraph;
use cudarc::driver::sys::{CUdeviceptr, CUgraphInstantiate_flags, CUstreamCaptureMode};
use serde::Serialize;

use super::{DeviceExecutor, Slot, Slots};
use crate::tts::cuda::device::GpuError;
use crate::tts::cuda::device::memory::{self, Capturing, DevBuf, DevTensor, Owner};
use crate::tts::cuda::program::cost::Work;
use crate::tts::cuda::program::op::Op;
use crate::tts::cuda::program::{Plan, Step, ValueId};
use crate::tts::cuda::tensor::Tensor;

/// Shorter stretches are not worth a graph.
const MIN_STEPS: usize = 8;
/// Host-read variants kept per key before the segment is left eager.
const MAX_VARIANTS: usize = 4;
/// Graphs kept per executor; past it the least recently used one (not used by the current run,
/// whose values may live in its memory) is dropped.
const MAX_GRAPHS: usize = 256;

/// What CUDA graphs do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphMode {
    /// One launch per step.
    #[default]
    Off,
    /// Graphs over the stretches whose shapes follow from the (bucket-padded) feed.
    On,
    /// Also the frame axis padded to [`frame_bucket`]s, so the flow and decoder, whose shapes
    /// follow the predicted durations, recur per (frame bucket, batch size) too.
    Frames,
}

/// `TALKER_CUDA_GRAPHS`: `1`/`on`, `frames`, or `0`/`off` (the default).
fn parse_switch(value: Option<&str>) -> Result<GraphMode, String> {
    match value.map(str::trim) {
        None | Some("" | "0" | "off" | "false") => Ok(GraphMode::Off),
        Some("1" | "on" | "true") => Ok(GraphMode::On),
        Some("frames") => Ok(GraphMode::Frames),
        Some(other) => Err(format!(
            "TALKER_CUDA_GRAPHS={other:?} is not a switch; set it to 1 (CUDA graphs on), frames (also \
             pad the frame axis) or 0 (off)"
        )),
    }
}

/// The switch as the environment sets it.
pub fn from_env() -> Result<GraphMode, String> {
    parse_switch(std::env::var("TALKER_CUDA_GRAPHS").ok().as_deref())
}

/// The frame count a batch's frame axis is padded to in [`GraphMode::Frames`]: `t` rounded up to
/// a multiple of an eighth of its power of two (at most 12.5% more frames; at least 32).
pub fn frame_bucket(t: i64) -> i64 {
    memory::round_up_by_eighths(t.max(32) as usize) as i64
}

/// What the graphs did, over the executor's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GraphStats {
    pub captured: usize,
    pub replayed: usize,
    /// Captures given up (a step moved data); the segment then ran eagerly.
    pub aborted: usize,
    /// Segments left eager because their host reads differ from batch to batch.
    pub variable: usize,
    /// Graphs dropped to stay within [`MAX_GRAPHS`].
    pub evicted: usize,
    /// Steps run through graphs (captured or replayed) and eagerly.
    pub graph_steps: usize,
    pub eager_steps: usize,
}

/// One captured segment.
struct Captured {
    graph: Option<CudaGraph>,
    start: usize,
    end: usize,
    /// Host values from before the segment that it read, as they were.
    host_reads: Vec<(ValueId, Tensor)>,
    /// Device values from before the segment that it reads, and the buffers the graph reads them
    /// from.
    dev_inputs: Vec<(ValueId, DevTensor)>,
    /// Values from before the segment that die in it.
    dead: Vec<ValueId>,
    /// Values the segment leaves live, as a replay installs them, and which of them depend on
    /// the batch's data.
    outputs: Vec<(ValueId, Slot)>,
    tainted: Vec<ValueId>,
    shape_tainted: Vec<ValueId>,
    /// Graph allocations handed out (freed when the record goes) and buffers the graph may read.
    escaping: Vec<(CUdeviceptr, cudarc::driver::sys::CUstream)>,
    _keep: Vec<Rc<DevBuf>>,
    work: Work,
    /// The run that last launched it.
    used: u64,
}

impl Drop for Captured {
    fn drop(&mut self) {
        if let Some(g) = self.graph.take() {
            let stream = self.escaping.first().map(|e| e.1);
            drop(g);
            for &(ptr, s) in &self.escaping {
                // SAFETY: a graph allocation left unfreed by its last launch; the graph is gone,
                // so nothing frees it again.
                let _ = unsafe { cudarc::driver::result::free_async(ptr, s) };
            }
            if let Some(s) = stream {
                // SAFETY: waits for the frees queued above.
                let _ = unsafe { cudarc::driver::result::stream::synchronize(s) };
            }
        }
    }
}

/// What a capture in progress has seen.
pub(super) struct CaptureLog {
    start: HashSet<ValueId>,
    host_reads: Vec<(ValueId, Tensor)>,
    dev_reads: Vec<ValueId>,
    /// Buffers uploaded outside the stream during the capture: the graph reads them at every
    /// replay, whatever becomes of the values that first held them.
    uploads: Vec<Rc<DevBuf>>,
}

impl CaptureLog {
    pub(super) fn keep(&mut self, d: &DevTensor) {
        self.uploads.push(Rc::clone(&d.buf));
    }

    pub(super) fn read_host(&mut self, v: ValueId, t: &Tensor) {
        if self.start.contains(&v) && !self.host_reads.iter().any(|(id, _)| *id == v) {
            self.host_reads.push((v, t.clone()));
        }
    }

    pub(super) fn read_dev(&mut self, v: ValueId) {
        if self.start.contains(&v) && !self.dev_reads.contains(&v) {
            self.dev_reads.push(v);
        }
    }
}

/// The executor's graph state.
pub(super) struct Graphs {
    pub(super) mode: GraphMode,
    /// Steps that moved data or draw noise: always eager.
    boundary: Vec<bool>,
    cache: HashMap<u64, Vec<Captured>>,
    variable: HashSet<u64>,
    /// Counts runs, to know which graphs the current one uses.
    run: u64,
    pub(super) stats: GraphStats,
}

impl Graphs {
    pub(super) fn new(plan: &Plan) -> Graphs {
        Graphs {
            mode: GraphMode::Off,
            boundary: plan
                .steps
                .iter()
                .map(|s| matches!(s.op, Op::RandomNormalLike { .. }))
                .collect(),
            cache: HashMap::new(),
            variable: HashSet::new(),
            run: 0,
            stats: GraphStats::default(),
        }
    }

    /// Drops every captured graph (their kernels no longer match, e.g. after a conv path switch).
    pub(super) fn clear(&mut self) {
        self.cache.clear();
        self.variable.clear();
    }

    pub(super) fn begin_run(&mut self) {
        self.run += 1;
    }

    /// Drops the least recently used graph that the current run has not launched.
    fn evict(&mut self) {
        let total: usize = self.cache.values().map(Vec::len).sum();
        if total <= MAX_GRAPHS {
            return;
        }
        let oldest = self
            .cache
            .iter()
            .flat_map(|(k, recs)| recs.iter().enumerate().map(move |(i, r)| (r.used, *k, i)))
            .filter(|&(used, _, _)| used < self.run)
            .min();
        if let Some((_, key, i)) = oldest
            && let Some(recs) = self.cache.get_mut(&key)
        {
            recs.remove(i);
            if recs.is_empty() {
                self.cache.remove(&key);
            }
            self.stats.evicted += 1;
        }
    }

    pub(super) fn on(&self) -> bool {
        self.mode != GraphMode::Off
    }

    pub(super) fn mark_boundary(&mut self, step: usize) {
        if let Some(b) = self.boundary.get_mut(step) {
            *b = true;
        }
    }

    /// The segment starting at `i`, as `i..end`, if `i` starts one long enough.
    pub(super) fn segment(&self, i: usize) -> Option<usize> {
        segment_at(&self.boundary, i)
    }
}

/// Whether a step's outputs have data-dependent shapes, given which inputs do (`shape`) and which
/// inputs hold data-dependent values (`data`): a `NonZero` always; an op that reads shape
/// parameters from inputs when one of those is data-dependent; otherwise when an input's shape is.
/// Conservative for ops not listed.
pub(super) fn shape_taint(op: &Op, shape: &[bool], data: &[bool]) -> bool {
    let any_shape = shape.contains(&true);
    let params_from = |k: usize| data.iter().skip(k).any(|&d| d);
    match op {
        Op::NonZero => true,
        Op::Shape => false,
        // Output shaped like the data input, whatever the indices.
        Op::ScatterND => shape.first() == Some(&true),
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Where
        | Op::Cast(_)
        | Op::Clip
        | Op::Fused(_)
        | Op::Identity
        | Op::Transpose { .. }
        | Op::Concat { .. }
        | Op::Gather { .. }
        | Op::GatherElements { .. }
        | Op::GatherND { .. }
        | Op::CumSum { .. }
        | Op::Softmax { .. }
        | Op::MatMul
        | Op::Conv(_)
        | Op::ConvTranspose(_)
        | Op::RandomNormalLike { .. } => any_shape,
        Op::Reshape { .. }
        | Op::Unsqueeze
        | Op::Squeeze
        | Op::Slice
        | Op::Split { .. }
        | Op::Expand
        | Op::Pad
        | Op::Reduce { .. } => any_shape || params_from(1),
        _ => any_shape || params_from(0),
    }
}

/// `i..end` when `i` is the first step of a boundary-free stretch of at least [`MIN_STEPS`].
fn segment_at(boundary: &[bool], i: usize) -> Option<usize> {
    if boundary.get(i) != Some(&false) || (i > 0 && !boundary[i - 1]) {
        return None;
    }
    let end = boundary[i..]
        .iter()
        .position(|&b| b)
        .map_or(boundary.len(), |n| i + n);
    (end - i >= MIN_STEPS).then_some(end)
}

/// The key of the live state at a segment's start: the start, and every live value's place,
/// shape and type (in value order).
pub(super) fn state_key(start: usize, slots: &Slots) -> u64 {
    let mut ids: Vec<&ValueId> = slots.keys().collect();
    ids.sort_unstable();
    let mut h = DefaultHasher::new();
    start.hash(&mut h);
    for v in ids {
        v.hash(&mut h);
        match &slots[v] {
            Slot::Host(t) => (0u8, &t.shape, t.dtype()).hash(&mut h),
            Slot::Dev(d) => (1u8, &d.shape, d.dtype).hash(&mut h),
            Slot::Both(t, _) => (2u8, &t.shape, t.dtype()).hash(&mut h),
        }
    }
    h.finish()
}

/// The smallest bucket edge that holds `longest` ids (or `longest` itself past the last edge):
/// with graphs on, batches are padded to it so every batch of a bucket has the same shapes.
pub fn padded_width(edges: &[usize], longest: usize) -> usize {
    edges
        .iter()
        .copied()
        .filter(|&e| e >= longest)
        .min()
        .unwrap_or(longest)
}

fn dev_part(s: &mut Slot) -> Option<&mut DevTensor> {
    match s {
        Slot::Dev(d) | Slot::Both(_, d) => Some(d),
        Slot::Host(_) => None,
    }
}

impl DeviceExecutor {
    /// Runs segment `start..end` through its graph (replaying, or capturing on first sight);
    /// `false` when it must run eagerly instead (nothing was changed then).
    pub(super) fn run_segment(
        &mut self,
        steps: &[Step],
        (start, end): (usize, usize),
        slots: &mut Slots,
        rng: &mut fastrand::Rng,
    ) -> Result<bool, GpuError> {
        let key = state_key(start, slots);
        if self.graphs.variable.contains(&key) {
            return Ok(false);
        }
        let found = self.graphs.cache.get(&key).and_then(|recs| {
            recs.iter().position(|r| {
                r.end == end
                    && r.host_reads.iter().all(|(v, t)| match slots.get(v) {
                        Some(Slot::Host(h) | Slot::Both(h, _)) => h == t,
                        _ => false,
                    })
            })
        });
        if let Some(k) = found {
            self.replay(key, k, slots)?;
            return Ok(true);
        }
        let variants = self
            .graphs
            .cache
            .get(&key)
            .map_or(0, |recs| recs.iter().filter(|r| r.end == end).count());
        if variants >= MAX_VARIANTS {
            self.graphs.variable.insert(key);
            self.graphs.stats.variable += 1;
            return Ok(false);
        }
        self.capture(steps, key, (start, end), slots, rng)
    }

    fn replay(&mut self, key: u64, k: usize, slots: &mut Slots) -> Result<(), GpuError> {
        let st = self.stream();
        let run = self.graphs.run;
        let rec = &mut self.graphs.cache.get_mut(&key).expect("a found graph")[k];
        rec.used = run;
        let rec = &*rec;
        for (v, stable) in &rec.dev_inputs {
            let cur = slots
                .get_mut(v)
                .and_then(dev_part)
                .ok_or_else(|| GpuError::Other(format!("graph input {v} is not on the device")))?;
            memory::copy_into(st, stable, cur)?;
        }
        if let Some(g) = &rec.graph {
            g.launch()?;
        }
        for v in &rec.dead {
            slots.remove(v);
        }
        for (v, s) in &rec.outputs {
            slots.insert(*v, s.clone());
        }
        self.tainted.extend(rec.tainted.iter().copied());
        self.shape_tainted.extend(rec.shape_tainted.iter().copied());
        self.work.macs += rec.work.macs;
        self.work.bytes += rec.work.bytes;
        self.graphs.stats.replayed += 1;
        self.graphs.stats.graph_steps += rec.end - rec.start;
        Ok(())
    }

    fn capture(
        &mut self,
        steps: &[Step],
        key: u64,
        (start, end): (usize, usize),
        slots: &mut Slots,
        rng: &mut fastrand::Rng,
    ) -> Result<bool, GpuError> {
        let st = self.stream();
        let snapshot = slots.clone();
        let taint_before = (self.tainted.clone(), self.shape_tainted.clone());
        // Stable copies of every live device value: the addresses the graph will read.
        let mut stable: HashMap<ValueId, DevTensor> = HashMap::new();
        for (v, s) in slots.iter_mut() {
            if let Some(d) = dev_part(s) {
                let c = memory::copy(st, d)?;
                *d = c.clone();
                stable.insert(*v, c);
            }
        }
        let work_before = self.work;
        self.capture_log = Some(CaptureLog {
            start: slots.keys().copied().collect(),
            host_reads: Vec::new(),
            dev_reads: Vec::new(),
            uploads: Vec::new(),
        });
        if let Err(e) = self
            .gpu
            .stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        {
            tracing::warn!("CUDA graph capture does not start ({e}); running eagerly");
            self.capture_log = None;
            *slots = snapshot;
            self.graphs.variable.insert(key);
            self.graphs.stats.aborted += 1;
            return Ok(false);
        }
        let guard = Capturing::start();
        let mut ran = Ok(());
        for (i, step) in steps.iter().enumerate().take(end).skip(start) {
            if let Err(e) = self.step_eager(i, step, slots, rng, None) {
                ran = Err((i, e));
                break;
            }
        }
        let released = guard.finish();
        let graph = self
            .gpu
            .stream
            .end_capture(CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
        let log = self.capture_log.take().expect("capture log");
        let graph = match (ran, graph) {
            (Ok(()), Ok(Some(g))) => g,
            (ran, graph) => {
                // Back to the segment's start and run it eagerly (a real error shows there);
                // what the failed capture allocated is never touched again (its buffers are the
                // discarded graph's).
                *slots = snapshot;
                (self.tainted, self.shape_tainted) = taint_before;
                self.work = work_before;
                self.graphs.stats.aborted += 1;
                drop(released);
                match ran {
                    // A step that moves data: a boundary from now on.
                    Err((i, GpuError::CaptureBreak)) => self.graphs.mark_boundary(i),
                    Err((i, e)) => {
                        tracing::warn!(
                            "CUDA graph capture failed at step {i} ({e}); running eagerly"
                        );
                        self.graphs.variable.insert(key);
                    }
                    Ok(()) => {
                        if let Err(e) = graph {
                            tracing::warn!("CUDA graph not instantiated ({e}); running eagerly");
                        }
                        self.graphs.variable.insert(key);
                    }
                }
                return Ok(false);
            }
        };
        let mut escaping = Vec::new();
        let mut outputs = Vec::new();
        for (v, s) in slots.iter() {
            if log.start.contains(v) {
                continue;
            }
            if let Slot::Dev(d) | Slot::Both(_, d) = s
                && d.buf.owner() == Owner::Graph
            {
                escaping.push((d.ptr(), st));
                d.buf.disown();
            }
            outputs.push((*v, s.clone()));
        }
        escaping.sort_unstable();
        escaping.dedup();
        let tainted = outputs
            .iter()
            .map(|(v, _)| *v)
            .filter(|v| self.tainted.contains(v))
            .collect();
        let shape_tainted = outputs
            .iter()
            .map(|(v, _)| *v)
            .filter(|v| self.shape_tainted.contains(v))
            .collect();
        let dead = log
            .start
            .iter()
            .copied()
            .filter(|v| !slots.contains_key(v))
            .collect();
        let dev_inputs = log
            .dev_reads
            .iter()
            .filter_map(|v| stable.get(v).map(|d| (*v, d.clone())))
            .collect();
        graph.launch()?;
        self.graphs.stats.captured += 1;
        self.graphs.stats.graph_steps += end - start;
        let work = Work {
            macs: self.work.macs - work_before.macs,
            bytes: self.work.bytes - work_before.bytes,
        };
        self.graphs.cache.entry(key).or_default().push(Captured {
            graph: Some(graph),
            start,
            end,
            host_reads: log.host_reads,
            dev_inputs,
            dead,
            outputs,
            tainted,
            shape_tainted,
            escaping,
            _keep: released.into_iter().chain(log.uploads).collect(),
            work,
            used: self.graphs.run,
        });
        self.graphs.evict();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_reads_on_off_and_refuses_anything_else() {
        assert_eq!(parse_switch(None), Ok(GraphMode::Off));
        assert_eq!(parse_switch(Some("0")), Ok(GraphMode::Off));
        assert_eq!(parse_switch(Some(" 1 ")), Ok(GraphMode::On));
        assert_eq!(parse_switch(Some("on")), Ok(GraphMode::On));
        assert_eq!(parse_switch(Some("frames")), Ok(GraphMode::Frames));
        let e = parse_switch(Some("yes please")).unwrap_err();
        assert!(
            e.contains("TALKER_CUDA_GRAPHS") && e.contains("set it to 1"),
            "{e}"
        );
    }

    #[test]
    fn segments_are_long_boundary_free_stretches() {
        let mut b = vec![false; 30];
        b[0] = true; // the feed's upload
        b[12] = true; // a NonZero
        b[15] = true;
        assert_eq!(segment_at(&b, 0), None, "a boundary is eager");
        assert_eq!(segment_at(&b, 1), Some(12));
        assert_eq!(segment_at(&b, 2), None, "not a segment's first step");
        assert_eq!(segment_at(&b, 13), None, "13..15 is too short");
        assert_eq!(segment_at(&b, 16), Some(30));
        assert_eq!(segment_at(&[false; 5], 0), None);
        assert_eq!(segment_at(&[false; 9], 0), Some(9));
    }

    #[test]
    fn data_dependent_shapes_are_followed() {
        use crate::tts::cuda::program::op::ReduceKind;
        let (f, t) = (false, true);
        assert!(shape_taint(&Op::NonZero, &[f], &[f]));
        // A Range up to a downloaded frame count, a Reshape to a data-dependent spec.
        assert!(shape_taint(&Op::Range, &[f, f, f], &[f, t, f]));
        assert!(shape_taint(
            &Op::Reshape { allow_zero: false },
            &[f, f],
            &[f, t]
        ));
        // Data through elementwise maths or as gather indices leaves shapes alone...
        assert!(!shape_taint(&Op::Where, &[f, f, f], &[t, t, f]));
        assert!(!shape_taint(&Op::Gather { axis: 0 }, &[f, f], &[f, t]));
        assert!(!shape_taint(
            &Op::Reshape { allow_zero: false },
            &[f, f],
            &[t, f]
        ));
        // ...a data-dependent shape flows on, except through ScatterND's indices and Shape.
        assert!(shape_taint(&Op::MatMul, &[f, t], &[f, f]));
        assert!(!shape_taint(&Op::ScatterND, &[f, t, t], &[f, t, t]));
        assert!(shape_taint(&Op::ScatterND, &[t, f, f], &[f, f, f]));
        assert!(!shape_taint(&Op::Shape, &[t], &[f]));
        let reduce = Op::Reduce {
            kind: ReduceKind::Max,
            axes: None,
            keep_dims: false,
        };
        assert!(shape_taint(&reduce, &[f, f], &[f, t]));
        assert!(!shape_taint(&reduce, &[f, f], &[t, f]));
    }

    #[test]
    fn frame_buckets_pad_by_at_most_an_eighth() {
        assert_eq!(frame_bucket(1), 32);
        assert_eq!(frame_bucket(32), 32);
        assert_eq!(frame_bucket(33), 36);
        assert_eq!(frame_bucket(64), 64);
        assert_eq!(frame_bucket(65), 72);
        assert_eq!(frame_bucket(1000), 1024);
        assert_eq!(frame_bucket(1025), 1152);
        for t in 1..5000 {
            let b = frame_bucket(t);
            assert!(b >= t && (b <= 32 || (b - t) * 8 <= t), "{t} → {b}");
            assert_eq!(frame_bucket(b), b, "buckets are fixed points");
        }
    }

    #[test]
    fn padding_goes_to_the_bucket_edge() {
        let edges = [48, 96, 160];
        assert_eq!(padded_width(&edges, 10), 48);
        assert_eq!(padded_width(&edges, 48), 48);
        assert_eq!(padded_width(&edges, 49), 96);
        assert_eq!(padded_width(&edges, 200), 200);
    }

    #[test]
    fn the_key_sees_places_shapes_and_types_not_contents() {
        let mut a = Slots::default();
        a.insert(3, Slot::Host(Tensor::i64(vec![2], vec![5, 6])));
        let mut b = Slots::default();
        b.insert(3, Slot::Host(Tensor::i64(vec![2], vec![7, 8])));
        assert_eq!(state_key(4, &a), state_key(4, &b));
        assert_ne!(state_key(4, &a), state_key(5, &a));
        b.insert(3, Slot::Host(Tensor::i64(vec![3], vec![7, 8, 9])));
        assert_ne!(state_key(4, &a), state_key(4, &b));
        b.insert(3, Slot::Host(Tensor::f32(vec![2], vec![7.0, 8.0])));
        assert_ne!(state_key(4, &a), state_key(4, &b));
    }
}
