//! Which backend speaks: `--backend auto|cpu|cuda`, `--precision`, and loading a voice on it.
//!
//! Input: a [`SpeechSetup`] (what the user asked for). Output: a [`Resolved`] backend, decided
//! before any work: `cuda` without a usable GPU fails here (exit 1), `auto` takes the GPU when
//! the CUDA libraries load and the driver sees a device, and otherwise says in one line why it
//! speaks on the CPU. Nothing here creates a CUDA context: the probe only loads the libraries
//! (after checking they exist) and asks the driver for the device's name. The voice itself is
//! loaded later, by the batcher's thread, through [`Resolved::load`] (on the GPU as soon as a
//! render names it, see [`Resolved::preloads`]); a CUDA engine is built there on first use and
//! stored under `engines`, and warmed by the batcher while it is idle.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::batch::BatchLimits;
use super::batcher::VoiceRef;
use super::{Backend, Precision, SpeechError};
use crate::progress::Event;

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// The GPU when one is usable, else the CPU (saying why).
    #[default]
    Auto,
    Cpu,
    Cuda,
}

impl BackendChoice {
    pub fn parse(s: &str) -> Result<BackendChoice, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "cuda" | "gpu" => Ok(BackendChoice::Cuda),
            other => Err(format!("{other:?} is not a backend; use auto, cpu or cuda")),
        }
    }

    /// `$TALKER_BACKEND`, the default of `--backend`; a bad value is bad input (exit 2).
    pub fn from_env() -> Result<Option<BackendChoice>, SpeechError> {
        match std::env::var("TALKER_BACKEND") {
            Ok(v) if !v.trim().is_empty() => BackendChoice::parse(&v)
                .map(Some)
                .map_err(|m| SpeechError::BadInput(format!("$TALKER_BACKEND: {m}"))),
            _ => Ok(None),
        }
    }
}

pub fn precision_name(p: Precision) -> &'static str {
    super::cuda::engine::precision_name(p)
}

/// Default batch limits on the GPU: at most 64 sentences and 8192 padded phoneme ids per call
/// (about 330 s of audio), which bounds the engine's activations whatever the queue holds.
pub const GPU_LIMITS: BatchLimits = BatchLimits {
    token_budget: 8192,
    max_items: 64,
};

/// Default wait for a bucket to fill before a partial batch is sent.
const DEFAULT_MAX_WAIT: Duration = Duration::from_millis(20);

/// What a run asks of speech.
#[derive(Debug, Clone)]
pub struct SpeechSetup {
    pub backend: BackendChoice,
    /// CUDA engines only; ONNX Runtime on the CPU always runs FP32.
    pub precision: Precision,
    /// Where CUDA engines are stored and looked up (default: the cache directory's `engines/`).
    pub engines: PathBuf,
    /// The ONNX Runtime library, or why it was not found (only an error if the CPU speaks).
    pub onnxruntime: Result<PathBuf, String>,
    /// ONNX Runtime intra-op threads per model call.
    pub threads: usize,
    /// Model calls at once on the CPU (one per concurrent render of a worker); the GPU takes one.
    pub cpu_lanes: usize,
    /// Batching on the CPU (`--batch-budget`; one sentence per call by default).
    pub cpu_limits: BatchLimits,
    pub gpu_limits: BatchLimits,
    /// Longest wait for a length bucket to fill (`--max-batch-wait-ms`).
    pub max_wait: Duration,
    /// Warm-up calls while idle ([`crate::tts::batcher::Policy::warm_up`]): off for a process
    /// that runs one render.
    pub warm_up: bool,
}

impl SpeechSetup {
    /// The CPU, one sentence per call, as a render did before backends existed.
    pub fn cpu(onnxruntime: Result<PathBuf, String>, threads: usize) -> SpeechSetup {
        SpeechSetup {
            backend: BackendChoice::Cpu,
            precision: Precision::F16,
            engines: PathBuf::from("engines"),
            onnxruntime,
            threads,
            cpu_lanes: 1,
            cpu_limits: BatchLimits::SINGLE,
            gpu_limits: GPU_LIMITS,
            max_wait: DEFAULT_MAX_WAIT,
            warm_up: true,
        }
    }
}

