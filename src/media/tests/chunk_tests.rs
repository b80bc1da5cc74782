//! ChunkWriter and probe_chunk: round trip, kill safety, parameter-set identity.

use std::process::Command;

use super::super::probe::scan;
use super::super::{ChunkWriter, MediaError, VideoSettings, probe_chunk};
use super::{assert_step, entries, ffprobe, gradient, num, sine, small, stream, temp, write_chunk};

#[test]
fn chunk_round_trips_through_probe_and_ffprobe() {
    let (dir, path) = temp("seg.mkv");
    let info = write_chunk(&path, &small(25), 22050, 10, 8820);
    assert_eq!((info.frames, info.samples), (10, 8820));
    assert_eq!(probe_chunk(&path).expect("probe"), info);
    assert_eq!(entries(dir.path()), ["seg.mkv"]);

    let p = ffprobe(&path, &["-count_frames"]);
    let v = stream(&p, "video");
    assert_eq!(v["codec_name"], "h264");
    assert_eq!(v["pix_fmt"], "yuv420p");
    assert_eq!(v["nb_read_frames"], "10");
    let a = stream(&p, "audio");
    assert_eq!(a["codec_name"], "pcm_s16le");
    assert_eq!(a["sample_rate"], "22050");
    assert_eq!(a["channels"], 1);
    assert!((num(&p["format"]["duration"]) - 0.4).abs() < 0.002);
}

