//! Checking and measuring an engine on the GPU: `talker engine validate|bench`.
//!
//! Input: a voice, an engines folder and an ids file (JSON from `talker engine ids`: phoneme ids
//! per sentence, the first `calibration` of them for INT8). `validate` runs the held-out sentences
//! through the engine (building it if needed), counts NaN/Inf, optionally traces one sentence
//! step by step against the host executor of the same plan, compares a few sentences with that
//! executor and writes the audio and durations for comparison with ONNX Runtime; `bench`
//! measures audio-seconds per second at several batch sizes. Both return one JSON object.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use super::build::GpuVoice;
use super::exec::ProfileEntry;
pub use super::exec::{GraphMode, graphs_from_env};
use crate::tts::batch::{self, BatchLimits, DEFAULT_EDGES};
use crate::tts::cuda::io::Feed;
use crate::tts::cuda::program::cost::Work;
use crate::tts::cuda::program::op::{ConvPath, Precision};
use crate::tts::cuda::quant::snr_db;
use crate::tts::cuda::reference::{Hooks, HostExecutor};
use crate::tts::cuda::tensor::Tensor;
use crate::tts::voice::{Scales, VoiceConfig, VoiceFiles};
use crate::tts::{RawSpeech, SpeechError};

type Result<T, E = SpeechError> = std::result::Result<T, E>;

/// What `validate` and `bench` run on.
pub struct Check<'a> {
    pub voice: &'a VoiceFiles,
    pub engines: &'a Path,
    /// `None`: the ids bundled into the binary ([`load_ids`]).
    pub ids: Option<&'a Path>,
}

#[derive(serde::Serialize, serde::Deserialize)]
pub struct Sentence {
    pub text: String,
    pub ids: Vec<i64>,
}

#[derive(serde::Serialize, serde::Deserialize)]
pub struct IdsFile {
    pub voice: String,
    pub calibration: usize,
    pub sentences: Vec<Sentence>,
}

/// The ids a render's INT8 engines are calibrated on (`tests/data/gpu/ids.json`, bundled), so
/// `talker engine` builds and checks the engines `render` uses wherever it runs.
const BUNDLED_IDS: &str = include_str!("../../../../tests/data/gpu/ids.json");

/// The ids file at `path`, or the bundled one.
pub fn load_ids(path: Option<&Path>) -> Result<IdsFile> {
    match path {
        Some(path) => read_ids(path),
        None => parse_ids(BUNDLED_IDS, Path::new("the bundled ids")),
    }
}

/// Reads and checks an ids file (bad input: exit 2).
pub fn read_ids(path: &Path) -> Result<IdsFile> {
    let text = std::fs::read_to_string(path).map_err(SpeechError::io(path))?;
    parse_ids(&text, path)
}

fn parse_ids(text: &str, path: &Path) -> Result<IdsFile> {
    let f: IdsFile = serde_json::from_str(text)
        .map_err(|e| SpeechError::BadInput(format!("{}: not an ids file ({e})", path.display())))?;
    if f.calibration > f.sentences.len() || f.sentences.iter().any(|s| s.ids.is_empty()) {
        return Err(SpeechError::BadInput(format!(
            "{}: calibration count or empty sentences",
            path.display()
        )));
    }
    Ok(f)
}

fn quiet(config: &VoiceConfig) -> Scales {
    Scales {
        noise: 0.0,
        length: config.defaults.length,
        noise_w: 0.0,
    }
}

fn open(check: &Check<'_>, p: Precision) -> Result<(GpuVoice, IdsFile, VoiceConfig)> {
    let config = VoiceConfig::load(&check.voice.config)?;
    let ids = load_ids(check.ids)?;
    let calibration: Vec<Vec<i64>> = ids.sentences[..ids.calibration]
        .iter()
        .map(|s| s.ids.clone())
        .collect();
    let voice = GpuVoice::open_or_build(
        check.voice,
        &crate::cache::file_sha256(&check.voice.model)
            .map_err(SpeechError::io(&check.voice.model))?,
        p,
        check.engines,
        &calibration,
        &|m| tracing::info!("{m}"),
        &|_| {},
    )?;
    Ok((voice, ids, config))
}

