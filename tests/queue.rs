//! The job queue through real processes and real databases: several `talker worker` processes on
//! one SQLite file, and the same suite against the PostgreSQL server that scripts/test starts
//! (its URL in `TALKER_TEST_POSTGRES`). Renders are tiny (one short sentence, 128×128, 10 fps) and
//! share one cache under the target directory, so speech is synthesised once per machine; every
//! run uses fresh seeds, so video chunks are really rendered each time.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::*;

const SHORT: &str = r#"{"segments": [{"text": "Hello there, this is a test.", "pause_ms": 100}]}"#;
/// Worker flags that make polling and leases fast enough for tests (unless a test sets its own).
const FAST: &[(&str, &str)] = &[
    ("--poll", "0.1"),
    ("--lease-ttl", "10"),
    ("--heartbeat", "1"),
];

/// `extra` plus the [`FAST`] flags it does not set itself.
fn with_fast<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = extra.to_vec();
    for (flag, value) in FAST {
        if !extra.contains(flag) {
            args.extend([*flag, *value]);
        }
    }
    args
}
static DATABASES: AtomicU64 = AtomicU64::new(0);
/// Tests that render the lecture (long enough to kill, cancel or cut off mid-render) share a cache
/// of their own, one test at a time: its speech is synthesised once, and the kill tests can count
/// the chunk files their render adds.
static LECTURE_CACHE: Mutex<()> = Mutex::new(());

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

/// One test's queue, output root and files; a PostgreSQL database of its own is dropped at the end.
struct Env {
    dir: tempfile::TempDir,
    queue: String,
    out: PathBuf,
    cache: PathBuf,
    /// (server URL, database) to drop.
    pg: Option<(String, String)>,
}

fn postgres_server() -> String {
    std::env::var("TALKER_TEST_POSTGRES").unwrap_or_else(|_| {
        panic!(
            "TALKER_TEST_POSTGRES is not set: run scripts/test, which starts a throwaway PostgreSQL \
             server and exports its URL (postgres://USER@HOST/DB)"
        )
    })
}

