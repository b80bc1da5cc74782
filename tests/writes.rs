//! Every file talker writes goes through the output guards before any work (issue 20): subtitle
//! sidecars, lexicons a script names, the cache's own files, paths that name directories, and
//! `script convert --force`; a cache written by a newer talker is left alone, and `cache gc`
//! beside a running render removes nothing it uses.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::util::*;

const HELLO: &str = r#"{"size": [128, 128], "segments": [{"text": "Hello."}]}"#;
const SMALL: &[&str] = &["--framing", "head", "--size", "128x128", "--fps", "10"];

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs `c`, expects exit 2 with every one of `needles` on stderr, and returns stderr.
fn refused(mut c: Command, needles: &[&str]) -> String {
    let o = c.stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "expected exit 2: {err}");
    for needle in needles {
        assert!(err.contains(needle), "expected {needle:?} in:\n{err}");
    }
    err
}

fn render(dir: &Path, script: &Path, out: &str) -> Command {
    let mut c = talker(dir);
    c.current_dir(dir)
        .arg("render")
        .arg(script)
        .arg(repo("examples/portrait.png"))
        .args(["-o", out])
        .args(SMALL);
    c
}

#[test]
fn sidecars_lexicons_and_the_cache_are_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A script named like the sidecar its render would write.
    let srt_script = write_script(d, "talk.srt", HELLO);
    let mut c = render(d, &srt_script, "talk.mp4");
    c.args(["--subtitles", "srt"]);
    refused(c, &["subtitles file talk.srt", "is the script"]);
    assert_eq!(std::fs::read_to_string(&srt_script).unwrap(), HELLO);
    assert!(!d.join("talk.mp4").exists(), "refused before any work");

    // The sidecar would be the output itself.
    let script = write_script(d, "s.json", HELLO);
    let mut c = render(d, &script, "out.srt");
    c.args(["--subtitles", "srt"]);
    refused(c, &["out.srt", "the output itself"]);
    assert!(!d.join("out.srt").exists());

    // A sidecar path that is a directory, and an output that names one, fail before any work.
    std::fs::create_dir(d.join("clip.vtt")).unwrap();
    let mut c = render(d, &script, "clip.mp4");
    c.args(["--subtitles", "vtt"]);
    refused(c, &["subtitles file clip.vtt", "a directory"]);
    assert!(!d.join("clip.mp4").exists());
    refused(
        render(d, &script, "x.mp4/"),
        &["x.mp4/", "names a directory"],
    );
    refused(render(d, &script, "sub/."), &["names a directory"]);

    // A lexicon that the script names (not given on the command line) is an input too.
    std::fs::write(d.join("lex.json"), r#"{"Hello": "hullo"}"#).unwrap();
    let named = write_script(
        d,
        "named.json",
        r#"{"lexicon": "lex.json", "segments": [{"text": "Hello."}]}"#,
    );
    refused(
        render(d, &named, "lex.json"),
        &["lex.json", "is the lexicon the script names"],
    );
    assert_eq!(
        std::fs::read_to_string(d.join("lex.json")).unwrap(),
        r#"{"Hello": "hullo"}"#
    );

    // The cache's database and everything else in its directory, for videos and audio alike.
    let o = talker(d).args(["cache", "stats"]).output().unwrap();
    assert_success(&o);
    let db = d.join("cache/cache.sqlite");
    let before = std::fs::read(&db).unwrap();
    refused(
        render(d, &script, s(&db)),
        &["cache.sqlite", "inside the cache directory"],
    );
    let mut c = talker(d);
    c.args(["render", s(&script), "-o", "cache/talk.wav"])
        .current_dir(d);
    refused(c, &["inside the cache directory"]);
    let mut c = render(d, &script, s(&d.join("cache/../cache/chunks/x.mp4")));
    c.args(["--cache", s(&d.join("cache")), "--subtitles", "srt"]);
    refused(c, &["inside the cache directory"]);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the cache is untouched"
    );
}

