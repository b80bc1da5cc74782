//! Hostile inputs and outputs through the real binary (issue 10): outputs that are inputs or not
//! regular files, FIFOs and devices as inputs, runaway tokens under a memory limit, signals in every
//! phase, metadata, presets, read-only and full disks, and how errors and warnings are printed.
//! Renders are tiny (128×128 head framing, 10 fps) so the module stays fast.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::*;

const HELLO: &str = r#"{"size": [128, 128], "segments": [{"text": "Hello."}]}"#;
const SMALL: &[&str] = &["--framing", "head", "--size", "128x128", "--fps", "10"];
/// Address space for runs under `prlimit --as`: a normal render of this module peaks at about
/// 0.7 GB of virtual memory (two threads); one voice call for a runaway input needed gigabytes.
const MEMORY_LIMIT: &str = "--as=1600000000";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn portrait() -> PathBuf {
    repo("examples/portrait.png")
}

/// Runs `c`, killing it and failing the test if it has not exited after `limit`.
fn run_within(mut c: Command, limit: Duration) -> Output {
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            // SAFETY: our own child, still running.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("still running after {limit:?} (blocked?)");
        }
    }
}

/// Expects exit 2 with `needle` on stderr, within a minute.
fn refused(c: Command, needle: &str) -> String {
    let o = run_within(c, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "expected exit 2: {err}");
    assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
    err
}

fn render(dir: &Path, script: &Path, portrait: &Path, out: &Path) -> Command {
    let mut c = talker(dir);
    c.arg("render")
        .arg(script)
        .arg(portrait)
        .arg("-o")
        .arg(out)
        .args(SMALL);
    c
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(s(p)).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

fn is_fifo(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_fifo())
}

#[test]
fn an_output_that_is_an_input_is_refused_however_it_is_spelled() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "s.json", HELLO);
    let face = d.join("face.png");
    std::fs::copy(portrait(), &face).unwrap();
    std::os::unix::fs::symlink(&script, d.join("link.mp4")).unwrap();
    std::fs::hard_link(&face, d.join("hard.mp4")).unwrap();
    let cases: [(&str, PathBuf, &str); 5] = [
        ("s.json", script.clone(), "is the script"),
        ("./s.json", script.clone(), "is the script"),
        ("face.png", face.clone(), "is the portrait"),
        ("link.mp4", script.clone(), "is the script"),
        ("hard.mp4", face.clone(), "is the portrait"),
    ];
    for (out, victim, needle) in cases {
        let before = std::fs::read(&victim).unwrap();
        let mut c = render(
            d,
            Path::new("s.json"),
            Path::new("face.png"),
            Path::new(out),
        );
        c.current_dir(d);
        refused(c, needle);
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            before,
            "-o {out} changed it"
        );
    }
    // The voice's files too: a voice beside the script, its config named as the output.
    let voice = default_voice();
    std::os::unix::fs::symlink(&voice.model, d.join("v.onnx")).unwrap();
    std::fs::copy(&voice.config, d.join("v.onnx.json")).unwrap();
    let before = std::fs::read(d.join("v.onnx.json")).unwrap();
    let mut c = render(d, &script, &face, &d.join("v.onnx.json"));
    c.args(["--voice", s(&d.join("v.onnx"))]);
    refused(c, "is the voice config");
    assert_eq!(std::fs::read(d.join("v.onnx.json")).unwrap(), before);
    // Preview writes a file as well.
    let mut c = talker(d);
    c.args(["preview", s(&script), s(&face), "-o", s(&face)]);
    refused(c, "is the portrait");
}

#[test]
fn only_regular_files_are_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "s.json", HELLO);
    let fifo = d.join("fifo.mp4");
    mkfifo(&fifo);
    refused(render(d, &script, &portrait(), &fifo), "FIFO");
    assert!(is_fifo(&fifo), "the FIFO is still there");
    refused(
        render(d, &script, &portrait(), Path::new("/dev/null")),
        "character device",
    );
    let meta = std::fs::metadata("/dev/null").unwrap();
    assert!(!meta.is_file(), "/dev/null is still a device");
    // A device node of one's own (as `mknod n c 1 3` makes), where the test may create one.
    let node = d.join("n");
    let c = std::ffi::CString::new(s(&node)).unwrap();
    // SAFETY: a valid path; makedev(1, 3) is /dev/null's device number.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) } == 0 {
        refused(render(d, &script, &portrait(), &node), "character device");
        assert!(!std::fs::metadata(&node).unwrap().is_file());
    }
}

