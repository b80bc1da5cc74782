//! Tests of the media module against real ffmpeg output, checked with the ffprobe CLI.
//!
//! Input: generated frames (a moving gradient) and a sine tone. Output: assertions only.
//! Invariants: every test works in its own temp directory and, for failures, checks that
//! neither the target nor a temp file was left behind.

mod assemble_tests;
mod audio_piece_tests;
mod chunk_tests;
mod error_tests;
mod mp4_audio_tests;
mod region_tests;
mod subtitle_tests;

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{ChunkInfo, ChunkWriter, MediaError, VideoSettings};

/// Asserts that `err` is the failure of `step`: an ffmpeg call's (`ffmpeg`) or a file system one's.
pub(super) fn assert_step(err: &MediaError, step: &str, ffmpeg: bool) {
    let at = match err {
        MediaError::Ffmpeg { step, .. } if ffmpeg => *step,
        MediaError::Io { step, .. } if !ffmpeg => *step,
        _ => "",
    };
    assert_eq!(at, step, "{err}");
}

/// Small frames keep the suite fast on a shared 2-core machine.
pub(super) fn small(fps: u32) -> VideoSettings {
    VideoSettings {
        width: 160,
        height: 120,
        fps,
        threads: 1,
        ..VideoSettings::default()
    }
}

/// A gradient that moves with `i`, so every frame differs.
pub(super) fn gradient(w: u32, h: u32, i: u64) -> Vec<u8> {
    let mut rgb = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h as u64 {
        for x in 0..w as u64 {
            rgb.push(((x + 3 * i) % 256) as u8);
            rgb.push(((y + 2 * i) % 256) as u8);
            rgb.push(((x + y + i) % 256) as u8);
        }
    }
    rgb
}

/// A 440 Hz tone at half scale starting at global sample `first`.
pub(super) fn sine(first: u64, n: u64, sample_rate: u32) -> Vec<f32> {
    (first..first + n)
        .map(|t| {
            0.5 * (2.0 * std::f64::consts::PI * 440.0 * t as f64 / f64::from(sample_rate)).sin()
                as f32
        })
        .collect()
}

/// Writes a chunk the way the pipeline does: audio interleaved with frames.
pub(super) fn write_chunk(
    path: &Path,
    video: &VideoSettings,
    sample_rate: u32,
    frames: u64,
    samples: u64,
) -> ChunkInfo {
    write_chunk_at(path, video, sample_rate, frames, samples, 0)
}

/// Like `write_chunk`, with the tone starting at global sample `first` so that a list of
/// chunks carries one continuous sine.
pub(super) fn write_chunk_at(
    path: &Path,
    video: &VideoSettings,
    sample_rate: u32,
    frames: u64,
    samples: u64,
    first: u64,
) -> ChunkInfo {
    let mut w = ChunkWriter::create(path, video, sample_rate).expect("create chunk");
    let mut written = 0;
    for i in 0..frames {
        let upto = ((i + 1) * samples / frames.max(1)).min(samples);
        w.write_audio(&sine(first + written, upto - written, sample_rate))
            .expect("audio");
        written = upto;
        w.write_frame(&gradient(video.width, video.height, i))
            .expect("frame");
    }
    w.write_audio(&sine(first + written, samples - written, sample_rate))
        .expect("audio tail");
    w.finish().expect("finish chunk")
}

/// `ffprobe -show_format -show_streams -show_chapters` as JSON.
pub(super) fn ffprobe(path: &Path, extra: &[&str]) -> serde_json::Value {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-print_format", "json"])
        .args(["-show_format", "-show_streams", "-show_chapters"])
        .args(extra)
        .arg(path)
        .output()
        .expect("run ffprobe");
    assert!(
        out.status.success(),
        "ffprobe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("ffprobe json")
}

/// A number that ffprobe prints as a string.
pub(super) fn num(v: &serde_json::Value) -> f64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a numeric string: {v}"))
}

/// The stream of a codec type ("video", "audio", "subtitle").
pub(super) fn stream<'a>(probe: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    probe["streams"]
        .as_array()
        .expect("streams")
        .iter()
        .find(|s| s["codec_type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} stream in {probe}"))
}

/// Top-level MP4 box names in file order.
pub(super) fn top_level_atoms(path: &Path) -> Vec<String> {
    let data = std::fs::read(path).expect("read mp4");
    let mut atoms = Vec::new();
    let mut pos = 0usize;
    while pos + 8 <= data.len() {
        let size32 = u32::from_be_bytes(data[pos..pos + 4].try_into().unwrap()) as usize;
        atoms.push(String::from_utf8_lossy(&data[pos + 4..pos + 8]).into_owned());
        let size = match size32 {
            0 => data.len() - pos,
            1 => u64::from_be_bytes(data[pos + 8..pos + 16].try_into().unwrap()) as usize,
            n => n,
        };
        assert!(size >= 8, "bad box size at {pos}");
        pos += size;
    }
    atoms
}

/// MD5 of every decoded video frame, in output order (ffmpeg's framemd5 muxer).
pub(super) fn frame_md5s(path: &Path) -> Vec<String> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-map", "0:v", "-f", "framemd5", "-"])
        .output()
        .expect("run ffmpeg");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "decode errors: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit(',').next().map(|s| s.trim().to_string()))
        .collect()
}

/// Names in `dir` (to prove that failures leave no target and no temp file).
pub(super) fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A fresh temp directory and a path inside it.
pub(super) fn temp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    (dir, path)
}

/// `assemble` of plain paths, never stopped.
pub(super) fn assemble_paths(
    chunks: &[PathBuf],
    out: &Path,
    meta: &super::OutputMeta,
) -> Result<super::AssembleInfo, super::MediaError> {
    let refs: Vec<super::ChunkRef> = chunks.iter().cloned().map(Into::into).collect();
    let audio = super::AudioAhead::start(out, 2);
    super::assemble(
        &refs,
        out,
        meta,
        audio,
        &std::sync::atomic::AtomicBool::new(false),
    )
}
