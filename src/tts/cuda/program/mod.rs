//! An execution plan for a Piper voice: the ONNX graph parsed, constant-folded, pruned, typed,
//! fused and given a precision per convolution.
//!
//! Input: a parsed [`Model`]. Output: a [`Plan`] whose steps run in order; both executors (host
//! reference and CUDA) run the same plan, and the engine file stores it. Invariants: steps are in
//! topological order; every step input is a graph input, a constant or an earlier step's output;
//! the plan's three outputs are the audio, the per-id duration frames (the single `Ceil`) and the
//! per-item frame counts (`Ceil → ReduceSum → Clip → Cast`), found by op type and wiring.

pub mod cost;
pub mod dnn;
pub mod fuse;
pub mod op;
pub mod precision;

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use op::{Op, UnsupportedNode};

use super::onnx::Model;
use super::ops;
use super::tensor::{DType, OpError, Tensor};
use crate::tts::graph_patch::{AlignmentError, AlignmentNode, AlignmentOp, find_alignment};

pub type ValueId = usize;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Value {
    pub name: String,
    pub dtype: DType,
    /// Stored as FP16 on the device (a decoder activation of an FP16 engine; see
    /// [`precision::half_activations`]): the maths stays FP32, only the bytes halve.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub half: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The ONNX node it came from (the root node for a fused group).
    pub name: String,
    pub op: Op,
    /// `None` for an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    pub outputs: Vec<ValueId>,
}

/// The graph's runtime inputs, in Piper's convention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inputs {
    /// `input`: int64 `[batch, ids]`.
    pub ids: ValueId,
    /// `input_lengths`: int64 `[batch]`.
    pub lengths: ValueId,
    /// `scales`: float `[3]` (noise, length, noise_w).
    pub scales: ValueId,
    /// `sid`: int64 `[batch]`, multi-speaker voices only.
    pub speaker: Option<ValueId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outputs {
    /// float `[batch, 1, 1, samples]` (or any shape with the batch first).
    pub audio: ValueId,
    /// float `[batch, 1, ids]`: duration frames of each id.
    pub durations: ValueId,
    /// int64 `[batch]`: frames of each item.
    pub frames: ValueId,
}

