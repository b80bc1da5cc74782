//! Audio-only renders (`.m4b`, `.m4a`, `.mp3`, `.wav`): script → speech → one audio file, or
//! with `--split chapters` one per chapter, no portrait.
//!
//! The face, frame and chunk-video stages are skipped. Two passes over the chunks in order, the
//! speech asked for ahead up to a byte budget and handed to a second thread: the first synthesises
//! what the phrase cache lacks and measures every chunk (the writers take the chapters up front:
//! an MP3's ID3v2 tag, chapters included, comes before its audio) and, with `--loudness`, the
//! whole book's loudness; the second reads the speech back from the cache through the leveller
//! (one gain for the book, a peak limiter, ACX's room tone at the ends of each file) into the
//! streaming writer, which moves on to the next file where the next chapter begins; the writer and
//! the meter of the levelled audio run on threads of their own, so that the tail after the last
//! sentence is as long as its slowest stage. Memory stays that of the budget whatever the book's
//! length, and chapters and subtitle cues are timed on the same sample clock as the audio written.

use std::collections::VecDeque;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use crate::animate::{ChunkAudio, chunk_audio};
use crate::cache::{Cache, CacheLocation, open_cache, report_warnings};
use crate::error::{Error, Result};
use crate::media::loudness::{
    ACX_LEAD_SECONDS, ACX_TAIL_SECONDS, Edges, Levelled, Leveller, Meter, ROOM_TONE_DB, Standard,
};
use crate::media::{self, AudioFormat, AudioMeta, AudioWriter, Timeline, TrackNumber};
use crate::plan::Plan;
use crate::prepare::{build_plan, load_inputs};
use crate::progress::{Clock, Event, Progress, Stage, timed};
use crate::report::{PartFile, RenderReport, Written};
use crate::script::Script;
use crate::settings::{Loudness, OutputKind, RenderOptions};
use crate::speech::{Bound, Phrases, SpeechEngine, SpeechService, Waiter};
use crate::split;

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

    let parts = split::planned(opts, &script)?;
    let ranges = match &parts {
        Some(_) => split::chunk_ranges(&plan),
        None => std::iter::once(0..plan.chunks.len()).collect(),
    };
    let standard = Loudness::resolve(opts.settings.loudness, OutputKind::Audio(format));
    let mut measured = speaker.measure(standard.is_some(), &ranges)?;
    // Pass 2 reads all of it back from the cache: the model's memory is not held through it.
    speaker.engine.rest();
    let levelling = match (standard, &measured.meter) {
        (Some(s), Some(m)) => Some(Levelling::plan(
            s,
            m,
            plan.sample_rate,
            opts.settings.look.seed,
            &mut measured.files,
        )),
        _ => None,
    };
    let targets: Vec<Target> = match &parts {
        None => vec![Target {
            path: opts.output.clone(),
            title: script.title.clone(),
            track: None,
        }],
        Some(parts) => parts
            .iter()
            .map(|p| Target {
                path: p.path.clone(),
                title: Some(p.title.clone()),
                track: Some((p.number, parts.len())),
            })
            .collect(),
    };

    // Pass 2: the same speech, now all from the phrase cache, into the files.
    let (files, loudness) = timed(progress, &clock, Stage::Assemble, || {
        let acx = standard == Some(Standard::Acx);
        speaker.write(opts, format, (&targets, &script), acx, &measured, levelling)
    })?;
    if standard == Some(Standard::Acx) {
        warn_long_files(&files, progress);
    }
    let written = match parts {
        Some(_) => Written::set(opts.output.clone(), files),
        None => {
            let file = files.into_iter().next();
            Written {
                output: opts.output.clone(),
                subtitles: file.as_ref().and_then(|f| f.subtitles.clone()),
                bytes: file.as_ref().map_or(0, |f| f.bytes),
                audio_seconds: file.map_or(0.0, |f| f.audio_seconds),
                files: Vec::new(),
            }
        }
    };
    Ok(RenderReport {
        loudness,
        ..RenderReport::new(written, &plan, &engine, service, &clock, wall)
    })
}