#[test]
fn inputs_must_be_regular_files_and_small_enough() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "s.json", HELLO);
    let out = d.join("out.mp4");
    // A FIFO with no writer would block open() forever.
    let fifo = d.join("fifo.json");
    mkfifo(&fifo);
    refused(render(d, &fifo, &portrait(), &out), "FIFO");
    refused(render(d, &script, &fifo, &out), "FIFO");
    refused(render(d, &script, d, &out), "is a directory");
    // /dev/zero never ends: refused before a byte is read, under a memory limit.
    let mut c = Command::new("prlimit");
    c.arg(MEMORY_LIMIT)
        .arg(env!("CARGO_BIN_EXE_talker"))
        .env("TALKER_CACHE", d.join("cache"))
        .args(["render", "/dev/zero", s(&portrait()), "-o", s(&out)]);
    refused(c, "character device");
    // Over the documented cap (16 MiB), whatever the file says it is.
    let big = d.join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(17 << 20)
        .unwrap();
    refused(render(d, &big, &portrait(), &out), "larger than 16 MiB");
    assert!(!out.exists());
    // A script and a job spec that start with a UTF-8 byte order mark are fine.
    let bom = d.join("bom.json");
    std::fs::write(&bom, format!("\u{feff}{HELLO}")).unwrap();
    let o = run_within(render(d, &bom, &portrait(), &out), Duration::from_secs(300));
    assert_success(&o);
    let spec = d.join("job.json");
    let body = json!({"script": "bom.json", "portrait": portrait(), "output": "a.mp4"});
    std::fs::write(&spec, format!("\u{feff}{body}")).unwrap();
    let mut c = talker(d);
    c.args(["enqueue", "--queue", s(&d.join("q.sqlite"))])
        .args(["--out-root", s(&d.join("out"))])
        .arg(&spec);
    assert_success(&run_within(c, Duration::from_secs(60)));
    // Job specs are read the same way: a device or a FIFO is refused without blocking.
    for bad in [Path::new("/dev/zero"), fifo.as_path()] {
        let mut c = talker(d);
        c.args(["enqueue", "--queue", s(&d.join("q.sqlite"))])
            .args(["--out-root", s(&d.join("out"))])
            .arg(bad);
        refused(c, "not a regular file");
    }
}

#[test]
fn metadata_with_control_characters_is_refused_with_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("out.mp4");
    for (body, field) in [
        (
            json!({"title": "a\u{0}b", "segments": [{"text": "Hi."}]}),
            "title",
        ),
        (
            json!({"segments": [{"text": "Hi."}, {"text": "Ho.", "chapter": "x\u{7}"}]}),
            "segments[1].chapter",
        ),
    ] {
        let script = write_script(d, "m.json", &body.to_string());
        let err = refused(render(d, &script, &portrait(), &out), field);
        assert!(err.contains("control character"), "{err}");
    }
}

#[test]
fn bad_arguments_are_refused_before_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "s.json", HELLO);
    let out = d.join("out.mp4");
    let mut c = render(d, &script, &portrait(), &out);
    c.args(["--preset", "bogus"]);
    refused(c, "veryslow");
    // The size's shape, not the face, is what fails here: filled, the frame crops the face
    // away; fitted (the default for so wide a frame), it leaves a face too small to animate.
    for (layout, says) in [
        ("fill", "crops the face out"),
        ("fit", "leaves too small a face"),
    ] {
        let mut c = talker(d);
        c.args(["render", s(&script), s(&portrait()), "-o", s(&out)])
            .args(["--size", "4096x64", "--layout", layout]);
        refused(c, says);
        assert!(!out.exists());
    }
}

