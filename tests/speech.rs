//! The real voice through ONNX Runtime: ids, durations, determinism, batching, the process-wide
//! batcher (concurrent requesters, a failing request, cancellation) and backend-keyed caching.

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use talker::cache::Cache;
use talker::phonemize::Phonemizer;
use talker::plan::{SpeechIdentity, phrase_key};
use talker::tts::batch::{BatchLimits, DEFAULT_EDGES};
use talker::tts::batcher::{Batcher, CallInfo, Client, Policy, Priority, Reply, VoiceRef};
use talker::tts::select::{self, BackendInfo, SpeechSetup};
use talker::tts::voice::Scales;
use talker::tts::{Phone, RawSpeech, Speech, SpeechError, align};
use unicode_normalization::UnicodeNormalization;

use crate::util::{assets, default_voice, load_model, render_json, write_script};

const QUIET: Scales = Scales {
    noise: 0.0,
    length: 1.0,
    noise_w: 0.0,
};

fn ids_of(text: &str) -> (Vec<i64>, Vec<talker::tts::voice::Kept>) {
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

/// A CPU batcher over the real ONNX Runtime backend: up to 8 sentences per call, one lane.
fn cpu_batcher(max_items: usize, max_wait_ms: u64) -> Batcher {
    cpu_batcher_with(max_items, max_wait_ms, false)
}

/// The CPU batcher, unloading its voices at rest if `unload_at_rest` (a process of one render).
fn cpu_batcher_with(max_items: usize, max_wait_ms: u64, unload_at_rest: bool) -> Batcher {
    let setup = SpeechSetup {
        cpu_limits: BatchLimits {
            token_budget: 100_000,
            max_items,
        },
        ..SpeechSetup::cpu(assets().onnxruntime_library().map_err(|e| e.to_string()), 1)
    };
    let resolved = select::resolve(&setup).unwrap();
    Batcher::start(
        Box::new(resolved),
        Policy {
            limits: setup.cpu_limits,
            edges: DEFAULT_EDGES.to_vec(),
            max_wait: Duration::from_millis(max_wait_ms),
            lanes: 1,
            warm_up: !unload_at_rest,
            unload_at_rest,
        },
    )
}

fn voice_ref() -> Arc<VoiceRef> {
    let files = default_voice();
    Arc::new(VoiceRef {
        hash: talker::speech::hash_file(&files.model).unwrap(),
        files,
    })
}

/// Waits for `n` replies; returns them by ticket, with the calls they came from.
fn collect(client: &Client, n: usize) -> HashMap<u64, (Result<RawSpeech, SpeechError>, CallInfo)> {
    let mut out = HashMap::new();
    while out.len() < n {
        if let Some(Reply::Done {
            ticket,
            result,
            call,
        }) = client.recv_timeout(Duration::from_secs(60))
        {
            out.insert(ticket, (result, call));
        }
    }
    out
}

/// Same durations, samples within `tolerance` (float GEMMs block differently at other batch
/// sizes: a 3-item call differed from batch 1 by up to 1.1e-4 in one run).
fn assert_same(a: &RawSpeech, b: &RawSpeech, tolerance: f32, what: &str) {
    assert_eq!(a.id_frames, b.id_frames, "{what}: durations identical");
    assert_eq!(a.pcm.len(), b.pcm.len(), "{what}");
    let worst = a
        .pcm
        .iter()
        .zip(&b.pcm)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(worst < tolerance, "{what}: max diff {worst}");
}

#[test]
fn concurrent_requesters_share_calls_and_get_their_batch_1_results() {
    let texts = [
        ["Short one.", "A middle sized sentence is here."],
        ["Another short.", "Here is one more of middle size."],
        ["Third short.", "And the last middle sized sentence."],
    ];
    let ids: Vec<Vec<Vec<i64>>> = texts
        .iter()
        .map(|t| t.iter().map(|s| ids_of(s).0).collect())
        .collect();
    let mut model = load_model(1);
    let batch1: Vec<Vec<RawSpeech>> = ids
        .iter()
        .map(|job| {
            job.iter()
                .map(|i| model.synthesize(&[i], QUIET, 0).unwrap().remove(0))
                .collect()
        })
        .collect();
    let batcher = cpu_batcher(8, 400);
    let voice = voice_ref();
    std::thread::scope(|s| {
        for (j, job) in ids.iter().enumerate() {
            let (mut client, voice, batch1) = (batcher.client(), &voice, &batch1);
            s.spawn(move || {
                let tickets: Vec<u64> = job
                    .iter()
                    .map(|i| {
                        client
                            .submit(voice, QUIET, 0, i.clone(), Priority::Normal)
                            .unwrap()
                    })
                    .collect();
                let got = collect(&client, tickets.len());
                for (k, t) in tickets.iter().enumerate() {
                    let raw = got[t].0.as_ref().unwrap();
                    assert_same(raw, &batch1[j][k], 2e-4, &format!("job {j} item {k}"));
                }
            });
        }
    });
    let stats = batcher.stats();
    assert_eq!(stats.items, 6);
    assert!(
        stats.calls < stats.items,
        "the requesters' sentences shared calls: {stats:?}"
    );
}

#[test]
fn a_failing_request_fails_alone() {
    let good = [
        ids_of("One good sentence.").0,
        ids_of("Another good one.").0,
    ];
    let mut bad = good[0].clone();
    bad[3] = 1_000_000; // no such phoneme id: the model call fails
    let mut model = load_model(1);
    let batcher = cpu_batcher(8, 200);
    let voice = voice_ref();
    let mut client = batcher.client();
    let t_bad = client
        .submit(&voice, QUIET, 0, bad, Priority::Normal)
        .unwrap();
    let t_good: Vec<u64> = good
        .iter()
        .map(|i| {
            client
                .submit(&voice, QUIET, 0, i.clone(), Priority::Normal)
                .unwrap()
        })
        .collect();
    let got = collect(&client, 3);
    let err = got[&t_bad].0.as_ref().unwrap_err();
    assert_eq!(err.exit_code(), 1, "{err}");
    for (t, i) in t_good.iter().zip(&good) {
        let one = model.synthesize(&[i], QUIET, 0).unwrap().remove(0);
        assert_same(
            got[t].0.as_ref().unwrap(),
            &one,
            2e-4,
            "good item next to a bad one",
        );
    }
    assert_eq!(batcher.stats().failed_items, 1);
}

#[test]
fn a_voice_unloaded_at_rest_loads_again_and_speaks_the_same() {
    let ids = ids_of("Rest a while, then speak again.").0;
    let batcher = cpu_batcher_with(1, 0, true);
    let voice = voice_ref();
    let mut client = batcher.client();
    let speak = |client: &mut Client| {
        let t = client
            .submit(&voice, QUIET, 0, ids.clone(), Priority::Normal)
            .unwrap();
        collect(client, 1).remove(&t).unwrap()
    };
    let (first, call) = speak(&mut client);
    assert!(call.load_seconds > 0.0, "{call:?}");
    client.rest();
    let t = std::time::Instant::now();
    while batcher.stats().unloads == 0 {
        assert!(t.elapsed() < Duration::from_secs(20), "never unloaded");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (again, call) = speak(&mut client);
    assert!(call.load_seconds > 0.0, "loaded again: {call:?}");
    assert_same(&again.unwrap(), &first.unwrap(), 2e-4, "after a reload");
    assert_eq!(batcher.stats().unloads, 1);
}

#[test]
fn cancelling_a_client_releases_its_queued_items() {
    let ids = ids_of("Cancel me, please.").0;
    // One sentence per call: A's items queue behind each other.
    let batcher = cpu_batcher(1, 0);
    let voice = voice_ref();
    let mut a = batcher.client();
    for _ in 0..30 {
        a.submit(&voice, QUIET, 0, ids.clone(), Priority::Normal)
            .unwrap();
    }
    let released = a.cancel();
    assert!(released >= 28, "released {released} of 30");
    assert_eq!(a.queued(), 0);
    let mut b = batcher.client();
    let t = b
        .submit(&voice, QUIET, 0, ids.clone(), Priority::Normal)
        .unwrap();
    assert!(collect(&b, 1)[&t].0.is_ok());
    drop(a);
    let stats = batcher.stats();
    assert_eq!(stats.cancelled_items, released as u64);
    assert!(stats.items <= 3, "{stats:?}");
}

/// The real voice preloaded: it loads before anything asks for it, the first call reports the
/// load (once) and speaks what an unbatched call speaks, and the CPU backend has no warm-up.
#[test]
fn a_preloaded_voice_speaks_its_first_sentence_without_loading_again() {
    let ids = ids_of("Loaded before it was asked for.").0;
    let batcher = cpu_batcher(1, 0);
    let voice = voice_ref();
    let mut client = batcher.client();
    client.preload(&voice);
    let t = std::time::Instant::now();
    while batcher.stats().load_seconds == 0.0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the voice was not preloaded"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let loaded = batcher.stats().load_seconds;
    let first = client
        .submit(&voice, QUIET, 0, ids.clone(), Priority::Normal)
        .unwrap();
    let second = client
        .submit(&voice, QUIET, 0, ids.clone(), Priority::Normal)
        .unwrap();
    let got = collect(&client, 2);
    assert_eq!(got[&first].1.load_seconds, loaded);
    assert_eq!(got[&second].1.load_seconds, 0.0);
    let one = load_model(1)
        .synthesize(&[&ids], QUIET, 0)
        .unwrap()
        .remove(0);
    assert_same(got[&first].0.as_ref().unwrap(), &one, 2e-4, "preloaded");
    let stats = batcher.stats();
    assert_eq!(stats.load_seconds, loaded, "loaded once: {stats:?}");
    assert_eq!((stats.items, stats.warm_calls), (2, 0), "{stats:?}");
}

/// The phrase cache keys the backend: a phrase cached by the CPU is not found for the GPU (or
/// another precision), and is found again for the CPU.
#[test]
fn cached_cpu_speech_is_not_returned_for_a_cuda_request() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    let info = |backend, gpu: Option<&str>, precision| BackendInfo {
        backend,
        gpu: gpu.map(str::to_owned),
        precision,
        runtime: "libonnxruntime.so.1.32.0".into(),
        note: None,
    };
    let key = |info: &BackendInfo| {
        let id = SpeechIdentity {
            voice_hash: [1; 32],
            scales: QUIET,
            speaker: 0,
            engine: info.cache_tag(),
        };
        phrase_key("hello", 0, &[1, 0, 2], &id)
    };
    let cpu = key(&info("cpu", None, "fp32"));
    let fp16 = key(&info("cuda", Some("NVIDIA H200"), "fp16"));
    let int8 = key(&info("cuda", Some("NVIDIA H200"), "int8"));
    let speech = Speech {
        sample_rate: 22050,
        pcm: vec![0, 100, -100, 0],
        phones: vec![Phone {
            symbol: "^".into(),
            start: 0,
            end: 4,
        }],
    };
    cache.put_phrase(cpu, &speech).unwrap();
    assert!(cache.get_phrases(&[fp16, int8]).unwrap().is_empty());
    assert_eq!(cache.get_phrases(&[cpu]).unwrap()[&cpu], speech);
    cache.put_phrase(fp16, &speech).unwrap();
    assert!(cache.get_phrases(&[int8]).unwrap().is_empty());
}

#[test]
fn render_report_names_the_backend_it_used() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        "s.json",
        r#"{"segments": [{"text": "One sentence."}, {"text": "And two."}]}"#,
    );
    let out = dir.path().join("o.mp4");
    let r = render_json(
        dir.path(),
        &script,
        &out,
        &[
            "--backend",
            "cpu",
            "--size",
            "128x128",
            "--framing",
            "head",
            "--threads",
            "1",
        ],
    );
    assert_eq!(r["backend"]["backend"], "cpu");
    assert_eq!(r["backend"]["precision"], "fp32");
    assert!(r["backend"]["gpu"].is_null());
    assert_eq!(r["speech"]["synthesized"], 2);
    assert_eq!(r["speech"]["batches"], 2, "one sentence per CPU call");
    assert_eq!(r["speech"]["mean_batch_items"], 1.0);
    assert!(r["speech"]["model_seconds"].as_f64().unwrap() > 0.0);
    assert!(r["speech_wait_seconds"].as_f64().unwrap() >= 0.0);
    // Where the time went: the process's CPU seconds, the mean cores they kept busy, and each
    // stage's span on the wall (speech before the frames that need it end; assembly last).
    let wall = r["wall_seconds"].as_f64().unwrap();
    let cpu = r["cpu_seconds"].as_f64().unwrap();
    assert!(cpu > 0.0, "{r}");
    assert!((r["cores_busy_mean"].as_f64().unwrap() - cpu / wall).abs() < 1e-6);
    let span = |stage: &str| {
        let s = &r["stage_spans"][stage];
        [s[0].as_f64().unwrap(), s[1].as_f64().unwrap()]
    };
    for stage in ["script", "face", "speech", "frames", "encode", "assemble"] {
        let [from, to] = span(stage);
        assert!(0.0 <= from && from <= to && to <= wall, "{stage}: {r}");
    }
    assert!(span("speech")[0] < span("frames")[1], "{r}");
    assert!(span("assemble")[0] >= span("frames")[0], "{r}");
}