/// ACX takes no file longer than two hours.
const ACX_MAX_FILE_SECONDS: f64 = 120.0 * 60.0;

/// A warning for each file over ACX's two hours.
fn warn_long_files(files: &[PartFile], progress: &dyn Progress) {
    for f in files
        .iter()
        .filter(|f| f.audio_seconds > ACX_MAX_FILE_SECONDS)
    {
        progress.event(Event::Warning {
            message: format!(
                "{}: {:.0} minutes long, and ACX takes at most 120 minutes a file: render with --split chapters, or cut the longest chapters in two",
                f.path.display(),
                f.audio_seconds / 60.0
            ),
        });
    }
}

/// One file pass 2 writes: the book, or with `--split chapters` one chapter.
struct Target {
    path: PathBuf,
    /// The book's title, or the chapter's.
    title: Option<String>,
    track: Option<TrackNumber>,
}

/// What pass 1 measures of the whole book before a byte is written.
struct Measured {
    /// Each chunk's length in samples, to check pass 2 against.
    lengths: Vec<usize>,
    /// Each output file's part of the book.
    files: Vec<FileMeasure>,
    /// The book's loudness (`--loudness`).
    meter: Option<Meter>,
}

/// One output file's chunks, its chapter starts and cues on its own sample clock, and where its
/// sound starts and ends (for its room tone).
struct FileMeasure {
    chunks: Range<usize>,
    timeline: Timeline,
    edges: Edges,
}

/// The book's levelling, planned from its measured loudness before pass 2 writes it.
struct Levelling {
    standard: Standard,
    before: media::loudness::Figures,
    gain_db: f64,
    rate: u32,
    seed: u64,
    /// Room tone (samples before, after) of each file.
    pads: Vec<(usize, usize)>,
}

impl Levelling {
    /// One gain for the whole book (so its files sound alike), and for ACX the room tone padded
    /// at the ends of each file (on its timeline too, so that chapters and cues stay on the
    /// audio written).
    fn plan(
        standard: Standard,
        before: &Meter,
        rate: u32,
        seed: u64,
        files: &mut [FileMeasure],
    ) -> Levelling {
        let before = before.figures();
        let gain_db = standard.gain_db(&before);
        let pad = |want: f64, have: f64| ((want - have).max(0.0) * f64::from(rate)).round() as u64;
        let pads = files
            .iter_mut()
            .map(|f| {
                let (lead, tail) = match standard {
                    Standard::Acx => {
                        let (lead, tail) = f.edges.seconds(rate);
                        (pad(ACX_LEAD_SECONDS, lead), pad(ACX_TAIL_SECONDS, tail))
                    }
                    Standard::Podcast | Standard::Broadcast => (0, 0),
                };
                f.timeline.pad(lead, tail);
                (lead as usize, tail as usize)
            })
            .collect();
        Levelling {
            standard,
            before,
            gain_db,
            rate,
            seed,
            pads,
        }
    }

    /// The leveller of file `i`: the book's gain, the file's room tone.
    fn leveller(&self, i: usize) -> Leveller {
        let noise = (self.standard == Standard::Acx)
            .then_some((ROOM_TONE_DB, self.seed.wrapping_add(i as u64)));
        Leveller::new(
            self.standard,
            self.gain_db,
            self.rate,
            self.pads.get(i).copied().unwrap_or_default(),
            noise,
        )
    }
}

/// What the levelling thread hands the writing thread in pass 2, in order.
enum Block {
    /// The current file's next samples (levelled, or as read when not levelling).
    Pcm(Arc<Vec<i16>>),
    /// The current file is complete; the next one starts.
    Next,
    /// The last file is complete: the book is done. Without it the files are abandoned.
    End,
}

/// Blocks that may wait between pass 2's levelling and its writing or metering: a few chunks,
/// so that each stage keeps working while the next is busy, and memory stays bounded.
const STAGE_QUEUE: usize = 8;

