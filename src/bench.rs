//! `talker bench`: measures every stage and the ratios that matter, in one process, as JSON.
//!
//! Runs, in order: a cold render (empty cache), a fully cached re-render, TTS at batch 1 against
//! length-bucketed batches on the same sentences (and, if a Python with `piper-tts` is given, the
//! reference implementation on the same sentences and thread count), frame synthesis on one core,
//! and an encode-only pass over as many frames as the render made. Speed is measured here, never
//! asserted in tests: machines differ, and a timed test is a flaky test.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde_json::{Value, json};

use crate::animate::{chunk_audio, frame_quantum};
use crate::cache::CacheLocation;
use crate::error::{Error, Result};
use crate::lipsync::Viseme;
use crate::look::Look;
use crate::media::ChunkWriter;
use crate::phonemize::Phonemizer;
use crate::pipeline;
use crate::plan::Plan;
use crate::prepare::{Prepared, prepare};
use crate::progress::{Clock, NoProgress, Stage};
use crate::render::{FramePose, HeadPose};
use crate::report::RenderReport;
use crate::script::Script;
use crate::settings::RenderOptions;
use crate::speech::{SpeechEngine, SpeechOptions, SpeechService};
use crate::tts::SpeechError;
use crate::tts::batch::BatchLimits;
use crate::tts::select::SpeechSetup;
use crate::tts::voice::VoiceFiles;

/// Frames drawn for the one-core frame-synthesis figure.
const FRAME_BENCH_FRAMES: usize = 600;
/// Distinct frames cycled through in the encode-only pass.
const ENCODE_SET: usize = 64;

pub struct BenchOptions {
    /// The render measured (cold and cached).
    pub render: RenderOptions,
    /// A longer script whose sentences feed the TTS comparison.
    pub tts_script: PathBuf,
    /// Python interpreter with `piper-tts` installed, for the reference run.
    pub piper_python: Option<PathBuf>,
}

/// Peak resident memory since the last [`reset_peak_rss`], in MiB (Linux `VmHWM`).
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Restarts the peak-RSS counter so each phase reports its own peak.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// How close the cold render came to what this machine allows: its CPU seconds per second of
/// audio, spread over every core, give the real-time factor of a render that kept all cores busy
/// with the same work. (GPU time is not CPU time: with speech on a GPU the bound is the CPU's.)
fn bound(r: &RenderReport) -> Value {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let cpu_per_audio_s = r.cpu_seconds / r.audio_seconds.max(1e-9);
    let bound = cores / cpu_per_audio_s.max(1e-9);
    let achieved = r.audio_seconds / r.wall_seconds.max(1e-9);
    json!({
        "cores": cores,
        "cpu_s_per_audio_s": cpu_per_audio_s,
        "bound_real_time_factor": bound,
        "achieved_real_time_factor": achieved,
        "share_of_bound": achieved / bound,
        "cores_busy_mean": r.cores_busy_mean,
    })
}

fn render_json(r: &RenderReport, peak: Option<f64>) -> Value {
    json!({
        "wall_s": r.wall_seconds,
        "real_time_factor": r.audio_seconds / r.wall_seconds,
        "stage_thread_s": r.stage_seconds,
        "stage_spans_s": r.stage_spans,
        "cpu_s": r.cpu_seconds,
        "cores_busy_mean": r.cores_busy_mean,
        "synthesized": r.speech.synthesized,
        "phrase_cache_hits": r.phrase_hits,
        "chunks": r.chunks,
        "chunks_reused": r.chunks_reused,
        "frames_per_s": r.frames as f64 / r.wall_seconds,
        "peak_rss_mib": peak,
    })
}

