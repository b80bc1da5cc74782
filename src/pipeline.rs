//! The render: threads and channels only; every stage lives in its own module.
//!
//! ```text
//! main: script → face → plan (text, phonemes, keys) → cache lookups
//!   speech thread: phrase cache / requests ahead to the speech service → chunk audio ─────────┐
//!   chunk workers (one per core): frames → x264 → chunk file in the cache  ◀── bounded channel ─┘
//! main: every chunk, cached or new → MP4 (temp file, renamed when complete)
//! ```
//! Memory is bounded by the channel capacity and the speech window, not by the script's length.
//! The first real error stops every thread; knock-on errors from the stop are not reported.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_channel::bounded;

use crate::animate::{self, ChunkAudio, frame_quantum};
use crate::assets::{Assets, DEFAULT_VOICE};
use crate::cache::{Cache, ChunkEntry, Key};
use crate::error::{Error, Result};
use crate::face::{FaceModels, Landmarks, Portrait};
use crate::guard;
use crate::lexicon::Lexicon;
use crate::look::{self, Framing, Look, LookOptions};
use crate::media::{
    self, AudioFormat, Chapter, ChunkRef, Cue, MediaError, OutputMeta, SubtitleFormat,
    VideoSettings,
};
use crate::phonemize::Phonemizer;
use crate::plan::Plan;
use crate::progress::{Clock, Event, Progress, Stage};
use crate::script::Script;
use crate::speech::{SpeechEngine, SpeechOptions, SpeechService, SpeechStats};
use crate::tts::Speech;
use crate::tts::select::{BackendInfo, SpeechSetup};
use crate::tts::voice::VoiceFiles;

/// Most utterances a batching backend (the GPU) is asked for ahead of the chunk being sent to the
/// workers: a render sends all its uncached sentences at once up to this many (about 15 minutes of
/// speech; cached ones count too), which bounds the audio held in memory. Without batching, speech
/// runs one chunk ahead.
const SPEECH_AHEAD: usize = 256;
/// How often a render's threads look at the signal flag.
const CANCEL_POLL: std::time::Duration = std::time::Duration::from_millis(50);
/// Chunks waiting between the speech thread and the workers.
const CHANNEL_CAPACITY: usize = 2;

/// Where the cache lives for this render.
#[derive(Debug, Clone)]
pub enum CacheLocation {
    Dir(PathBuf),
    /// `--no-cache`: a private directory beside the output, removed afterwards.
    Temporary,
}

mod audio;

/// What `-o` writes: the talking-portrait MP4, or audio only (no portrait, no face stages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    Mp4,
    Audio(AudioFormat),
}

impl OutputKind {
    /// By extension: `.m4b`, `.m4a`, `.wav` are audio only; anything else is an MP4.
    pub fn of(path: &Path) -> OutputKind {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("m4b") => OutputKind::Audio(AudioFormat::M4b),
            Some("m4a") => OutputKind::Audio(AudioFormat::M4a),
            Some("wav") => OutputKind::Audio(AudioFormat::Wav),
            _ => OutputKind::Mp4,
        }
    }
}

/// Options beyond the video's: output kind, subtitle sidecar, extra lexicons.
#[derive(Debug, Clone, Default)]
pub struct ExtraOptions {
    /// `--format`: overrides the kind the output's extension implies.
    pub format: Option<OutputKind>,
    /// `--subtitles`: a sidecar next to the output, one cue per sentence.
    pub subtitles: Option<SubtitleFormat>,
    /// `--lexicon` files, applied after the script's own lexicon (later entries win).
    pub lexicons: Vec<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// A JSON script, an EPUB, Markdown or plain-text file (see `book`).
    pub script: PathBuf,
    /// Empty for audio-only outputs, which need no portrait.
    pub portrait: PathBuf,
    pub output: PathBuf,
    pub assets: Assets,
    pub cache: CacheLocation,
    /// Overrides the script's voice.
    pub voice: Option<String>,
    /// Overrides the script's size.
    pub size: Option<(u32, u32)>,
    /// Overrides the script's fps.
    pub fps: Option<u32>,
    pub framing: Framing,
    pub still: bool,
    pub seed: u64,
    pub crf: u8,
    pub preset: String,
    pub threads: usize,
    /// Piper's sampling noise (on by default, as Piper does; off makes speech deterministic).
    pub noise: bool,
    /// Backend, precision, engines and batching (a worker's renders share one service).
    pub speech: SpeechSetup,
    pub extra: ExtraOptions,
}

