//! The render: threads and channels only; every stage lives in its own module (inputs, face,
//! look and plan in `prepare`, speech in `speech`, one chunk's frames in `animate`, the MP4 in
//! `media`, what may be reused in `cache`).
//!
//! ```text
//! main: prepare (script → face → plan: text, phonemes, keys) → cache lookups
//!   speech thread: phrase cache / requests ahead to the speech service → chunk audio ─────────┐
//!   chunk workers (one per core): frames → x264 → chunk file in the cache  ◀── bounded channel ─┘
//!   audio thread: each finished chunk's PCM, in order → AAC in pieces on threads of their own
//! main: every chunk, cached or new (video copied, audio already encoded) → MP4 (temp file,
//!   renamed when complete)
//! ```
//! Memory is bounded by the channel capacity and the speech window, not by the script's length.
//! The first real error stops every thread; knock-on errors from the stop are not reported.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_channel::{TrySendError, bounded};

use crate::animate::{self, ChunkAudio, chunk_audio, frame_quantum};
use crate::cache::{
    Cache, ChunkDone, adopt_rowless, chunk_refs, look_up_chunks, open_cache, report_warnings,
};
use crate::error::{Error, Result};
use crate::look::Look;
use crate::media::{self, AudioAhead};
use crate::plan::Plan;
use crate::pool::ChunkPool;
use crate::prepare::{Prepared, prepare};
use crate::progress::{Clock, Event, Progress, Stage, timed};
use crate::report::{PartFile, RenderReport, Written, phrase_hits};
use crate::script::Script;
use crate::settings::{OutputKind, RenderOptions};
use crate::speech::{Bound, Phrases, SpeechEngine, SpeechService, Waiter};
use crate::split;

/// Most utterances a batching backend (the GPU) is asked for ahead of the chunk being sent to the
/// workers: a render sends all its uncached sentences at once up to this many (about 15 minutes of
/// speech; cached ones count too), which bounds the audio held in memory. Without batching, speech
/// runs one chunk ahead.
const SPEECH_AHEAD: usize = 256;
/// How often a render's threads look at the signal flag.
const CANCEL_POLL: std::time::Duration = std::time::Duration::from_millis(50);
/// Chunks waiting between the speech thread and the workers.
const CHANNEL_CAPACITY: usize = 2;

mod audio;

/// Renders with the process's speech service (`service`, shared by every render it runs).
pub fn run(
    opts: &RenderOptions,
    service: &SpeechService,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<RenderReport> {
    let wall = Instant::now();
    let clock = Clock::default();
    // A video's audio is spread over its chunks and copied into the MP4 in one go; the
    // two-pass leveller lives in the audio-only render.
    opts.settings
        .check_output(&opts.output)
        .map_err(Error::Usage)?;
    split::check_output(&opts.settings, &opts.output).map_err(Error::Usage)?;
    if let OutputKind::Audio(format) = opts.settings.output_kind(&opts.output) {
        return audio::render_audio(opts, format, service, progress, cancel);
    }
    let Prepared {
        script,
        mut engine,
        look,
        plan,
    } = prepare(opts, service, progress, &clock, cancel)?;
    tracing::debug!(
        ms = wall.elapsed().as_millis(),
        chunks = plan.chunks.len(),
        "planned"
    );

    let (cache, _temp) = open_cache(&opts.cache, &opts.output, progress)?;
    let _hold = hold_entries(&cache, &plan, true, progress);
    report_warnings(&cache, progress);
    let keyed = plan.chunks.iter().map(|c| (c.key(), c.sentences.len()));
    let lookup = look_up_chunks(&cache, keyed, progress, cancel).ok_or(Error::Cancelled)?;
    tracing::debug!(
        ms = wall.elapsed().as_millis(),
        reused = lookup.reused(),
        todo = lookup.todo.len(),
        "cache looked up"
    );

    let pool = opts
        .pool
        .clone()
        .unwrap_or_else(|| ChunkPool::new(opts.threads));
    let parts = split::planned(opts, &script)?;
    let files = (opts.output.as_path(), parts.as_deref());
    let feed = AudioFeed::new(&cache, &plan, files, &lookup.todo, pool.slots());
    let shared = Shared {
        plan: &plan,
        cache: &cache,
        look: &look,
        clock: &clock,
        progress,
        cancel,
        stop: AtomicBool::new(false),
        pool,
        speech_wait_nanos: AtomicU64::new(0),
        adopted: AtomicUsize::new(0),
        audio: Mutex::new(feed),
    };
    let rendered = run_threads(&shared, &mut engine, &lookup.todo)?;
    let chunks_reused = lookup.reused() + shared.adopted.load(Ordering::Relaxed);
    let phrase_hits = phrase_hits(&plan, &engine, &lookup.todo);
    let done = lookup.complete(rendered);
    let tracks = shared
        .audio
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .tracks;

    let video = Video {
        plan: &plan,
        script: &script,
        cache: &cache,
        done: &done,
    };
    tracing::debug!(ms = wall.elapsed().as_millis(), "assembling");
    let (written, frames) = timed(progress, &clock, Stage::Assemble, || {
        write_video(opts, &video, parts, tracks, cancel)
    })?;
    tracing::debug!(ms = wall.elapsed().as_millis(), "assembled");

    Ok(RenderReport {
        frames,
        fps: look.video.fps,
        width: look.video.width,
        height: look.video.height,
        chunks_reused,
        phrase_hits,
        speech_wait_seconds: shared.speech_wait_nanos.load(Ordering::Relaxed) as f64 * 1e-9,
        ..RenderReport::new(written, &plan, &engine, service, &clock, wall)
    })
}

/// What a render's MP4s are made of.
struct Video<'a> {
    plan: &'a Plan,
    script: &'a Script,
    cache: &'a Cache,
    done: &'a [ChunkDone],
}

