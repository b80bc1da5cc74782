//! The speech stage: utterances → [`Speech`], through the process's one [`SpeechService`].
//!
//! Input: planned utterances (phoneme ids + the phonemes they came from). Output: 16-bit PCM and
//! per-phoneme sample spans for each. A [`SpeechService`] holds the backend this process chose
//! (`--backend`) behind a [`Batcher`]; every render gets a [`SpeechEngine`] (a client of it), so
//! the sentences of all running renders share model calls. On the CPU voices are loaded on first
//! use, so a render whose speech is all cached never pays for it; on the GPU a render's voices are
//! loaded as soon as it names them, so the engine loads while the render plans (see
//! [`Resolved::preloads`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::cache::{Cache, Key, report_warnings};
use crate::plan::{Plan, SpeechIdentity, Utterance, VoiceUse};
use crate::progress::{Clock, Event, NoProgress, Progress, Stage};
use crate::tts::batch::DEFAULT_EDGES;
use crate::tts::batcher::{Batcher, BatcherStats, Client, Policy, Priority, Reply, VoiceRef};
use crate::tts::select::{self, BackendInfo, Resolved, SpeechSetup};
use crate::tts::voice::{Kept, Scales, VoiceConfig, VoiceFiles};
use crate::tts::{Speech, SpeechError, align, to_pcm16};

/// Every utterance is scaled so its peak sits here (Piper normalises to full scale; a little
/// headroom keeps the AAC encoder from clipping).
const PEAK: f32 = 0.9;
/// How often a waiting render checks whether it was stopped.
const POLL: Duration = Duration::from_millis(50);

/// The backend this process speaks with, and the batcher that owns it.
pub struct SpeechService {
    resolved: Resolved,
    batcher: Batcher,
    /// The GPU's context being made ([`Resolved::start_early`]).
    early: Option<std::thread::JoinHandle<()>>,
}

impl Drop for SpeechService {
    /// A process must not end while the driver makes a context on another thread.
    fn drop(&mut self) {
        if let Some(h) = self.early.take() {
            let _ = h.join();
        }
    }
}

impl SpeechService {
    /// Decides the backend (failing before any work when `--backend cuda` has no GPU) and starts
    /// the batcher's lanes; no voice is loaded yet.
    pub fn start(setup: &SpeechSetup) -> Result<SpeechService, SpeechError> {
        let t = Instant::now();
        let resolved = select::resolve(setup)?;
        // The probe (the CUDA libraries, the driver) runs before any render starts.
        tracing::debug!(
            "speech on {} chosen in {:.3} s",
            resolved.info.describe(),
            t.elapsed().as_secs_f64()
        );
        let policy = Policy {
            limits: resolved.limits,
            edges: DEFAULT_EDGES.to_vec(),
            max_wait: setup.max_wait,
            lanes: resolved.lanes,
            warm_up: setup.warm_up,
            // A process that warms up for nobody runs one render: its voice can go once it rests.
            // On the CPU, where the voice's memory is the process's own (ONNX Runtime's session);
            // a GPU voice keeps its weights on the device, and its unload is not yet measured.
            unload_at_rest: !setup.warm_up && resolved.info.gpu.is_none(),
        };
        let early = resolved.start_early();
        let batcher = Batcher::start(Box::new(resolved.clone()), policy);
        Ok(SpeechService {
            resolved,
            batcher,
            early,
        })
    }

    pub fn info(&self) -> &BackendInfo {
        &self.resolved.info
    }

    /// Why `auto` speaks on the CPU, if it does.
    pub fn note(&self) -> Option<&str> {
        self.resolved.info.note.as_deref()
    }

    /// Calls, items and model seconds over every render so far.
    pub fn stats(&self) -> BatcherStats {
        self.batcher.stats()
    }

    /// Whether a render's voices are loaded as soon as it names them.
    pub fn preloads(&self) -> bool {
        self.resolved.preloads()
    }

    /// Whether several sentences share a model call (then a render sends all its sentences
    /// ahead; otherwise one chunk ahead).
    pub fn batches(&self) -> bool {
        self.batcher.policy().limits.max_items > 1
    }
}

/// How a voice is to be spoken.
#[derive(Debug, Clone)]
pub struct SpeechOptions {
    pub voice: VoiceFiles,
    /// 1.0 is the voice's own pace; 2.0 twice as fast.
    pub speed: f32,
    /// Sampling noise as the voice config sets it; `false` gives deterministic output.
    pub noise: bool,
    pub speaker: u32,
}