/// What a render did and how long each part took.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RenderReport {
    pub output: PathBuf,
    /// The subtitle sidecar, with `--subtitles`.
    pub subtitles: Option<PathBuf>,
    pub bytes: u64,
    pub audio_seconds: f64,
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
}

/// A chunk ready for the MP4: its length and sentence spans.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct ChunkDone {
    frames: u64,
    samples: u64,
    spans: Vec<(u64, u64)>,
}

/// Removes the `--no-cache` directory however the render ends.
pub struct TempDir(Option<PathBuf>);

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

pub fn open_cache(
    location: &CacheLocation,
    output: &Path,
    progress: &dyn Progress,
) -> Result<(Cache, TempDir)> {
    let temp = || {
        let parent = output
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        parent.join(format!(".talker-cache-{}", std::process::id()))
    };
    match location {
        CacheLocation::Dir(dir) => match Cache::open(dir) {
            Ok(c) => Ok((c, TempDir(None))),
            Err(e) => {
                progress.event(Event::Warning {
                    message: format!("{e}; rendering with a temporary cache"),
                });
                let dir = temp();
                Ok((Cache::open(&dir)?, TempDir(Some(dir))))
            }
        },
        CacheLocation::Temporary => {
            let dir = temp();
            Ok((Cache::open(&dir)?, TempDir(Some(dir))))
        }
    }
}

/// Everything a render needs before any audio or frame exists.
pub struct Prepared {
    pub script: Script,
    pub engine: SpeechEngine,
    pub look: Look,
    pub plan: Plan,
}

/// The script (any input kind, with every lexicon merged) and the speech engine; the output is
/// checked against every input, and the lexicon's IPA against the voice, before any synthesis.
pub fn load_inputs(
    opts: &RenderOptions,
    service: &SpeechService,
    progress: &dyn Progress,
    clock: &Clock,
) -> Result<(Script, SpeechEngine)> {
    let t = Instant::now();
    guard::regular_input(&opts.script, "script")?;
    let (mut script, notes) = crate::book::load_script(&opts.script)?;
    for message in notes {
        progress.event(Event::Warning { message });
    }
    for path in &opts.extra.lexicons {
        let more = Lexicon::load(path)?;
        script
            .lexicon
            .get_or_insert_with(Lexicon::default)
            .merge(more);
    }
    let voice_name = opts
        .voice
        .clone()
        .or_else(|| script.voice.clone())
        .unwrap_or_else(|| DEFAULT_VOICE.to_owned());
    let voice = VoiceFiles::resolve(&voice_name, &opts.assets.voices_dir())?;
    let mut inputs = vec![
        ("script", opts.script.as_path()),
        ("voice model", voice.model.as_path()),
        ("voice config", voice.config.as_path()),
    ];
    if !opts.portrait.as_os_str().is_empty() {
        inputs.push(("portrait", opts.portrait.as_path()));
    }
    inputs.extend(opts.extra.lexicons.iter().map(|l| ("lexicon", l.as_path())));
    guard::check_output(&opts.output, &inputs)?;
    let engine = SpeechEngine::new(
        service,
        SpeechOptions {
            voice,
            speed: script.speed,
            noise: opts.noise,
            speaker: 0,
        },
    )?;
    if let Some(lexicon) = &script.lexicon {
        let voice = engine.config();
        lexicon.check_symbols(&voice.espeak_voice, |s| voice.has_symbol(s))?;
    }
    clock.add(Stage::Script, t.elapsed());
    Ok((script, engine))
}

/// Text, phonemes and phrase keys of every sentence.
fn build_plan(
    script: &Script,
    engine: &SpeechEngine,
    progress: &dyn Progress,
    clock: &Clock,
    cancel: &AtomicBool,
) -> Result<Plan> {
    progress.event(Event::Start {
        stage: Stage::Phonemes,
        total: script.segments.len() as u64,
    });
    let plan = Plan::build(
        script,
        engine.config(),
        engine.identity(),
        &Phonemizer::global()?,
        clock,
        cancel,
    )?;
    progress.event(Event::Finish {
        stage: Stage::Phonemes,
    });
    Ok(plan)
}

