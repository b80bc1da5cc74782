//! One speech queue per process: requests from every running render, grouped into model calls.
//!
//! Input: utterances (phoneme ids + the voice, scales and speaker they are to be spoken with)
//! submitted by any number of [`Client`]s, one per render. Output: each utterance's
//! [`RawSpeech`], sent back to its client with the call that made it ([`CallInfo`]).
//!
//! Policy (README, "Speech backends"): items that share a voice, scales and speaker are grouped by
//! the length buckets of [`super::batch`]; a group is sent to the model as soon as it is *full*
//! (it holds `max_items` sentences, or one more of the bucket's longest would pass the token
//! budget) or its oldest item has waited `max_wait`. Among groups ready at once the one with the
//! oldest item goes first, so no render starves. A call never holds more than `max_items` items or
//! more than `token_budget` padded ids, and items longer than the largest bucket run alone: that
//! bounds the engine's memory whatever the queue holds.
//!
//! Lanes: each lane is a thread that owns its backends (a voice is loaded on first use, on that
//! thread) and takes the next ready batch. The GPU has one lane (one engine, big batches); the CPU
//! as many as a worker runs renders at once (ONNX Runtime sessions in parallel, as before).
//!
//! Between batches a lane does optional work, never while a batch is ready: a voice a client
//! said it will speak with ([`Client::preload`]) is loaded while no batch is ready, so a render
//! plans while its engine loads; a loaded voice's warm-up calls ([`Backend::warm_step`]) run one
//! at a time while the queue is empty, so a request that arrives during the warm-up waits for one
//! warm-up call at most, and the first sentences never wait for the warm-up. A closed batcher
//! starts neither. In a process of one render, once its client rests (an audio render's second
//! pass needs no model) the lanes unload their voices, so the model's memory is not held through
//! the assembly.
//!
//! Isolation: a failing call is retried item by item, so one bad request fails alone. A client
//! that is dropped or cancelled takes its queued items out of the queue at once.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};
use serde::Serialize;

use super::batch::BatchLimits;
use super::voice::{Scales, VoiceFiles};
use super::{Backend, RawSpeech, SpeechError};
use crate::progress::Event;

/// Run on the lane thread after every model call and after its voices are unloaded, once the
/// program has set it.
static AFTER_CALL: OnceLock<fn()> = OnceLock::new();

/// Sets what runs after every model call, for the whole process (a second call changes nothing).
/// The `talker` binary hands the heap freed during the call back to the system there: that is
/// process policy (it depends on the allocator), so the library leaves it to the program.
pub fn after_each_call(hook: fn()) {
    let _ = AFTER_CALL.set(hook);
}

/// Runs the program's [`after_each_call`] hook, if it set one.
fn after_call() {
    if let Some(hook) = AFTER_CALL.get() {
        hook();
    }
}

/// Loads a voice on a backend, on the lane thread that will run it.
pub trait Loader: Send + Sync {
    fn load(
        &self,
        voice: &VoiceRef,
        events: &dyn Fn(Event),
    ) -> Result<Box<dyn Backend>, SpeechError>;
}

impl Loader for super::select::Resolved {
    fn load(
        &self,
        voice: &VoiceRef,
        events: &dyn Fn(Event),
    ) -> Result<Box<dyn Backend>, SpeechError> {
        super::select::Resolved::load(self, voice, events)
    }
}

#[derive(Debug, Clone)]
pub struct Policy {
    pub limits: BatchLimits,
    /// Upper bounds of the length buckets, in phoneme ids.
    pub edges: Vec<usize>,
    pub max_wait: Duration,
    pub lanes: usize,
    /// Warm-up calls while the queue is empty: for a process that serves more than one render
    /// (`batch`, `worker`). A single render's queue empties only after its last sentence, when
    /// they could serve nobody and would hold its end back.
    pub warm_up: bool,
    /// Voices unloaded once every live client rests ([`Client::rest`]): for a process of one
    /// render, whose voice would otherwise hold its memory through the render's assembly.
    pub unload_at_rest: bool,
}

/// A voice as the batcher knows it: its files and the sha256 of its model (what groups items).
#[derive(Debug, Clone)]
pub struct VoiceRef {
    pub files: VoiceFiles,
    pub hash: [u8; 32],
}

/// The model call that produced an item.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CallInfo {
    /// Numbered from 1 in the order calls start, process-wide.
    pub call: u64,
    /// Items in the call (of every render).
    pub items: usize,
    /// Wall seconds of the call.
    pub seconds: f64,
    /// Items × longest item: the ids the model ran, padding included.
    pub padded_ids: usize,
    /// Seconds the voice's load (or engine build) took, on the first call of the voice on its
    /// lane (0 on later calls); a preloaded voice was loaded before the call, while it waited
    /// for nothing.
    pub load_seconds: f64,
}

/// What a client receives.
#[derive(Debug)]
pub enum Reply {
    Done {
        ticket: u64,
        result: Result<RawSpeech, SpeechError>,
        call: CallInfo,
    },
    /// Progress of a voice being loaded for this client (an engine build).
    Event(Event),
}

