//! `talker engine build|validate|bench|ids`: GPU speech engines from the command line.
//!
//! `build` writes `engines/<voice>-<gpu>-<precision>.engine`; `validate` runs held-out sentences
//! (phoneme ids from a JSON file made by `engine ids`) through an engine, checks for NaN/Inf,
//! optionally traces one sentence step by step against the host reference executor of the same
//! plan, and writes the audio and durations for comparison with ONNX Runtime; `bench` measures
//! audio-seconds per second at several batch sizes. All print one JSON object on stdout.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};
use talker::assets::{Assets, DEFAULT_VOICE};
use talker::gpu::cuda::build::{BuildOptions, GpuVoice, build_engine};
use talker::gpu::cuda::{Gpu, GpuError};
use talker::gpu::io::Feed;
use talker::gpu::plan::op::Precision;
use talker::gpu::quant::snr_db;
use talker::gpu::reference::{Hooks, HostExecutor};
use talker::gpu::tensor::Tensor;
use talker::tts::batch::{self, BatchLimits, DEFAULT_EDGES};
use talker::voice::{Scales, VoiceConfig, VoiceFiles};
use talker::{Error, Result};

use super::args::Global;

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum PrecisionArg {
    Fp32,
    Fp16,
    Int8,
}

impl From<PrecisionArg> for Precision {
    fn from(p: PrecisionArg) -> Precision {
        match p {
            PrecisionArg::Fp32 => Precision::F32,
            PrecisionArg::Fp16 => Precision::F16,
            PrecisionArg::Int8 => Precision::I8,
        }
    }
}