#[test]
fn script_convert_force_replaces_only_regular_files_that_are_not_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = d.join("book.md");
    let text = "# One\n\nA first paragraph.\n";
    std::fs::write(&book, text).unwrap();
    let convert = |out: &str, force: bool| {
        let mut c = talker(d);
        c.current_dir(d)
            .args(["script", "convert", "book.md", "-o", out]);
        if force {
            c.arg("--force");
        }
        c
    };
    refused(convert("book.md", true), &["book.md", "is the input"]);
    assert_eq!(std::fs::read_to_string(&book).unwrap(), text);
    let fifo = d.join("fifo");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    refused(convert("fifo", true), &["fifo", "FIFO"]);
    assert!(!std::fs::metadata(&fifo).unwrap().is_file());
    refused(
        convert("/dev/null", true),
        &["/dev/null", "character device"],
    );
    assert!(!std::fs::metadata("/dev/null").unwrap().is_file());
    refused(convert(".", true), &["output .", "names a directory"]);
    std::fs::create_dir(d.join("folder")).unwrap();
    refused(convert("folder", true), &["folder", "a directory"]);
    refused(convert("nodir/x.json", false), &["nodir", "does not exist"]);

    // A regular file that is no input: refused without --force, replaced with it.
    std::fs::write(d.join("s.json"), "old").unwrap();
    refused(convert("s.json", false), &["s.json exists", "--force"]);
    assert_success(&convert("s.json", true).output().unwrap());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(d.join("s.json")).unwrap())
        .expect("a JSON script");
    assert_eq!(v["segments"][0]["text"], "One");

    // The lexicon a JSON script names is an input of the conversion as well.
    std::fs::write(d.join("lex.json"), r#"{"One": "won"}"#).unwrap();
    write_script(
        d,
        "named.json",
        r#"{"lexicon": "lex.json", "segments": [{"text": "One."}]}"#,
    );
    let mut c = talker(d);
    c.current_dir(d).args([
        "script",
        "convert",
        "named.json",
        "-o",
        "lex.json",
        "--force",
    ]);
    refused(c, &["lex.json", "lexicon the input names"]);
    assert_eq!(
        std::fs::read_to_string(d.join("lex.json")).unwrap(),
        r#"{"One": "won"}"#
    );
}

#[test]
fn a_cache_from_a_newer_talker_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_success(&talker(d).args(["cache", "stats"]).output().unwrap());
    let db = d.join("cache/cache.sqlite");
    let o = Command::new("sqlite3")
        .arg(&db)
        .arg(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (99, 'from the future', 1, x'00', 0);",
        )
        .output()
        .expect("sqlite3 is installed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for args in [["cache", "stats"], ["cache", "gc"]] {
        let mut c = talker(d);
        c.args(args);
        if args[1] == "gc" {
            c.args(["--max-size", "0"]);
        }
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        for needle in ["newer talker", "schema version 99", "up to 2"] {
            assert!(err.contains(needle), "{args:?}: {needle:?} in {err}");
        }
    }
    // A render still works (on a temporary cache, with the same words as a warning).
    let script = write_script(d, "s.json", HELLO);
    let o = render(d, &script, "talk.mp4").output().unwrap();
    assert_success(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("newer talker"));
    let names: Vec<String> = listing(&d.join("cache"));
    assert!(
        !names.iter().any(|n| n.contains("broken")),
        "nothing moved aside: {names:?}"
    );
    let o = Command::new("sqlite3")
        .arg(&db)
        .arg("SELECT max(version) FROM _sqlx_migrations")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "99");
}

/// Two cached sentences, then twelve new ones in one segment: a render of it reuses what the
/// first render cached, then spends seconds on speech.
const GC_SHORT: &str = r#"{"segments": [{"text": "The first part is short and already cached."},
        {"text": "The second part is cached as well, from the render before."}]}"#;