/// Relative difference of two tensors (‖a−b‖ / ‖b‖), and whether the shapes agree.
fn rel_diff(a: &Tensor, b: &Tensor) -> (f64, bool) {
    if a.shape != b.shape {
        return (f64::INFINITY, false);
    }
    let as_f = |t: &Tensor| -> Vec<f64> {
        match &t.data {
            crate::tts::cuda::tensor::Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            crate::tts::cuda::tensor::Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
            crate::tts::cuda::tensor::Data::Bool(v) => {
                v.iter().map(|&x| f64::from(u8::from(x))).collect()
            }
        }
    };
    let (x, y) = (as_f(a), as_f(b));
    let num: f64 = x.iter().zip(&y).map(|(p, q)| (p - q) * (p - q)).sum();
    let den: f64 = y.iter().map(|q| q * q).sum();
    ((num / den.max(1e-30)).sqrt(), true)
}

/// What `validate` writes and how far it goes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ValidateOptions<'a> {
    /// The binary audio + durations file for `scripts/gpu-reference.py compare`.
    pub out: Option<&'a Path>,
    /// Every sentence as 16-bit mono WAV in `<dir>/<precision>/<index>.wav` (for PESQ).
    pub save_audio: Option<&'a Path>,
    pub trace: bool,
    pub limit: Option<usize>,
    /// Run the sentences with CUDA graphs (the trace always runs eagerly).
    pub graphs: GraphMode,
}

/// The folder `--save-audio DIR` writes one precision's WAVs into; refused (bad input, before any
/// work) when it already holds files, so no earlier run's audio is overwritten.
pub fn audio_dir(dir: &Path, p: Precision) -> Result<std::path::PathBuf> {
    let sub = dir.join(crate::tts::cuda::engine::precision_name(p));
    let occupied = std::fs::read_dir(&sub).is_ok_and(|mut e| e.next().is_some());
    if occupied {
        return Err(SpeechError::BadInput(format!(
            "{}: already holds files; give --save-audio an empty or new folder",
            sub.display()
        )));
    }
    Ok(sub)
}

