//! Sync and stability of the rendered mouth, measured from the frames' pixels: the 68-point landmark
//! net is run again on every decoded frame of a real render.

use std::sync::atomic::AtomicBool;

use talker::assets::Assets;
use talker::cache::Cache;
use talker::chunk::{self, frame_quantum};
use talker::face::FaceModels;
use talker::lipsync;
use talker::look::Framing;
use talker::pipeline::{CacheLocation, RenderOptions, chunk_audio, prepare, speak};
use talker::progress::{Clock, NoProgress};
use talker::tts::batch::BatchLimits;

use crate::util::*;

const TEXT: &str = r#"{"segments": [
    {"text": "Maybe we should open the window.", "pause_ms": 500},
    {"text": "A warm breeze would be lovely, and the papers can wait.", "pause_ms": 500},
    {"text": "Mm, yes. Let us do that.", "pause_ms": 500}]}"#;

fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

/// Residual spread of `v` after removing its straight-line trend (slow head sway).
fn detrended_std(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let xs: Vec<f64> = (0..v.len()).map(|i| i as f64).collect();
    let (mx, my) = (xs.iter().sum::<f64>() / n, v.iter().sum::<f64>() / n);
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    let slope = xs
        .iter()
        .zip(v)
        .map(|(x, y)| (x - mx) * (y - my))
        .sum::<f64>()
        / sxx.max(1e-9);
    let res: Vec<f64> = xs
        .iter()
        .zip(v)
        .map(|(x, y)| y - (my + slope * (x - mx)))
        .collect();
    (res.iter().map(|r| r * r).sum::<f64>() / n).sqrt()
}

#[test]
fn rendered_mouth_follows_the_plan_and_the_audio_and_holds_still() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "sync.json", TEXT);
    let opts = RenderOptions {
        script,
        portrait: repo("examples/portrait.png"),
        output: dir.path().join("unused.mp4"),
        assets: Assets::locate(None),
        cache: CacheLocation::Dir(dir.path().join("cache")),
        voice: None,
        size: None,
        fps: None,
        framing: Framing::Full,
        still: false,
        seed: 3,
        crf: 18,
        preset: "veryfast".into(),
        threads: 1,
        noise: false,
        batch: BatchLimits::SINGLE,
        extra: Default::default(),
    };
    let clock = Clock::default();
    let mut p = prepare(&opts, &NoProgress, &clock).unwrap();
    let cache = Cache::open(&dir.path().join("cache")).unwrap();
    let sr = p.plan.sample_rate;
    let fps = p.look.video.fps;
    let all: Vec<usize> = (0..p.plan.chunks.len()).collect();
    let speeches = speak(&p.plan, &all, &mut p.engine, &cache, &NoProgress, &clock).unwrap();
    let models = FaceModels::load(&assets().face_dir()).unwrap();
    let (w, h) = (p.look.rig.width() as usize, p.look.rig.height() as usize);
    let iod = {
        let l = &p.look.landmarks;
        let c = |r: std::ops::Range<usize>| {
            let n = r.len() as f32;
            r.fold([0.0f32; 2], |a, i| [a[0] + l[i][0] / n, a[1] + l[i][1] / n])
        };
        let (a, b) = (c(36..42), c(42..48));
        f64::from(((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt())
    };
    let dist = |m: &[[f32; 2]; 68], i: usize, j: usize| {
        f64::from(((m[i][0] - m[j][0]).powi(2) + (m[i][1] - m[j][1]).powi(2)).sqrt())
    };

    // Every chunk is rendered and measured; the series are joined in order, and held shapes are
    // looked for inside each chunk (a chunk boundary is not a held shape).
    let (mut measured, mut planned, mut env) = (Vec::new(), Vec::new(), Vec::new());
    let mut marks: Vec<[[f32; 2]; 68]> = Vec::new();
    let mut runs = Vec::new();
    for c in all {
        let audio = chunk_audio(&p.plan, c, &speeches, frame_quantum(sr, fps));
        let track = lipsync::plan(&audio.phones, sr);
        let path = dir.path().join(format!("chunk{c}.mkv"));
        let info = chunk::render(
            &p.look,
            &audio,
            sr,
            &path,
            &AtomicBool::new(false),
            &clock,
            || {},
        )
        .unwrap();
        let video = decode_frames(&path, w, h);
        let frames = video.len();
        assert_eq!(frames as u64, info.frames);
        let first = image::RgbImage::from_raw(w as u32, h as u32, video[0].clone()).unwrap();
        let bbox = models.detect(&first)[0].bbox;
        let offset = marks.len();
        for f in &video {
            let m = models
                .landmarks(
                    &image::RgbImage::from_raw(w as u32, h as u32, f.clone()).unwrap(),
                    bbox,
                )
                .points;
            // Opening: the three inner-lip gaps, in inter-ocular distances.
            measured.push((dist(&m, 61, 67) + dist(&m, 62, 66) + dist(&m, 63, 65)) / (3.0 * iod));
            marks.push(m);
        }
        let poses: Vec<_> = (0..frames)
            .map(|k| track.pose_at(k as f64 / f64::from(fps)))
            .collect();
        planned.extend(poses.iter().map(|pose| f64::from(pose.open)));
        // Audio envelope: RMS per frame.
        let per = audio.pcm.len() / frames;
        env.extend(audio.pcm.chunks(per).take(frames).map(|c| {
            (c.iter().map(|&s| f64::from(s) * f64::from(s)).sum::<f64>() / c.len() as f64).sqrt()
        }));
        let mut start = 0;
        for k in 1..=frames {
            if k == frames || poses[k].distance(&poses[k - 1]) > 1e-6 {
                if k - start >= 4 {
                    runs.push(offset + start..offset + k);
                }
                start = k;
            }
        }
    }
    let frames = marks.len();
    let r = pearson(&measured, &planned);
    println!(
        "opening: measured vs planned r = {r:.3} over {} frames",
        frames
    );
    assert!(
        r >= 0.8,
        "measured mouth opening correlates only {r:.3} with the plan"
    );

    // The audio envelope against the measured opening: the best lag is 0 ± 1 frame.
    let lag_r = |lag: i64| {
        let pairs: Vec<(f64, f64)> = (0..frames as i64)
            .filter_map(|k| {
                let j = k + lag;
                (j >= 0 && (j as usize) < env.len())
                    .then(|| (measured[k as usize], env[j as usize]))
            })
            .collect();
        let (a, b): (Vec<f64>, Vec<f64>) = pairs.into_iter().unzip();
        pearson(&a, &b)
    };
    let best = (-6..=6)
        .max_by(|&a, &b| lag_r(a).total_cmp(&lag_r(b)))
        .unwrap();
    println!(
        "audio-envelope cross-correlation peaks at lag {best} frames (r = {:.3})",
        lag_r(best)
    );
    assert!(best.abs() <= 1, "mouth and audio are {best} frames apart");

    // Held shapes: wherever the plan holds the mouth still for 4+ frames, the lips' landmarks stay
    // put (after removing slow head sway).
    let mut worst = 0.0f64;
    let held = runs.len();
    for run in runs {
        for i in 48..68 {
            for axis in 0..2 {
                let v: Vec<f64> = marks[run.clone()]
                    .iter()
                    .map(|m| f64::from(m[i][axis]))
                    .collect();
                worst = worst.max(detrended_std(&v));
            }
        }
    }
    println!("lip landmark jitter during {held} held shapes: worst {worst:.3} px");
    assert!(held >= 2, "the sentence has held shapes to check");
    assert!(
        worst < 0.5,
        "lip landmarks jitter {worst:.3} px during a held shape"
    );
}
