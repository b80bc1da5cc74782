//! The real voice through ONNX Runtime: ids, durations, determinism, batching.

use std::process::Command;

use talker::phonemize::Phonemizer;
use talker::tts::align;
use talker::voice::Scales;
use unicode_normalization::UnicodeNormalization;

use crate::util::{default_voice, load_model};

const QUIET: Scales = Scales {
    noise: 0.0,
    length: 1.0,
    noise_w: 0.0,
};

fn ids_of(text: &str) -> (Vec<i64>, Vec<talker::voice::Kept>) {
    let model = load_model(1);
    let sentences = Phonemizer::global()
        .unwrap()
        .phonemize(&model.config.espeak_voice, text)
        .unwrap();
    assert_eq!(sentences.len(), 1);
    model.config.ids(&sentences[0])
}

#[test]
fn phoneme_ids_match_the_espeak_cli_and_the_voice_map() {
    let text = "The quick brown fox jumps over the lazy dog";
    let (ours, _) = ids_of(text);
    let cli = Command::new("espeak-ng")
        .args(["-q", "--ipa", "-v", "en-us", text])
        .output()
        .unwrap();
    assert!(cli.status.success());
    let ipa = String::from_utf8(cli.stdout).unwrap();
    let map: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(default_voice().config).unwrap()).unwrap();
    let id = |s: &str| map["phoneme_id_map"][s][0].as_i64().unwrap();
    let mut expected = vec![id("^"), id("_")];
    for c in ipa.trim().nfd() {
        expected.extend([id(&c.to_string()), id("_")]);
    }
    expected.push(id("$"));
    assert_eq!(ours, expected);
}

#[test]
fn durations_times_hop_equal_samples_and_tile_the_audio() {
    let (ids, kept) = ids_of("Durations must add up, exactly, to the audio.");
    let mut model = load_model(1);
    let out = model.synthesize(&[&ids], QUIET, 0).unwrap().remove(0);
    let frames: u64 = out.id_frames.iter().map(|&f| u64::from(f)).sum();
    assert_eq!(frames * u64::from(model.config.hop), out.pcm.len() as u64);
    let phones = align(
        &kept,
        &out.id_frames,
        model.config.hop,
        out.pcm.len() as u64,
    );
    assert_eq!(phones.first().unwrap().start, 0);
    assert!(phones.windows(2).all(|w| w[0].end == w[1].start));
    assert_eq!(phones.last().unwrap().end, out.pcm.len() as u64);
    assert!(out.pcm.iter().all(|s| s.is_finite()));
    assert!(
        out.pcm.iter().map(|s| s.abs()).fold(0.0, f32::max) > 0.05,
        "audible"
    );
}

#[test]
fn noise_off_synthesis_is_deterministic() {
    let (ids, _) = ids_of("Say it the same way twice.");
    let mut model = load_model(1);
    let a = model.synthesize(&[&ids], QUIET, 0).unwrap().remove(0);
    let b = model.synthesize(&[&ids], QUIET, 0).unwrap().remove(0);
    assert_eq!(a.pcm, b.pcm);
    assert_eq!(a.id_frames, b.id_frames);
}

#[test]
fn batched_equals_unbatched() {
    let texts = [
        "Short one.",
        "A somewhat longer sentence follows the short one.",
        "Middle length here.",
    ];
    let ids: Vec<Vec<i64>> = texts.iter().map(|t| ids_of(t).0).collect();
    let mut model = load_model(1);
    let refs: Vec<&[i64]> = ids.iter().map(Vec::as_slice).collect();
    let batched = model.synthesize(&refs, QUIET, 0).unwrap();
    for (i, one) in refs.iter().enumerate() {
        let single = model.synthesize(&[one], QUIET, 0).unwrap().remove(0);
        assert_eq!(
            single.id_frames, batched[i].id_frames,
            "durations identical"
        );
        assert_eq!(single.pcm.len(), batched[i].pcm.len());
        let worst = single
            .pcm
            .iter()
            .zip(&batched[i].pcm)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(worst < 1e-4, "item {i}: max diff {worst}");
    }
}
