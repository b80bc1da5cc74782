//! Would FP16 activations keep the CUDA engine's FP16 audio above its 30 dB gate? The host
//! executor of the FP16 plan (FP16 GEMM operands, as the engine runs them) against ONNX Runtime
//! on the CPU: with FP32 activations, with the outputs of every step of a part of the model
//! rounded to FP16 as they are stored, and with the values the engine stores as FP16
//! (`precision::half_activations`, which the host executor rounds as the device does), sentence
//! by sentence at batch 1.
//!
//! `cargo run --release --example fp16_activations -- [IDS_FILE] [SENTENCES] [VARIANTS]`
//! (default tests/data/gpu/ids.json, its first 24 held-out sentences, every variant; VARIANTS
//! picks some by index, e.g. `3` or `0,3`); JSON on stdout.

use std::error::Error;
use std::path::Path;

use talker::assets::Assets;
use talker::tts::cuda::device::check::read_ids;
use talker::tts::cuda::io::{Feed, split};
use talker::tts::cuda::onnx::Model;
use talker::tts::cuda::program::op::Precision;
use talker::tts::cuda::program::{Plan, precision};
use talker::tts::cuda::quant::snr_db;
use talker::tts::cuda::reference::{Hooks, HostExecutor};
use talker::tts::onnx::PiperModel;
use talker::tts::voice::{Scales, VoiceFiles};

const QUIET: Scales = Scales {
    noise: 0.0,
    length: 1.0,
    noise_w: 0.0,
};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let ids_path = args
        .get(1)
        .map_or("tests/data/gpu/ids.json", String::as_str);
    let count: usize = args.get(2).map_or(Ok(24), |n| n.parse())?;
    let ids = read_ids(Path::new(ids_path))?;
    let held = &ids.sentences[ids.calibration..];
    let held = &held[..count.min(held.len())];

    let assets = Assets::locate(None);
    let voice = VoiceFiles::resolve(&ids.voice, &assets.voices_dir())?;
    let mut ort = PiperModel::load(&voice, &assets.onnxruntime_library()?, 2)?;
    let mut plan = Plan::build(&Model::parse(&std::fs::read(&voice.model)?)?)?;
    precision::assign(&mut plan, Precision::F16, &Default::default());
    let part = |prefixes: &[&str]| -> Vec<usize> {
        (0..plan.steps.len())
            .filter(|&i| prefixes.iter().any(|p| plan.steps[i].name.starts_with(p)))
            .collect()
    };
    let mut marked = plan.clone();
    precision::half_activations(&mut marked);
    let variants: [(&str, &Plan, Vec<usize>); 4] = [
        ("fp32 activations", &plan, Vec::new()),
        ("decoder activations fp16", &plan, part(&["/dec/"])),
        (
            "flow and decoder activations fp16",
            &plan,
            part(&["/dec/", "/flow/"]),
        ),
        (
            "the engine's fp16 activations (precision::half_activations)",
            &marked,
            Vec::new(),
        ),
    ];

    let picked: Vec<usize> = match args.get(3) {
        Some(list) => list.split(',').map(str::parse).collect::<Result<_, _>>()?,
        None => (0..variants.len()).collect(),
    };
    let mut rows = Vec::new();
    for (name, plan, steps) in picked.iter().filter_map(|&i| variants.get(i)) {
        let mut exec = HostExecutor::new(plan, 0);
        exec.stored_f16 = steps.iter().copied().collect();
        let (mut snrs, mut same_durations) = (Vec::new(), 0);
        for s in held {
            let batch = [s.ids.as_slice()];
            let out = exec.run(&Feed::new(&batch, QUIET, 0), Hooks::default())?;
            let ours = split(&out, &batch, ort.config.hop)?;
            let theirs = ort.synthesize(&batch, QUIET, 0)?;
            same_durations += usize::from(ours[0].id_frames == theirs[0].id_frames);
            snrs.push(snr_db(&theirs[0].pcm, &ours[0].pcm));
        }
        snrs.sort_by(f64::total_cmp);
        rows.push(serde_json::json!({
            "variant": name, "steps_stored_fp16": steps.len(),
            "values_marked_fp16": plan.values.iter().filter(|v| v.half).count(),
            "sentences": held.len(),
            "durations_identical": same_durations, "snr_db_min": snrs[0],
            "snr_db_p5": snrs[snrs.len() / 20], "snr_db_median": snrs[snrs.len() / 2],
            "gate_30_db": snrs[0] >= 30.0,
        }));
    }
    println!("{}", serde_json::to_string_pretty(&rows)?);
    Ok(())
}