/// The MP4 from the finished chunks, or with `--split chapters` one MP4 per chapter (`parts`)
/// from its chunks (each with its own subtitles, timed from its start); each file's audio track
/// is the one of `tracks` in its place. What was written, and its frames.
fn write_video(
    opts: &RenderOptions,
    video: &Video,
    parts: Option<Vec<split::Part>>,
    tracks: Vec<AudioAhead>,
    cancel: &AtomicBool,
) -> Result<(Written, u64)> {
    let Video {
        plan,
        script,
        cache,
        done,
    } = *video;
    let chunks = chunk_refs(cache, plan.chunks.iter().map(|c| c.key()), done);
    let seconds = |samples: u64| samples as f64 / f64::from(plan.sample_rate);
    let subtitles = opts.settings.subtitles;
    let mut tracks = tracks.into_iter();
    let Some(parts) = parts else {
        let meta = plan.output_meta(script, done, 0..chunks.len(), None);
        let audio = tracks.next().expect("a track for the one output file");
        let (info, sidecar) =
            media::write_mp4(&chunks, &opts.output, &meta, subtitles, audio, cancel)?;
        let written = Written {
            output: opts.output.clone(),
            subtitles: sidecar,
            bytes: info.bytes,
            audio_seconds: seconds(info.audio_samples),
            files: Vec::new(),
        };
        return Ok((written, info.frames));
    };
    let mut files = Vec::with_capacity(parts.len());
    let mut frames = 0;
    for ((part, range), audio) in parts.iter().zip(split::chunk_ranges(plan)).zip(tracks) {
        let track = Some((part.number, parts.len(), part.title.as_str()));
        let meta = plan.output_meta(script, done, range.clone(), track);
        let (info, sidecar) =
            media::write_mp4(&chunks[range], &part.path, &meta, subtitles, audio, cancel)?;
        frames += info.frames;
        files.push(PartFile {
            path: part.path.clone(),
            track: part.number,
            title: part.title.clone(),
            subtitles: sidecar,
            bytes: info.bytes,
            audio_seconds: seconds(info.audio_samples),
        });
    }
    Ok((Written::set(opts.output.clone(), files), frames))
}

/// Registers what this render uses (its phrases, and its chunks when `chunks`), so that a
/// `talker cache gc` running beside it removes none of it. Without a hold (a cache directory
/// that takes no file) the render still runs, with a warning.
fn hold_entries(
    cache: &Cache,
    plan: &Plan,
    chunks: bool,
    progress: &dyn Progress,
) -> Option<crate::cache::Hold> {
    let phrases = plan.utterances.iter().map(|u| u.key);
    let chunk_keys = plan.chunks.iter().filter(|_| chunks).map(|c| *c.key());
    match cache.hold(phrases.chain(chunk_keys)) {
        Ok(hold) => Some(hold),
        Err(e) => {
            progress.event(Event::Warning {
                message: format!("{e}; a cache gc meanwhile may remove what this render uses"),
            });
            None
        }
    }
}

