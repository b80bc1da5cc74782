//! The M4A/M4B track and a video's track encoded in pieces against one encoder over the same
//! signal, both decoded by the ffmpeg CLI: same length, same fidelity, and no step at the joins.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::super::{AudioAhead, AudioFormat, AudioMeta, AudioWriter, Chapter, ChunkWriter};
use super::{assemble_paths, ffprobe, gradient, num, small, stream, temp};

pub(super) const RATE: u32 = 48_000;
/// Where pieces join: every 512 frames of 1024 samples.
const PIECE: usize = 512 * 1024;
/// A voice's rate, which a video's chunks keep.
const VOICE: u32 = 22_050;

/// Speech-like at `rate`: a voiced tone gliding between 90 and 240 Hz with ten harmonics,
/// syllables with hard onsets four times a second, noise bursts (fricatives) and pauses, from a
/// fixed seed; a hand clap lands right on the second join.
pub(super) fn speechlike(n: usize, rate: u32) -> Vec<i16> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut noise = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let mut phase = 0.0f64;
    (0..n)
        .map(|i| {
            let t = i as f64 / f64::from(rate);
            let f0 = 165.0 + 75.0 * (t * 0.7).sin();
            phase += 2.0 * std::f64::consts::PI * f0 / f64::from(rate);
            let voiced: f64 = (1..=10).map(|h| (phase * h as f64).sin() / h as f64).sum();
            let syllable = (t * 4.0).fract();
            let envelope = if syllable < 0.7 {
                (1.0 - syllable / 0.7).powf(0.5)
            } else {
                0.0
            };
            let pause = if (t / 3.0).fract() > 0.85 { 0.0 } else { 1.0 };
            let fricative = if syllable > 0.75 { 0.15 * noise() } else { 0.0 };
            let clap_at = 2 * PIECE * rate as usize / RATE as usize;
            let clap = if (clap_at..clap_at + 400).contains(&i) {
                0.6 * noise()
            } else {
                0.0
            };
            let x = 0.3 * voiced * envelope * pause + fricative * pause + clap;
            (x.clamp(-1.0, 1.0) * 32767.0).round() as i16
        })
        .collect()
}

fn write(path: &Path, pcm: &[i16], threads: usize) {
    let meta = AudioMeta {
        title: Some("Pieces".into()),
        author: None,
        chapters: vec![
            Chapter {
                title: "One".into(),
                start: 0.0,
                end: 20.0,
            },
            Chapter {
                title: "Two".into(),
                start: 20.0,
                end: pcm.len() as f64 / f64::from(RATE),
            },
        ],
        ..AudioMeta::default()
    };
    let mut w = AudioWriter::create(path, AudioFormat::M4b, RATE, &meta, false, threads)
        .expect("create m4b");
    // Pushes of odd sizes, as chunks of speech come.
    for part in pcm.chunks(7_919) {
        w.push(part).expect("push");
    }
    w.finish().expect("finish m4b");
}

/// The file's audio as the ffmpeg CLI decodes it (edit list applied), s16 mono at `RATE`.
pub(super) fn decode(path: &Path) -> Vec<i16> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-f", "s16le", "-ac", "1", "-ar", &RATE.to_string(), "-"])
        .output()
        .expect("run ffmpeg");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// The energy of `want` and of `got - want` over `range`.
fn energies(want: &[i16], got: &[i16], range: std::ops::Range<usize>) -> (f64, f64) {
    let (mut s, mut e) = (0.0f64, 0.0f64);
    for i in range {
        let w = f64::from(want[i]);
        s += w * w;
        e += (w - f64::from(got[i])).powi(2);
    }
    (s, e)
}

/// Signal-to-noise ratio in dB of `got` against `want` over `range`.
fn snr(want: &[i16], got: &[i16], range: std::ops::Range<usize>) -> f64 {
    let (s, e) = energies(want, got, range);
    10.0 * (s.max(1.0) / e.max(1.0)).log10()
}

