//! The GPU engines' CPU side on the real voice: the host executor of the compiled plan against
//! ONNX Runtime (what the device executor is traced against on the GPU machine), and the engine
//! CLI on a machine without CUDA (a clear error, never a panic). The device itself is checked by
//! scripts/gpu-check on a GPU machine.

use talker::phonemize::Phonemizer;
use talker::tts::cuda::io::{Feed, split};
use talker::tts::cuda::onnx::Model;
use talker::tts::cuda::program::Plan;
use talker::tts::cuda::quant::snr_db;
use talker::tts::cuda::reference::{Hooks, HostExecutor};
use talker::tts::voice::Scales;

use crate::util::{default_voice, load_model, repo, talker, write_script};

const QUIET: Scales = Scales {
    noise: 0.0,
    length: 1.0,
    noise_w: 0.0,
};

#[test]
fn host_executor_of_the_plan_matches_onnx_runtime() {
    let mut ort = load_model(1);
    let texts = [
        "Hello there, how are you?",
        "The quick brown fox jumps over the lazy dog.",
    ];
    let ids: Vec<Vec<i64>> = texts
        .iter()
        .map(|t| {
            let s = Phonemizer::global()
                .unwrap()
                .phonemize(&ort.config.espeak_voice, t)
                .unwrap();
            ort.config.ids(&s[0]).0
        })
        .collect();
    let refs: Vec<&[i64]> = ids.iter().map(Vec::as_slice).collect();
    let bytes = std::fs::read(default_voice().model).unwrap();
    let plan = Plan::build(&Model::parse(&bytes).unwrap()).unwrap();
    // One padded batch of two: the plan must trim and time each item as ONNX Runtime does.
    let out = HostExecutor::new(&plan, 0)
        .run(&Feed::new(&refs, QUIET, 0), Hooks::default())
        .unwrap();
    let ours = split(&out, &refs, ort.config.hop).unwrap();
    let theirs = ort.synthesize(&refs, QUIET, 0).unwrap();
    assert_eq!(ours.len(), 2);
    // Padded to the next length bucket's edge, as the CUDA engine pads with graphs on: the
    // padding is masked, so durations and audio are those of ONNX Runtime still.
    let edge = talker::tts::cuda::device::exec::padded_width(
        talker::tts::batch::DEFAULT_EDGES,
        refs.iter().map(|r| r.len()).max().unwrap() + 1,
    );
    let padded = HostExecutor::new(&plan, 0)
        .run(&Feed::padded(&refs, edge, QUIET, 0), Hooks::default())
        .unwrap();
    assert_eq!(padded.durations.shape[2], edge);
    let ours_padded = split(&padded, &refs, ort.config.hop).unwrap();
    for ((a, p), b) in ours.iter().zip(&ours_padded).zip(&theirs) {
        assert_eq!(a.id_frames, b.id_frames);
        assert_eq!(p.id_frames, b.id_frames);
        assert_eq!((a.pcm.len(), p.pcm.len()), (b.pcm.len(), b.pcm.len()));
        let snr = snr_db(&b.pcm, &a.pcm);
        assert!(snr > 60.0, "host executor vs ONNX Runtime: {snr:.1} dB");
        let snr = snr_db(&b.pcm, &p.pcm);
        assert!(
            snr > 60.0,
            "padded host executor vs ONNX Runtime: {snr:.1} dB"
        );
    }
}

