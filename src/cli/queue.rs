//! `talker enqueue | batch | worker | status | cancel | retry`: arguments and what each prints.
//!
//! Input: parsed arguments. Output: library calls on `talker::queue`, lines for people on stderr
//! (or JSON: events on stderr, results on stdout), and an exit code through `talker::Error`:
//! 2 for a bad spec, an output outside the root or an unknown job, 1 for a failed batch job or a
//! database problem, 0 otherwise (a worker also exits 0 after a clean shutdown).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use talker::Error;
use talker::assets::Assets;
use talker::face::{FaceError, FaceModels, Portrait};
use talker::queue::worker::{self, Backoff, Observer, WorkerEvent, WorkerOptions};
use talker::queue::{Enqueued, Job, JobRow, JobSpec, Queue, QueueLocation, RenderEnv, batch, spec};
use talker::speech::SpeechService;

use super::error::{CliError, Result};

use super::common::{Global, SpeechArgs, cache_dir, precision_ignored, speech_setup};

#[derive(Debug, Args, Clone)]
pub struct QueueArg {
    /// The queue: a SQLite file, sqlite://PATH, or postgres://USER@HOST/DB to share one queue
    /// between hosts [default: $TALKER_QUEUE, else queue.sqlite in the cache directory].
    #[arg(long, value_name = "URL")]
    pub queue: Option<String>,
}

#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// Job spec files (JSON; format in the README, "Jobs and workers").
    #[arg(required = true, value_name = "JOB.json")]
    pub specs: Vec<PathBuf>,
    #[command(flatten)]
    pub queue: QueueArg,
    /// Outputs are written under DIR and may not leave it.
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub out_root: PathBuf,
    /// Attempts before a job is marked failed.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_attempts: u32,
}

#[derive(Debug, Args)]
pub struct WorkArgs {
    /// Renders at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
    /// Threads per render [default: cores / concurrency, at least 1].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Outputs are written under DIR; jobs whose output root lies elsewhere fail.
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub out_root: PathBuf,
    /// Lease length: a job whose worker has not sent a heartbeat for this long is taken over.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = parse_secs)]
    pub lease_ttl: Duration,
    /// Heartbeat interval [default: a third of --lease-ttl].
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub heartbeat: Option<Duration>,
    /// How often an idle worker looks for work.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_secs)]
    pub poll: Duration,
    /// Retry delay ceiling after the first failure; it doubles with each attempt (full jitter).
    #[arg(long, value_name = "SECS", default_value = "2", value_parser = parse_secs)]
    pub backoff_base: Duration,
    /// Longest retry delay.
    #[arg(long, value_name = "SECS", default_value = "600", value_parser = parse_secs)]
    pub backoff_cap: Duration,
    /// After SIGINT/SIGTERM, how long running renders may take to finish before they are
    /// stopped and queued again (their finished chunks stay cached).
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = parse_secs)]
    pub grace: Duration,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464; port 0 picks one).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// The concurrent renders share one speech batcher (one GPU engine, or one CPU session each).
    #[command(flatten)]
    pub speech: SpeechArgs,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub queue: QueueArg,
    #[command(flatten)]
    pub work: WorkArgs,
    /// Exit once no job is queued or running (instead of waiting for more).
    #[arg(long)]
    pub drain: bool,
}

#[derive(Debug, Args)]
pub struct BatchArgs {
    /// Folder of job specs (*.json, not recursive).
    pub dir: PathBuf,
    #[command(flatten)]
    pub queue: QueueArg,
    #[command(flatten)]
    pub work: WorkArgs,
    /// Attempts before a job is marked failed.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_attempts: u32,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only these jobs, with every attempt [default: all jobs].
    pub ids: Vec<i64>,
    #[command(flatten)]
    pub queue: QueueArg,
}

#[derive(Debug, Args)]
pub struct JobIdArgs {
    /// The job's id (see talker status).
    pub id: i64,
    #[command(flatten)]
    pub queue: QueueArg,
}

