//! Audio-only renders (`.m4b`, `.m4a`, `.mp3`, `.wav`): script → speech → one audio file, no
//! portrait.
//!
//! The face, frame and chunk-video stages are skipped. Two passes over the chunks, a window at a
//! time: the first synthesises what the phrase cache lacks and measures every chunk (the MP4
//! muxer wants the chapters before its header) and, with `--loudness`, the whole book's loudness;
//! the second reads the speech back from the cache through the leveller (one gain for the book,
//! a peak limiter, ACX's room tone) into the streaming writer. Memory stays that of one window
//! whatever the book's length, and chapters and subtitle cues are timed on the same sample clock
//! as the audio written.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::animate::{ChunkAudio, chunk_audio};
use crate::cache::{Cache, CacheLocation, open_cache, report_warnings};
use crate::error::{Error, Result};
use crate::media::loudness::{
    ACX_LEAD_SECONDS, ACX_TAIL_SECONDS, Levelled, Leveller, Meter, ROOM_TONE_DB, Standard,
};
use crate::media::{self, AudioFormat, AudioMeta, AudioWriter, Timeline};
use crate::plan::Plan;
use crate::prepare::{build_plan, load_inputs};
use crate::progress::{Clock, Event, Progress, Stage, timed};
use crate::report::{RenderReport, Written};
use crate::settings::{Loudness, OutputKind, RenderOptions};
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

    let standard = Loudness::resolve(opts.settings.loudness, OutputKind::Audio(format));
    let mut measured = speaker.measure(standard.is_some())?;
    let levelling = match (standard, &measured.meter) {
        (Some(s), Some(m)) => Some(Levelling::plan(
            s,
            m,
            plan.sample_rate,
            opts.settings.look.seed,
            &mut measured.timeline,
        )),
        _ => None,
    };
    let audio_seconds = measured.timeline.seconds();

    // Pass 2: the same speech, now all from the phrase cache, into the file.
    let (bytes, subtitles, loudness) = timed(progress, &clock, Stage::Assemble, || {
        let meta = AudioMeta {
            title: script.title.clone(),
            author: script.author.clone(),
            chapters: measured.timeline.chapters(),
            cover: script.cover.clone(),
        };
        let acx = standard == Some(Standard::Acx);
        speaker.write(opts, format, &meta, acx, &measured, levelling)
    })?;

    let written = Written {
        output: opts.output.clone(),
        subtitles,
        bytes,
        audio_seconds,
    };
    Ok(RenderReport {
        loudness,
        ..RenderReport::new(written, &plan, &engine, service, &clock, wall)
    })
}

/// What pass 1 measures of the whole book before a byte is written.
struct Measured {
    /// Each chunk's length in samples, to check pass 2 against.
    lengths: Vec<usize>,
    /// Chapter starts and cues, on the audio's sample clock.
    timeline: Timeline,
    /// The book's loudness (`--loudness`).
    meter: Option<Meter>,
}

/// The book's levelling, planned from its measured loudness before pass 2 writes it.
struct Levelling {
    standard: Standard,
    leveller: Leveller,
    before: media::loudness::Figures,
    gain_db: f64,
}

impl Levelling {
    /// One gain for the book, and for ACX the room tone padded at its ends (on `timeline` too,
    /// so that chapters and cues stay on the audio written).
    fn plan(
        standard: Standard,
        before: &Meter,
        rate: u32,
        seed: u64,
        timeline: &mut Timeline,
    ) -> Levelling {
        let before = before.figures();
        let gain_db = standard.gain_db(&before);
        let pad = |want: f64, have: f64| ((want - have).max(0.0) * f64::from(rate)).round() as u64;
        let (lead, tail, noise) = match standard {
            Standard::Acx => (
                pad(ACX_LEAD_SECONDS, before.lead_seconds),
                pad(ACX_TAIL_SECONDS, before.tail_seconds),
                Some((ROOM_TONE_DB, seed)),
            ),
            Standard::Podcast | Standard::Broadcast => (0, 0, None),
        };
        timeline.pad(lead, tail);
        let leveller = Leveller::new(
            standard,
            gain_db,
            rate,
            (lead as usize, tail as usize),
            noise,
        );
        Levelling {
            standard,
            leveller,
            before,
            gain_db,
        }
    }
}

