//! The work the CUDA engine's FP16 plan does per second of audio, counted by the host executor at
//! the shapes each step sees (the same counters `talker engine bench` reports from the GPU):
//! multiply-accumulates and bytes moved through device memory. On a machine without a GPU this
//! says what a planner change saves before the GPU measures its speed.
//!
//! `cargo run --release --example plan_work -- [IDS_FILE] [SENTENCES] [BATCH]`
//! (default tests/data/gpu/ids.json, its first 16 held-out sentences, batches of 8 padded to the
//! longest as the renderer pads them); JSON on stdout.

use std::error::Error;
use std::path::Path;

use talker::assets::Assets;
use talker::tts::cuda::device::check::read_ids;
use talker::tts::cuda::io::Feed;
use talker::tts::cuda::onnx::Model;
use talker::tts::cuda::program::op::{Op, Precision};
use talker::tts::cuda::program::{Plan, precision};
use talker::tts::cuda::reference::{Hooks, HostExecutor};
use talker::tts::voice::{Scales, VoiceConfig, VoiceFiles};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let ids_path = args
        .get(1)
        .map_or("tests/data/gpu/ids.json", String::as_str);
    let count: usize = args.get(2).map_or(Ok(16), |n| n.parse())?;
    let batch: usize = args.get(3).map_or(Ok(8), |n| n.parse())?;
    let ids = read_ids(Path::new(ids_path))?;
    let held = &ids.sentences[ids.calibration..];
    let held = &held[..count.min(held.len())];
    let voice = VoiceFiles::resolve(&ids.voice, &Assets::locate(None).voices_dir())?;
    let config = VoiceConfig::load(&voice.config)?;
    let mut plan = Plan::build(&Model::parse(&std::fs::read(&voice.model)?)?)?;
    precision::assign(&mut plan, Precision::F16, &Default::default());
    let quiet = Scales {
        noise: 0.0,
        length: config.defaults.length,
        noise_w: 0.0,
    };
    let mut exec = HostExecutor::new(&plan, 0);
    let mut samples = 0usize;
    for chunk in held.chunks(batch.max(1)) {
        let refs: Vec<&[i64]> = chunk.iter().map(|s| s.ids.as_slice()).collect();
        let out = exec.run(&Feed::new(&refs, quiet, 0), Hooks::default())?;
        let frames = out.frames.as_i64()?;
        samples += frames.iter().map(|&f| f as usize).sum::<usize>() * config.hop as usize;
    }
    let audio_s = samples as f64 / f64::from(config.sample_rate);
    let steps = |f: fn(&Op) -> bool| plan.steps.iter().filter(|s| f(&s.op)).count();
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "sentences": held.len(), "batch": batch, "audio_seconds": audio_s,
            "steps": plan.steps.len(),
            "fused_steps": steps(|o| matches!(o, Op::Fused(_))),
            "convolutions": steps(|o| matches!(o, Op::Conv(_) | Op::ConvTranspose(_))),
            "macs_per_audio_second": exec.work.macs as f64 / audio_s,
            "bytes_per_audio_second": exec.work.bytes as f64 / audio_s,
        }))?
    );
    Ok(())
}