/// Pass 2's writing thread: the files opened by `open` in turn, fed `blocks` until
/// [`Block::End`]; returns their sizes, or `None` when the blocks stopped before it (the
/// levelling failed: what was written is dropped, never put under the output's name).
fn write_files(
    open: impl Fn(usize) -> Result<AudioWriter>,
    blocks: &Receiver<Block>,
) -> Result<Option<Vec<u64>>> {
    let mut sizes = Vec::new();
    let mut writer = open(0)?;
    for block in blocks {
        match block {
            Block::Pcm(pcm) => writer.push(&pcm)?,
            Block::Next => {
                let done = std::mem::replace(&mut writer, open(sizes.len() + 1)?);
                sizes.push(done.finish()?);
            }
            Block::End => {
                sizes.push(writer.finish()?);
                return Ok(Some(sizes));
            }
        }
    }
    Ok(None)
}

/// Pass 2's metering thread: the levelled book as written (`after`).
fn meter_blocks(rate: u32, blocks: &Receiver<Arc<Vec<i16>>>) -> Option<Meter> {
    let mut after = Meter::new(1, rate)?;
    for pcm in blocks {
        after.add_i16(&pcm);
    }
    Some(after)
}

/// Where the levelling thread's blocks go: the writer, and the meter when levelling.
struct Outlets {
    writer: Sender<Block>,
    meter: Option<Sender<Arc<Vec<i16>>>>,
}

impl Outlets {
    /// `pcm` to the writer and the meter. Fails only once the writer has stopped on an error,
    /// which [`joined`] returns in place of this one.
    fn pcm(&self, pcm: Vec<i16>) -> Result<()> {
        let pcm = Arc::new(pcm);
        if let Some(meter) = &self.meter {
            // The meter stops early only by panicking, which its join reports.
            let _ = meter.send(Arc::clone(&pcm));
        }
        self.send(Block::Pcm(pcm))
    }

    fn send(&self, block: Block) -> Result<()> {
        self.writer
            .send(block)
            .map_err(|_| Error::ThreadLost("the audio writer stopped".into()))
    }
}

/// Pass 2's writing (files opened by `open`) and, with `metered` (the rate), metering threads,
/// fed by `feed` on this one; the files' sizes and the levelled book's meter. The files are
/// written whole or not at all: an error of `feed` abandons them.
fn in_stages(
    open: impl Fn(usize) -> Result<AudioWriter> + Send,
    metered: Option<u32>,
    feed: impl FnOnce(&Outlets) -> Result<()>,
) -> Result<(Vec<u64>, Option<Meter>)> {
    std::thread::scope(|s| {
        let (to_writer, blocks) = crossbeam_channel::bounded(STAGE_QUEUE);
        let writer = std::thread::Builder::new()
            .name("audio-writer".into())
            .spawn_scoped(s, move || write_files(open, &blocks))
            .map_err(|e| Error::ThreadLost(format!("cannot start the audio writer: {e}")))?;
        let (to_meter, levelled) = crossbeam_channel::bounded(STAGE_QUEUE);
        let meter = metered
            .map(|rate| {
                std::thread::Builder::new()
                    .name("loudness".into())
                    .spawn_scoped(s, move || meter_blocks(rate, &levelled))
                    .map_err(|e| Error::ThreadLost(format!("cannot start the loudness meter: {e}")))
            })
            .transpose()?;
        let out = Outlets {
            writer: to_writer,
            meter: meter.is_some().then_some(to_meter),
        };
        let fed = feed(&out);
        drop(out);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(Error::ThreadLost("the audio writer panicked".into())));
        let after = meter
            .map(|m| m.join())
            .transpose()
            .map_err(|_| Error::ThreadLost("the loudness meter panicked".into()))?
            .flatten();
        joined(fed, written).map(|sizes| (sizes, after))
    })
}

