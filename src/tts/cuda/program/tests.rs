//! Planner tests on small Piper-shaped graphs built in protobuf form.

use super::op::{Arg, ConvSpec, Ew, Fused, Instr, Op, Precision, Unary, ViewOp};
use super::*;
use crate::tts::cuda::io::Feed;
use crate::tts::cuda::onnx::tests::{attr_int, model, node, tensor_f32};
use crate::tts::cuda::reference::HostExecutor;
use crate::tts::voice::Scales;

const QUIET: Scales = Scales {
    noise: 0.0,
    length: 1.0,
    noise_w: 0.0,
};

/// ids → durations via Ceil(len_scale·(|x|+c)); audio = tanh(conv(x)+b)·mask; frames via the
/// ReduceSum → Clip → Cast chain. Small, but shaped like the real thing.
fn mini(ceils: usize, with_chain: bool) -> Vec<u8> {
    let mut nodes = vec![
        node("Cast", &["input"], &["xf"], &[attr_int("to", 1)]),
        node("Unsqueeze", &["xf", "one"], &["x3"], &[]),
        node(
            "Gather",
            &["scales", "one"],
            &["ls"],
            &[attr_int("axis", 0)],
        ),
        node("Add", &["half", "half"], &["c"], &[]), // folds to a constant
        node("Add", &["x3", "c"], &["xc"], &[]),
        node("Mul", &["xc", "ls"], &["w"], &[]),
    ];
    for i in 0..ceils {
        let out = if i == 0 {
            "d".to_string()
        } else {
            format!("d{i}")
        };
        nodes.push(node("Ceil", &["w"], &[&out], &[]));
    }
    if with_chain {
        nodes.push(node(
            "ReduceSum",
            &["d", "axes12"],
            &["s"],
            &[attr_int("keepdims", 0)],
        ));
        nodes.push(node("Clip", &["s", "one_f"], &["sc"], &[]));
        nodes.push(node("Cast", &["sc"], &["frames"], &[attr_int("to", 7)]));
    }
    nodes.extend([
        node("Conv", &["x3", "cw", "cb"], &["y"], &[]),
        node("Tanh", &["y"], &["t"], &[]),
        node("Mul", &["t", "mask"], &["output"], &[]),
        node("Sub", &["half", "half"], &["unused"], &[]),
    ]);
    let ints = |name: &str, v: &[i64]| {
        let mut t = Vec::new();
        crate::tts::cuda::onnx::tests::varint_field(&mut t, 1, v.len() as u64);
        crate::tts::cuda::onnx::tests::varint_field(&mut t, 2, 7);
        crate::tts::wire::write_len_field(&mut t, 8, name.as_bytes());
        let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        crate::tts::wire::write_len_field(&mut t, 9, &raw);
        t
    };
    let mut one = ints("one", &[1]);
    // "one" must be a scalar-ish [1] tensor for Gather and Unsqueeze alike.
    one.clear();
    one.extend(ints("one", &[1]));
    model(
        &nodes,
        &[
            one,
            ints("axes12", &[1, 2]),
            tensor_f32("half", &[], &[0.5], true),
            tensor_f32("one_f", &[], &[1.0], true),
            tensor_f32("cw", &[1, 1, 1], &[2.0], true),
            tensor_f32("cb", &[1], &[0.25], true),
            tensor_f32("mask", &[1, 1, 1], &[1.0], true),
        ],
        &["input", "input_lengths", "scales"],
        &["output"],
    )
}

fn plan_of(bytes: &[u8]) -> Result<Plan, PlanError> {
    Plan::build(&crate::tts::cuda::onnx::Model::parse(bytes).unwrap())
}