/// This render's share of the speech work.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct SpeechStats {
    pub synthesized: u64,
    /// Model calls that carried at least one of this render's utterances.
    pub batches: u64,
    /// Mean items per call over those calls (items of every render in them).
    pub mean_batch_items: f64,
    /// This render's share of the model time (a call's seconds split evenly over its items).
    pub model_seconds: f64,
    /// Seconds loading (or building) voices, counted once for each call that reported a load.
    pub load_seconds: f64,
    pub padded_ids: u64,
    pub real_ids: u64,
    pub audio_samples: u64,
}

impl SpeechStats {
    pub fn padding_waste(&self) -> f64 {
        if self.padded_ids == 0 {
            0.0
        } else {
            1.0 - self.real_ids as f64 / self.padded_ids as f64
        }
    }
}

/// One voice as a render speaks it: its files, its config, and its scales and speaker.
struct EngineVoice {
    voice: Arc<VoiceRef>,
    config: Arc<VoiceConfig>,
    identity: SpeechIdentity,
}

/// One render's speech: its voices and its client of the service.
pub struct SpeechEngine {
    client: Client,
    /// The render's voice first, then each other voice, pace or speaker a segment asks for.
    voices: Vec<EngineVoice>,
    /// Voice files read so far (model path → config and model sha256): each is read once.
    files: HashMap<PathBuf, (Arc<VoiceConfig>, [u8; 32])>,
    /// The voice of each segment (an index into `voices`; the first past the end).
    by_segment: Vec<usize>,
    engine_tag: String,
    batches: bool,
    /// Whether each new voice is loaded at once rather than on its first sentence.
    preloads: bool,
    /// Submitted, not yet returned: ticket → the voice and the phonemes to align.
    pending: HashMap<u64, (usize, Vec<Kept>)>,
    /// Calls seen so far → their item counts.
    calls: HashMap<u64, usize>,
    pub stats: SpeechStats,
}

impl SpeechEngine {
    /// Reads the voice's config and hashes its model file; loads the model only where the
    /// service preloads (the GPU), on its lane while the render goes on.
    pub fn new(
        service: &SpeechService,
        options: SpeechOptions,
    ) -> Result<SpeechEngine, SpeechError> {
        let mut engine = SpeechEngine {
            client: service.batcher.client(),
            voices: Vec::new(),
            files: HashMap::new(),
            by_segment: Vec::new(),
            engine_tag: service.info().cache_tag(),
            batches: service.batches(),
            preloads: service.preloads(),
            pending: HashMap::new(),
            calls: HashMap::new(),
            stats: SpeechStats::default(),
        };
        engine.add_voice(options)?;
        Ok(engine)
    }

    /// The config of the voice in `files`, read (and its model hashed) once per file.
    pub fn voice_config(&mut self, files: &VoiceFiles) -> Result<Arc<VoiceConfig>, SpeechError> {
        Ok(Arc::clone(&self.read(files)?.0))
    }

    fn read(&mut self, files: &VoiceFiles) -> Result<(Arc<VoiceConfig>, [u8; 32]), SpeechError> {
        if let Some(known) = self.files.get(&files.model) {
            return Ok(known.clone());
        }
        let config = Arc::new(VoiceConfig::load(&files.config)?);
        let read = (config, hash_file(&files.model)?);
        self.files.insert(files.model.clone(), read.clone());
        Ok(read)
    }