/// Writes `pcm` as a 16-bit mono WAV (temp file + rename: a killed run leaves no partial file).
fn write_wav(path: &Path, rate: u32, pcm: &[f32]) -> Result<()> {
    let samples = crate::tts::to_pcm16(pcm);
    let data = (samples.len() * 2) as u32;
    let mut bytes = Vec::with_capacity(44 + samples.len() * 2);
    bytes.extend(b"RIFF");
    bytes.extend((36 + data).to_le_bytes());
    bytes.extend(b"WAVEfmt ");
    bytes.extend(16u32.to_le_bytes());
    bytes.extend(1u16.to_le_bytes()); // PCM
    bytes.extend(1u16.to_le_bytes()); // mono
    bytes.extend(rate.to_le_bytes());
    bytes.extend((rate * 2).to_le_bytes());
    bytes.extend(2u16.to_le_bytes());
    bytes.extend(16u16.to_le_bytes());
    bytes.extend(b"data");
    bytes.extend(data.to_le_bytes());
    samples.iter().for_each(|s| bytes.extend(s.to_le_bytes()));
    let tmp = path.with_extension("wav.tmp");
    std::fs::write(&tmp, &bytes).map_err(SpeechError::io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(SpeechError::io(path))
}

/// `talker engine validate`; see the module header.
pub fn validate(check: &Check<'_>, p: Precision, opts: ValidateOptions<'_>) -> Result<Value> {
    let ValidateOptions {
        out,
        save_audio,
        trace,
        limit,
        graphs,
    } = opts;
    let wav_dir = save_audio.map(|d| audio_dir(d, p)).transpose()?;
    let t = Instant::now();
    let (mut voice, ids, config) = open(check, p)?;
    voice.exec.set_graphs(graphs);
    let load_s = t.elapsed().as_secs_f64();
    let warm_s = voice.warm()?;
    let held: Vec<&Sentence> = ids.sentences[ids.calibration..]
        .iter()
        .take(limit.unwrap_or(usize::MAX))
        .collect();
    let scales = quiet(&config);
    let mut trace_report = Value::Null;
    if trace {
        // One short sentence, step by step: device vs host, same plan.
        let s = held.iter().min_by_key(|s| s.ids.len()).expect("sentences");
        let feed = Feed::new(&[s.ids.as_slice()], scales, 0);
        let mut host_vals: Vec<(usize, Tensor)> = Vec::new();
        let plan = voice.exec.plan.clone();
        let mut hh = |i: usize, t: &Tensor| host_vals.push((i, t.clone()));
        HostExecutor::new(&plan, 0)
            .run(
                &feed,
                Hooks {
                    conv_input: None,
                    step_output: Some(&mut hh),
                },
            )
            .map_err(|e| SpeechError::Engine(e.to_string()))?;
        let mut dev_vals: Vec<(usize, Tensor)> = Vec::new();
        let mut dh = |i: usize, t: &Tensor| dev_vals.push((i, t.clone()));
        voice.exec.run(
            &feed,
            Hooks {
                conv_input: None,
                step_output: Some(&mut dh),
            },
        )?;
        let mut worst = Vec::new();
        let mut first_bad = Vec::new();
        for ((i, h), (_, d)) in host_vals.iter().zip(&dev_vals) {
            let (r, same_shape) = rel_diff(d, h);
            let step = &plan.steps[*i];
            let entry = json!({"step": i, "op": step.op.name(), "name": step.name, "rel": r, "shape_host": h.shape, "shape_dev": d.shape});
            if (!same_shape || r > 1e-2 || !r.is_finite()) && first_bad.len() < 12 {
                first_bad.push(entry.clone());
            }
            worst.push((r, entry));
        }
        worst.sort_by(|a, b| b.0.total_cmp(&a.0));
        trace_report = json!({
            "ids": s.ids.len(), "steps": host_vals.len(),
            "first_over_1e-2": first_bad,
            "worst": worst.iter().take(8).map(|w| w.1.clone()).collect::<Vec<_>>(),
        });
    }
    let lengths: Vec<usize> = held.iter().map(|s| s.ids.len()).collect();
    let batches = batch::plan(
        &lengths,
        DEFAULT_EDGES,
        BatchLimits {
            token_budget: usize::MAX,
            max_items: 8,
        },
    );
    let mut results: Vec<Option<RawSpeech>> = vec![None; held.len()];
    let t = Instant::now();
    for b in &batches {
        let refs: Vec<&[i64]> = b.iter().map(|&i| held[i].ids.as_slice()).collect();
        let items = voice.synthesize(&refs, scales, 0)?;
        for (&i, r) in b.iter().zip(items) {
            results[i] = Some(r);
        }
    }
    let run_s = t.elapsed().as_secs_f64();
    let results: Vec<_> = results
        .into_iter()
        .map(|r| r.expect("every sentence ran"))
        .collect();
    let non_finite: usize = results
        .iter()
        .map(|r| r.pcm.iter().filter(|v| !v.is_finite()).count())
        .sum();
    let audio_s: f64 =
        results.iter().map(|r| r.pcm.len() as f64).sum::<f64>() / f64::from(config.sample_rate);
    if let Some(path) = out {
        let mut f =
            std::io::BufWriter::new(std::fs::File::create(path).map_err(SpeechError::io(path))?);
        for r in &results {
            let mut buf = Vec::with_capacity(8 + 4 * (r.pcm.len() + r.id_frames.len()));
            buf.extend((r.pcm.len() as u32).to_le_bytes());
            r.pcm.iter().for_each(|v| buf.extend(v.to_le_bytes()));
            buf.extend((r.id_frames.len() as u32).to_le_bytes());
            r.id_frames.iter().for_each(|v| buf.extend(v.to_le_bytes()));
            f.write_all(&buf).map_err(SpeechError::io(path))?;
        }
        f.flush().map_err(SpeechError::io(path))?;
    }
    if let Some(dir) = &wav_dir {
        std::fs::create_dir_all(dir).map_err(SpeechError::io(dir))?;
        for (i, r) in results.iter().enumerate() {
            write_wav(&dir.join(format!("{i}.wav")), config.sample_rate, &r.pcm)?;
        }
    }
    // Host executor of the same plan on a few sentences: what the device should reproduce.
    let mut host_snr = Vec::new();
    for (i, s) in held.iter().enumerate().take(3) {
        let feed = Feed::new(&[s.ids.as_slice()], scales, 0);
        let o = HostExecutor::new(&voice.exec.plan, 0)
            .run(&feed, Hooks::default())
            .map_err(|e| SpeechError::Engine(e.to_string()))?;
        let h = crate::tts::cuda::io::split(&o, &[s.ids.as_slice()], config.hop)
            .map_err(|e| SpeechError::Engine(e.0))?;
        host_snr.push(json!({"sentence": i, "snr_db": snr_db(&h[0].pcm, &results[i].pcm), "durations_equal": h[0].id_frames == results[i].id_frames}));
    }
    Ok(json!({
        "precision": format!("{p:?}"), "header": voice.header, "sentences": held.len(), "batches": batches.len(),
        "audio_seconds": audio_s, "run_seconds": run_s, "load_seconds": load_s, "warm_seconds": warm_s,
        "non_finite_samples": non_finite, "syncs_last_batch": voice.exec.syncs,
        "device_vs_host_same_plan": host_snr, "trace": trace_report, "audio_dir": wav_dir,
        "graphs": graphs, "graph_stats": voice.exec.graph_stats(),
    }))
}

/// Which executors `bench` times: eager (one launch per step), with CUDA graphs, or both in
/// the same process (the honest comparison: same GPU state, same sentences).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphsMode {
    Off,
    On,
    Frames,
    /// Off, then on.
    Both,
}

