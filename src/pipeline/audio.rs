//! Audio-only renders (`.m4b`, `.m4a`, `.wav`): script → speech → one audio file, no portrait.
//!
//! The face, frame and chunk-video stages are skipped. Two passes over the chunks, a window at a
//! time: the first synthesises what the phrase cache lacks and measures every chunk (the MP4
//! muxer wants the chapters before its header); the second reads the speech back from the cache
//! into the streaming writer. Memory stays that of one window whatever the book's length, and
//! chapters and subtitle cues are timed on the same sample clock as the audio written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::animate::{ChunkAudio, chunk_audio};
use crate::cache::{Cache, CacheLocation, open_cache, report_warnings};
use crate::error::{Error, Result};
use crate::media::{self, AudioFormat, AudioMeta, AudioWriter, Timeline};
use crate::plan::Plan;
use crate::prepare::{build_plan, load_inputs};
use crate::progress::{Clock, Event, Progress, Stage, timed};
use crate::report::{RenderReport, Written};
use crate::settings::RenderOptions;
use crate::speech::{SpeechEngine, SpeechService, speak};

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
    let (script, mut engine) = load_inputs(opts, service, progress, &clock, cancel)?;
    let plan = build_plan(&script, &engine, progress, &clock, cancel)?;
    let (mut cache, mut _temp) = open_cache(&opts.cache, &opts.output, progress)?;
    if cache.read_only() {
        // Pass 2 reads the speech back from the cache, so this render needs one it can write.
        report_warnings(&cache, progress);
        progress.event(Event::Warning {
            message: "an audio-only render keeps its speech in the cache between its passes; rendering with a temporary cache".into(),
        });
        (cache, _temp) = open_cache(&CacheLocation::Temporary, &opts.output, progress)?;
    }
    let _hold = super::hold_entries(&cache, &plan, false, progress);
    let mut speaker = Speaker {
        plan: &plan,
        engine: &mut engine,
        cache: &cache,
        progress,
        clock: &clock,
        cancel,
    };

    // Pass 1: every phrase synthesised (or found) and cached; chunk lengths, cues and chapter
    // starts measured. The muxer needs the chapters before its header, so they are known first.
    progress.event(Event::Start {
        stage: Stage::Speech,
        total: plan.utterances.len() as u64,
    });
    let mut lengths = Vec::with_capacity(plan.chunks.len());
    let mut timeline = Timeline::new(plan.sample_rate);
    speaker.each_chunk(
        |c, audio| {
            let samples = audio.pcm.len();
            plan.place_chunk(&mut timeline, c, &audio.sentence_spans, samples as u64);
            lengths.push(samples);
            Ok(())
        },
        |done| {
            progress.event(Event::Advance {
                stage: Stage::Speech,
                done,
            })
        },
    )?;
    progress.event(Event::Finish {
        stage: Stage::Speech,
    });
    let audio_seconds = timeline.seconds();

    // Pass 2: the same speech, now all from the phrase cache, into the file.
    let (bytes, subtitles) = timed(progress, &clock, Stage::Assemble, || {
        let meta = AudioMeta {
            title: script.title.clone(),
            author: script.author.clone(),
            chapters: timeline.chapters(),
        };
        media::remove_stale_partials(&opts.output);
        let mut writer = AudioWriter::create(&opts.output, format, plan.sample_rate, &meta)?;
        speaker.each_chunk(
            |c, audio| {
                if audio.pcm.len() != lengths[c] {
                    // Only when the cache failed to store a phrase (warned about): the voice's
                    // noise would make its second synthesis differ from the length measured.
                    return Err(Error::Io {
                        path: cache.dir().to_path_buf(),
                        source: std::io::Error::other(
                            "the phrase cache did not keep this book's speech (see the warnings above), so chapters and subtitles cannot be timed; give a writable --cache DIR",
                        ),
                    });
                }
                Ok(writer.push(&audio.pcm)?)
            },
            |_| {},
        )?;
        let bytes = writer.finish()?;
        let subtitles = opts
            .extra
            .subtitles
            .map(|f| media::write_sidecar(&opts.output, timeline.cues(), f))
            .transpose()?;
        Ok::<_, Error>((bytes, subtitles))
    })?;

    let written = Written {
        output: opts.output.clone(),
        subtitles,
        bytes,
        audio_seconds,
    };
    Ok(RenderReport::new(
        written, &plan, &engine, service, &clock, wall,
    ))
}

/// What speaking the book a window at a time needs.
struct Speaker<'a> {
    plan: &'a Plan,
    engine: &'a mut SpeechEngine,
    cache: &'a Cache,
    progress: &'a dyn Progress,
    clock: &'a Clock,
    cancel: &'a AtomicBool,
}

impl Speaker<'_> {
    /// Every chunk's audio in order to `each`, [`WINDOW_CHUNKS`] chunks' speech at a time (from
    /// the phrase cache, else synthesised and cached); after each window, `window_done` with the
    /// utterances spoken so far. Returns `Cancelled` between windows once `cancel` is set.
    fn each_chunk(
        &mut self,
        mut each: impl FnMut(usize, ChunkAudio) -> Result<()>,
        mut window_done: impl FnMut(u64),
    ) -> Result<()> {
        let plan = self.plan;
        let all: Vec<usize> = (0..plan.chunks.len()).collect();
        let mut done = 0u64;
        for window in all.chunks(WINDOW_CHUNKS) {
            if self.cancel.load(Ordering::Relaxed) {
                return Err(Error::Cancelled);
            }
            let speeches = speak(
                plan,
                window,
                self.engine,
                self.cache,
                self.progress,
                self.clock,
                self.cancel,
            )?;
            for &c in window {
                each(c, chunk_audio(plan, c, &speeches, 1))?;
                done += plan.chunk_utterances(&plan.chunks[c]).len() as u64;
            }
            window_done(done);
        }
        Ok(())
    }
}
