//! Per-convolution precision, and the weights converted to match.
//!
//! Input: an FP32 plan, the engine's precision and (for INT8) calibrated input ranges. Output: the
//! plan with each Conv/ConvTranspose marked F32, F16 or I8 and its weights rounded or quantised.
//! Policy (as TensorRT users do for vocoders): everything the durations depend on (text encoder,
//! duration predictor) stays FP32 so the rounded durations match ONNX Runtime; depthwise convs and
//! matrix products stay FP32 (tiny); other convs run FP16. INT8 takes the big decoder convs from the
//! first upsampling up to, not including, the last upsampling stage; the last stage and the output
//! conv, which shape the waveform directly, stay FP16. Norms, softmax and exp are elementwise or
//! reduction steps and always run in FP32.

use std::collections::HashMap;

use super::op::{Op, Precision};
use super::{Plan, Step, ValueId};
use crate::tts::cuda::quant;
use crate::tts::cuda::tensor::{DType, Tensor};

/// Steps eligible for INT8: group-1 convolutions between the first and the last ConvTranspose.
pub fn int8_candidates(plan: &Plan) -> Vec<usize> {
    let ups: Vec<usize> = plan
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.op, Op::ConvTranspose(_)))
        .map(|(i, _)| i)
        .collect();
    let (Some(&first), Some(&last)) = (ups.first(), ups.last()) else {
        return Vec::new();
    };
    plan.steps
        .iter()
        .enumerate()
        .filter(|(i, s)| {
            (first..last).contains(i)
                && match &s.op {
                    Op::Conv(c) | Op::ConvTranspose(c) => c.group == 1,
                    _ => false,
                }
        })
        .map(|(i, _)| i)
        .collect()
}

/// How many convolutions ended up in each precision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PrecisionCounts {
    pub f32: usize,
    pub f16: usize,
    pub i8: usize,
}

/// Assigns precisions; `amax` maps INT8 candidate step indices to calibrated input ranges
/// (a candidate without one stays FP16).
pub fn assign(plan: &mut Plan, target: Precision, amax: &HashMap<usize, f32>) -> PrecisionCounts {
    let fp32 = plan.duration_ancestors();
    let int8: Vec<usize> = if target == Precision::I8 {
        int8_candidates(plan)
    } else {
        Vec::new()
    };
    let mut counts = PrecisionCounts::default();
    for i in 0..plan.steps.len() {
        let transpose = matches!(plan.steps[i].op, Op::ConvTranspose(_));
        let (Op::Conv(spec) | Op::ConvTranspose(spec)) = &plan.steps[i].op else {
            continue;
        };
        let Some(w) = plan.steps[i].inputs.get(1).copied().flatten() else {
            continue;
        };
        let Some(weight) = plan.constants.get(&w) else {
            continue;
        };
        let mut spec = spec.clone();
        spec.precision = if target == Precision::F32 || fp32.contains(&i) || spec.group != 1 {
            Precision::F32
        } else if int8.contains(&i) && amax.contains_key(&i) {
            Precision::I8
        } else {
            Precision::F16
        };
        let converted = match spec.precision {
            Precision::F32 => None,
            Precision::F16 => {
                let mut t = weight.clone();
                if let crate::tts::cuda::tensor::Data::F32(v) = &mut t.data {
                    quant::round_to_f16(v);
                }
                Some(t)
            }
            Precision::I8 => {
                let v = weight.as_f32().unwrap_or(&[]);
                let sh = &weight.shape;
                let (q, scales) = if transpose {
                    // [in, out, k]: the output channel is the middle axis.
                    let (cout, k) = (sh[1], sh[2]);
                    quant::quantize_weights(v, cout, |e| (e / k) % cout)
                } else {
                    let per = sh[1] * sh[2];
                    quant::quantize_weights(v, sh[0], |e| e / per)
                };
                spec.input_amax = amax.get(&i).copied();
                spec.weight_scales = Some(scales);
                Some(Tensor::f32(sh.clone(), q))
            }
        };
        match spec.precision {
            Precision::F32 => counts.f32 += 1,
            Precision::F16 => counts.f16 += 1,
            Precision::I8 => counts.i8 += 1,
        }
        if let Some(t) = converted {
            let name = format!("{}.weight.{:?}", plan.steps[i].name, spec.precision);
            let id: ValueId = plan.add_value(&name, t.dtype());
            plan.constants.insert(id, t);
            plan.steps[i].inputs[1] = Some(id);
        }
        plan.steps[i].op = if transpose {
            Op::ConvTranspose(spec)
        } else {
            Op::Conv(spec)
        };
    }
    plan.prune();
    counts
}

/// Whether a step can write its output as an FP16 activation.
fn writes_half(s: &Step) -> bool {
    match &s.op {
        Op::Fused(_) => true,
        Op::Conv(c) | Op::ConvTranspose(c) => c.precision == Precision::F16 && c.group == 1,
        _ => false,
    }
}

/// Whether a step can read its input `k` as an FP16 activation. A fused step's input read through
/// folded views cannot: a view too wide for 32-bit indices is copied out first, by the FP32 copy.
fn reads_half(s: &Step, k: usize) -> bool {
    match &s.op {
        Op::Fused(f) => f.views_of(k).is_empty(),
        Op::Shape => true,
        Op::Conv(c) | Op::ConvTranspose(c) => {
            k == 0 && c.precision == Precision::F16 && c.group == 1
        }
        _ => false,
    }
}

/// For each value: whether every step reading it can read FP16 (plan outputs cannot).
fn readers_read_half(plan: &Plan) -> Vec<bool> {
    let mut ok = vec![true; plan.values.len()];
    for s in &plan.steps {
        for (k, v) in s.inputs.iter().enumerate() {
            if let Some(v) = *v {
                ok[v] &= reads_half(s, k);
            }
        }
    }
    for v in plan.outputs.ids() {
        ok[v] = false;
    }
    ok
}

/// Marks the decoder's activations of an FP16 plan to be stored as FP16 on the device (half the
/// bytes; the maths stays FP32); returns how many. Only the decoder (`/dec/` steps, as Piper
/// exports it): there it costs about 0.1 dB against ONNX Runtime, in the flow 2.5 dB
/// (`examples/fp16_activations.rs`). A value is marked where its writer and every reader handle
/// FP16 (fused steps, FP16 convolutions' data input, `Shape`), never a graph output.
pub fn half_activations(plan: &mut Plan) -> usize {
    let readers_ok = readers_read_half(plan);
    let mut marked = 0;
    for s in &plan.steps {
        if !s.name.starts_with("/dec/") || !writes_half(s) {
            continue;
        }
        for &v in &s.outputs {
            if plan.values[v].dtype == DType::F32 && readers_ok[v] && !plan.values[v].half {
                plan.values[v].half = true;
                marked += 1;
            }
        }
    }
    marked
}

/// Checks the FP16 marks of a plan read from a file: each marked value is an F32 written by a
/// step that writes FP16 and read only by steps that read it (as [`half_activations`] marks).
pub fn check_half(plan: &Plan) -> Result<(), String> {
    let readers_ok = readers_read_half(plan);
    let mut written = vec![false; plan.values.len()];
    for s in plan.steps.iter().filter(|s| writes_half(s)) {
        for &v in &s.outputs {
            written[v] = true;
        }
    }
    for (v, value) in plan.values.iter().enumerate() {
        if value.half && !(value.dtype == DType::F32 && written[v] && readers_ok[v]) {
            return Err(format!(
                "value {v} ({}) is marked FP16 but a step that writes or reads it cannot store it so",
                value.name
            ));
        }
    }
    Ok(())
}
