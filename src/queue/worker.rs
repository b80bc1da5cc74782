//! The worker: claims jobs, renders them in-process, keeps their leases alive, and records the end.
//!
//! Input: an open [`Queue`], [`WorkerOptions`], a shutdown flag (SIGINT/SIGTERM).
//! Output: finished jobs (`succeeded` with the render report, `queued` again with backoff, or
//! `failed` with the error), events for the caller's [`Observer`], a [`Tally`].
//! Invariants:
//! - at most `concurrency` renders at once, one thread each, `threads_per_render` threads inside
//!   for speech and audio, and chunk work in the worker's one pool (`RenderEnv::pool`);
//! - each render has a heartbeat thread; a lost lease (reclaimed or `talker cancel`) stops the
//!   render at once through its cancel flag;
//! - the render writes into a private stage folder beside the output; the lease is checked (and
//!   extended) after the render and before its files are renamed into place, so only a lease
//!   holder publishes, and the output with its sidecar appears as one set (see `publish.rs`: a
//!   set a crash left half-published is finished first by the job's next attempt);
//! - on shutdown no new job is claimed; running renders get `grace` to finish, then are stopped
//!   and released (queued again, the attempt not counted). Finished chunks stay in the cache, so
//!   whoever takes the job next resumes from them.

use std::collections::HashMap;
use std::net::TcpListener;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::Error;
use crate::pipeline;
use crate::progress::{Event, Progress};
use crate::report::RenderReport;
use crate::speech::SpeechService;

use super::metrics::{self, Metrics, Tally};
use super::publish::{self, Manifest, OutputFile};
use super::spec::RenderEnv;
use super::{Claim, FailOutcome, Queue};

/// Retry delays: full jitter over an exponential ceiling (`base · 2^(attempt-1)`, at most `cap`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Backoff {
    /// The ceiling for the retry after `attempt` (1-based) failed.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(30));
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// A uniformly random delay up to the ceiling, so failed jobs do not retry in lockstep.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.ceiling(attempt).mul_f64(fastrand::f64())
    }
}

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Renders at once.
    pub concurrency: usize,
    pub env: RenderEnv,
    pub lease_ttl: Duration,
    pub heartbeat: Duration,
    /// How often an idle worker looks for work.
    pub poll: Duration,
    pub backoff: Backoff,
    /// How long running renders may take to finish after a shutdown signal.
    pub grace: Duration,
    /// Canonical; every output must lie under it.
    pub out_root: PathBuf,
    /// Stop when no job (of `only`, if set) is queued or running.
    pub drain: bool,
    /// Only claim these jobs (`talker batch`).
    pub only: Option<Vec<i64>>,
}

/// What a worker reports, for people (one line each) or machines (`--json`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum WorkerEvent {
    Started {
        worker: String,
        queue: String,
        concurrency: usize,
        threads_per_render: usize,
    },
    Metrics {
        address: String,
    },
    Claimed {
        id: i64,
        attempt: u32,
        max_attempts: u32,
        output: String,
        /// Expired leases of stopped workers taken back by this claim.
        reclaimed: u64,
    },
    Succeeded {
        id: i64,
        output: String,
        /// Every file published: the output, then its subtitle sidecar.
        files: Vec<OutputFile>,
        report: Box<RenderReport>,
    },
    Retrying {
        id: i64,
        attempt: u32,
        max_attempts: u32,
        delay_seconds: f64,
        error: String,
    },
    Failed {
        id: i64,
        attempts: u32,
        error: String,
    },
    /// Stopped by shutdown and queued again.
    Released {
        id: i64,
    },
    /// Reclaimed by another worker or cancelled: this worker stopped and publishes nothing.
    LeaseLost {
        id: i64,
    },
    Warning {
        id: Option<i64>,
        message: String,
    },
    Stopping {
        running: usize,
        grace_seconds: f64,
    },
    Stopped {
        tally: TallyView,
    },
}

/// The tally as reported when the worker stops.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TallyView {
    pub succeeded: u64,
    pub retried: u64,
    pub failed: u64,
    pub released: u64,
    pub lease_lost: u64,
    pub reclaims: u64,
}

