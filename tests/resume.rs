//! kill -9 in the middle of a render: nothing corrupt is left, and the rerun reuses finished work.

use std::time::{Duration, Instant};

use crate::util::*;

fn finished_chunks(cache: &std::path::Path) -> usize {
    let Ok(dirs) = std::fs::read_dir(cache.join("chunks")) else {
        return 0;
    };
    dirs.flatten()
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flat_map(|files| files.flatten())
        .filter(|f| {
            f.file_name().to_string_lossy().ends_with(".mkv")
                && !f.file_name().to_string_lossy().starts_with('.')
        })
        .count()
}

#[test]
fn killed_render_leaves_nothing_half_written_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lecture.mp4");
    let args = ["--framing", "head", "--size", "160x160", "--deterministic"];
    let mut child = talker(dir.path())
        .args(["render", "--quiet", "-o"])
        .arg(&out)
        .arg(repo("examples/lecture.json"))
        .arg(repo("examples/portrait.png"))
        .args(args)
        .spawn()
        .unwrap();
    let cache = dir.path().join("cache");
    let start = Instant::now();
    while finished_chunks(&cache) < 2 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the render ended before it could be killed"
        );
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no chunk finished in 5 minutes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The kill may land between a chunk file's rename and its row: the rerun adopts that file.
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let done_before = finished_chunks(&cache);
    assert!(!out.exists(), "no output after a kill before assembly");
    assert!(
        listing(dir.path()).iter().all(|f| !f.contains("partial")),
        "{:?}",
        listing(dir.path())
    );

    let report = render_json(dir.path(), &repo("examples/lecture.json"), &out, &args);
    let reused = report["chunks_reused"].as_u64().unwrap();
    println!(
        "resumed: {reused} of {} chunks reused, {} sentences synthesised again",
        report["chunks"], report["speech"]["synthesized"]
    );
    assert!(
        reused >= done_before as u64,
        "reused {reused}, {done_before} were finished"
    );
    assert!(
        reused < report["chunks"].as_u64().unwrap(),
        "the kill left work to do"
    );
    let p = probe(&out);
    let video = p["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["codec_type"] == "video")
        .unwrap()
        .clone();
    let vd: f64 = video["duration"].as_str().unwrap().parse().unwrap();
    assert!((vd - report["audio_seconds"].as_f64().unwrap()).abs() < 0.04);
}

#[test]
fn sigterm_stops_a_render_cleanly_with_exit_130() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lecture.mp4");
    let mut child = talker(dir.path())
        .args(["render", "--quiet", "-o"])
        .arg(&out)
        .arg(repo("examples/lecture.json"))
        .arg(repo("examples/portrait.png"))
        .args(["--framing", "head", "--size", "160x160"])
        .spawn()
        .unwrap();
    let cache = dir.path().join("cache");
    let start = Instant::now();
    while finished_chunks(&cache) < 1 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the render ended before the signal"
        );
        assert!(start.elapsed() < Duration::from_secs(300));
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(130));
    assert!(!out.exists());
    let leftovers: Vec<String> = std::fs::read_dir(cache.join("chunks"))
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn sigterm_during_assembly_stops_at_once_with_exit_130_and_no_output() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    // Thousands of chunks (one per segment) but only a few distinct ones to render: the time
    // goes to assembly.
    let segments = vec![r#"{"text":"Hi.","pause_ms":0}"#; 3000].join(",");
    let script = write_script(
        dir.path(),
        "many.json",
        &format!(r#"{{"segments":[{segments}]}}"#),
    );
    let out = dir.path().join("many.mp4");
    let mut child = talker(dir.path())
        .args(["render", "--json", "--threads", "1", "-o"])
        .arg(&out)
        .arg(&script)
        .arg(repo("examples/portrait.png"))
        .args(["--framing", "head", "--size", "128x128", "--fps", "10"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut lines = stderr.lines();
    let assembling = lines.by_ref().map_while(Result::ok).any(|l| {
        let v: serde_json::Value = serde_json::from_str(&l).unwrap_or_default();
        v["event"] == "start" && v["stage"] == "assemble"
    });
    assert!(assembling, "the render never reached assembly");
    let signalled = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // Drain stderr so the child never blocks on a full pipe.
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let code = child.wait().unwrap().code();
    let took = signalled.elapsed();
    assert_eq!(code, Some(130), "{rest:?}");
    println!("stopped {took:?} after SIGTERM during assembly");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(!out.exists(), "no output after a stop");
    assert!(
        listing(dir.path()).iter().all(|f| !f.contains("partial")),
        "{:?}",
        listing(dir.path())
    );
}

/// Drops every chunk row, as a kill between a chunk's rename and its row would.
fn forget_chunk_rows(cache: &std::path::Path) {
    let o = std::process::Command::new("sqlite3")
        .arg(cache.join("cache.sqlite"))
        .arg("DELETE FROM chunks;")
        .output()
        .expect("the sqlite3 CLI is needed for this test");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn finished_chunks_without_rows_are_adopted_and_damaged_ones_rendered_again() {
    let dir = tempfile::tempdir().unwrap();
    let script = repo("examples/lecture.json");
    let args = ["--framing", "head", "--size", "160x160", "--deterministic"];
    let first = dir.path().join("first.mp4");
    let report = render_json(dir.path(), &script, &first, &args);
    let chunks = report["chunks"].as_u64().unwrap();
    let cache = dir.path().join("cache");

    forget_chunk_rows(&cache);
    let adopted = dir.path().join("adopted.mp4");
    let report = render_json(dir.path(), &script, &adopted, &args);
    assert_eq!(report["chunks_reused"].as_u64(), Some(chunks), "{report}");
    assert_eq!(
        std::fs::read(&first).unwrap(),
        std::fs::read(&adopted).unwrap()
    );

    // A rowless file cut short (which a kill cannot leave, but a disk can) is not adopted.
    forget_chunk_rows(&cache);
    let files: Vec<_> = files_under(&cache.join("chunks"))
        .into_iter()
        .filter(|f| f.ends_with(".mkv") && !f.contains("/."))
        .collect();
    let cut = &cache.join("chunks").join(&files[0]);
    let len = std::fs::metadata(cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(cut)
        .unwrap()
        .set_len(len * 2 / 3)
        .unwrap();
    let again = dir.path().join("again.mp4");
    let report = render_json(dir.path(), &script, &again, &args);
    assert_eq!(
        report["chunks_reused"].as_u64(),
        Some(chunks - 1),
        "{report}"
    );
    assert_eq!(
        std::fs::read(&first).unwrap(),
        std::fs::read(&again).unwrap()
    );
}
