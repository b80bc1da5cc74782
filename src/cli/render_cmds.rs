//! The rendering commands: render, preview, bench (need the `render` feature: FFmpeg and espeak-ng).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use std::time::Duration;

use talker::Result;
use talker::assets::Assets;
use talker::look::Framing;
use talker::pipeline::{CacheLocation, RenderOptions, RenderReport, render};
use talker::speech::SpeechService;
use talker::tts::batch::BatchLimits;
use talker::tts::select::{self, BackendChoice, SpeechSetup};

use super::args::{
    BackendArg, BenchArgs, FramingArg, Global, LookArgs, PrecisionArg, PreviewArgs, RenderArgs,
    SpeechArgs,
};
use super::commands::cache_dir;
use super::ui::Ui;

fn default_output(script: &Path) -> PathBuf {
    script.with_extension("mp4")
}

pub fn threads(requested: Option<u16>) -> usize {
    requested.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    )
}

/// `--backend` and friends, with `$TALKER_BACKEND` as the default; `lanes` CPU model calls at
/// once, `threads` ONNX Runtime threads each.
pub fn speech_setup(
    args: &SpeechArgs,
    global: &Global,
    threads: usize,
    lanes: usize,
    cpu_limits: BatchLimits,
) -> Result<SpeechSetup> {
    let backend = match args.backend {
        Some(BackendArg::Auto) => BackendChoice::Auto,
        Some(BackendArg::Cpu) => BackendChoice::Cpu,
        Some(BackendArg::Cuda) => BackendChoice::Cuda,
        None => BackendChoice::from_env()?.unwrap_or_default(),
    };
    let assets = Assets::locate(global.assets.as_deref());
    Ok(SpeechSetup {
        backend,
        precision: args.precision.into(),
        engines: args
            .engines
            .clone()
            .unwrap_or_else(|| cache_dir(global).join("engines")),
        onnxruntime: assets.onnxruntime_library().map_err(|e| e.to_string()),
        threads,
        cpu_lanes: lanes,
        cpu_limits,
        gpu_limits: select::GPU_LIMITS,
        max_wait: Duration::from_millis(args.max_batch_wait_ms),
    })
}

/// Starts the speech service and says, in one line, why `auto` speaks on the CPU when it does.
pub fn start_speech(setup: &SpeechSetup, ui: &Ui) -> Result<SpeechService> {
    let service = SpeechService::start(setup)?;
    if let Some(note) = service.note() {
        ui.say(note);
    }
    Ok(service)
}

pub fn render_options(args: &RenderArgs, global: &Global) -> Result<RenderOptions> {
    let threads = threads(args.threads);
    let cpu_limits = if args.batch_budget == 0 {
        BatchLimits::SINGLE
    } else {
        BatchLimits {
            token_budget: args.batch_budget,
            max_items: 64,
        }
    };
    Ok(RenderOptions {
        script: args.script.clone(),
        portrait: args.portrait.clone(),
        output: args
            .output
            .clone()
            .unwrap_or_else(|| default_output(&args.script)),
        assets: Assets::locate(global.assets.as_deref()),
        cache: if args.no_cache {
            CacheLocation::Temporary
        } else {
            CacheLocation::Dir(cache_dir(global))
        },
        voice: args.voice.clone(),
        size: args.look.size,
        fps: args.look.fps,
        framing: match args.look.framing {
            FramingArg::Full => Framing::Full,
            FramingArg::Head => Framing::Head,
        },
        still: args.look.still,
        seed: args.look.seed,
        crf: args.crf,
        preset: args.preset.clone(),
        threads,
        noise: !args.deterministic,
        speech: speech_setup(&args.speech, global, threads, 1, cpu_limits)?,
    })
}

pub fn run_render(args: &RenderArgs, global: &Global, ui: &Ui, cancel: &AtomicBool) -> Result<()> {
    let opts = render_options(args, global)?;
    let service = start_speech(&opts.speech, ui)?;
    let report = render(&opts, &service, ui, cancel)?;
    announce(global, ui, &report, || {
        format!(
            "wrote {} ({:.1} s, {} frames, {}x{}) in {:.1} s: {:.1}x real time; {} of {} chunks reused; {}",
            report.output.display(),
            report.audio_seconds,
            report.frames,
            report.width,
            report.height,
            report.wall_seconds,
            report.audio_seconds / report.wall_seconds.max(1e-9),
            report.chunks_reused,
            report.chunks,
            speech_line(&report)
        )
    });
    Ok(())
}

/// "speech on cuda (NVIDIA H200, fp16): 12 calls, 9.5 sentences per call, 0.8 s in the model,
/// chunk workers waited 0.1 s for it".
pub fn speech_line(report: &RenderReport) -> String {
    let s = &report.speech;
    format!(
        "speech on {}: {} calls, {:.1} sentences per call, {:.2} s in the model, chunk workers waited {:.2} s for it",
        report.backend.describe(),
        s.batches,
        s.mean_batch_items,
        s.model_seconds,
        report.speech_wait_seconds
    )
}

pub fn run_bench(args: &BenchArgs, global: &Global) -> Result<()> {
    let render = RenderArgs {
        script: args.script.clone(),
        portrait: args.portrait.clone(),
        output: None,
        voice: None,
        look: LookArgs {
            size: None,
            fps: None,
            framing: FramingArg::Full,
            still: false,
            seed: 0,
        },
        crf: 20,
        preset: "veryfast".into(),
        threads: args.threads,
        batch_budget: 0,
        deterministic: false,
        no_cache: false,
        speech: args.speech.clone(),
    };
    let opts = talker::bench::BenchOptions {
        render: render_options(&render, global)?,
        tts_script: args.tts_script.clone(),
        piper_python: args.piper_python.clone(),
    };
    let report = talker::bench::run(&opts)?;
    println!(
        "{}",
        serde_json::to_string_pretty(&report).expect("report serialises")
    );
    Ok(())
}

pub fn run_preview(
    args: &PreviewArgs,
    global: &Global,
    ui: &Ui,
    cancel: &AtomicBool,
) -> Result<()> {
    let render = RenderArgs {
        script: args.script.clone(),
        portrait: args.portrait.clone(),
        output: Some(args.output.clone()),
        voice: args.voice.clone(),
        look: args.look.clone(),
        crf: 20,
        preset: "veryfast".into(),
        threads: None,
        batch_budget: 0,
        deterministic: false,
        no_cache: false,
        speech: SpeechArgs {
            backend: Some(BackendArg::Cpu),
            precision: PrecisionArg::Fp32,
            engines: None,
            max_batch_wait_ms: 0,
        },
    };
    let report =
        talker::preview::preview(&render_options(&render, global)?, &args.output, ui, cancel)?;
    announce(global, ui, &report, || {
        format!(
            "wrote {}: {} cells, {} of 15 visemes taken from the script's speech",
            args.output.display(),
            report.cells,
            report.found_in_script
        )
    });
    Ok(())
}

/// A command's result: one JSON object on stdout with `--json`, a sentence for people otherwise.
fn announce<T: serde::Serialize>(
    global: &Global,
    ui: &Ui,
    report: &T,
    say: impl FnOnce() -> String,
) {
    if global.json {
        println!(
            "{}",
            serde_json::to_string(report).expect("report serialises")
        );
    } else if !global.quiet {
        ui.say(&say());
    }
}