#[test]
fn builds_folds_fuses_and_runs() {
    let plan = plan_of(&mini(1, true)).unwrap();
    // The constant Add is folded away, the dead Sub pruned.
    assert!(!plan.steps.iter().any(|s| s.name == "/Sub"));
    // Conv bias became an Add that fused with Tanh and the mask Mul into one group.
    let conv = plan
        .steps
        .iter()
        .position(|s| matches!(s.op, Op::Conv(_)))
        .unwrap();
    assert_eq!(plan.steps[conv].inputs.len(), 2, "bias split off");
    let tail = plan.steps.last().unwrap();
    let Op::Fused(f) = &tail.op else {
        panic!("{:?}", tail.op)
    };
    assert_eq!(f.instrs.len(), 3);
    assert_eq!(f.instrs[1].op, Ew::Unary(Unary::Tanh));
    assert!(
        f.instrs[2]
            .args
            .contains(&Arg::Scalar(op::Scalar::F32(1.0))),
        "one-element mask inlined"
    );
    // Durations and frames found by wiring.
    assert_eq!(plan.values[plan.outputs.durations].name, "d");
    assert_eq!(plan.values[plan.outputs.frames].name, "frames");
    assert_eq!(plan.values[plan.outputs.frames].dtype, DType::I64);

    let ids: &[i64] = &[1, 2, 3];
    let out = HostExecutor::new(&plan, 0)
        .run(&Feed::new(&[ids], QUIET, 0), Default::default())
        .unwrap();
    // w = x + 1 (0.5 + 0.5), so durations are ceil(2), ceil(3), ceil(4).
    assert_eq!(out.durations.as_f32().unwrap(), [2.0, 3.0, 4.0]);
    assert_eq!(out.frames.as_i64().unwrap(), [9]);
    let want: Vec<f32> = [1.0f32, 2.0, 3.0]
        .iter()
        .map(|x| (2.0 * x + 0.25).tanh())
        .collect();
    assert_eq!(out.audio.as_f32().unwrap(), want);
}

#[test]
fn runs_count_the_convolution_work_at_their_shapes() {
    let plan = plan_of(&mini(1, true)).unwrap();
    let mut exec = HostExecutor::new(&plan, 0);
    let one: &[i64] = &[1, 2, 3];
    exec.run(&Feed::new(&[one], QUIET, 0), Default::default())
        .unwrap();
    // The 1×1×1 conv over 3 frames: 3 MACs; the rest of the program does no matrix work.
    assert_eq!(exec.work.macs, 3);
    // Two items padded to 5 ids: 10 more.
    let (a, b): (&[i64], &[i64]) = (&[1, 2, 3, 4, 5], &[1, 2]);
    exec.run(&Feed::new(&[a, b], QUIET, 0), Default::default())
        .unwrap();
    assert_eq!(exec.work.macs, 13);
}

#[test]
fn precision_assignment_keeps_the_duration_path_fp32() {
    let mut plan = plan_of(&mini(1, true)).unwrap();
    let counts = precision::assign(&mut plan, Precision::F16, &HashMap::new());
    assert_eq!(
        counts,
        precision::PrecisionCounts {
            f32: 0,
            f16: 1,
            i8: 0
        }
    );
    let conv = plan
        .steps
        .iter()
        .find(|s| matches!(s.op, Op::Conv(_)))
        .unwrap();
    let Op::Conv(spec) = &conv.op else {
        unreachable!()
    };
    assert_eq!(spec.precision, Precision::F16);
    // No ConvTranspose, so nothing is an INT8 candidate.
    assert!(precision::int8_candidates(&plan).is_empty());
}

#[test]
fn non_piper_graphs_are_refused() {
    assert_eq!(
        plan_of(&mini(0, false)).unwrap_err(),
        PlanError::Alignment(AlignmentError::CeilCount(0))
    );
    assert_eq!(
        plan_of(&mini(2, true)).unwrap_err(),
        PlanError::Alignment(AlignmentError::CeilCount(2))
    );
    assert_eq!(
        plan_of(&mini(1, false)).unwrap_err(),
        PlanError::Alignment(AlignmentError::NoLengths)
    );
    let no_input = model(&[node("Ceil", &["a"], &["b"], &[])], &[], &["a"], &["b"]);
    assert_eq!(
        plan_of(&no_input).unwrap_err(),
        PlanError::MissingInput("input")
    );
    let unknown = model(
        &[node("Loop", &["input"], &["b"], &[])],
        &[],
        &["input", "input_lengths", "scales"],
        &["b"],
    );
    assert!(matches!(plan_of(&unknown), Err(PlanError::Unsupported(_))));
    let undefined = model(
        &[node("Ceil", &["nothing"], &["b"], &[])],
        &[],
        &["input", "input_lengths", "scales"],
        &["b"],
    );
    assert!(matches!(
        plan_of(&undefined),
        Err(PlanError::Undefined { .. })
    ));
}

#[test]
fn stored_f16_rounds_only_the_named_steps_outputs() {
    let plan = plan_of(&mini(1, true)).unwrap();
    let ids: &[i64] = &[1, 2, 3];
    let tail = plan.steps.len() - 1;
    let mut exec = HostExecutor::new(&plan, 0);
    let exact = exec
        .run(&Feed::new(&[ids], QUIET, 0), Default::default())
        .unwrap();
    exec.stored_f16 = [tail].into();
    let stored = exec
        .run(&Feed::new(&[ids], QUIET, 0), Default::default())
        .unwrap();
    let (exact_durations, exact) = (exact.durations.clone(), exact.audio.as_f32().unwrap());
    let want: Vec<f32> = exact
        .iter()
        .map(|&v| half::f16::from_f32(v).to_f32())
        .collect();
    assert_eq!(stored.audio.as_f32().unwrap(), want);
    assert_ne!(want, exact, "tanh(2x + 0.25) is not exact in FP16");
    // Durations come from steps that were not named: untouched.
    assert_eq!(stored.durations, exact_durations);
}