    /// Adds a voice (or another pace or speaker of one) and returns its index, the same index
    /// for the same model bytes, config, scales and speaker. A voice with another sample rate
    /// than the first is refused: talker does not resample speech.
    pub fn add_voice(&mut self, options: SpeechOptions) -> Result<usize, SpeechError> {
        let (config, voice_hash) = self.read(&options.voice)?;
        if options.speaker >= config.num_speakers.max(1) {
            return Err(SpeechError::Voice(format!(
                "speaker {} does not exist; {} has {} speaker(s)",
                options.speaker, options.voice.name, config.num_speakers
            )));
        }
        if let Some(first) = self.voices.first()
            && first.config.sample_rate != config.sample_rate
        {
            return Err(SpeechError::Voice(format!(
                "{} speaks at {} Hz and {} at {} Hz; talker does not resample between voices, so use voices of one sample rate",
                options.voice.name,
                config.sample_rate,
                first.voice.files.name,
                first.config.sample_rate
            )));
        }
        let d = config.defaults;
        let scales = Scales {
            noise: if options.noise { d.noise } else { 0.0 },
            length: d.length / options.speed,
            noise_w: if options.noise { d.noise_w } else { 0.0 },
        };
        let identity = SpeechIdentity {
            voice_hash,
            scales,
            speaker: options.speaker,
            engine: self.engine_tag.clone(),
        };
        if let Some(i) = self.voices.iter().position(|v| {
            v.identity.voice_hash == voice_hash
                && (Arc::ptr_eq(&v.config, &config) || *v.config == *config)
                && v.identity.scales.to_bits() == scales.to_bits()
                && v.identity.speaker == options.speaker
        }) {
            return Ok(i);
        }
        let voice = Arc::new(VoiceRef {
            files: options.voice,
            hash: voice_hash,
        });
        if self.preloads {
            self.client.preload(&voice);
        }
        self.voices.push(EngineVoice {
            voice,
            config,
            identity,
        });
        Ok(self.voices.len() - 1)
    }

    /// Which voice (an index from [`SpeechEngine::add_voice`]) speaks each segment.
    pub fn set_segment_voices(&mut self, by_segment: Vec<usize>) {
        self.by_segment = by_segment;
    }

    /// The voices as a plan uses them, and the voice of each segment
    /// (see [`Plan::build_voiced`](crate::plan::Plan::build_voiced)).
    pub fn plan_voices(&self) -> (Vec<VoiceUse<'_>>, &[usize]) {
        let uses = self
            .voices
            .iter()
            .map(|v| VoiceUse {
                config: &v.config,
                identity: &v.identity,
            })
            .collect();
        (uses, &self.by_segment)
    }

    /// The config of each voice file in use, the render's own first.
    pub fn configs(&self) -> Vec<&VoiceConfig> {
        let mut out: Vec<&Arc<VoiceConfig>> = Vec::new();
        for v in &self.voices {
            if !out.iter().any(|c| Arc::ptr_eq(c, &v.config)) {
                out.push(&v.config);
            }
        }
        out.into_iter().map(Arc::as_ref).collect()
    }

    pub fn batches(&self) -> bool {
        self.batches
    }

    /// The render's own voice (the first).
    pub fn config(&self) -> &VoiceConfig {
        &self.voices[0].config
    }

    /// The files of the render's own voice.
    pub fn voice_files(&self) -> &VoiceFiles {
        &self.voices[0].voice.files
    }

    /// The name and config of the voice that speaks segment `i`.
    pub fn segment_voice(&self, i: usize) -> (&str, &VoiceConfig) {
        let v = self
            .by_segment
            .get(i)
            .and_then(|&v| self.voices.get(v))
            .unwrap_or(&self.voices[0]);
        (&v.voice.files.name, &v.config)
    }

    /// What keys the phrases of the render's own voice.
    pub fn identity(&self) -> &SpeechIdentity {
        &self.voices[0].identity
    }

    /// Says the render has all its speech for now: in a process of one render its voices are
    /// unloaded (see [`crate::tts::batcher::Client::rest`]); the next submit loads them again.
    pub fn rest(&self) {
        self.client.rest();
    }

    /// Queues an utterance; [`SpeechEngine::next`] returns it with this ticket.
    pub fn submit(&mut self, u: &Utterance, priority: Priority) -> Result<u64, SpeechError> {
        let v = self.voices.get(u.voice).ok_or_else(|| {
            SpeechError::Engine(format!(
                "an utterance names voice {} of {}",
                u.voice,
                self.voices.len()
            ))
        })?;
        let ticket = self.client.submit(
            &v.voice,
            v.identity.scales,
            v.identity.speaker,
            u.ids.clone(),
            priority,
        )?;
        self.pending.insert(ticket, (u.voice, u.kept.clone()));
        Ok(ticket)
    }