/// What the threads share.
struct Shared<'a> {
    plan: &'a Plan,
    cache: &'a Cache,
    look: &'a Look,
    clock: &'a Clock,
    progress: &'a dyn Progress,
    cancel: &'a AtomicBool,
    /// Set on the first error or on cancel; every loop checks it.
    stop: AtomicBool,
    /// The chunk slots: one chunk worker per slot, each holding one while it draws and encodes
    /// (each x264 encoder uses one thread).
    pool: ChunkPool,
    /// Time chunk workers spent waiting for a chunk's audio, summed.
    speech_wait_nanos: AtomicU64,
    /// Chunks found finished but rowless while rendering (see [`adopt_rowless`]).
    adopted: AtomicUsize,
    audio: Mutex<AudioFeed>,
}

/// The audio track of each output file, encoded while the chunks render: a chunk is handed to
/// its file's track once it and every chunk before it are finished (the track is encoded in
/// output order), so that assembly finds most of the audio done.
struct AudioFeed {
    /// Each file's chunks and track.
    tracks: Vec<AudioAhead>,
    ranges: Vec<Range<usize>>,
    paths: Vec<PathBuf>,
    finished: Vec<bool>,
    /// The first chunk not handed on.
    next: usize,
}

impl AudioFeed {
    /// A track for each file of `output` (with `--split chapters`, one for each of `parts` and
    /// its chapter's chunks), encoding `threads` pieces at once; every chunk but those of `todo`
    /// (reused from the cache) is finished already.
    fn new(
        cache: &Cache,
        plan: &Plan,
        (output, parts): (&Path, Option<&[split::Part]>),
        todo: &[usize],
        threads: usize,
    ) -> AudioFeed {
        let mut finished = vec![true; plan.chunks.len()];
        for &c in todo {
            finished[c] = false;
        }
        let (ranges, tracks) = match parts {
            None => vec![(0..plan.chunks.len(), output)],
            Some(parts) => split::chunk_ranges(plan)
                .into_iter()
                .zip(parts.iter().map(|p| p.path.as_path()))
                .collect(),
        }
        .into_iter()
        .map(|(range, path)| (range, AudioAhead::start(path, threads)))
        .unzip();
        let mut feed = AudioFeed {
            tracks,
            ranges,
            paths: plan
                .chunks
                .iter()
                .map(|c| cache.chunk_path(c.key()))
                .collect(),
            finished,
            next: 0,
        };
        feed.hand_on();
        feed
    }

    /// Chunk `c` is finished under its final name.
    fn finished(&mut self, c: usize) {
        self.finished[c] = true;
        self.hand_on();
    }

    fn hand_on(&mut self) {
        while self.finished.get(self.next) == Some(&true) {
            let c = self.next;
            if let Some(f) = self.ranges.iter().position(|r| r.contains(&c)) {
                self.tracks[f].add(&self.paths[c]);
            }
            self.next += 1;
        }
    }
}

impl Shared<'_> {
    fn stopped(&self) -> bool {
        if self.cancel.load(Ordering::Relaxed) {
            self.stop.store(true, Ordering::Relaxed);
        }
        self.stop.load(Ordering::Relaxed)
    }
}

