//! End-to-end renders through the binary, checked with ffprobe/ffmpeg.

use talker::face::{FaceModels, Portrait};

use crate::util::*;

const THREE: &str = r#"{"title": "Three", "segments": [
    {"text": "Good morning. The weather is lovely today.", "chapter": "Start"},
    {"text": "Open wide and say ah!", "pause_ms": 500, "chapter": "End"}]}"#;

fn mean_abs_diff(a: &[u8], b: &[u8], w: usize, region: impl Fn(usize, usize) -> bool) -> f64 {
    let (mut sum, mut n) = (0u64, 0u64);
    for (i, (x, y)) in a.chunks_exact(3).zip(b.chunks_exact(3)).enumerate() {
        if region(i % w, i / w) {
            sum += x
                .iter()
                .zip(y)
                .map(|(p, q)| u64::from(p.abs_diff(*q)))
                .sum::<u64>();
            n += 3;
        }
    }
    sum as f64 / n.max(1) as f64
}

#[test]
fn three_sentences_render_to_a_valid_synced_mp4() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "three.json", THREE);
    let out = dir.path().join("three.mp4");
    let report = render_json(dir.path(), &script, &out, &["--deterministic"]);
    assert_eq!(
        listing(dir.path()),
        ["cache", "three.json", "three.mp4"],
        "no temp files left"
    );

    let p = probe(&out);
    let streams = p["streams"].as_array().unwrap();
    let video = streams
        .iter()
        .find(|s| s["codec_type"] == "video")
        .expect("a video stream");
    let audio = streams
        .iter()
        .find(|s| s["codec_type"] == "audio")
        .expect("an audio stream");
    assert_eq!(video["codec_name"], "h264");
    assert_eq!(video["pix_fmt"], "yuv420p");
    assert_eq!(audio["codec_name"], "aac");
    let vd: f64 = video["duration"].as_str().unwrap().parse().unwrap();
    let ad: f64 = audio["duration"].as_str().unwrap().parse().unwrap();
    assert!((vd - ad).abs() <= 0.040, "video {vd} s vs audio {ad} s");
    let frames: u64 = video["nb_frames"].as_str().unwrap().parse().unwrap();
    assert_eq!(frames, (vd * 25.0).round() as u64);
    assert_eq!(frames, report["frames"].as_u64().unwrap());
    assert_eq!(p["chapters"].as_array().unwrap().len(), 2);
    assert_eq!(p["format"]["tags"]["title"], "Three");
    assert!(
        streams.iter().any(|s| s["codec_name"] == "mov_text"),
        "subtitles"
    );

    // The loudest frame (a vowel) against a silent lead-in frame: the mouth moves, the background does not.
    let (w, h) = (512usize, 512usize);
    let video_frames = decode_frames(&out, w, h);
    assert_eq!(video_frames.len() as u64, frames);
    let pcm = decode_audio(&out, 25 * 1920);
    let energy: Vec<f64> = pcm
        .chunks(1920)
        .map(|c| c.iter().map(|s| f64::from(s * s)).sum())
        .collect();
    let loud = (0..frames as usize)
        .max_by(|&a, &b| energy[a].total_cmp(&energy[b]))
        .unwrap();
    let quiet = 2;
    assert!(
        energy[quiet] < energy[loud] * 1e-3,
        "frame {quiet} is in the silent lead-in"
    );

    let models = FaceModels::load(&assets().face_dir()).unwrap();
    let face = models
        .analyse(&Portrait::open(&repo("examples/portrait.png")).unwrap())
        .unwrap()
        .face;
    let mouth = face.landmarks.mouth_outer();
    let (x0, x1) = (
        mouth.iter().map(|p| p[0]).fold(f32::MAX, f32::min),
        mouth.iter().map(|p| p[0]).fold(0.0, f32::max),
    );
    let (y0, y1) = (
        mouth.iter().map(|p| p[1]).fold(f32::MAX, f32::min),
        mouth.iter().map(|p| p[1]).fold(0.0, f32::max),
    );
    let in_mouth = |x: usize, y: usize| {
        (x as f32) >= x0 && (x as f32) <= x1 && (y as f32) >= y0 && (y as f32) <= y1 + 6.0
    };
    let far = |x: usize, y: usize| x < 60 || y < 40 || x >= w - 60 || y >= h - 60;
    let mouth_diff = mean_abs_diff(&video_frames[loud], &video_frames[quiet], w, in_mouth);
    let far_diff = mean_abs_diff(&video_frames[loud], &video_frames[quiet], w, far);
    assert!(
        mouth_diff > 6.0,
        "mouth region barely changes: {mouth_diff}"
    );
    assert!(
        far_diff < 1.0,
        "pixels far from the face change: {far_diff}"
    );
}

