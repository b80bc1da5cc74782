//! Shared helpers for the integration tests: assets, the built binary, ffprobe/ffmpeg readers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use talker::assets::{Assets, DEFAULT_VOICE};
use talker::tts::onnx::PiperModel;
use talker::tts::voice::VoiceFiles;

/// The assets that scripts/fetch-assets installs; tests need the real models.
pub fn assets() -> Assets {
    let a = Assets::locate(None);
    assert!(
        a.voices_dir()
            .join(format!("{DEFAULT_VOICE}.onnx"))
            .is_file(),
        "models missing in {}: run scripts/fetch-assets first",
        a.root.display()
    );
    a
}

pub fn default_voice() -> VoiceFiles {
    VoiceFiles::resolve(DEFAULT_VOICE, &assets().voices_dir()).unwrap()
}

pub fn load_model(threads: usize) -> PiperModel {
    let a = assets();
    PiperModel::load(&default_voice(), &a.onnxruntime_library().unwrap(), threads).unwrap()
}

pub fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// `talker` with a private cache inside `dir`.
pub fn talker(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_talker"));
    c.env("TALKER_CACHE", dir.join("cache"))
        .env_remove("RUST_LOG");
    c
}

pub fn write_script(dir: &Path, name: &str, json: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, json).unwrap();
    p
}

/// Runs a render with `--json` and returns its report.
pub fn render_json(dir: &Path, script: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let o = talker(dir)
        .args(["render", "--json", "-o"])
        .arg(out)
        .arg(script)
        .arg(repo("examples/portrait.png"))
        .args(extra)
        .output()
        .unwrap();
    assert_success(&o);
    serde_json::from_slice(&o.stdout).expect("the report is JSON")
}

/// Runs a render without a portrait and with `--deterministic` and `--json`; its report.
pub fn render_deterministic(
    dir: &Path,
    script: &Path,
    out: &Path,
    extra: &[&str],
) -> serde_json::Value {
    let o = talker(dir)
        .args(["render", "--json", "--deterministic", "-o"])
        .arg(out)
        .arg(script)
        .args(extra)
        .output()
        .unwrap();
    assert_success(&o);
    serde_json::from_slice(&o.stdout).expect("the report is JSON")
}

pub fn assert_success(o: &Output) {
    assert!(
        o.status.success(),
        "talker failed ({:?}):\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

/// ffprobe's view of the streams, as JSON.
pub fn probe(path: &Path) -> serde_json::Value {
    let o = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_streams",
            "-show_format",
            "-show_chapters",
            "-of",
            "json",
        ])
        .arg(path)
        .output()
        .expect("ffprobe is installed");
    assert!(o.status.success());
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The file's duration in seconds, as ffprobe reads it.
pub fn duration(path: &Path) -> f64 {
    probe(path)["format"]["duration"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// The video at `out` runs at `fps` with as many frames as its render `report` says, and its
/// audio lasts as long as its frames.
pub fn assert_synced(out: &Path, report: &serde_json::Value, fps: u64) {
    let p = probe(out);
    let streams = p["streams"].as_array().unwrap();
    let of = |kind: &str| streams.iter().find(|s| s["codec_type"] == kind).unwrap();
    let (video, audio) = (of("video"), of("audio"));
    assert_eq!(video["r_frame_rate"], format!("{fps}/1"));
    let frames: u64 = video["nb_frames"].as_str().unwrap().parse().unwrap();
    assert_eq!(frames, report["frames"].as_u64().unwrap());
    let vd: f64 = video["duration"].as_str().unwrap().parse().unwrap();
    let ad: f64 = audio["duration"].as_str().unwrap().parse().unwrap();
    assert!(
        (vd - frames as f64 / fps as f64).abs() < 1e-3,
        "{fps} fps: {frames} frames last {vd} s"
    );
    // AAC frames are 1024 samples at 48 kHz: the track may end up to one of them later.
    assert!(
        (vd - ad).abs() <= 1.0 / fps as f64 + 0.022,
        "{fps} fps: video {vd} s vs audio {ad} s"
    );
}

/// All frames decoded to RGB24.
pub fn decode_frames(path: &Path, width: usize, height: usize) -> Vec<Vec<u8>> {
    let o = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .expect("ffmpeg is installed");
    assert!(o.status.success());
    o.stdout
        .chunks_exact(width * height * 3)
        .map(<[u8]>::to_vec)
        .collect()
}

/// The audio track decoded to mono f32 at `rate`.
pub fn decode_audio(path: &Path, rate: u32) -> Vec<f32> {
    let o = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-f", "f32le", "-ac", "1", "-ar", &rate.to_string(), "-"])
        .output()
        .unwrap();
    assert!(o.status.success());
    o.stdout
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Files in `dir` (names only), to check nothing half-written is left.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every file under `dir`, relative, sorted.
pub fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}
