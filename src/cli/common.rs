//! The options several subcommands share: the global flags and where speech runs. They live
//! apart from `args.rs`, which names every subcommand's arguments, so the subcommands' own
//! files can use them without importing `args.rs` back.

use std::path::PathBuf;
#[cfg(feature = "render")]
use std::time::Duration;

use clap::{Args, ValueEnum};
#[cfg(feature = "render")]
use talker::assets::Assets;
use talker::assets::user_cache_dir;
#[cfg(feature = "render")]
use talker::speech::SpeechService;
#[cfg(feature = "render")]
use talker::tts::batch::BatchLimits;
#[cfg(feature = "render")]
use talker::tts::select::{self, BackendChoice, SpeechSetup};

#[derive(Debug, Args)]
pub struct Global {
    /// Print nothing but errors.
    #[arg(short, long, global = true, conflicts_with = "json")]
    pub quiet: bool,
    /// Machine-readable output: progress events as JSON lines on stderr, the result as JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// Directory with voices, the ONNX Runtime library and face models
    /// [default: $TALKER_ASSETS, else ~/.cache/talker/assets].
    #[arg(long, global = true, value_name = "DIR")]
    pub assets: Option<PathBuf>,
    /// Cache directory for speech and video chunks [default: $TALKER_CACHE, else ~/.cache/talker].
    #[arg(long, global = true, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// More log output (repeat for more); RUST_LOG also works.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum BackendArg {
    /// The GPU when the CUDA libraries load and a device is found, else the CPU (saying why).
    Auto,
    /// ONNX Runtime on the CPU.
    Cpu,
    /// A compiled engine on the NVIDIA GPU; fails (exit 1) when there is none.
    Cuda,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum PrecisionArg {
    Fp32,
    Fp16,
    Int8,
}

impl From<PrecisionArg> for talker::tts::Precision {
    fn from(p: PrecisionArg) -> talker::tts::Precision {
        match p {
            PrecisionArg::Fp32 => talker::tts::Precision::F32,
            PrecisionArg::Fp16 => talker::tts::Precision::F16,
            PrecisionArg::Int8 => talker::tts::Precision::I8,
        }
    }
}

/// Where speech runs and how it is batched (render, bench, worker, batch).
#[derive(Debug, Args, Clone)]
pub struct SpeechArgs {
    /// Where the voice model runs [default: $TALKER_BACKEND, else auto].
    #[arg(long, value_enum)]
    pub backend: Option<BackendArg>,
    /// Precision of the CUDA engine [default: fp16] (ONNX Runtime on the CPU always runs fp32,
    /// and says so when this is given; int8 is faster but noisier, see docs/gpu.md).
    #[arg(long, value_enum)]
    pub precision: Option<PrecisionArg>,
    /// Where CUDA engines are kept; one is built on first use per voice, GPU and precision
    /// [default: engines/ in the cache directory].
    #[arg(long, value_name = "DIR")]
    pub engines: Option<PathBuf>,
    /// Longest wait for a length bucket to fill before a partial batch goes to the model.
    #[arg(long, value_name = "MS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=10000))]
    pub max_batch_wait_ms: u64,
}

/// `--cache`, else `$TALKER_CACHE`, else `~/.cache/talker`.
pub fn cache_dir(global: &Global) -> PathBuf {
    global
        .cache
        .clone()
        .or_else(|| std::env::var_os("TALKER_CACHE").map(PathBuf::from))
        .unwrap_or_else(|| user_cache_dir().join("talker"))
}

/// `--backend` and friends, with `$TALKER_BACKEND` as the default; `lanes` CPU model calls at
/// once, `threads` ONNX Runtime threads each.
#[cfg(feature = "render")]
pub fn speech_setup(
    args: &SpeechArgs,
    global: &Global,
    threads: usize,
    lanes: usize,
    cpu_limits: BatchLimits,
) -> talker::Result<SpeechSetup> {
    let backend = match args.backend {
        Some(BackendArg::Auto) => BackendChoice::Auto,
        Some(BackendArg::Cpu) => BackendChoice::Cpu,
        Some(BackendArg::Cuda) => BackendChoice::Cuda,
        None => BackendChoice::from_env()?.unwrap_or_default(),
    };
    let assets = Assets::locate(global.assets.as_deref());
    Ok(SpeechSetup {
        backend,
        precision: args.precision.unwrap_or(PrecisionArg::Fp16).into(),
        engines: args
            .engines
            .clone()
            .unwrap_or_else(|| cache_dir(global).join("engines")),
        onnxruntime: assets.onnxruntime_library().map_err(|e| e.to_string()),
        threads,
        cpu_lanes: lanes,
        cpu_limits,
        gpu_limits: select::GPU_LIMITS,
        max_wait: Duration::from_millis(args.max_batch_wait_ms),
        warm_up: true,
    })
}

/// A `--precision` the backend does not use, said once rather than ignored silently: ONNX
/// Runtime on the CPU runs fp32 whatever was asked.
#[cfg(feature = "render")]
pub fn precision_ignored(args: &SpeechArgs, service: &SpeechService) -> Option<String> {
    let asked = args.precision?;
    let used = service.info();
    used.gpu.is_none().then(|| {
        format!(
            "--precision {} is for the CUDA engine; speech runs on the CPU ({}), which is always fp32",
            select::precision_name(asked.into()),
            used.describe()
        )
    })
}
