//! Several voices in one script: a segment's own `voice`, `speaker` and `speed`, through the
//! built binary with the one voice scripts/fetch-assets installs (two paces of it, and the same
//! model under a second name).

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::audio::srt_cues;
use crate::util::{assert_success, default_voice, talker, write_script};

/// Renders `script` to WAV with subtitles, noise off, in the cache of `dir`; returns the report.
fn render(dir: &Path, script: &Path, out: &Path) -> serde_json::Value {
    let o = run(dir, script, out);
    assert_success(&o);
    serde_json::from_slice(&o.stdout).expect("the report is JSON")
}

fn run(dir: &Path, script: &Path, out: &Path) -> Output {
    talker(dir)
        .args(["render", "--json", "--deterministic", "--loudness", "off"])
        .args(["--subtitles", "srt", "-o"])
        .arg(out)
        .arg(script)
        .output()
        .unwrap()
}

/// The default voice under another name, in `dir`: its model linked, its config as given.
fn alias(dir: &Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let voice = default_voice();
    std::fs::create_dir_all(dir).unwrap();
    let model = dir.join(format!("{name}.onnx"));
    std::os::unix::fs::symlink(&voice.model, &model).unwrap();
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&voice.config).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(dir.join(format!("{name}.onnx.json")), config.to_string()).unwrap();
    model
}

const SENTENCE: &str = "The harbour lights came on one by one along the wall.";

/// A slower segment is longer than the same text at the script's pace, by less than the speed
/// says (the model rounds each phoneme's duration up to whole frames after scaling: measured
/// 1.71x at 0.5 and 1.28x at 0.7, the same as a script-wide `speed`); changing one segment's
/// speed synthesises that segment again and nothing else.
#[test]
fn each_segment_speaks_at_its_own_speed_and_only_a_changed_one_is_spoken_again() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = |slow: f64| {
        format!(
            r#"{{"segments": [{{"text": "{SENTENCE}"}}, {{"text": "{SENTENCE}", "speed": {slow}}},
                {{"text": "Nothing else changes here."}}]}}"#
        )
    };
    let path = write_script(d, "s.json", &script(0.5));
    let first = d.join("first.wav");
    let r = render(d, &path, &first);
    assert_eq!(r["speech"]["synthesized"], 3, "{r}");
    let length = |wav: &Path, i: usize| {
        let cues = srt_cues(&wav.with_extension("srt"));
        cues[i].1 - cues[i].0
    };
    let ratio = length(&first, 1) / length(&first, 0);
    assert!((1.5..2.0).contains(&ratio), "speed 0.5 is {ratio}x as long");

    std::fs::write(&path, script(0.7)).unwrap();
    let second = d.join("second.wav");
    let r = render(d, &path, &second);
    assert_eq!(
        r["speech"]["synthesized"], 1,
        "only the changed segment: {r}"
    );
    assert_eq!(r["phrase_hits"], 2, "{r}");
    let ratio = length(&second, 1) / length(&second, 0);
    assert!(
        (1.2..1.45).contains(&ratio),
        "speed 0.7 is {ratio}x as long"
    );
    // Cue times are whole milliseconds from the start, so lengths agree to two.
    assert!((length(&second, 2) - length(&first, 2)).abs() < 0.0025);
    // The same pace set for the whole script keys the same phrase.
    let whole = write_script(
        d,
        "whole.json",
        &format!(r#"{{"speed": 0.7, "segments": [{{"text": "{SENTENCE}"}}]}}"#),
    );
    let third = d.join("third.wav");
    let r = render(d, &whole, &third);
    assert_eq!(r["speech"]["synthesized"], 0, "{r}");
    assert!((length(&third, 0) - length(&second, 1)).abs() < 0.0025);
}