/// Process-wide counters: what the coordinator reads after a batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct BatcherStats {
    pub calls: u64,
    pub items: u64,
    pub failed_items: u64,
    /// Queued items dropped because their render stopped.
    pub cancelled_items: u64,
    pub model_seconds: f64,
    /// Seconds spent loading voices (preloaded or not), counted when each load ends.
    pub load_seconds: f64,
    /// Warm-up calls run while the lanes were idle, and their seconds.
    pub warm_calls: u64,
    pub warm_seconds: f64,
    /// Times a lane unloaded its voices because every render rested.
    pub unloads: u64,
    pub real_ids: u64,
    pub padded_ids: u64,
    /// Mean items per call.
    pub mean_batch_items: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Group {
    voice: [u8; 32],
    scales: [u32; 3],
    speaker: u32,
    /// The length bucket, or [`FIRST`] for items of [`Priority::First`].
    bucket: usize,
}

/// The group of [`Priority::First`] items: any length, ahead of every bucket.
const FIRST: usize = usize::MAX;

/// When an item is needed, which decides how it is batched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Batched by length bucket with items of the same bucket: the least padding per call.
    Normal,
    /// Needed before anything else (a render's chunk workers wait for it): batched in arrival
    /// order whatever the length, padded to the longest, and called before any bucket. A video's
    /// first chunks then come back from one or two calls instead of waiting for a call of every
    /// bucket their sentences fall in, each also filled from the rest of the video.
    First,
}

struct Item {
    client: u64,
    ticket: u64,
    ids: Vec<i64>,
    voice: Arc<VoiceRef>,
    scales: Scales,
    speaker: u32,
    group: Group,
    arrived: Instant,
}

#[derive(Default)]
struct State {
    queue: Vec<Item>,
    /// Voices to load before anything asks for them: (client, voice), oldest first.
    preload: Vec<(u64, Arc<VoiceRef>)>,
    clients: HashMap<u64, Sender<Reply>>,
    /// Clients that said they will not speak for a while ([`Client::rest`]).
    resting: HashSet<u64>,
    closed: bool,
    stats: BatcherStats,
}

struct Shared {
    state: Mutex<State>,
    ready: Condvar,
    policy: Policy,
    loader: Box<dyn Loader>,
    next_client: AtomicU64,
    next_call: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bucket(&self, len: usize) -> usize {
        let edges = &self.policy.edges;
        edges.iter().position(|&e| len <= e).unwrap_or(edges.len())
    }

    /// Most items a call of `bucket` may hold: the item cap, the token budget at the bucket's
    /// longest length, and one for items past the largest bucket.
    fn capacity(&self, bucket: usize) -> usize {
        let limits = self.policy.limits;
        match self.policy.edges.get(bucket) {
            Some(&edge) => (limits.token_budget / edge.max(1)).clamp(1, limits.max_items.max(1)),
            // The token budget bounds it as the batch is taken.
            None if bucket == FIRST => limits.max_items.max(1),
            None => 1,
        }
    }
}

/// The queue and its lanes. Dropping it finishes what is queued, then stops the lanes.
pub struct Batcher {
    shared: Arc<Shared>,
    lanes: Vec<std::thread::JoinHandle<()>>,
}

impl Batcher {
    pub fn start(loader: Box<dyn Loader>, policy: Policy) -> Batcher {
        let lanes = policy.lanes.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            policy,
            loader,
            next_client: AtomicU64::new(1),
            next_call: AtomicU64::new(1),
        });
        let lanes = (0..lanes)
            .map(|i| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("speech{i}"))
                    .spawn(move || lane(&shared))
                    .expect("spawn speech lane")
            })
            .collect();
        Batcher { shared, lanes }
    }

    pub fn client(&self) -> Client {
        let id = self.shared.next_client.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = unbounded();
        self.shared.lock().clients.insert(id, tx);
        Client {
            id,
            shared: Arc::clone(&self.shared),
            rx,
            next_ticket: 0,
        }
    }

    pub fn stats(&self) -> BatcherStats {
        self.shared.lock().stats
    }

    pub fn policy(&self) -> &Policy {
        &self.shared.policy
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        let t = Instant::now();
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
        for lane in self.lanes.drain(..) {
            let _ = lane.join();
        }
        tracing::debug!("speech lanes stopped in {:.3} s", t.elapsed().as_secs_f64());
    }
}

/// One render's handle on the batcher. Dropping it releases its queued items.
pub struct Client {
    id: u64,
    shared: Arc<Shared>,
    rx: Receiver<Reply>,
    next_ticket: u64,
}

impl Client {
    /// Queues one utterance; its reply carries the returned ticket.
    pub fn submit(
        &mut self,
        voice: &Arc<VoiceRef>,
        scales: Scales,
        speaker: u32,
        ids: Vec<i64>,
        priority: Priority,
    ) -> Result<u64, SpeechError> {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let group = Group {
            voice: voice.hash,
            scales: scales.to_bits(),
            speaker,
            bucket: match priority {
                Priority::Normal => self.shared.bucket(ids.len()),
                Priority::First => FIRST,
            },
        };
        let mut state = self.shared.lock();
        if state.closed {
            return Err(SpeechError::Cancelled);
        }
        state.resting.remove(&self.id);
        state.queue.push(Item {
            client: self.id,
            ticket,
            ids,
            voice: Arc::clone(voice),
            scales,
            speaker,
            group,
            arrived: Instant::now(),
        });
        drop(state);
        self.shared.ready.notify_one();
        Ok(ticket)
    }