/// The engine's kernel module for the real voice, in each precision's plan, through NVRTC for
/// the H200 (sm_90) and for a laptop GPU (sm_86): every kernel the executor loads is in the
/// CUBIN. NVRTC needs no GPU; `scripts/fetch-assets --tests` fetches it and `scripts/test` names
/// its folder in `TALKER_TEST_NVRTC`.
/// Every convolution of the real voice's FP16 plan, at the shapes a padded batch of two gives it,
/// maps onto cuDNN descriptors whose output is the host executor's output shape, with the
/// padding, stride and dilation of the plan; only the depthwise ones stay off cuDNN.
#[test]
fn every_convolution_of_the_voice_maps_onto_cudnn_descriptors() {
    use std::collections::HashMap;
    use talker::tts::cuda::program::dnn::dnn_conv;
    use talker::tts::cuda::program::op::{Op, Precision};
    use talker::tts::cuda::program::precision;
    use talker::tts::cuda::tensor::Tensor;

    let bytes = std::fs::read(default_voice().model).unwrap();
    let mut plan = Plan::build(&Model::parse(&bytes).unwrap()).unwrap();
    precision::assign(&mut plan, Precision::F16, &Default::default());
    // BOS, then pad/phoneme pairs (as the engine's warm-up feeds), two lengths in one batch.
    let ids = |n: usize| -> Vec<i64> {
        (0..n)
            .map(|i| match i {
                0 => 1,
                i if i % 2 == 1 => 0,
                i => 20 + (i % 30) as i64,
            })
            .collect()
    };
    let (a, b) = (ids(41), ids(23));
    let refs = [a.as_slice(), b.as_slice()];
    let mut inputs: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut outputs: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut on_input = |i: usize, t: &Tensor| {
        inputs.insert(i, t.shape.clone());
    };
    let mut on_output = |i: usize, t: &Tensor| {
        outputs.entry(i).or_insert_with(|| t.shape.clone());
    };
    HostExecutor::new(&plan, 0)
        .run(
            &Feed::new(&refs, QUIET, 0),
            Hooks {
                conv_input: Some(&mut on_input),
                step_output: Some(&mut on_output),
            },
        )
        .unwrap();
    let (mut mapped, mut transposed, mut depthwise) = (0, 0, 0);
    for (i, step) in plan.steps.iter().enumerate() {
        let (Op::Conv(c) | Op::ConvTranspose(c)) = &step.op else {
            continue;
        };
        let x = &inputs[&i];
        let w = &plan.constants[&step.inputs[1].unwrap()].shape;
        let y = &outputs[&i];
        match dnn_conv(&step.op, x, w) {
            Some(m) => {
                assert_eq!(m.y, [y[0], y[1], 1, y[2]], "step {i} {:?}", step.name);
                assert_eq!(m.x, [x[0], x[1], 1, x[2]], "step {i}");
                assert_eq!(m.w, [w[0], w[1], 1, w[2]], "step {i}");
                assert_eq!(
                    (m.pad, m.stride, m.dilation),
                    (c.pad_begin, c.stride, c.dilation),
                    "step {i}"
                );
                assert_eq!(m.transposed, matches!(step.op, Op::ConvTranspose(_)));
                transposed += usize::from(m.transposed);
                mapped += 1;
            }
            None => {
                assert!(
                    c.group > 1,
                    "step {i} {:?} {c:?} stays off cuDNN",
                    step.name
                );
                depthwise += 1;
            }
        }
    }
    // en_US-joe-medium: the HiFi-GAN decoder's 3 upsamplings and every other ungrouped conv.
    assert_eq!(transposed, 3, "{mapped} mapped, {depthwise} depthwise");
    assert!(
        mapped > 50 && depthwise > 0,
        "{mapped} mapped, {depthwise} depthwise"
    );
}

/// The FP16 engine's plan stores the decoder's activations as FP16 and nothing else: the text
/// encoder, duration predictor and flow keep FP32, as do the graph's outputs; the FP32 engine
/// marks none. The marks pass the check an engine file's plan gets when it is read.
#[test]
fn an_fp16_engine_stores_only_decoder_activations_as_fp16() {
    use talker::tts::cuda::device::build::engine_plan;
    use talker::tts::cuda::program::op::Precision;

    let bytes = std::fs::read(default_voice().model).unwrap();
    let base = Plan::build(&Model::parse(&bytes).unwrap()).unwrap();
    let (fp32, _, none) = engine_plan(base.clone(), Precision::F32, &Default::default());
    assert_eq!(none, 0);
    assert!(fp32.values.iter().all(|v| !v.half));
    let (plan, counts, marked) = engine_plan(base, Precision::F16, &Default::default());
    plan.validate().unwrap();
    assert_eq!(marked, plan.values.iter().filter(|v| v.half).count());
    // Every step of the decoder's conv stack writes one activation: far more than a handful.
    assert!(
        marked > 40 && counts.f16 > 40,
        "{marked} marked, {counts:?}"
    );
    for s in &plan.steps {
        for &v in &s.outputs {
            assert!(
                !plan.values[v].half || s.name.starts_with("/dec/"),
                "{} outside the decoder marked FP16",
                s.name
            );
        }
    }
    let o = plan.outputs;
    assert!(
        [o.audio, o.durations, o.frames]
            .iter()
            .all(|&v| !plan.values[v].half)
    );
}