impl GraphsMode {
    fn runs(self) -> &'static [GraphMode] {
        match self {
            GraphsMode::Off => &[GraphMode::Off],
            GraphsMode::On => &[GraphMode::On],
            GraphsMode::Frames => &[GraphMode::Frames],
            GraphsMode::Both => &[GraphMode::Off, GraphMode::On],
        }
    }
}

/// Which convolution paths `bench` times: one, or both in this process (GEMM first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvMode {
    /// The engine's own path: im2col + GEMM, or cuDNN with `TALKER_CUDA_CONV=cudnn`.
    Engine,
    Gemm,
    Cudnn,
    Both,
}

impl ConvMode {
    fn runs(self, engine: ConvPath) -> Vec<ConvPath> {
        match self {
            ConvMode::Engine => vec![engine],
            ConvMode::Gemm => vec![ConvPath::Gemm],
            ConvMode::Cudnn => vec![ConvPath::Cudnn],
            ConvMode::Both => vec![ConvPath::Gemm, ConvPath::Cudnn],
        }
    }
}

/// What `bench` measures besides the precision and batch sizes.
#[derive(Debug, Clone, Copy)]
pub struct BenchOptions {
    pub passes: usize,
    pub profile: bool,
    /// Bracket the largest batch size's last timed pass for a profiler (see `--mark`).
    pub mark: bool,
    pub graphs: GraphsMode,
    pub conv: ConvMode,
}

/// One timed configuration of a bench row.
struct Timed {
    times: Vec<f64>,
    median: f64,
    samples: usize,
    work: Work,
    /// Of the timed passes' wall, the share spent inside the executor's runs (the rest is the
    /// host building feeds and splitting the audio).
    run_share: f64,
}

/// Speaks every batch of `plan` once; the samples made.
fn speak_plan(
    voice: &mut GpuVoice,
    held: &[&Sentence],
    plan: &[Vec<usize>],
    scales: Scales,
) -> Result<usize> {
    let mut samples = 0;
    for b in plan {
        let refs: Vec<&[i64]> = b.iter().map(|&i| held[i].ids.as_slice()).collect();
        samples += voice
            .synthesize(&refs, scales, 0)?
            .iter()
            .map(|r| r.pcm.len())
            .sum::<usize>();
    }
    Ok(samples)
}

/// Runs `f` between the CUDA profiler's start and stop when `mark` is set.
fn marked<T>(mark: bool, f: impl FnOnce() -> Result<T>) -> Result<T> {
    use cudarc::driver::sys;
    if mark {
        // SAFETY: no arguments; without a profiler attached the call does nothing.
        unsafe { sys::cuProfilerStart() }
            .result()
            .map_err(super::GpuError::from)?;
    }
    let out = f();
    if mark {
        // SAFETY: as above.
        unsafe { sys::cuProfilerStop() }
            .result()
            .map_err(super::GpuError::from)?;
    }
    out
}