#[test]
fn dropping_a_writer_without_finish_leaves_no_file() {
    let (dir, path) = temp("seg.mkv");
    let mut w = ChunkWriter::create(&path, &small(25), 22050).expect("create");
    for i in 0..5 {
        w.write_frame(&gradient(160, 120, i)).expect("frame");
    }
    w.write_audio(&sine(0, 4410, 22050)).expect("audio");
    assert_eq!(
        entries(dir.path()).len(),
        1,
        "temp file exists while writing"
    );
    assert!(!path.exists(), "nothing under the final name before finish");
    drop(w);
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn wrong_frame_length_is_rejected_and_the_writer_stays_usable() {
    let (_dir, path) = temp("seg.mkv");
    let mut w = ChunkWriter::create(&path, &small(25), 22050).expect("create");
    let err = w.write_frame(&[0u8; 100]).expect_err("short frame");
    assert!(
        matches!(
            err,
            MediaError::FrameSize {
                got: 100,
                expected: 57600,
                ..
            }
        ),
        "{err}"
    );
    w.write_frame(&gradient(160, 120, 0)).expect("frame");
    w.write_audio(&sine(0, 882, 22050)).expect("audio");
    assert_eq!(w.finish().expect("finish").frames, 1);
}

#[test]
fn thirty_fps_pts_survive_matroska_millisecond_rounding() {
    let (_dir, path) = temp("seg.mkv");
    let info = write_chunk(&path, &small(30), 22050, 31, 22050 * 31 / 30);
    let probed = probe_chunk(&path).expect("probe");
    assert_eq!(probed, info);
    assert_eq!(probed.fps, 30);
}

#[test]
fn a_chunk_shorter_than_one_frame_is_valid() {
    let (_dir, path) = temp("seg.mkv");
    let info = write_chunk(&path, &small(25), 22050, 0, 500);
    assert_eq!((info.frames, info.samples), (0, 500));
    assert_eq!(probe_chunk(&path).expect("probe"), info);
}

#[test]
fn same_settings_give_identical_parameter_sets_across_content_and_threads() {
    let (_dir, a) = temp("a.mkv");
    let b = a.with_file_name("b.mkv");
    let c = a.with_file_name("c.mkv");
    write_chunk(&a, &small(25), 22050, 12, 10584);
    let two_threads = VideoSettings {
        threads: 2,
        ..small(25)
    };
    // Different content (frames start elsewhere in the gradient) and frame count.
    let mut w = ChunkWriter::create(&b, &two_threads, 22050).expect("create");
    for i in 100..107 {
        w.write_frame(&gradient(160, 120, i * 7)).expect("frame");
    }
    w.write_audio(&sine(0, 6174, 22050)).expect("audio");
    w.finish().expect("finish");
    let other_crf = VideoSettings {
        crf: 30,
        ..small(25)
    };
    write_chunk(&c, &other_crf, 22050, 3, 2646);

    let auto = a.with_file_name("auto.mkv");
    let auto_threads = VideoSettings {
        threads: 0,
        ..small(25)
    };
    write_chunk(&auto, &auto_threads, 22050, 5, 4410);

    let (sa, sb, sc) = (scan(&a).unwrap(), scan(&b).unwrap(), scan(&c).unwrap());
    assert!(!sa.extradata.is_empty());
    assert_eq!(sa.extradata, sb.extradata);
    assert_eq!(sa.extradata, scan(&auto).unwrap().extradata);
    // x264 puts the CRF-derived initial QP into the PPS, so a changed CRF is detectable.
    assert_ne!(sa.extradata, sc.extradata);
}

#[test]
fn veryfast_reorders_frames_and_ultrafast_does_not() {
    let (_dir, a) = temp("a.mkv");
    let b = a.with_file_name("b.mkv");
    write_chunk(&a, &small(25), 22050, 30, 26460);
    let ultrafast = VideoSettings {
        preset: "ultrafast".into(),
        ..small(25)
    };
    write_chunk(&b, &ultrafast, 22050, 30, 26460);
    assert!(scan(&a).unwrap().reorder_delay > 0, "B-frames expected");
    assert_eq!(scan(&b).unwrap().reorder_delay, 0);
}

#[test]
fn invalid_settings_are_rejected_before_any_file_exists() {
    let (dir, path) = temp("seg.mkv");
    let cases = [
        VideoSettings {
            width: 161,
            ..small(25)
        },
        VideoSettings {
            height: 0,
            ..small(25)
        },
        VideoSettings {
            width: 8194,
            ..small(25)
        },
        VideoSettings {
            fps: 0,
            ..small(25)
        },
        VideoSettings {
            crf: 52,
            ..small(25)
        },
        VideoSettings {
            preset: "fastest".into(),
            ..small(25)
        },
        VideoSettings {
            threads: 129,
            ..small(25)
        },
    ];
    for video in cases {
        let err = ChunkWriter::create(&path, &video, 22050)
            .err()
            .expect("must fail");
        assert!(matches!(err, MediaError::InvalidSettings(_)), "{err}");
    }
    let err = ChunkWriter::create(&path, &small(25), 1000)
        .err()
        .expect("rate");
    assert!(matches!(err, MediaError::InvalidSettings(_)), "{err}");
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn create_fails_cleanly_where_no_file_can_be_made() {
    let (dir, _) = temp("x");
    let missing = dir.path().join("no-such-dir").join("seg.mkv");
    let err = ChunkWriter::create(&missing, &small(25), 22050)
        .err()
        .expect("missing dir");
    assert_step(&err, "create chunk file", true);
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let err = ChunkWriter::create(&file.join("seg.mkv"), &small(25), 22050)
        .err()
        .expect("parent is a file");
    assert!(err.to_string().contains("plain-file"), "{err}");
    let err = ChunkWriter::create(std::path::Path::new("/"), &small(25), 22050)
        .err()
        .expect("no file name");
    assert_step(&err, "choose temp file name", false);
    assert_eq!(entries(dir.path()), ["plain-file"]);
}

#[test]
fn finish_fails_and_cleans_up_when_the_temp_file_vanished() {
    let (dir, path) = temp("seg.mkv");
    let mut w = ChunkWriter::create(&path, &small(25), 22050).expect("create");
    w.write_frame(&gradient(160, 120, 0)).expect("frame");
    for name in entries(dir.path()) {
        std::fs::remove_file(dir.path().join(name)).unwrap();
    }
    let err = w.finish().expect_err("temp file gone");
    assert_step(&err, "open for fsync", false);
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn finish_fails_and_cleans_up_when_the_target_is_a_directory() {
    let (dir, path) = temp("seg.mkv");
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("keep"), b"x").unwrap();
    let mut w = ChunkWriter::create(&path, &small(25), 22050).expect("create");
    w.write_frame(&gradient(160, 120, 0)).expect("frame");
    let err = w.finish().expect_err("rename onto a directory");
    assert_step(&err, "rename temp file onto target", false);
    assert_eq!(entries(dir.path()), ["seg.mkv"]);
    assert!(path.is_dir());
}

#[test]
fn truncated_or_foreign_chunks_fail_probe() {
    let (dir, path) = temp("seg.mkv");
    write_chunk(&path, &small(25), 22050, 50, 44100);
    let bytes = std::fs::read(&path).unwrap();

    let cut = dir.path().join("cut.mkv");
    for percent in [10, 30, 50, 70, 90, 97] {
        std::fs::write(&cut, &bytes[..bytes.len() * percent / 100]).unwrap();
        let err = probe_chunk(&cut).expect_err("truncated chunk");
        assert!(
            matches!(err, MediaError::BadChunk { .. } | MediaError::Ffmpeg { .. }),
            "{percent}%: {err}"
        );
    }

    let stub = dir.path().join("stub.mkv");
    std::fs::write(&stub, &bytes[..100]).unwrap();
    assert!(probe_chunk(&stub).is_err());

    let missing = dir.path().join("missing.mkv");
    let err = probe_chunk(&missing).expect_err("missing");
    assert_step(&err, "open chunk", false);

    // A valid Matroska file that ChunkWriter did not write (no tags).
    let foreign = dir.path().join("foreign.mkv");
    let status = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=64x64:rate=25:duration=0.2",
        ])
        .args(["-c:v", "libx264", "-pix_fmt", "yuv420p"])
        .arg(&foreign)
        .status()
        .expect("run ffmpeg");
    assert!(status.success());
    let err = probe_chunk(&foreign).expect_err("foreign");
    assert!(matches!(err, MediaError::BadChunk { .. }), "{err}");
}

