//! What a render reports: the `--json` result, the queue's metrics and the benchmarks all read
//! it. Built in one place so a video and an audio-only render count the same things the same way.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use crate::media::loudness::Levelled;
use crate::plan::Plan;
use crate::progress::{Clock, Stage};
use crate::speech::{SpeechEngine, SpeechService, SpeechStats};
use crate::tts::select::BackendInfo;

/// What a render did and how long each part took.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RenderReport {
    /// The file written, or with `--split chapters` the directory of `files`.
    pub output: PathBuf,
    /// The subtitle sidecar, with `--subtitles` (each of `files` has its own).
    pub subtitles: Option<PathBuf>,
    /// All that was written (every file of a split output).
    pub bytes: u64,
    pub audio_seconds: f64,
    /// With `--split chapters`: each chapter's file, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PartFile>,
    pub frames: u64,
    pub fps: u32,
    pub width: u32,
    pub height: u32,
    pub chunks: usize,
    pub chunks_reused: usize,
    pub utterances: usize,
    pub phrase_hits: u64,
    /// The speech backend actually used (backend, GPU, precision).
    pub backend: BackendInfo,
    pub speech: SpeechStats,
    /// Seconds the chunk workers waited for speech, summed over workers (the first chunk's wait
    /// included): near zero when speech keeps ahead of drawing and encoding.
    pub speech_wait_seconds: f64,
    pub wall_seconds: f64,
    /// Seconds per stage summed over threads.
    pub stage_seconds: HashMap<&'static str, f64>,
    /// Where on the wall each stage ran: `[from, to]` seconds after the render started, from
    /// its first piece of work to its last (stages that did nothing are left out). Where spans
    /// overlap, the stages ran side by side; the one that ends last is the critical path's tail.
    pub stage_spans: HashMap<&'static str, [f64; 2]>,
    /// CPU seconds the process used during the render (all threads).
    pub cpu_seconds: f64,
    /// `cpu_seconds / wall_seconds`: how many cores the render kept busy on average.
    pub cores_busy_mean: f64,
    /// Audio-only renders with `--loudness`: what was measured and done.
    pub loudness: Option<Levelled>,
}

/// The file a render wrote.
#[derive(Debug, Clone)]
pub struct Written {
    pub output: PathBuf,
    pub subtitles: Option<PathBuf>,
    pub bytes: u64,
    pub audio_seconds: f64,
    pub files: Vec<PartFile>,
}

/// One chapter's file of a `--split chapters` render.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PartFile {
    pub path: PathBuf,
    /// Its track number, from 1.
    pub track: usize,
    /// The chapter's title, its `title` tag.
    pub title: String,
    pub subtitles: Option<PathBuf>,
    pub bytes: u64,
    pub audio_seconds: f64,
}

impl Written {
    /// What a split render wrote in all: its directory, and the sums of its `files`.
    pub fn set(output: PathBuf, files: Vec<PartFile>) -> Written {
        Written {
            output,
            subtitles: None,
            bytes: files.iter().map(|f| f.bytes).sum(),
            audio_seconds: files.iter().map(|f| f.audio_seconds).sum(),
            files,
        }
    }
}

impl RenderReport {
    /// The report of a render without pictures: nothing drawn or reused, and every utterance the
    /// model did not speak a phrase-cache hit. A video render sets its own fields over these.
    pub fn new(
        written: Written,
        plan: &Plan,
        engine: &SpeechEngine,
        service: &SpeechService,
        clock: &Clock,
        started: Instant,
    ) -> RenderReport {
        let wall_seconds = started.elapsed().as_secs_f64();
        let cpu_seconds = clock.cpu_seconds();
        RenderReport {
            output: written.output,
            subtitles: written.subtitles,
            bytes: written.bytes,
            audio_seconds: written.audio_seconds,
            files: written.files,
            frames: 0,
            fps: 0,
            width: 0,
            height: 0,
            chunks: plan.chunks.len(),
            chunks_reused: 0,
            utterances: plan.utterances.len(),
            phrase_hits: (plan.utterances.len() as u64).saturating_sub(engine.stats.synthesized),
            backend: service.info().clone(),
            speech: engine.stats,
            speech_wait_seconds: 0.0,
            wall_seconds,
            stage_seconds: Stage::ALL
                .iter()
                .map(|&s| (s.label(), clock.seconds(s)))
                .collect(),
            stage_spans: Stage::ALL
                .iter()
                .filter_map(|&s| Some((s.label(), clock.span(s)?)))
                .collect(),
            cpu_seconds,
            cores_busy_mean: cpu_seconds / wall_seconds.max(1e-9),
            loudness: None,
        }
    }
}

/// A video render's phrase hits: utterances of the chunks it `rendered` that came from the
/// phrase cache rather than the model (a reused chunk needs no speech at all).
pub fn phrase_hits(plan: &Plan, engine: &SpeechEngine, rendered: &[usize]) -> u64 {
    let needed: u64 = rendered
        .iter()
        .map(|&i| plan.chunk_utterances(&plan.chunks[i]).len() as u64)
        .sum();
    needed.saturating_sub(engine.stats.synthesized)
}