/// Speech thread + chunk workers; returns the chunks they finished.
fn run_threads(
    shared: &Shared,
    engine: &mut SpeechEngine,
    todo: &[usize],
) -> Result<Vec<(usize, ChunkDone)>> {
    if todo.is_empty() {
        return Ok(Vec::new());
    }
    let plan = shared.plan;
    let frames_done = AtomicU64::new(0);
    let frames_done = &frames_done;
    let needed: u64 = todo
        .iter()
        .map(|&i| plan.chunk_utterances(&plan.chunks[i]).len() as u64)
        .sum();
    shared.progress.event(Event::Start {
        stage: Stage::Speech,
        total: needed,
    });
    shared.progress.event(Event::Start {
        stage: Stage::Frames,
        total: 0,
    });
    let (tx, rx) = bounded::<(usize, ChunkAudio)>(CHANNEL_CAPACITY);
    let results = Mutex::new(Vec::with_capacity(todo.len()));
    let errors: Mutex<Vec<Error>> = Mutex::new(Vec::new());
    let fail = |e: Error| {
        shared.stop.store(true, Ordering::Relaxed);
        errors
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(e);
    };
    let workers = shared.pool.slots().min(todo.len()).max(1);
    let joined = AtomicBool::new(false);

    std::thread::scope(|scope| {
        // A signal reaches every thread within a poll, even one blocked on a full channel or
        // in the middle of a chunk.
        scope.spawn(|| {
            while !joined.load(Ordering::Relaxed) && !shared.stopped() {
                std::thread::sleep(CANCEL_POLL);
            }
        });
        let speech = std::thread::Builder::new()
            .name("speech".into())
            .spawn_scoped(scope, || {
                if let Err(e) = speech_loop(shared, engine, todo, workers, &tx) {
                    fail(e);
                }
                drop(tx);
            })
            .expect("spawn speech thread");
        let mut handles = vec![speech];
        for w in 0..workers {
            let rx = rx.clone();
            let (results, fail) = (&results, &fail);
            let handle = std::thread::Builder::new()
                .name(format!("chunk{w}"))
                .spawn_scoped(scope, move || {
                    let mut idle = Instant::now();
                    for (i, audio) in rx {
                        shared
                            .speech_wait_nanos
                            .fetch_add(idle.elapsed().as_nanos() as u64, Ordering::Relaxed);
                        let Some(_slot) = shared.pool.take(&|| shared.stopped()) else {
                            break;
                        };
                        match render_one(shared, i, &audio, frames_done) {
                            Ok(d) => {
                                results
                                    .lock()
                                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                                    .push((i, d));
                                shared
                                    .audio
                                    .lock()
                                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                                    .finished(i);
                            }
                            Err(e) => {
                                fail(e);
                                break;
                            }
                        }
                        idle = Instant::now();
                    }
                })
                .expect("spawn chunk worker");
            handles.push(handle);
        }
        drop(rx);
        for h in handles {
            if h.join().is_err() {
                fail(Error::ThreadLost("a render thread panicked".into()));
            }
        }
        joined.store(true, Ordering::Relaxed);
    });
    shared.progress.event(Event::Finish {
        stage: Stage::Speech,
    });
    shared.progress.event(Event::Finish {
        stage: Stage::Frames,
    });

    let errors = errors.into_inner().expect("error list");
    if let Some(e) = first_real_error(errors) {
        return Err(e);
    }
    if shared.cancel.load(Ordering::Relaxed) {
        return Err(Error::Cancelled);
    }
    Ok(results.into_inner().expect("results"))
}

/// The error that caused the stop, not the `Cancelled` the stop caused elsewhere.
fn first_real_error(errors: Vec<Error>) -> Option<Error> {
    let mut fallback = None;
    for e in errors {
        if matches!(e, Error::Cancelled) {
            fallback.get_or_insert(e);
        } else {
            return Some(e);
        }
    }
    fallback
}

fn render_one(
    shared: &Shared,
    i: usize,
    audio: &ChunkAudio,
    frames_done: &AtomicU64,
) -> Result<ChunkDone> {
    let plan = shared.plan;
    let cache = shared.cache;
    let key = plan.chunks[i].key();
    let path = cache.chunk_path(key);
    // One writer per chunk across every render sharing the cache; the others wait, then reuse.
    let lock = cache.lock_chunk(key, &shared.stop);
    report_warnings(cache, shared.progress);
    let Some(_lock) = lock? else {
        return Err(Error::Cancelled);
    };
    let frames = audio.frames(plan.sample_rate, shared.look.video.fps);
    let done = ChunkDone {
        frames,
        samples: audio.pcm.len() as u64,
        spans: audio.sentence_spans.clone(),
    };
    let meta = done.meta();
    match cache.find_chunk(key) {
        Ok(Some(entry)) => {
            if let Some(d) = ChunkDone::of_entry(&entry, plan.chunks[i].sentences.len()) {
                tracing::debug!(chunk = i, "chunk finished by another render");
                return Ok(d);
            }
            // Unusable; nobody reads a file without a row, so it goes before the new one.
            let _ = cache.drop_chunk(key);
        }
        Ok(None) => {
            if adopt_rowless(cache, key, &done, shared.look.video.fps, plan.sample_rate) {
                shared.adopted.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(chunk = i, "finished chunk without its row adopted");
                return Ok(done);
            }
        }
        // Says nothing about the entry (it may be another render's good chunk): keep it.
        Err(e) => shared.progress.event(Event::Warning {
            message: format!("{e}; rendering the chunk again"),
        }),
    }
    media::remove_stale_partials(&path);
    tracing::debug!(chunk = i, frames, "chunk started");
    let cx = animate::ChunkContext {
        look: shared.look,
        sample_rate: plan.sample_rate,
        stop: &shared.stop,
        clock: shared.clock,
    };
    animate::render_chunk(&cx, plan.chunks[i].segment, audio, &path, || {
        let done = frames_done.fetch_add(1, Ordering::Relaxed) + 1;
        if done.is_multiple_of(25) {
            shared.progress.event(Event::Advance {
                stage: Stage::Frames,
                done,
            });
        }
    })?;
    // Only now, with the file complete and fsynced under its final name, does the row appear.
    if let Err(e) = cache.put_chunk(key, frames, done.samples, &meta) {
        shared.progress.event(Event::Warning {
            message: format!("{e}; the chunk will be rendered again next time"),
        });
    }
    tracing::debug!(chunk = i, "chunk finished");
    Ok(done)
}