/// Reads and checks every input (script, voice, portrait and face) and plans the render, cheapest
/// checks first, so bad input fails in milliseconds.
pub fn prepare(
    opts: &RenderOptions,
    service: &SpeechService,
    progress: &dyn Progress,
    clock: &Clock,
    cancel: &AtomicBool,
) -> Result<Prepared> {
    if opts.portrait.as_os_str().is_empty() {
        return Err(Error::Usage(
            "a video needs a portrait: talker render SCRIPT PORTRAIT -o talk.mp4 (audio-only outputs, -o book.m4b or .wav, need none)".into(),
        ));
    }
    guard::regular_input(&opts.portrait, "portrait")?;
    let (script, engine) = load_inputs(opts, service, progress, clock)?;
    let t = Instant::now();
    progress.event(Event::Start {
        stage: Stage::Face,
        total: 0,
    });
    let portrait = Portrait::open(&opts.portrait)?;
    let models = FaceModels::load(&opts.assets.face_dir())?;
    let analysis = models.analyse(&portrait)?;
    if analysis.faces_found > 1 {
        progress.event(Event::Warning {
            message: format!(
                "{} faces found in {}; animating the largest",
                analysis.faces_found,
                opts.portrait.display()
            ),
        });
    }
    let size = opts
        .size
        .or(script.size)
        .unwrap_or_else(|| look::default_size(portrait.image.width(), portrait.image.height()));
    let video = VideoSettings {
        width: size.0,
        height: size.1,
        fps: opts.fps.unwrap_or(script.fps),
        crf: opts.crf,
        preset: opts.preset.clone(),
        threads: 1,
    };
    video.validate()?;
    let look_opts = LookOptions {
        framing: opts.framing,
        size,
        still: opts.still,
        seed: opts.seed,
    };
    let (look, look_key) = look::prepare(
        &portrait.image,
        &analysis.face.landmarks,
        &look_opts,
        video.clone(),
    )
    .map_err(|e| blame_the_size(e, &portrait, &analysis.face.landmarks, &look_opts, video))?;
    drop(portrait);
    clock.add(Stage::Face, t.elapsed());
    progress.event(Event::Finish { stage: Stage::Face });

    let mut plan = build_plan(&script, &engine, progress, clock, cancel)?;
    plan.assign_chunk_keys(&look_key);
    Ok(Prepared {
        script,
        engine,
        look,
        plan,
    })
}

/// A frame whose shape crops the face away is the size's fault, not the face's: when the portrait
/// works at its own shape and the requested size's longest side, the error says so.
fn blame_the_size(
    e: Error,
    portrait: &Portrait,
    landmarks: &Landmarks,
    asked: &LookOptions,
    video: VideoSettings,
) -> Error {
    if !matches!(e, Error::Rig(_)) {
        return e;
    }
    let (pw, ph) = (
        u64::from(portrait.image.width()),
        u64::from(portrait.image.height()),
    );
    let (w, h) = asked.size;
    let side = u64::from(w.max(h));
    let even = |v: u64| (v.max(64) as u32) & !1;
    let own = (even(side * pw / pw.max(ph)), even(side * ph / pw.max(ph)));
    if own == asked.size {
        return e;
    }
    let fits = LookOptions {
        size: own,
        ..*asked
    };
    let video = VideoSettings {
        width: own.0,
        height: own.1,
        ..video
    };
    if look::prepare(&portrait.image, landmarks, &fits, video).is_err() {
        return e;
    }
    let suggest = look::default_size(pw as u32, ph as u32);
    Error::Usage(format!(
        "a {w}x{h} frame crops the face out of portrait {} ({pw}x{ph} px); choose a --size (or script \"size\") closer to the portrait's shape, such as {}x{}",
        portrait.path.display(),
        suggest.0,
        suggest.1
    ))
}

