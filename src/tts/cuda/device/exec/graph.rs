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
//! *segment* is a stretch of at least [`MIN_STEPS`] steps between boundaries that starts before
//! the run's first device→host copy: its shapes follow from the batch's (bucket-padded) input
//! shape alone, so it recurs for every batch of the same bucket and size. The first time a segment
//! is met with a given key it is captured into a graph (and launched); later it is replayed.
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

use super::{DeviceExecutor, Slot};
use crate::tts::cuda::device::GpuError;
use crate::tts::cuda::device::memory::{self, Capturing, DevBuf, DevTensor, Owner};
use crate::tts::cuda::program::cost::Work;
use crate::tts::cuda::program::op::Op;
use crate::tts::cuda::program::{Plan, Step, ValueId};
use crate::tts::cuda::tensor::Tensor;

/// Shorter stretches are not worth a graph.
pub const MIN_STEPS: usize = 8;
/// Host-read variants kept per key before the segment is left eager.
pub const MAX_VARIANTS: usize = 4;

/// `TALKER_CUDA_GRAPHS`: `1`/`on` turns graphs on, `0`/`off` (or unset) leaves them off.
pub fn parse_switch(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("" | "0" | "off" | "false") => Ok(false),
        Some("1" | "on" | "true") => Ok(true),
        Some(other) => Err(format!(
            "TALKER_CUDA_GRAPHS={other:?} is not a switch; set it to 1 (CUDA graphs on) or 0 (off)"
        )),
    }
}

/// The switch as the environment sets it.
pub fn from_env() -> Result<bool, String> {
    parse_switch(std::env::var("TALKER_CUDA_GRAPHS").ok().as_deref())
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
    /// Graph allocations handed out (freed when the record goes) and buffers the graph may read.
    escaping: Vec<(CUdeviceptr, cudarc::driver::sys::CUstream)>,
    _keep: Vec<Rc<DevBuf>>,
    work: Work,
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
}

impl CaptureLog {
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
    pub(super) on: bool,
    /// Steps that moved data or draw noise: always eager.
    boundary: Vec<bool>,
    cache: HashMap<u64, Vec<Captured>>,
    variable: HashSet<u64>,
    pub(super) stats: GraphStats,
}

impl Graphs {
    pub(super) fn new(plan: &Plan) -> Graphs {
        Graphs {
            on: false,
            boundary: plan
                .steps
                .iter()
                .map(|s| matches!(s.op, Op::RandomNormalLike { .. }))
                .collect(),
            cache: HashMap::new(),
            variable: HashSet::new(),
            stats: GraphStats::default(),
        }
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
pub(super) fn state_key(start: usize, slots: &HashMap<ValueId, Slot>) -> u64 {
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
        slots: &mut HashMap<ValueId, Slot>,
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
        if self.graphs.cache.get(&key).map_or(0, Vec::len) >= MAX_VARIANTS {
            self.graphs.variable.insert(key);
            self.graphs.stats.variable += 1;
            return Ok(false);
        }
        self.capture(steps, key, (start, end), slots, rng)
    }

    fn replay(
        &mut self,
        key: u64,
        k: usize,
        slots: &mut HashMap<ValueId, Slot>,
    ) -> Result<(), GpuError> {
        let st = self.stream();
        let rec = &self.graphs.cache[&key][k];
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
        self.work.macs += rec.work.macs;
        self.graphs.stats.replayed += 1;
        self.graphs.stats.graph_steps += rec.end - rec.start;
        Ok(())
    }

    fn capture(
        &mut self,
        steps: &[Step],
        key: u64,
        (start, end): (usize, usize),
        slots: &mut HashMap<ValueId, Slot>,
        rng: &mut fastrand::Rng,
    ) -> Result<bool, GpuError> {
        let st = self.stream();
        let snapshot = slots.clone();
        let taint_before = self.tainted.clone();
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
                self.tainted = taint_before;
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
            escaping,
            _keep: released,
            work,
        });
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_reads_on_off_and_refuses_anything_else() {
        assert_eq!(parse_switch(None), Ok(false));
        assert_eq!(parse_switch(Some("0")), Ok(false));
        assert_eq!(parse_switch(Some(" 1 ")), Ok(true));
        assert_eq!(parse_switch(Some("on")), Ok(true));
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
    fn padding_goes_to_the_bucket_edge() {
        let edges = [48, 96, 160];
        assert_eq!(padded_width(&edges, 10), 48);
        assert_eq!(padded_width(&edges, 48), 48);
        assert_eq!(padded_width(&edges, 49), 96);
        assert_eq!(padded_width(&edges, 200), 200);
    }

    #[test]
    fn the_key_sees_places_shapes_and_types_not_contents() {
        let mut a = HashMap::new();
        a.insert(3, Slot::Host(Tensor::i64(vec![2], vec![5, 6])));
        let mut b = HashMap::new();
        b.insert(3, Slot::Host(Tensor::i64(vec![2], vec![7, 8])));
        assert_eq!(state_key(4, &a), state_key(4, &b));
        assert_ne!(state_key(4, &a), state_key(5, &a));
        b.insert(3, Slot::Host(Tensor::i64(vec![3], vec![7, 8, 9])));
        assert_ne!(state_key(4, &a), state_key(4, &b));
        b.insert(3, Slot::Host(Tensor::f32(vec![2], vec![7.0, 8.0])));
        assert_ne!(state_key(4, &a), state_key(4, &b));
    }
}