/// Environment variable that turns the helper below into the real child run.
const CHILD_DIR: &str = "TALKER_MEDIA_FSIZE_CHILD_DIR";

#[test]
fn a_write_error_poisons_the_writer_and_leaves_nothing() {
    let (dir, _) = temp("x");
    let exe = std::env::current_exe().unwrap();
    // RLIMIT_FSIZE makes the chunk's writes fail with EFBIG; SIGXFSZ is ignored so the
    // child sees the error instead of dying. ulimit -f counts 512- or 1024-byte blocks.
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 64 && trap '' XFSZ && exec \"$0\" \"$@\"")
        .arg(exe)
        .args(["--ignored", "--exact", "--nocapture", "--test-threads=1"])
        .arg("media::tests::chunk_tests::child_writes_under_a_file_size_limit")
        .env(CHILD_DIR, dir.path())
        .output()
        .expect("run child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("CHILD_WRITE_ERROR"), "{stdout}");
    assert!(stdout.contains("CHILD_POISONED"), "{stdout}");
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

/// Run only by the test above, in a child process with a file-size limit.
#[test]
#[ignore = "child helper of a_write_error_poisons_the_writer_and_leaves_nothing"]
fn child_writes_under_a_file_size_limit() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let path = std::path::Path::new(&dir).join("seg.mkv");
    let video = VideoSettings {
        width: 320,
        height: 240,
        crf: 0,
        ..small(25)
    };
    let mut w = ChunkWriter::create(&path, &video, 22050).expect("create");
    let mut noise: u32 = 1;
    let mut failed = false;
    for _ in 0..200 {
        let frame: Vec<u8> = (0..320 * 240 * 3)
            .map(|_| {
                noise = noise.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (noise >> 24) as u8
            })
            .collect();
        // Audio too: the interleaver holds video packets until the audio stream has some.
        let step = w
            .write_audio(&[0.1; 882])
            .and_then(|()| w.write_frame(&frame));
        if let Err(e) = step {
            println!("CHILD_WRITE_ERROR {e}");
            failed = true;
            break;
        }
    }
    assert!(failed, "the file-size limit never triggered");
    match w.write_audio(&[0.0; 10]) {
        Err(MediaError::Poisoned { .. }) => {}
        other => panic!("expected Poisoned, got {other:?}"),
    }
    match w.finish() {
        Err(MediaError::Poisoned { .. }) => println!("CHILD_POISONED"),
        other => panic!("expected Poisoned, got {other:?}"),
    }
}

#[test]
fn matroska_duration_tags_parse() {
    use super::super::probe::parse_duration_us;
    assert_eq!(parse_duration_us("00:00:02.000000000"), Some(2_000_000));
    assert_eq!(parse_duration_us("01:02:03.500000000"), Some(3_723_500_000));
    for bad in [
        "",
        "1:2",
        "a:b:c",
        "00:00:-1",
        "00:00:NaN",
        "99999999999999:00:00",
    ] {
        assert_eq!(parse_duration_us(bad), None, "{bad}");
    }
}