/// Renders with the process's speech service (`service`, shared by every render it runs).
pub fn render(
    opts: &RenderOptions,
    service: &SpeechService,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<RenderReport> {
    let wall = Instant::now();
    let clock = Clock::default();
    if let OutputKind::Audio(format) = opts.extra.format.unwrap_or(OutputKind::of(&opts.output)) {
        return audio::render_audio(opts, format, service, progress, cancel);
    }
    let Prepared {
        script,
        mut engine,
        look,
        plan,
    } = prepare(opts, service, progress, &clock, cancel)?;
    let (fps, size) = (look.video.fps, (look.video.width, look.video.height));
    tracing::debug!(
        ms = wall.elapsed().as_millis(),
        chunks = plan.chunks.len(),
        "planned"
    );

    let (cache, _temp) = open_cache(&opts.cache, &opts.output, progress)?;
    cache_warnings(&cache, progress);
    let sample_rate = plan.sample_rate;
    let mut done: Vec<Option<ChunkDone>> = vec![None; plan.chunks.len()];
    let mut todo = Vec::new();
    // A chunk whose key came earlier in this render is that chunk again: rendered once.
    let mut first_of: HashMap<Key, usize> = HashMap::new();
    let mut repeats = Vec::new();
    for (i, c) in plan.chunks.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Cancelled);
        }
        let key = c.key.as_ref().expect("keys assigned");
        if let Some(&first) = first_of.get(key) {
            repeats.push((i, first));
            continue;
        }
        first_of.insert(*key, i);
        match reuse_chunk(&cache, key, c.sentences.len()) {
            Some(d) => done[i] = Some(d),
            None => todo.push(i),
        }
    }
    cache_warnings(&cache, progress);
    let chunks_reused = plan.chunks.len() - todo.len();
    tracing::debug!(
        ms = wall.elapsed().as_millis(),
        reused = chunks_reused,
        todo = todo.len(),
        "cache looked up"
    );

    let shared = Shared {
        plan: &plan,
        cache: &cache,
        look: &look,
        clock: &clock,
        progress,
        cancel,
        stop: AtomicBool::new(false),
        workers: opts.threads.max(1),
        speech_wait_nanos: AtomicU64::new(0),
    };
    let new_chunks = run_threads(&shared, &mut engine, &todo)?;
    for (i, d) in new_chunks {
        done[i] = Some(d);
    }
    for (i, first) in repeats {
        done[i] = done[first].clone();
    }
    let done: Vec<ChunkDone> = done
        .into_iter()
        .map(|d| d.expect("every chunk reused or rendered"))
        .collect();

    let t = Instant::now();
    progress.event(Event::Start {
        stage: Stage::Assemble,
        total: 0,
    });
    let chunks: Vec<ChunkRef> = plan
        .chunks
        .iter()
        .zip(&done)
        .map(|(c, d)| ChunkRef {
            path: cache.chunk_path(c.key.as_ref().expect("keys assigned")),
            expect: Some((d.frames, d.samples)),
        })
        .collect();
    let meta = output_meta(&script, &plan, &done, sample_rate);
    media::remove_stale_partials(&opts.output);
    tracing::debug!(ms = wall.elapsed().as_millis(), "assembling");
    let info = media::assemble(&chunks, &opts.output, &meta, cancel).map_err(|e| match e {
        MediaError::Cancelled => Error::Cancelled,
        e => e.into(),
    })?;
    tracing::debug!(ms = wall.elapsed().as_millis(), "assembled");
    let subtitles = opts
        .extra
        .subtitles
        .map(|f| media::write_sidecar(&opts.output, &meta.cues, f))
        .transpose()?;
    clock.add(Stage::Assemble, t.elapsed());
    progress.event(Event::Finish {
        stage: Stage::Assemble,
    });

    Ok(RenderReport {
        output: opts.output.clone(),
        subtitles,
        bytes: info.bytes,
        audio_seconds: info.audio_samples as f64 / f64::from(sample_rate),
        frames: info.frames,
        fps,
        width: size.0,
        height: size.1,
        chunks: plan.chunks.len(),
        chunks_reused,
        utterances: plan.utterances.len(),
        phrase_hits: shared_hits(&engine, &plan, &todo),
        backend: service.info().clone(),
        speech: engine.stats,
        speech_wait_seconds: shared.speech_wait_nanos.load(Ordering::Relaxed) as f64 * 1e-9,
        wall_seconds: wall.elapsed().as_secs_f64(),
        stage_seconds: Stage::ALL
            .iter()
            .map(|&s| (s.label(), clock.seconds(s)))
            .collect(),
    })
}

/// Utterances of rendered chunks that came from the phrase cache rather than the model.
fn shared_hits(engine: &SpeechEngine, plan: &Plan, todo: &[usize]) -> u64 {
    let needed: u64 = todo
        .iter()
        .map(|&i| plan.chunk_utterances(&plan.chunks[i]).len() as u64)
        .sum();
    needed.saturating_sub(engine.stats.synthesized)
}