impl From<Tally> for TallyView {
    fn from(t: Tally) -> Self {
        TallyView {
            succeeded: t.succeeded,
            retried: t.retried,
            failed: t.failed,
            released: t.released,
            lease_lost: t.lost,
            reclaims: t.reclaims,
        }
    }
}

/// Receives worker events (the CLI prints them).
pub trait Observer: Sync {
    fn event(&self, event: WorkerEvent);
}

/// `host:pid`, recorded as the lease owner.
fn worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

/// Everything the job threads share.
struct Ctx<'a> {
    queue: &'a Queue,
    opts: &'a WorkerOptions,
    observer: &'a dyn Observer,
    metrics: &'a Metrics,
    /// One speech service for every render of this worker: their sentences share model calls.
    speech: &'a SpeechService,
    worker: String,
}

/// Runs until shutdown (or, with `drain`, until no job is left); returns what it did. Every
/// render speaks through `speech`.
pub fn run(
    queue: &Queue,
    opts: &WorkerOptions,
    speech: &SpeechService,
    observer: &dyn Observer,
    shutdown: &AtomicBool,
    metrics_listener: Option<TcpListener>,
) -> Tally {
    let metrics = Metrics::default();
    let ctx = Ctx {
        queue,
        opts,
        observer,
        metrics: &metrics,
        speech,
        worker: worker_id(),
    };
    observer.event(WorkerEvent::Started {
        worker: ctx.worker.clone(),
        queue: queue.location().to_owned(),
        concurrency: opts.concurrency,
        threads_per_render: opts.env.threads,
    });
    let metrics_stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        if let Some(listener) = &metrics_listener {
            let (m, stop) = (&metrics, &metrics_stop);
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn_scoped(scope, move || metrics::serve(listener, m, queue, stop))
                .expect("spawn metrics thread");
        }
        claim_loop(&ctx, scope, shutdown);
        metrics_stop.store(true, Ordering::Relaxed);
    });
    let tally = metrics.snapshot();
    observer.event(WorkerEvent::Stopped {
        tally: tally.into(),
    });
    tally
}

/// A running job: its thread and the flag that stops its render.
struct Running<'s> {
    handle: std::thread::ScopedJoinHandle<'s, ()>,
    stop: Arc<AtomicBool>,
}

fn claim_loop<'s, 'e: 's>(
    ctx: &'s Ctx<'e>,
    scope: &'s std::thread::Scope<'s, 'e>,
    shutdown: &AtomicBool,
) {
    let opts = ctx.opts;
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<i64>();
    let mut running: HashMap<i64, Running<'s>> = HashMap::new();
    let only = opts.only.as_deref();
    let mut last_error: Option<Instant> = None;
    let mut warn = |message: String| {
        // One line per poll at most, so a database outage does not flood the log.
        if last_error.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            ctx.observer
                .event(WorkerEvent::Warning { id: None, message });
            last_error = Some(Instant::now());
        }
    };
    loop {
        while let Ok(id) = done_rx.try_recv() {
            join(&mut running, id);
        }
        if shutdown.load(Ordering::Relaxed) {
            break;
        }
        if running.len() < opts.concurrency.max(1) {
            match ctx.queue.claim(&ctx.worker, opts.lease_ttl, only) {
                Ok(Some(claim)) => {
                    let id = claim.id;
                    let stop = Arc::new(AtomicBool::new(false));
                    let (flag, done_tx) = (Arc::clone(&stop), done_tx.clone());
                    let handle = std::thread::Builder::new()
                        .name(format!("job{id}"))
                        .spawn_scoped(scope, move || {
                            run_job(ctx, claim, &flag);
                            let _ = done_tx.send(id);
                        })
                        .expect("spawn job thread");
                    running.insert(id, Running { handle, stop });
                    continue;
                }
                Ok(None) => {}
                Err(e) => warn(format!("cannot claim a job: {e}")),
            }
        }
        if opts.drain && running.is_empty() {
            match ctx.queue.live(only) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => warn(format!("cannot count jobs: {e}")),
            }
        }
        if let Ok(id) = done_rx.recv_timeout(opts.poll) {
            join(&mut running, id);
        }
    }
    if running.is_empty() {
        return;
    }
    ctx.observer.event(WorkerEvent::Stopping {
        running: running.len(),
        grace_seconds: opts.grace.as_secs_f64(),
    });
    let deadline = Instant::now() + opts.grace;
    while !running.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(left) {
            Ok(id) => join(&mut running, id),
            Err(_) => break,
        }
    }
    for r in running.values() {
        r.stop.store(true, Ordering::Relaxed);
    }
    for (_, r) in running.drain() {
        let _ = r.handle.join();
    }
}