    /// Waits for the next finished utterance. `stopped` is asked between waits (a stopped render
    /// returns `Cancelled`, and dropping the engine releases its queued items); engine-build
    /// progress goes to `progress`.
    pub fn next(
        &mut self,
        progress: &dyn Progress,
        stopped: &dyn Fn() -> bool,
    ) -> Result<(u64, Speech), SpeechError> {
        loop {
            if self.pending.is_empty() {
                return Err(SpeechError::Engine("nothing was asked for".into()));
            }
            if stopped() {
                return Err(SpeechError::Cancelled);
            }
            match self.client.recv_timeout(POLL) {
                None => {}
                Some(Reply::Event(e)) => progress.event(e),
                Some(Reply::Done {
                    ticket,
                    result,
                    call,
                }) => {
                    let (voice, kept) = self.pending.remove(&ticket).unwrap_or_default();
                    let s = &mut self.stats;
                    s.model_seconds += call.seconds / call.items.max(1) as f64;
                    if self.calls.insert(call.call, call.items).is_none() {
                        s.batches += 1;
                        s.load_seconds += call.load_seconds;
                        s.padded_ids += call.padded_ids as u64;
                    }
                    s.mean_batch_items =
                        self.calls.values().sum::<usize>() as f64 / self.calls.len() as f64;
                    let raw = result?;
                    let config = &self.voices[voice.min(self.voices.len() - 1)].config;
                    let pcm = to_pcm16(&normalize_peak(raw.pcm));
                    let phones = align(&kept, &raw.id_frames, config.hop, pcm.len() as u64);
                    s.synthesized += 1;
                    s.real_ids += raw.id_frames.len() as u64;
                    s.audio_samples += pcm.len() as u64;
                    return Ok((
                        ticket,
                        Speech {
                            sample_rate: config.sample_rate,
                            pcm,
                            phones,
                        },
                    ));
                }
            }
        }
    }

    /// Synthesises `utterances` (all submitted at once); results come back in the same order.
    pub fn synthesize(&mut self, utterances: &[&Utterance]) -> Result<Vec<Speech>, SpeechError> {
        let mut order = HashMap::new();
        for (i, u) in utterances.iter().enumerate() {
            order.insert(self.submit(u, Priority::Normal)?, i);
        }
        let mut out: Vec<Option<Speech>> = vec![None; utterances.len()];
        while out.iter().any(Option::is_none) {
            let (ticket, speech) = self.next(&NoProgress, &|| false)?;
            if let Some(&i) = order.get(&ticket) {
                out[i] = Some(speech);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }
}

/// Scales to a fixed peak; silence stays silence.
fn normalize_peak(mut pcm: Vec<f32>) -> Vec<f32> {
    let peak = pcm.iter().fold(0.0f32, |m, s| m.max(s.abs()));
    if peak > 1e-6 {
        let gain = PEAK / peak;
        pcm.iter_mut().for_each(|s| *s *= gain);
    }
    pcm
}

/// sha256 of a file, streamed.
pub fn hash_file(path: &std::path::Path) -> Result<[u8; 32], SpeechError> {
    crate::cache::file_sha256(path).map_err(SpeechError::io(path))
}

/// What waiting for speech needs besides the engine: where new speech is cached, where
/// warnings and engine events go, the clock speech time is added to, and whether to stop.
pub struct Waiter<'a> {
    pub cache: &'a Cache,
    pub progress: &'a dyn Progress,
    pub clock: &'a Clock,
    pub stopped: &'a dyn Fn() -> bool,
}

/// The one phrase scheduler of a render (video and audio-only alike): looks each chunk's phrases
/// up in the cache, asks the engine once for each phrase missing, caches what comes back (a
/// phrase that cannot be cached only costs speed, with a warning) and holds the speech until no
/// requested chunk needs it. Chunks requested first are asked for first, so the batcher, which
/// serves the oldest item first, speaks them first.
#[derive(Default)]
pub struct Phrases {
    /// Speech ready for the chunks requested and not yet released.
    ready: HashMap<Key, Speech>,
    /// Submitted to the service: ticket → key.
    tickets: HashMap<u64, Key>,
    /// Keys waiting for a ticket.
    waiting: HashMap<Key, u64>,
    /// How many requested, unreleased chunk utterances use each key.
    uses: HashMap<Key, usize>,
    /// How far [`Phrases::keep_ahead`] has gone in its order.
    asked: Asked,
    /// How many chunks at the head of that order are asked for as [`Priority::First`].
    first: usize,
}

/// How much speech [`Phrases::keep_ahead`] asks for beyond the next two chunks, which it always
/// asks for: a render's bound on the speech it holds.
pub trait Bound {
    /// Whether one more chunk may be asked for.
    fn wants_more(&self) -> bool;
    /// `chunk` was asked for.
    fn requested(&mut self, chunk: usize);
}

/// Where [`Phrases::keep_ahead`] stands in the order it asks for chunks in.
#[derive(Default)]
pub(crate) struct Asked(usize);

impl Asked {
    /// The next chunk of `order` to ask for ahead of `order[at]` (the chunk waited for next), told
    /// to `bound`: up to the one after it always, so the engine has work while the loop hands a
    /// chunk on, and further while `bound` wants more.
    pub(crate) fn next(
        &mut self,
        order: &[usize],
        at: usize,
        bound: &mut dyn Bound,
    ) -> Option<usize> {
        let &chunk = order.get(self.0)?;
        if self.0 > at + 1 && !bound.wants_more() {
            return None;
        }
        self.0 += 1;
        bound.requested(chunk);
        Some(chunk)
    }
}

impl Phrases {
    /// Phrases whose [`Phrases::keep_ahead`] asks for the first `chunks` of its order as
    /// [`Priority::First`]: a video's first chunk for each worker.
    pub fn first_chunks(chunks: usize) -> Phrases {
        Phrases {
            first: chunks,
            ..Phrases::default()
        }
    }