/// The outcome of pass 2 from the levelling's (`fed`) and the writer's: the writer's error
/// first (the levelling then only saw it stop), else the levelling's, else the sizes.
fn joined(fed: Result<()>, written: Result<Option<Vec<u64>>>) -> Result<Vec<u64>> {
    match (fed, written?) {
        (Ok(()), Some(sizes)) => Ok(sizes),
        (Err(e), _) => Err(e),
        (Ok(()), None) => Err(Error::ThreadLost(
            "the audio writer stopped before the end".into(),
        )),
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

/// What speaking the book chunk by chunk needs.
struct Speaker<'a> {
    plan: &'a Plan,
    engine: &'a mut SpeechEngine,
    cache: &'a Cache,
    progress: &'a dyn Progress,
    clock: &'a Clock,
    cancel: &'a AtomicBool,
}

impl Speaker<'_> {
    /// Pass 1: every phrase synthesised (or found) and cached; chunk lengths, and for each file
    /// of `ranges` (its chunks) its cues, chapter starts and sound's edges measured, and with
    /// `loudness` the whole book's loudness. The muxer needs the chapters before its header,
    /// so they are known first.
    fn measure(&mut self, loudness: bool, ranges: &[Range<usize>]) -> Result<Measured> {
        let plan = self.plan;
        let progress = self.progress;
        progress.event(Event::Start {
            stage: Stage::Speech,
            total: plan.utterances.len() as u64,
        });
        let rate = plan.sample_rate;
        let mut meter = loudness.then(|| Meter::new(1, rate)).flatten();
        let mut lengths = Vec::with_capacity(plan.chunks.len());
        let mut files: Vec<FileMeasure> = ranges
            .iter()
            .map(|r| FileMeasure {
                chunks: r.clone(),
                timeline: Timeline::new(rate),
                edges: Edges::default(),
            })
            .collect();
        let mut file = 0;
        self.read_ahead(
            |c, audio| {
                if let Some(m) = &mut meter {
                    m.add_i16(&audio.pcm);
                }
                // The ranges cover every chunk in order, so the file holding `c` is found.
                while files[file].chunks.end <= c {
                    file += 1;
                }
                let f = &mut files[file];
                f.edges.add_i16(&audio.pcm);
                let samples = audio.pcm.len();
                plan.place_chunk(&mut f.timeline, c, &audio.sentence_spans, samples as u64);
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
            files,
            meter,
        })
    }

    /// Pass 2: the speech read back from the phrase cache, levelled, into each of `targets`
    /// in turn (the book's title, author and cover on each); returns what each file became and
    /// the loudness report. Four threads in a row, each on its own core: the reading, the
    /// levelling (this one), then the writing (resampling, AAC pieces started, muxing) and the
    /// metering of the levelled book side by side; the same samples in the same order as one
    /// thread would, so the files and figures do not change.
    fn write(
        &mut self,
        opts: &RenderOptions,
        format: AudioFormat,
        (targets, script): (&[Target], &Script),
        acx: bool,
        measured: &Measured,
        levelling: Option<Levelling>,
    ) -> Result<(Vec<PartFile>, Option<Levelled>)> {
        let rate = self.plan.sample_rate;
        let cache = self.cache;
        let open = |i: usize| -> Result<AudioWriter> {
            let target = &targets[i];
            let meta = AudioMeta {
                title: target.title.clone(),
                album: script.title.clone(),
                author: script.author.clone(),
                track: target.track,
                chapters: measured.files[i].timeline.chapters(),
                cover: script.cover.clone(),
            };
            media::remove_stale_partials(&target.path);
            Ok(AudioWriter::create(
                &target.path,
                format,
                rate,
                &meta,
                acx,
                opts.threads,
            )?)
        };
        let leveller = |i: usize| levelling.as_ref().map(|l| l.leveller(i));
        let metered = levelling.as_ref().map(|_| rate);
        let (sizes, after) = in_stages(open, metered, |out| {
            self.level(measured, cache, leveller, out)
        })?;
        let report = match (levelling, after) {
            (Some(l), Some(after)) => {
                let mut after = after.figures();
                after.sample_rate = format.output_rate(rate, acx);
                Some(judged(
                    opts,
                    l.standard,
                    l.before,
                    l.gain_db,
                    after,
                    self.progress,
                ))
            }
            _ => None,
        };
        let mut files = Vec::with_capacity(targets.len());
        for (i, (target, bytes)) in targets.iter().zip(sizes).enumerate() {
            let timeline = &measured.files[i].timeline;
            let subtitles = opts
                .settings
                .subtitles
                .map(|f| media::write_sidecar(&target.path, timeline.cues(), f))
                .transpose()?;
            files.push(PartFile {
                path: target.path.clone(),
                track: target.track.map_or(1, |t| t.0),
                title: target.title.clone().unwrap_or_default(),
                subtitles,
                bytes,
                audio_seconds: timeline.seconds(),
            });
        }
        Ok((files, report))
    }

    /// Pass 2's levelling: every chunk read back, checked against its measured length and
    /// levelled with its file's leveller (`leveller(i)`, `None` when not levelling) to `out`;
    /// [`Block::Next`] where a file begins, [`Block::End`] after the last.
    fn level(
        &mut self,
        measured: &Measured,
        cache: &Cache,
        leveller: impl Fn(usize) -> Option<Leveller>,
        out: &Outlets,
    ) -> Result<()> {
        let mut current = leveller(0);
        let mut next = 1;
        // The file's leveller's last samples and room tone.
        let flush = |l: Option<Leveller>| -> Result<()> {
            match l {
                Some(l) => {
                    let mut buf = Vec::new();
                    l.finish(&mut buf);
                    out.pcm(buf)
                }
                None => Ok(()),
            }
        };
        self.read_ahead(
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
                if measured.files.get(next).is_some_and(|f| f.chunks.start == c) {
                    flush(std::mem::replace(&mut current, leveller(next)))?;
                    out.send(Block::Next)?;
                    next += 1;
                }
                match &mut current {
                    Some(l) => {
                        let mut buf = Vec::with_capacity(audio.pcm.len());
                        l.push(&audio.pcm, &mut buf);
                        out.pcm(buf)
                    }
                    None => out.pcm(audio.pcm),
                }
            },
            |_| {},
        )?;
        flush(current)?;
        out.send(Block::End)
    }

    /// Every chunk's audio in order to `each` on this thread, spoken or read from the phrase
    /// cache on another (which calls `advanced`): pass 1's measuring then overlaps the speech
    /// and its caching, pass 2's levelling and encoding the cache's reading and decoding. At most
    /// [`READ_AHEAD_CHUNKS`] chunks wait between the two, besides what [`Speaker::each_chunk`]
    /// asks for ahead.
    fn read_ahead(
        &mut self,
        mut each: impl FnMut(usize, ChunkAudio) -> Result<()>,
        advanced: impl FnMut(u64) + Send,
    ) -> Result<()> {
        let (tx, rx) = crossbeam_channel::bounded(READ_AHEAD_CHUNKS);
        std::thread::scope(|s| {
            let reader = std::thread::Builder::new()
                .name("read-ahead".into())
                .spawn_scoped(s, move || {
                    // A send fails only once this thread's consumer has stopped with its error.
                    self.each_chunk(
                        |c, audio| tx.send((c, audio)).map_err(|_| Error::Cancelled),
                        advanced,
                    )
                })
                .map_err(|e| Error::ThreadLost(format!("cannot start the speech reader: {e}")))?;
            let mut consumed = Ok(());
            for (c, audio) in &rx {
                consumed = each(c, audio);
                if consumed.is_err() {
                    break;
                }
            }
            drop(rx);
            let read = reader
                .join()
                .unwrap_or_else(|_| Err(Error::ThreadLost("the speech reader panicked".into())));
            consumed.and(read)
        })
    }

    /// Every chunk's audio in order to `each` (from the phrase cache, else synthesised and
    /// cached), then `advanced` with the utterances spoken so far. Speech is asked for ahead of
    /// the chunk handed on, as far as [`Ahead`] allows, so the engine's queue never runs dry
    /// between chunks. Returns `Cancelled` soon after `cancel` is set.
    fn each_chunk(
        &mut self,
        mut each: impl FnMut(usize, ChunkAudio) -> Result<()>,
        mut advanced: impl FnMut(u64),
    ) -> Result<()> {
        let plan = self.plan;
        let cancel = self.cancel;
        let stopped = || cancel.load(Ordering::Relaxed);
        let ids = (0..plan.chunks.len()).map(|c| {
            plan.chunk_utterances(&plan.chunks[c])
                .map(|u| plan.utterances[u].ids.len())
                .sum()
        });
        let mut phrases = Phrases::default();
        let mut ahead = Ahead::new(AHEAD_BYTES, ids.collect());
        let order: Vec<usize> = (0..plan.chunks.len()).collect();
        let mut done = 0u64;
        for c in 0..plan.chunks.len() {
            if stopped() {
                return Err(Error::Cancelled);
            }
            let waiter = Waiter {
                cache: self.cache,
                progress: self.progress,
                clock: self.clock,
                stopped: &stopped,
            };
            phrases.keep_ahead(plan, &order, c, &mut ahead, self.engine, &waiter)?;
            phrases.wait_for(plan, c, self.engine, waiter)?;
            let audio = chunk_audio(plan, c, phrases.ready(), 1);
            phrases.release(plan, c);
            ahead.handed_on(c, audio.pcm.len());
            each(c, audio)?;
            done += plan.chunk_utterances(&plan.chunks[c]).len() as u64;
            advanced(done);
        }
        Ok(())
    }
}

