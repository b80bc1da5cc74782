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
