//! Audio-only renders (`.m4b`, `.m4a`, `.wav`): script → speech → one audio file, no portrait.
//!
//! The face, frame and chunk-video stages are skipped. Speech goes a window of chunks at a time
//! from the phrase cache or the voice straight into the streaming writer, so memory stays that of
//! one window whatever the book's length; chapters and subtitle cues are timed on the same
//! sample clock as the audio written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::{
    RenderOptions, RenderReport, chapter_list, chunk_audio, load_inputs, open_cache, speak,
};
use crate::error::{Error, Result};
use crate::media::{self, AudioFormat, AudioMeta, AudioWriter, Cue};
use crate::progress::{Clock, Event, Progress, Stage};

/// Chunks (about 20–30 s of speech each) synthesised before their audio is written.
const WINDOW_CHUNKS: usize = 8;

pub(super) fn render_audio(
    opts: &RenderOptions,
    format: AudioFormat,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<RenderReport> {
    let wall = Instant::now();
    let clock = Clock::default();
    let (script, mut engine) = load_inputs(opts, progress, &clock)?;
    let plan = super::build_plan(&script, &engine, progress, &clock)?;
    let (cache, _temp) = open_cache(&opts.cache, &opts.output, progress)?;

    // A chapter starts at the first chunk of each segment that has a title.
    let mut seen = None;
    let chapter_at: Vec<Option<String>> = plan
        .chunks
        .iter()
        .map(|c| {
            let first = seen != Some(c.segment);
            seen = Some(c.segment);
            plan.chapters[c.segment].clone().filter(|_| first)
        })
        .collect();
    let meta = AudioMeta {
        title: script.title.clone(),
        author: script.author.clone(),
        chapter_titles: chapter_at.iter().flatten().cloned().collect(),
    };
    media::remove_stale_partials(&opts.output);
    let mut writer = AudioWriter::create(&opts.output, format, plan.sample_rate, &meta)?;

    progress.event(Event::Start {
        stage: Stage::Speech,
        total: plan.utterances.len() as u64,
    });
    let sr = f64::from(plan.sample_rate);
    let mut starts: Vec<(String, f64)> = Vec::new();
    let mut cues = Vec::new();
    let all: Vec<usize> = (0..plan.chunks.len()).collect();
    let mut done = 0u64;
    for window in all.chunks(WINDOW_CHUNKS) {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Cancelled);
        }
        let speeches = speak(&plan, window, &mut engine, &cache, progress, &clock)?;
        let t = Instant::now();
        for &c in window {
            if let Some(title) = &chapter_at[c] {
                starts.push((title.clone(), writer.seconds()));
            }
            let audio = chunk_audio(&plan, c, &speeches, 1);
            let offset = writer.samples();
            for (s, &(a, b)) in plan.chunks[c].sentences.clone().zip(&audio.sentence_spans) {
                cues.push(Cue {
                    text: plan.sentences[s].display.clone(),
                    start: (offset + a) as f64 / sr,
                    end: (offset + b) as f64 / sr,
                });
            }
            writer.push(&audio.pcm)?;
            done += plan.chunk_utterances(&plan.chunks[c]).len() as u64;
        }
        clock.add(Stage::Assemble, t.elapsed());
        progress.event(Event::Advance {
            stage: Stage::Speech,
            done,
        });
    }
    progress.event(Event::Finish {
        stage: Stage::Speech,
    });
    let audio_seconds = writer.seconds();
    let t = Instant::now();
    let bytes = writer.finish(&chapter_list(&starts, audio_seconds))?;
    let subtitles = opts
        .extra
        .subtitles
        .map(|f| media::write_sidecar(&opts.output, &cues, f))
        .transpose()?;
    clock.add(Stage::Assemble, t.elapsed());

    Ok(RenderReport {
        output: opts.output.clone(),
        subtitles,
        bytes,
        audio_seconds,
        frames: 0,
        fps: 0,
        width: 0,
        height: 0,
        chunks: plan.chunks.len(),
        chunks_reused: 0,
        utterances: plan.utterances.len(),
        phrase_hits: (plan.utterances.len() as u64).saturating_sub(engine.stats.synthesized),
        speech: engine.stats,
        wall_seconds: wall.elapsed().as_secs_f64(),
        stage_seconds: Stage::ALL
            .iter()
            .map(|&s| (s.label(), clock.seconds(s)))
            .collect(),
    })
}