/// Chunks the speech reader may have handed on before its consumer takes them.
const READ_AHEAD_CHUNKS: usize = 4;

/// Bytes of 16-bit speech the audio-only loop may have asked for ahead of the chunk it hands
/// on: about 12 minutes of a 22,050 Hz voice, enough for full batches on a GPU and busy lanes on
/// the CPU, and a bound that does not grow with the book.
const AHEAD_BYTES: u64 = 32 << 20;

/// The bound on speech asked for and not yet handed on. A chunk's bytes are known only once it is
/// spoken, so each is estimated from its phoneme ids at the rate of the chunks handed on so far;
/// until the first is, no more is asked for than the loop's two chunks. What is held then stays
/// near the budget whatever the book's length or the voice's pace.
struct Ahead {
    limit: u64,
    /// Each chunk's phoneme ids.
    ids: Vec<usize>,
    /// The estimate of each chunk asked for and not yet handed on, oldest first.
    held: VecDeque<u64>,
    held_bytes: u64,
    /// Ids and bytes of the chunks handed on so far.
    seen_ids: u64,
    seen_bytes: u64,
}

impl Ahead {
    fn new(limit: u64, ids: Vec<usize>) -> Ahead {
        Ahead {
            limit,
            ids,
            held: VecDeque::new(),
            held_bytes: 0,
            seen_ids: 0,
            seen_bytes: 0,
        }
    }