/// Runs talker inside a private mount namespace with a small tmpfs at `mnt` (`opts`: "ro" or a
/// size), as only root may; the mount vanishes with the process.
fn on_tmpfs(mnt: &Path, opts: &str, args: &[&str]) -> Command {
    std::fs::create_dir_all(mnt).unwrap();
    let mut c = Command::new("unshare");
    c.args(["-m", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o "$1" tmpfs "$2" && shift 2 && exec "$@""#)
        .args(["sh", opts, s(mnt), env!("CARGO_BIN_EXE_talker")])
        .args(args)
        .env_remove("RUST_LOG");
    c
}

#[test]
fn read_only_and_full_disks_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(
        d,
        "s.json",
        r#"{"segments": [{"text": "This sentence is long enough that its video chunk does not fit on a tiny disk."}]}"#,
    );
    let mnt = d.join("mnt");
    let face = portrait();
    let args = |out: &Path, cache: &Path| -> Vec<String> {
        let base = [
            "render",
            s(&script),
            s(&face),
            "-o",
            s(out),
            "--cache",
            s(cache),
        ];
        base.iter().chain(SMALL).map(|a| a.to_string()).collect()
    };
    let a = args(&mnt.join("out.mp4"), &d.join("cache"));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let err = refused(on_tmpfs(&mnt, "ro", &a), "is not writable");
    assert!(!err.contains("phonemes"), "refused before work: {err}");
    // The chunks fill a 250 KB cache disk: the message names the device, not a chunk file.
    let out = d.join("out.mp4");
    let a = args(&out, &mnt.join("c"));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = run_within(on_tmpfs(&mnt, "size=250k", &a), Duration::from_secs(300));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let device = format!(
        "talker: no space left on the device holding {}",
        mnt.join("c").display()
    );
    assert!(err.contains(&device), "{err}");
    assert!(!out.exists());
}

#[test]
fn errors_and_warnings_are_printed_once_and_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bad = write_script(
        d,
        "bad.json",
        r#"{"segments": [{"text": "hi", "pause": 1}]}"#,
    );
    let out = d.join("out.mp4");
    let err = refused(render(d, &bad, &portrait(), &out), "did you mean");
    assert_eq!(err.matches("did you mean").count(), 1, "said once: {err}");
    assert!(!err.contains("caused by"), "{err}");

    // A damaged cache database is moved aside with a warning: plain text on a pipe (no ANSI
    // colour codes), JSON events with --json.
    let script = write_script(d, "s.json", HELLO);
    let damage = |cache: &Path| {
        std::fs::create_dir_all(cache).unwrap();
        std::fs::write(cache.join("cache.sqlite"), vec![0x5a; 8192]).unwrap();
    };
    let cache = d.join("c1");
    damage(&cache);
    let mut c = render(d, &script, &portrait(), &out);
    c.env("TALKER_CACHE", &cache);
    let o = run_within(c, Duration::from_secs(300));
    assert_success(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.to_lowercase().contains("warn"), "a warning: {err}");
    assert!(!err.contains('\u{1b}'), "no colour on a pipe: {err:?}");

    let cache = d.join("c2");
    damage(&cache);
    let mut c = render(d, &script, &portrait(), &out);
    // At debug level ONNX Runtime's own log lines come too: as JSON events like the rest.
    c.env("TALKER_CACHE", &cache)
        .env("RUST_LOG", "debug")
        .arg("--json");
    let o = run_within(c, Duration::from_secs(300));
    assert_success(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    let events: Vec<Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l:?}")))
        .collect();
    assert!(
        events.iter().any(|e| e["event"] == "warning"),
        "the warning is an event: {err}"
    );
    assert!(
        events.iter().any(|e| e["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("onnxruntime: "))),
        "ONNX Runtime logs through the same events: {err}"
    );
}

/// A render whose JSON progress events (stderr) are collected as they come.
struct Watched {
    child: Child,
    events: Arc<Mutex<Vec<Value>>>,
    started: Instant,
}

impl Watched {
    fn spawn(mut c: Command) -> Watched {
        let mut child = c
            .arg("--json")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&line).unwrap_or_else(|_| json!({"line": line}));
                sink.lock().unwrap().push(v);
            }
        });
        Watched {
            child,
            events,
            started: Instant::now(),
        }
    }

    /// Waits (at most 5 minutes) for an event with `event` and `stage`.
    fn wait_for(&mut self, event: &str, stage: &str) {
        loop {
            let seen = self
                .events
                .lock()
                .unwrap()
                .iter()
                .any(|e| e["event"] == event && e["stage"] == stage);
            if seen {
                return;
            }
            let exited = self.child.try_wait().unwrap();
            assert!(
                exited.is_none() && self.started.elapsed() < Duration::from_secs(300),
                "no {event} {stage} (exited: {exited:?}): {:?}",
                self.events.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn saw(&self, event: &str, stage: &str) -> bool {
        self.events
            .lock()
            .unwrap()
            .iter()
            .any(|e| e["event"] == event && e["stage"] == stage)
    }

    /// Sends `sig` and returns the exit code and how long the process took to exit.
    fn stop(&mut self, sig: i32) -> (Option<i32>, Duration) {
        // SAFETY: our own child, still running.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
        let t = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return (st.code(), t.elapsed());
            }
            if t.elapsed() > Duration::from_secs(60) {
                let _ = self.child.kill();
                panic!("still running a minute after the signal");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SIGINT/SIGTERM stop a render within a few seconds in planning, speech and frames (each phase
/// has far more work left than that), exit 130 and leave no output. Planning is a 20,000-segment
/// script (about 1.7 MB; it takes much longer than the bound to plan).
#[test]
fn signals_stop_every_phase() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let segments: Vec<Value> = (0..20_000)
        .map(|i| json!({"text": format!("Sentence {i} is here, and it says a few words about the weather.")}))
        .collect();
    let big = write_script(d, "big.json", &json!({"segments": segments}).to_string());
    let out = d.join("out.mp4");
    let bound = Duration::from_secs(5);
    for (phase, sig) in [
        ("planning", libc::SIGINT),
        ("speech", libc::SIGTERM),
        ("frames", libc::SIGTERM),
    ] {
        let mut c = render(d, &big, &portrait(), &out);
        c.args(["--no-cache", "--threads", "1"]);
        let mut r = Watched::spawn(c);
        match phase {
            "planning" => {
                r.wait_for("start", "phonemes");
                std::thread::sleep(Duration::from_millis(500));
                assert!(!r.saw("finish", "phonemes"), "still planning");
            }
            "speech" => {
                r.wait_for("start", "speech");
            }
            _ => r.wait_for("advance", "frames"),
        }
        let (code, took) = r.stop(sig);
        assert_eq!(code, Some(130), "{phase}: {:?}", r.events.lock().unwrap());
        assert!(took < bound, "{phase}: took {took:?} to stop");
        assert!(!out.exists(), "{phase}: no output");
        let left: Vec<String> = listing(d)
            .into_iter()
            .filter(|f| f.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{phase}: left {left:?}");
    }
}

/// An audio-only render of a long book speaks on under `prlimit --as` with its speech asked for
/// ahead (the budget's bound itself is the unit test `speech_asked_for_ahead_stays_near_the_budget
/// _whatever_the_length`), and SIGTERM stops both its threads (speech, measuring) with exit 130
/// and no output.
#[test]
fn a_long_audiobook_speaks_within_a_memory_limit_and_stops_on_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let segments: Vec<Value> = (0..3_000)
        .map(|i| json!({"text": format!("Chapter line {i} tells of the long road north, and of the rain.")}))
        .collect();
    let book = write_script(d, "book.json", &json!({"segments": segments}).to_string());
    let out = d.join("book.m4b");
    let mut c = Command::new("prlimit");
    c.arg(MEMORY_LIMIT)
        .arg(env!("CARGO_BIN_EXE_talker"))
        .env("TALKER_CACHE", d.join("cache"))
        .env_remove("RUST_LOG")
        .args(["render", s(&book), "-o", s(&out), "--threads", "2"]);
    let mut r = Watched::spawn(c);
    r.wait_for("advance", "speech");
    std::thread::sleep(Duration::from_secs(3));
    let (code, took) = r.stop(libc::SIGTERM);
    assert_eq!(code, Some(130), "{:?}", r.events.lock().unwrap());
    assert!(took < Duration::from_secs(5), "took {took:?} to stop");
    assert!(!out.exists(), "no output");
}

/// Words and numbers no voice can say in one breath are cut into pieces of at most about 7 s
/// (the README's bound), so memory stays bounded: each runs under `prlimit --as`, where one call
/// for the whole token would fail.
#[test]
fn long_tokens_and_numbers_are_spoken_in_bounded_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let limited = |script: &Path, out: &Path| {
        let mut c = Command::new("prlimit");
        c.arg(MEMORY_LIMIT)
            .arg(env!("CARGO_BIN_EXE_talker"))
            .env("TALKER_CACHE", d.join("cache"))
            .env_remove("RUST_LOG")
            .args(["render", s(script), s(&portrait()), "-o", s(out)])
            .args(SMALL)
            .args(["--threads", "2"]);
        c
    };
    // Seven 15-digit numbers: 15 characters each, over 100 spoken.
    let numbers = write_script(
        d,
        "numbers.json",
        &json!({"segments": [{"text": "999999999999999 ".repeat(7)}]}).to_string(),
    );
    let out = d.join("numbers.mp4");
    let mut c = limited(&numbers, &out);
    c.arg("--json");
    let o = run_within(c, Duration::from_secs(300));
    assert_success(&o);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let per_call =
        report["audio_seconds"].as_f64().unwrap() / report["utterances"].as_f64().unwrap();
    assert!(per_call < 8.0, "{per_call:.1} s per voice call: {report}");

    // One word of 100,000 letters, 3,000 digits, 1,000 characters of base64: each keeps
    // rendering within the limit (stopped once it has been speaking for a while).
    let b64: String = (0..1000)
        .map(|i: u32| {
            let c = b"Aq9Zx+/3mK"[(i.wrapping_mul(7919) % 10) as usize];
            c as char
        })
        .collect();
    for (name, text) in [
        ("letters", "a".repeat(100_000)),
        ("digits", "7".repeat(3000)),
        ("base64", b64),
    ] {
        let script = write_script(
            d,
            &format!("{name}.json"),
            &json!({"segments": [{"text": text}]}).to_string(),
        );
        let out = d.join(format!("{name}.mp4"));
        let mut r = Watched::spawn(limited(&script, &out));
        r.wait_for("start", "speech");
        std::thread::sleep(Duration::from_secs(4));
        let (code, _) = r.stop(libc::SIGTERM);
        assert_eq!(
            code,
            Some(130),
            "{name}: stopped by the signal, not by memory: {:?}",
            r.events.lock().unwrap()
        );
    }
}

#[test]
fn the_queue_refuses_what_can_never_render_and_fails_bad_input_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let queue = d.join("q.sqlite");
    let root = d.join("out");
    let script = write_script(d, "s.json", HELLO);
    let q = |args: &[&str]| -> Command {
        let mut c = talker(d);
        c.args(args).args(["--queue", s(&queue)]);
        c
    };
    let spec = |name: &str, body: Value| -> PathBuf {
        let p = d.join(name);
        std::fs::write(&p, body.to_string()).unwrap();
        p
    };
    // A portrait without a face is refused at enqueue time, like a bad script.
    let img = image::open(portrait()).unwrap().to_rgb8();
    let flag = d.join("flag.png");
    image::imageops::crop_imm(&img, 0, 0, 120, 300)
        .to_image()
        .save(&flag)
        .unwrap();
    let noface = spec(
        "noface.json",
        json!({"script": "s.json", "portrait": "flag.png", "output": "a.mp4"}),
    );
    let mut c = q(&["enqueue", "--out-root", s(&root)]);
    c.arg(&noface);
    let err = refused(c, "no face found");
    assert!(
        err.contains("noface.json") && err.contains("portrait"),
        "{err}"
    );
    // An output that is an input (a script named like an MP4) is refused too.
    std::fs::copy(&script, d.join("x.mp4")).unwrap();
    let clash = spec(
        "clash.json",
        json!({"script": "x.mp4", "portrait": portrait(), "output": "x.mp4"}),
    );
    let mut c = q(&["enqueue", "--out-root", s(d)]);
    c.arg(&clash);
    refused(c, "is the script");

    // A portrait that loses its face after enqueue fails on its first attempt, not its fifth.
    let face = d.join("face.png");
    std::fs::copy(portrait(), &face).unwrap();
    let job = spec(
        "job.json",
        json!({"script": "s.json", "portrait": "face.png", "output": "a.mp4",
               "framing": "head", "size": [128, 128], "fps": 10}),
    );
    let mut c = q(&["enqueue", "--json", "--out-root", s(&root)]);
    c.arg(&job);
    let o = run_within(c, Duration::from_secs(60));
    assert_success(&o);
    let id = serde_json::from_slice::<Value>(&o.stdout).unwrap()[0]["id"]
        .as_i64()
        .unwrap();
    std::fs::copy(&flag, &face).unwrap();
    let mut c = q(&["worker", "--drain", "--out-root", s(&root), "--poll", "0.1"]);
    c.args(["--backoff-base", "0.05", "--backoff-cap", "0.1"]);
    assert_success(&run_within(c, Duration::from_secs(300)));
    let o = run_within(
        q(&["status", "--json", &id.to_string()]),
        Duration::from_secs(60),
    );
    assert_success(&o);
    let row = &serde_json::from_slice::<Value>(&o.stdout).unwrap()["jobs"][0];
    assert_eq!(row["state"], "failed", "{row}");
    assert_eq!(row["attempts"], 1, "{row}");
    let error = row["last_error"].as_str().unwrap();
    assert!(error.contains("no face found"), "{row}");
    assert_eq!(
        error.matches("no face found").count(),
        1,
        "said once: {error}"
    );
    // After a fix, retry works.
    std::fs::copy(portrait(), &face).unwrap();
    assert_success(&run_within(
        q(&["retry", &id.to_string()]),
        Duration::from_secs(60),
    ));
    let mut c = q(&["worker", "--drain", "--out-root", s(&root), "--poll", "0.1"]);
    c.arg("--threads").arg("1");
    assert_success(&run_within(c, Duration::from_secs(300)));
    assert!(root.join("a.mp4").is_file());
}
