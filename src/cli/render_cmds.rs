//! The rendering commands: render, preview, bench (need the `render` feature: FFmpeg and espeak-ng).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use talker::assets::Assets;
use talker::cache::CacheLocation;
use talker::pipeline;
use talker::progress::{Event, Progress};
use talker::report::RenderReport;
use talker::settings::{RenderOptions, RenderSettings};
use talker::speech::SpeechService;
use talker::tts::batch::BatchLimits;
use talker::tts::select::SpeechSetup;
use talker::{Error, Result};

use super::args::{BenchArgs, ConvertArgs, PreviewArgs, RenderArgs};
use super::common::{
    BackendArg, Global, PrecisionArg, SpeechArgs, cache_dir, precision_ignored, speech_setup,
};
use super::ui::{Ui, print_result};

/// The script's name with `.mp4`, or for a split output (a directory) with no extension.
fn default_output(script: &Path, split: bool) -> PathBuf {
    script.with_extension(if split { "" } else { "mp4" })
}

pub fn threads(requested: Option<u16>) -> usize {
    requested.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    )
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
        portrait: args.portrait.clone().unwrap_or_default(),
        output: args
            .output
            .clone()
            .unwrap_or_else(|| default_output(&args.script, args.settings.split.is_some())),
        assets: Assets::locate(global.assets.as_deref()),
        cache: if args.no_cache {
            CacheLocation::Temporary
        } else {
            CacheLocation::Dir(cache_dir(global))
        },
        settings: args.settings.clone(),
        threads,
        pool: None,
        speech: {
            let lanes = args.speech_lanes.map(usize::from);
            let (lanes, intra) = talker::tts::select::cpu_split(threads, lanes);
            SpeechSetup {
                // This process runs one render: nobody after it to warm up for.
                warm_up: false,
                ..speech_setup(&args.speech, global, intra, lanes, cpu_limits)?
            }
        },
    })
}

pub fn run_render(args: &RenderArgs, global: &Global, ui: &Ui, cancel: &AtomicBool) -> Result<()> {
    let opts = render_options(args, global)?;
    let service = start_speech(&opts.speech, ui)?;
    if let Some(message) = precision_ignored(&args.speech, &service) {
        ui.event(Event::Warning { message });
    }
    let report = pipeline::run(&opts, &service, ui, cancel)?;
    let written = match report.files.len() {
        0 => report.output.display().to_string(),
        n => format!("{n} files in {}", report.output.display()),
    };
    announce(global, ui, &report, &report.output, || {
        if report.frames == 0 {
            return format!(
                "wrote {written} ({:.1} s of audio) in {:.1} s: {:.1}x real time{}",
                report.audio_seconds,
                report.wall_seconds,
                report.audio_seconds / report.wall_seconds.max(1e-9),
                report
                    .subtitles
                    .as_ref()
                    .map(|s| format!("; subtitles {}", s.display()))
                    .unwrap_or_default()
            );
        }
        format!(
            "wrote {written} ({:.1} s, {} frames, {}x{}) in {:.1} s: {:.1}x real time; {} of {} chunks reused; {}",
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
    })
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
        portrait: Some(args.portrait.clone()),
        output: None,
        settings: RenderSettings::default(),
        threads: args.threads,
        speech_lanes: None,
        batch_budget: 0,
        no_cache: false,
        speech: args.speech.clone(),
    };
    let opts = talker::bench::BenchOptions {
        render: render_options(&render, global)?,
        tts_script: args.tts_script.clone(),
        piper_python: args.piper_python.clone(),
    };
    let report = talker::bench::run(&opts)?;
    print_result(
        &serde_json::to_string_pretty(&report).expect("report serialises"),
        || "the benchmark report".to_owned(),
    )
}