    /// Says this client will speak with `voice`: a lane loads it as soon as no batch is ready
    /// (a lane that has it already does nothing), so the load runs while the render still plans
    /// rather than in front of its first sentences. Dropping the client before then withdraws it.
    pub fn preload(&self, voice: &Arc<VoiceRef>) {
        let mut state = self.shared.lock();
        state.resting.remove(&self.id);
        if state.closed || state.preload.iter().any(|(_, v)| v.hash == voice.hash) {
            return;
        }
        state.preload.push((self.id, Arc::clone(voice)));
        drop(state);
        self.shared.ready.notify_one();
    }

    /// Says this client will not speak for a while (an audio render's second pass reads its
    /// speech back from the cache). Where the policy unloads at rest and every live client
    /// rests, the lanes unload their voices; a later request loads its voice again.
    pub fn rest(&self) {
        self.shared.lock().resting.insert(self.id);
        self.shared.ready.notify_all();
    }

    /// The next reply, waiting at most `timeout` (`None` when none came).
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Reply> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Takes this client's queued items (and voices to preload) out of the queue; returns how
    /// many items.
    pub fn cancel(&self) -> usize {
        let mut state = self.shared.lock();
        state.preload.retain(|(c, _)| *c != self.id);
        let before = state.queue.len();
        state.queue.retain(|i| i.client != self.id);
        let removed = before - state.queue.len();
        state.stats.cancelled_items += removed as u64;
        removed
    }

    /// Items of this client still waiting for a call.
    pub fn queued(&self) -> usize {
        self.shared
            .lock()
            .queue
            .iter()
            .filter(|i| i.client == self.id)
            .count()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.cancel();
        let mut state = self.shared.lock();
        state.clients.remove(&self.id);
        state.resting.remove(&self.id);
    }
}

/// What a lane does next.
enum Work {
    /// A batch ready by the policy.
    Batch(Vec<Item>),
    /// Load a voice that `client` will speak with (no batch is ready).
    Load { client: u64, voice: Arc<VoiceRef> },
    /// One warm-up call of a loaded voice (the queue is empty).
    Warm([u8; 32]),
    /// Unload every voice of the lane: every live client rests.
    Unload,
}