/// Shows what the cache found damaged (and repaired) as warnings.
fn cache_warnings(cache: &Cache, progress: &dyn Progress) {
    for message in cache.take_warnings() {
        progress.event(Event::Warning { message });
    }
}

/// A cached chunk that still matches this render, or `None` to render it again (a lookup that
/// fails only costs the work). The cache has checked the file against its sha256, and the key
/// covers every encoder setting, so only the row's own description is checked here.
fn reuse_chunk(cache: &Cache, key: &Key, sentences: usize) -> Option<ChunkDone> {
    chunk_done(&cache.get_chunk(key).ok()??, sentences)
}

fn chunk_done(entry: &ChunkEntry, sentences: usize) -> Option<ChunkDone> {
    serde_json::from_str::<ChunkDone>(&entry.meta)
        .ok()
        .filter(|d| {
            d.spans.len() == sentences && d.samples == entry.samples && d.frames == entry.frames
        })
}

fn output_meta(script: &Script, plan: &Plan, done: &[ChunkDone], sample_rate: u32) -> OutputMeta {
    let sr = f64::from(sample_rate);
    let mut cues = Vec::new();
    let mut chapter_starts: Vec<(String, f64)> = Vec::new();
    let mut offset = 0u64;
    let mut seen_segment = None;
    for (c, d) in plan.chunks.iter().zip(done) {
        if seen_segment != Some(c.segment) {
            seen_segment = Some(c.segment);
            if let Some(title) = &plan.chapters[c.segment] {
                chapter_starts.push((title.clone(), offset as f64 / sr));
            }
        }
        for (s, &(a, b)) in c.sentences.clone().zip(&d.spans) {
            cues.push(Cue {
                text: plan.sentences[s].display.clone(),
                start: (offset + a) as f64 / sr,
                end: (offset + b) as f64 / sr,
            });
        }
        offset += d.samples;
    }
    let chapters = chapter_list(&chapter_starts, offset as f64 / sr);
    OutputMeta {
        title: script.title.clone(),
        author: script.author.clone(),
        chapters,
        cues,
    }
}