/// The largest step between neighbouring samples in `range`.
fn step(x: &[i16], range: std::ops::Range<usize>) -> i32 {
    range
        .skip(1)
        .map(|i| (i32::from(x[i]) - i32::from(x[i - 1])).abs())
        .max()
        .unwrap_or(0)
}

/// The fidelity of `pieces` (decoded) against `source` at least that of `serial`, overall and
/// near each join, and no step at a join above the largest of the source's own.
fn check_joins(source: &[i16], serial: &[i16], pieces: &[i16]) {
    let all = 0..source.len();
    let (snr_serial, snr_pieces) = (
        snr(source, serial, all.clone()),
        snr(source, pieces, all.clone()),
    );
    let between = snr(serial, pieces, all.clone());
    eprintln!(
        "SNR against the source: serial {snr_serial:.2} dB, pieces {snr_pieces:.2} dB; pieces against serial {between:.2} dB; the source's largest step {}",
        step(source, all.clone())
    );
    assert!(snr_pieces > snr_serial - 0.5, "pieces lose fidelity");
    let own = step(source, all);
    for join in (1..=3).map(|k| k * PIECE) {
        let near = join - 2048..join + 2048;
        let (s, p, src) = (
            step(serial, near.clone()),
            step(pieces, near.clone()),
            step(source, near.clone()),
        );
        let local = snr(source, pieces, near.clone());
        let local_serial = snr(source, serial, near.clone());
        eprintln!(
            "join at {join}: largest step source {src}, serial {s}, pieces {p}; SNR near it serial {local_serial:.2} dB, pieces {local:.2} dB"
        );
        assert!(
            p <= own,
            "join at {join}: step {p} above the signal's own largest {own}"
        );
        assert!(
            local > local_serial - 3.0,
            "join at {join}: pieces {local:.2} dB against serial {local_serial:.2} dB"
        );
    }
}

#[test]
fn pieces_join_without_a_seam_and_match_one_encoder() {
    let (_dir, serial_path) = temp("serial.m4b");
    let pieces_path = serial_path.with_file_name("pieces.m4b");
    // Three and a half pieces, so there are full pieces, joins and a short last one.
    let source = speechlike(3 * PIECE + PIECE / 2 + 777, RATE);
    write(&serial_path, &source, 1);
    write(&pieces_path, &source, 3);
    let (serial, pieces) = (decode(&serial_path), decode(&pieces_path));
    // Both end on the encoder's last whole frame, as ever.
    assert_eq!(pieces.len(), serial.len(), "decoded lengths");
    assert!(serial.len() >= source.len(), "serial encode is short");
    let (a, b) = (ffprobe(&serial_path, &[]), ffprobe(&pieces_path, &[]));
    assert_eq!(num(&a["format"]["duration"]), num(&b["format"]["duration"]));
    assert_eq!(a["chapters"], b["chapters"]);

    check_joins(&source, &serial, &pieces);
}

#[test]
fn pieces_of_a_short_or_empty_track_are_one_encoder() {
    let (_dir, serial_path) = temp("serial.m4b");
    let pieces_path = serial_path.with_file_name("pieces.m4b");
    for n in [0, 1_000, PIECE] {
        let source = speechlike(n, RATE);
        write(&serial_path, &source, 1);
        write(&pieces_path, &source, 4);
        let read = |p: &Path| std::fs::read(p).expect("read m4b");
        assert!(read(&serial_path) == read(&pieces_path), "{n} samples");
    }
}