/// A decoder-shaped plan: a flow step, then FP16 conv → LeakyReLU → FP16 conv → tanh (the audio)
/// under `/dec/`; with `matmul`, a MatMul also reads the LeakyReLU's output.
fn decoder(matmul: bool) -> Plan {
    let f32v = |name: &str| Value {
        name: name.into(),
        dtype: DType::F32,
        half: false,
    };
    let mut values = vec![
        Value {
            name: "input".into(),
            dtype: DType::I64,
            half: false,
        },
        Value {
            name: "input_lengths".into(),
            dtype: DType::I64,
            half: false,
        },
    ];
    values.extend(["scales", "z", "w1", "c1", "act", "w2", "c2", "audio", "mm"].map(f32v));
    let conv = ConvSpec {
        precision: Precision::F16,
        ..ConvSpec::plain(1, 1, 1, 0, 1)
    };
    let unary = |u| {
        Op::Fused(Fused {
            views: Vec::new(),
            instrs: vec![Instr::f32(Ew::Unary(u), &[Arg::Input(0)])],
        })
    };
    let step = |name: &str, op, inputs: &[usize], out| Step {
        name: name.into(),
        op,
        inputs: inputs.iter().map(|&v| Some(v)).collect(),
        outputs: vec![out],
    };
    let mut steps = vec![
        step("/flow/f", unary(Unary::LeakyRelu(0.1)), &[2], 3),
        step("/dec/c1", Op::Conv(conv.clone()), &[3, 4], 5),
        step("/dec/act", unary(Unary::LeakyRelu(0.1)), &[5], 6),
        step("/dec/c2", Op::Conv(conv), &[6, 7], 8),
        step("/dec/tail", unary(Unary::Tanh), &[8], 9),
    ];
    if matmul {
        steps.push(step("/dec/mm", Op::MatMul, &[6, 6], 10));
    }
    let w = || Tensor::f32(vec![1, 1, 1], vec![0.5]);
    Plan {
        values,
        constants: [(4, w()), (7, w())].into(),
        steps,
        inputs: Inputs {
            ids: 0,
            lengths: 1,
            scales: 2,
            speaker: None,
        },
        outputs: Outputs {
            audio: 9,
            durations: 2,
            frames: 1,
        },
    }
}

#[test]
fn half_activations_mark_decoder_values_that_every_reader_reads_as_fp16() {
    let mut plan = decoder(false);
    assert_eq!(precision::half_activations(&mut plan), 3);
    let marked: Vec<&str> = plan
        .values
        .iter()
        .filter(|v| v.half)
        .map(|v| v.name.as_str())
        .collect();
    // Not the flow's output, not the audio (a graph output).
    assert_eq!(marked, ["c1", "act", "c2"]);
    plan.validate().unwrap();

    let mut read_by_matmul = decoder(true);
    assert_eq!(precision::half_activations(&mut read_by_matmul), 2);
    assert!(!read_by_matmul.values[6].half, "a MatMul reads FP32 only");
}

#[test]
fn a_plan_read_from_a_file_with_impossible_fp16_marks_is_refused() {
    for (matmul, v, why) in [
        (false, 9, "a graph output"),
        (false, 4, "a constant: no step writes it"),
        (true, 6, "read by a MatMul"),
    ] {
        let mut plan = decoder(matmul);
        plan.values[v].half = true;
        let err = plan.validate().unwrap_err();
        assert!(
            err.contains("marked FP16") && err.contains(&plan.values[v].name),
            "{why}: {err}"
        );
    }
}