/// `passes` timed passes over `plan`'s batches after one untimed pass that warms (and, with
/// graphs on, captures) this batch size's shapes.
fn time_passes(
    voice: &mut GpuVoice,
    held: &[&Sentence],
    plan: &[Vec<usize>],
    scales: Scales,
    (passes, mark): (usize, bool),
) -> Result<Timed> {
    let mut times = Vec::new();
    let mut samples = 0usize;
    let mut work = Work::default();
    let mut run_seconds = 0.0;
    for pass in 0..=passes {
        voice.exec.work = Work::default();
        let before = voice.exec.run_seconds;
        let t = Instant::now();
        samples = marked(mark && pass == passes, || {
            speak_plan(voice, held, plan, scales)
        })?;
        if pass > 0 {
            times.push(t.elapsed().as_secs_f64());
            run_seconds += voice.exec.run_seconds - before;
        }
        work = voice.exec.work;
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(Timed {
        median: sorted[sorted.len() / 2],
        run_share: run_seconds / times.iter().sum::<f64>(),
        times,
        samples,
        work,
    })
}

/// One more pass over `plan`, eager, with a sync after every step: per op kind (convolutions by
/// precision and path), the steps, seconds, and the work those steps did against the H200's
/// bounds, slowest kind first.
fn profile_pass(
    voice: &mut GpuVoice,
    held: &[&Sentence],
    plan: &[Vec<usize>],
    scales: Scales,
    rate: f64,
) -> Result<Vec<Value>> {
    voice.exec.profile = Some(HashMap::new());
    let audio_s = speak_plan(voice, held, plan, scales)? as f64 / rate;
    let mut kinds: Vec<(String, ProfileEntry)> = voice
        .exec
        .profile
        .take()
        .unwrap_or_default()
        .into_iter()
        .collect();
    kinds.sort_by(|a, b| b.1.seconds.total_cmp(&a.1.seconds));
    Ok(kinds
        .into_iter()
        .map(|(k, e)| {
            json!({
                "op": k, "steps": e.steps, "seconds": e.seconds, "host_seconds": e.host_seconds,
                "work": e.work.report(audio_s, e.seconds),
            })
        })
        .collect())
}

/// `talker engine bench`: audio-seconds per second at each batch size (sentences grouped by the
/// length buckets, at most N per call), eagerly and/or with CUDA graphs, with the matrix work
/// per audio second and the share of the H200's dense FP16 bound.
pub fn bench(
    check: &Check<'_>,
    p: Precision,
    batches: &[usize],
    opts: BenchOptions,
) -> Result<Value> {
    let BenchOptions {
        passes,
        profile,
        mark,
        graphs,
        conv,
    } = opts;
    let largest = batches.iter().copied().max().unwrap_or(0);
    let (mut voice, ids, config) = open(check, p)?;
    let convs = conv.runs(voice.exec.conv_path());
    // Warm-up (algorithm choices, captures) for the last configuration timed.
    voice
        .exec
        .set_graphs(graphs.runs()[graphs.runs().len() - 1]);
    voice.exec.set_conv_path(convs[convs.len() - 1])?;
    let warm_s = voice.warm()?;
    let held: Vec<&Sentence> = ids.sentences[ids.calibration..].iter().collect();
    let lengths: Vec<usize> = held.iter().map(|s| s.ids.len()).collect();
    let scales = quiet(&config);
    let rate = f64::from(config.sample_rate);
    let mut rows = Vec::new();
    for &n in batches {
        let plan = batch::plan(
            &lengths,
            DEFAULT_EDGES,
            BatchLimits {
                token_budget: usize::MAX,
                max_items: n.max(1),
            },
        );
        let mut runs = Vec::new();
        let mut medians = Vec::new();
        let combinations = convs.len() * graphs.runs().len();
        for (k, (&path, &mode)) in convs
            .iter()
            .flat_map(|c| graphs.runs().iter().map(move |g| (c, g)))
            .enumerate()
        {
            let on = mode != GraphMode::Off;
            voice.exec.set_conv_path(path)?;
            voice.exec.set_graphs(mode);
            let before = voice.exec.graph_stats();
            let t = time_passes(
                &mut voice,
                &held,
                &plan,
                scales,
                (passes.max(1), mark && n == largest && k + 1 == combinations),
            )?;
            let after = voice.exec.graph_stats();
            let audio_s = t.samples as f64 / rate;
            medians.push(t.median);
            runs.push(json!({
                "conv": path, "graphs": mode, "audio_seconds": audio_s, "median_seconds": t.median,
                "audio_seconds_per_second": audio_s / t.median, "times": t.times,
                "run_share": t.run_share,
                "work": t.work.report(audio_s, t.median),
                "graph_stats": on.then(|| json!({
                    "captured": after.captured - before.captured,
                    "replayed": after.replayed - before.replayed,
                    "aborted": after.aborted - before.aborted,
                    "variable": after.variable - before.variable,
                    "evicted": after.evicted - before.evicted,
                    "graph_steps": after.graph_steps - before.graph_steps,
                    "eager_steps": after.eager_steps - before.eager_steps,
                })),
            }));
        }
        let mut profiles = Vec::new();
        if profile {
            voice.exec.set_graphs(GraphMode::Off);
            for &path in &convs {
                voice.exec.set_conv_path(path)?;
                profiles.push(json!({
                    "conv": path,
                    "kinds": profile_pass(&mut voice, &held, &plan, scales, rate)?,
                }));
            }
        }
        let first = runs[0].clone();
        let per_graphs = graphs.runs().len();
        rows.push(json!({
            "batch": n, "calls": plan.len(), "mean_items": held.len() as f64 / plan.len() as f64,
            "audio_seconds": first["audio_seconds"], "median_seconds": first["median_seconds"],
            "audio_seconds_per_second": first["audio_seconds_per_second"], "times": first["times"],
            "work": first["work"], "runs": runs,
            "graphs_speedup": (per_graphs == 2).then(|| medians[0] / medians[1]),
            // GEMM's median over cuDNN's, at the first graphs mode: above 1, cuDNN is faster.
            "cudnn_speedup": (convs.len() == 2).then(|| medians[0] / medians[per_graphs]),
            "profile": profiles,
        }));
    }
    Ok(json!({
        "precision": format!("{p:?}"), "warm_seconds": warm_s, "gpu": voice.header.gpu,
        "engine_conv": voice.header.conv, "conv": convs,
        "graphs": format!("{graphs:?}").to_lowercase(), "graph_stats": voice.exec.graph_stats(),
        "rows": rows,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_files_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ids.json");
        let write = |s: &str| std::fs::write(&path, s).unwrap();
        write(
            r#"{"voice":"v","calibration":1,"sentences":[{"text":"a","ids":[1,0,2]},{"text":"b","ids":[1,2]}]}"#,
        );
        let f = read_ids(&path).unwrap();
        assert_eq!((f.calibration, f.sentences.len()), (1, 2));
        write(r#"{"voice":"v","calibration":3,"sentences":[{"text":"a","ids":[1]}]}"#);
        assert!(
            matches!(read_ids(&path), Err(SpeechError::BadInput(m)) if m.contains("calibration"))
        );
        write(r#"{"voice":"v","calibration":0,"sentences":[{"text":"a","ids":[]}]}"#);
        assert!(matches!(read_ids(&path), Err(SpeechError::BadInput(m)) if m.contains("empty")));
        write("[1, 2]");
        assert!(
            matches!(read_ids(&path), Err(SpeechError::BadInput(m)) if m.contains("not an ids file"))
        );
        assert!(read_ids(&dir.path().join("missing.json")).is_err());
    }

    #[test]
    fn wav_files_are_16_bit_mono_and_audio_folders_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let sub = audio_dir(dir.path(), Precision::I8).unwrap();
        assert_eq!(sub, dir.path().join("int8"));
        std::fs::create_dir_all(&sub).unwrap();
        assert!(
            audio_dir(dir.path(), Precision::I8).is_ok(),
            "empty is fine"
        );
        let wav = sub.join("0.wav");
        write_wav(&wav, 22050, &[0.0, 0.5, -1.5]).unwrap();
        let b = std::fs::read(&wav).unwrap();
        assert_eq!(
            (&b[..4], &b[8..16], b.len()),
            (&b"RIFF"[..], &b"WAVEfmt "[..], 50)
        );
        assert_eq!(u32::from_le_bytes(b[24..28].try_into().unwrap()), 22050);
        assert_eq!(u16::from_le_bytes(b[22..24].try_into().unwrap()), 1);
        let s: Vec<i16> = b[44..]
            .chunks(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(s, [0, 16384, -32767]);
        assert!(!sub.join("0.wav.tmp").exists());
        assert!(
            matches!(audio_dir(dir.path(), Precision::I8), Err(SpeechError::BadInput(m)) if m.contains("already holds files"))
        );
    }

    #[test]
    fn relative_difference_of_tensors() {
        let a = Tensor::f32(vec![2], vec![3.0, 4.0]);
        assert_eq!(rel_diff(&a, &a), (0.0, true));
        let b = Tensor::f32(vec![2], vec![3.0, 4.5]);
        let (r, same) = rel_diff(&b, &a);
        assert!(same && (r - 0.1).abs() < 1e-12, "{r}");
        let c = Tensor::f32(vec![1, 2], vec![3.0, 4.0]);
        assert_eq!(rel_diff(&c, &a), (f64::INFINITY, false));
        let i = Tensor::i64(vec![2], vec![3, 4]);
        assert_eq!(rel_diff(&i, &i), (0.0, true));
    }
}