fn parse_secs(s: &str) -> std::result::Result<Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > 1e7 {
        return Err("give a number of seconds above 0, e.g. 0.5 or 60".into());
    }
    Ok(Duration::from_secs_f64(v))
}

fn queue_location(arg: &QueueArg, global: &Global) -> Result<QueueLocation> {
    Ok(match &arg.queue {
        Some(q) => QueueLocation::parse(q)?,
        None => QueueLocation::default_for(&cache_dir(global))?,
    })
}

/// The queue for `enqueue`, `batch` and `worker`, created when missing.
fn open_queue(arg: &QueueArg, global: &Global) -> Result<Queue> {
    Ok(Queue::open(&queue_location(arg, global)?)?)
}

/// The queue for `status`, `cancel` and `retry`, which must exist.
fn open_existing_queue(arg: &QueueArg, global: &Global) -> Result<Queue> {
    Ok(Queue::open_existing(&queue_location(arg, global)?)?)
}

/// A spec file turned into a job and its content hash. The portrait (a video's) is decoded and
/// its face found now, as the script is validated, so a job that can never render is refused here.
fn load_job(path: &Path, out_root: &Path, global: &Global) -> Result<(Job, String)> {
    let spec = JobSpec::load(path)?;
    let job = Job::resolve(path, spec, out_root)?;
    talker::guard::outside_cache("output", &job.output_path(), &cache_dir(global)).map_err(
        |e| spec::SpecError {
            file: path.to_path_buf(),
            at: "output".into(),
            message: e.to_string(),
        },
    )?;
    let refuse = |e: FaceError| -> CliError {
        if e.is_bad_input() {
            spec::SpecError {
                file: path.to_path_buf(),
                at: "portrait".into(),
                message: e.to_string(),
            }
            .into()
        } else {
            e.into()
        }
    };
    if let Some(portrait) = &job.portrait {
        let portrait = Portrait::open(portrait).map_err(refuse)?;
        let assets = Assets::locate(global.assets.as_deref());
        FaceModels::load(&assets.face_dir())?
            .analyse(&portrait)
            .map_err(refuse)?;
    }
    let hash = job
        .content_hash()
        .map_err(Error::io(job.script.parent().unwrap_or(Path::new("."))))?;
    Ok((job, hash))
}

/// Enqueues one spec's job; an output that a live job already writes is this spec's error.
fn enqueue(
    queue: &Queue,
    spec_file: &Path,
    job: &Job,
    hash: &str,
    max_attempts: u32,
) -> Result<Enqueued> {
    let source = spec_file.display().to_string();
    queue
        .enqueue(job, hash, &source, max_attempts)
        .map_err(|e| match e {
            talker::queue::QueueError::OutputTaken { .. } => spec::SpecError {
                file: spec_file.to_path_buf(),
                at: "output".into(),
                message: e.to_string(),
            }
            .into(),
            e => e.into(),
        })
}

/// A spec's error: bad input (exit 2) is printed now, so one bad file among many does not hide
/// the rest; anything else (missing face models, a database problem) stops the command.
fn refuse(e: CliError, global: &Global) -> Result<()> {
    if e.exit_code() != 2 {
        return Err(e);
    }
    report_refused(&e, global);
    Ok(())
}

fn report_refused(e: &CliError, global: &Global) {
    if global.json {
        let v = serde_json::json!({"event": "refused", "message": e.to_string()});
        super::ui::eprint_line(&format!("{v}"));
    } else {
        super::ui::eprint_line(&format!("talker: {e}"));
    }
}