/// `talker batch --concurrency 2`: both renders speak through one batcher, and the result says
/// which backend ran and what its calls carried.
#[test]
fn batch_jobs_share_one_speech_batcher() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = dir.path().join("jobs");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    for (name, text) in [("a", "The first job speaks."), ("b", "The second one too.")] {
        let script = write_script(
            dir.path(),
            &format!("{name}-script.json"),
            &format!(r#"{{"segments": [{{"text": "{text}"}}]}}"#),
        );
        let spec = serde_json::json!({
            "script": script, "portrait": crate::util::repo("examples/portrait.png"),
            "output": format!("{name}.mp4"), "size": [128, 128], "framing": "head", "fps": 10,
        });
        std::fs::write(jobs.join(format!("{name}.json")), spec.to_string()).unwrap();
    }
    let o = crate::util::talker(dir.path())
        .args([
            "batch",
            "--json",
            "--backend",
            "cpu",
            "--concurrency",
            "2",
            "--threads",
            "1",
        ])
        .arg("--out-root")
        .arg(&out)
        .arg("--queue")
        .arg(dir.path().join("q.sqlite"))
        .arg(&jobs)
        .output()
        .unwrap();
    crate::util::assert_success(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let speech = &v["speech"];
    assert_eq!(speech["backend"], "cpu", "{v}");
    assert_eq!(speech["totals"]["items"], 2, "{v}");
    assert_eq!(
        speech["totals"]["calls"], 2,
        "one sentence per CPU call: {v}"
    );
    for job in v["jobs"].as_array().unwrap() {
        assert_eq!(job["state"], "succeeded", "{job}");
        assert_eq!(job["result"]["backend"]["backend"], "cpu", "{job}");
    }
}

/// A batching backend (here the CPU with `--batch-budget`, as the GPU always is) gets a render's
/// sentences of every chunk at once, so they share calls.
#[test]
fn a_batching_backend_gets_all_sentences_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        "s.json",
        r#"{"segments": [{"text": "One two three."}, {"text": "Four five six."},
                         {"text": "Seven eight nine."}, {"text": "Ten and more."}]}"#,
    );
    let out = dir.path().join("o.mp4");
    let r = render_json(
        dir.path(),
        &script,
        &out,
        &[
            "--backend",
            "cpu",
            "--batch-budget",
            "4000",
            "--max-batch-wait-ms",
            "500",
            "--size",
            "128x128",
            "--framing",
            "head",
            "--threads",
            "1",
        ],
    );
    assert!(r["chunks"].as_u64().unwrap() >= 2, "{r}");
    assert_eq!(r["speech"]["synthesized"], 4);
    let calls = r["speech"]["batches"].as_u64().unwrap();
    assert!(calls < 4, "sentences of several chunks shared calls: {r}");
    assert!(r["speech"]["mean_batch_items"].as_f64().unwrap() > 1.0);
}