#[test]
fn a_cached_rerender_synthesises_nothing_and_reuses_every_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "s.json", THREE);
    let first = render_json(dir.path(), &script, &dir.path().join("a.mp4"), &[]);
    assert!(first["speech"]["synthesized"].as_u64().unwrap() > 0);
    let second = render_json(dir.path(), &script, &dir.path().join("b.mp4"), &[]);
    assert_eq!(second["speech"]["synthesized"], 0);
    assert_eq!(second["chunks_reused"], second["chunks"]);
    let a = std::fs::read(dir.path().join("a.mp4")).unwrap();
    let b = std::fs::read(dir.path().join("b.mp4")).unwrap();
    assert_eq!(a, b, "a cached re-render is byte-identical");
}

#[test]
fn repeated_sentences_are_synthesised_once() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        "The first line.",
        "A second, different line.",
        "And a third one.",
    ];
    let segments: Vec<String> = (0..60)
        .map(|i| format!(r#"{{"text": "{}", "pause_ms": 0}}"#, lines[i % 3]))
        .collect();
    let script = write_script(
        dir.path(),
        "rep.json",
        &format!(r#"{{"segments": [{}]}}"#, segments.join(",")),
    );
    let report = render_json(
        dir.path(),
        &script,
        &dir.path().join("rep.mp4"),
        &["--framing", "head", "--size", "128x128", "--fps", "10"],
    );
    assert_eq!(report["speech"]["synthesized"], 3);
    assert_eq!(report["utterances"], 60);
}

#[test]
fn changing_the_speed_synthesises_again() {
    let dir = tempfile::tempdir().unwrap();
    let slow = write_script(
        dir.path(),
        "slow.json",
        r#"{"speed": 0.8, "segments": [{"text": "Speed matters, because a slower voice takes longer to say the very same words."}]}"#,
    );
    let fast = write_script(
        dir.path(),
        "fast.json",
        r#"{"speed": 1.25, "segments": [{"text": "Speed matters, because a slower voice takes longer to say the very same words."}]}"#,
    );
    let a = render_json(
        dir.path(),
        &slow,
        &dir.path().join("slow.mp4"),
        &["--framing", "head", "--size", "128x128"],
    );
    let b = render_json(
        dir.path(),
        &fast,
        &dir.path().join("fast.mp4"),
        &["--framing", "head", "--size", "128x128"],
    );
    assert_eq!(a["speech"]["synthesized"], 1);
    assert_eq!(b["speech"]["synthesized"], 1);
    assert!(a["audio_seconds"].as_f64().unwrap() > b["audio_seconds"].as_f64().unwrap() * 1.2);
}

#[test]
fn two_processes_render_the_same_script_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "same.json", THREE);
    let spawn = |name: &str| {
        talker(dir.path())
            .args([
                "render",
                "--json",
                "--deterministic",
                "--framing",
                "head",
                "--size",
                "160x160",
                "-o",
            ])
            .arg(dir.path().join(name))
            .arg(&script)
            .arg(repo("examples/portrait.png"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("a.mp4"), spawn("b.mp4"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_success(&a);
    assert_success(&b);
    for name in ["a.mp4", "b.mp4"] {
        let p = probe(&dir.path().join(name));
        assert_eq!(
            p["streams"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["codec_type"] == "video")
                .count(),
            1
        );
    }
    // Both shared one cache: a third render finds everything there.
    let third = render_json(
        dir.path(),
        &script,
        &dir.path().join("c.mp4"),
        &["--deterministic", "--framing", "head", "--size", "160x160"],
    );
    assert_eq!(third["speech"]["synthesized"], 0);
    assert_eq!(third["chunks_reused"], third["chunks"]);
}

#[test]
fn cache_stats_and_gc_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        "s.json",
        r#"{"segments": [{"text": "Cache me if you can."}]}"#,
    );
    render_json(
        dir.path(),
        &script,
        &dir.path().join("a.mp4"),
        &["--framing", "head", "--size", "128x128"],
    );
    let stats = |d: &std::path::Path| -> serde_json::Value {
        let o = talker(d)
            .args(["cache", "stats", "--json"])
            .output()
            .unwrap();
        assert_success(&o);
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let s = stats(dir.path());
    assert_eq!(s["phrases"], 1);
    assert_eq!(s["chunks"], 1);
    let o = talker(dir.path())
        .args(["cache", "gc", "--max-size", "0", "--json"])
        .output()
        .unwrap();
    assert_success(&o);
    let s = stats(dir.path());
    assert_eq!(
        (s["phrases"].as_u64(), s["chunks"].as_u64()),
        (Some(0), Some(0))
    );
    let o = talker(dir.path())
        .args(["cache", "gc", "--max-size", "lots"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

/// Any frame rate, not only those that divide the sample rate (22050 Hz is 918.75 samples a
/// frame at 24 fps): every chunk joins, and audio and video last as long as each other.
#[test]
fn any_frame_rate_gives_a_synced_mp4() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        "two.json",
        r#"{"segments": [{"text": "One chunk here."}, {"text": "And a second one."}]}"#,
    );
    for fps in [24u64, 30, 60] {
        let out = dir.path().join(format!("at{fps}.mp4"));
        let report = render_json(
            dir.path(),
            &script,
            &out,
            &[
                "--framing",
                "head",
                "--size",
                "128x128",
                "--fps",
                &fps.to_string(),
            ],
        );
        assert_eq!(report["chunks"], 2, "two chunks are joined");
        assert_synced(&out, &report, fps);
    }
}

/// Logs and progress on a stderr whose reader has gone never stop a render: it finishes (exit 0)
/// with its output complete.
#[test]
fn a_closed_stderr_does_not_stop_the_render() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        "s.json",
        r#"{"segments": [{"text": "Nobody reads this."}]}"#,
    );
    let out = dir.path().join("out.mp4");
    for json in [false, true] {
        let _ = std::fs::remove_file(&out);
        let mut c = talker(dir.path());
        c.args([
            "render",
            "-v",
            "--framing",
            "head",
            "--size",
            "128x128",
            "-o",
        ])
        .arg(&out)
        .arg(&script)
        .arg(repo("examples/portrait.png"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
        if json {
            c.arg("--json");
        }
        let mut child = c.spawn().unwrap();
        drop(child.stderr.take());
        let status = child.wait().unwrap();
        assert!(status.success(), "json {json}: {status:?}");
        assert!(out.is_file());
    }
}

/// A report that cannot be written (a full disk) fails the command with exit 1 and a message,
/// not a panic, and the finished render is kept.
#[test]
fn a_report_that_cannot_be_written_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        "s.json",
        r#"{"segments": [{"text": "The disk is full."}]}"#,
    );
    let out = dir.path().join("out.mp4");
    let o = talker(dir.path())
        .args([
            "render",
            "--json",
            "--framing",
            "head",
            "--size",
            "128x128",
            "-o",
        ])
        .arg(&out)
        .arg(&script)
        .arg(repo("examples/portrait.png"))
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot write the report") && err.contains("is complete"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.is_file());
}

/// What a voice would read otherwise than meant is said once per kind, naming the segment; and a
/// --precision that the CPU does not use is said too.
#[test]
fn markup_foreign_letters_and_an_unused_precision_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        "s.json",
        r#"{"segments": [{"text": "Plain words."},
            {"text": "Wait <emphasis>now</emphasis> for it."},
            {"text": "Shalom is שלום."}]}"#,
    );
    let o = talker(dir.path())
        .args([
            "render",
            "--json",
            "--backend",
            "cpu",
            "--precision",
            "int8",
            "-o",
        ])
        .arg(dir.path().join("out.wav"))
        .arg(&script)
        .output()
        .unwrap();
    assert_success(&o);
    let warnings: Vec<String> = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "warning")
        .map(|v| v["message"].as_str().unwrap().to_owned())
        .collect();
    let has = |needle: &str| warnings.iter().filter(|w| w.contains(needle)).count();
    assert_eq!(
        has("segments[1].text: holds markup (<emphasis>), which is dropped"),
        1,
        "{warnings:?}"
    );
    assert_eq!(
        has("segments[2].text: has Hebrew letters"),
        1,
        "{warnings:?}"
    );
    assert_eq!(
        has("--precision int8 is for the CUDA engine"),
        1,
        "{warnings:?}"
    );
}