    /// Asks for the chunks of `order`, going on from the last call, ahead of `order[at]`, the
    /// chunk waited for next ([`Asked::next`] says how far): the one request-ahead loop of the
    /// video and the audio-only renders.
    pub fn keep_ahead(
        &mut self,
        plan: &Plan,
        order: &[usize],
        at: usize,
        bound: &mut dyn Bound,
        engine: &mut SpeechEngine,
        w: &Waiter<'_>,
    ) -> crate::Result<()> {
        while let Some(chunk) = self.asked.next(order, at, bound) {
            self.request(
                plan,
                chunk,
                self.last_priority(),
                engine,
                w.cache,
                w.progress,
            )?;
        }
        Ok(())
    }

    /// The priority of the chunk [`Phrases::keep_ahead`] asked for last.
    fn last_priority(&self) -> Priority {
        if self.asked.0 <= self.first {
            Priority::First
        } else {
            Priority::Normal
        }
    }

    /// Looks a chunk's phrases up in the cache and asks the service for the missing ones.
    pub fn request(
        &mut self,
        plan: &Plan,
        chunk: usize,
        priority: Priority,
        engine: &mut SpeechEngine,
        cache: &Cache,
        progress: &dyn Progress,
    ) -> crate::Result<()> {
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
            report_warnings(cache, progress);
            self.ready.extend(hits);
        }
        for u in utterances {
            let key = plan.utterances[u].key;
            *self.uses.entry(key).or_insert(0) += 1;
            if !self.ready.contains_key(&key) && !self.waiting.contains_key(&key) {
                let ticket = engine.submit(&plan.utterances[u], priority)?;
                self.tickets.insert(ticket, key);
                self.waiting.insert(key, ticket);
            }
        }
        Ok(())
    }

    /// Receives speech until every phrase of `chunk` is ready; new speech is cached.
    pub fn wait_for(
        &mut self,
        plan: &Plan,
        chunk: usize,
        engine: &mut SpeechEngine,
        w: Waiter<'_>,
    ) -> crate::Result<()> {
        let fresh = self.receive(plan, chunk, engine, &w)?;
        self.store(&fresh, &w);
        Ok(())
    }

    /// Receives speech until every phrase of `chunk` is ready; returns the keys that came back
    /// (for [`Phrases::store`], before the chunk is released).
    pub fn receive(
        &mut self,
        plan: &Plan,
        chunk: usize,
        engine: &mut SpeechEngine,
        w: &Waiter<'_>,
    ) -> crate::Result<Vec<Key>> {
        let utterances = plan.chunk_utterances(&plan.chunks[chunk]);
        let mut fresh = Vec::new();
        while utterances
            .clone()
            .any(|u| !self.ready.contains_key(&plan.utterances[u].key))
        {
            let t = Instant::now();
            let (ticket, speech) = engine.next(w.progress, w.stopped)?;
            w.clock.add(Stage::Speech, t.elapsed());
            let Some(key) = self.tickets.remove(&ticket) else {
                continue;
            };
            self.waiting.remove(&key);
            self.ready.insert(key, speech);
            fresh.push(key);
        }
        Ok(fresh)
    }