/// The backend a run actually uses, as reports and JSON results name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendInfo {
    /// "cpu" or "cuda".
    pub backend: &'static str,
    /// The GPU's name (cuda only).
    pub gpu: Option<String>,
    /// "fp32", "fp16" or "int8".
    pub precision: &'static str,
    /// The ONNX Runtime library (cpu) or "cuda".
    pub runtime: String,
    /// Why `auto` speaks on the CPU, when it does (one line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl BackendInfo {
    /// The backend part of every phrase-cache key: CPU and GPU audio (and two precisions, or two
    /// GPU models) never share a cached phrase.
    pub fn cache_tag(&self) -> String {
        match &self.gpu {
            Some(gpu) => format!("cuda/{}/{}", super::cuda::engine::slug(gpu), self.precision),
            None => format!("{}/cpu/{}", self.runtime, self.precision),
        }
    }

    /// "cuda (NVIDIA H200, fp16)" or "cpu (ONNX Runtime, fp32)".
    pub fn describe(&self) -> String {
        match &self.gpu {
            Some(gpu) => format!("cuda ({gpu}, {})", self.precision),
            None => format!("cpu (ONNX Runtime, {})", self.precision),
        }
    }
}

/// A decided backend: how to load voices on it and how to batch for it.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub info: BackendInfo,
    pub limits: BatchLimits,
    /// Model calls at once.
    pub lanes: usize,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Cpu {
        runtime: PathBuf,
        threads: usize,
    },
    #[cfg(feature = "cuda")]
    Cuda {
        precision: Precision,
        engines: PathBuf,
    },
}

fn cpu(setup: &SpeechSetup, note: Option<String>) -> Result<Resolved, SpeechError> {
    let runtime = setup.onnxruntime.clone().map_err(SpeechError::Runtime)?;
    let name = runtime
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Resolved {
        info: BackendInfo {
            backend: "cpu",
            gpu: None,
            precision: "fp32",
            runtime: name,
            note,
        },
        limits: setup.cpu_limits,
        lanes: setup.cpu_lanes.max(1),
        kind: Kind::Cpu {
            runtime,
            threads: setup.threads.max(1),
        },
    })
}

/// How one render on the CPU spreads the `cores` it was given over ONNX Runtime sessions: returns
/// (lanes, intra-op threads each), whose product is at most `cores`. `lanes` asked for is kept (up
/// to one per core). By default a render takes one lane per core from 4 cores, and from 8 one per
/// two cores: Piper's calls are one sentence each and scale poorly inside a call (measured on 2
/// cores: two threads speak 1.15x as fast as one) while lanes speak different sentences at once.
/// Below 4 cores it keeps one lane: each costs a session of about 200 MB (the model, its prepacked
/// weights, its arena; measured: a 20-minute book peaked at 511 MB with two lanes against 310 MB
/// with one), which would take a small machine's 10-hour book past 400 MB.
pub fn cpu_split(cores: usize, lanes: Option<usize>) -> (usize, usize) {
    let cores = cores.max(1);
    let lanes = match lanes {
        Some(n) => n.clamp(1, cores),
        None if cores < 4 => 1,
        None if cores < 8 => cores,
        None => cores / 2,
    };
    (lanes, (cores / lanes).max(1))
}

/// Decides the backend; see the module header.
pub fn resolve(setup: &SpeechSetup) -> Result<Resolved, SpeechError> {
    // `--backend cpu` never asks the driver (starting it costs a fraction of a second).
    if setup.backend == BackendChoice::Cpu {
        return cpu(setup, None);
    }
    match (setup.backend, gpu_probe()) {
        (BackendChoice::Cuda, Err(why)) => Err(SpeechError::Unavailable(format!(
            "--backend cuda: {why}; use --backend cpu (or auto) to speak on the CPU"
        ))),
        (_, Err(why)) => cpu(setup, Some(format!("speech on the CPU: {why}"))),
        (_, Ok(gpu)) => cuda(setup, gpu),
    }
}

