//! Audio-only renders (`.m4b`, `.m4a`, `.wav`): script → speech → one audio file, no portrait.
//!
//! The face, frame and chunk-video stages are skipped. Two passes over the chunks, a window at a
//! time: the first synthesises what the phrase cache lacks and measures every chunk (the MP4
//! muxer wants the chapters before its header); the second reads the speech back from the cache
//! into the streaming writer. Memory stays that of one window whatever the book's length, and
//! chapters and subtitle cues are timed on the same sample clock as the audio written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::RenderReport;
use crate::animate::chunk_audio;
use crate::cache::open_cache;
use crate::error::{Error, Result};
use crate::media::{self, AudioFormat, AudioMeta, AudioWriter, Timeline};
use crate::prepare::{build_plan, load_inputs};
use crate::progress::{Clock, Event, Progress, Stage};
use crate::settings::RenderOptions;
use crate::speech::{SpeechService, speak};

/// Chunks (about 20–30 s of speech each) synthesised before their audio is written.
const WINDOW_CHUNKS: usize = 8;

pub(super) fn render_audio(
    opts: &RenderOptions,
    format: AudioFormat,
    service: &SpeechService,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<RenderReport> {
    let wall = Instant::now();
    let clock = Clock::default();
    if !opts.portrait.as_os_str().is_empty() {
        progress.event(Event::Warning {
            message: format!(
                "{} is not used: {} is audio only",
                opts.portrait.display(),
                opts.output.display()
            ),
        });
    }
    let (script, mut engine) = load_inputs(opts, service, progress, &clock)?;
    let plan = build_plan(&script, &engine, progress, &clock, cancel)?;
    let (cache, _temp) = open_cache(&opts.cache, &opts.output, progress)?;

    // Pass 1: every phrase synthesised (or found) and cached; chunk lengths, cues and chapter
    // starts measured. The muxer needs the chapters before its header, so they are known first.
    progress.event(Event::Start {
        stage: Stage::Speech,
        total: plan.utterances.len() as u64,
    });
    let mut lengths = Vec::with_capacity(plan.chunks.len());
    let mut timeline = Timeline::new(plan.sample_rate);
    let all: Vec<usize> = (0..plan.chunks.len()).collect();
    let mut done = 0u64;
    for window in all.chunks(WINDOW_CHUNKS) {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Cancelled);
        }
        let speeches = speak(&plan, window, &mut engine, &cache, progress, &clock, cancel)?;
        for &c in window {
            let audio = chunk_audio(&plan, c, &speeches, 1);
            plan.place_chunk(
                &mut timeline,
                c,
                &audio.sentence_spans,
                audio.pcm.len() as u64,
            );
            lengths.push(audio.pcm.len());
            done += plan.chunk_utterances(&plan.chunks[c]).len() as u64;
        }
        progress.event(Event::Advance {
            stage: Stage::Speech,
            done,
        });
    }
    progress.event(Event::Finish {
        stage: Stage::Speech,
    });
    let audio_seconds = timeline.seconds();

    // Pass 2: the same speech, now all from the phrase cache, into the file.
    let t = Instant::now();
    progress.event(Event::Start {
        stage: Stage::Assemble,
        total: 0,
    });
    let meta = AudioMeta {
        title: script.title.clone(),
        author: script.author.clone(),
        chapters: timeline.chapters(),
    };
    media::remove_stale_partials(&opts.output);
    let mut writer = AudioWriter::create(&opts.output, format, plan.sample_rate, &meta)?;
    for window in all.chunks(WINDOW_CHUNKS) {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Cancelled);
        }
        let speeches = speak(&plan, window, &mut engine, &cache, progress, &clock, cancel)?;
        for &c in window {
            let audio = chunk_audio(&plan, c, &speeches, 1);
            if audio.pcm.len() != lengths[c] {
                // Only when the cache failed to store a phrase (warned about): the voice's noise
                // would make its second synthesis differ from the length measured.
                return Err(Error::Io {
                    path: cache.dir().to_path_buf(),
                    source: std::io::Error::other(
                        "the phrase cache did not keep this book's speech (see the warnings above), so chapters and subtitles cannot be timed; give a writable --cache DIR",
                    ),
                });
            }
            writer.push(&audio.pcm)?;
        }
    }
    let bytes = writer.finish()?;
    let subtitles = opts
        .extra
        .subtitles
        .map(|f| media::write_sidecar(&opts.output, timeline.cues(), f))
        .transpose()?;
    clock.add(Stage::Assemble, t.elapsed());
    progress.event(Event::Finish {
        stage: Stage::Assemble,
    });

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
        backend: service.info().clone(),
        speech: engine.stats,
        speech_wait_seconds: 0.0,
        wall_seconds: wall.elapsed().as_secs_f64(),
        stage_seconds: Stage::ALL
            .iter()
            .map(|&s| (s.label(), clock.seconds(s)))
            .collect(),
    })
}