/// Chapters from their titles and starts: each ends where the next begins, the last at `total`.
fn chapter_list(starts: &[(String, f64)], total: f64) -> Vec<Chapter> {
    starts
        .iter()
        .enumerate()
        .map(|(i, (title, start))| Chapter {
            title: title.clone(),
            start: *start,
            end: starts.get(i + 1).map_or(total, |n| n.1),
        })
        .collect()
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
    /// Chunk workers (one per thread asked for; each x264 encoder uses one thread).
    workers: usize,
    /// Time chunk workers spent waiting for a chunk's audio, summed.
    speech_wait_nanos: AtomicU64,
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
        errors.lock().expect("error list").push(e);
    };
    let workers = shared.workers.min(todo.len()).max(1);
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
                if let Err(e) = speech_loop(shared, engine, todo, &tx) {
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
                        if shared.stopped() {
                            break;
                        }
                        match render_one(shared, i, &audio, frames_done) {
                            Ok(d) => results.lock().expect("results").push((i, d)),
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
    let key = plan.chunks[i].key.as_ref().expect("keys assigned");
    let path = cache.chunk_path(key);
    // One writer per chunk across every render sharing the cache; the others wait, then reuse.
    let lock = cache.lock_chunk(key, &shared.stop);
    cache_warnings(cache, shared.progress);
    let Some(_lock) = lock? else {
        return Err(Error::Cancelled);
    };
    match cache.find_chunk(key) {
        Ok(Some(entry)) => {
            if let Some(d) = chunk_done(&entry, plan.chunks[i].sentences.len()) {
                tracing::debug!(chunk = i, "chunk finished by another render");
                return Ok(d);
            }
            // Unusable; nobody reads a file without a row, so it goes before the new one.
            let _ = cache.drop_chunk(key);
        }
        Ok(None) => {}
        // Says nothing about the entry (it may be another render's good chunk): keep it.
        Err(e) => shared.progress.event(Event::Warning {
            message: format!("{e}; rendering the chunk again"),
        }),
    }
    media::remove_stale_partials(&path);
    let frames = audio.frames(plan.sample_rate, shared.look.video.fps);
    let done = ChunkDone {
        frames,
        samples: audio.pcm.len() as u64,
        spans: audio.sentence_spans.clone(),
    };
    let meta = serde_json::to_string(&done).expect("chunk meta serialises");
    tracing::debug!(chunk = i, frames, "chunk started");
    animate::render_chunk(
        shared.look,
        audio,
        plan.sample_rate,
        &path,
        &shared.stop,
        shared.clock,
        || {
            let done = frames_done.fetch_add(1, Ordering::Relaxed) + 1;
            if done.is_multiple_of(25) {
                shared.progress.event(Event::Advance {
                    stage: Stage::Frames,
                    done,
                });
            }
        },
    )?;
    // Only now, with the file complete and fsynced under its final name, does the row appear.
    if let Err(e) = cache.put_chunk(key, frames, done.samples, &meta) {
        shared.progress.event(Event::Warning {
            message: format!("{e}; the chunk will be rendered again next time"),
        });
    }
    tracing::debug!(chunk = i, "chunk finished");
    Ok(done)
}

/// What the speech thread has asked for and holds, by phrase key.
#[derive(Default)]
struct Ahead {
    /// Speech ready for the chunks submitted and not yet sent.
    ready: HashMap<Key, Speech>,
    /// Submitted to the service: ticket → key.
    tickets: HashMap<u64, Key>,
    /// Keys waiting for a ticket.
    waiting: HashMap<Key, u64>,
    /// How many submitted, unsent chunk utterances use each key.
    uses: HashMap<Key, usize>,
}

impl Ahead {
    /// Looks a chunk's phrases up in the cache and asks the service for the missing ones.
    fn request(
        &mut self,
        plan: &Plan,
        chunk: usize,
        engine: &mut SpeechEngine,
        cache: &Cache,
        progress: &dyn Progress,
    ) -> Result<()> {
        let utterances = plan.chunk_utterances(&plan.chunks[chunk]);
        let keys: Vec<Key> = utterances
            .clone()
            .map(|u| plan.utterances[u].key)
            .filter(|k| !self.ready.contains_key(k) && !self.waiting.contains_key(k))
            .collect();
        if !keys.is_empty() {
            let hits = cache.get_phrases(&keys).unwrap_or_else(|e| {
                progress.event(Event::Warning {
                    message: format!("{e}; synthesising without the cache"),
                });
                HashMap::new()
            });
            self.ready.extend(hits);
        }
        for u in utterances {
            let key = plan.utterances[u].key;
            *self.uses.entry(key).or_insert(0) += 1;
            if !self.ready.contains_key(&key) && !self.waiting.contains_key(&key) {
                let ticket = engine.submit(&plan.utterances[u])?;
                self.tickets.insert(ticket, key);
                self.waiting.insert(key, ticket);
            }
        }
        Ok(())
    }

    /// Receives speech until every phrase of `chunk` is ready; new speech is cached.
    fn wait_for(
        &mut self,
        plan: &Plan,
        chunk: usize,
        engine: &mut SpeechEngine,
        shared: &Shared,
    ) -> Result<()> {
        let utterances = plan.chunk_utterances(&plan.chunks[chunk]);
        while utterances
            .clone()
            .any(|u| !self.ready.contains_key(&plan.utterances[u].key))
        {
            let t = Instant::now();
            let (ticket, speech) = engine.next(shared.progress, &|| shared.stopped())?;
            shared.clock.add(Stage::Speech, t.elapsed());
            let Some(key) = self.tickets.remove(&ticket) else {
                continue;
            };
            self.waiting.remove(&key);
            if let Err(e) = shared.cache.put_phrase(key, &speech) {
                shared.progress.event(Event::Warning {
                    message: format!("{e}; this phrase is not cached"),
                });
            }
            self.ready.insert(key, speech);
        }
        Ok(())
    }

    /// Forgets the speech of a sent chunk that no later submitted chunk needs.
    fn release(&mut self, plan: &Plan, chunk: usize) {
        for u in plan.chunk_utterances(&plan.chunks[chunk]) {
            let key = plan.utterances[u].key;
            if let Some(n) = self.uses.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.uses.remove(&key);
                    self.ready.remove(&key);
                }
            }
        }
    }
}