pub fn run_enqueue(args: &EnqueueArgs, global: &Global) -> Result<()> {
    let queue = open_queue(&args.queue, global)?;
    let mut refused = 0;
    let mut results = Vec::new();
    for path in &args.specs {
        let source = path.display().to_string();
        let enqueued = load_job(path, &args.out_root, global).and_then(|(job, hash)| {
            let e = enqueue(&queue, path, &job, &hash, args.max_attempts)?;
            Ok((job, e))
        });
        let (job, e) = match enqueued {
            Ok(j) => j,
            Err(e) => {
                refuse(e, global)?;
                refused += 1;
                continue;
            }
        };
        if !global.json && !global.quiet {
            if e.created {
                super::ui::eprint_line(&format!(
                    "job {} queued: {source} → {}",
                    e.id,
                    job.output_path().display()
                ));
            } else {
                super::ui::eprint_line(&format!(
                    "job {} is already {} with the same content: {source}",
                    e.id, e.state
                ));
            }
        }
        results.push(
            serde_json::json!({"spec": source, "id": e.id, "created": e.created, "state": e.state}),
        );
    }
    if global.json {
        emit(&format!("{}\n", serde_json::Value::Array(results)))?;
    }
    refused_error(refused, args.specs.len())
}

fn refused_error(refused: usize, total: usize) -> Result<()> {
    match refused {
        0 => Ok(()),
        _ => Err(CliError::usage(format!(
            "{refused} of {total} job specs refused (see above); nothing was enqueued for them"
        ))),
    }
}

/// Worker settings from the command line.
fn worker_options(
    work: &WorkArgs,
    global: &Global,
    only: Option<Vec<i64>>,
    drain: bool,
) -> Result<WorkerOptions> {
    let heartbeat = work.heartbeat.unwrap_or(work.lease_ttl / 3);
    if heartbeat >= work.lease_ttl {
        return Err(CliError::usage(format!(
            "--heartbeat ({:.1} s) must be shorter than --lease-ttl ({:.1} s), or leases expire between heartbeats",
            heartbeat.as_secs_f64(),
            work.lease_ttl.as_secs_f64()
        )));
    }
    let concurrency = usize::from(work.concurrency);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let out_root =
        talker::guard::canonical_root(&work.out_root).map_err(Error::io(&work.out_root))?;
    let threads = work
        .threads
        .map_or((cores / concurrency).max(1), usize::from);
    Ok(WorkerOptions {
        concurrency,
        env: RenderEnv {
            assets: Assets::locate(global.assets.as_deref()),
            cache: cache_dir(global),
            threads,
            // Every render may use all the worker's cores for chunks; the pool keeps the
            // renders together within them.
            pool: talker::pool::ChunkPool::new(threads * concurrency),
            speech: speech_setup(
                &work.speech,
                global,
                threads,
                concurrency,
                talker::tts::batch::BatchLimits::SINGLE,
            )?,
        },
        lease_ttl: work.lease_ttl,
        heartbeat,
        poll: work.poll,
        backoff: Backoff {
            base: work.backoff_base,
            cap: work.backoff_cap,
        },
        grace: work.grace,
        out_root,
        drain,
        only,
    })
}

fn bind_metrics(addr: &Option<String>, printer: &Printer) -> Result<Option<TcpListener>> {
    let Some(addr) = addr else { return Ok(None) };
    let listener = TcpListener::bind(addr.as_str()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            Error::Usage(format!(
                "--metrics {addr:?}: {e}; give HOST:PORT such as 127.0.0.1:9464"
            ))
        } else {
            Error::io(format!("--metrics {addr}"))(e)
        }
    })?;
    let local = listener.local_addr().map_err(Error::io(addr))?;
    printer.event(WorkerEvent::Metrics {
        address: local.to_string(),
    });
    Ok(Some(listener))
}

/// Starts the worker's one speech service before any job is claimed (`--backend cuda` without a
/// GPU fails here); a `--precision` the backend ignores is said once, as `render` says it.
fn start_speech(opts: &WorkerOptions, args: &WorkArgs, printer: &Printer) -> Result<SpeechService> {
    let service = SpeechService::start(&opts.env.speech).map_err(Error::from)?;
    if let Some(note) = service.note() {
        printer.say(note);
    }
    if let Some(message) = precision_ignored(&args.speech, &service) {
        printer.event(WorkerEvent::Warning { id: None, message });
    }
    Ok(service)
}

