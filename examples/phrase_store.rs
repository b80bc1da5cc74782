//! How long storing a render's fresh phrases in the cache takes: one at a time, as the speech
//! loop did (`Cache::put_phrase` per phrase: FLAC on the loop's thread, one transaction each),
//! against together (`Cache::put_phrases` per batch: FLAC on every core, one transaction). Real
//! speech: the first `SPEECH` held-out sentences of tests/data/gpu/ids.json spoken by ONNX
//! Runtime on the CPU, stored again and again under distinct keys into fresh caches; the two
//! ways alternate, `ROUNDS` times each, in one process.
//!
//! `cargo run --release --example phrase_store -- [PHRASES] [BATCH] [ROUNDS] [SPEECH]`
//! (defaults 400, 25, 3, 8); JSON on stdout.

use std::error::Error;
use std::path::Path;
use std::time::Instant;

use talker::assets::Assets;
use talker::cache::{Cache, KeyBuilder};
use talker::tts::onnx::PiperModel;
use talker::tts::voice::{Scales, VoiceFiles};
use talker::tts::{Speech, to_pcm16};

const QUIET: Scales = Scales {
    noise: 0.0,
    length: 1.0,
    noise_w: 0.0,
};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let arg = |i: usize, d: usize| args.get(i).copied().unwrap_or(d);
    let (phrases, batch, rounds, spoken) = (arg(0, 400), arg(1, 25).max(1), arg(2, 3), arg(3, 8));

    let ids: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(Path::new(
        "tests/data/gpu/ids.json",
    ))?)?;
    let held = ids["calibration"].as_u64().unwrap_or(0) as usize;
    let sentences: Vec<Vec<i64>> = ids["sentences"]
        .as_array()
        .map(|a| {
            a.iter()
                .skip(held)
                .take(spoken.max(1))
                .map(|s| serde_json::from_value(s["ids"].clone()))
                .collect()
        })
        .transpose()?
        .unwrap_or_default();
    let assets = Assets::locate(None);
    let voice = VoiceFiles::resolve(ids["voice"].as_str().unwrap_or(""), &assets.voices_dir())?;
    let mut ort = PiperModel::load(&voice, &assets.onnxruntime_library()?, 2)?;
    let mut speech = Vec::new();
    for s in &sentences {
        let raw = ort.synthesize(&[s.as_slice()], QUIET, 0)?;
        speech.push(Speech {
            sample_rate: ort.config.sample_rate,
            pcm: to_pcm16(&raw[0].pcm),
            phones: Vec::new(),
        });
    }
    let audio_s: f64 = (0..phrases)
        .map(|i| speech[i % speech.len()].pcm.len() as f64 / f64::from(ort.config.sample_rate))
        .sum();
    let keys: Vec<_> = (0..phrases)
        .map(|i| KeyBuilder::new("phrase").str("n", &i.to_string()).finish())
        .collect();

    let (mut one, mut together) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let dir = tempfile::tempdir()?;
        let cache = Cache::open(dir.path())?;
        let t = Instant::now();
        for (i, k) in keys.iter().enumerate() {
            cache.put_phrase(*k, &speech[i % speech.len()])?;
        }
        one.push(t.elapsed().as_secs_f64());

        let dir = tempfile::tempdir()?;
        let cache = Cache::open(dir.path())?;
        let t = Instant::now();
        for (n, part) in keys.chunks(batch).enumerate() {
            let items: Vec<_> = part
                .iter()
                .enumerate()
                .map(|(j, k)| (*k, &speech[(n * batch + j) % speech.len()]))
                .collect();
            cache.put_phrases(&items)?;
        }
        together.push(t.elapsed().as_secs_f64());
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (m1, m2) = (median(&mut one.clone()), median(&mut together.clone()));
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({
            "phrases": phrases, "batch": batch, "rounds": rounds, "audio_seconds": audio_s,
            "cores": std::thread::available_parallelism().map_or(1, usize::from),
            "one_at_a_time_seconds": one, "together_seconds": together,
            "one_at_a_time_median_s": m1, "together_median_s": m2,
            "one_at_a_time_x_real_time": audio_s / m1, "together_x_real_time": audio_s / m2,
            "speedup": m1 / m2,
        }))?
    );
    Ok(())
}
