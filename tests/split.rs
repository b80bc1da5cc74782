//! `render --split chapters`: one file per chapter, named, tagged and timed on its own.

use std::path::{Path, PathBuf};

use crate::util::{
    assert_success, duration, listing, probe, render_deterministic as render, talker,
};

/// Three short chapters; the last title needs making safe for a file name.
const BOOK: &str = r#"{"title": "The Keeper", "author": "Ada Writer", "segments": [
    {"chapter": "Dusk", "text": "The keeper climbed the stairs."},
    {"chapter": "Dawn", "text": "Morning came over the harbour."},
    {"chapter": "Part 3: Ships/Gulls?", "text": "The gulls were loud."}]}"#;

const NAMES: [&str; 3] = ["01 - Dusk", "02 - Dawn", "03 - Part 3_ Ships_Gulls_"];

/// (start, text) of each cue of an SRT file.
fn cues(path: &Path) -> Vec<(f64, String)> {
    std::fs::read_to_string(path)
        .unwrap()
        .split("\n\n")
        .filter_map(|block| {
            let mut lines = block.lines().skip(1);
            let start = lines.next()?.split_once(" --> ")?.0;
            let (hms, ms) = start.split_once(',')?;
            let v: Vec<f64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
            let t = v[0] * 3600.0 + v[1] * 60.0 + v[2] + ms.parse::<f64>().unwrap() / 1000.0;
            Some((t, lines.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

fn book(dir: &Path) -> PathBuf {
    let book = dir.join("book.json");
    std::fs::write(&book, BOOK).unwrap();
    book
}

/// M4B without levelling: the files together are the single-file render, cut at the chapters;
/// each is tagged with its track and chapter, its subtitles timed from its own start.
#[test]
fn a_book_splits_into_chapter_m4b_files_that_add_up_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = book(d);
    let single = d.join("whole.m4b");
    let args = ["--loudness", "off", "--subtitles", "srt"];
    render(d, &book, &single, &args);
    let out = d.join("parts");
    let split = ["--split", "chapters", "--format", "m4b"];
    let report = render(d, &book, &out, &[&args[..], &split[..]].concat());

    let mut expected: Vec<String> = NAMES
        .iter()
        .flat_map(|n| [format!("{n}.m4b"), format!("{n}.srt")])
        .collect();
    expected.sort();
    assert_eq!(listing(&out), expected);
    let files = report["files"].as_array().unwrap();
    assert_eq!(files.len(), 3, "{report}");

    let mut offset = 0.0;
    let mut all_cues = Vec::new();
    let mut sum = 0.0;
    for (i, name) in NAMES.iter().enumerate() {
        let path = out.join(format!("{name}.m4b"));
        assert_eq!(files[i]["path"], path.to_str().unwrap());
        assert_eq!(files[i]["track"], i + 1);
        let p = probe(&path);
        let tags = &p["format"]["tags"];
        assert_eq!(tags["track"], format!("{}/3", i + 1), "{p}");
        assert_eq!(tags["title"], files[i]["title"], "{p}");
        assert_eq!(tags["album"], "The Keeper", "{p}");
        assert_eq!(tags["artist"], "Ada Writer", "{p}");
        sum += duration(&path);
        // Each file's cues start from its own beginning.
        let own = cues(&out.join(format!("{name}.srt")));
        assert!(!own.is_empty() && own[0].0 < 1.0, "{own:?}");
        all_cues.extend(own.into_iter().map(|(t, text)| (t + offset, text)));
        offset += files[i]["audio_seconds"].as_f64().unwrap();
    }
    assert_eq!(files[2]["title"], "Part 3: Ships/Gulls?");
    let whole = duration(&single);
    assert!((sum - whole).abs() < 0.15, "parts {sum} s, whole {whole} s");
    let whole_cues = cues(&single.with_extension("srt"));
    assert_eq!(all_cues.len(), whole_cues.len());
    for ((a, ta), (b, tb)) in all_cues.iter().zip(&whole_cues) {
        assert_eq!(ta, tb);
        assert!(
            (a - b).abs() < 0.01,
            "{ta}: {a} in the parts, {b} in the whole"
        );
    }

    // Again over the same directory: the files are replaced, as a single output is, and
    // nothing half-written is left.
    render(d, &book, &out, &[&args[..], &split[..]].concat());
    assert_eq!(listing(&out), expected);
}

/// WAV without levelling: the chapters' samples are exactly the whole book's, cut apart.
#[test]
fn wav_files_hold_exactly_the_whole_books_samples() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = book(d);
    let single = d.join("whole.wav");
    render(d, &book, &single, &["--loudness", "off"]);
    let out = d.join("wav");
    let split = [
        "--loudness",
        "off",
        "--split",
        "chapters",
        "--format",
        "wav",
    ];
    render(d, &book, &out, &split);
    let whole = crate::util::decode_audio(&single, 22_050);
    let parts: Vec<f32> = NAMES
        .iter()
        .flat_map(|n| crate::util::decode_audio(&out.join(format!("{n}.wav")), 22_050))
        .collect();
    assert_eq!(parts, whole);
}

/// MP3 with ACX (the default): ID3 track and titles, one gain for the whole book, room tone at
/// both ends of every file.
#[test]
fn a_book_splits_into_acx_mp3_files_with_room_tone_each() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = book(d);
    let out = d.join("mp3");
    let report = render(d, &book, &out, &["--split", "chapters", "--format", "mp3"]);
    assert_eq!(report["loudness"]["standard"], "acx", "{report}");
    let files = report["files"].as_array().unwrap();
    for (i, name) in NAMES.iter().enumerate() {
        let path = out.join(format!("{name}.mp3"));
        let p = probe(&path);
        let tags = &p["format"]["tags"];
        assert_eq!(p["streams"][0]["codec_name"], "mp3");
        assert_eq!(tags["track"], format!("{}/3", i + 1), "{p}");
        assert_eq!(tags["title"], files[i]["title"], "{p}");
        assert_eq!(tags["album"], "The Keeper", "{p}");
        let seconds = files[i]["audio_seconds"].as_f64().unwrap();
        assert!((duration(&path) - seconds).abs() < 0.1, "{p}");
        // The room tone: at least ACX's 0.5 s before the first word, 1 s after the last.
        let pcm = crate::util::decode_audio(&path, 44_100);
        let loud = |s: &&f32| s.abs() > 0.01;
        let first = pcm.iter().position(|s| loud(&s)).unwrap();
        let last = pcm.iter().rposition(|s| loud(&s)).unwrap();
        assert!(first as f64 / 44_100.0 >= 0.5, "{name}: lead {first}");
        assert!((pcm.len() - last) as f64 / 44_100.0 >= 1.0, "{name}: tail");
    }
    assert_eq!(listing(&out).len(), 3);
}

/// MP4 video: each chapter's file from its own chunks (copied, not encoded again), tagged and
/// with its subtitles; together as long as the whole video.
#[test]
fn a_video_splits_into_chapter_mp4_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = book(d);
    let portrait = crate::util::repo("examples/portrait.png");
    let look = [
        "--size",
        "128x128",
        "--framing",
        "head",
        "--subtitles",
        "vtt",
    ];
    let o = talker(d)
        .args(["render", "--json", "--deterministic", "-o"])
        .arg(d.join("whole.mp4"))
        .arg(&book)
        .arg(&portrait)
        .args(look)
        .output()
        .unwrap();
    assert_success(&o);
    let out = d.join("video");
    let split = ["--split", "chapters", "--format", "mp4"];
    let o = talker(d)
        .args(["render", "--json", "--deterministic", "-o"])
        .arg(&out)
        .arg(&book)
        .arg(&portrait)
        .args(look)
        .args(split)
        .output()
        .unwrap();
    assert_success(&o);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["chunks_reused"], report["chunks"], "{report}");
    let mut sum = 0.0;
    for (i, name) in NAMES.iter().enumerate() {
        let path = out.join(format!("{name}.mp4"));
        let p = probe(&path);
        assert_eq!(p["streams"][0]["codec_name"], "h264", "{p}");
        assert_eq!(p["format"]["tags"]["track"], format!("{}/3", i + 1), "{p}");
        assert_eq!(p["chapters"].as_array().unwrap().len(), 1, "{p}");
        assert!(out.join(format!("{name}.vtt")).is_file());
        sum += duration(&path);
    }
    let whole = duration(&d.join("whole.mp4"));
    assert!((sum - whole).abs() < 0.15, "parts {sum} s, whole {whole} s");
}

