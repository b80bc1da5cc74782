//! assemble's failure paths: each returns the right error and leaves neither the output
//! nor a temp file behind.

use std::path::{Path, PathBuf};

use super::super::{Chapter, Cue, MediaError, OutputMeta, VideoSettings};
use super::{assemble_paths, assert_step, entries, small, temp, write_chunk};

/// Two good 0.4 s chunks in `dir`.
fn two_chunks(dir: &Path) -> Vec<PathBuf> {
    (0..2)
        .map(|i| {
            let path = dir.join(format!("c{i}.mkv"));
            write_chunk(&path, &small(25), 22050, 10, 8820);
            path
        })
        .collect()
}

/// Runs assemble, expects failure, and checks that `dir` still holds only `before`.
fn fails(chunks: &[PathBuf], out: &Path, meta: &OutputMeta) -> MediaError {
    let dir = out.parent().expect("parent");
    let before = if dir.is_dir() { entries(dir) } else { vec![] };
    let err = assemble_paths(chunks, out, meta).expect_err("assemble must fail");
    if dir.is_dir() {
        assert_eq!(entries(dir), before, "leftovers after: {err}");
    }
    err
}

#[test]
fn zero_chunks() {
    let (_dir, out) = temp("out.mp4");
    let err = fails(&[], &out, &OutputMeta::default());
    assert!(matches!(err, MediaError::NoChunks), "{err}");
}

#[test]
fn chunks_that_cannot_be_concatenated() {
    let (dir, out) = temp("out.mp4");
    let good = two_chunks(dir.path());
    let odd = dir.path().join("odd.mkv");
    let cases: [(VideoSettings, u32, &str); 4] = [
        (
            VideoSettings {
                width: 96,
                ..small(25)
            },
            22050,
            "frame size",
        ),
        (small(30), 22050, "fps"),
        (small(25), 24000, "sample rate"),
        (
            VideoSettings {
                crf: 28,
                ..small(25)
            },
            22050,
            "H.264 parameter sets (encoder settings)",
        ),
    ];
    for (video, rate, expected) in cases {
        let frames = u64::from(video.fps) * 2 / 5;
        write_chunk(&odd, &video, rate, frames, u64::from(rate) * 2 / 5);
        let list = [good[0].clone(), odd.clone(), good[1].clone()];
        let err = fails(&list, &out, &OutputMeta::default());
        match err {
            MediaError::ChunkMismatch { what, ref path, .. } => {
                assert_eq!(what, expected);
                assert_eq!(path, &odd);
            }
            other => panic!("expected ChunkMismatch({expected}), got {other}"),
        }
    }
}

#[test]
fn missing_and_truncated_chunks() {
    let (dir, out) = temp("out.mp4");
    let mut chunks = two_chunks(dir.path());
    chunks.push(dir.path().join("missing.mkv"));
    let err = fails(&chunks, &out, &OutputMeta::default());
    assert!(
        matches!(err, MediaError::Io { step: "open chunk", ref path, .. } if path.ends_with("missing.mkv")),
        "{err}"
    );

    let bytes = std::fs::read(&chunks[1]).unwrap();
    std::fs::write(&chunks[1], &bytes[..bytes.len() * 2 / 3]).unwrap();
    let err = fails(&chunks[..2], &out, &OutputMeta::default());
    assert!(matches!(err, MediaError::BadChunk { .. }), "{err}");
}

#[test]
fn outputs_that_cannot_be_created() {
    let (dir, _) = temp("x");
    let chunks = two_chunks(dir.path());
    let meta = OutputMeta::default();

    let err = fails(&chunks, &dir.path().join("nope").join("out.mp4"), &meta);
    assert_step(&err, "create output file", true);
    let err = fails(&chunks, &chunks[0].join("out.mp4"), &meta);
    assert_step(&err, "create output file", true);
    let err = assemble_paths(&chunks, Path::new("/"), &meta).expect_err("no file name");
    assert_step(&err, "choose temp file name", false);
    // The output name is taken by a directory: everything is written, the rename fails.
    let taken = dir.path().join("taken.mp4");
    std::fs::create_dir(&taken).unwrap();
    let err = fails(&chunks, &taken, &meta);
    assert_step(&err, "rename temp file onto target", false);
}

#[test]
fn invalid_metadata_is_rejected_before_work() {
    let (dir, out) = temp("out.mp4");
    let chunks = two_chunks(dir.path());
    let chapter = |title: &str, start: f64, end: f64| Chapter {
        title: title.into(),
        start,
        end,
    };
    let cue = |text: &str, start: f64, end: f64| Cue {
        text: text.into(),
        start,
        end,
    };
    let metas = [
        OutputMeta {
            title: Some("a\0b".into()),
            ..OutputMeta::default()
        },
        OutputMeta {
            chapters: vec![chapter("x\0", 0.0, 1.0)],
            ..OutputMeta::default()
        },
        OutputMeta {
            chapters: vec![chapter("late", 0.5, 0.2)],
            ..OutputMeta::default()
        },
        OutputMeta {
            chapters: vec![chapter("nan", f64::NAN, 0.2)],
            ..OutputMeta::default()
        },
        OutputMeta {
            cues: vec![cue("neg", -1.0, 0.2)],
            ..OutputMeta::default()
        },
        OutputMeta {
            cues: vec![cue("back", 0.5, 0.1)],
            ..OutputMeta::default()
        },
    ];
    for meta in metas {
        let err = fails(&chunks, &out, &meta);
        assert!(matches!(err, MediaError::InvalidMeta(_)), "{err}");
    }
}

#[test]
fn audio_and_video_lengths_must_agree() {
    let (dir, out) = temp("out.mp4");
    let chunk = dir.path().join("c.mkv");
    // 20 frames = 0.8 s of video against 0.4 s of audio.
    write_chunk(&chunk, &small(25), 22050, 20, 8820);
    let err = fails(&[chunk], &out, &OutputMeta::default());
    assert!(matches!(err, MediaError::DurationMismatch { .. }), "{err}");
}