/// Walks the chunks to render in order. Speech is asked for ahead: on a batching backend (the
/// GPU) every uncached sentence up to [`SPEECH_AHEAD`], otherwise the next chunk's, so the
/// backend works while the chunk workers draw and encode. Each chunk's audio goes to the workers
/// as soon as its phrases are back.
fn speech_loop(
    shared: &Shared,
    engine: &mut SpeechEngine,
    todo: &[usize],
    tx: &crossbeam_channel::Sender<(usize, ChunkAudio)>,
) -> Result<()> {
    let plan = shared.plan;
    let quantum = frame_quantum(plan.sample_rate, shared.look.video.fps);
    let ahead_limit = if engine.batches() { SPEECH_AHEAD } else { 0 };
    let mut ahead = Ahead::default();
    let mut done_utterances = 0u64;
    let mut submitted = 0;
    // Utterances of the chunks requested and not yet sent: what `ahead` may hold.
    let mut held = 0;
    let utterances = |c: usize| plan.chunk_utterances(&plan.chunks[c]).len();
    for (n, &c) in todo.iter().enumerate() {
        if shared.stopped() {
            return Err(Error::Cancelled);
        }
        // This chunk and the next one at least; more while the backend batches.
        while submitted < todo.len() && (submitted <= n + 1 || held < ahead_limit) {
            ahead.request(plan, todo[submitted], engine, shared.cache, shared.progress)?;
            held += utterances(todo[submitted]);
            submitted += 1;
        }
        ahead.wait_for(plan, c, engine, shared)?;
        let audio = chunk_audio(plan, c, &ahead.ready, quantum);
        ahead.release(plan, c);
        held -= utterances(c);
        done_utterances += utterances(c) as u64;
        shared.progress.event(Event::Advance {
            stage: Stage::Speech,
            done: done_utterances,
        });
        tracing::debug!(chunk = c, "speech ready");
        if tx.send((c, audio)).is_err() {
            return Err(Error::Cancelled);
        }
    }
    Ok(())
}

/// Speech for every utterance of `chunks`: from the phrase cache where it is, synthesised (and
/// cached) where not. Cache failures only cost speed. Returns `Cancelled` soon after `stop` is set.
pub fn speak(
    plan: &Plan,
    chunks: &[usize],
    engine: &mut SpeechEngine,
    cache: &Cache,
    progress: &dyn Progress,
    clock: &Clock,
    stop: &AtomicBool,
) -> Result<HashMap<Key, Speech>> {
    let utterances = || {
        chunks
            .iter()
            .flat_map(|&c| plan.chunk_utterances(&plan.chunks[c]))
    };
    let keys: Vec<Key> = utterances().map(|u| plan.utterances[u].key).collect();
    let mut speeches = cache.get_phrases(&keys).unwrap_or_else(|e| {
        progress.event(Event::Warning {
            message: format!("{e}; synthesising without the cache"),
        });
        HashMap::new()
    });
    cache_warnings(cache, progress);
    let mut missing: Vec<usize> = Vec::new();
    for u in utterances() {
        let key = plan.utterances[u].key;
        if !speeches.contains_key(&key) && !missing.iter().any(|&m| plan.utterances[m].key == key) {
            missing.push(u);
        }
    }
    // Without batching, one utterance per call, so a stop is seen between sentences.
    let per_call = if engine.batches() { missing.len() } else { 1 };
    for group in missing.chunks(per_call.max(1)) {
        if stop.load(Ordering::Relaxed) {
            return Err(Error::Cancelled);
        }
        let t = Instant::now();
        let utts: Vec<_> = group.iter().map(|&u| &plan.utterances[u]).collect();
        let out = engine.synthesize(&utts)?;
        clock.add(Stage::Speech, t.elapsed());
        for (&u, speech) in group.iter().zip(out) {
            let key = plan.utterances[u].key;
            if let Err(e) = cache.put_phrase(key, &speech) {
                progress.event(Event::Warning {
                    message: format!("{e}; this phrase is not cached"),
                });
            }
            speeches.insert(key, speech);
        }
    }
    Ok(speeches)
}

/// A chunk's sentences laid out on the frame grid.
pub fn chunk_audio(
    plan: &Plan,
    chunk: usize,
    speeches: &HashMap<Key, Speech>,
    quantum: u64,
) -> ChunkAudio {
    let c = &plan.chunks[chunk];
    let sentences: Vec<Vec<&Speech>> = c
        .sentences
        .clone()
        .map(|s| {
            plan.sentences[s]
                .utterances
                .clone()
                .map(|u| &speeches[&plan.utterances[u].key])
                .collect()
        })
        .collect();
    animate::layout(&sentences, c.lead_in_samples, c.tail_samples, quantum)
}