/// The lane's next work: a ready batch first, then a voice to preload, then unloading the lane's
/// voices (`loaded`) where the policy asks and every client rests, then a warm-up call of one of
/// them; `None` when closed and empty.
fn next_work(shared: &Shared, loaded: &Loaded) -> Option<Work> {
    let mut state = shared.lock();
    loop {
        let now = Instant::now();
        let mut oldest: HashMap<Group, (Instant, usize)> = HashMap::new();
        for item in &state.queue {
            let e = oldest.entry(item.group).or_insert((item.arrived, 0));
            e.0 = e.0.min(item.arrived);
            e.1 += 1;
        }
        let ready = oldest
            .iter()
            .filter(|(g, (at, n))| {
                state.closed
                    || *n >= shared.capacity(g.bucket)
                    || now.duration_since(*at) >= shared.policy.max_wait
            })
            .min_by_key(|(g, (at, _))| (g.bucket != FIRST, *at))
            .map(|(g, _)| *g);
        if let Some(group) = ready {
            let cap = shared.capacity(group.bucket);
            let budget = shared.policy.limits.token_budget;
            let mut batch = Vec::new();
            let mut longest = 0;
            let mut i = 0;
            // Arrival order within the group; `queue` is in arrival order.
            while i < state.queue.len() && batch.len() < cap {
                let item = &state.queue[i];
                let fits =
                    batch.is_empty() || (batch.len() + 1) * longest.max(item.ids.len()) <= budget;
                if item.group == group && fits {
                    longest = longest.max(item.ids.len());
                    batch.push(state.queue.remove(i));
                } else {
                    i += 1;
                }
            }
            // Another lane may take what is left; submit() woke only one.
            if !state.queue.is_empty() {
                shared.ready.notify_one();
            }
            return Some(Work::Batch(batch));
        }
        if state.closed {
            if state.queue.is_empty() {
                return None;
            }
        } else {
            while !state.preload.is_empty() {
                let (client, voice) = state.preload.remove(0);
                if !loaded.contains_key(&voice.hash) {
                    return Some(Work::Load { client, voice });
                }
            }
            if shared.policy.unload_at_rest && !loaded.is_empty() && everyone_rests(&state) {
                return Some(Work::Unload);
            }
            let warming = loaded.iter().find(|(_, e)| e.warming).map(|(h, _)| *h);
            if let (true, true, Some(hash)) =
                (shared.policy.warm_up, state.queue.is_empty(), warming)
            {
                return Some(Work::Warm(hash));
            }
        }
        let wait = oldest
            .values()
            .map(|(at, _)| (*at + shared.policy.max_wait).saturating_duration_since(now))
            .min();
        state = match wait {
            Some(w) => {
                shared
                    .ready
                    .wait_timeout(state, w.max(Duration::from_micros(100)))
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
            None => shared.ready.wait(state).unwrap_or_else(|p| p.into_inner()),
        };
    }
}

/// Whether there are clients, nothing is queued for them and each of them rests. With no client
/// at all the voices stay: the next render is about to ask for them.
fn everyone_rests(state: &State) -> bool {
    state.queue.is_empty()
        && !state.clients.is_empty()
        && state.clients.keys().all(|c| state.resting.contains(c))
}

/// A voice as one lane holds it.
struct Entry {
    backend: Result<Box<dyn Backend>, Arc<SpeechError>>,
    /// Seconds its load took, until the voice's first call reports them.
    unreported_load: f64,
    /// Whether warm-up calls may be left.
    warming: bool,
}

type Loaded = HashMap<[u8; 32], Entry>;

fn lane(shared: &Shared) {
    let mut loaded: Loaded = HashMap::new();
    while let Some(work) = next_work(shared, &loaded) {
        match work {
            Work::Batch(batch) => run_batch(shared, &mut loaded, batch),
            Work::Load { client, voice } => {
                let entry = load(shared, &voice, &[client]);
                loaded.insert(voice.hash, entry);
            }
            Work::Warm(hash) => {
                if let Some(entry) = loaded.get_mut(&hash) {
                    warm_one(shared, entry);
                }
            }
            Work::Unload => {
                let t = Instant::now();
                loaded.clear();
                shared.lock().stats.unloads += 1;
                after_call();
                tracing::debug!(
                    "voices unloaded at rest in {:.3} s",
                    t.elapsed().as_secs_f64()
                );
            }
        }
    }
    let t = Instant::now();
    drop(loaded);
    tracing::debug!("voices unloaded in {:.3} s", t.elapsed().as_secs_f64());
}

/// Loads `voice`; its events (an engine build) go to `clients`. The load is counted in the stats.
fn load(shared: &Shared, voice: &VoiceRef, clients: &[u64]) -> Entry {
    let t = Instant::now();
    let events = |e: Event| {
        for &c in clients {
            send(shared, c, Reply::Event(e.clone()));
        }
    };
    let backend = guarded(|| shared.loader.load(voice, &events)).map_err(Arc::new);
    let seconds = t.elapsed().as_secs_f64();
    shared.lock().stats.load_seconds += seconds;
    Entry {
        warming: backend.is_ok(),
        backend,
        unreported_load: seconds,
    }
}

/// Runs one warm-up call of `entry`; a failed one ends its warm-up (requests still go to the
/// voice, which answers them or fails them itself).
fn warm_one(shared: &Shared, entry: &mut Entry) {
    let Ok(backend) = &mut entry.backend else {
        entry.warming = false;
        return;
    };
    let t = Instant::now();
    let out = guarded(|| backend.warm_step().transpose());
    after_call();
    match out {
        Ok(Some(())) => {
            let seconds = t.elapsed().as_secs_f64();
            tracing::debug!("warm-up call in {seconds:.3} s");
            let mut state = shared.lock();
            state.stats.warm_calls += 1;
            state.stats.warm_seconds += seconds;
        }
        Ok(None) => entry.warming = false,
        Err(e) => {
            entry.warming = false;
            tracing::warn!("a warm-up call failed ({e}); the voice serves requests unwarmed");
        }
    }
}

fn send(shared: &Shared, client: u64, reply: Reply) {
    if let Some(tx) = shared.lock().clients.get(&client) {
        let _ = tx.send(reply);
    }
}

fn run_batch(shared: &Shared, backends: &mut Loaded, batch: Vec<Item>) {
    let first = &batch[0];
    let entry = backends.entry(first.voice.hash).or_insert_with(|| {
        let mut clients: Vec<u64> = batch.iter().map(|i| i.client).collect();
        clients.sort_unstable();
        clients.dedup();
        load(shared, &first.voice, &clients)
    });
    let load_seconds = std::mem::take(&mut entry.unreported_load);
    let (scales, speaker) = (first.scales, first.speaker);
    let backend = match &mut entry.backend {
        Ok(b) => b,
        Err(e) => {
            let info = record(shared, &batch, 0.0, load_seconds, (0, batch.len()));
            for item in batch {
                let result = Err(SpeechError::Shared(Arc::clone(e)));
                send(
                    shared,
                    item.client,
                    Reply::Done {
                        ticket: item.ticket,
                        result,
                        call: info,
                    },
                );
            }
            return;
        }
    };
    let refs: Vec<&[i64]> = batch.iter().map(|i| i.ids.as_slice()).collect();
    let t = Instant::now();
    let out = guarded(|| backend.synthesize(&refs, scales, speaker));
    after_call();
    let seconds = t.elapsed().as_secs_f64();
    tracing::debug!(items = batch.len(), "model call in {seconds:.3} s");
    match out {
        Ok(items) if items.len() == batch.len() => {
            let info = record(shared, &batch, seconds, load_seconds, (batch.len(), 0));
            for (item, raw) in batch.into_iter().zip(items) {
                send(
                    shared,
                    item.client,
                    Reply::Done {
                        ticket: item.ticket,
                        result: Ok(raw),
                        call: info,
                    },
                );
            }
        }
        Ok(items) if batch.len() == 1 => {
            let e = SpeechError::Engine(format!("{} results for one item", items.len()));
            fail_one(shared, batch, seconds, load_seconds, e);
        }
        Err(e) if batch.len() == 1 => fail_one(shared, batch, seconds, load_seconds, e),
        // A failed call is retried item by item: only the bad item fails.
        _ => {
            record(shared, &batch, seconds, 0.0, (0, 0));
            // The first retry's reply reports the load instead.
            if let Some(entry) = backends.get_mut(&batch[0].voice.hash) {
                entry.unreported_load = load_seconds;
            }
            for item in batch {
                run_batch(shared, backends, vec![item]);
            }
        }
    }
}

/// Runs `f`, turning a panic into an error: a lane that died would leave its callers waiting.
fn guarded<T>(f: impl FnOnce() -> Result<T, SpeechError>) -> Result<T, SpeechError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("no message");
        Err(SpeechError::Engine(format!(
            "the speech backend panicked: {what}"
        )))
    })
}

