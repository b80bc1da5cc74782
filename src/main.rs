//! `talker`: parses arguments, runs one command, and turns its result into an exit code.

mod cli;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use cli::args::{Cli, Command};
use cli::ui::Ui;

/// Large buffers go straight to mmap and back to the system when freed, and few malloc arenas are
/// kept: otherwise glibc holds on to freed buffers in per-thread arenas. ONNX Runtime's own arena
/// keeps the model's activations, so this costs synthesis nothing (measured: peak RSS of a 4-minute
/// render 331 → 316 MB, at equal speed). Memory freed during a speech call (output copies, buffers
/// outside ONNX Runtime's arena) goes back to the system after each call, so it does not pile up
/// in glibc's arenas over a long script.
fn bound_heap() {
    // SAFETY: mallopt only changes allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
    talker::tts::batcher::after_each_call(release_freed_memory);
}

fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; no pointer is invalidated.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn main() -> ExitCode {
    bound_heap();
    let cli = Cli::parse();
    // Libraries' own lines (sqlx's "slow statement" warnings) are not for people: off unless
    // RUST_LOG or -vv asks for them.
    let filter = match cli.global.verbose {
        0 if cli.global.quiet => "error,sqlx=off",
        0 => "warn,sqlx=off",
        1 => "info,talker=debug,sqlx=off",
        _ => "debug",
    };
    cli::ui::init_logging(filter, cli.global.json);

    // SIGINT/SIGTERM ask a render (or a worker) to stop; partial files are removed. A second
    // signal to a render ends it at once (130). Commands that never look at the flag keep the
    // default action, so a signal always stops the process.
    let cancel = Arc::new(AtomicBool::new(false));
    if cli.command.watches_signals() {
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            if cli.command.renders() {
                let _ = signal_hook::flag::register_conditional_shutdown(
                    signal,
                    130,
                    Arc::clone(&cancel),
                );
            }
            let _ = signal_hook::flag::register(signal, Arc::clone(&cancel));
        }
    }

    let ui = Ui::new(cli.global.quiet, cli.global.json);
    let result: cli::error::Result<()> = match &cli.command {
        #[cfg(feature = "render")]
        Command::Render(args) => {
            cli::render_cmds::run_render(args, &cli.global, &ui, &cancel).map_err(Into::into)
        }
        #[cfg(feature = "render")]
        Command::Preview(args) => {
            cli::render_cmds::run_preview(args, &cli.global, &ui, &cancel).map_err(Into::into)
        }
        #[cfg(feature = "render")]
        Command::Bench(args) => cli::render_cmds::run_bench(args, &cli.global).map_err(Into::into),
        #[cfg(feature = "render")]
        Command::Script {
            action: cli::args::ScriptAction::Convert(args),
        } => cli::render_cmds::run_convert(args, &cli.global, &ui).map_err(Into::into),
        Command::Cache { action } => {
            cli::commands::run_cache(action, &cli.global, &ui).map_err(Into::into)
        }
        #[cfg(feature = "render")]
        Command::Audio {
            action: cli::args::AudioAction::Check(args),
        } => cli::audio::run_check(args, &cli.global).map_err(Into::into),
        #[cfg(feature = "render")]
        Command::Enqueue(args) => cli::queue::run_enqueue(args, &cli.global),
        #[cfg(feature = "render")]
        Command::Batch(args) => cli::queue::run_batch(args, &cli.global, &cancel),
        #[cfg(feature = "render")]
        Command::Worker(args) => cli::queue::run_worker(args, &cli.global, &cancel),
        #[cfg(feature = "render")]
        Command::Status(args) => cli::queue::run_status(args, &cli.global),
        #[cfg(feature = "render")]
        Command::Cancel(args) => cli::queue::run_cancel(args, &cli.global),
        #[cfg(feature = "render")]
        Command::Retry(args) => cli::queue::run_retry(args, &cli.global),
        #[cfg(feature = "cuda")]
        Command::Engine { action } => {
            cli::engine::run_engine(action, &cli.global).map_err(Into::into)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let chain = e.chain();
            if cli.global.json {
                let v = serde_json::json!({"event": "error", "message": chain.join(": "), "exit_code": e.exit_code()});
                cli::ui::eprint_line(&v.to_string());
            } else {
                cli::ui::eprint_line(&format!("talker: {}", chain[0]));
                for cause in &chain[1..] {
                    cli::ui::eprint_line(&format!("  caused by: {cause}"));
                }
            }
            ExitCode::from(e.exit_code())
        }
    }
}