/// What the probe finds: the GPU's name (nothing can be found without the `cuda` feature).
#[cfg(feature = "cuda")]
type Found = String;
#[cfg(not(feature = "cuda"))]
type Found = std::convert::Infallible;

#[cfg(feature = "cuda")]
fn gpu_probe() -> Result<Found, String> {
    super::cuda::device::probe()
        .map(|g| g.name)
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn gpu_probe() -> Result<Found, String> {
    Err("this talker was built without the cuda feature".to_owned())
}

#[cfg(feature = "cuda")]
fn cuda(setup: &SpeechSetup, gpu: Found) -> Result<Resolved, SpeechError> {
    Ok(Resolved {
        info: BackendInfo {
            backend: "cuda",
            gpu: Some(gpu),
            precision: precision_name(setup.precision),
            runtime: "cuda".to_owned(),
            note: None,
        },
        limits: setup.gpu_limits,
        lanes: 1,
        kind: Kind::Cuda {
            precision: setup.precision,
            engines: setup.engines.clone(),
        },
    })
}

#[cfg(not(feature = "cuda"))]
fn cuda(_: &SpeechSetup, found: Found) -> Result<Resolved, SpeechError> {
    match found {}
}

/// INT8 calibration sentences (phoneme ids of the standard espeak id map, the first 32 lines of
/// `tests/data/gpu/sentences.txt`), so an INT8 engine is the same whatever the script.
#[cfg(feature = "cuda")]
fn calibration() -> Vec<Vec<i64>> {
    #[derive(serde::Deserialize)]
    struct Sentence {
        ids: Vec<i64>,
    }
    #[derive(serde::Deserialize)]
    struct IdsFile {
        calibration: usize,
        sentences: Vec<Sentence>,
    }
    let f: IdsFile = serde_json::from_str(include_str!("../../tests/data/gpu/ids.json"))
        .expect("the bundled ids file parses");
    f.sentences
        .into_iter()
        .take(f.calibration)
        .map(|s| s.ids)
        .collect()
}

impl Resolved {
    /// Whether a render's voices are loaded while it plans ([`super::batcher::Client::preload`]):
    /// on the GPU, whose one lane would otherwise load the engine (context, module, weights: most
    /// of a second) in front of the first sentences. The price: a render whose speech is all
    /// cached may wait as it ends for a load it did not need (a batcher finishes the load under
    /// way before it stops). CPU lanes keep loading on first use: each lane has its own session,
    /// about 200 MB and a fraction of that time each, not worth that price.
    pub fn preloads(&self) -> bool {
        self.info.gpu.is_some()
    }

    /// On the GPU, starts making the CUDA context now, in the background (see
    /// [`super::cuda::device::make_context_early`]); join the handle before the process ends.
    pub fn start_early(&self) -> Option<std::thread::JoinHandle<()>> {
        match &self.kind {
            #[cfg(feature = "cuda")]
            Kind::Cuda { .. } => Some(super::cuda::device::make_context_early()),
            _ => None,
        }
    }

    /// Loads `voice` on this backend (on the thread that will run it). A CUDA engine is built
    /// when missing or stale; `events` hears about it (a line and a progress bar).
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub fn load(
        &self,
        voice: &VoiceRef,
        events: &dyn Fn(Event),
    ) -> Result<Box<dyn Backend>, SpeechError> {
        match &self.kind {
            Kind::Cpu { runtime, threads } => Ok(Box::new(super::onnx::PiperModel::load(
                &voice.files,
                runtime,
                *threads,
            )?)),
            #[cfg(feature = "cuda")]
            Kind::Cuda { precision, engines } => {
                use super::cuda::device::build::{BUILD_STEPS, GpuVoice};
                use crate::progress::Stage;
                let built = std::cell::Cell::new(false);
                let calibration = if *precision == Precision::I8 {
                    calibration()
                } else {
                    Vec::new()
                };
                let v = GpuVoice::open_or_build(
                    &voice.files,
                    &voice.hash,
                    *precision,
                    engines,
                    &calibration,
                    &|message| {
                        built.set(true);
                        events(Event::Warning { message });
                        events(Event::Start {
                            stage: Stage::Engine,
                            total: BUILD_STEPS,
                        });
                    },
                    &|done| {
                        events(Event::Advance {
                            stage: Stage::Engine,
                            done,
                        })
                    },
                )?;
                if built.get() {
                    events(Event::Finish {
                        stage: Stage::Engine,
                    });
                }
                // Not warmed here: the batcher runs the warm-up calls one by one while no request
                // waits (`Backend::warm_step`), so the first sentences do not wait for them.
                Ok(Box::new(v))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_split_uses_the_cores_given() {
        assert_eq!(cpu_split(0, None), (1, 1));
        assert_eq!(cpu_split(2, None), (1, 2));
        assert_eq!(cpu_split(4, None), (4, 1));
        assert_eq!(cpu_split(7, None), (7, 1));
        assert_eq!(cpu_split(16, None), (8, 2));
        assert_eq!(cpu_split(17, None), (8, 2));
        assert_eq!(cpu_split(2, Some(2)), (2, 1));
        assert_eq!(cpu_split(16, Some(4)), (4, 4));
        assert_eq!(cpu_split(2, Some(9)), (2, 1));
    }

    #[test]
    fn choices_parse() {
        assert_eq!(BackendChoice::parse("CUDA"), Ok(BackendChoice::Cuda));
        assert_eq!(BackendChoice::parse(" cpu "), Ok(BackendChoice::Cpu));
        assert_eq!(BackendChoice::parse("auto"), Ok(BackendChoice::Auto));
        assert!(
            BackendChoice::parse("tpu")
                .unwrap_err()
                .contains("auto, cpu or cuda")
        );
    }

    #[test]
    fn cpu_and_gpu_audio_have_different_cache_tags() {
        let cpu = BackendInfo {
            backend: "cpu",
            gpu: None,
            precision: "fp32",
            runtime: "libonnxruntime.so.1.32.0".into(),
            note: None,
        };
        assert_eq!(cpu.cache_tag(), "libonnxruntime.so.1.32.0/cpu/fp32");
        let gpu = BackendInfo {
            backend: "cuda",
            gpu: Some("NVIDIA H200".into()),
            precision: "fp16",
            runtime: "cuda".into(),
            note: None,
        };
        assert_eq!(gpu.cache_tag(), "cuda/nvidia-h200/fp16");
        let int8 = BackendInfo {
            precision: "int8",
            ..gpu.clone()
        };
        assert_ne!(int8.cache_tag(), gpu.cache_tag());
    }

    /// Here (CI, no GPU) `cuda` fails cleanly before any work and `auto` says why it uses the CPU;
    /// on a GPU machine both pick the GPU.
    #[test]
    fn resolution_without_a_gpu() {
        let setup = |backend| SpeechSetup {
            backend,
            ..SpeechSetup::cpu(Ok(PathBuf::from("/x/libonnxruntime.so.1")), 2)
        };
        let cpu = resolve(&setup(BackendChoice::Cpu)).unwrap();
        assert_eq!(cpu.info.backend, "cpu");
        assert!(cpu.info.note.is_none());
        let auto = resolve(&setup(BackendChoice::Auto)).unwrap();
        match gpu_probe() {
            Err(_) => {
                assert_eq!(auto.info.backend, "cpu");
                assert!(auto.info.note.unwrap().starts_with("speech on the CPU: "));
                let e = resolve(&setup(BackendChoice::Cuda)).unwrap_err();
                assert!(matches!(e, SpeechError::Unavailable(_)), "{e}");
                assert!(e.to_string().contains("--backend cpu"), "{e}");
                assert_eq!(e.exit_code(), 1);
            }
            Ok(_) => assert_eq!(auto.info.backend, "cuda"),
        }
        let missing = SpeechSetup {
            onnxruntime: Err("no runtime".into()),
            ..setup(BackendChoice::Cpu)
        };
        assert!(matches!(resolve(&missing), Err(SpeechError::Runtime(_))));
    }
}