#[test]
fn every_kernel_the_engine_loads_compiles_under_nvrtc() {
    use talker::tts::cuda::device::build::{compile, engine_plan};
    use talker::tts::cuda::device::kernels::{kernel_names, module_source};
    use talker::tts::cuda::program::op::Precision;

    let dir = std::env::var("TALKER_TEST_NVRTC").unwrap_or_else(|_| {
        panic!(
            "TALKER_TEST_NVRTC is not set: run scripts/test, which fetches NVRTC with \
             scripts/fetch-assets --tests and names its folder"
        )
    });
    // Loaded by path and kept global, so cudarc's own dlopen of the soname finds it (and NVRTC
    // its builtins) without LD_LIBRARY_PATH.
    let _libs: Vec<libloading::os::unix::Library> = ["libnvrtc-builtins.so.13.5", "libnvrtc.so.13"]
        .iter()
        .map(|f| {
            let path = std::path::Path::new(&dir).join(f);
            // SAFETY: NVRTC's initialisers only set up the library itself.
            unsafe {
                libloading::os::unix::Library::open(
                    Some(&path),
                    libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
                )
            }
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .collect();
    let bytes = std::fs::read(default_voice().model).unwrap();
    let base = Plan::build(&Model::parse(&bytes).unwrap()).unwrap();
    let mut compiled = Vec::new();
    for p in [Precision::F32, Precision::F16] {
        let (plan, _, _) = engine_plan(base.clone(), p, &Default::default());
        let (src, fused) = module_source(&plan);
        // Precisions whose plans generate the same source compile once.
        if compiled.contains(&src) {
            continue;
        }
        compiled.push(src.clone());
        for cc in [(9, 0), (8, 6)] {
            let cubin =
                compile(&src, cc).unwrap_or_else(|e| panic!("{p:?} sm_{}{}: {e}", cc.0, cc.1));
            for name in kernel_names(&fused) {
                let symbol = [b"\0", name.as_bytes(), b"\0"].concat();
                assert!(
                    cubin.windows(symbol.len()).any(|w| w == symbol),
                    "{p:?} sm_{}{}: no kernel {name} in the CUBIN",
                    cc.0,
                    cc.1
                );
            }
        }
    }
}

#[test]
fn engine_commands_without_a_gpu_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let ids = dir.path().join("ids.json");
    std::fs::write(
        &ids,
        r#"{"voice":"en_US-joe-medium","calibration":1,"sentences":[{"text":"a","ids":[1,0,20,0,2]},{"text":"b","ids":[1,0,21,0,2]}]}"#,
    )
    .unwrap();
    let o = talker(dir.path())
        .args(["engine", "build", "--precision", "fp16", "--engines"])
        .arg(dir.path().join("engines"))
        .arg("--ids")
        .arg(&ids)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    if talker::tts::cuda::device::libraries_present().is_err() {
        assert!(!o.status.success());
        assert!(stderr.contains("no usable GPU"), "{stderr}");
    }
    // A malformed ids file is refused before any GPU work.
    std::fs::write(&ids, "{}").unwrap();
    let o = talker(dir.path())
        .args(["engine", "validate", "--precision", "int8", "--ids"])
        .arg(&ids)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an ids file"));
    // --save-audio never overwrites an earlier run's WAVs: bad input, before any work.
    let audio = dir.path().join("audio");
    std::fs::create_dir_all(audio.join("fp16")).unwrap();
    std::fs::write(audio.join("fp16").join("0.wav"), b"mine").unwrap();
    let o = talker(dir.path())
        .args(["engine", "validate", "--precision", "fp16", "--save-audio"])
        .arg(&audio)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("already holds files"), "{stderr}");
    assert_eq!(
        std::fs::read(audio.join("fp16").join("0.wav")).unwrap(),
        b"mine"
    );
    // A CUDA-graphs switch that is neither on nor off: bad input, before any GPU work.
    let o = talker(dir.path())
        .env("TALKER_CUDA_GRAPHS", "maybe")
        .args(["engine", "bench", "--passes", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("TALKER_CUDA_GRAPHS"), "{stderr}");
    let o = talker(dir.path())
        .args([
            "engine",
            "validate",
            "--precision",
            "fp16",
            "--graphs",
            "both",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // So is a convolution switch that is neither auto, gemm nor cudnn, for every engine command.
    for cmd in ["build", "validate", "bench"] {
        let o = talker(dir.path())
            .env("TALKER_CUDA_CONV", "fast")
            .args(["engine", cmd, "--precision", "fp16"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {stderr}");
        assert!(stderr.contains("TALKER_CUDA_CONV=fast"), "{cmd}: {stderr}");
    }
}

/// `--backend cuda` on a machine without a usable GPU (CI): exit 1 with a message that says what
/// to do, before any work (no output, no queue), never a panic. A bad `$TALKER_BACKEND` is bad
/// input (exit 2).
#[test]
fn backend_cuda_without_a_gpu_fails_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "s.json", r#"{"segments": [{"text": "Hi."}]}"#);
    let out = dir.path().join("o.mp4");
    let render = |extra: &[&str], env: Option<&str>| {
        let mut c = talker(dir.path());
        c.args(["render", "-o"])
            .arg(&out)
            .arg(&script)
            .arg(repo("examples/portrait.png"))
            .args(extra);
        if let Some(v) = env {
            c.env("TALKER_BACKEND", v);
        }
        c.output().unwrap()
    };
    let o = render(&[], Some("tpu"));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("$TALKER_BACKEND"));
    if talker::tts::cuda::device::probe().is_ok() {
        return; // a GPU machine: `cuda` works there (scripts/gpu-render measures it)
    }
    for o in [
        render(&["--backend", "cuda"], None),
        render(&[], Some("cuda")),
    ] {
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(
            stderr.contains("--backend cuda: no usable GPU") && stderr.contains("--backend cpu"),
            "{stderr}"
        );
        assert!(!out.exists());
    }
    let jobs = dir.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::fs::write(jobs.join("a.json"), "{}").unwrap();
    let o = talker(dir.path())
        .args(["batch", "--backend", "cuda", "--queue"])
        .arg(dir.path().join("q.sqlite"))
        .arg(&jobs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no usable GPU"));
    assert!(
        !dir.path().join("q.sqlite").exists(),
        "nothing was enqueued"
    );
}
