//! Elementwise fusion: chains of pointwise ops become one [`Fused`] step (one kernel on the GPU).
//!
//! Input: a plan. Output: the same plan where every elementwise step (Add, Mul, Tanh, Where, Cast,
//! Clip, comparisons, …) belongs to exactly one fused group. A group has one output (its root); a
//! member other than the root has all of its consumers inside the group and is not a plan output,
//! so nothing computed inside a group is needed elsewhere. One-element constants are written into
//! the program as literals. Broadcasting commutes with pointwise maths, so computing every member
//! at the root's (broadcast) shape gives the same values as running the chain op by op.

use std::collections::{HashMap, HashSet};

use super::op::{Arg, Ew, Fused, Instr, Op, Scalar, ViewOp};
use super::{Plan, Step, ValueId};
use crate::tts::cuda::tensor::{Data, Tensor};

/// The elementwise view of a step, if it is one.
fn ew_of(step: &Step) -> Option<Ew> {
    match &step.op {
        Op::Clip => Some(Ew::Clip {
            lo: step.inputs.get(1).copied().flatten().is_some(),
            hi: step.inputs.get(2).copied().flatten().is_some(),
        }),
        op => op.as_ew(),
    }
}

fn scalar(t: &Tensor) -> Option<Scalar> {
    if t.len() != 1 || !t.shape.is_empty() && t.shape.iter().any(|&d| d != 1) {
        return None;
    }
    Some(match &t.data {
        Data::F32(v) => Scalar::F32(v[0]),
        Data::I64(v) => Scalar::I64(v[0]),
        Data::Bool(v) => Scalar::Bool(v[0]),
    })
}

/// The steps that read each value, in plan order.
fn readers(steps: &[Step]) -> HashMap<ValueId, Vec<usize>> {
    let mut readers: HashMap<ValueId, Vec<usize>> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        for &v in s.inputs.iter().flatten() {
            readers.entry(v).or_default().push(i);
        }
    }
    readers
}

pub fn fuse_elementwise(plan: &mut Plan) {
    let steps = std::mem::take(&mut plan.steps);
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        for &o in &s.outputs {
            producer.insert(o, i);
        }
    }
    let consumers = readers(&steps);
    let outputs: HashSet<ValueId> = plan.outputs.ids().into();

    let mut group_of: Vec<Option<usize>> = vec![None; steps.len()];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for root in (0..steps.len()).rev() {
        if group_of[root].is_some() || ew_of(&steps[root]).is_none() {
            continue;
        }
        let g = groups.len();
        let mut members = vec![root];
        group_of[root] = Some(g);
        let mut k = 0;
        while k < members.len() {
            let m = members[k];
            k += 1;
            for &v in steps[m].inputs.iter().flatten() {
                let Some(&p) = producer.get(&v) else { continue };
                let absorbable = group_of[p].is_none()
                    && ew_of(&steps[p]).is_some()
                    && steps[p].outputs.len() == 1
                    && !outputs.contains(&v)
                    && consumers[&v].iter().all(|c| group_of[*c] == Some(g));
                if absorbable {
                    group_of[p] = Some(g);
                    members.push(p);
                }
            }
        }
        members.sort_unstable();
        groups.push(members);
    }

    let mut fused_at: HashMap<usize, Step> = HashMap::new();
    for members in &groups {
        let root = *members.last().expect("groups are not empty");
        let mut ext: Vec<ValueId> = Vec::new();
        let mut temp_of: HashMap<ValueId, usize> = HashMap::new();
        let mut instrs = Vec::with_capacity(members.len());
        for &m in members {
            let s = &steps[m];
            let args = s
                .inputs
                .iter()
                .flatten()
                .map(|&v| {
                    if let Some(&t) = temp_of.get(&v) {
                        Arg::Temp(t)
                    } else if let Some(c) = plan.constants.get(&v).and_then(scalar) {
                        Arg::Scalar(c)
                    } else {
                        let i = ext.iter().position(|&e| e == v).unwrap_or_else(|| {
                            ext.push(v);
                            ext.len() - 1
                        });
                        Arg::Input(i)
                    }
                })
                .collect();
            let out = s.outputs[0];
            temp_of.insert(out, instrs.len());
            instrs.push(Instr {
                op: ew_of(s).expect("members are elementwise"),
                args,
                dtype: plan.values[out].dtype,
            });
        }
        fused_at.insert(
            root,
            Step {
                name: steps[root].name.clone(),
                op: Op::Fused(Fused {
                    instrs,
                    views: Vec::new(),
                }),
                inputs: ext.into_iter().map(Some).collect(),
                outputs: steps[root].outputs.clone(),
            },
        );
    }
    plan.steps = steps
        .into_iter()
        .enumerate()
        .filter_map(|(i, s)| match group_of[i] {
            None => Some(s),
            Some(_) => fused_at.remove(&i),
        })
        .collect();
}