/// The speech service's totals over every render: backend, GPU, calls, batch occupancy.
fn speech_totals(service: &SpeechService) -> serde_json::Value {
    let mut v = serde_json::to_value(service.info()).expect("backend info serialises");
    v["totals"] = serde_json::to_value(service.stats()).expect("stats serialise");
    v
}

fn say_speech_totals(printer: &Printer, service: &SpeechService) {
    let s = service.stats();
    printer.say(&format!(
        "speech on {}: {} calls, {:.1} sentences per call, {:.1} s in the model",
        service.info().describe(),
        s.calls,
        s.mean_batch_items,
        s.model_seconds
    ));
}

pub fn run_worker(args: &WorkerArgs, global: &Global, shutdown: &AtomicBool) -> Result<()> {
    let opts = worker_options(&args.work, global, None, args.drain)?;
    let printer = Printer::new(global);
    let speech = start_speech(&opts, &args.work, &printer)?;
    let queue = open_queue(&args.queue, global)?;
    let listener = bind_metrics(&args.work.metrics, &printer)?;
    let tally = worker::run(&queue, &opts, &speech, &printer, shutdown, listener);
    say_speech_totals(&printer, &speech);
    if global.json {
        let mut tally =
            serde_json::to_value(worker::TallyView::from(tally)).expect("tally serialises");
        tally["speech"] = speech_totals(&speech);
        emit(&format!("{tally}\n"))?;
    }
    Ok(())
}

/// How `batch` admits a spec: the same checks and messages as `enqueue`.
struct BatchAdmit<'a> {
    queue: &'a Queue,
    global: &'a Global,
    args: &'a BatchArgs,
    printer: &'a Printer,
}

impl batch::Admit for BatchAdmit<'_> {
    type Error = CliError;

    fn load(&mut self, spec: &Path) -> Result<(Job, String)> {
        load_job(spec, &self.args.work.out_root, self.global)
    }

    fn enqueue(&mut self, spec: &Path, job: &Job, hash: &str) -> Result<Enqueued> {
        enqueue(self.queue, spec, job, hash, self.args.max_attempts)
    }

    fn refuse(&mut self, error: CliError) -> Result<()> {
        refuse(error, self.global)
    }

    fn admitted(&mut self, spec: &Path, what: &batch::Admission) {
        let line = match what {
            batch::Admission::UpToDate { id } => format!("up to date (job {id})"),
            batch::Admission::Enqueued(e) if e.created => format!("job {} queued", e.id),
            batch::Admission::Enqueued(e) => format!("job {} already queued", e.id),
        };
        self.printer.say(&format!("{}: {line}", spec.display()));
    }
}

pub fn run_batch(args: &BatchArgs, global: &Global, shutdown: &AtomicBool) -> Result<()> {
    let specs = batch::spec_files(&args.dir).map_err(Error::io(&args.dir))?;
    if specs.is_empty() {
        return Err(CliError::usage(format!(
            "no job specs (*.json) in {}",
            args.dir.display()
        )));
    }
    let opts = worker_options(&args.work, global, None, true)?;
    let printer = Printer::new(global);
    let speech = start_speech(&opts, &args.work, &printer)?;
    let queue = open_queue(&args.queue, global)?;
    let admitted = batch::admit(
        &queue,
        &specs,
        &mut BatchAdmit {
            queue: &queue,
            global,
            args,
            printer: &printer,
        },
    )?;
    let listener = bind_metrics(&args.work.metrics, &printer)?;
    let ids = &admitted.ids;
    let rows = batch::drain(&queue, &opts, ids, &speech, &printer, shutdown, listener)?;
    if !ids.is_empty() {
        say_speech_totals(&printer, &speech);
    }
    let failed = rows.iter().filter(|r| r.state != "succeeded").count();
    if global.json {
        let v = serde_json::json!({
            "specs": specs.len(), "refused": admitted.refused, "up_to_date": admitted.up_to_date,
            "jobs": rows, "speech": speech_totals(&speech),
        });
        emit(&format!("{v}\n"))?;
    } else {
        printer.say(&format!(
            "batch {}: {} specs, {} up to date, {} rendered, {} not succeeded, {} refused",
            args.dir.display(),
            specs.len(),
            admitted.up_to_date,
            ids.len() - failed,
            failed,
            admitted.refused
        ));
    }
    if shutdown.load(Ordering::Relaxed) && failed > 0 {
        return Err(Error::Cancelled.into());
    }
    refused_error(admitted.refused, specs.len())?;
    if failed > 0 {
        return Err(CliError::JobsFailed {
            failed,
            total: ids.len(),
        });
    }
    Ok(())
}