fn gc_longer() -> String {
    let long: Vec<String> = (0..12)
        .map(|i| format!("This is new sentence number {i}, which nobody has spoken before."))
        .collect();
    GC_SHORT.replace("]}", &format!(r#", {{"text": "{}"}}]}}"#, long.join(" ")))
}

/// Starts `render` (with `--json`), reads its events until speech starts, then runs
/// `cache gc --max-size 0` and returns its report, the render, the events seen and the rest.
fn gc_while_rendering(d: &Path, mut render: Command) -> (Value, std::process::Child, Vec<String>) {
    let mut child = render
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut events = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in events.by_ref() {
        let line = line.unwrap();
        seen.push(line.clone());
        let v: Value = serde_json::from_str(&line).unwrap_or_default();
        if v["event"] == "start" && v["stage"] == "speech" {
            break;
        }
    }
    let o = talker(d)
        .args(["cache", "gc", "--json", "--max-size", "0"])
        .output()
        .unwrap();
    assert_success(&o);
    let gc: Value = serde_json::from_slice(&o.stdout).unwrap();
    seen.extend(events.map_while(std::result::Result::ok));
    (gc, child, seen)
}

/// `cache gc` while a render runs: the chunks and phrases that render looked up and uses stay,
/// so it still assembles; once it has finished, gc removes them.
#[test]
fn cache_gc_beside_a_running_render_keeps_what_it_uses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cache = d.join("cache");
    let script_a = write_script(d, "a.json", GC_SHORT);
    let report = render_json(d, &script_a, &d.join("a.mp4"), SMALL);
    assert_eq!(report["chunks"], 2, "{report}");

    // The same two segments, then a long new one: the render reuses both chunks, then spends
    // seconds on speech, and gc runs meanwhile.
    let script_b = write_script(d, "b.json", &gc_longer());
    let mut render = talker(d);
    render
        .args(["render", "--json", "--threads", "1", "-o"])
        .arg(d.join("b.mp4"))
        .arg(&script_b)
        .arg(repo("examples/portrait.png"))
        .args(SMALL);
    let (gc, mut child, seen) = gc_while_rendering(d, render);
    assert!(
        gc["kept_in_use"].as_u64().unwrap() >= 2,
        "the reused chunks (and their phrases) are kept: {gc}\n{seen:?}"
    );
    assert_eq!(gc["removed_chunks"], 0, "{gc}");
    let status = child.wait().unwrap();
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(status.success(), "the render survives gc: {seen:?}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["chunks_reused"], 2, "{report}");
    assert!(d.join("b.mp4").is_file());

    // Nobody holds anything now: everything goes.
    let o = talker(d)
        .args(["cache", "gc", "--json", "--max-size", "0"])
        .output()
        .unwrap();
    assert_success(&o);
    let gc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (gc["kept_in_use"].as_u64(), gc["bytes_after"].as_u64()),
        (Some(0), Some(0)),
        "{gc}"
    );
    assert!(
        files_under(&cache.join("holds")).is_empty(),
        "no hold is left behind"
    );
}

/// An audio-only render reads its speech back from the cache in a second pass: a `cache gc`
/// during its first pass must leave every phrase it holds, so the second pass finds them.
#[test]
fn cache_gc_beside_a_running_m4b_render_keeps_its_phrases() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script_a = write_script(d, "a.json", GC_SHORT);
    let o = talker(d)
        .args(["render", "--quiet", "-o"])
        .arg(d.join("a.m4b"))
        .arg(&script_a)
        .output()
        .unwrap();
    assert_success(&o);
    let script_b = write_script(d, "b.json", &gc_longer());
    let mut render = talker(d);
    render
        .args(["render", "--json", "--threads", "1", "-o"])
        .arg(d.join("b.m4b"))
        .arg(&script_b);
    let (gc, mut child, seen) = gc_while_rendering(d, render);
    assert!(
        gc["kept_in_use"].as_u64().unwrap() >= 2,
        "the cached phrases the render uses are kept: {gc}\n{seen:?}"
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "the render survives gc: {seen:?}");
    let probe = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_entries",
            "format=duration",
            "-of",
            "csv=p=0",
        ])
        .arg(d.join("b.m4b"))
        .output()
        .unwrap();
    let seconds: f64 = String::from_utf8_lossy(&probe.stdout)
        .trim()
        .parse()
        .unwrap();
    assert!(
        seconds > 20.0,
        "all fourteen sentences are in the book: {seconds} s"
    );
}

/// Another process holding the cache database's write lock (a shell's open transaction): a
/// render neither stalls nor prints sqlx's own lines; it reuses the cache read-only, says so, and
/// `cache gc` refuses plainly.
#[test]
fn a_locked_cache_is_reused_read_only() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "s.json", HELLO);
    render_json(d, &script, &d.join("first.mp4"), SMALL);
    let mut shell = Command::new("sqlite3")
        .arg(d.join("cache/cache.sqlite"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sqlite3 is installed");
    let mut input = shell.stdin.take().unwrap();
    input
        .write_all(b"BEGIN IMMEDIATE; UPDATE counters SET value = value; SELECT 'held';\n")
        .unwrap();
    let mut held = String::new();
    BufReader::new(shell.stdout.take().unwrap())
        .read_line(&mut held)
        .unwrap();
    assert_eq!(held.trim(), "held");

    let t = std::time::Instant::now();
    let o = render(d, &script, "again.mp4").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_success(&o);
    assert!(
        t.elapsed().as_secs() < 20,
        "no 30 s stall: {:?}",
        t.elapsed()
    );
    assert!(err.contains("locked by another process"), "{err}");
    assert!(
        !err.contains("slow statement") && !err.contains("sqlx"),
        "{err}"
    );
    let streams = probe(&d.join("again.mp4"))["streams"].clone();
    assert!(
        streams
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["codec_name"] == "h264"),
        "{streams}"
    );
    let o = talker(d)
        .args(["cache", "gc", "--max-size", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("locked by another process"), "{err}");
    input.write_all(b"ROLLBACK;\n").unwrap();
    drop(input);
    assert!(shell.wait().unwrap().success());
}

/// `talker engine build` run outside the repository reads its bundled ids and writes into the
/// cache's engines/, where `render` looks; without a GPU it stops at the GPU, not at a file.
#[cfg(feature = "cuda")]
#[test]
fn engine_build_defaults_to_what_render_uses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = talker(d)
        .current_dir(d)
        .args(["engine", "build", "--precision", "fp16"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("ids.json"), "the bundled ids are used: {err}");
    assert!(
        !d.join("engines").exists(),
        "nothing written beside the cwd"
    );
    if o.status.success() {
        let built = listing(&d.join("cache/engines"));
        assert!(built.iter().any(|f| f.ends_with(".engine")), "{built:?}");
    } else {
        assert_eq!(o.status.code(), Some(1), "no GPU here: {err}");
    }
}