fn join(running: &mut HashMap<i64, Running<'_>>, id: i64) {
    if let Some(r) = running.remove(&id) {
        let _ = r.handle.join();
    }
}

/// Forwards a render's warnings, tagged with the job.
struct JobProgress<'a> {
    id: i64,
    observer: &'a dyn Observer,
}

impl Progress for JobProgress<'_> {
    fn event(&self, event: Event) {
        if let Event::Warning { message } = event {
            self.observer.event(WorkerEvent::Warning {
                id: Some(self.id),
                message,
            });
        }
    }
}

/// What one attempt rendered and where it goes: its stage folder, the staged files and their
/// destinations (pairwise, in publishing order).
struct Staged {
    stage: PathBuf,
    files: Vec<PathBuf>,
    outputs: Vec<PathBuf>,
}

/// How one attempt ended, before it is recorded.
enum Ended {
    /// The report, the staged files, and the content hash of what was rendered (`None` when
    /// the inputs changed during the render).
    Rendered(Box<RenderReport>, Staged, Option<String>),
    Failed(String),
    /// Failed on bad input (a script, portrait or output that cannot work until someone fixes
    /// it): marked failed at once instead of retried; `talker retry` queues it again.
    Refused(String),
    /// Stopped: the lease was lost, or shutdown's grace ran out.
    Stopped,
}

fn run_job(ctx: &Ctx, claim: Claim, stop: &AtomicBool) {
    let Claim {
        id,
        token,
        attempt,
        max_attempts,
        job,
        reclaimed,
    } = claim;
    ctx.metrics.update(|t| {
        t.reclaims += reclaimed;
        t.running += 1;
    });
    let output = job
        .as_ref()
        .map_or_else(|_| String::new(), |j| j.output_path().display().to_string());
    ctx.observer.event(WorkerEvent::Claimed {
        id,
        attempt,
        max_attempts,
        output: output.clone(),
        reclaimed,
    });
    let finished = AtomicBool::new(false);
    let ended = std::thread::scope(|s| {
        let beat = s.spawn(|| keep_lease(ctx, id, &token, stop, &finished));
        let ended = match job {
            // A panic in the render becomes a failed attempt: otherwise the heartbeat would keep
            // the lease (and the job) forever.
            Ok(job) => std::panic::catch_unwind(AssertUnwindSafe(|| {
                attempt_render(ctx, id, &token, &job, stop)
            }))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("no message");
                Ended::Failed(format!("the render panicked: {what}"))
            }),
            Err(e) => Ended::Failed(format!("the stored job cannot be read: {e}")),
        };
        finished.store(true, Ordering::Relaxed);
        beat.thread().unpark();
        let _ = beat.join();
        ended
    });
    record(ctx, id, &token, attempt, max_attempts, ended);
    ctx.metrics.update(|t| t.running -= 1);
}