fn psql(url: &str, sql: &str) {
    let o = Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-qc", sql])
        .output()
        .expect("psql is installed with postgresql");
    assert!(
        o.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A number that differs between runs, so chunk keys (seeded) are fresh each time.
fn run_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    (nanos ^ u64::from(std::process::id()) << 20) % 1_000_000_000 * 1000
}

impl Env {
    fn new(backend: Backend) -> Env {
        assets();
        let dir = tempfile::tempdir().unwrap();
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("queue-test-cache");
        let out = dir.path().join("out");
        let (queue, pg) = match backend {
            Backend::Sqlite => (dir.path().join("queue.sqlite").display().to_string(), None),
            Backend::Postgres => {
                let server = postgres_server();
                let name = format!(
                    "talker_test_{}_{}",
                    std::process::id(),
                    DATABASES.fetch_add(1, Ordering::Relaxed)
                );
                psql(&server, &format!("CREATE DATABASE {name}"));
                let mut url = url::Url::parse(&server).expect("TALKER_TEST_POSTGRES is a URL");
                url.set_path(&name);
                (url.to_string(), Some((server, name)))
            }
        };
        Env {
            dir,
            queue,
            out,
            cache,
            pg,
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `talker SUB --queue Q ARGS…` with the shared cache.
    fn cmd(&self, sub: &str, args: &[&str]) -> Command {
        let mut c = talker(self.path());
        c.env("TALKER_CACHE", &self.cache)
            .arg(sub)
            .args(["--queue", &self.queue])
            .args(args);
        c
    }

    fn run(&self, sub: &str, args: &[&str]) -> Output {
        self.cmd(sub, args).output().unwrap()
    }

    /// `talker SUB ARGS…` with the shared cache and no queue (`render`).
    fn run_plain(&self, sub: &str, args: &[&str]) -> Output {
        let mut c = talker(self.path());
        c.env("TALKER_CACHE", &self.cache).arg(sub).args(args);
        c.output().unwrap()
    }

    /// `talker batch --json JOBS` on two threads; its report.
    fn batch(&self, jobs: &Path) -> Value {
        let mut args = vec!["--json", "--out-root", s(&self.out), "--threads", "2"];
        args.extend(with_fast(&[]));
        args.push(s(jobs));
        let o = self.run("batch", &args);
        assert_success(&o);
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    }

    fn enqueue(&self, specs: &[PathBuf], extra: &[&str]) -> Vec<i64> {
        let mut c = self.cmd("enqueue", &["--json", "--out-root", s(&self.out)]);
        c.args(extra).args(specs);
        let o = c.output().unwrap();
        assert_success(&o);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_i64().unwrap())
            .collect()
    }

    fn status(&self, ids: &[i64]) -> Value {
        let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
        let mut args = vec!["--json"];
        args.extend(ids.iter().map(String::as_str));
        let o = self.run("status", &args);
        assert_success(&o);
        serde_json::from_slice(&o.stdout).unwrap()
    }

    fn job(&self, id: i64) -> Value {
        self.status(&[id])["jobs"][0].clone()
    }

    fn worker(&self, extra: &[&str]) -> Worker {
        let mut c = self.cmd(
            "worker",
            &["--json", "--out-root", s(&self.out), "--threads", "1"],
        );
        c.args(with_fast(extra));
        Worker::spawn(c)
    }

    /// A worker inside a private mount namespace with a tmpfs (`opts`, e.g. "size=8k") at `mnt`.
    fn worker_with_tmpfs(&self, mnt: &Path, opts: &str, extra: &[&str]) -> Worker {
        let inner = self.cmd(
            "worker",
            &["--json", "--out-root", s(&self.out), "--threads", "1"],
        );
        let mut c = Command::new("unshare");
        c.args(["-m", "sh", "-c"])
            .arg(r#"mount -t tmpfs -o "$1" tmpfs "$2" && shift 2 && exec "$@""#)
            .args(["sh", opts, s(mnt)])
            .arg(inner.get_program())
            .args(inner.get_args())
            .args(with_fast(extra));
        for (k, v) in inner.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        Worker::spawn(c)
    }

    /// A job spec in the test folder.
    fn spec(&self, name: &str, script: &Path, portrait: &Path, output: &str, seed: u64) -> PathBuf {
        let p = self.path().join(name);
        let v = json!({
            "script": script, "portrait": portrait, "output": output,
            "framing": "head", "size": [128, 128], "fps": 10, "seed": seed,
            "preset": "ultrafast",
        });
        std::fs::write(&p, v.to_string()).unwrap();
        p
    }
}

/// An [`Env`] on the lecture cache, and the lock that keeps other lecture tests out meanwhile.
fn lecture_env(backend: Backend) -> (std::sync::MutexGuard<'static, ()>, Env) {
    let guard = LECTURE_CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let mut env = Env::new(backend);
    env.cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("queue-test-lecture-cache");
    (guard, env)
}

/// A spec for the lecture (78 s of speech, 8 chunks) at `size`² with a fresh seed.
fn lecture_spec(env: &Env, size: u32) -> PathBuf {
    let spec = env.path().join("lecture.json");
    std::fs::write(
        &spec,
        json!({"script": repo("examples/lecture.json"), "portrait": repo("examples/portrait.png"),
               "output": "lecture.mp4", "framing": "head", "size": [size, size], "seed": run_seed()})
        .to_string(),
    )
    .unwrap();
    spec
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some((server, name)) = &self.pg {
            psql(
                server,
                &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            );
        }
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A worker process whose JSON events (stderr) are collected as they come; killed if dropped alive.
struct Worker {
    child: Child,
    events: Arc<Mutex<Vec<Value>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    /// Waits until `done` holds; fails with `what` and the events so far after `limit`, or when
    /// the worker has exited first.
    fn wait_until(&mut self, what: &str, limit: Duration, mut done: impl FnMut(&Worker) -> bool) {
        let t = Instant::now();
        while !done(self) {
            assert!(
                t.elapsed() < limit,
                "{what}: {:?}",
                self.events.lock().unwrap()
            );
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "worker ended early"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn spawn(mut c: Command) -> Worker {
        let mut child = c
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&line).unwrap_or_else(|_| json!({"line": line}));
                sink.lock().unwrap().push(v);
            }
        });
        Worker {
            child,
            events,
            reader: Some(reader),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn events(&self, kind: &str) -> Vec<Value> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == kind)
            .cloned()
            .collect()
    }

    /// Waits for the first event of `kind`.
    fn wait_for(&mut self, kind: &str, limit: Duration) -> Value {
        let t = Instant::now();
        loop {
            if let Some(e) = self.events(kind).into_iter().next() {
                return e;
            }
            let exited = self.child.try_wait().ok().flatten().is_some();
            assert!(
                t.elapsed() < limit && !exited,
                "no {kind} event in {limit:?} (worker exited: {exited}): {:?}",
                self.events.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to exit (failing the test after `limit`); returns its status code.
    fn finish(&mut self, limit: Duration) -> i32 {
        let t = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                panic!(
                    "worker still running after {limit:?}: {:?}",
                    self.events.lock().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        status.code().unwrap_or(-1)
    }

    fn signal(&self, sig: i32) {
        // SAFETY: sends a signal to our own child process.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A playable H.264 + AAC file of about `seconds`.
fn assert_valid_mp4(path: &Path) {
    let p = probe(path);
    let streams = p["streams"].as_array().unwrap();
    assert!(
        streams.iter().any(|s| s["codec_name"] == "h264"),
        "{path:?}"
    );
    assert!(streams.iter().any(|s| s["codec_name"] == "aac"), "{path:?}");
    let d: f64 = p["format"]["duration"].as_str().unwrap().parse().unwrap();
    assert!(d > 1.0, "{path:?} lasts {d} s");
}

/// N workers, 40 jobs: every output exists once and plays; every job rendered to completion once.
fn many_workers(backend: Backend, workers: usize, jobs: usize) {
    let env = Env::new(backend);
    let script = write_script(env.path(), "short.json", SHORT);
    let portrait = repo("examples/portrait.png");
    let seed = run_seed();
    let specs: Vec<PathBuf> = (0..jobs)
        .map(|i| {
            env.spec(
                &format!("job{i}.json"),
                &script,
                &portrait,
                &format!("batch/job{i:02}.mp4"),
                seed + i as u64,
            )
        })
        .collect();
    let ids = env.enqueue(&specs, &[]);
    assert_eq!(ids.len(), jobs);
    let again = env.enqueue(&specs[..3], &[]);
    assert_eq!(again, ids[..3], "re-enqueueing a queued job returns it");

    let t = Instant::now();
    let mut procs: Vec<Worker> = (0..workers).map(|_| env.worker(&["--drain"])).collect();
    for w in &mut procs {
        assert_eq!(w.finish(Duration::from_secs(400)), 0, "a worker failed");
    }
    let wall = t.elapsed().as_secs_f64();

    let status = env.status(&ids);
    let mut audio = 0.0;
    for job in status["jobs"].as_array().unwrap() {
        assert_eq!(job["state"], "succeeded", "{job}");
        assert_eq!(job["attempts"], 1, "{job}");
        let log = job["attempts_log"].as_array().unwrap();
        let rendered = log.iter().filter(|a| !a["rendered_at"].is_null()).count();
        assert_eq!(
            rendered, 1,
            "job {} rendered to completion {rendered} times",
            job["id"]
        );
        assert_eq!(log.len(), 1, "{job}");
        audio += job["result"]["audio_seconds"].as_f64().unwrap();
    }
    let succeeded: Vec<i64> = procs
        .iter()
        .flat_map(|w| w.events("succeeded"))
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    let mut unique = succeeded.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(succeeded.len(), jobs, "success events");
    assert_eq!(unique.len(), jobs, "no job succeeded twice");
    let expected: Vec<String> = (0..jobs).map(|i| format!("batch/job{i:02}.mp4")).collect();
    assert_eq!(
        files_under(&env.out),
        expected,
        "each output once, no temp files"
    );
    for f in &expected {
        assert_valid_mp4(&env.out.join(f));
    }
    let per_worker: Vec<usize> = procs.iter().map(|w| w.events("succeeded").len()).collect();
    eprintln!(
        "{backend:?}: {jobs} jobs on {workers} workers in {wall:.1} s = {:.2} jobs/s, {:.1} s of video ({:.2}x real time overall); jobs per worker {per_worker:?}",
        jobs as f64 / wall,
        audio,
        audio / wall
    );
}

#[test]
fn sqlite_four_workers_forty_jobs() {
    many_workers(Backend::Sqlite, 4, 40);
}

#[test]
fn postgres_two_workers_forty_jobs() {
    many_workers(Backend::Postgres, 2, 40);
}

/// Chunk files (finished, not temp) in the cache.
fn chunk_files(cache: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![cache.join("chunks")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "mkv")
                && !e.file_name().to_string_lossy().starts_with('.')
            {
                out.push(p);
            }
        }
    }
    out
}

/// kill -9 a worker mid-render: its lease expires, another worker takes the job over and reuses
/// the chunks the dead one finished.
fn killed_worker(backend: Backend) {
    let (_one_at_a_time, env) = lecture_env(backend);
    let spec = lecture_spec(&env, 320);
    let ids = env.enqueue(&[spec], &[]);
    let id = ids[0];
    let before = chunk_files(&env.cache).len();

    let mut first = env.worker(&["--lease-ttl", "3", "--heartbeat", "0.5"]);
    first.wait_for("claimed", Duration::from_secs(30));
    // Three files, so at least two are also recorded in the cache's database (a chunk's file is
    // renamed into place just before its row is written).
    first.wait_until("no chunk finished", Duration::from_secs(300), |_| {
        chunk_files(&env.cache).len() >= before + 3
    });
    first.child.kill().unwrap();
    first.finish(Duration::from_secs(10));
    let finished_by_first = chunk_files(&env.cache).len() - before;
    let job = env.job(id);
    assert_eq!(
        job["state"], "running",
        "the job was still rendering: {job}"
    );
    assert_eq!(
        job["lease_owner"]
            .as_str()
            .unwrap()
            .rsplit(':')
            .next()
            .unwrap(),
        first.pid().to_string()
    );
    assert!(!env.out.join("lecture.mp4").exists());

    let t = Instant::now();
    let mut second = env.worker(&["--drain", "--lease-ttl", "3", "--heartbeat", "0.5"]);
    assert_eq!(second.finish(Duration::from_secs(400)), 0);
    let took_over = t.elapsed().as_secs_f64();
    let claimed = second.events("claimed");
    assert_eq!(claimed[0]["reclaimed"], 1, "{claimed:?}");

    let job = env.job(id);
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["attempts"], 2);
    assert_eq!(job["reclaims"], 1);
    let log = job["attempts_log"].as_array().unwrap();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0]["outcome"], "expired");
    assert!(log[0]["rendered_at"].is_null());
    assert_eq!(log[1]["outcome"], "succeeded");
    let r = &job["result"];
    let (reused, chunks) = (
        r["chunks_reused"].as_u64().unwrap(),
        r["chunks"].as_u64().unwrap(),
    );
    assert!(reused >= 2, "chunks reused: {reused} of {chunks}");
    assert!(
        reused < chunks,
        "the killed worker had not finished every chunk"
    );
    assert_eq!(files_under(&env.out), ["lecture.mp4"], "no temp files left");
    assert_valid_mp4(&env.out.join("lecture.mp4"));
    eprintln!(
        "{backend:?} kill -9: first worker finished {finished_by_first} chunk(s) before the kill; \
         the second reused {reused} of {chunks} chunks and {} cached sentences (synthesised {}), \
         render {:.1} s, {took_over:.1} s from start to done including the lease expiry",
        r["phrase_hits"],
        r["speech"]["synthesized"],
        r["wall_seconds"].as_f64().unwrap()
    );
}

#[test]
fn sqlite_killed_worker_is_taken_over_and_work_reused() {
    killed_worker(Backend::Sqlite);
}

#[test]
fn postgres_killed_worker_is_taken_over_and_work_reused() {
    killed_worker(Backend::Postgres);
}

fn scrape(addr: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

fn not_found(addr: &str) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(b"GET /other HTTP/1.1\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 404"), "{text}");
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{series} missing in\n{text}"))
}

/// A job with a bad portrait fails after its attempts with the error kept; the others succeed;
/// metrics count it all; SIGTERM stops the idle worker cleanly.
fn poisoned_job(backend: Backend) {
    let env = Env::new(backend);
    let script = write_script(env.path(), "short.json", SHORT);
    let portrait = repo("examples/portrait.png");
    // Bad input fails at once (see tests/guards.rs); a full disk is retried, since space may be
    // freed meanwhile: the worker runs with a 8 KB tmpfs at out/full, too small for an MP4.
    let full = env.out.join("full");
    std::fs::create_dir_all(&full).unwrap();
    let seed = run_seed();
    let mut specs = vec![env.spec("poison.json", &script, &portrait, "full/poison.mp4", seed)];
    for i in 0..3 {
        specs.push(env.spec(
            &format!("good{i}.json"),
            &script,
            &portrait,
            &format!("good{i}.mp4"),
            seed + 1 + i,
        ));
    }
    let ids = env.enqueue(&specs, &["--max-attempts", "3"]);
    let mut w = env.worker_with_tmpfs(
        &full,
        "size=8k",
        &[
            "--backoff-base",
            "0.05",
            "--backoff-cap",
            "0.2",
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    let addr = w.wait_for("metrics", Duration::from_secs(30))["address"]
        .as_str()
        .unwrap()
        .to_owned();
    let t = Instant::now();
    loop {
        let c = &env.status(&[])["counts"];
        if c["queued"] == 0 && c["running"] == 0 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "jobs still live: {c}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = scrape(&addr);
    not_found(&addr);
    assert_eq!(metric(&text, "talker_jobs{state=\"failed\"}"), 1.0);
    assert_eq!(metric(&text, "talker_jobs{state=\"succeeded\"}"), 3.0);
    assert_eq!(
        metric(&text, "talker_worker_attempts_total{outcome=\"retry\"}"),
        2.0
    );
    assert_eq!(
        metric(&text, "talker_worker_attempts_total{outcome=\"failed\"}"),
        1.0
    );
    assert_eq!(metric(&text, "talker_render_seconds_count"), 3.0);
    assert!(metric(&text, "talker_realtime_factor") > 0.0);
    assert_eq!(metric(&text, "talker_queue_lease_reclaims_total"), 0.0);
    assert!(metric(&text, "talker_cache_hit_ratio{cache=\"phrase\"}") > 0.0);

    w.signal(libc::SIGTERM);
    assert_eq!(
        w.finish(Duration::from_secs(30)),
        0,
        "clean shutdown exits 0"
    );

    let poison = env.job(ids[0]);
    assert_eq!(poison["state"], "failed");
    assert_eq!(poison["attempts"], 3);
    assert!(
        poison["last_error"]
            .as_str()
            .unwrap()
            .contains("no space left on the device holding"),
        "{poison}"
    );
    let outcomes: Vec<&str> = poison["attempts_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["retry", "retry", "failed"]);
    for id in &ids[1..] {
        assert_eq!(env.job(*id)["state"], "succeeded");
    }
    let human = env.run("status", &[]);
    assert_success(&human);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("failed") && text.contains("error: ") && text.contains("no space left"),
        "{text}"
    );
    assert!(!full.join("poison.mp4").exists());

    // The user fixes nothing but asks again: retry resets the attempts.
    assert_success(&env.run("retry", &[&ids[0].to_string()]));
    let again = env.job(ids[0]);
    assert_eq!(
        (again["state"].as_str(), again["attempts"].as_i64()),
        (Some("queued"), Some(0))
    );
    let refused = |sub: &str, id: i64, needle: &str| {
        let o = env.run(sub, &[&id.to_string()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{sub} {id}: {err}");
        assert!(err.contains(needle), "{sub} {id}: {err}");
    };
    refused("retry", ids[0], "only failed or cancelled jobs");
    refused("retry", ids[1], "is succeeded");
    refused("cancel", ids[1], "only queued or running jobs");
    refused("cancel", 999_999, "no job 999999");
    assert_success(&env.run("cancel", &[&ids[0].to_string()]));
    assert_eq!(env.job(ids[0])["state"], "cancelled");
    // An identical job enqueued meanwhile blocks a retry of the cancelled one.
    let dup = env.enqueue(&specs[..1], &[]);
    assert_ne!(dup[0], ids[0]);
    refused(
        "retry",
        ids[0],
        &format!("job {} renders the same content", dup[0]),
    );
}

#[test]
fn sqlite_poisoned_job_fails_after_its_attempts() {
    poisoned_job(Backend::Sqlite);
}

#[test]
fn postgres_poisoned_job_fails_after_its_attempts() {
    poisoned_job(Backend::Postgres);
}

/// A worker killed during the last allowed attempt: the next claim finds the lease expired and,
/// with no attempt left, marks the job failed with the reason.
#[test]
fn an_expired_last_attempt_fails_the_job() {
    let (_one_at_a_time, env) = lecture_env(Backend::Sqlite);
    let spec = lecture_spec(&env, 256);
    let id = env.enqueue(&[spec], &["--max-attempts", "1"])[0];
    let mut first = env.worker(&["--lease-ttl", "1", "--heartbeat", "0.2"]);
    first.wait_for("claimed", Duration::from_secs(30));
    first.child.kill().unwrap();
    first.finish(Duration::from_secs(10));
    let mut second = env.worker(&["--drain", "--lease-ttl", "1", "--heartbeat", "0.2"]);
    assert_eq!(second.finish(Duration::from_secs(60)), 0);
    assert!(second.events("claimed").is_empty(), "nothing left to claim");
    let job = env.job(id);
    assert_eq!(job["state"], "failed");
    assert_eq!(job["reclaims"], 1);
    let error = job["last_error"].as_str().unwrap();
    assert!(
        error.contains(&format!(":{} expired during attempt 1 of 1", first.pid())),
        "{error}"
    );
    assert_eq!(job["attempts_log"][0]["outcome"], "expired");
}

/// A database that already has a `jobs` table of someone else's: the migration fails with exit 1.
#[test]
fn postgres_migration_failure_is_reported() {
    let env = Env::new(Backend::Postgres);
    psql(&env.queue, "CREATE TABLE jobs (x int)");
    let o = env.run("status", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("migration failed"), "{err}");
}

/// The database refuses the worker's writes mid-render: heartbeats fail, and once a whole lease
/// has passed without one the worker stops the render (another worker may own the job by now).
/// When the database is back, the job is reclaimed and finished from the cached chunks.
#[test]
fn postgres_outage_stops_the_render_after_a_lease_and_it_resumes() {
    let (_one_at_a_time, env) = lecture_env(Backend::Postgres);
    let (server, db) = env.pg.clone().unwrap();
    let role = format!("{db}_worker");
    psql(&server, &format!("CREATE ROLE {role} LOGIN"));
    let spec = lecture_spec(&env, 512);
    let id = env.enqueue(&[spec], &[])[0];
    // The worker's role may use the (now migrated) tables but not create any.
    psql(
        &env.queue,
        &format!(
            "GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}; GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}"
        ),
    );
    let mut as_role = url::Url::parse(&env.queue).unwrap();
    as_role.set_username(&role).unwrap();
    let mut c = talker(env.path());
    c.env("TALKER_CACHE", &env.cache).args([
        "worker",
        "--json",
        "--drain",
        "--queue",
        as_role.as_str(),
        "--out-root",
        s(&env.out),
        "--threads",
        "1",
        "--poll",
        "0.1",
        "--lease-ttl",
        "2",
        "--heartbeat",
        "0.3",
    ]);
    let before = chunk_files(&env.cache).len();
    let mut w = Worker::spawn(c);
    w.wait_for("claimed", Duration::from_secs(30));
    // The outage starts once a chunk is finished, so the resumed render has one to reuse however
    // slowly this machine renders (a finished chunk without its row is adopted too).
    w.wait_until("no chunk finished", Duration::from_secs(300), |_| {
        chunk_files(&env.cache).len() > before
    });
    psql(&env.queue, &format!("REVOKE UPDATE ON jobs FROM {role}"));
    w.wait_for("warning", Duration::from_secs(30));
    w.wait_until("render not stopped", Duration::from_secs(60), |w| {
        w.events("warning").iter().any(|e| {
            e["message"]
                .as_str()
                .unwrap_or("")
                .contains("cannot release")
        })
    });
    assert!(!env.out.join("lecture.mp4").exists());
    psql(&env.queue, &format!("GRANT UPDATE ON jobs TO {role}"));
    assert_eq!(w.finish(Duration::from_secs(300)), 0);
    let job = env.job(id);
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["reclaims"], 1);
    assert!(
        job["result"]["chunks_reused"].as_u64().unwrap() >= 1,
        "{job}"
    );
    let heartbeat_failures = w
        .events("warning")
        .iter()
        .filter(|e| {
            e["message"]
                .as_str()
                .unwrap_or("")
                .contains("heartbeat failed")
        })
        .count();
    assert!(heartbeat_failures >= 2, "{heartbeat_failures}");
    psql(&env.queue, &format!("DROP OWNED BY {role} CASCADE"));
    drop(env);
    psql(&server, &format!("DROP ROLE {role}"));
}

/// Higher priority first, then first come, first served.
fn priorities(backend: Backend) {
    let env = Env::new(backend);
    let script = write_script(env.path(), "short.json", SHORT);
    let portrait = repo("examples/portrait.png");
    let seed = run_seed();
    let mut specs = Vec::new();
    for (i, priority) in [-5, 10, 0, 10].into_iter().enumerate() {
        let p = env.spec(
            &format!("p{i}.json"),
            &script,
            &portrait,
            &format!("p{i}.mp4"),
            seed + i as u64,
        );
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["priority"] = priority.into();
        std::fs::write(&p, v.to_string()).unwrap();
        specs.push(p);
    }
    let ids = env.enqueue(&specs, &[]);
    let mut w = env.worker(&["--drain", "--concurrency", "1"]);
    assert_eq!(w.finish(Duration::from_secs(120)), 0);
    let order: Vec<i64> = w
        .events("claimed")
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert_eq!(order, [ids[1], ids[3], ids[2], ids[0]]);
}

#[test]
fn sqlite_higher_priorities_run_first() {
    priorities(Backend::Sqlite);
}

#[test]
fn postgres_higher_priorities_run_first() {
    priorities(Backend::Postgres);
}

/// Specs that try to write outside the output root are refused at enqueue time with exit 2.
fn malicious_specs(backend: Backend) {
    let env = Env::new(backend);
    let script = write_script(env.path(), "short.json", SHORT);
    let portrait = repo("examples/portrait.png");
    let outside = env.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(&env.out).unwrap();
    std::os::unix::fs::symlink(&outside, env.out.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("x.mp4"), env.out.join("trap.mp4")).unwrap();
    let cases = [
        ("dotdot.json", "../escape.mp4", "\"..\""),
        ("deep.json", "a/../../escape.mp4", "\"..\""),
        ("absolute.json", "/tmp/talker-escape.mp4", "absolute"),
        ("symlink-dir.json", "link/escape.mp4", "leads outside"),
        ("symlink-file.json", "trap.mp4", "dangling symlink"),
        ("not-mp4.json", "notes.txt", ".mp4"),
    ];
    for (name, output, needle) in cases {
        let spec = env.spec(name, &script, &portrait, output, 1);
        let o = env.run("enqueue", &["--out-root", s(&env.out), s(&spec)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(name) && err.contains("output: "),
            "{name}: {err}"
        );
        assert!(err.contains(needle), "{name}: expected {needle:?} in {err}");
    }
    // Bad fields elsewhere name the file and the field too; the good spec among them is enqueued.
    let typo = env.path().join("typo.json");
    std::fs::write(
        &typo,
        r#"{"script": "short.json", "portrait": "p.png", "ouptut": "a.mp4"}"#,
    )
    .unwrap();
    let missing = env.spec(
        "missing.json",
        &env.path().join("nope.json"),
        &portrait,
        "m.mp4",
        1,
    );
    let good = env.spec("good.json", &script, &portrait, "good.mp4", 1);
    let o = env.run(
        "enqueue",
        &["--out-root", s(&env.out), s(&typo), s(&missing), s(&good)],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("typo.json: ouptut: unknown field; did you mean \"output\"?"),
        "{err}"
    );
    assert!(
        err.contains("missing.json: script: ") && err.contains("nope.json"),
        "{err}"
    );
    assert!(err.contains("2 of 3 job specs refused"), "{err}");
    let jobs = env.status(&[]);
    assert_eq!(
        jobs["jobs"].as_array().unwrap().len(),
        1,
        "only the good spec: {jobs}"
    );
    assert!(files_under(&outside).is_empty(), "nothing written outside");
    assert!(!Path::new("/tmp/talker-escape.mp4").exists());
}

#[test]
fn sqlite_malicious_specs_are_refused() {
    malicious_specs(Backend::Sqlite);
}

#[test]
fn postgres_malicious_specs_are_refused() {
    malicious_specs(Backend::Postgres);
}

/// The worker checks confinement again before writing: a job from another root, or a folder that
/// became a symlink out of the root after enqueue, fails instead of writing outside.
#[test]
fn the_worker_checks_confinement_again() {
    let env = Env::new(Backend::Sqlite);
    let script = write_script(env.path(), "short.json", SHORT);
    let portrait = repo("examples/portrait.png");
    std::fs::create_dir_all(env.out.join("sub")).unwrap();
    let swapped = env.spec("swapped.json", &script, &portrait, "sub/a.mp4", 3);
    let ids = env.enqueue(&[swapped], &["--max-attempts", "1"]);
    let outside = env.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::remove_dir(env.out.join("sub")).unwrap();
    std::os::unix::fs::symlink(&outside, env.out.join("sub")).unwrap();

    let other_root = env.path().join("other-root");
    let foreign = env.spec("foreign.json", &script, &portrait, "b.mp4", 4);
    let o = env.run(
        "enqueue",
        &[
            "--json",
            "--out-root",
            s(&other_root),
            "--max-attempts",
            "1",
            s(&foreign),
        ],
    );
    assert_success(&o);
    let foreign_id = serde_json::from_slice::<Value>(&o.stdout).unwrap()[0]["id"]
        .as_i64()
        .unwrap();

    let mut w = env.worker(&["--drain"]);
    assert_eq!(w.finish(Duration::from_secs(120)), 0);
    let job = env.job(ids[0]);
    assert_eq!(job["state"], "failed");
    assert!(
        job["last_error"]
            .as_str()
            .unwrap()
            .contains("leads outside"),
        "{job}"
    );
    let job = env.job(foreign_id);
    assert_eq!(job["state"], "failed");
    assert!(
        job["last_error"]
            .as_str()
            .unwrap()
            .contains("outside this worker's output root"),
        "{job}"
    );
    assert!(files_under(&outside).is_empty());
    assert!(!other_root.join("b.mp4").exists());
}

/// Cancel stops a running render at the next heartbeat; retry queues it again; SIGTERM releases a
/// running job after the grace period and the worker exits 0.
#[test]
fn cancel_retry_and_shutdown_release_running_jobs() {
    let (_one_at_a_time, env) = lecture_env(Backend::Sqlite);
    let spec = lecture_spec(&env, 512);
    let id = env.enqueue(&[spec], &[])[0];
    let mut w = env.worker(&["--heartbeat", "0.2", "--grace", "0.3"]);
    w.wait_for("claimed", Duration::from_secs(30));
    assert_success(&env.run("cancel", &[&id.to_string()]));
    w.wait_for("lease_lost", Duration::from_secs(30));
    let job = env.job(id);
    assert_eq!(job["state"], "cancelled");
    assert_eq!(job["attempts_log"][0]["outcome"], "cancelled");

    assert_success(&env.run("retry", &[&id.to_string()]));
    let t = Instant::now();
    while w.events("claimed").len() < 2 {
        assert!(t.elapsed() < Duration::from_secs(30), "not claimed again");
        std::thread::sleep(Duration::from_millis(20));
    }
    w.signal(libc::SIGTERM);
    assert_eq!(w.finish(Duration::from_secs(60)), 0);
    assert_eq!(w.events("released").len(), 1);
    let job = env.job(id);
    assert_eq!(job["state"], "queued", "released: {job}");
    assert_eq!(job["attempts"], 0, "a released attempt does not count");
    assert_eq!(job["attempts_log"][1]["outcome"], "released");
    assert!(
        files_under(&env.out).is_empty(),
        "nothing published: {:?}",
        files_under(&env.out)
    );
}

/// SIGTERM during a render that ends within the grace period: the job succeeds, none is claimed
/// after the signal, and the worker exits 0.
#[test]
fn shutdown_lets_a_running_render_finish_within_the_grace() {
    let env = Env::new(Backend::Sqlite);
    let script = write_script(env.path(), "short.json", SHORT);
    let portrait = repo("examples/portrait.png");
    let seed = run_seed();
    let specs: Vec<PathBuf> = (0..2)
        .map(|i| {
            env.spec(
                &format!("s{i}.json"),
                &script,
                &portrait,
                &format!("s{i}.mp4"),
                seed + i,
            )
        })
        .collect();
    let ids = env.enqueue(&specs, &[]);
    let mut w = env.worker(&["--grace", "120"]);
    w.wait_for("claimed", Duration::from_secs(30));
    w.signal(libc::SIGTERM);
    assert_eq!(w.finish(Duration::from_secs(120)), 0);
    assert_eq!(
        w.events("claimed").len(),
        1,
        "no job taken after the signal"
    );
    assert!(w.events("released").is_empty());
    let states: Vec<Value> = ids.iter().map(|id| env.job(*id)["state"].clone()).collect();
    assert_eq!(states, ["succeeded", "queued"]);
}

/// SIGTERM stops a batch: its running job is released after the grace period and it exits 130.
#[test]
fn an_interrupted_batch_exits_130_and_releases_its_job() {
    let (_one_at_a_time, env) = lecture_env(Backend::Sqlite);
    let jobs = env.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::fs::rename(lecture_spec(&env, 512), jobs.join("lecture.json")).unwrap();
    let mut c = env.cmd(
        "batch",
        &[
            "--json",
            "--out-root",
            s(&env.out),
            "--threads",
            "1",
            "--grace",
            "0.1",
        ],
    );
    c.args(with_fast(&[])).arg(&jobs);
    let mut batch = Worker::spawn(c);
    batch.wait_for("claimed", Duration::from_secs(30));
    batch.signal(libc::SIGTERM);
    assert_eq!(batch.finish(Duration::from_secs(60)), 130);
    assert_eq!(batch.events("released").len(), 1);
    let job = &env.status(&[])["jobs"][0];
    assert_eq!(job["state"], "queued", "{job}");
}

/// `talker batch DIR`: renders what changed since its last success, exits 1 when a job failed and
/// 2 when a spec was refused.
#[test]
fn batch_renders_only_what_changed() {
    let env = Env::new(Backend::Sqlite);
    let jobs = env.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    let script_a = write_script(env.path(), "a.json", SHORT);
    let script_b = write_script(
        env.path(),
        "b.json",
        r#"{"segments": [{"text": "A second, different line.", "pause_ms": 100}]}"#,
    );
    let portrait = repo("examples/portrait.png");
    let seed = run_seed();
    for (name, script, seed) in [("a", &script_a, seed), ("b", &script_b, seed + 1)] {
        let spec = env.spec(
            &format!("spec-{name}.json"),
            script,
            &portrait,
            &format!("{name}.mp4"),
            seed,
        );
        std::fs::rename(&spec, jobs.join(format!("{name}.json"))).unwrap();
    }
    let batch = |extra: &[&str]| {
        let mut args = vec!["--json", "--out-root", s(&env.out), "--threads", "1"];
        args.extend(with_fast(extra));
        args.push(s(&jobs));
        env.run("batch", &args)
    };
    let o = batch(&[]);
    assert_success(&o);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["up_to_date"], 0);
    assert_eq!(v["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(files_under(&env.out), ["a.mp4", "b.mp4"]);

    let o = batch(&[]);
    assert_success(&o);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["up_to_date"], 2, "nothing changed: {v}");
    assert!(v["jobs"].as_array().unwrap().is_empty());

    std::fs::write(&script_b, SHORT.replace("a test", "a changed test")).unwrap();
    let o = batch(&[]);
    assert_success(&o);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["up_to_date"], 1, "{v}");
    let b = env.out.canonicalize().unwrap().join("b.mp4");
    assert_eq!(v["jobs"][0]["output"], s(&b));

    // A portrait that is not an image is refused at enqueue (exit 2, see tests/guards.rs); a job
    // that fails when it runs (a voice model that is not one) makes the batch exit 1.
    let broken = env.path().join("broken.onnx");
    std::fs::write(&broken, b"not a model").unwrap();
    std::fs::copy(default_voice().config, env.path().join("broken.onnx.json")).unwrap();
    let poison = env.spec("spec-poison.json", &script_a, &portrait, "poison.mp4", seed);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&poison).unwrap()).unwrap();
    v["voice"] = json!(broken);
    std::fs::write(&poison, v.to_string()).unwrap();
    std::fs::rename(&poison, jobs.join("poison.json")).unwrap();
    let o = batch(&["--max-attempts", "1"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 of 1 jobs failed"));

    std::fs::write(jobs.join("broken.json"), "{").unwrap();
    let o = batch(&["--max-attempts", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("broken.json: line 1"), "{err}");
}

#[test]
fn queue_locations_and_foreign_files_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let foreign = d.join("foreign.sqlite");
    let o = Command::new("sqlite3")
        .arg(&foreign)
        .arg("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .output()
        .expect("sqlite3 is installed");
    assert!(o.status.success());
    let not_a_database = d.join("notes.txt");
    std::fs::write(&not_a_database, "not a database at all, but long enough").unwrap();
    for (queue, needle, code) in [
        (s(&foreign).to_owned(), "another program", 2),
        (s(&not_a_database).to_owned(), "another program", 2),
        ("mysql://db/x".to_owned(), "not a queue location", 2),
        (
            "postgres://nobody@localhost:1/none".to_owned(),
            "queue postgres://nobody@localhost:1/none",
            1,
        ),
    ] {
        let o = talker(d)
            .args(["status", "--queue", &queue])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{queue}: {err}");
        assert!(err.contains(needle), "{queue}: {err}");
    }
    let file = d.join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let q = d.join("ok.sqlite");
    // Only enqueue, batch and worker create a queue.
    assert_success(
        &talker(d)
            .args(["worker", "--drain", "--queue", s(&q)])
            .output()
            .unwrap(),
    );
    for (args, needle, code) in [
        (
            vec!["worker", "--queue", &format!("{}/q.sqlite", s(&file))],
            "cannot create",
            1,
        ),
        (vec!["status", "--queue", s(&q), "42"], "no job 42", 2),
        (
            vec!["worker", "--queue", s(&q), "--metrics", "nonsense"],
            "--metrics",
            2,
        ),
        (
            vec!["batch", "--queue", s(&q), s(&d.join("no-such-dir"))],
            "no-such-dir",
            1,
        ),
        (vec!["batch", "--queue", s(&q), s(d)], "no job specs", 2),
    ] {
        let o = talker(d).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let o = talker(d)
        .args(["worker", "--queue", s(&q), "--metrics", &addr])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("--metrics"));
    // A reader that goes away early (`talker status | head`) is not an error.
    let mut c = talker(d)
        .args(["status", "--queue", s(&q)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(c.stdout.take());
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // TALKER_QUEUE picks the default queue; a sqlite:// URL works like a path.
    let o = talker(d)
        .env(
            "TALKER_QUEUE",
            format!("sqlite://{}", d.join("env.sqlite").display()),
        )
        .args(["worker", "--drain"])
        .output()
        .unwrap();
    assert_success(&o);
    assert!(d.join("env.sqlite").is_file());
    let o = talker(d)
        .args([
            "worker",
            "--lease-ttl",
            "1",
            "--heartbeat",
            "2",
            "--queue",
            s(&d.join("q.sqlite")),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("shorter than --lease-ttl"));
}

#[test]
fn reading_a_queue_never_creates_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let missing = d.join("typo/dir/q.sqlite");
    for args in [
        vec!["status"],
        vec!["status", "--json", "3"],
        vec!["cancel", "3"],
        vec!["retry", "3"],
    ] {
        let o = talker(d)
            .args(&args)
            .args(["--queue", s(&missing)])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(s(&missing)) && err.contains("does not exist"),
            "{args:?}: {err}"
        );
    }
    assert!(!d.join("typo").exists(), "no folder and no queue made");
}

/// Two jobs may not write one output while the first is queued or running; once it has ended,
/// the output is free again. A book is a script in a spec as it is for `render`.
fn one_output_one_live_job(backend: Backend) {
    let env = Env::new(backend);
    let portrait = repo("examples/portrait.png");
    let a = write_script(env.path(), "a.json", SHORT);
    let book = env.path().join("b.md");
    std::fs::write(&book, "# Notes\n\nA book in a job spec.\n").unwrap();
    let seed = run_seed();
    let spec_a = env.spec("a-spec.json", &a, &portrait, "same.mp4", seed);
    let spec_b = env.spec("b-spec.json", &book, &portrait, "same.mp4", seed);
    let ids = env.enqueue(std::slice::from_ref(&spec_a), &[]);
    let o = env.run("enqueue", &["--out-root", s(&env.out), s(&spec_b)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for needle in [
        "b-spec.json".to_owned(),
        "same.mp4".to_owned(),
        format!("job {}", ids[0]),
        "a-spec.json".to_owned(),
    ] {
        assert!(err.contains(&needle), "{needle:?} in {err}");
    }
    // The same content again is the same job, not a clash.
    assert_eq!(env.enqueue(std::slice::from_ref(&spec_a), &[]), ids);
    // Retrying a cancelled job whose output a live job now writes is refused the same way.
    assert_success(&env.run("cancel", &[&ids[0].to_string()]));
    let b = env.enqueue(std::slice::from_ref(&spec_b), &[]);
    let o = env.run("retry", &[&ids[0].to_string()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("job {}", b[0])), "{err}");
    // The book renders.
    let mut w = env.worker(&["--drain"]);
    let status = w.child.wait().unwrap();
    assert!(status.success(), "{:?}", w.events.lock().unwrap());
    assert_eq!(env.job(b[0])["state"], "succeeded", "{}", env.job(b[0]));
    assert_valid_mp4(&env.out.join("same.mp4"));
}

#[test]
fn sqlite_one_output_has_one_live_job() {
    one_output_one_live_job(Backend::Sqlite);
}

#[test]
fn postgres_one_output_has_one_live_job() {
    one_output_one_live_job(Backend::Postgres);
}

/// Enqueues of different content for one output, started at the same moment from separate
/// processes: exactly one of each round becomes the live job, every other one is refused with
/// exit 2 naming it (on PostgreSQL each transaction takes the output's advisory lock first).
fn concurrent_enqueues_of_one_output(backend: Backend) {
    const ROUNDS: usize = 4;
    const AT_ONCE: usize = 6;
    let env = Env::new(backend);
    let portrait = repo("examples/portrait.png");
    for round in 0..ROUNDS {
        let output = format!("race-{round}.mp4");
        let specs: Vec<PathBuf> = (0..AT_ONCE)
            .map(|k| {
                let script = write_script(
                    env.path(),
                    &format!("r{round}-{k}.json"),
                    &json!({"segments": [{"text": format!("Round {round}, take {k}.")}]})
                        .to_string(),
                );
                env.spec(
                    &format!("r{round}-{k}-spec.json"),
                    &script,
                    &portrait,
                    &output,
                    k as u64,
                )
            })
            .collect();
        let children: Vec<_> = specs
            .iter()
            .map(|spec| {
                env.cmd("enqueue", &["--json", "--out-root", s(&env.out), s(spec)])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outputs: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let won: Vec<&Output> = outputs.iter().filter(|o| o.status.success()).collect();
        assert_eq!(won.len(), 1, "round {round}: {outputs:?}");
        let winner: Value = serde_json::from_slice(&won[0].stdout).unwrap();
        let id = winner[0]["id"].as_i64().unwrap();
        for o in outputs.iter().filter(|o| !o.status.success()) {
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "round {round}: {err}");
            assert!(err.contains(&format!("job {id}")), "round {round}: {err}");
        }
    }
    let live: Vec<Value> = env.status(&[])["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["state"] == "queued")
        .cloned()
        .collect();
    assert_eq!(live.len(), ROUNDS, "{live:?}");
}

#[test]
fn sqlite_concurrent_enqueues_of_one_output_leave_one_job() {
    concurrent_enqueues_of_one_output(Backend::Sqlite);
}

#[test]
fn postgres_concurrent_enqueues_of_one_output_leave_one_job() {
    concurrent_enqueues_of_one_output(Backend::Postgres);
}

/// `worker` and `batch` say once, as `render` does, that the CPU backend ignores `--precision`.
#[test]
fn worker_and_batch_say_an_unused_precision() {
    let env = Env::new(Backend::Sqlite);
    let warnings = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stderr)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == "warning")
            .filter_map(|v| v["message"].as_str().map(str::to_owned))
            .filter(|m| m.contains("--precision fp16 is for the CUDA engine"))
            .collect()
    };
    let speech = ["--backend", "cpu", "--precision", "fp16"];
    let o = env
        .cmd("worker", &["--json", "--drain", "--out-root", s(&env.out)])
        .args(speech)
        .output()
        .unwrap();
    assert_success(&o);
    assert_eq!(
        warnings(&o).len(),
        1,
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let jobs = env.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    let script = write_script(env.path(), "s.json", SHORT);
    let spec = env.spec(
        "spec.json",
        &script,
        &repo("examples/portrait.png"),
        "s.mp4",
        run_seed(),
    );
    std::fs::rename(&spec, jobs.join("s.json")).unwrap();
    let o = env
        .cmd("batch", &["--json", "--out-root", s(&env.out)])
        .args(speech)
        .arg(&jobs)
        .output()
        .unwrap();
    assert_success(&o);
    assert_eq!(
        warnings(&o).len(),
        1,
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The worker records what it rendered, not what was enqueued: a script edited after enqueue
/// and reverted after the render is not "up to date" for a video that speaks the edit.
#[test]
fn batch_trusts_the_hash_of_what_was_rendered() {
    let env = Env::new(Backend::Sqlite);
    let jobs = env.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    let script = write_script(env.path(), "s.json", SHORT);
    let spec = env.spec(
        "spec.json",
        &script,
        &repo("examples/portrait.png"),
        "s.mp4",
        run_seed(),
    );
    std::fs::rename(&spec, jobs.join("s.json")).unwrap();
    let spec = jobs.join("s.json");
    env.enqueue(std::slice::from_ref(&spec), &[]);
    std::fs::write(&script, SHORT.replace("a test", "an edited test")).unwrap();
    let mut w = env.worker(&["--drain"]);
    assert!(w.child.wait().unwrap().success());
    std::fs::write(&script, SHORT).unwrap();
    let batch = || {
        let mut args = vec!["--json", "--out-root", s(&env.out), "--threads", "1"];
        args.extend(with_fast(&[]));
        args.push(s(&jobs));
        let o = env.run("batch", &args);
        assert_success(&o);
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let v = batch();
    assert_eq!(v["up_to_date"], 0, "the video speaks the edit: {v}");
    assert_eq!(v["jobs"][0]["state"], "succeeded", "{v}");
    let v = batch();
    assert_eq!(v["up_to_date"], 1, "now it is up to date: {v}");
}

#[test]
fn missing_face_models_are_not_a_bad_spec() {
    let env = Env::new(Backend::Sqlite);
    let script = write_script(env.path(), "s.json", SHORT);
    let spec = env.spec(
        "spec.json",
        &script,
        &repo("examples/portrait.png"),
        "s.mp4",
        1,
    );
    let empty = env.path().join("no-assets");
    std::fs::create_dir(&empty).unwrap();
    let mut c = env.cmd(
        "enqueue",
        &["--out-root", s(&env.out), "--assets", s(&empty)],
    );
    c.arg(&spec);
    let o = c.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "missing assets exit 1: {err}");
    assert!(err.contains(s(&empty)), "{err}");
}

/// The streams, durations and chapters ffprobe sees in `path`: what a job's output must share
/// with `talker render`'s from the same inputs and options.
fn media_shape(path: &Path) -> Value {
    let p = probe(path);
    let streams: Vec<Value> = p["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            json!([
                s["codec_type"],
                s["codec_name"],
                s["sample_rate"],
                s["channels"],
                s["width"],
                s["height"],
                s["nb_frames"],
                s["duration"]
            ])
        })
        .collect();
    let chapters: Vec<Value> = p["chapters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!([c["tags"]["title"], c["start_time"], c["end_time"]]))
        .collect();
    json!({"streams": streams, "chapters": chapters, "duration": p["format"]["duration"]})
}

/// A nightly batch of a book (EPUB → M4B with a lexicon and SRT subtitles), a lecture (Markdown
/// → MP4) and notes (text → WAV): each job's files are published together, listed by
/// `status --json`, and equal to what `talker render` makes from the same inputs and options;
/// editing a book or losing one of a job's files makes the next batch render that job again.
fn books_and_lectures(backend: Backend, compare: bool) {
    let env = Env::new(backend);
    let (jobs, inputs) = (env.path().join("jobs"), env.path().join("in"));
    std::fs::create_dir(&jobs).unwrap();
    std::fs::create_dir(&inputs).unwrap();
    let book = crate::books::epub(&inputs, "book.epub", "3.0", true);
    std::fs::write(inputs.join("names.json"), r#"{"Rain": "rayn"}"#).unwrap();
    let md = inputs.join("talk.md");
    std::fs::write(
        &md,
        "# Hello\n\nOne line.\n\n## Second\n\nTwo lines here.\n",
    )
    .unwrap();
    let notes = inputs.join("notes.txt");
    std::fs::write(&notes, "Some notes.\n\nRead aloud.\n").unwrap();
    let portrait = repo("examples/portrait.png");
    let seed = run_seed();
    let specs = [
        (
            "book",
            json!({"script": "../in/book.epub", "output": "books/book.m4b", "subtitles": "srt",
                   "lexicon": "../in/names.json", "deterministic": true}),
        ),
        (
            "talk",
            json!({"script": "../in/talk.md", "portrait": portrait, "output": "talks/talk.mp4",
                   "framing": "head", "size": [128, 128], "fps": 10, "preset": "ultrafast",
                   "seed": seed, "deterministic": true}),
        ),
        (
            "notes",
            json!({"script": "../in/notes.txt", "output": "notes.wav", "loudness": "off",
                   "subtitles": "vtt", "deterministic": true}),
        ),
    ];
    for (name, spec) in &specs {
        std::fs::write(jobs.join(format!("{name}.json")), spec.to_string()).unwrap();
    }
    let batch = || env.batch(&jobs);
    let v = batch();
    assert_eq!(v["jobs"].as_array().unwrap().len(), 3, "{v}");
    let out = env.out.canonicalize().unwrap();
    assert_eq!(
        files_under(&env.out),
        [
            "books/book.m4b",
            "books/book.srt",
            "notes.vtt",
            "notes.wav",
            "talks/talk.mp4"
        ],
        "the outputs and nothing else (no stage folder, no manifest)"
    );
    let status = env.status(&[]);
    let files: Vec<Vec<String>> = status["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            assert_eq!(j["state"], "succeeded", "{j}");
            j["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    assert_eq!(f["sha256"].as_str().unwrap().len(), 64, "{f}");
                    f["path"].as_str().unwrap().to_owned()
                })
                .collect()
        })
        .collect();
    let at = |rel: &str| out.join(rel).display().to_string();
    let book_files = vec![at("books/book.m4b"), at("books/book.srt")];
    assert!(files.contains(&book_files), "{status}");

    if compare {
        let reference = env.path().join("reference");
        std::fs::create_dir(&reference).unwrap();
        let render = |args: &[&str]| {
            let o = env.run_plain("render", args);
            assert_success(&o);
        };
        let lexicon = inputs.join("names.json");
        let r = |name: &str| reference.join(name);
        render(&[
            s(&book),
            "-o",
            s(&r("book.m4b")),
            "--subtitles",
            "srt",
            "--lexicon",
            s(&lexicon),
            "--deterministic",
        ]);
        let seed = seed.to_string();
        render(&[
            s(&md),
            s(&portrait),
            "-o",
            s(&r("talk.mp4")),
            "--framing",
            "head",
            "--size",
            "128x128",
            "--fps",
            "10",
            "--preset",
            "ultrafast",
            "--seed",
            &seed,
            "--deterministic",
        ]);
        render(&[
            s(&notes),
            "-o",
            s(&r("notes.wav")),
            "--loudness",
            "off",
            "--subtitles",
            "vtt",
            "--deterministic",
        ]);
        for (job, reference) in [
            ("books/book.m4b", "book.m4b"),
            ("talks/talk.mp4", "talk.mp4"),
            ("notes.wav", "notes.wav"),
        ] {
            let (a, b) = (media_shape(&out.join(job)), media_shape(&r(reference)));
            assert_eq!(a, b, "{job}");
        }
        assert!(
            !media_shape(&r("book.m4b"))["chapters"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        let cues = std::fs::read_to_string(out.join("books/book.srt")).unwrap();
        assert!(cues.contains(" --> "), "{cues}");
        assert_eq!(cues, std::fs::read_to_string(r("book.srt")).unwrap());
        crashed_while_publishing(&env, &notes, &out);
    }

    // Edited book: only its job renders again. A lost sidecar: that job renders again too.
    std::fs::write(&notes, "Some edited notes.\n\nRead aloud.\n").unwrap();
    std::fs::remove_file(out.join("books/book.srt")).unwrap();
    let v = batch();
    assert_eq!(v["up_to_date"], 1, "{v}");
    let again: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            assert_eq!(j["state"], "succeeded", "{j}");
            j["output"].as_str().unwrap()
        })
        .collect();
    assert_eq!(again, [at("books/book.m4b"), at("notes.wav")]);
    assert!(out.join("books/book.srt").is_file());
    assert_eq!(batch()["up_to_date"], 3);
}

/// The files a worker killed between its two renames leaves: the edited notes' new WAV in
/// place, its VTT still staged, the old VTT beside the new WAV, and the manifest. (A kill cannot
/// be timed into the moment between two renames, so the test lays out what that kill leaves,
/// from a real render of the edited notes.) The next batch finishes that set first, says so,
/// and publishes a complete set of the edit; no stage folder or manifest is left.
fn crashed_while_publishing(env: &Env, notes: &Path, out: &Path) {
    std::fs::write(notes, "Some notes, edited.\n\nRead aloud.\n").unwrap();
    let fresh = env.path().join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    let o = env.run_plain(
        "render",
        &[
            s(notes),
            "-o",
            s(&fresh.join("notes.wav")),
            "--loudness",
            "off",
            "--subtitles",
            "vtt",
            "--deterministic",
        ],
    );
    assert_success(&o);
    let stage = out.join(".notes.wav.job9-0123456789abcdef.d");
    std::fs::create_dir(&stage).unwrap();
    let entry = |name: &str| {
        let staged = stage.join(name);
        std::fs::copy(fresh.join(name), &staged).unwrap();
        json!({"from": staged, "to": {
            "path": out.join(name),
            "bytes": std::fs::metadata(&staged).unwrap().len(),
            "sha256": talker::queue::spec::file_sha256(&staged).unwrap(),
        }})
    };
    let manifest = json!({"stage": stage, "moves": [entry("notes.wav"), entry("notes.vtt")]});
    std::fs::write(out.join(".notes.wav.publish"), manifest.to_string()).unwrap();
    std::fs::rename(stage.join("notes.wav"), out.join("notes.wav")).unwrap();
    let fresh_vtt = std::fs::read_to_string(fresh.join("notes.vtt")).unwrap();
    assert_ne!(
        std::fs::read_to_string(out.join("notes.vtt")).unwrap(),
        fresh_vtt,
        "a mixed set: the new WAV beside the old VTT"
    );

    let jobs = env.path().join("jobs");
    let mut args = vec!["--json", "--out-root", s(out), "--threads", "2"];
    args.extend(with_fast(&[]));
    args.push(s(&jobs));
    let o = env.run("batch", &args);
    assert_success(&o);
    let events = String::from_utf8_lossy(&o.stderr);
    assert!(
        events.contains("stopped while publishing its files"),
        "{events}"
    );
    assert_eq!(
        listing(out),
        ["books", "notes.vtt", "notes.wav", "talks"],
        "no stage folder or manifest left"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("notes.vtt")).unwrap(),
        fresh_vtt
    );
    assert_eq!(
        media_shape(&out.join("notes.wav")),
        media_shape(&fresh.join("notes.wav"))
    );
}

#[test]
fn sqlite_books_and_lectures_batch_like_render() {
    books_and_lectures(Backend::Sqlite, true);
}

#[test]
fn postgres_books_and_lectures_batch() {
    books_and_lectures(Backend::Postgres, false);
}

/// A video job needs a face and an audio job shows none: refused at enqueue (exit 2), naming
/// the spec file, the field and the fix, before anything is queued.
#[test]
fn specs_refuse_a_video_without_a_portrait_and_audio_with_one() {
    let env = Env::new(Backend::Sqlite);
    let md = env.path().join("talk.md");
    std::fs::write(&md, "# Hello\n\nOne line.\n").unwrap();
    let cases = [
        (
            "video.json",
            json!({"script": "talk.md", "output": "talk.mp4"}),
            "portrait: is missing; the output talk.mp4 is a video, which needs a face",
        ),
        (
            "audio.json",
            json!({"script": "talk.md", "portrait": repo("examples/portrait.png"), "output": "talk.m4b"}),
            "portrait: is not used: the output talk.m4b is audio only",
        ),
        (
            "lexicon.json",
            json!({"script": "talk.md", "output": "talk.m4b", "lexicon": ["a.json", "missing.json"]}),
            "lexicon[0]: ",
        ),
    ];
    for (name, spec, needle) in cases {
        let path = env.path().join(name);
        std::fs::write(&path, spec.to_string()).unwrap();
        let o = env.run("enqueue", &["--out-root", s(&env.out), s(&path)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("job spec {}: {needle}", path.display())),
            "{err}"
        );
    }
    assert!(!env.out.join("talk.mp4").exists());
}

/// A split job (`"split": "chapters"`) through `talker batch`: one file per chapter and its
/// subtitles published together in the job's directory, listed by `status --json`, and no stage
/// folder or manifest left; a second batch finds the set intact and renders nothing.
#[test]
fn a_split_job_publishes_every_chapter_file() {
    let env = Env::new(Backend::Sqlite);
    let jobs = env.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::fs::write(
        jobs.join("book.md"),
        "# One\n\nThe first line.\n\n# Two: A/B\n\nThe second line.\n",
    )
    .unwrap();
    let spec = json!({"script": "book.md", "output": "books/book", "format": "m4a",
                      "split": "chapters", "subtitles": "srt", "deterministic": true});
    std::fs::write(jobs.join("book.json"), spec.to_string()).unwrap();
    let batch = || env.batch(&jobs);
    let v = batch();
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1, "{v}");
    let names = [
        "books/book/01 - One.m4a",
        "books/book/01 - One.srt",
        "books/book/02 - Two_ A_B.m4a",
        "books/book/02 - Two_ A_B.srt",
    ];
    assert_eq!(files_under(&env.out), names);
    let out = env.out.canonicalize().unwrap();
    let status = env.status(&[]);
    let job = &status["jobs"][0];
    assert_eq!(job["state"], "succeeded", "{job}");
    let published: Vec<String> = job["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_owned())
        .collect();
    let expected: Vec<String> = names
        .iter()
        .map(|n| out.join(n).display().to_string())
        .collect();
    assert_eq!(published, expected, "{status}");
    let p = probe(&out.join(names[2]));
    assert_eq!(p["format"]["tags"]["track"], "2/2", "{p}");
    let before = std::fs::metadata(out.join(names[0]))
        .unwrap()
        .modified()
        .unwrap();
    batch();
    let after = std::fs::metadata(out.join(names[0]))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after, "an intact set is not rendered again");
    assert_eq!(files_under(&env.out), names);
}

/// The frame of a `slides` video at `at` seconds against its two slides letterboxed on black:
/// how far it is, away from the speaker's box, from the slide it should show and from the other.
fn off_the_slides(
    video: &Path,
    at: f64,
    slides: [&Path; 2],
    pip: talker::slides::PipBox,
) -> [f64; 2] {
    use crate::layouts::{frame_at, mean_diff};
    let (w, h) = (640, 360);
    let frame = frame_at(video, at, (w, h));
    let bars = image::RgbImage::new(w, h);
    let away = |x: u32, y: u32| {
        let m = 6;
        x + m < pip.x || x > pip.x + pip.w + m || y + m < pip.y || y > pip.y + pip.h + m
    };
    slides.map(|slide| {
        let slide = talker::slides::letterbox(&image::open(slide).unwrap().to_rgb8(), &bars);
        mean_diff(&frame, &slide, away)
    })
}

/// A `slides` job through `talker worker`: its slides are read relative to the script (not the
/// spec or the worker's directory); the published MP4 lasts as long as the speech and shows
/// each slide behind the speaker while its segment is spoken; an edited slide makes a new job
/// that renders only the chunk showing it; an output that is one of a script's slides is refused
/// at enqueue, since a worker would publish over it.
#[test]
fn a_slides_job_shows_its_slides_behind_the_speaker() {
    use talker::slides::{Corner, PipBox, PipSize};
    let env = Env::new(Backend::Sqlite);
    let (talk, jobs) = (env.path().join("talk"), env.path().join("jobs"));
    std::fs::create_dir_all(talk.join("slides")).unwrap();
    std::fs::create_dir(&jobs).unwrap();
    let (a, b) = (talk.join("slides/a.png"), talk.join("slides/b.png"));
    crate::layouts::draw_slide(&a, (800, 600), 20);
    crate::layouts::draw_slide(&b, (1600, 800), 220);
    write_script(
        &talk,
        "talk.json",
        r#"{"segments": [
            {"text": "Welcome to the lecture.", "slide": "slides/a.png"},
            {"text": "Here is the second slide.", "slide": "slides/b.png"}]}"#,
    );
    let spec = jobs.join("talk.json");
    let fields = json!({"script": "../talk/talk.json", "portrait": repo("examples/portrait.png"),
        "output": "lectures/talk.mp4", "layout": "slides", "pip": "top-right",
        "pip_size": 0.5, "size": [640, 360], "fps": 10, "seed": run_seed()});
    std::fs::write(&spec, fields.to_string()).unwrap();
    let run = || {
        let id = env.enqueue(std::slice::from_ref(&spec), &[])[0];
        let mut w = env.worker(&["--drain"]);
        assert_eq!(w.finish(Duration::from_secs(300)), 0, "the worker failed");
        let job = env.job(id);
        assert_eq!(job["state"], "succeeded", "{job}");
        (id, job["result"].clone())
    };
    let (first, report) = run();
    assert_eq!(
        (&report["chunks"], &report["chunks_reused"]),
        (&json!(2), &json!(0))
    );
    let out = env.out.join("lectures/talk.mp4");
    let p = probe(&out);
    let streams = p["streams"].as_array().unwrap();
    let video = streams.iter().find(|s| s["codec_type"] == "video").unwrap();
    assert_eq!(
        (&video["width"], &video["height"]),
        (&json!(640), &json!(360))
    );
    let seconds = report["audio_seconds"].as_f64().unwrap();
    let lasts: f64 = p["format"]["duration"].as_str().unwrap().parse().unwrap();
    assert!(
        (lasts - seconds).abs() < 0.1,
        "{lasts} s of video, {seconds} s of speech"
    );
    let size = PipSize::try_from(0.5).unwrap();
    let pip = PipBox::place((512, 512), (640, 360), Corner::TopRight, size);
    for (at, slides) in [(0.4, [&a, &b]), (seconds - 0.3, [&b, &a])] {
        let [near, far] = off_the_slides(&out, at, slides.map(|p| p.as_path()), pip);
        assert!(
            near < 3.0 && far > 8.0,
            "at {at:.1} s: off the slide by {near:.2}, the other by {far:.2}"
        );
    }

    crate::layouts::draw_slide(&a, (800, 600), 21);
    let (second, report) = run();
    assert_ne!(second, first, "an edited slide is a new job");
    assert_eq!(
        report["chunks_reused"], 1,
        "only the first chunk shows a.png: {report}"
    );

    std::fs::copy(&a, env.out.join("lectures/slide.mp4")).unwrap();
    write_script(
        &talk,
        "over.json",
        r#"{"segments": [{"text": "One.", "slide": "../out/lectures/slide.mp4"}]}"#,
    );
    let over = jobs.join("over.json");
    let fields = json!({"script": "../talk/over.json", "portrait": repo("examples/portrait.png"),
        "output": "lectures/slide.mp4", "layout": "slides"});
    std::fs::write(&over, fields.to_string()).unwrap();
    let o = env.run("enqueue", &["--out-root", s(&env.out), s(&over)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("output: ") && err.contains("is the slide"),
        "{err}"
    );
}