/// The standard's rules applied to the levelled book; each one it misses is warned about.
fn judged(
    opts: &RenderOptions,
    standard: Standard,
    before: media::loudness::Figures,
    gain_db: f64,
    after: media::loudness::Figures,
    progress: &dyn Progress,
) -> Levelled {
    let criteria = standard.judge(&after);
    for c in criteria.iter().filter(|c| !c.pass) {
        let hint = match c.name {
            "sample_rate" | "channels" => "; ACX takes MP3: render -o book.mp3",
            "room_tone_start" | "room_tone_end" => "; the book starts or ends with a long pause",
            _ => "",
        };
        progress.event(Event::Warning {
            message: format!(
                "{}: not to the {} standard: {} is {:.2} {}, must be {}{hint}",
                opts.output.display(),
                standard.name(),
                c.name,
                c.value,
                c.unit,
                c.rule
            ),
        });
    }
    Levelled {
        standard,
        before,
        gain_db,
        after,
        criteria,
    }
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
    /// Pass 1: every phrase synthesised (or found) and cached; chunk lengths, cues and chapter
    /// starts measured, and with `loudness` the book's loudness. The muxer needs the chapters
    /// before its header, so they are known first.
    fn measure(&mut self, loudness: bool) -> Result<Measured> {
        let plan = self.plan;
        let progress = self.progress;
        progress.event(Event::Start {
            stage: Stage::Speech,
            total: plan.utterances.len() as u64,
        });
        let rate = plan.sample_rate;
        let mut meter = loudness.then(|| Meter::new(1, rate)).flatten();
        let mut lengths = Vec::with_capacity(plan.chunks.len());
        let mut timeline = Timeline::new(rate);
        self.each_chunk(
            |c, audio| {
                if let Some(m) = &mut meter {
                    m.add_i16(&audio.pcm);
                }
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
        Ok(Measured {
            lengths,
            timeline,
            meter,
        })
    }

    /// Pass 2: the speech read back from the phrase cache, levelled, into the output; returns
    /// its bytes, the subtitle sidecar and the loudness report.
    fn write(
        &mut self,
        opts: &RenderOptions,
        format: AudioFormat,
        meta: &AudioMeta,
        acx: bool,
        measured: &Measured,
        mut levelling: Option<Levelling>,
    ) -> Result<(u64, Option<PathBuf>, Option<Levelled>)> {
        let rate = self.plan.sample_rate;
        let cache = self.cache;
        media::remove_stale_partials(&opts.output);
        let mut writer = AudioWriter::create(&opts.output, format, rate, meta, acx, opts.threads)?;
        let mut after = levelling.as_ref().and_then(|_| Meter::new(1, rate));
        let mut levelled = Vec::new();
        self.each_chunk(
            |c, audio| {
                if audio.pcm.len() != measured.lengths[c] {
                    // Only when the cache failed to store a phrase (warned about): the voice's
                    // noise would make its second synthesis differ from the length measured.
                    return Err(Error::Io {
                        path: cache.dir().to_path_buf(),
                        source: std::io::Error::other(
                            "the phrase cache did not keep this book's speech (see the warnings above), so chapters and subtitles cannot be timed; give a writable --cache DIR",
                        ),
                    });
                }
                match (&mut levelling, &mut after) {
                    (Some(l), Some(after)) => {
                        levelled.clear();
                        l.leveller.push(&audio.pcm, &mut levelled);
                        after.add_i16(&levelled);
                        Ok(writer.push(&levelled)?)
                    }
                    _ => Ok(writer.push(&audio.pcm)?),
                }
            },
            |_| {},
        )?;
        let mut report = None;
        if let (Some(l), Some(mut after)) = (levelling, after) {
            levelled.clear();
            l.leveller.finish(&mut levelled);
            after.add_i16(&levelled);
            writer.push(&levelled)?;
            let mut after = after.figures();
            after.sample_rate = format.output_rate(rate, acx);
            report = Some(judged(
                opts,
                l.standard,
                l.before,
                l.gain_db,
                after,
                self.progress,
            ));
        }
        let bytes = writer.finish()?;
        let subtitles = opts
            .settings
            .subtitles
            .map(|f| media::write_sidecar(&opts.output, measured.timeline.cues(), f))
            .transpose()?;
        Ok((bytes, subtitles, report))
    }

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