    fn bytes_per_id(&self) -> f64 {
        self.seen_bytes as f64 / self.seen_ids.max(1) as f64
    }

    /// The oldest chunk asked for, `chunk`, was handed on with `samples` samples.
    fn handed_on(&mut self, chunk: usize, samples: usize) {
        if let Some(estimate) = self.held.pop_front() {
            self.held_bytes -= estimate;
        }
        self.seen_ids += self.ids[chunk] as u64;
        self.seen_bytes += 2 * samples as u64;
    }
}

impl Bound for Ahead {
    fn wants_more(&self) -> bool {
        self.seen_ids > 0 && self.held_bytes < self.limit
    }

    fn requested(&mut self, chunk: usize) {
        let estimate = (self.ids[chunk] as f64 * self.bytes_per_id()).ceil() as u64;
        self.held.push_back(estimate);
        self.held_bytes += estimate;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::speech::Asked;

    /// Keeps the warnings.
    #[derive(Default)]
    struct Warnings(Mutex<Vec<String>>);

    impl Progress for Warnings {
        fn event(&self, event: Event) {
            if let Event::Warning { message } = event {
                self.0.lock().unwrap().push(message);
            }
        }
    }

    /// Drives [`Ahead`] through [`Asked`] as `each_chunk` does over `chunks` chunks of varying
    /// ids, speaking `seconds_per_id` at 22,050 Hz; returns the most bytes ever asked for and
    /// not handed on (the real ones, not the estimates) and the fewest chunks asked for ahead
    /// after the first.
    fn drive(chunks: usize, seconds_per_id: f64, limit: u64) -> (u64, usize) {
        let ids = |c: usize| 300 + (c * 7919) % 400;
        let bytes = |c: usize| (ids(c) as f64 * seconds_per_id * 22050.0) as u64 * 2;
        let mut ahead = Ahead::new(limit, (0..chunks).map(ids).collect());
        let order: Vec<usize> = (0..chunks).collect();
        let mut asked = Asked::default();
        let (mut requested, mut held, mut most, mut fewest) = (0, 0u64, 0u64, usize::MAX);
        for c in 0..chunks {
            while let Some(r) = asked.next(&order, c, &mut ahead) {
                held += bytes(r);
                requested = r + 1;
            }
            most = most.max(held);
            if c > 0 && requested < chunks {
                fewest = fewest.min(requested - c);
            }
            held -= bytes(c);
            ahead.handed_on(c, (bytes(c) / 2) as usize);
        }
        (most, fewest)
    }

    #[test]
    fn speech_asked_for_ahead_stays_near_the_budget_whatever_the_length() {
        let limit = 8 << 20;
        // Chunk sizes up to 700 ids at 0.03 s per id: about 0.9 MB each.
        let chunk = (700.0 * 0.03 * 22050.0 * 2.0) as u64;
        let (short, _) = drive(1_000, 0.03, limit);
        let (long, fewest) = drive(50_000, 0.03, limit);
        assert!(short <= limit + 2 * chunk, "{short}");
        assert!(
            long <= limit + 2 * chunk,
            "the held bytes grew with the book: {long}"
        );
        assert!(
            fewest > 4,
            "only {fewest} chunks ahead under a {limit}-byte budget"
        );
        // A voice four times as slow: fewer chunks ahead, as many bytes.
        let (slow, _) = drive(2_000, 0.12, limit);
        assert!(slow <= limit + 2 * 4 * chunk, "{slow}");
    }

    #[test]
    fn the_next_chunk_is_asked_for_even_over_the_budget() {
        let (_, fewest) = drive(100, 0.03, 1);
        assert_eq!(fewest, 2);
    }

    /// A writer of `dir/N.wav` for file N at 22,050 Hz.
    fn wav_in(dir: &std::path::Path) -> impl Fn(usize) -> Result<AudioWriter> + Send + '_ {
        move |i| {
            let path = dir.join(format!("{i}.wav"));
            let meta = AudioMeta::default();
            Ok(AudioWriter::create(
                &path,
                AudioFormat::Wav,
                22_050,
                &meta,
                false,
                1,
            )?)
        }
    }