#[derive(Debug, Args)]
pub struct Common {
    /// Voice: a name in the assets' voices/ folder or a path to a Piper .onnx.
    #[arg(long, default_value = DEFAULT_VOICE)]
    pub voice: String,
    /// Where engines are written and looked up.
    #[arg(long, value_name = "DIR", default_value = "engines")]
    pub engines: PathBuf,
    /// Phoneme ids (JSON from `talker engine ids`): its first `calibration` sentences calibrate
    /// INT8, the rest are held out for validation and benchmarks.
    #[arg(long, value_name = "FILE", default_value = "tests/data/gpu/ids.json")]
    pub ids: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum EngineAction {
    /// Build an engine for this GPU: plan, calibrate (INT8), compile kernels, write the file.
    Build {
        #[command(flatten)]
        common: Common,
        #[arg(long, value_enum)]
        precision: PrecisionArg,
    },
    /// Run the held-out sentences through an engine (building it if needed); check NaN/Inf,
    /// trace one sentence against the host executor, write audio and durations for comparison.
    Validate {
        #[command(flatten)]
        common: Common,
        #[arg(long, value_enum)]
        precision: PrecisionArg,
        /// Binary output: per sentence, u32 sample count, f32 samples, u32 id count, u32 frames.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Also compare every step of one sentence with the host executor of the same plan.
        #[arg(long)]
        trace: bool,
        /// Validate only the first N held-out sentences.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Audio-seconds per second at each batch size (sentences grouped by the length buckets).
    Bench {
        #[command(flatten)]
        common: Common,
        #[arg(long, value_enum, value_delimiter = ',', default_value = "fp16,int8")]
        precision: Vec<PrecisionArg>,
        #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
        batches: Vec<usize>,
        /// Timed passes over the sentences per batch size (the median is reported).
        #[arg(long, default_value_t = 3)]
        passes: usize,
        /// After the timed passes, one untimed pass that waits after every step and reports
        /// the seconds spent per op kind.
        #[arg(long)]
        profile: bool,
    },
    /// Phonemize a text file (one sentence per line) into the ids JSON the other commands read.
    #[cfg(feature = "render")]
    Ids {
        text: PathBuf,
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        #[arg(long, default_value = DEFAULT_VOICE)]
        voice: String,
        /// How many leading sentences are for calibration.
        #[arg(long, default_value_t = 32)]
        calibration: usize,
    },
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Sentence {
    text: String,
    ids: Vec<i64>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct IdsFile {
    voice: String,
    calibration: usize,
    sentences: Vec<Sentence>,
}

fn gpu_err(e: GpuError) -> Error {
    Error::Engine(e.to_string())
}

fn voice_files(global: &Global, voice: &str) -> Result<VoiceFiles> {
    VoiceFiles::resolve(
        voice,
        &Assets::locate(global.assets.as_deref()).voices_dir(),
    )
}

fn read_ids(path: &Path) -> Result<IdsFile> {
    let text = std::fs::read_to_string(path).map_err(Error::io(path))?;
    let f: IdsFile = serde_json::from_str(&text)
        .map_err(|e| Error::Usage(format!("{}: not an ids file ({e})", path.display())))?;
    if f.calibration > f.sentences.len() || f.sentences.iter().any(|s| s.ids.is_empty()) {
        return Err(Error::Usage(format!(
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

fn open(
    common: &Common,
    global: &Global,
    p: Precision,
) -> Result<(GpuVoice, IdsFile, VoiceConfig)> {
    let files = voice_files(global, &common.voice)?;
    let config = VoiceConfig::load(&files.config)?;
    let ids = read_ids(&common.ids)?;
    let calibration: Vec<Vec<i64>> = ids.sentences[..ids.calibration]
        .iter()
        .map(|s| s.ids.clone())
        .collect();
    let voice =
        GpuVoice::open_or_build(&files, p, &common.engines, &calibration).map_err(gpu_err)?;
    Ok((voice, ids, config))
}

pub fn run_engine(action: &EngineAction, global: &Global) -> Result<()> {
    let out = match action {
        EngineAction::Build { common, precision } => {
            let files = voice_files(global, &common.voice)?;
            let ids = read_ids(&common.ids)?;
            let calibration: Vec<Vec<i64>> = ids.sentences[..ids.calibration]
                .iter()
                .map(|s| s.ids.clone())
                .collect();
            let t = Instant::now();
            let gpu = Gpu::open(0).map_err(gpu_err)?;
            let report = build_engine(
                gpu,
                &BuildOptions {
                    voice: &files,
                    precision: (*precision).into(),
                    dir: &common.engines,
                    calibration: &calibration,
                },
            )
            .map_err(gpu_err)?;
            let mut v = serde_json::to_value(&report).expect("report serialises");
            v["seconds_total"] = t.elapsed().as_secs_f64().into();
            v
        }
        EngineAction::Validate {
            common,
            precision,
            out,
            trace,
            limit,
        } => validate(
            common,
            global,
            (*precision).into(),
            out.as_deref(),
            *trace,
            *limit,
        )?,
        EngineAction::Bench {
            common,
            precision,
            batches,
            passes,
            profile,
        } => {
            let mut results = Vec::new();
            for p in precision {
                results.push(bench(
                    common,
                    global,
                    (*p).into(),
                    batches,
                    *passes,
                    *profile,
                )?);
            }
            json!({ "bench": results })
        }
        #[cfg(feature = "render")]
        EngineAction::Ids {
            text,
            output,
            voice,
            calibration,
        } => make_ids(global, text, output, voice, *calibration)?,
    };
    println!("{out}");
    Ok(())
}

#[cfg(feature = "render")]
fn make_ids(
    global: &Global,
    text: &Path,
    output: &Path,
    voice: &str,
    calibration: usize,
) -> Result<Value> {
    let files = voice_files(global, voice)?;
    let config = VoiceConfig::load(&files.config)?;
    let lines = std::fs::read_to_string(text).map_err(Error::io(text))?;
    let mut sentences = Vec::new();
    for line in lines.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let normalized = talker::text::normalize(line);
        let mut ids = Vec::new();
        for s in
            talker::phonemize::Phonemizer::global()?.phonemize(&config.espeak_voice, &normalized)?
        {
            let (part, _) = config.ids(&s);
            if ids.is_empty() {
                ids = part;
            } else {
                // One utterance per line: drop the inner `$` and `^ _` so the parts read as one sentence.
                ids.pop();
                ids.extend(part.into_iter().skip(2));
            }
        }
        sentences.push(Sentence {
            text: line.to_owned(),
            ids,
        });
    }
    let f = IdsFile {
        voice: files.name.clone(),
        calibration: calibration.min(sentences.len()),
        sentences,
    };
    let json = serde_json::to_string(&f).expect("ids serialise");
    std::fs::write(output, json).map_err(Error::io(output))?;
    let lens: Vec<usize> = f.sentences.iter().map(|s| s.ids.len()).collect();
    Ok(
        json!({"sentences": lens.len(), "min_ids": lens.iter().min(), "max_ids": lens.iter().max(), "output": output}),
    )
}

/// Relative difference of two tensors (‖a−b‖ / ‖b‖), and whether the shapes agree.
fn rel_diff(a: &Tensor, b: &Tensor) -> (f64, bool) {
    if a.shape != b.shape {
        return (f64::INFINITY, false);
    }
    let as_f = |t: &Tensor| -> Vec<f64> {
        match &t.data {
            talker::gpu::tensor::Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            talker::gpu::tensor::Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
            talker::gpu::tensor::Data::Bool(v) => {
                v.iter().map(|&x| f64::from(u8::from(x))).collect()
            }
        }
    };
    let (x, y) = (as_f(a), as_f(b));
    let num: f64 = x.iter().zip(&y).map(|(p, q)| (p - q) * (p - q)).sum();
    let den: f64 = y.iter().map(|q| q * q).sum();
    ((num / den.max(1e-30)).sqrt(), true)
}

fn validate(
    common: &Common,
    global: &Global,
    p: Precision,
    out: Option<&Path>,
    trace: bool,
    limit: Option<usize>,
) -> Result<Value> {
    let t = Instant::now();
    let (mut voice, ids, config) = open(common, global, p)?;
    let load_s = t.elapsed().as_secs_f64();
    let warm_s = voice.warm().map_err(gpu_err)?;
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
            .map_err(|e| Error::Engine(e.to_string()))?;
        let mut dev_vals: Vec<(usize, Tensor)> = Vec::new();
        let mut dh = |i: usize, t: &Tensor| dev_vals.push((i, t.clone()));
        voice
            .exec
            .run(
                &feed,
                Hooks {
                    conv_input: None,
                    step_output: Some(&mut dh),
                },
            )
            .map_err(gpu_err)?;
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
    let mut results: Vec<Option<talker::tts::piper::RawSpeech>> = vec![None; held.len()];
    let t = Instant::now();
    for b in &batches {
        let refs: Vec<&[i64]> = b.iter().map(|&i| held[i].ids.as_slice()).collect();
        let items = voice.synthesize(&refs, scales, 0).map_err(gpu_err)?;
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
        let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(Error::io(path))?);
        for r in &results {
            let mut buf = Vec::with_capacity(8 + 4 * (r.pcm.len() + r.id_frames.len()));
            buf.extend((r.pcm.len() as u32).to_le_bytes());
            r.pcm.iter().for_each(|v| buf.extend(v.to_le_bytes()));
            buf.extend((r.id_frames.len() as u32).to_le_bytes());
            r.id_frames.iter().for_each(|v| buf.extend(v.to_le_bytes()));
            f.write_all(&buf).map_err(Error::io(path))?;
        }
        f.flush().map_err(Error::io(path))?;
    }
    // Host executor of the same plan on a few sentences: what the device should reproduce.
    let mut host_snr = Vec::new();
    for (i, s) in held.iter().enumerate().take(3) {
        let feed = Feed::new(&[s.ids.as_slice()], scales, 0);
        let o = HostExecutor::new(&voice.exec.plan, 0)
            .run(&feed, Hooks::default())
            .map_err(|e| Error::Engine(e.to_string()))?;
        let h = talker::gpu::io::split(&o, &[s.ids.as_slice()], config.hop)
            .map_err(|e| Error::Engine(e.0))?;
        host_snr.push(json!({"sentence": i, "snr_db": snr_db(&h[0].pcm, &results[i].pcm), "durations_equal": h[0].id_frames == results[i].id_frames}));
    }
    Ok(json!({
        "precision": format!("{p:?}"), "header": voice.header, "sentences": held.len(), "batches": batches.len(),
        "audio_seconds": audio_s, "run_seconds": run_s, "load_seconds": load_s, "warm_seconds": warm_s,
        "non_finite_samples": non_finite, "syncs_last_batch": voice.exec.syncs,
        "device_vs_host_same_plan": host_snr, "trace": trace_report,
    }))
}

fn bench(
    common: &Common,
    global: &Global,
    p: Precision,
    batches: &[usize],
    passes: usize,
    profile: bool,
) -> Result<Value> {
    let (mut voice, ids, config) = open(common, global, p)?;
    let warm_s = voice.warm().map_err(gpu_err)?;
    let held: Vec<&Sentence> = ids.sentences[ids.calibration..].iter().collect();
    let lengths: Vec<usize> = held.iter().map(|s| s.ids.len()).collect();
    let scales = quiet(&config);
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
        let mut times = Vec::new();
        let mut audio = 0usize;
        for pass in 0..=passes {
            let t = Instant::now();
            let mut samples = 0usize;
            for b in &plan {
                let refs: Vec<&[i64]> = b.iter().map(|&i| held[i].ids.as_slice()).collect();
                samples += voice
                    .synthesize(&refs, scales, 0)
                    .map_err(gpu_err)?
                    .iter()
                    .map(|r| r.pcm.len())
                    .sum::<usize>();
            }
            // Pass 0 warms this batch size's shapes and is not timed.
            if pass > 0 {
                times.push(t.elapsed().as_secs_f64());
            }
            audio = samples;
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let audio_s = audio as f64 / f64::from(config.sample_rate);
        let profile = if profile {
            // One more pass with a sync after every step: seconds per op kind, largest first.
            voice.exec.profile = Some(HashMap::new());
            for b in &plan {
                let refs: Vec<&[i64]> = b.iter().map(|&i| held[i].ids.as_slice()).collect();
                voice.synthesize(&refs, scales, 0).map_err(gpu_err)?;
            }
            let mut kinds: Vec<(String, (usize, f64))> = voice
                .exec
                .profile
                .take()
                .unwrap_or_default()
                .into_iter()
                .collect();
            kinds.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
            kinds
                .into_iter()
                .map(|(k, (calls, secs))| json!({"op": k, "steps": calls, "seconds": secs}))
                .collect()
        } else {
            Vec::new()
        };
        rows.push(json!({
            "batch": n, "calls": plan.len(), "mean_items": held.len() as f64 / plan.len() as f64,
            "audio_seconds": audio_s, "median_seconds": median,
            "audio_seconds_per_second": audio_s / median, "times": times, "profile": profile,
        }));
    }
    Ok(
        json!({"precision": format!("{p:?}"), "warm_seconds": warm_s, "gpu": voice.header.gpu, "rows": rows}),
    )
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
        assert!(matches!(read_ids(&path), Err(Error::Usage(m)) if m.contains("calibration")));
        write(r#"{"voice":"v","calibration":0,"sentences":[{"text":"a","ids":[]}]}"#);
        assert!(matches!(read_ids(&path), Err(Error::Usage(m)) if m.contains("empty")));
        write("[1, 2]");
        assert!(matches!(read_ids(&path), Err(Error::Usage(m)) if m.contains("not an ids file")));
        assert!(read_ids(&dir.path().join("missing.json")).is_err());
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