/// The same model under a second name, named by a path relative to the script (rendered from
/// another working directory), speaks exactly as the default voice does, and shares its phrases.
#[test]
fn the_same_model_under_another_name_speaks_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    alias(&d.join("scripts/voices"), "harbour", |_| {});
    let plain = write_script(
        d,
        "plain.json",
        &format!(r#"{{"segments": [{{"text": "{SENTENCE}"}}]}}"#),
    );
    let named = write_script(
        &d.join("scripts"),
        "named.json",
        &format!(r#"{{"segments": [{{"text": "{SENTENCE}", "voice": "voices/harbour.onnx"}}]}}"#),
    );
    // Caches of their own: each voice really speaks.
    let (a, b) = (d.join("a.wav"), d.join("b.wav"));
    render(&d.join("cache-a"), &plain, &a);
    let r = render(&d.join("cache-b"), &named, &b);
    assert_eq!(r["speech"]["synthesized"], 1, "{r}");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

    let both = write_script(
        &d.join("scripts"),
        "both.json",
        &format!(
            r#"{{"segments": [{{"text": "{SENTENCE}"}}, {{"text": "{SENTENCE}", "voice": "voices/harbour.onnx"}}]}}"#
        ),
    );
    let r = render(&d.join("cache-c"), &both, &d.join("c.wav"));
    assert_eq!(r["speech"]["synthesized"], 1, "one model, one phrase: {r}");
}

/// What a segment asks of a voice it cannot have is exit 2 naming the script and
/// `segments[N].voice`, `.speaker` or `.speed`, before any work.
#[test]
fn a_voice_speaker_or_speed_a_segment_cannot_have_is_exit_2_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    alias(&d.join("voices"), "four", |c| c["num_speakers"] = 4.into());
    alias(&d.join("voices"), "slow-rate", |c| {
        c["audio"]["sample_rate"] = 16000.into()
    });
    let cases = [
        (
            r#""voice": "no-such-voice""#,
            "segments[1].voice",
            "no-such-voice.onnx not found",
        ),
        (
            r#""voice": "voices/gone.onnx""#,
            "segments[1].voice",
            "gone.onnx not found",
        ),
        (r#""voice": 5"#, "segments[1].voice", "must be a string"),
        (
            r#""speaker": 0"#,
            "segments[1].speaker",
            "has a single speaker",
        ),
        (
            r#""voice": "voices/four.onnx", "speaker": 4"#,
            "segments[1].speaker",
            "speakers 0 to 3, not 4",
        ),
        (r#""speaker": "two""#, "segments[1].speaker", "whole number"),
        (
            r#""voice": "voices/slow-rate.onnx""#,
            "segments[1].voice",
            "16000 Hz",
        ),
        (r#""speed": 2.5"#, "segments[1].speed", "0.5 to 2.0"),
        (r#""speed": "fast""#, "segments[1].speed", "0.5 to 2.0"),
    ];
    for (fields, place, why) in cases {
        let script = write_script(
            d,
            "s.json",
            &format!(r#"{{"segments": [{{"text": "Fine."}}, {{"text": "Not fine.", {fields}}}]}}"#),
        );
        let out = d.join("out.wav");
        let o = run(d, &script, &out);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{fields}: {err}");
        let named = format!("{}: {place}: ", script.display());
        assert!(err.contains(&named) && err.contains(why), "{fields}: {err}");
        assert!(!out.exists() && !d.join("cache").exists(), "{fields}");
    }
}

/// The engine keeps one voice per model bytes, scales and speaker (another name for the same
/// model is the same voice), and refuses a voice of another sample rate than its first.
#[test]
fn the_engine_keeps_one_voice_per_model_pace_and_speaker() {
    use talker::speech::{SpeechEngine, SpeechOptions, SpeechService};
    use talker::tts::select::SpeechSetup;
    use talker::tts::voice::VoiceFiles;

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let setup = SpeechSetup::cpu(
        crate::util::assets()
            .onnxruntime_library()
            .map_err(|e| e.to_string()),
        1,
    );
    let service = SpeechService::start(&setup).unwrap();
    let options = |voice: VoiceFiles, speed: f32| SpeechOptions {
        voice,
        speed,
        noise: false,
        speaker: 0,
    };
    let mut engine = SpeechEngine::new(&service, options(default_voice(), 1.0)).unwrap();
    let renamed = VoiceFiles::resolve(
        alias(d, "renamed", |_| {}).to_str().unwrap(),
        Path::new("/nowhere"),
    )
    .unwrap();
    assert_eq!(engine.add_voice(options(renamed.clone(), 1.0)).unwrap(), 0);
    assert_eq!(engine.add_voice(options(renamed, 0.7)).unwrap(), 1);
    assert_eq!(engine.add_voice(options(default_voice(), 0.7)).unwrap(), 1);
    assert_eq!(engine.configs().len(), 2, "each voice file's config, once");
    let other_rate = VoiceFiles::resolve(
        alias(d, "other-rate", |c| {
            c["audio"]["sample_rate"] = 16000.into()
        })
        .to_str()
        .unwrap(),
        Path::new("/nowhere"),
    )
    .unwrap();
    let e = engine
        .add_voice(options(other_rate, 1.0))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("16000 Hz") && e.contains("does not resample"),
        "{e}"
    );
    let mut wrong_speaker = options(default_voice(), 1.0);
    wrong_speaker.speaker = 1;
    let e = engine.add_voice(wrong_speaker).unwrap_err().to_string();
    assert!(e.contains("speaker 1 does not exist"), "{e}");
}

/// A lexicon's IPA is checked against every voice the script uses, not only the render's.
#[test]
fn lexicon_ipa_is_checked_against_each_segment_voice() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    alias(&d.join("voices"), "no-ash", |c| {
        c["phoneme_id_map"].as_object_mut().unwrap().remove("æ");
    });
    let script = |voice: &str| {
        write_script(
            d,
            "s.json",
            &format!(
                r#"{{"lexicon": {{"Nguyen": {{"ipa": "wˈæn"}}}},
                    "segments": [{{"text": "Fine."}}, {{"text": "Nguyen.", "voice": "{voice}"}}]}}"#
            ),
        )
    };
    let o = run(d, &script("en_US-joe-medium"), &d.join("fine.wav"));
    assert_success(&o);
    let out = d.join("out.wav");
    let script = script("voices/no-ash.onnx");
    let o = run(d, &script, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    // `--json`: the message is a JSON string.
    let named = format!("{}: lexicon entry ", script.display());
    assert!(
        err.contains(&named) && err.contains("IPA symbol 'æ'"),
        "{err}"
    );
    assert!(!out.exists());
}