impl Outputs {
    /// The three outputs' values, which every pass must keep and no executor may free.
    pub fn ids(&self) -> [ValueId; 3] {
        [self.audio, self.durations, self.frames]
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub values: Vec<Value>,
    /// Constant values (initializers and folded results), by value id.
    pub constants: HashMap<ValueId, Tensor>,
    pub steps: Vec<Step>,
    pub inputs: Inputs,
    pub outputs: Outputs,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error(transparent)]
    Unsupported(#[from] UnsupportedNode),
    #[error("the graph has no input {0:?}; is this a Piper voice?")]
    MissingInput(&'static str),
    #[error("the graph has no output")]
    NoOutput,
    #[error("node {node:?} reads {value:?}, which nothing produces before it")]
    Undefined { node: String, value: String },
    #[error(transparent)]
    Alignment(#[from] AlignmentError),
    #[error("folding constant node {node:?}: {source}")]
    Fold { node: String, source: OpError },
    #[error("node {node:?}: {reason}")]
    Types { node: String, reason: String },
}

impl Plan {
    /// Builds the FP32 plan: parse, fold, prune, type, split conv biases, fuse elementwise chains,
    /// fold movement steps into the fused steps that read them.
    pub fn build(model: &Model) -> Result<Plan, PlanError> {
        let mut plan = Self::from_graph(model)?;
        plan.fold_constants()?;
        plan.prune();
        plan.split_conv_bias();
        fuse::fuse_elementwise(&mut plan);
        fuse::fold_views(&mut plan);
        plan.prune();
        Ok(plan)
    }

    fn from_graph(model: &Model) -> Result<Plan, PlanError> {
        let g = &model.graph;
        let mut names = Names::default();
        let input = |name: &'static str, dtype, names: &mut Names| {
            g.inputs
                .iter()
                .any(|i| i == name)
                .then(|| names.define(name, dtype))
        };
        let inputs = Inputs {
            ids: input("input", DType::I64, &mut names).ok_or(PlanError::MissingInput("input"))?,
            lengths: input("input_lengths", DType::I64, &mut names)
                .ok_or(PlanError::MissingInput("input_lengths"))?,
            scales: input("scales", DType::F32, &mut names)
                .ok_or(PlanError::MissingInput("scales"))?,
            speaker: input("sid", DType::I64, &mut names),
        };
        let mut constants = HashMap::new();
        for (name, t) in &g.initializers {
            let id = names.define(name, t.dtype());
            constants.insert(id, t.clone());
        }
        let mut steps = Vec::with_capacity(g.nodes.len());
        for n in &g.nodes {
            let op = Op::try_from(n)?;
            let mut ins = Vec::with_capacity(n.inputs.len());
            for i in &n.inputs {
                if i.is_empty() {
                    ins.push(None);
                    continue;
                }
                let id = *names.ids.get(i).ok_or_else(|| PlanError::Undefined {
                    node: n.name.clone(),
                    value: i.clone(),
                })?;
                ins.push(Some(id));
            }
            let in_types: Vec<Option<DType>> = ins
                .iter()
                .map(|i| i.map(|v| names.values[v].dtype))
                .collect();
            let dtype = output_dtype(&op, &in_types).map_err(|reason| PlanError::Types {
                node: n.name.clone(),
                reason,
            })?;
            let outs = n.outputs.iter().map(|o| names.define(o, dtype)).collect();
            steps.push(Step {
                name: n.name.clone(),
                op,
                inputs: ins,
                outputs: outs,
            });
        }
        let audio_name = g.outputs.first().ok_or(PlanError::NoOutput)?;
        let audio = *names.ids.get(audio_name).ok_or(PlanError::NoOutput)?;
        let (durations, frames) = find_alignment(&steps)?;
        Ok(Plan {
            values: names.values,
            constants,
            steps,
            inputs,
            outputs: Outputs {
                audio,
                durations,
                frames,
            },
        })
    }

    /// Runs every step whose inputs are all constant once, at build time.
    fn fold_constants(&mut self) -> Result<(), PlanError> {
        let mut rng = fastrand::Rng::with_seed(0);
        let mut kept = Vec::with_capacity(self.steps.len());
        for step in std::mem::take(&mut self.steps) {
            let foldable = !matches!(step.op, Op::RandomNormalLike { .. })
                && step
                    .inputs
                    .iter()
                    .flatten()
                    .all(|i| self.constants.contains_key(i));
            if !foldable {
                kept.push(step);
                continue;
            }
            let ins: Vec<Option<&Tensor>> = step
                .inputs
                .iter()
                .map(|i| i.map(|v| &self.constants[&v]))
                .collect();
            let outs = ops::run(&step.op, &ins, &mut rng).map_err(|source| PlanError::Fold {
                node: step.name.clone(),
                source,
            })?;
            for (id, t) in step.outputs.iter().zip(outs) {
                self.values[*id].dtype = t.dtype();
                self.constants.insert(*id, t);
            }
        }
        self.steps = kept;
        Ok(())
    }

    /// Drops steps and constants that no output depends on.
    pub fn prune(&mut self) {
        let mut live: HashSet<ValueId> = self.outputs.ids().into();
        let mut kept = Vec::with_capacity(self.steps.len());
        for step in std::mem::take(&mut self.steps).into_iter().rev() {
            if step.outputs.iter().any(|o| live.contains(o)) {
                live.extend(step.inputs.iter().flatten());
                kept.push(step);
            }
        }
        kept.reverse();
        self.steps = kept;
        self.constants.retain(|id, _| live.contains(id));
    }

    /// `Conv(x, W, b)` → `Conv(x, W) + b` so the bias joins the next fused elementwise kernel
    /// (together with the activation and masking that follow it).
    fn split_conv_bias(&mut self) {
        let mut out = Vec::with_capacity(self.steps.len());
        for mut step in std::mem::take(&mut self.steps) {
            let is_conv = matches!(step.op, Op::Conv(_) | Op::ConvTranspose(_));
            let bias = step.inputs.get(2).copied().flatten();
            match bias {
                Some(b) if is_conv && self.constants.contains_key(&b) => {
                    let t = &self.constants[&b];
                    let reshaped = t.clone().reshaped(vec![1, t.len(), 1]).expect("same count");
                    let bias_id = self.add_value(&format!("{}.bias", step.name), DType::F32);
                    self.constants.insert(bias_id, reshaped);
                    let raw = self.add_value(&format!("{}.raw", step.name), DType::F32);
                    let final_out = step.outputs[0];
                    step.inputs.truncate(2);
                    step.outputs = vec![raw];
                    let name = step.name.clone();
                    out.push(step);
                    out.push(Step {
                        name: format!("{name}.bias"),
                        op: Op::Binary(op::Binary::Add),
                        inputs: vec![Some(raw), Some(bias_id)],
                        outputs: vec![final_out],
                    });
                }
                _ => out.push(step),
            }
        }
        self.steps = out;
    }

    pub fn add_value(&mut self, name: &str, dtype: DType) -> ValueId {
        self.values.push(Value {
            name: name.to_owned(),
            dtype,
            half: false,
        });
        self.values.len() - 1
    }

    /// Checks the wiring of a plan read from a file: every input defined before use, ids in range,
    /// FP16 activations only where their writer and readers handle them.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.values.len();
        let mut defined = vec![false; n];
        let io = [self.inputs.ids, self.inputs.lengths, self.inputs.scales];
        for &v in io
            .iter()
            .chain(self.inputs.speaker.iter())
            .chain(self.constants.keys())
        {
            *defined
                .get_mut(v)
                .ok_or(format!("value {v} out of range"))? = true;
        }
        for (i, s) in self.steps.iter().enumerate() {
            for &v in s.inputs.iter().flatten() {
                if !defined.get(v).copied().unwrap_or(false) {
                    return Err(format!(
                        "step {i} ({}) reads value {v} before it exists",
                        s.name
                    ));
                }
            }
            for &v in &s.outputs {
                *defined
                    .get_mut(v)
                    .ok_or(format!("step {i} writes value {v} out of range"))? = true;
            }
        }
        for v in self.outputs.ids() {
            if !defined.get(v).copied().unwrap_or(false) {
                return Err(format!("output value {v} is never computed"));
            }
        }
        precision::check_half(self)
    }

    /// For each value, the index of the last step that reads it (`usize::MAX` for plan outputs),
    /// so executors can free activations as soon as they are dead.
    pub fn last_uses(&self) -> Vec<usize> {
        let mut last = vec![0usize; self.values.len()];
        for (i, s) in self.steps.iter().enumerate() {
            for v in s.inputs.iter().flatten() {
                last[*v] = i;
            }
        }
        for o in self.outputs.ids() {
            last[o] = usize::MAX;
        }
        last
    }

    /// Steps whose outputs the durations depend on (text encoder and duration predictor).
    pub fn duration_ancestors(&self) -> HashSet<usize> {
        let mut need: HashSet<ValueId> = [self.outputs.durations].into();
        let mut steps = HashSet::new();
        for (i, s) in self.steps.iter().enumerate().rev() {
            if s.outputs.iter().any(|o| need.contains(o)) {
                steps.insert(i);
                need.extend(s.inputs.iter().flatten());
            }
        }
        steps
    }
}

#[derive(Default)]
struct Names {
    values: Vec<Value>,
    ids: HashMap<String, ValueId>,
}

impl Names {
    fn define(&mut self, name: &str, dtype: DType) -> ValueId {
        let id = self.values.len();
        self.values.push(Value {
            name: name.to_owned(),
            dtype,
            half: false,
        });
        self.ids.insert(name.to_owned(), id);
        id
    }
}

/// The element type a step produces, from its op and input types.
fn output_dtype(op: &Op, ins: &[Option<DType>]) -> Result<DType, String> {
    let first = ins.first().copied().flatten();
    let need =
        |t: Option<DType>| t.ok_or_else(|| format!("{} is missing its first input", op.name()));
    Ok(match op {
        Op::Unary(op::Unary::Not) => DType::Bool,
        Op::Binary(b) if b.gives_bool() => DType::Bool,
        Op::Where => ins
            .get(1)
            .copied()
            .flatten()
            .ok_or("Where needs three inputs")?,
        Op::Cast(t) => *t,
        Op::Shape | Op::NonZero => DType::I64,
        Op::ConstantOfShape(v) => match v {
            op::Scalar::F32(_) => DType::F32,
            op::Scalar::I64(_) => DType::I64,
            op::Scalar::Bool(_) => DType::Bool,
        },
        Op::Softmax { .. }
        | Op::MatMul
        | Op::Conv(_)
        | Op::ConvTranspose(_)
        | Op::RandomNormalLike { .. } => DType::F32,
        Op::Fused(f) => f
            .instrs
            .last()
            .map(|i| i.dtype)
            .ok_or("empty fused group")?,
        _ => need(first)?,
    })
}

impl AlignmentNode for Step {
    type Value = ValueId;
    fn is(&self, op: AlignmentOp) -> bool {
        match op {
            AlignmentOp::Ceil => self.op == Op::Unary(op::Unary::Ceil),
            AlignmentOp::ReduceSum => matches!(
                self.op,
                Op::Reduce {
                    kind: op::ReduceKind::Sum,
                    ..
                }
            ),
            AlignmentOp::Clip => self.op == Op::Clip,
            AlignmentOp::Cast => matches!(self.op, Op::Cast(_)),
        }
    }
    fn first_input(&self) -> Option<ValueId> {
        self.inputs.first().copied().flatten()
    }
    fn first_output(&self) -> Option<ValueId> {
        self.outputs.first().copied()
    }
}

#[cfg(test)]
mod tests;