fn fail_one(shared: &Shared, batch: Vec<Item>, seconds: f64, load: f64, e: SpeechError) {
    let info = record(shared, &batch, seconds, load, (0, 1));
    if let Some(item) = batch.into_iter().next() {
        send(
            shared,
            item.client,
            Reply::Done {
                ticket: item.ticket,
                result: Err(e),
                call: info,
            },
        );
    }
}

/// Counts a call in the process-wide stats (`items`: its items that succeeded and failed; a
/// call retried item by item counts neither) and describes it for the replies.
fn record(
    shared: &Shared,
    batch: &[Item],
    seconds: f64,
    load: f64,
    (ok, failed): (usize, usize),
) -> CallInfo {
    let longest = batch.iter().map(|i| i.ids.len()).max().unwrap_or(0);
    let info = CallInfo {
        call: shared.next_call.fetch_add(1, Ordering::Relaxed),
        items: batch.len(),
        seconds,
        padded_ids: longest * batch.len(),
        load_seconds: load,
    };
    let mut state = shared.lock();
    let s = &mut state.stats;
    s.calls += 1;
    s.items += ok as u64;
    s.failed_items += failed as u64;
    s.model_seconds += seconds;
    s.real_ids += batch.iter().map(|i| i.ids.len() as u64).sum::<u64>();
    s.padded_ids += info.padded_ids as u64;
    s.mean_batch_items = s.items as f64 / s.calls as f64;
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend double: echoes each item's length as one sample and records call sizes.
    struct Echo(Arc<Mutex<Vec<usize>>>);

    impl Backend for Echo {
        fn synthesize(
            &mut self,
            batch: &[&[i64]],
            _: Scales,
            _: u32,
        ) -> Result<Vec<RawSpeech>, SpeechError> {
            self.0.lock().unwrap().push(batch.len());
            if batch.iter().any(|b| b.contains(&-1)) {
                return Err(SpeechError::Engine("bad id".into()));
            }
            Ok(batch
                .iter()
                .map(|b| RawSpeech {
                    pcm: vec![b.len() as f32],
                    id_frames: vec![1; b.len()],
                })
                .collect())
        }
    }

    struct EchoLoader(Arc<Mutex<Vec<usize>>>);

    impl Loader for EchoLoader {
        fn load(&self, _: &VoiceRef, _: &dyn Fn(Event)) -> Result<Box<dyn Backend>, SpeechError> {
            Ok(Box::new(Echo(Arc::clone(&self.0))))
        }
    }

    fn batcher(
        max_items: usize,
        token_budget: usize,
        max_wait: Duration,
    ) -> (Batcher, Arc<Mutex<Vec<usize>>>) {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let b = Batcher::start(
            Box::new(EchoLoader(Arc::clone(&calls))),
            Policy {
                limits: BatchLimits {
                    token_budget,
                    max_items,
                },
                edges: vec![48, 96],
                max_wait,
                lanes: 1,
                warm_up: true,
                unload_at_rest: false,
            },
        );
        (b, calls)
    }

    fn voice() -> Arc<VoiceRef> {
        Arc::new(VoiceRef {
            files: VoiceFiles {
                name: "v".into(),
                model: "v.onnx".into(),
                config: "v.onnx.json".into(),
            },
            hash: [0; 32],
        })
    }

    const Q: Scales = Scales {
        noise: 0.0,
        length: 1.0,
        noise_w: 0.0,
    };

    fn replies(c: &Client, n: usize) -> Vec<(u64, Result<RawSpeech, SpeechError>, CallInfo)> {
        (0..n)
            .map(|_| {
                loop {
                    match c
                        .recv_timeout(Duration::from_secs(20))
                        .expect("a reply in time")
                    {
                        Reply::Done {
                            ticket,
                            result,
                            call,
                        } => break (ticket, result, call),
                        Reply::Event(_) => {}
                    }
                }
            })
            .collect()
    }

    #[test]
    fn a_full_bucket_goes_at_once_without_waiting_for_the_timeout() {
        // The wait is an hour: only a full bucket can be sent.
        let (b, calls) = batcher(4, 10_000, Duration::from_secs(3600));
        let mut c = b.client();
        let v = voice();
        for _ in 0..4 {
            c.submit(&v, Q, 0, vec![1; 40], Priority::Normal).unwrap();
        }
        let got = replies(&c, 4);
        assert!(got.iter().all(|(_, r, call)| r.is_ok() && call.items == 4));
        assert_eq!(*calls.lock().unwrap(), vec![4]);
    }

    #[test]
    fn first_items_go_in_one_call_of_any_lengths_ahead_of_older_buckets() {
        // The wait is an hour: only a full group can be sent.
        let (b, calls) = batcher(4, 10_000, Duration::from_secs(3600));
        let mut c = b.client();
        let v = voice();
        for _ in 0..2 {
            c.submit(&v, Q, 0, vec![1; 40], Priority::Normal).unwrap();
        }
        let first: Vec<u64> = [10, 90, 40, 500]
            .into_iter()
            .map(|n| c.submit(&v, Q, 0, vec![1; n], Priority::First).unwrap())
            .collect();
        let got = replies(&c, 4);
        for (t, r, call) in &got {
            assert!(first.contains(t), "only the first items are answered");
            assert!(r.is_ok());
            assert_eq!((call.call, call.items), (1, 4));
        }
        assert_eq!(*calls.lock().unwrap(), vec![4]);
    }

    #[test]
    fn a_partial_bucket_goes_after_the_wait_and_buckets_do_not_mix() {
        let (b, calls) = batcher(8, 10_000, Duration::from_millis(30));
        let mut c = b.client();
        let v = voice();
        let short = c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        let long = c.submit(&v, Q, 0, vec![1; 90], Priority::Normal).unwrap();
        let got = replies(&c, 2);
        for (t, r, call) in got {
            assert_eq!(call.items, 1);
            let len = r.unwrap().pcm[0] as usize;
            assert_eq!(len, if t == short { 10 } else { 90 });
            assert!(t == short || t == long);
        }
        assert_eq!(calls.lock().unwrap().len(), 2);
    }

    #[test]
    fn the_token_budget_and_the_largest_bucket_cap_a_call() {
        // Budget 200 at the 48-id bucket: 4 items a call; past the last bucket: one a call.
        let (b, calls) = batcher(64, 200, Duration::from_millis(10));
        let mut c = b.client();
        let v = voice();
        for _ in 0..10 {
            c.submit(&v, Q, 0, vec![1; 48], Priority::Normal).unwrap();
        }
        for _ in 0..2 {
            c.submit(&v, Q, 0, vec![1; 500], Priority::Normal).unwrap();
        }
        replies(&c, 12);
        let calls = calls.lock().unwrap();
        assert!(calls.iter().all(|&n| n <= 4), "{calls:?}");
        assert_eq!(calls.iter().sum::<usize>(), 12);
        assert_eq!(b.stats().items, 12);
    }

    #[test]
    fn a_bad_item_fails_alone_and_scales_split_groups() {
        let (b, _) = batcher(8, 10_000, Duration::from_millis(10));
        let mut c = b.client();
        let v = voice();
        let bad = c
            .submit(&v, Q, 0, vec![1, -1, 2], Priority::Normal)
            .unwrap();
        c.submit(&v, Q, 0, vec![1, 2, 3], Priority::Normal).unwrap();
        let other = Scales { length: 0.5, ..Q };
        c.submit(&v, other, 0, vec![1, 2], Priority::Normal)
            .unwrap();
        for (t, r, call) in replies(&c, 3) {
            assert_eq!(r.is_err(), t == bad);
            assert_eq!(call.items, 1);
        }
        let s = b.stats();
        assert_eq!((s.items, s.failed_items), (2, 1));
    }

    #[test]
    fn the_after_call_hook_runs_after_every_call() {
        static RUNS: AtomicU64 = AtomicU64::new(0);
        after_each_call(|| {
            RUNS.fetch_add(1, Ordering::Relaxed);
        });
        let (b, calls) = batcher(1, 10_000, Duration::from_millis(10));
        let mut c = b.client();
        let v = voice();
        for _ in 0..3 {
            c.submit(&v, Q, 0, vec![1; 20], Priority::Normal).unwrap();
        }
        replies(&c, 3);
        assert_eq!(calls.lock().unwrap().len(), 3);
        // Other tests' batchers run the hook too once it is set, so at least this test's calls.
        assert!(RUNS.load(Ordering::Relaxed) >= 3);
    }

    #[test]
    fn a_dropped_client_leaves_nothing_queued() {
        let (b, calls) = batcher(8, 10_000, Duration::from_secs(3600));
        let mut c = b.client();
        let v = voice();
        for _ in 0..3 {
            c.submit(&v, Q, 0, vec![1; 20], Priority::Normal).unwrap();
        }
        drop(c);
        assert_eq!(b.stats().cancelled_items, 3);
        drop(b);
        assert!(calls.lock().unwrap().is_empty());
    }

    /// What the warming double saw, in order.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Seen {
        /// A load began (of the voice whose hash starts with this byte).
        Load(u8),
        Warm,
        Call(usize),
        /// A loaded voice was dropped.
        Unload,
    }

    type Log = Arc<Mutex<Vec<Seen>>>;

    /// A backend double with `left` warm-up calls of `pause` each (the first fails when `fail`),
    /// whose loads take `load` (each logged as it begins).
    #[derive(Clone)]
    struct Warming {
        log: Log,
        load: Duration,
        left: usize,
        pause: Duration,
        fail: bool,
        /// A loaded voice (not the loader), whose drop is logged.
        loaded: bool,
    }

    impl Drop for Warming {
        fn drop(&mut self) {
            if self.loaded {
                self.log.lock().unwrap().push(Seen::Unload);
            }
        }
    }

    impl Backend for Warming {
        fn synthesize(
            &mut self,
            batch: &[&[i64]],
            _: Scales,
            _: u32,
        ) -> Result<Vec<RawSpeech>, SpeechError> {
            self.log.lock().unwrap().push(Seen::Call(batch.len()));
            Ok(batch
                .iter()
                .map(|b| RawSpeech {
                    pcm: vec![0.0; b.len()],
                    id_frames: vec![1; b.len()],
                })
                .collect())
        }

        fn warm_step(&mut self) -> Option<Result<(), SpeechError>> {
            self.left = self.left.checked_sub(1)?;
            self.log.lock().unwrap().push(Seen::Warm);
            std::thread::sleep(self.pause);
            if self.fail {
                return Some(Err(SpeechError::Engine("warm-up failed".into())));
            }
            Some(Ok(()))
        }
    }

    impl Loader for Warming {
        fn load(&self, v: &VoiceRef, _: &dyn Fn(Event)) -> Result<Box<dyn Backend>, SpeechError> {
            let tag = v.files.name.as_bytes()[0];
            self.log.lock().unwrap().push(Seen::Load(tag));
            std::thread::sleep(self.load);
            let mut voice = self.clone();
            voice.loaded = true;
            Ok(Box::new(voice))
        }
    }

    fn warming(load_ms: u64, left: usize, pause_ms: u64, fail: bool) -> (Batcher, Log) {
        warming_with(
            Duration::from_millis(1),
            false,
            load_ms,
            left,
            pause_ms,
            fail,
        )
    }

    /// The warming double behind a batcher of two items a call that waits `max_wait` for them,
    /// with the policy of a process that runs one render if `one_render` (no warm-up, voices
    /// unloaded at rest), else of one that serves many (warm-up while idle, voices kept).
    fn warming_with(
        max_wait: Duration,
        one_render: bool,
        load_ms: u64,
        left: usize,
        pause_ms: u64,
        fail: bool,
    ) -> (Batcher, Log) {
        let log = Log::default();
        let double = Warming {
            log: Arc::clone(&log),
            load: Duration::from_millis(load_ms),
            left,
            pause: Duration::from_millis(pause_ms),
            fail,
            loaded: false,
        };
        let policy = Policy {
            limits: BatchLimits {
                token_budget: 10_000,
                max_items: 2,
            },
            edges: vec![48, 96],
            max_wait,
            lanes: 1,
            warm_up: !one_render,
            unload_at_rest: one_render,
        };
        (Batcher::start(Box::new(double), policy), log)
    }

    /// A voice named `tag` (what the double logs on its load) with `tag` as its hash.
    fn voice_named(tag: u8) -> Arc<VoiceRef> {
        let name = char::from(tag).to_string();
        Arc::new(VoiceRef {
            files: VoiceFiles {
                model: format!("{name}.onnx").into(),
                config: format!("{name}.onnx.json").into(),
                name,
            },
            hash: [tag; 32],
        })
    }

    /// Waits (up to 20 s) until `done` holds for the log.
    fn until(log: &Log, done: impl Fn(&[Seen]) -> bool) {
        let t = Instant::now();
        loop {
            let seen = log.lock().unwrap().clone();
            if done(&seen) {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "{seen:?}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn warms(log: &[Seen]) -> usize {
        log.iter().filter(|s| **s == Seen::Warm).count()
    }

    #[test]
    fn the_first_request_goes_before_any_warm_up_call_and_the_warm_up_follows_while_idle() {
        let (b, log) = warming(0, 4, 30, false);
        let mut c = b.client();
        let v = voice_named(b'a');
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        assert!(replies(&c, 1)[0].1.is_ok());
        until(&log, |l| warms(l) == 4);
        let seen = log.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                Seen::Load(b'a'),
                Seen::Call(1),
                Seen::Warm,
                Seen::Warm,
                Seen::Warm,
                Seen::Warm
            ]
        );
        // The last call is logged as it begins and counted as it ends.
        let t = Instant::now();
        while b.stats().warm_calls < 4 {
            assert!(t.elapsed() < Duration::from_secs(20), "{:?}", b.stats());
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(b.stats().warm_seconds >= 0.1, "{:?}", b.stats());
    }

    #[test]
    fn without_warm_up_an_idle_lane_makes_no_call() {
        let (b, log) = warming_with(Duration::from_millis(1), true, 0, 4, 0, false);
        let mut c = b.client();
        let v = voice_named(b'a');
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        assert!(replies(&c, 1)[0].1.is_ok());
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(*log.lock().unwrap(), [Seen::Load(b'a'), Seen::Call(1)]);
        assert_eq!(b.stats().warm_calls, 0);
    }

    #[test]
    fn a_request_during_the_warm_up_waits_for_one_warm_up_call_at_most() {
        let (b, log) = warming(0, 6, 40, false);
        let mut c = b.client();
        let v = voice_named(b'a');
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        replies(&c, 1);
        until(&log, |l| warms(l) >= 1);
        let before = log.lock().unwrap().len();
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        assert!(replies(&c, 1)[0].1.is_ok());
        until(&log, |l| warms(l) == 6);
        let seen = log.lock().unwrap().clone();
        let call = before
            + seen[before..]
                .iter()
                .position(|s| *s == Seen::Call(1))
                .unwrap();
        // A warm-up call may have begun between the look at the log and the submit; no other.
        assert!(warms(&seen[before..call]) <= 1, "{seen:?}");
        assert!(
            warms(&seen[call..]) >= 1,
            "the warm-up goes on after: {seen:?}"
        );
    }

    #[test]
    fn a_preloaded_voice_loads_before_its_first_request_which_reports_the_load() {
        let (b, log) = warming(300, 0, 0, false);
        let mut c = b.client();
        let v = voice_named(b'a');
        c.preload(&v);
        c.preload(&v);
        let t = Instant::now();
        while b.stats().load_seconds == 0.0 {
            assert!(t.elapsed() < Duration::from_secs(20), "no preload");
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(b.stats().load_seconds >= 0.3);
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        let (_, r, call) = replies(&c, 1).remove(0);
        assert!(r.is_ok());
        assert!(call.load_seconds >= 0.3, "{call:?}");
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        assert_eq!(replies(&c, 1)[0].2.load_seconds, 0.0);
        // Asked for twice, loaded once; nothing loaded on the request.
        assert_eq!(
            *log.lock().unwrap(),
            [Seen::Load(b'a'), Seen::Call(1), Seen::Call(1)]
        );
    }

    #[test]
    fn a_voice_is_preloaded_while_a_batch_fills_and_warmed_only_once_nothing_is_queued() {
        // A lone item never goes (the wait is an hour); two fill a call.
        let (b, log) = warming_with(Duration::from_secs(3600), false, 0, 3, 0, false);
        let mut c = b.client();
        let v = voice_named(b'a');
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        c.preload(&v);
        until(&log, |l| !l.is_empty());
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            *log.lock().unwrap(),
            [Seen::Load(b'a')],
            "no warm-up while one waits"
        );
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        replies(&c, 2);
        until(&log, |l| warms(l) == 3);
        assert_eq!(
            *log.lock().unwrap(),
            [
                Seen::Load(b'a'),
                Seen::Call(2),
                Seen::Warm,
                Seen::Warm,
                Seen::Warm
            ]
        );
    }

    #[test]
    fn a_dropped_client_s_voice_is_not_preloaded() {
        let (b, log) = warming(200, 0, 0, false);
        let first = b.client();
        first.preload(&voice_named(b'a'));
        until(&log, |l| !l.is_empty());
        let gone = b.client();
        gone.preload(&voice_named(b'b'));
        drop(gone);
        // Dropping the batcher waits for the load under way, starts no other and drops it.
        drop(b);
        assert_eq!(*log.lock().unwrap(), [Seen::Load(b'a'), Seen::Unload]);
    }

    #[test]
    fn a_failed_warm_up_call_ends_the_warm_up_and_the_voice_still_speaks() {
        let (b, log) = warming(0, 5, 0, true);
        let mut c = b.client();
        let v = voice_named(b'a');
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        replies(&c, 1);
        until(&log, |l| warms(l) >= 1);
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        assert!(replies(&c, 1)[0].1.is_ok());
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            *log.lock().unwrap(),
            [Seen::Load(b'a'), Seen::Call(1), Seen::Warm, Seen::Call(1)]
        );
        assert_eq!(b.stats().warm_calls, 0);
    }

    #[test]
    fn dropping_the_batcher_ends_the_warm_up() {
        let (b, log) = warming(0, 500, 20, false);
        let mut c = b.client();
        let v = voice_named(b'a');
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        replies(&c, 1);
        until(&log, |l| warms(l) >= 1);
        drop(c);
        let begun = warms(&log.lock().unwrap());
        drop(b);
        // The call under way (or one begun since the look) finishes; no other starts.
        let seen = log.lock().unwrap().clone();
        assert!(warms(&seen) <= begun + 1, "{seen:?}");
    }

    #[test]
    fn a_render_that_rests_lets_its_voice_go_and_a_later_request_loads_it_again() {
        let (b, log) = warming_with(Duration::from_millis(1), true, 0, 0, 0, false);
        let mut c = b.client();
        let v = voice_named(b'a');
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        assert!(replies(&c, 1)[0].1.is_ok());
        c.rest();
        until(&log, |l| l.contains(&Seen::Unload));
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        assert!(replies(&c, 1)[0].1.is_ok());
        assert_eq!(
            *log.lock().unwrap(),
            [
                Seen::Load(b'a'),
                Seen::Call(1),
                Seen::Unload,
                Seen::Load(b'a'),
                Seen::Call(1)
            ]
        );
    }

    #[test]
    fn a_voice_stays_while_a_client_speaks_and_in_a_process_of_many_renders() {
        let (b, log) = warming_with(Duration::from_millis(1), true, 0, 0, 0, false);
        let (mut first, second) = (b.client(), b.client());
        let v = voice_named(b'a');
        first
            .submit(&v, Q, 0, vec![1; 10], Priority::Normal)
            .unwrap();
        replies(&first, 1);
        first.rest();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(*log.lock().unwrap(), [Seen::Load(b'a'), Seen::Call(1)]);
        second.rest();
        until(&log, |l| l.contains(&Seen::Unload));

        let (b, log) = warming_with(Duration::from_millis(1), false, 0, 0, 0, false);
        let mut c = b.client();
        c.submit(&v, Q, 0, vec![1; 10], Priority::Normal).unwrap();
        replies(&c, 1);
        c.rest();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(*log.lock().unwrap(), [Seen::Load(b'a'), Seen::Call(1)]);
    }
}
