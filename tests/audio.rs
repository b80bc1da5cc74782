//! Loudness (`--loudness`), `talker audio check` and MP3 output, held against an independent
//! meter: FFmpeg's `ebur128` and `astats` filters, on rendered books and on files made here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::{assert_success, listing, probe, render_deterministic as render, talker};

/// FFmpeg's figures for `path`: integrated LUFS, true peak dBTP, RMS dB, sample peak dB and the
/// RMS trough (50 ms time constant) in dB.
#[derive(Debug)]
struct Reference {
    integrated: f64,
    true_peak: f64,
    rms: f64,
    peak: f64,
    trough: f64,
}

fn reference(path: &Path) -> Reference {
    let o = Command::new("ffmpeg")
        .args(["-hide_banner", "-nostats", "-i"])
        .arg(path)
        .args([
            "-af",
            "ebur128=peak=true,astats=length=0.05:measure_perchannel=none",
            "-f",
            "null",
            "-",
        ])
        .output()
        .expect("ffmpeg is installed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    // The ebur128 summary comes after the per-frame lines; astats' "Overall" block names its own.
    let summary = &log[log.rfind("Summary:").expect("an ebur128 summary")..];
    let after = |text: &str, key: &str| -> f64 {
        let at = text.find(key).unwrap_or_else(|| panic!("{key} in {log}")) + key.len();
        let word = text[at..].split_whitespace().next().unwrap();
        if word == "-inf" {
            -150.0
        } else {
            word.parse().unwrap_or_else(|_| panic!("{key} {word}"))
        }
    };
    let overall = &log[log.find("Overall").expect("astats' overall block")..];
    Reference {
        integrated: after(summary, "I:"),
        true_peak: after(&summary[summary.find("True peak:").unwrap()..], "Peak:"),
        rms: after(overall, "RMS level dB:"),
        peak: after(overall, "Peak level dB:"),
        trough: after(overall, "RMS trough dB:"),
    }
}

fn check(dir: &Path, files: &[&Path], standard: &str) -> (Output, serde_json::Value) {
    let o = talker(dir)
        .args(["audio", "check", "--json", "--standard", standard])
        .args(files)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o, v)
}

/// talker's figures of one checked file agree with FFmpeg's within 0.5 LU / 0.5 dB.
fn agrees(figures: &serde_json::Value, r: &Reference) {
    let pairs = [
        ("integrated_lufs", r.integrated),
        ("true_peak_db", r.true_peak),
        ("rms_db", r.rms),
        ("sample_peak_db", r.peak),
        ("noise_floor_db", r.trough),
    ];
    for (key, theirs) in pairs {
        let ours = figures[key].as_f64().unwrap();
        // Below -120 dB both say "nothing there", whatever the exact figure.
        let close = (ours - theirs).abs() <= 0.5 || (ours < -120.0 && theirs < -120.0);
        assert!(
            close,
            "{key}: talker {ours}, ffmpeg {theirs}\n{figures}\n{r:?}"
        );
    }
}

