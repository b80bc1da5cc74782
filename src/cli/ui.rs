//! What the user sees while talker works: indicatif bars for people, JSON lines for machines,
//! nothing with `--quiet`. Implements the library's [`Progress`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use talker::progress::{Event, Progress, Stage};

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
        eprintln!("{line}");
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
                    eprintln!("{line}");
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
