//! Encode and assembly speed of the media module on talking-head-like content.
//!
//! Input: examples/portrait.png. Output: fps of `ChunkWriter` (veryfast, crf 20) at
//! 512x512 and 1280x720 on 1 and 2 threads, and the time `assemble` takes for 10 chunks
//! of 5 s. Content: a still image with a 100x60 patch that moves and changes every
//! frame, like a mouth. Files go to a temp directory that is removed at the end.
//!
//! Run: `cargo run --release --example media_bench [frames]`, or `... media_bench assembly` for
//! assembly's cost per chunk alone.

use std::path::Path;
use std::time::Instant;

use std::sync::atomic::AtomicBool;

use talker::media::{AudioAhead, ChunkRef, ChunkWriter, OutputMeta, VideoSettings, assemble};

const RATE: u32 = 22050;
const FPS: u32 = 25;

/// The still image: the portrait centred on a soft gradient.
fn still(width: u32, height: u32) -> Vec<u8> {
    let portrait = image::open("examples/portrait.png")
        .expect("examples/portrait.png")
        .to_rgb8();
    let (pw, ph) = portrait.dimensions();
    let (ox, oy) = (
        (width.saturating_sub(pw)) / 2,
        (height.saturating_sub(ph)) / 2,
    );
    let mut rgb = Vec::with_capacity((width * height * 3) as usize);
    for y in 0..height {
        for x in 0..width {
            let inside = x >= ox && y >= oy && x - ox < pw && y - oy < ph;
            if inside {
                rgb.extend_from_slice(&portrait.get_pixel(x - ox, y - oy).0);
            } else {
                rgb.extend_from_slice(&[(40 + x / 16) as u8, (60 + y / 16) as u8, 90]);
            }
        }
    }
    rgb
}

/// Draws frame `i`: the still plus a 100x60 "mouth" that opens, closes and drifts.
fn frame(still: &[u8], width: u32, height: u32, i: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(still);
    let (pw, ph) = (100i64, 60i64);
    let cx = i64::from(width) / 2 - pw / 2 + ((i % 20) as i64 - 10) / 2;
    let cy = i64::from(height) / 2 + 20 + ((i % 14) as i64 - 7) / 2;
    let open = 0.2 + 0.8 * ((i as f64 * 0.7).sin() * 0.5 + 0.5);
    for y in 0..ph {
        for x in 0..pw {
            let (dx, dy) = (
                (x - pw / 2) as f64 / 50.0,
                (y - ph / 2) as f64 / (30.0 * open),
            );
            let idx = (((cy + y) * i64::from(width) + cx + x) * 3) as usize;
            if dx * dx + dy * dy < 1.0 {
                out[idx] = 90;
                out[idx + 1] = 20;
                out[idx + 2] = 30;
            } else {
                out[idx] = out[idx].saturating_add(10);
            }
        }
    }
}

/// Writes one chunk of `frames` frames plus matching audio; returns seconds spent.
fn encode(path: &Path, video: &VideoSettings, still: &[u8], frames: u64) -> f64 {
    let mut buf = Vec::new();
    let per_frame = (RATE / FPS) as usize;
    let tone: Vec<f32> = (0..per_frame)
        .map(|t| 0.3 * (t as f32 * 0.12).sin())
        .collect();
    let mut busy = 0.0;
    let start = Instant::now();
    let mut w = ChunkWriter::create(path, video, RATE).expect("create");
    busy += start.elapsed().as_secs_f64();
    for i in 0..frames {
        frame(still, video.width, video.height, i, &mut buf);
        let t = Instant::now();
        w.write_audio(&tone).expect("audio");
        w.write_frame(&buf).expect("frame");
        busy += t.elapsed().as_secs_f64();
    }
    let t = Instant::now();
    w.finish().expect("finish");
    busy + t.elapsed().as_secs_f64()
}

/// Assembly's cost per chunk: the same 200 s of 720x720 video and audio as 200 chunk files of
/// 1 s and as 20 of 10 s; the difference is what each extra chunk costs (the bytes and the AAC
/// encoding are the same). Best of three runs each.
fn assembly_per_chunk(dir: &Path) {
    let (w, h) = (720, 720);
    let still = still(w, h);
    let video = VideoSettings {
        width: w,
        height: h,
        threads: 2,
        ..VideoSettings::default()
    };
    let copies = |seconds: u32, n: usize| -> Vec<ChunkRef> {
        let first = dir.join(format!("c{seconds}.mkv"));
        encode(&first, &video, &still, u64::from(seconds * FPS));
        (0..n)
            .map(|i| {
                let p = dir.join(format!("c{seconds}-{i}.mkv"));
                std::fs::copy(&first, &p).expect("copy chunk");
                ChunkRef::from(p)
            })
            .collect()
    };
    let best = |chunks: &[ChunkRef]| -> f64 {
        let out = dir.join("per-chunk.mp4");
        (0..3)
            .map(|_| {
                let t = Instant::now();
                assemble(
                    chunks,
                    &out,
                    &OutputMeta::default(),
                    AudioAhead::start(&out, 2),
                    &AtomicBool::new(false),
                )
                .expect("assemble");
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let (many, few) = (copies(1, 200), copies(10, 20));
    let (t_many, t_few) = (best(&many), best(&few));
    println!(
        "assemble 200 s at 720x720: 200 chunks of 1 s {t_many:.2} s, 20 chunks of 10 s {t_few:.2} s: \
         {:.2} ms per extra chunk",
        (t_many - t_few) * 1000.0 / 180.0
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    if std::env::args().nth(1).as_deref() == Some("assembly") {
        assembly_per_chunk(dir.path());
        return;
    }
    let frames: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("frames"))
        .unwrap_or(250);
    for (w, h) in [(512, 512), (1280, 720)] {
        let still = still(w, h);
        for threads in [1, 2] {
            let video = VideoSettings {
                width: w,
                height: h,
                threads,
                ..VideoSettings::default()
            };
            let path = dir.path().join(format!("bench-{w}x{h}-{threads}.mkv"));
            let secs = encode(&path, &video, &still, frames);
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            println!(
                "encode {w}x{h} veryfast crf20 threads={threads}: {frames} frames in {secs:.2} s = {:.0} fps ({} KiB)",
                frames as f64 / secs,
                size / 1024
            );
        }
    }
    for (w, h) in [(512, 512), (1280, 720)] {
        let still = still(w, h);
        let video = VideoSettings {
            width: w,
            height: h,
            threads: 2,
            ..VideoSettings::default()
        };
        let chunks: Vec<ChunkRef> = (0..10)
            .map(|i| {
                let p = dir.path().join(format!("chunk-{w}-{i}.mkv"));
                encode(&p, &video, &still, u64::from(5 * FPS));
                ChunkRef::from(p)
            })
            .collect();
        let out = dir.path().join(format!("out-{w}.mp4"));
        let t = Instant::now();
        let info = assemble(
            &chunks,
            &out,
            &OutputMeta::default(),
            AudioAhead::start(&out, 2),
            &AtomicBool::new(false),
        )
        .expect("assemble");
        println!(
            "assemble 10 chunks x 5 s at {w}x{h}: {:.2} s ({} frames, {:.1} s, {} KiB)",
            t.elapsed().as_secs_f64(),
            info.frames,
            info.duration_s,
            info.bytes / 1024
        );
    }
}