    /// Caches the speech of `keys`, all still ready (not released).
    pub fn store(&self, keys: &[Key], w: &Waiter<'_>) {
        if keys.is_empty() {
            return;
        }
        // Stored together, encoded in parallel: one phrase at a time on this thread was the
        // serial part of a GPU render's speech.
        let fresh: Vec<(Key, &Speech)> = keys.iter().map(|k| (*k, &self.ready[k])).collect();
        if let Err(e) = w.cache.put_phrases(&fresh) {
            w.progress.event(Event::Warning {
                message: format!("{e}; {} phrases are not cached", fresh.len()),
            });
        }
    }

    /// The speech ready so far, by phrase key.
    pub fn ready(&self) -> &HashMap<Key, Speech> {
        &self.ready
    }

    /// Forgets the speech of a chunk that no later requested chunk needs.
    pub fn release(&mut self, plan: &Plan, chunk: usize) {
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

/// Speech for every utterance of `chunks`, through [`Phrases`]: all of them asked for at once
/// (several CPU lanes then speak different sentences together), each chunk's waited for in
/// order. Returns `Cancelled` soon after `stop` is set.
pub fn speak(
    plan: &Plan,
    chunks: &[usize],
    engine: &mut SpeechEngine,
    cache: &Cache,
    progress: &dyn Progress,
    clock: &Clock,
    stop: &AtomicBool,
) -> crate::Result<HashMap<Key, Speech>> {
    let mut phrases = Phrases::default();
    for &c in chunks {
        if stop.load(Ordering::Relaxed) {
            return Err(crate::Error::Cancelled);
        }
        phrases.request(plan, c, Priority::Normal, engine, cache, progress)?;
    }
    let stopped = || stop.load(Ordering::Relaxed);
    for &c in chunks {
        let w = Waiter {
            cache,
            progress,
            clock,
            stopped: &stopped,
        };
        phrases.wait_for(plan, c, engine, w)?;
    }
    Ok(phrases.ready)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At most `limit` chunks held beyond the next two; records what was asked for.
    struct Counting {
        limit: usize,
        held: usize,
        asked: Vec<usize>,
    }

    impl Bound for Counting {
        fn wants_more(&self) -> bool {
            self.held < self.limit
        }

        fn requested(&mut self, chunk: usize) {
            self.held += 1;
            self.asked.push(chunk);
        }
    }

    #[test]
    fn chunks_are_asked_for_in_order_two_ahead_and_as_far_as_the_bound_allows() {
        let order = [3, 5, 6, 9, 10, 12];
        let mut bound = Counting {
            limit: 0,
            held: 0,
            asked: Vec::new(),
        };
        let mut asked = Asked::default();
        let mut ask = |at: usize, bound: &mut Counting| {
            std::iter::from_fn(|| asked.next(&order, at, bound)).collect::<Vec<_>>()
        };
        // No room: this chunk and the next only, then one more per chunk handed on.
        assert_eq!(ask(0, &mut bound), [3, 5]);
        assert_eq!(ask(0, &mut bound), [] as [usize; 0]);
        assert_eq!(ask(1, &mut bound), [6]);
        // Room for four held: as far as that goes, never past the order's end.
        bound.limit = 4;
        assert_eq!(ask(2, &mut bound), [9]);
        bound.held = 1;
        assert_eq!(ask(3, &mut bound), [10, 12]);
        assert_eq!(ask(5, &mut bound), [] as [usize; 0]);
        assert_eq!(bound.asked, order);
    }

    #[test]
    fn the_first_chunks_of_the_order_are_asked_for_first() {
        let mut p = Phrases::first_chunks(2);
        let mut bound = Counting {
            limit: 10,
            held: 0,
            asked: Vec::new(),
        };
        let order = [4, 5, 6, 7];
        let mut seen = Vec::new();
        while p.asked.next(&order, 0, &mut bound).is_some() {
            seen.push(p.last_priority());
        }
        use Priority::{First, Normal};
        assert_eq!(seen, [First, First, Normal, Normal]);
    }

    #[test]
    fn peak_normalisation_keeps_silence_and_scales_speech() {
        assert_eq!(normalize_peak(vec![0.0; 4]), vec![0.0; 4]);
        let out = normalize_peak(vec![0.1, -0.45, 0.2]);
        assert!((out[1] + PEAK).abs() < 1e-6);
        assert!((out[0] - 0.1 * PEAK / 0.45).abs() < 1e-6);
    }
}
