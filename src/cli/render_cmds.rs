//! The rendering commands: render, preview, bench (need the `render` feature: FFmpeg and espeak-ng).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use talker::Result;
use talker::assets::Assets;
use talker::look::Framing;
use talker::pipeline::{CacheLocation, RenderOptions, render};
use talker::tts::batch::BatchLimits;

use super::args::{BenchArgs, FramingArg, Global, LookArgs, PreviewArgs, RenderArgs};
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

pub fn render_options(args: &RenderArgs, global: &Global) -> RenderOptions {
    RenderOptions {
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
        threads: threads(args.threads),
        noise: !args.deterministic,
        batch: if args.batch_budget == 0 {
            BatchLimits::SINGLE
        } else {
            BatchLimits {
                token_budget: args.batch_budget,
                max_items: 64,
            }
        },
    }
}

pub fn run_render(args: &RenderArgs, global: &Global, ui: &Ui, cancel: &AtomicBool) -> Result<()> {
    let opts = render_options(args, global);
    let report = render(&opts, ui, cancel)?;
    announce(global, ui, &report, || {
        format!(
            "wrote {} ({:.1} s, {} frames, {}x{}) in {:.1} s: {:.1}x real time; {} of {} chunks reused",
            report.output.display(),
            report.audio_seconds,
            report.frames,
            report.width,
            report.height,
            report.wall_seconds,
            report.audio_seconds / report.wall_seconds.max(1e-9),
            report.chunks_reused,
            report.chunks
        )
    });
    Ok(())
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
    };
    let opts = talker::bench::BenchOptions {
        render: render_options(&render, global),
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
    };
    let report =
        talker::preview::preview(&render_options(&render, global), &args.output, ui, cancel)?;
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
