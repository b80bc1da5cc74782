//! Progress reporting from the library to whoever runs it.
//!
//! The library only emits [`Event`]s; the binary turns them into indicatif bars, JSON lines or
//! nothing (`--quiet`). Reporters are shared by the pipeline's threads, hence `Sync`.

use serde::Serialize;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Stages of a render. Progress is reported for some; time is measured for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Reading and validating the script.
    Script,
    /// Normalising text.
    Text,
    /// espeak-ng.
    Phonemes,
    /// Finding the face and preparing the rig.
    Face,
    /// Building a CUDA speech engine (once per voice, GPU and precision).
    Engine,
    /// Running the voice model.
    Speech,
    /// Drawing frames.
    Frames,
    /// x264 and chunk writing.
    Encode,
    /// Joining chunks into the MP4.
    Assemble,
}

impl Stage {
    pub const ALL: [Stage; 9] = [
        Stage::Script,
        Stage::Text,
        Stage::Phonemes,
        Stage::Face,
        Stage::Engine,
        Stage::Speech,
        Stage::Frames,
        Stage::Encode,
        Stage::Assemble,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Stage::Script => "script",
            Stage::Text => "text",
            Stage::Phonemes => "phonemes",
            Stage::Face => "face",
            Stage::Engine => "engine",
            Stage::Speech => "speech",
            Stage::Frames => "frames",
            Stage::Encode => "encode",
            Stage::Assemble => "assemble",
        }
    }
}

/// Time spent per stage, summed over threads (so parallel stages can add up to more than the wall).
#[derive(Debug, Default)]
pub struct Clock {
    nanos: [AtomicU64; 9],
}

impl Clock {
    pub fn add(&self, stage: Stage, d: Duration) {
        self.nanos[stage as usize].fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    pub fn seconds(&self, stage: Stage) -> f64 {
        self.nanos[stage as usize].load(Ordering::Relaxed) as f64 * 1e-9
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event {
    /// A stage begins; `total` units of work are expected (0 when unknown or nothing to do).
    Start {
        stage: Stage,
        total: u64,
    },
    /// `done` of the stage's units are finished.
    Advance {
        stage: Stage,
        done: u64,
    },
    Finish {
        stage: Stage,
    },
    /// Something the user should know that does not stop the render.
    Warning {
        message: String,
    },
}

pub trait Progress: Sync {
    fn event(&self, event: Event);
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn event(&self, _: Event) {}
}

/// Runs `work` as `stage`: its start and finish reported and its time on `clock`. A failed stage
/// reports no finish; the error says what happened.
pub fn timed<T, E>(
    progress: &dyn Progress,
    clock: &Clock,
    stage: Stage,
    work: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let t = std::time::Instant::now();
    progress.event(Event::Start { stage, total: 0 });
    let out = work()?;
    clock.add(stage, t.elapsed());
    progress.event(Event::Finish { stage });
    Ok(out)
}