pub fn run_preview(
    args: &PreviewArgs,
    global: &Global,
    ui: &Ui,
    cancel: &AtomicBool,
) -> Result<()> {
    let render = RenderArgs {
        script: args.script.clone(),
        portrait: Some(args.portrait.clone()),
        output: Some(args.output.clone()),
        settings: RenderSettings {
            voice: args.voice.clone(),
            look: args.look.clone(),
            ..RenderSettings::default()
        },
        threads: None,
        speech_lanes: None,
        batch_budget: 0,
        no_cache: false,
        speech: SpeechArgs {
            backend: Some(BackendArg::Cpu),
            precision: Some(PrecisionArg::Fp32),
            engines: None,
            max_batch_wait_ms: 0,
        },
    };
    let report =
        talker::preview::preview(&render_options(&render, global)?, &args.output, ui, cancel)?;
    announce(global, ui, &report, &args.output, || {
        format!(
            "wrote {}: {} cells, {} of 15 visemes taken from the script's speech",
            args.output.display(),
            report.cells,
            report.found_in_script
        )
    })
}

/// `talker script convert`: the book's script as JSON, atomically, never over an existing file
/// unless asked.
pub fn run_convert(args: &ConvertArgs, global: &Global, ui: &Ui) -> Result<()> {
    // The output is checked as `render` checks its own, so `--force` only ever replaces a
    // regular file that is none of the inputs.
    let named = talker::guard::script_lexicon(&args.input);
    let mut inputs = vec![("input", args.input.as_path())];
    inputs.extend(
        named
            .iter()
            .map(|l| ("lexicon the input names", l.as_path())),
    );
    inputs.extend(args.lexicon.iter().map(|l| ("lexicon", l.as_path())));
    talker::guard::check_output(&args.output, &inputs)?;
    let (mut script, notes) = talker::book::load_script(&args.input, &args.book)?;
    for path in &args.lexicon {
        let more = talker::lexicon::Lexicon::load(path)?;
        script
            .lexicon
            .get_or_insert_with(Default::default)
            .merge(more);
    }
    for note in &notes {
        ui.event(Event::Warning {
            message: note.clone(),
        });
    }
    if script.cover.is_some() {
        ui.event(Event::Warning {
            message: format!(
                "{}: the book's cover image is not part of the JSON script; render the JSON with --cover IMAGE to keep it",
                args.input.display()
            ),
        });
    }
    if args.output.exists() && !args.force {
        return Err(Error::Usage(format!(
            "{} exists; choose another -o path or pass --force to replace it",
            args.output.display()
        )));
    }
    let text = serde_json::to_string_pretty(&script.to_json()).expect("scripts serialise") + "\n";
    write_atomically(&args.output, text.as_bytes())?;
    let chapters = script
        .segments
        .iter()
        .filter(|s| s.chapter.is_some())
        .count();
    let report = serde_json::json!({
        "output": args.output,
        "segments": script.segments.len(),
        "chapters": chapters,
        "title": script.title,
        "author": script.author,
        "notes": notes,
    });
    announce(global, ui, &report, &args.output, || {
        format!(
            "wrote {}: {} segments, {chapters} chapters",
            args.output.display(),
            script.segments.len()
        )
    })
}

/// Temp file beside `path`, fsync, rename: `path` is only ever complete.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(Error::io(dir))?;
    // A script is the user's to read and edit, not a private temp file (mode 0600).
    let readable = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    temp.write_all(bytes)
        .and_then(|()| temp.as_file().set_permissions(readable))
        .and_then(|()| temp.as_file().sync_all())
        .map_err(Error::io(path))?;
    temp.persist(path).map_err(|e| Error::io(path)(e.error))?;
    Ok(())
}

/// A command's result: one JSON object on stdout with `--json`, a sentence for people otherwise.
/// `written` is the finished file, named when the report cannot be printed.
fn announce<T: serde::Serialize>(
    global: &Global,
    ui: &Ui,
    report: &T,
    written: &Path,
    say: impl FnOnce() -> String,
) -> Result<()> {
    if global.json {
        let text = serde_json::to_string(report).expect("report serialises");
        print_result(&text, || {
            format!("the report ({} is complete)", written.display())
        })?;
    } else if !global.quiet {
        ui.say(&say());
    }
    Ok(())
}
