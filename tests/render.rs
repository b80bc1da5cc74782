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