pub fn run(opts: &BenchOptions) -> Result<Value> {
    let cache = tempfile::tempdir().map_err(Error::io(std::env::temp_dir()))?;
    let out_dir = tempfile::tempdir().map_err(Error::io(std::env::temp_dir()))?;
    let mut render_opts = opts.render.clone();
    render_opts.cache = CacheLocation::Dir(cache.path().to_path_buf());
    render_opts.output = out_dir.path().join("bench.mp4");
    let cancel = AtomicBool::new(false);
    let service = SpeechService::start(&render_opts.speech)?;

    reset_peak_rss();
    let cold = pipeline::run(&render_opts, &service, &NoProgress, &cancel)?;
    let cold_peak = peak_rss_mib();
    reset_peak_rss();
    let cached = pipeline::run(&render_opts, &service, &NoProgress, &cancel)?;
    let cached_peak = peak_rss_mib();

    let (alone, look) = stages_alone(&render_opts, &service, out_dir.path())?;
    let tts = tts_comparison(opts)?;
    let frames = frame_synthesis(&look);

    Ok(json!({
        "machine": {"cores": std::thread::available_parallelism().map_or(1, |n| n.get()), "threads": render_opts.threads},
        "backend": service.info(),
        "speech_totals": service.stats(),
        "input": {
            "script": render_opts.script, "portrait": render_opts.portrait,
            "size": [cold.width, cold.height], "fps": cold.fps,
            "audio_s": cold.audio_seconds, "frames": cold.frames,
        },
        "stages_alone_wall_s": alone,
        "cold": render_json(&cold, cold_peak),
        "cached": render_json(&cached, cached_peak),
        "cached_speedup_vs_cold": cold.wall_seconds / cached.wall_seconds,
        "bound": bound(&cold),
        "overhead_ratio": cold.wall_seconds / alone["encode"].as_f64().unwrap_or(f64::NAN),
        "tts": tts,
        "frame_synthesis": frames,
    }))
}

/// Each stage of the render alone, one after another: wall seconds per stage. `encode` encodes as
/// many frames in as many chunks with as many workers as the render uses (each chunk cycling 64
/// frames the rig drew beforehand): the cost no render can avoid, and the denominator of the
/// overhead ratio.
fn stages_alone(
    opts: &RenderOptions,
    service: &SpeechService,
    dir: &Path,
) -> Result<(Value, Look)> {
    let clock = Clock::default();
    let Prepared {
        mut engine,
        look,
        plan,
        ..
    } = prepare(opts, service, &NoProgress, &clock, &AtomicBool::new(false))?;
    let t = Instant::now();
    engine.synthesize(&[&plan.utterances[0]])?;
    let load = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let utterances: Vec<_> = plan.utterances.iter().collect();
    let speeches: std::collections::HashMap<_, _> = plan
        .utterances
        .iter()
        .map(|u| u.key)
        .zip(engine.synthesize(&utterances)?)
        .collect();
    let tts = t.elapsed().as_secs_f64();

    let quantum = frame_quantum(plan.sample_rate, look.video.fps);
    let mut buf = vec![0u8; look.rig.width() as usize * look.rig.height() as usize * 3];
    let (mut frames, mut lipsync_s, mut draw_s) = (0u64, 0.0, 0.0);
    for c in 0..plan.chunks.len() {
        let t = Instant::now();
        let audio = chunk_audio(&plan, c, &speeches, quantum);
        let track = crate::lipsync::plan(&audio.phones, plan.sample_rate);
        lipsync_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let n = audio.frames(plan.sample_rate, look.video.fps);
        for k in 0..n {
            let mouth = track.pose_at(k as f64 / f64::from(look.video.fps));
            look.rig.render(
                &FramePose {
                    mouth,
                    ..pose(k as usize)
                },
                &mut buf,
            );
        }
        draw_s += t.elapsed().as_secs_f64();
        frames += n;
    }
    let encode = encode_only(&look, frames, plan.chunks.len(), dir)?;
    let stages = json!({
        "script": clock.seconds(Stage::Script),
        "text": clock.seconds(Stage::Text),
        "phonemes": clock.seconds(Stage::Phonemes),
        "face": clock.seconds(Stage::Face),
        "tts_load": load,
        "tts": tts,
        "lipsync": lipsync_s,
        "frames": draw_s,
        "encode": encode,
        "frames_drawn": frames,
        "note": "one stage at a time; tts on all threads, frames on one thread, encode on one worker per thread",
    });
    Ok((stages, look))
}

/// A varied, repeatable pose sequence: every viseme, blinks, head sway (`talker bench` and
/// `examples/frame_bench.rs` render the same frames).
pub fn pose(i: usize) -> FramePose {
    let v = Viseme::ALL[(i / 3) % Viseme::ALL.len()];
    let phase = i as f32 * 0.07;
    FramePose {
        mouth: v.pose(),
        blink: if i % 90 < 5 { 1.0 } else { 0.0 },
        head: HeadPose {
            dx: 0.02 * phase.sin(),
            dy: 0.01 * phase.cos(),
            roll: 0.01 * (phase * 0.5).sin(),
        },
    }
}