/// A mono 16-bit WAV at `rate` of the samples `f(t)` gives for `seconds`, clipped to ±1.
fn wav(path: &Path, rate: u32, seconds: f64, f: impl Fn(f64, usize) -> f64) -> PathBuf {
    let n = (seconds * f64::from(rate)) as usize;
    let mut bytes = Vec::with_capacity(44 + 2 * n);
    let data = (2 * n) as u32;
    bytes.extend_from_slice(b"RIFF");
    bytes.extend_from_slice(&(36 + data).to_le_bytes());
    bytes.extend_from_slice(b"WAVEfmt ");
    bytes.extend_from_slice(&16u32.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&rate.to_le_bytes());
    bytes.extend_from_slice(&(rate * 2).to_le_bytes());
    bytes.extend_from_slice(&2u16.to_le_bytes());
    bytes.extend_from_slice(&16u16.to_le_bytes());
    bytes.extend_from_slice(b"data");
    bytes.extend_from_slice(&data.to_le_bytes());
    for i in 0..n {
        let x = f(i as f64 / f64::from(rate), i).clamp(-1.0, 1.0);
        bytes.extend_from_slice(&((x * 32767.0).round() as i16).to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
    path.to_path_buf()
}

fn sine(t: f64, amplitude: f64) -> f64 {
    amplitude * (2.0 * std::f64::consts::PI * 997.0 * t).sin()
}

/// Deterministic white noise in ±a (a small LCG: the test needs no crate for it).
fn noise(i: usize, a: f64) -> f64 {
    let x = (i as u64)
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    ((x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * a
}

fn failed(v: &serde_json::Value, file: usize) -> Vec<String> {
    v["files"][file]["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["pass"] == false)
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn check_agrees_with_ffmpeg_on_a_sine_clipped_audio_and_a_loud_noise_floor() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // -16 dBFS peak at 997 Hz: -19.0 LUFS (BS.1770), -19.0 dB RMS; a podcast's mono target.
    let a = 10f64.powf(-16.0 / 20.0);
    let tone = wav(&d.join("tone.wav"), 44_100, 8.0, |t, _| sine(t, a));
    // Twice full scale, clipped: peak 0 dBFS.
    let clipped = wav(&d.join("clipped.wav"), 44_100, 4.0, |t, _| sine(t, 2.0));
    // Room tone, a second of tone, room tone: the "room" is noise at about -40 dB RMS.
    let room = 10f64.powf(-40.0 / 20.0) * 3f64.sqrt();
    let noisy = wav(&d.join("noisy.wav"), 44_100, 5.0, |t, i| {
        let speech = if (2.0..3.0).contains(&t) {
            sine(t, 0.3)
        } else {
            0.0
        };
        speech + noise(i, room)
    });

    let (o, v) = check(d, &[&tone], "podcast");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let f = &v["files"][0]["figures"];
    assert!(
        (f["integrated_lufs"].as_f64().unwrap() + 19.0).abs() < 0.1,
        "{f}"
    );
    assert!((f["rms_db"].as_f64().unwrap() + 19.0).abs() < 0.05, "{f}");
    agrees(f, &reference(&tone));

    let (o, v) = check(d, &[&tone, &clipped, &noisy], "acx");
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("3 of 3 files miss the acx standard"));
    for (i, path) in [&tone, &clipped, &noisy].iter().enumerate() {
        agrees(&v["files"][i]["figures"], &reference(path));
    }
    assert!(failed(&v, 1).contains(&"peak".to_owned()), "{v}");
    assert!(failed(&v, 2).contains(&"noise_floor".to_owned()), "{v}");
    // -40 dB, or 2 dB under while the running RMS settles at the start.
    let floor = v["files"][2]["figures"]["noise_floor_db"].as_f64().unwrap();
    assert!((-42.5..=-39.5).contains(&floor), "{floor}");

    // People get a table: each rule, its value, pass or FAIL.
    let o = talker(d)
        .args(["audio", "check", "--standard", "broadcast"])
        .arg(&tone)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("integrated") && text.contains("FAIL") && text.contains("-19.0"),
        "{text}"
    );
}

#[test]
fn unreadable_input_is_exit_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = d.join("notes.wav");
    std::fs::write(&text, "not audio at all").unwrap();
    let tone = wav(&d.join("tone.wav"), 22_050, 1.0, |t, _| sine(t, 0.5));
    for bad in [d.join("missing.mp3"), text, d.to_path_buf()] {
        let (o, _) = check(d, &[&tone, &bad], "acx");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {stderr}", bad.display());
        assert!(stderr.contains(&bad.display().to_string()), "{stderr}");
    }
    // A video with --loudness other than off is refused before any work.
    let script = d.join("s.txt");
    std::fs::write(&script, "Hello there.\n").unwrap();
    let before = listing(d);
    let o = talker(d)
        .args(["render", "--loudness", "podcast", "-o"])
        .arg(d.join("s.mp4"))
        .arg(&script)
        .arg(crate::util::repo("examples/portrait.png"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--loudness podcast is for audio-only"));
    assert_eq!(listing(d), before);
}

const BOOK: &str = "Chapter 1\n\nThe lighthouse keeper climbed the stairs at dusk. She lit the lamp and watched the ships.\n\nChapter 2\n\nMorning came slowly over the harbour. The gulls were loud, and the bakers were already at work.\n";

const BOOK_JSON: &str = r#"{"title": "The Keeper", "author": "Ada Writer", "segments": [
    {"chapter": "One", "text": "The lighthouse keeper climbed the stairs at dusk. She lit the lamp and watched the ships."},
    {"chapter": "Two", "text": "Morning came slowly over the harbour. The gulls were loud, and the bakers were already at work."}]}"#;

#[test]
fn an_acx_mp3_passes_acx_and_every_meter_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = d.join("book.json");
    std::fs::write(&book, BOOK_JSON).unwrap();
    let mp3 = d.join("book.mp3");
    // ACX is the default for audio-only outputs.
    let report = render(d, &book, &mp3, &["--subtitles", "srt"]);
    let l = &report["loudness"];
    assert_eq!(l["standard"], "acx", "{report}");
    let missed: Vec<&serde_json::Value> = l["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["pass"] == false)
        .collect();
    assert!(missed.is_empty(), "{l}");
    assert!(l["gain_db"].as_f64().unwrap().abs() < 30.0, "{l}");

    let p = probe(&mp3);
    let s = &p["streams"][0];
    assert_eq!(s["codec_name"], "mp3");
    assert_eq!(s["sample_rate"], "44100");
    assert_eq!(s["channels"], 1);
    assert_eq!(s["bit_rate"], "192000");
    let tags = &p["format"]["tags"];
    assert_eq!(tags["title"], "The Keeper", "{p}");
    assert_eq!(tags["album"], "The Keeper", "{p}");
    assert_eq!(tags["artist"], "Ada Writer", "{p}");
    let chapters = p["chapters"].as_array().unwrap();
    assert_eq!(chapters.len(), 2, "{p}");
    assert_eq!(chapters[0]["start_time"], "0.000000", "{p}");

    let (o, v) = check(d, &[&mp3], "acx");
    assert_eq!(o.status.code(), Some(0), "{v}");
    let f = &v["files"][0]["figures"];
    agrees(f, &reference(&mp3));
    // What the render measured before the encoder is what the file holds.
    for key in ["integrated_lufs", "rms_db"] {
        let (ours, file) = (l["after"][key].as_f64().unwrap(), f[key].as_f64().unwrap());
        assert!(
            (ours - file).abs() <= 0.5,
            "{key}: report {ours}, file {file}"
        );
    }
    let lead = f["lead_seconds"].as_f64().unwrap();
    assert!((0.5..=1.0).contains(&lead), "{lead}");
    // The cues moved with the room tone: the first sentence starts after it.
    let srt = std::fs::read_to_string(d.join("book.srt")).unwrap();
    let first = srt.lines().nth(1).unwrap();
    let ms: f64 =
        first[6..8].parse::<f64>().unwrap() + first[9..12].parse::<f64>().unwrap() / 1000.0;
    assert!((0.3..=1.0).contains(&ms), "{first}");
}

#[test]
fn podcast_broadcast_and_off_on_m4b_and_wav() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = d.join("book.txt");
    std::fs::write(&book, BOOK).unwrap();
    for standard in ["podcast", "broadcast"] {
        let out = d.join(format!("{standard}.m4b"));
        let report = render(d, &book, &out, &["--loudness", standard]);
        assert_eq!(report["loudness"]["standard"], standard);
        assert_eq!(probe(&out)["streams"][0]["sample_rate"], "48000");
        let (o, v) = check(d, &[&out], standard);
        assert_eq!(o.status.code(), Some(0), "{standard}: {v}");
        agrees(&v["files"][0]["figures"], &reference(&out));
    }
    // Off: the speech as the voice made it, no figures; ACX on WAV warns about its rate.
    let off = d.join("off.wav");
    let report = render(d, &book, &off, &["--loudness", "off"]);
    assert!(report["loudness"].is_null(), "{report}");
    let o = talker(d)
        .args(["render", "--json", "--deterministic", "-o"])
        .arg(d.join("acx.wav"))
        .arg(&book)
        .output()
        .unwrap();
    assert_success(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("sample_rate is 22050.00 Hz, must be 44100"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (_, v) = check(d, &[&off, &d.join("acx.wav")], "acx");
    assert_eq!(failed(&v, 1), ["sample_rate"], "{v}");
    let (plain, acx) = (&v["files"][0]["figures"], &v["files"][1]["figures"]);
    assert!(
        plain["noise_floor_db"].as_f64().unwrap() < -100.0,
        "{plain}"
    );
    let floor = acx["noise_floor_db"].as_f64().unwrap();
    assert!((-75.0..=-66.0).contains(&floor), "the room tone: {acx}");
}

/// Subtitle cues of an SRT file: (start, end, text), times in seconds.
pub(crate) fn srt_cues(path: &Path) -> Vec<(f64, f64, String)> {
    let seconds = |t: &str| {
        let (hms, ms) = t.trim().split_once(',').unwrap();
        let v: Vec<f64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
        v[0] * 3600.0 + v[1] * 60.0 + v[2] + ms.parse::<f64>().unwrap() / 1000.0
    };
    std::fs::read_to_string(path)
        .unwrap()
        .split("\n\n")
        .filter_map(|block| {
            let mut lines = block.lines().skip(1);
            let (start, end) = lines.next()?.split_once("-->")?;
            let text: Vec<&str> = lines.collect();
            Some((seconds(start), seconds(end), text.join(" ")))
        })
        .collect()
}

/// `<break>` in a JSON segment and in a Markdown book is silence of that length between the
/// cues around it; other tags are dropped, and neither shows in the subtitles.
#[test]
fn breaks_are_silence_and_no_tag_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = d.join("s.json");
    std::fs::write(
        &script,
        r#"{"segments": [
            {"text": "The first part is here. <break time=\"2.5s\"/> The second part follows the pause."},
            {"text": "A <emphasis>marked</emphasis> word.<break time=\"700ms\"/>", "pause_ms": 0},
            {"text": "The end."}]}"#,
    )
    .unwrap();
    let wav = d.join("s.wav");
    render(
        d,
        &script,
        &wav,
        &["--loudness", "off", "--subtitles", "srt"],
    );
    let cues = srt_cues(&wav.with_extension("srt"));
    let texts: Vec<&str> = cues.iter().map(|c| c.2.as_str()).collect();
    assert_eq!(
        texts,
        [
            "The first part is here.",
            "The second part follows the pause.",
            "A marked word.",
            "The end."
        ]
    );
    let gap = |i: usize| cues[i + 1].0 - cues[i].1;
    assert!(gap(0) >= 2.5 && gap(0) < 3.2, "{cues:?}");
    assert!(gap(2) >= 0.7 && gap(2) < 1.3, "{cues:?}");
    let audio = crate::util::decode_audio(&wav, 22050);
    let quiet =
        &audio[(cues[0].1 * 22050.0) as usize + 2205..(cues[1].0 * 22050.0) as usize - 2205];
    let rms = (quiet.iter().map(|x| x * x).sum::<f32>() / quiet.len() as f32).sqrt();
    assert!(rms < 1e-3, "the pause is not silent: rms {rms}");

    let book = d.join("b.md");
    std::fs::write(
        &book,
        "# One\n\nBefore the pause. <break time=\"1500ms\"/> After the pause.\n",
    )
    .unwrap();
    let wav = d.join("b.wav");
    render(d, &book, &wav, &["--loudness", "off", "--subtitles", "srt"]);
    let cues = srt_cues(&wav.with_extension("srt"));
    let at = cues
        .iter()
        .position(|c| c.2 == "Before the pause.")
        .unwrap();
    assert_eq!(cues[at + 1].2, "After the pause.", "{cues:?}");
    assert!(cues[at + 1].0 - cues[at].1 >= 1.5, "{cues:?}");
}

/// A break talker cannot read is exit 2 naming the file, the place and the fix, before any work.
#[test]
fn a_bad_break_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = d.join("s.json");
    std::fs::write(
        &script,
        r#"{"segments": [{"text": "Fine."}, {"text": "Wait <break time=\"3\"/> here."}]}"#,
    )
    .unwrap();
    let book = d.join("b.txt");
    std::fs::write(
        &book,
        "Chapter 1\n\nA pause <break time=\"2 minutes\"/> here.\n",
    )
    .unwrap();
    for (input, place, fix) in [
        (&script, "segments[1].text", "without a unit"),
        (&book, "paragraph 2", "not a length of time"),
    ] {
        let out = d.join("out.wav");
        let o = talker(d)
            .args(["render", "-o"])
            .arg(&out)
            .arg(input)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(&input.display().to_string()), "{err}");
        assert!(err.contains(place) && err.contains(fix), "{err}");
        assert!(!out.exists());
    }
}