/// Walks the chunks to render in order. Speech is asked for ahead: on a batching backend (the
/// GPU) every uncached sentence up to [`SPEECH_AHEAD`], otherwise the next chunk's, so the
/// backend works while the chunk workers draw and encode; the first chunk of each of the
/// `workers` ahead of the rest ([`Phrases::first_chunks`]). Each chunk's audio goes to the
/// workers as soon as its phrases are back.
fn speech_loop(
    shared: &Shared,
    engine: &mut SpeechEngine,
    todo: &[usize],
    workers: usize,
    tx: &crossbeam_channel::Sender<(usize, ChunkAudio)>,
) -> Result<()> {
    let plan = shared.plan;
    let quantum = frame_quantum(plan.sample_rate, shared.look.video.fps);
    let mut held = HeldUtterances {
        plan,
        limit: if engine.batches() { SPEECH_AHEAD } else { 0 },
        held: 0,
    };
    let mut ahead = Phrases::first_chunks(workers);
    let stopped = || shared.stopped();
    let waiter = Waiter {
        cache: shared.cache,
        progress: shared.progress,
        clock: shared.clock,
        stopped: &stopped,
    };
    let mut done_utterances = 0u64;
    // Chunks handed on whose new phrases are not cached yet: cached, then released, only once
    // every worker is busy (the channel is full) or at the end, so no idle worker waits for the
    // cache (it held the first workers back by a chunk's store each).
    let mut unstored = Vec::new();
    let mut unreleased = Vec::new();
    let settle = |ahead: &mut Phrases, unstored: &mut Vec<_>, unreleased: &mut Vec<usize>| {
        ahead.store(unstored, &waiter);
        unstored.clear();
        for c in unreleased.drain(..) {
            ahead.release(plan, c);
        }
    };
    let mut hand_on = || -> Result<()> {
        for (n, &c) in todo.iter().enumerate() {
            if shared.stopped() {
                return Err(Error::Cancelled);
            }
            ahead.keep_ahead(plan, todo, n, &mut held, engine, &waiter)?;
            unstored.extend(ahead.receive(plan, c, engine, &waiter)?);
            let audio = chunk_audio(plan, c, ahead.ready(), quantum);
            unreleased.push(c);
            held.held -= held.of(c);
            done_utterances += held.of(c) as u64;
            shared.progress.event(Event::Advance {
                stage: Stage::Speech,
                done: done_utterances,
            });
            tracing::debug!(chunk = c, "speech ready");
            match tx.try_send((c, audio)) {
                Ok(()) => {}
                Err(TrySendError::Full(job)) => {
                    settle(&mut ahead, &mut unstored, &mut unreleased);
                    if tx.send(job).is_err() {
                        return Err(Error::Cancelled);
                    }
                }
                Err(TrySendError::Disconnected(_)) => return Err(Error::Cancelled),
            }
        }
        Ok(())
    };
    let result = hand_on();
    // However the loop ended, the speech that came back is cached.
    settle(&mut ahead, &mut unstored, &mut unreleased);
    result
}

/// The video render's bound on speech asked for ahead: utterances of the chunks asked for and
/// not yet sent to the workers.
struct HeldUtterances<'a> {
    plan: &'a Plan,
    limit: usize,
    held: usize,
}

impl HeldUtterances<'_> {
    /// Utterances of chunk `c`.
    fn of(&self, c: usize) -> usize {
        self.plan.chunk_utterances(&self.plan.chunks[c]).len()
    }
}

impl Bound for HeldUtterances<'_> {
    fn wants_more(&self) -> bool {
        self.held < self.limit
    }

    fn requested(&mut self, chunk: usize) {
        self.held += self.of(chunk);
    }
}