fn frame_synthesis(look: &Look) -> Value {
    let mut buf = vec![0u8; look.rig.width() as usize * look.rig.height() as usize * 3];
    let t = Instant::now();
    for i in 0..FRAME_BENCH_FRAMES {
        look.rig.render(&pose(i), &mut buf);
    }
    let s = t.elapsed().as_secs_f64();
    json!({"frames": FRAME_BENCH_FRAMES, "threads": 1, "fps_one_core": FRAME_BENCH_FRAMES as f64 / s,
           "size": [look.rig.width(), look.rig.height()]})
}

/// Wall seconds to encode `frames` frames in `chunks` chunks with one worker per core.
fn encode_only(look: &Look, frames: u64, chunks: usize, dir: &Path) -> Result<f64> {
    let size = look.rig.width() as usize * look.rig.height() as usize * 3;
    let set: Vec<Vec<u8>> = (0..ENCODE_SET)
        .map(|i| {
            let mut buf = vec![0u8; size];
            look.rig.render(&pose(i), &mut buf);
            buf
        })
        .collect();
    let chunks = chunks.max(1) as u64;
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(chunks as usize);
    let per_chunk: Vec<u64> = (0..chunks)
        .map(|c| frames / chunks + u64::from(c < frames % chunks))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let t = Instant::now();
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    loop {
                        let c = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&n) = per_chunk.get(c) else {
                            return Ok(());
                        };
                        let path = dir.join(format!("encode-only-{c}.mkv"));
                        let mut w = ChunkWriter::create(&path, &look.video, 22050)?;
                        w.write_audio(&vec![
                            0.0;
                            (n * 22050 / u64::from(look.video.fps)) as usize
                        ])?;
                        for k in 0..n as usize {
                            w.write_frame(&set[k % ENCODE_SET])?;
                        }
                        w.finish()?;
                        let _ = std::fs::remove_file(&path);
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::ThreadLost("encoder".into())))
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(t.elapsed().as_secs_f64())
}

fn tts_comparison(opts: &BenchOptions) -> Result<Value> {
    let r = &opts.render;
    let script = Script::load(&opts.tts_script)?;
    let voice = VoiceFiles::resolve(crate::assets::DEFAULT_VOICE, &r.assets.voices_dir())?;
    // The comparison is about the CPU's batching, whatever backend the render used.
    let service = |limits| {
        SpeechService::start(&SpeechSetup {
            cpu_limits: limits,
            ..SpeechSetup::cpu(r.speech.onnxruntime.clone(), r.threads)
        })
    };
    let (single_service, bucketed_service) = (
        service(BatchLimits::SINGLE)?,
        service(BatchLimits::default())?,
    );
    let speech_opts = || SpeechOptions {
        voice: voice.clone(),
        speed: 1.0,
        noise: true,
        speaker: 0,
    };
    let mut single = SpeechEngine::new(&single_service, speech_opts())?;
    let mut bucketed = SpeechEngine::new(&bucketed_service, speech_opts())?;
    let phonemizer = Phonemizer::global()?;
    let t = Instant::now();
    let plan = Plan::build(
        &script,
        single.config(),
        single.identity(),
        &phonemizer,
        &Clock::default(),
        &AtomicBool::new(false),
    )?;
    let phonemize_s = t.elapsed().as_secs_f64();
    let utterances: Vec<_> = plan.utterances.iter().collect();
    let texts: Vec<String> = plan
        .sentences
        .iter()
        .map(|s| crate::text::normalize(&s.display))
        .collect();
    let rate = f64::from(single.config().sample_rate);

    let measure = |engine: &mut SpeechEngine| -> Result<Value> {
        engine.synthesize(&utterances[..1])?; // loads the model and warms it up
        engine.stats = Default::default();
        let (t, cpu) = (Instant::now(), crate::progress::process_cpu_seconds());
        let out = engine.synthesize(&utterances)?;
        let (wall, cpu) = (
            t.elapsed().as_secs_f64(),
            crate::progress::process_cpu_seconds() - cpu,
        );
        let audio: f64 = out.iter().map(|s| s.pcm.len() as f64).sum::<f64>() / rate;
        Ok(
            json!({"wall_s": wall, "cpu_s": cpu, "audio_s": audio, "audio_s_per_s": audio / wall,
                  "batches": engine.stats.batches, "padding_waste": engine.stats.padding_waste()}),
        )
    };
    let b1 = measure(&mut single)?;
    let bucketed_v = measure(&mut bucketed)?;
    let speedup = bucketed_v["audio_s_per_s"].as_f64().unwrap_or(0.0)
        / b1["audio_s_per_s"].as_f64().unwrap_or(1.0);
    let ours = b1["audio_s_per_s"]
        .as_f64()
        .unwrap_or(0.0)
        .max(bucketed_v["audio_s_per_s"].as_f64().unwrap_or(0.0));
    let piper = match &opts.piper_python {
        Some(python) => {
            let v = piper_reference(python, &voice.model, r.threads, &texts)?;
            let ratio = ours / v["audio_s_per_s"].as_f64().unwrap_or(f64::NAN);
            json!({"result": v, "ours_vs_piper": ratio})
        }
        None => json!(
            "not run: pass --piper-python PATH (a Python with piper-tts installed; scripts/bench sets one up)"
        ),
    };
    Ok(json!({
        "sentences": utterances.len(),
        "phonemize_s": phonemize_s,
        "threads": r.threads,
        "batch1": b1,
        "bucketed": bucketed_v,
        "bucketed_speedup": speedup,
        "padding_waste_by_edges": waste_by_edges(&utterances),
        "piper_tts": piper,
    }))
}

