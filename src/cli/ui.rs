//! What the user sees while talker works: indicatif bars for people, JSON lines for machines,
//! nothing with `--quiet`. Implements the library's [`Progress`].

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use talker::progress::{Event, Progress, Stage};
use talker::{Error, Result};
use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Log lines on stderr: plain text for people, coloured only on a terminal and without
/// `NO_COLOR`; with `--json`, JSON events like the progress ones (nothing else on stderr).
pub fn init_logging(default_filter: &str, json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter.into());
    if json {
        tracing_subscriber::registry()
            .with(JsonLog.with_filter(filter))
            .init();
    } else {
        let colour = std::io::stderr().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        // A log line that cannot be written is dropped: reporting that on stderr, as the
        // subscriber does by default, panics when stderr is the closed pipe.
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .log_internal_errors(false)
            .with_writer(std::io::stderr)
            .with_timer(tracing_subscriber::fmt::time::uptime())
            .with_ansi(colour)
            .init();
    }
}

/// A line on stderr. Logs, progress and warnings must never stop the work, so a stream that is
/// closed or full (a pipe whose reader quit) loses the line, where `eprintln!` would panic.
pub fn eprint_line(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// A command's result on stdout. Unlike a log line, a result that cannot be written (a full
/// disk, a closed pipe) fails the command (exit 1); `what` says what was lost, e.g. that the
/// render itself is complete.
pub fn print_result(text: &str, what: impl FnOnce() -> String) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|source| Error::Stdout {
            what: what(),
            source,
        })
}

/// Writes each log event as one JSON line: warnings and errors as `{"event": "warning"}` (the
/// shape of the progress warnings), the rest as `{"event": "log"}` with their level.
struct JsonLog;

impl<S: tracing::Subscriber> Layer<S> for JsonLog {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut text = Fields(String::new());
        event.record(&mut text);
        let meta = event.metadata();
        let line = if *meta.level() <= tracing::Level::WARN {
            serde_json::json!({"event": "warning", "message": text.0})
        } else {
            serde_json::json!({"event": "log", "level": meta.level().as_str().to_lowercase(),
                "target": meta.target(), "message": text.0})
        };
        eprint_line(&line.to_string());
    }
}

/// An event's message, then its other fields as `name=value`.
struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.insert_str(0, value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

pub enum Ui {
    Quiet,
    Json,
    Bars {
        multi: MultiProgress,
        bars: Mutex<HashMap<&'static str, ProgressBar>>,
    },
}

impl Ui {
    pub fn new(quiet: bool, json: bool) -> Ui {
        if quiet {
            Ui::Quiet
        } else if json {
            Ui::Json
        } else {
            Ui::Bars {
                multi: MultiProgress::new(),
                bars: Mutex::new(HashMap::new()),
            }
        }
    }

    /// A line for a person (not shown with --quiet or --json).
    pub fn say(&self, line: &str) {
        if let Ui::Bars { multi, .. } = self {
            print_line(multi, line);
        }
    }
}

/// Above the bars on a terminal; plainly on stderr when it is not one (indicatif hides itself there).
fn print_line(multi: &MultiProgress, line: &str) {
    if multi.is_hidden() {
        eprint_line(line);
    } else {
        let _ = multi.println(line);
    }
}

fn style(total: u64) -> ProgressStyle {
    let template = if total > 0 {
        "{prefix:>9} {bar:32.cyan/blue} {pos}/{len} {msg} ETA {eta}"
    } else {
        "{prefix:>9} {spinner} {pos} {msg} {elapsed}"
    };
    ProgressStyle::with_template(template)
        .expect("valid template")
        .progress_chars("=> ")
}

fn unit(stage: Stage) -> &'static str {
    match stage {
        Stage::Speech => "sentences",
        Stage::Frames => "frames",
        Stage::Phonemes => "segments",
        Stage::Engine => "build steps",
        _ => "",
    }
}

impl Progress for Ui {
    fn event(&self, event: Event) {
        match self {
            Ui::Quiet => {}
            Ui::Json => {
                if let Ok(line) = serde_json::to_string(&event) {
                    eprint_line(&line);
                }
            }
            Ui::Bars { multi, bars } => {
                let mut bars = bars.lock().expect("progress bars");
                match event {
                    Event::Start { stage, total } => {
                        let bar = multi.add(ProgressBar::new(total));
                        bar.set_style(style(total));
                        bar.set_prefix(stage.label());
                        bar.set_message(unit(stage));
                        bar.enable_steady_tick(Duration::from_millis(200));
                        bars.insert(stage.label(), bar);
                    }
                    Event::Advance { stage, done } => {
                        if let Some(bar) = bars.get(stage.label()) {
                            bar.set_position(done);
                        }
                    }
                    Event::Finish { stage } => {
                        if let Some(bar) = bars.get(stage.label()) {
                            bar.finish();
                        }
                    }
                    Event::Warning { message } => print_line(multi, &format!("warning: {message}")),
                }
            }
        }
    }
}