/// Writes a Matroska file with the ffmpeg CLI, carrying our tags unless `args` override
/// them, so each probe check can be hit by a file that passes all the checks before it.
fn craft(dir: &std::path::Path, name: &str, args: &[&str]) -> std::path::PathBuf {
    let path = dir.join(name);
    let tags = [
        "talker_chunk=1",
        "talker_fps=25",
        "talker_sample_rate=22050",
        "talker_crf=20",
        "talker_preset=veryfast",
    ];
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-v", "error", "-y"]);
    cmd.args([
        "-f",
        "lavfi",
        "-i",
        "testsrc=size=64x48:rate=25:duration=0.4",
    ]);
    cmd.args(["-f", "lavfi", "-i", "sine=r=22050:d=0.4"]);
    for tag in tags {
        cmd.args(["-metadata", tag]);
    }
    cmd.args(args);
    let status = cmd.arg(&path).status().expect("run ffmpeg");
    assert!(status.success(), "ffmpeg failed for {name}");
    path
}

#[test]
fn probe_rejects_each_kind_of_foreign_chunk() {
    let (dir, _) = temp("x");
    let d = dir.path();
    let ok = [
        "-map",
        "0:v",
        "-map",
        "1:a",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        "-c:a",
        "pcm_s16le",
    ];
    // The control: a file made like this passes, so each failure below is the one change.
    let control = craft(d, "control.mkv", &ok);
    assert_eq!(probe_chunk(&control).expect("control").frames, 10);

    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        ok.iter().copied().chain(extra.iter().copied()).collect()
    };
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "tag.mkv",
            with(&["-metadata", "talker_chunk=0"]),
            "tag talker_chunk",
        ),
        (
            "fps.mkv",
            with(&["-metadata", "talker_fps=x"]),
            "tag talker_fps",
        ),
        (
            "preset.mkv",
            with(&["-metadata", "talker_preset="]),
            "tag talker_preset",
        ),
        (
            "three.mkv",
            with(&["-map", "1:a", "-c:a", "pcm_s16le"]),
            "3 streams",
        ),
        (
            "twovideo.mkv",
            vec![
                "-map", "0:v", "-map", "0:v", "-c:v", "libx264", "-pix_fmt", "yuv420p",
            ],
            "no audio stream",
        ),
        (
            "mpeg4.mkv",
            vec![
                "-map",
                "0:v",
                "-map",
                "1:a",
                "-c:v",
                "mpeg4",
                "-c:a",
                "pcm_s16le",
            ],
            "codecs",
        ),
        (
            "yuv444.mkv",
            vec![
                "-map",
                "0:v",
                "-map",
                "1:a",
                "-c:v",
                "libx264",
                "-pix_fmt",
                "yuv444p",
                "-c:a",
                "pcm_s16le",
            ],
            "pixel format",
        ),
        ("stereo.mkv", with(&["-ac", "2"]), "2 channel(s)"),
        (
            "rate.mkv",
            with(&["-metadata", "talker_sample_rate=24000"]),
            "24000",
        ),
        (
            "offset.mkv",
            with(&["-output_ts_offset", "1000000"]),
            "out of range",
        ),
    ];
    for (name, args, expected) in cases {
        let path = craft(d, name, &args);
        match probe_chunk(&path) {
            Err(MediaError::BadChunk { reason, .. }) => {
                assert!(reason.contains(expected), "{name}: {reason}")
            }
            other => panic!("{name}: expected BadChunk({expected}), got {other:?}"),
        }
    }
}

#[test]
fn a_writer_made_on_one_thread_finishes_on_another() {
    let (_dir, path) = temp("seg.mkv");
    let mut w = ChunkWriter::create(&path, &small(25), 22050).expect("create");
    w.write_frame(&gradient(160, 120, 0)).expect("frame");
    let info = std::thread::spawn(move || -> Result<_, MediaError> {
        w.write_audio(&sine(0, 882, 22050))?;
        w.write_frame(&gradient(160, 120, 1))?;
        w.finish()
    })
    .join()
    .expect("thread")
    .expect("finish");
    assert_eq!(probe_chunk(&path).expect("probe"), info);
}