pub fn run_status(args: &StatusArgs, global: &Global) -> Result<()> {
    let queue = open_existing_queue(&args.queue, global)?;
    let counts = queue.counts()?;
    let rows = queue.jobs(&args.ids)?;
    if let Some(missing) = args
        .ids
        .iter()
        .find(|id| !rows.iter().any(|r| r.id == **id))
    {
        return Err(talker::queue::QueueError::NoSuchJob(*missing).into());
    }
    if global.json {
        let mut jobs = Vec::new();
        for r in &rows {
            let mut v = serde_json::to_value(r).expect("a job row serialises");
            if !args.ids.is_empty() {
                v["attempts_log"] =
                    serde_json::to_value(queue.attempts(r.id)?).expect("attempts serialise");
            }
            jobs.push(v);
        }
        let v = serde_json::json!({"queue": queue.location(), "counts": counts, "jobs": jobs});
        return emit(&format!("{v}\n"));
    }
    let mut text = format!(
        "queue {}: {} queued, {} running, {} succeeded, {} failed, {} cancelled; {} expired lease(s) reclaimed\n",
        queue.location(),
        counts.queued,
        counts.running,
        counts.succeeded,
        counts.failed,
        counts.cancelled,
        counts.lease_reclaims
    );
    for r in &rows {
        text.push_str(&row_text(r));
        if !args.ids.is_empty() {
            for a in queue.attempts(r.id)? {
                text.push_str(&format!(
                    "      attempt {} by {}: {}{}\n",
                    a.attempt,
                    a.worker,
                    a.outcome.as_deref().unwrap_or("running"),
                    a.error.map(|e| format!(": {e}")).unwrap_or_default()
                ));
            }
        }
    }
    emit(&text)
}

/// Writes to stdout; a closed pipe (`talker status | head`) is not an error.
fn emit(text: &str) -> Result<()> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::io("stdout")(e).into()),
        _ => Ok(()),
    }
}

fn row_text(r: &JobRow) -> String {
    let detail = match (&r.result, r.state.as_str()) {
        (Some(rep), "succeeded") => format!(
            " ({:.1} s of video in {:.1} s, {}/{} chunks reused)",
            rep["audio_seconds"].as_f64().unwrap_or(0.0),
            rep["wall_seconds"].as_f64().unwrap_or(0.0),
            rep["chunks_reused"],
            rep["chunks"]
        ),
        (_, "running") => format!(" on {}", r.lease_owner.as_deref().unwrap_or("?")),
        _ => String::new(),
    };
    let mut line = format!(
        "{:>6}  {:<9}  {}/{}  prio {:<4}  {}{}\n",
        r.id, r.state, r.attempts, r.max_attempts, r.priority, r.output, detail
    );
    if let Some(e) = &r.last_error
        && r.state != "succeeded"
    {
        line.push_str(&format!("        error: {e}\n"));
    }
    line
}

pub fn run_cancel(args: &JobIdArgs, global: &Global) -> Result<()> {
    let queue = open_existing_queue(&args.queue, global)?;
    let was = queue.cancel(args.id)?;
    if !global.quiet {
        let note = match was {
            talker::queue::Cancelled::WasQueued => "",
            talker::queue::Cancelled::WasRunning => {
                "; its worker stops the render at its next heartbeat"
            }
        };
        super::ui::eprint_line(&format!("job {} cancelled{note}", args.id));
    }
    Ok(())
}