/// Movement steps around fused steps: Transpose → Split → (a reversing Slice of one part) read
/// only by a fused Add; a Slice also read by a ReduceSum (kept); an Expand whose shape is
/// computed (kept). `scales` stands for any runtime value: the test feeds it a `[2, 3, 4]` tensor.
fn movements() -> Plan {
    let mut values: Vec<Value> = (0..21)
        .map(|i| Value {
            name: format!("v{i}"),
            dtype: DType::F32,
            half: false,
        })
        .collect();
    for i in [0, 1, 10, 11, 12, 13, 14, 15, 18, 20] {
        values[i].dtype = DType::I64;
    }
    let ints = |v: &[i64]| Tensor::i64(vec![v.len()], v.to_vec());
    let add = |a, b| {
        Op::Fused(Fused {
            views: Vec::new(),
            instrs: vec![Instr::f32(
                Ew::Binary(op::Binary::Add),
                &[Arg::Input(a), Arg::Input(b)],
            )],
        })
    };
    let step = |name: &str, op, inputs: &[Option<usize>], outputs: &[usize]| Step {
        name: name.into(),
        op,
        inputs: inputs.to_vec(),
        outputs: outputs.to_vec(),
    };
    let steps = vec![
        step(
            "t",
            Op::Transpose {
                perm: vec![2, 0, 1],
            },
            &[Some(2)],
            &[3],
        ),
        step(
            "split",
            Op::Split {
                axis: 1,
                outputs: 2,
            },
            &[Some(3), Some(10)],
            &[4, 5],
        ),
        step(
            "flip",
            Op::Slice,
            &[Some(4), Some(11), Some(12), Some(13), Some(14)],
            &[6],
        ),
        step("sum", add(0, 1), &[Some(6), Some(5)], &[7]),
        step(
            "kept",
            Op::Slice,
            &[Some(2), Some(15), Some(20), Some(13), None],
            &[8],
        ),
        step(
            "reduce",
            Op::Reduce {
                kind: op::ReduceKind::Sum,
                axes: Some(vec![2]),
                keep_dims: true,
            },
            &[Some(8)],
            &[9],
        ),
        step("both", add(0, 1), &[Some(8), Some(9)], &[16]),
        step("shape", Op::Shape, &[Some(16)], &[18]),
        step("expand", Op::Expand, &[Some(9), Some(18)], &[17]),
        step("out", add(0, 1), &[Some(16), Some(17)], &[19]),
    ];
    Plan {
        values,
        constants: [
            (10, ints(&[1, 1])),
            (11, ints(&[-1])),
            (12, ints(&[i64::MIN])),
            (13, ints(&[2])),
            (14, ints(&[-1])),
            (15, ints(&[1])),
            (20, ints(&[3])),
        ]
        .into(),
        steps,
        inputs: Inputs {
            ids: 0,
            lengths: 1,
            scales: 2,
            speaker: None,
        },
        outputs: Outputs {
            audio: 7,
            durations: 19,
            frames: 0,
        },
    }
}

/// Runs a plan's steps on the host from `scales` alone.
fn run_on_host(plan: &Plan, scales: &Tensor) -> HashMap<ValueId, Tensor> {
    let mut env: HashMap<ValueId, Tensor> = plan.constants.clone();
    env.insert(plan.inputs.scales, scales.clone());
    let mut rng = fastrand::Rng::with_seed(0);
    for s in &plan.steps {
        let ins: Vec<Option<&Tensor>> = s.inputs.iter().map(|v| v.map(|v| &env[&v])).collect();
        let outs = ops::run(&s.op, &ins, &mut rng).unwrap();
        env.extend(s.outputs.iter().copied().zip(outs));
    }
    env
}

#[test]
fn movement_steps_read_only_by_fused_steps_fold_into_them() {
    let mut plan = movements();
    let x = Tensor::f32(vec![2, 3, 4], (0..24).map(|v| v as f32 * 0.5).collect());
    let before = run_on_host(&plan, &x);
    fuse::fold_views(&mut plan);
    let names: Vec<&str> = plan.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["sum", "kept", "reduce", "both", "shape", "expand", "out"]
    );
    let sum = &plan.steps[0];
    assert_eq!(sum.inputs, [Some(2), Some(2)], "both read the source");
    let Op::Fused(f) = &sum.op else {
        unreachable!()
    };
    let part = |index| ViewOp::Split {
        axis: 1,
        sizes: Some(vec![1, 1]),
        outputs: 2,
        index,
    };
    let flip = ViewOp::Slice {
        starts: vec![-1],
        ends: vec![i64::MIN],
        axes: Some(vec![2]),
        steps: Some(vec![-1]),
    };
    let t = ViewOp::Transpose(vec![2, 0, 1]);
    assert_eq!(f.views, [vec![t.clone(), part(0), flip], vec![t, part(1)]]);
    let after = run_on_host(&plan, &x);
    for v in [7, 19] {
        assert_eq!(after[&v], before[&v], "value {v}");
    }
    // Read by a ReduceSum too, the kept Slice stays a step of its own.
    let Op::Fused(both) = &plan.steps[3].op else {
        unreachable!()
    };
    assert!(both.views.iter().all(Vec::is_empty));
}