/// Refused with exit 2 before any work: a split output that is a regular file, no --format,
/// a book without chapters, and a chapter's file that is one of the inputs.
#[test]
fn bad_split_outputs_are_exit_2_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = book(d);
    let fails = |out: &Path, script: &Path, extra: &[&str]| {
        let o = talker(d)
            .args(["render", "--split", "chapters", "-o"])
            .arg(out)
            .arg(script)
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{o:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let file = d.join("book.m4b");
    std::fs::write(&file, b"not a directory").unwrap();
    let e = fails(&file, &book, &["--format", "m4b"]);
    assert!(
        e.contains("is a file") && e.contains("directory path"),
        "{e}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");

    let e = fails(&d.join("out"), &book, &[]);
    assert!(e.contains("--format"), "{e}");

    let flat = d.join("flat.json");
    std::fs::write(&flat, r#"{"segments": [{"text": "No chapters here."}]}"#).unwrap();
    let e = fails(&d.join("flat"), &flat, &["--format", "mp3"]);
    assert!(
        e.contains("has no chapters") && e.contains("\"chapter\""),
        "{e}"
    );
    assert!(!d.join("flat").exists());

    // A lexicon where the second chapter's subtitles would go is never overwritten.
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    let lexicon = out.join("02 - Dawn.srt");
    std::fs::write(&lexicon, r#"{"harbour": "harbor"}"#).unwrap();
    let lex = lexicon.to_str().unwrap();
    let e = fails(
        &out,
        &book,
        &["--format", "m4a", "--subtitles", "srt", "--lexicon", lex],
    );
    assert!(e.contains("is the lexicon"), "{e}");
    assert_eq!(listing(&out), ["02 - Dawn.srt"]);
}