/// `pcm` at [`VOICE`] resampled to [`RATE`] by the ffmpeg CLI: what both encoders are fed.
fn resampled(pcm: &[i16]) -> Vec<i16> {
    let mut child = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-f",
            "s16le",
            "-ac",
            "1",
            "-ar",
            &VOICE.to_string(),
        ])
        .args(["-i", "-", "-f", "s16le", "-ar", &RATE.to_string(), "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run ffmpeg");
    let bytes: Vec<u8> = pcm.iter().flat_map(|s| s.to_le_bytes()).collect();
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || stdin.write_all(&bytes).expect("feed ffmpeg"));
    let out = child.wait_with_output().expect("ffmpeg output");
    feeder.join().expect("feeder");
    assert!(out.status.success());
    out.stdout
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// `pcm` as video chunks of uneven lengths (5 fps, on the frame grid the pipeline uses).
fn video_chunks(dir: &Path, pcm: &[i16]) -> Vec<PathBuf> {
    let fps = 5u64;
    let frame_at = |s: usize| (s as u64 * fps + u64::from(VOICE) / 2) / u64::from(VOICE);
    let cuts = [0, 61_111, 200_000, 201_000, 433_333, 700_001, pcm.len()];
    cuts.windows(2)
        .enumerate()
        .map(|(i, w)| {
            let path = dir.join(format!("c{i}.mkv"));
            let frames = frame_at(w[1]) - frame_at(w[0]);
            let audio: Vec<f32> = pcm[w[0]..w[1]]
                .iter()
                .map(|&s| f32::from(s) / 32767.0)
                .collect();
            let video = small(fps as u32);
            let mut c = ChunkWriter::create(&path, &video, VOICE).expect("create chunk");
            let per = audio.len().div_ceil(frames.max(1) as usize).max(1);
            let mut blocks = audio.chunks(per);
            for f in 0..frames {
                if let Some(block) = blocks.next() {
                    c.write_audio(block).expect("audio");
                }
                c.write_frame(&gradient(video.width, video.height, f))
                    .expect("frame");
            }
            blocks
                .try_for_each(|b| c.write_audio(b))
                .expect("audio tail");
            c.finish().expect("finish chunk");
            path
        })
        .collect()
}

#[test]
fn a_video_track_in_pieces_joins_without_a_seam_and_matches_one_encoder() {
    let (dir, serial_path) = temp("serial.m4a");
    let mp4 = serial_path.with_file_name("pieces.mp4");
    // Three and a half pieces once resampled to 48 kHz.
    let source = speechlike((3 * PIECE + PIECE / 2) * 147 / 320 + 777, VOICE);
    let chunks = video_chunks(dir.path(), &source);
    // The serial encode: one encoder on one thread over the same speech.
    let mut w = AudioWriter::create(
        &serial_path,
        AudioFormat::M4a,
        VOICE,
        &AudioMeta::default(),
        false,
        1,
    )
    .expect("create m4a");
    for part in source.chunks(7_919) {
        w.push(part).expect("push");
    }
    w.finish().expect("finish m4a");
    assemble_paths(&chunks, &mp4, &super::super::OutputMeta::default()).expect("assemble");
    let (serial, pieces) = (decode(&serial_path), decode(&mp4));
    assert_eq!(pieces.len(), serial.len(), "decoded lengths");
    let (a, b) = (ffprobe(&serial_path, &[]), ffprobe(&mp4, &[]));
    let duration = |p: &serde_json::Value| num(&stream(p, "audio")["duration"]);
    assert_eq!(duration(&a), duration(&b));
    let mut source = resampled(&source);
    source.truncate(serial.len());
    check_joins(&source, &serial, &pieces);

    // Handed over ahead (as a render does), on other threads: the very same file.
    let again = mp4.with_file_name("again.mp4");
    let mut audio = AudioAhead::start(&again, 5);
    chunks[..3].iter().for_each(|c| audio.add(c));
    let refs: Vec<_> = chunks.iter().cloned().map(Into::into).collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let meta = super::super::OutputMeta::default();
    super::super::assemble(&refs, &again, &meta, audio, &stop).expect("assemble again");
    let read = |p: &Path| std::fs::read(p).expect("read mp4");
    assert!(
        read(&mp4) == read(&again),
        "the track depends on timing or threads"
    );
}