/// The view output `index` of a movement step takes of its first input, when every parameter is
/// a constant (Transpose, Slice, Split, Expand); `None` for any other step.
fn view_of(plan: &Plan, step: &Step, index: usize) -> Option<ViewOp> {
    let ints = |k: usize| -> Option<Option<Vec<i64>>> {
        match step.inputs.get(k).copied().flatten() {
            None => Some(None),
            Some(v) => plan.constants.get(&v)?.ints().ok().map(Some),
        }
    };
    Some(match &step.op {
        Op::Transpose { perm } => ViewOp::Transpose(perm.clone()),
        Op::Slice => ViewOp::Slice {
            starts: ints(1)??,
            ends: ints(2)??,
            axes: ints(3)?,
            steps: ints(4)?,
        },
        Op::Split { axis, outputs } => ViewOp::Split {
            axis: *axis,
            sizes: ints(1)?,
            outputs: *outputs,
            index,
        },
        Op::Expand => ViewOp::Expand(ints(1)??),
        _ => return None,
    })
}

/// Folds movement steps into the fused steps that read them: a Transpose, Slice, Split or Expand
/// of constant parameters whose outputs only fused steps (or other such movement steps) read is
/// removed, and each reader reads its source through the view instead (one launch and one copy
/// fewer; the batch-1 engine was bound by launches). Runs after [`fuse_elementwise`].
pub fn fold_views(plan: &mut Plan) {
    let outputs: HashSet<ValueId> = plan.outputs.ids().into();
    let mut producer: HashMap<ValueId, (usize, usize)> = HashMap::new();
    for (i, s) in plan.steps.iter().enumerate() {
        for (k, &o) in s.outputs.iter().enumerate() {
            producer.insert(o, (i, k));
        }
    }
    let consumers = readers(&plan.steps);
    // Readers come after their producers, so one pass from the end sees every reader's verdict.
    let mut folds = vec![false; plan.steps.len()];
    for i in (0..plan.steps.len()).rev() {
        let s = &plan.steps[i];
        folds[i] = s.inputs.first().copied().flatten().is_some()
            && (0..s.outputs.len()).all(|k| view_of(plan, s, k).is_some())
            && s.outputs.iter().all(|o| {
                !outputs.contains(o)
                    && consumers
                        .get(o)
                        .into_iter()
                        .flatten()
                        .all(|&c| folds[c] || matches!(plan.steps[c].op, Op::Fused(_)))
            });
    }
    let mut chains: Vec<(usize, usize, ValueId, Vec<ViewOp>)> = Vec::new();
    for (i, s) in plan.steps.iter().enumerate() {
        if !matches!(s.op, Op::Fused(_)) {
            continue;
        }
        for (k, v) in s.inputs.iter().enumerate() {
            let (Some(mut v), mut chain) = (*v, Vec::new()) else {
                continue;
            };
            while let Some(&(p, out)) = producer.get(&v).filter(|(p, _)| folds[*p]) {
                let step = &plan.steps[p];
                chain.push(view_of(plan, step, out).expect("a folded step is a view"));
                v = step.inputs[0].expect("a folded step has its input");
            }
            if !chain.is_empty() {
                chain.reverse();
                chains.push((i, k, v, chain));
            }
        }
    }
    for (i, k, source, chain) in chains {
        let s = &mut plan.steps[i];
        s.inputs[k] = Some(source);
        let Op::Fused(f) = &mut s.op else {
            unreachable!("chains start at fused steps")
        };
        if f.views.len() <= k {
            f.views.resize(k + 1, Vec::new());
        }
        f.views[k] = chain;
    }
    let mut i = 0;
    plan.steps.retain(|_| {
        i += 1;
        !folds[i - 1]
    });
}