/// Extends the lease every `heartbeat` until `finished`; a lost lease (or one that could not be
/// extended for a whole TTL) stops the render.
fn keep_lease(ctx: &Ctx, id: i64, token: &str, stop: &AtomicBool, finished: &AtomicBool) {
    let mut last_ok = Instant::now();
    loop {
        std::thread::park_timeout(ctx.opts.heartbeat);
        if finished.load(Ordering::Relaxed) {
            return;
        }
        match ctx.queue.heartbeat(id, token, ctx.opts.lease_ttl) {
            Ok(true) => last_ok = Instant::now(),
            Ok(false) => {
                stop.store(true, Ordering::Relaxed);
                return;
            }
            Err(e) => {
                ctx.observer.event(WorkerEvent::Warning {
                    id: Some(id),
                    message: format!("heartbeat failed: {e}"),
                });
                if last_ok.elapsed() >= ctx.opts.lease_ttl {
                    stop.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
}

/// Renders into a stage folder beside the output; on success the caller publishes its files.
fn attempt_render(ctx: &Ctx, id: i64, token: &str, job: &super::Job, stop: &AtomicBool) -> Ended {
    let confined = || job.confined_output(&ctx.opts.out_root);
    let output = match confined() {
        Ok(p) => p,
        Err(m) => return Ended::Refused(m),
    };
    // A split job's output is the directory its files go in.
    let split = job.settings.split.is_some();
    let dir = if split {
        output.clone()
    } else {
        output.parent().unwrap_or(Path::new("/")).to_path_buf()
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return Ended::Failed(format!("cannot create {}: {e}", dir.display()));
    }
    // Again, now that the folders exist: none of them may be a link out of the root.
    let output = match confined() {
        Ok(p) => p,
        Err(m) => return Ended::Refused(m),
    };
    let outputs = match job.output_files(&output) {
        Ok(files) => files,
        Err(m) => return Ended::Refused(m),
    };
    let named = job.script_inputs();
    let inputs = job.inputs(&named);
    let cache = Some(ctx.opts.env.cache.as_path());
    let checked = if split {
        outputs
            .iter()
            .try_for_each(|f| crate::guard::check_render_outputs(f, None, &inputs, cache))
    } else {
        let sidecar = job.settings.sidecar(&output);
        crate::guard::check_render_outputs(&output, sidecar.as_deref(), &inputs, cache)
    };
    if let Err(e) = checked {
        return Ended::Refused(error_chain(&e));
    }
    // Stage folders, temp files and the manifest are named after the first file, beside it.
    let Some(first) = outputs.first() else {
        return Ended::Refused(format!("{} has no files to write", output.display()));
    };
    match publish::roll_forward(&outputs) {
        Ok(true) => ctx.observer.event(WorkerEvent::Warning {
            id: Some(id),
            message: "an earlier attempt stopped while publishing its files; its set is now complete, and the job renders again".into(),
        }),
        Ok(false) => {}
        Err(e) => {
            return Ended::Refused(format!(
                "cannot finish publishing an earlier attempt's files: {e}"
            ));
        }
    }
    remove_stale_temps(first, id, token);
    let stage = publish::stage_dir(first, id, token);
    if let Err(e) = std::fs::create_dir_all(&stage) {
        return Ended::Failed(format!("cannot create {}: {e}", stage.display()));
    }
    // The render writes into the stage under the final names: a split one into the stage itself.
    let staged = if split {
        stage.clone()
    } else {
        stage.join(output.file_name().unwrap_or_default())
    };
    let opts = job.render_options(&ctx.opts.env, staged.clone());
    let progress = JobProgress {
        id,
        observer: ctx.observer,
    };
    // The inputs are read at run time, not at enqueue: hashed again on both sides of the render,
    // what was rendered is known when both agree (`talker batch` trusts only that hash).
    let before = job.content_hash().ok();
    match pipeline::run(&opts, ctx.speech, &progress, stop) {
        Ok(report) => {
            let rendered = before.filter(|h| job.content_hash().ok().as_ref() == Some(h));
            if rendered.is_none() {
                ctx.observer.event(WorkerEvent::Warning {
                    id: Some(id),
                    message: "its inputs changed while it was rendered; talker batch will render it again".into(),
                });
            }
            let files = outputs
                .iter()
                .map(|o| stage.join(o.file_name().unwrap_or_default()))
                .collect();
            Ended::Rendered(
                Box::new(report),
                Staged {
                    stage,
                    files,
                    outputs,
                },
                rendered,
            )
        }
        Err(Error::Cancelled) => {
            // Finished chunks are in the cache; the stage holds nothing the next attempt needs.
            let _ = std::fs::remove_dir_all(&stage);
            Ended::Stopped
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&stage);
            if e.exit_code() == 2 {
                Ended::Refused(error_chain(&e))
            } else {
                Ended::Failed(error_chain(&e))
            }
        }
    }
}

/// The error and its causes on one line, as `talker status` shows it.
fn error_chain(e: &Error) -> String {
    e.chain().join(": ")
}

/// Removes what killed attempts at this job left beside the output (their stage folders, and
/// the temp files and renderer's `.partial` files of older versions), so a crash leaves no
/// litter once the job is redone. Runs after [`publish::roll_forward`], which needs them.
fn remove_stale_temps(output: &Path, id: i64, token: &str) {
    let Some(dir) = output.parent() else {
        return;
    };
    let any_attempt = publish::temp_tag(output, id, "");
    let ours = publish::temp_tag(output, id, token);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let bare = file.trim_start_matches('.');
        if file.starts_with('.') && bare.starts_with(&any_attempt) && !bare.starts_with(&ours) {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(path);
            } else {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Publishes or records the attempt's end, and tells the observer.
fn record(ctx: &Ctx, id: i64, token: &str, attempt: u32, max_attempts: u32, ended: Ended) {
    let end = AttemptEnd {
        ctx,
        id,
        token,
        attempt,
        max_attempts,
    };
    match ended {
        Ended::Rendered(report, staged, rendered_hash) => {
            end.publish(*report, &staged, rendered_hash.as_deref())
        }
        Ended::Stopped => end.release(),
        Ended::Failed(error) => end.fail(error, false),
        Ended::Refused(error) => end.fail(error, true),
    }
}

/// One claim's attempt as it ends: each way of ending is one method, each tells the queue first
/// (under the lease's token, so a lost lease changes nothing) and then the observer.
struct AttemptEnd<'a> {
    ctx: &'a Ctx<'a>,
    id: i64,
    token: &'a str,
    attempt: u32,
    max_attempts: u32,
}

impl AttemptEnd<'_> {
    fn warn(&self, message: String) {
        self.ctx.observer.event(WorkerEvent::Warning {
            id: Some(self.id),
            message,
        });
    }

    fn lease_lost(&self) {
        self.ctx.metrics.update(|t| t.lost += 1);
        self.ctx
            .observer
            .event(WorkerEvent::LeaseLost { id: self.id });
    }

    /// The finished render becomes the output only while the lease is still ours, confirmed by
    /// a heartbeat just before the renames; its files are published as one set (manifest,
    /// then renames in order), and a set that cannot be moved into place fails the attempt (it
    /// is retried from the cache, and the retry finishes any set left half-published).
    fn publish(&self, report: RenderReport, staged: &Staged, rendered_hash: Option<&str>) {
        let queue = self.ctx.queue;
        if let Err(e) = queue.mark_rendered(self.token) {
            self.warn(format!("cannot record the finished render: {e}"));
        }
        let discard = || {
            let _ = std::fs::remove_dir_all(&staged.stage);
        };
        match queue.heartbeat(self.id, self.token, self.ctx.opts.lease_ttl) {
            Ok(true) => {}
            Ok(false) => {
                discard();
                return self.lease_lost();
            }
            Err(e) => {
                discard();
                return self.warn(format!(
                    "cannot confirm the lease, so the output is not published (the job is redone from the cache once the lease expires): {e}"
                ));
            }
        }
        let output = &staged.outputs[0];
        let manifest = match Manifest::new(&staged.stage, &staged.files, &staged.outputs) {
            Ok(m) => m,
            Err(e) => {
                discard();
                return self.fail(format!("cannot read the finished render: {e}"), false);
            }
        };
        let path = publish::manifest_path(output);
        if let Err(e) = manifest.write(&path).and_then(|()| manifest.apply(&path)) {
            return self.fail(
                format!("cannot move the render onto {}: {e}", output.display()),
                false,
            );
        }
        let mut report = report;
        report.output = output.clone();
        report.subtitles = staged.outputs.get(1).cloned();
        let files = manifest.files();
        let mut json = serde_json::to_value(&report).expect("a render report serialises");
        json["files"] = serde_json::to_value(&files).expect("output files serialise");
        match queue.complete(self.id, self.token, &json.to_string(), rendered_hash) {
            Ok(true) => {
                self.ctx.metrics.record_render(&report);
                self.ctx.observer.event(WorkerEvent::Succeeded {
                    id: self.id,
                    output: output.display().to_string(),
                    files,
                    report: Box::new(report),
                });
            }
            Ok(false) => self.lease_lost(),
            Err(e) => self.warn(format!(
                "rendered {} but cannot record it: {e}",
                output.display()
            )),
        }
    }

    /// Released when the lease is still ours (shutdown, or a heartbeat outage); otherwise
    /// someone else owns the job now and this is a no-op.
    fn release(&self) {
        match self.ctx.queue.release(self.id, self.token) {
            Ok(true) => {
                self.ctx.metrics.update(|t| t.released += 1);
                self.ctx
                    .observer
                    .event(WorkerEvent::Released { id: self.id });
            }
            Ok(false) => self.lease_lost(),
            Err(e) => self.warn(format!("cannot release the job: {e}")),
        }
    }

    /// A failed attempt is retried after the backoff; a `permanent` one (bad input) is marked
    /// failed at once.
    fn fail(&self, error: String, permanent: bool) {
        let delay = if permanent {
            Duration::ZERO
        } else {
            self.ctx.opts.backoff.delay(self.attempt)
        };
        let (id, attempt, max_attempts) = (self.id, self.attempt, self.max_attempts);
        match self
            .ctx
            .queue
            .fail(id, self.token, &error, delay, permanent)
        {
            Ok(FailOutcome::Retry(d)) => {
                self.ctx.metrics.update(|t| t.retried += 1);
                self.ctx.observer.event(WorkerEvent::Retrying {
                    id,
                    attempt,
                    max_attempts,
                    delay_seconds: d.as_secs_f64(),
                    error,
                });
            }
            Ok(FailOutcome::Failed) => {
                self.ctx.metrics.update(|t| t.failed += 1);
                self.ctx.observer.event(WorkerEvent::Failed {
                    id,
                    attempts: attempt,
                    error,
                });
            }
            Ok(FailOutcome::Lost) => self.lease_lost(),
            Err(e) => self.warn(format!("cannot record the failure ({error}): {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_jitters_below_it() {
        let b = Backoff {
            base: Duration::from_secs(2),
            cap: Duration::from_secs(600),
        };
        assert_eq!(b.ceiling(1), Duration::from_secs(2));
        assert_eq!(b.ceiling(2), Duration::from_secs(4));
        assert_eq!(b.ceiling(5), Duration::from_secs(32));
        assert_eq!(b.ceiling(20), Duration::from_secs(600));
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(600));
        let delays: Vec<Duration> = (0..200).map(|_| b.delay(3)).collect();
        assert!(delays.iter().all(|d| *d <= Duration::from_secs(8)));
        assert!(delays.iter().any(|d| *d < Duration::from_secs(2)));
        assert!(delays.iter().any(|d| *d > Duration::from_secs(6)));
    }

    #[test]
    fn stale_temps_of_other_attempts_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("ep1.mp4");
        let stage = publish::stage_dir(&out, 7, "0123456789abcdef0123");
        assert_eq!(
            stage.file_name().unwrap(),
            ".ep1.mp4.job7-0123456789abcdef.d"
        );

        let stale_stage = publish::stage_dir(&out, 7, "ffffffffffffffff");
        let stale_temp = dir.path().join(".ep1.mp4.job7-ffffffffffffffff.mp4");
        let stale_partial = dir
            .path()
            .join("..ep1.mp4.job7-ffffffffffffffff.mp4.partial-1-0");
        let other_job = publish::stage_dir(&out, 8, "ffffffffffffffff");
        let manifest = publish::manifest_path(&out);
        for d in [&stage, &stale_stage, &other_job] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("ep1.mp4"), b"x").unwrap();
        }
        for f in [&stale_temp, &stale_partial, &manifest] {
            std::fs::write(f, b"x").unwrap();
        }
        remove_stale_temps(&out, 7, "0123456789abcdef0123");
        assert!(!stale_stage.exists() && !stale_temp.exists() && !stale_partial.exists());
        assert!(stage.exists() && other_job.exists() && manifest.exists());
    }
}