/// Padding waste of the default token budget with and without length buckets, on the same
/// sentences: the figure the bucket edges were chosen by.
fn waste_by_edges(utterances: &[&crate::plan::Utterance]) -> Value {
    use crate::tts::batch::{DEFAULT_EDGES, padding_waste, plan as batches};
    let lengths: Vec<usize> = utterances.iter().map(|u| u.ids.len()).collect();
    let limits = BatchLimits::default();
    let waste = |edges: &[usize]| padding_waste(&lengths, &batches(&lengths, edges, limits));
    json!({
        "budget_ids": limits.token_budget,
        "default_edges": DEFAULT_EDGES,
        "with_default_edges": waste(DEFAULT_EDGES),
        "edges_every_32_ids": waste(&(1..=20).map(|i| i * 32).collect::<Vec<_>>()),
        "sorted_no_buckets": waste(&[]),
        "script_order": padding_waste(&lengths, &in_order(&lengths, limits)),
    })
}

/// Batches as a naive batcher makes them: in script order until the budget is full.
fn in_order(lengths: &[usize], limits: BatchLimits) -> Vec<Vec<usize>> {
    let mut batches: Vec<Vec<usize>> = vec![Vec::new()];
    let mut longest = 0;
    for (i, &len) in lengths.iter().enumerate() {
        let current = batches.last_mut().expect("one batch at least");
        let fits = (current.len() + 1) * longest.max(len) <= limits.token_budget
            && current.len() < limits.max_items;
        if !current.is_empty() && !fits {
            batches.push(Vec::new());
            longest = 0;
        }
        longest = longest.max(len);
        batches.last_mut().expect("one batch at least").push(i);
    }
    batches
}

/// The reference `piper-tts` package on the same sentences, model and thread count.
const PIPER_REFERENCE: &str = r#"
import json, sys, time, onnxruntime
from piper import PiperVoice
cfg = json.load(sys.stdin)
voice = PiperVoice.load(cfg["model"])
so = onnxruntime.SessionOptions()
so.intra_op_num_threads = cfg["threads"]
so.inter_op_num_threads = 1
voice.session = onnxruntime.InferenceSession(cfg["model"], sess_options=so, providers=["CPUExecutionProvider"])
for _ in voice.synthesize("Warm up."):
    pass
cpu0 = time.process_time()
t0 = time.perf_counter()
samples = 0
for text in cfg["sentences"]:
    for chunk in voice.synthesize(text):
        samples += len(chunk.audio_int16_array)
wall = time.perf_counter() - t0
audio = samples / voice.config.sample_rate
print(json.dumps({"wall_s": wall, "cpu_s": time.process_time() - cpu0, "audio_s": audio,
                  "audio_s_per_s": audio / wall, "version": __import__("importlib.metadata").metadata.version("piper-tts")}))
"#;

fn piper_reference(python: &Path, model: &Path, threads: usize, texts: &[String]) -> Result<Value> {
    let mut child = Command::new(python)
        .args(["-c", PIPER_REFERENCE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(Error::io(python))?;
    let input = json!({"model": model, "threads": threads, "sentences": texts}).to_string();
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes())
        .map_err(Error::io(python))?;
    let out = child.wait_with_output().map_err(Error::io(python))?;
    if !out.status.success() {
        return Err(Error::Usage(format!(
            "the piper-tts reference run failed ({}): {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        )));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        SpeechError::Engine(format!("piper-tts reference printed no JSON: {e}")).into()
    })
}
