//! Progress reporting from the library to whoever runs it.
//!
//! The library only emits [`Event`]s; the binary turns them into indicatif bars, JSON lines or
//! nothing (`--quiet`). Reporters are shared by the pipeline's threads, hence `Sync`.

use serde::Serialize;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

/// Time spent per stage, summed over threads (so parallel stages can add up to more than the wall),
/// and the span each stage covered: from its first piece of work to its last, in seconds since
/// the clock was made (where on the wall a stage ran, and so which stages overlapped).
#[derive(Debug)]
pub struct Clock {
    origin: Instant,
    /// The process's CPU seconds when the clock was made.
    cpu_at_origin: f64,
    nanos: [AtomicU64; 9],
    first: [AtomicU64; 9],
    last: [AtomicU64; 9],
}

impl Default for Clock {
    fn default() -> Clock {
        Clock {
            origin: Instant::now(),
            cpu_at_origin: process_cpu_seconds(),
            nanos: Default::default(),
            first: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
            last: Default::default(),
        }
    }
}

impl Clock {
    /// `d` of work on `stage` that ended now.
    pub fn add(&self, stage: Stage, d: Duration) {
        let i = stage as usize;
        let d = d.as_nanos() as u64;
        self.nanos[i].fetch_add(d, Ordering::Relaxed);
        let end = self.origin.elapsed().as_nanos() as u64;
        self.first[i].fetch_min(end.saturating_sub(d), Ordering::Relaxed);
        self.last[i].fetch_max(end, Ordering::Relaxed);
    }

    pub fn seconds(&self, stage: Stage) -> f64 {
        self.nanos[stage as usize].load(Ordering::Relaxed) as f64 * 1e-9
    }

    /// CPU seconds the whole process used since the clock was made (every thread; a worker's
    /// concurrent renders count together).
    pub fn cpu_seconds(&self) -> f64 {
        process_cpu_seconds() - self.cpu_at_origin
    }

    /// `[from, to]` seconds since the clock started, `None` for a stage that did no work.
    pub fn span(&self, stage: Stage) -> Option<[f64; 2]> {
        let i = stage as usize;
        let first = self.first[i].load(Ordering::Relaxed);
        (first != u64::MAX).then(|| {
            [
                first as f64 * 1e-9,
                self.last[i].load(Ordering::Relaxed) as f64 * 1e-9,
            ]
        })
    }
}

/// CPU seconds used by this process so far (user and system, all threads).
pub fn process_cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
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