    /// The names in `dir`, sorted (partial files included).
    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    }

    #[test]
    fn pass_2_stages_write_each_file_whole_and_meter_what_they_write() {
        let dir = tempfile::tempdir().unwrap();
        let (sizes, after) = in_stages(wav_in(dir.path()), Some(22_050), |out| {
            out.pcm(vec![1000; 1000])?;
            out.pcm(vec![-1000; 1205])?;
            out.send(Block::Next)?;
            out.pcm(vec![500; 500])?;
            out.send(Block::End)
        })
        .unwrap();
        assert_eq!(sizes, [44 + 2 * 2205, 44 + 2 * 500]);
        assert_eq!(names(dir.path()), ["0.wav", "1.wav"]);
        let wav = std::fs::read(dir.path().join("0.wav")).unwrap();
        assert_eq!(i16::from_le_bytes([wav[44], wav[45]]), 1000);
        assert_eq!(i16::from_le_bytes([wav[44 + 2000], wav[45 + 2000]]), -1000);
        let f = after.unwrap().figures();
        assert!((f.seconds - 2705.0 / 22_050.0).abs() < 1e-9, "{f:?}");
        assert!(
            f.sample_peak_db > -31.0 && f.sample_peak_db < -30.0,
            "{f:?}"
        );
    }

    #[test]
    fn without_levelling_nothing_is_metered() {
        let dir = tempfile::tempdir().unwrap();
        let (sizes, after) = in_stages(wav_in(dir.path()), None, |out| {
            out.pcm(vec![7; 10])?;
            out.send(Block::End)
        })
        .unwrap();
        assert_eq!(sizes, [44 + 20]);
        assert!(after.is_none());
    }

    #[test]
    fn a_failed_levelling_returns_its_error_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = in_stages(wav_in(dir.path()), Some(22_050), |out| {
            out.pcm(vec![1000; 1000])?;
            Err(Error::Cancelled)
        });
        assert!(matches!(r, Err(Error::Cancelled)), "{:?}", r.err());
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    }

    #[test]
    fn a_levelling_that_stops_without_the_end_writes_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = in_stages(wav_in(dir.path()), None, |out| out.pcm(vec![1; 10]));
        assert!(
            matches!(&r, Err(Error::ThreadLost(m)) if m.contains("before the end")),
            "{:?}",
            r.err()
        );
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    }

    #[test]
    fn a_writer_error_is_returned_and_stops_the_levelling() {
        let dir = tempfile::tempdir().unwrap();
        let inner = wav_in(dir.path());
        let missing = dir.path().join("no such folder");
        // The second file cannot be created.
        let open = move |i: usize| match i {
            0 => inner(0),
            _ => Ok(AudioWriter::create(
                &missing.join("1.wav"),
                AudioFormat::Wav,
                22_050,
                &AudioMeta::default(),
                false,
                1,
            )?),
        };
        let mut refused = None;
        let r = in_stages(open, Some(22_050), |out| {
            out.pcm(vec![1; 10])?;
            out.send(Block::Next)?;
            // The writer stops at the second file; the levelling hears of it on a later send.
            for sent in 0..10_000 {
                if let Err(e) = out.pcm(vec![1; 10]) {
                    refused = Some(sent);
                    return Err(e);
                }
            }
            out.send(Block::End)
        });
        assert!(matches!(r, Err(Error::Media(_))), "{:?}", r.err());
        assert!(refused.is_some_and(|n| n <= STAGE_QUEUE + 1), "{refused:?}");
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    }

    #[test]
    fn a_writer_that_panics_is_an_error_not_a_hang() {
        let open = |_: usize| -> Result<AudioWriter> { panic!("the writer's test panic") };
        let r = in_stages(open, Some(22_050), |out| {
            while out.pcm(vec![1; 10]).is_ok() {}
            out.send(Block::End)
        });
        assert!(
            matches!(&r, Err(Error::ThreadLost(m)) if m.contains("panicked")),
            "{:?}",
            r.err()
        );
    }

    #[test]
    fn files_over_two_hours_are_named_in_a_warning() {
        let file = |name: &str, minutes: f64| PartFile {
            path: PathBuf::from(name),
            track: 1,
            title: String::new(),
            subtitles: None,
            bytes: 0,
            audio_seconds: minutes * 60.0,
        };
        let files = [
            file("01 - Long.mp3", 121.0),
            file("02 - Short.mp3", 119.9),
            file("03 - Limit.mp3", 120.0),
        ];
        let warnings = Warnings::default();
        warn_long_files(&files, &warnings);
        let w = warnings.0.into_inner().unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("01 - Long.mp3: 121 minutes long") && w[0].contains("120 minutes"),
            "{w:?}"
        );
    }
}