pub fn run_retry(args: &JobIdArgs, global: &Global) -> Result<()> {
    let queue = open_existing_queue(&args.queue, global)?;
    queue.retry(args.id)?;
    if !global.quiet {
        super::ui::eprint_line(&format!(
            "job {} queued again with its attempts reset",
            args.id
        ));
    }
    Ok(())
}

/// Worker events as lines for people, or JSON lines on stderr with `--json`.
struct Printer {
    json: bool,
    quiet: bool,
}

impl Printer {
    fn new(global: &Global) -> Printer {
        Printer {
            json: global.json,
            quiet: global.quiet,
        }
    }

    fn say(&self, line: &str) {
        if !self.json && !self.quiet {
            super::ui::eprint_line(line);
        }
    }
}

impl Observer for Printer {
    fn event(&self, event: WorkerEvent) {
        if self.json {
            if let Ok(line) = serde_json::to_string(&event) {
                super::ui::eprint_line(&line);
            }
            return;
        }
        let line = match event {
            WorkerEvent::Failed {
                id,
                attempts,
                error,
            } => {
                super::ui::eprint_line(&format!(
                    "job {id}: failed after {attempts} attempt(s): {error}"
                ));
                return;
            }
            WorkerEvent::Warning { id, message } => {
                match id {
                    Some(id) => super::ui::eprint_line(&format!("warning: job {id}: {message}")),
                    None => super::ui::eprint_line(&format!("warning: {message}")),
                }
                return;
            }
            WorkerEvent::Started {
                worker,
                queue,
                concurrency,
                threads_per_render,
            } => format!(
                "worker {worker} on {queue}: {concurrency} render(s) at once, {threads_per_render} thread(s) each"
            ),
            WorkerEvent::Metrics { address } => format!("metrics on http://{address}/metrics"),
            WorkerEvent::Claimed {
                id,
                attempt,
                max_attempts,
                output,
                reclaimed,
            } => {
                let taken = if reclaimed > 0 {
                    format!(" (took back {reclaimed} expired lease(s))")
                } else {
                    String::new()
                };
                format!("job {id}: attempt {attempt}/{max_attempts} → {output}{taken}")
            }
            WorkerEvent::Succeeded {
                id,
                output,
                files,
                report,
            } => format!(
                "job {id}: wrote {output}{} in {:.1} s ({:.1}x real time), {} of {} chunks reused",
                files
                    .iter()
                    .skip(1)
                    .map(|f| format!(" and {}", f.path.display()))
                    .collect::<String>(),
                report.wall_seconds,
                report.audio_seconds / report.wall_seconds.max(1e-9),
                report.chunks_reused,
                report.chunks
            ),
            WorkerEvent::Retrying {
                id,
                attempt,
                max_attempts,
                delay_seconds,
                error,
            } => format!(
                "job {id}: attempt {attempt}/{max_attempts} failed, retrying in {delay_seconds:.1} s: {error}"
            ),
            WorkerEvent::Released { id } => format!("job {id}: stopped and queued again"),
            WorkerEvent::LeaseLost { id } => {
                format!(
                    "job {id}: lease lost (taken over or cancelled); stopped, nothing published"
                )
            }
            WorkerEvent::Stopping {
                running,
                grace_seconds,
            } => format!(
                "stopping: no new jobs; {running} running render(s) have {grace_seconds:.0} s to finish"
            ),
            WorkerEvent::Stopped { tally } => format!(
                "worker stopped: {} succeeded, {} retried, {} failed, {} released, {} lease(s) lost, {} reclaimed",
                tally.succeeded,
                tally.retried,
                tally.failed,
                tally.released,
                tally.lease_lost,
                tally.reclaims
            ),
        };
        if !self.quiet {
            super::ui::eprint_line(&line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse() {
        assert_eq!(parse_secs("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_secs("60"), Ok(Duration::from_secs(60)));
        assert!(parse_secs("0").is_err());
        assert!(parse_secs("-1").is_err());
        assert!(parse_secs("soon").is_err());
        assert!(parse_secs("inf").is_err());
    }
}
