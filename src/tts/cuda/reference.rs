//! The host executor: runs a [`Plan`] step by step with the host kernels of `gpu::ops`.
//!
//! Input: a plan and a [`Feed`]. Output: the plan's [`Outputs`]. It is the reference the CUDA
//! engine is validated against (same plan, FP16/INT8 convolutions emulated exactly), the
//! calibrator's fallback, and what CI runs against ONNX Runtime on the real voice. Activations are
//! dropped after their last use. An observer sees every convolution's input, for INT8 calibration.

use std::collections::{HashMap, HashSet};

use super::io::{Feed, Outputs};
use super::ops;
use super::program::cost::{Work, step_bytes, step_macs};
use super::program::op::{ConvPath, Op};
use super::program::{Plan, ValueId};
use super::tensor::{Data, OpError, Tensor};

/// A step that failed, with the op and the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step {index} ({op} {name:?}): {source}")]
pub struct StepError {
    pub index: usize,
    pub op: &'static str,
    pub name: String,
    pub source: OpError,
}

/// Called with (step index, tensor): a convolution's input (INT8 calibration) or a step's
/// output (tracing one executor against another).
pub type Hook<'a> = &'a mut dyn FnMut(usize, &Tensor);

#[derive(Default)]
pub struct Hooks<'a> {
    pub conv_input: Option<Hook<'a>>,
    pub step_output: Option<Hook<'a>>,
}

pub struct HostExecutor<'p> {
    plan: &'p Plan,
    last_use: Vec<usize>,
    rng: fastrand::Rng,
    /// Matrix work of every run so far, counted at the shapes each step saw.
    pub work: Work,
    /// Steps whose float outputs are rounded to FP16 as they are stored: what an engine that
    /// kept those activations in FP16 would compute (`examples/fp16_activations.rs`). Values the
    /// plan marks FP16 (`Value::half`) are rounded always, as the device stores them.
    pub stored_f16: HashSet<usize>,
}

impl<'p> HostExecutor<'p> {
    pub fn new(plan: &'p Plan, seed: u64) -> HostExecutor<'p> {
        HostExecutor {
            plan,
            last_use: plan.last_uses(),
            rng: fastrand::Rng::with_seed(seed),
            work: Work::default(),
            stored_f16: HashSet::new(),
        }
    }

    pub fn run(&mut self, feed: &Feed, mut hooks: Hooks<'_>) -> Result<Outputs, StepError> {
        let plan = self.plan;
        let mut live: HashMap<ValueId, Tensor> = HashMap::new();
        live.insert(plan.inputs.ids, feed.ids.clone());
        live.insert(plan.inputs.lengths, feed.lengths.clone());
        live.insert(plan.inputs.scales, feed.scales.clone());
        if let Some(s) = plan.inputs.speaker {
            live.insert(s, feed.speaker.clone());
        }
        for (index, step) in plan.steps.iter().enumerate() {
            let fail = |source: OpError| StepError {
                index,
                op: step.op.name(),
                name: step.name.clone(),
                source,
            };
            let ins: Vec<Option<&Tensor>> = step
                .inputs
                .iter()
                .map(|i| i.map(|v| live.get(&v).or_else(|| plan.constants.get(&v))))
                .map(|t| match t {
                    Some(None) => Err(OpError("input not computed".into())),
                    Some(Some(t)) => Ok(Some(t)),
                    None => Ok(None),
                })
                .collect::<Result<_, _>>()
                .map_err(fail)?;
            if let (Some(obs), Op::Conv(_) | Op::ConvTranspose(_), Some(Some(x))) =
                (hooks.conv_input.as_mut(), &step.op, ins.first())
            {
                obs(index, x);
            }
            let mut outs = ops::run(&step.op, &ins, &mut self.rng).map_err(fail)?;
            let all_f16 = self.stored_f16.contains(&index);
            for (t, &v) in outs.iter_mut().zip(&step.outputs) {
                if let (true, Data::F32(v)) = (all_f16 || plan.values[v].half, &mut t.data) {
                    crate::tts::cuda::quant::round_to_f16(v);
                }
            }
            let shapes: Vec<Option<&[usize]>> =
                ins.iter().map(|t| t.map(|t| t.shape.as_slice())).collect();
            if let Some(o) = outs.first() {
                self.work.macs += step_macs(&step.op, &shapes, &o.shape);
            }
            // Bytes as the device stores each value (FP16 activations: 2).
            let size = |v: Option<ValueId>, t: &Tensor| match v {
                Some(v) if plan.values[v].half => 2,
                _ => t.dtype().size(),
            };
            let ins_sized: Vec<_> = ins
                .iter()
                .zip(&step.inputs)
                .map(|(t, &v)| t.map(|t| (t.shape.as_slice(), size(v, t))))
                .collect();
            let outs_sized: Vec<_> = outs
                .iter()
                .zip(&step.outputs)
                .map(|(t, &v)| (t.shape.as_slice(), size(Some(v), t)))
                .collect();
            self.work.bytes += step_bytes(&step.op, &ins_sized, &outs_sized, ConvPath::Gemm);
            for v in step.inputs.iter().flatten() {
                if self.last_use[*v] == index {
                    live.remove(v);
                }
            }
            for (id, t) in step.outputs.iter().zip(outs) {
                if let Some(h) = hooks.step_output.as_mut() {
                    h(index, &t);
                }
                live.insert(*id, t);
            }
        }
        let mut take = |v: ValueId, what: &str| {
            live.remove(&v)
                .or_else(|| plan.constants.get(&v).cloned())
                .ok_or_else(|| StepError {
                    index: plan.steps.len(),
                    op: "output",
                    name: what.to_owned(),
                    source: OpError("never computed".into()),
                })
        };
        Ok(Outputs {
            audio: take(plan.outputs.audio, "audio")?,
            durations: take(plan.outputs.durations, "durations")?,
            frames: take(plan.outputs.frames, "frames")?,
        })
    }
}
