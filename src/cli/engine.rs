//! `talker engine build|validate|bench|ids`: GPU speech engines from the command line.
//!
//! `build` writes `engines/<voice>-<sha>-<gpu>-<precision>.engine`; `validate` and `bench` are
//! `talker::tts::cuda::device::check` (see there); `ids` phonemizes sentences into the ids file
//! the others read. All print one JSON object on stdout.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use talker::Result;
use talker::assets::{Assets, DEFAULT_VOICE};
use talker::tts::SpeechError;
use talker::tts::cuda::device::Gpu;
use talker::tts::cuda::device::build::{BuildOptions, build_engine};
use talker::tts::cuda::device::check::{self, Check, load_ids};
use talker::tts::voice::VoiceFiles;

use super::common::{Global, PrecisionArg};
use super::ui::print_result;

#[derive(Debug, Args)]
pub struct Common {
    /// Voice: a name in the assets' voices/ folder or a path to a Piper .onnx.
    #[arg(long, default_value = DEFAULT_VOICE)]
    pub voice: String,
    /// Where engines are written and looked up [default: the cache directory's engines/, where
    /// `render` looks].
    #[arg(long, value_name = "DIR")]
    pub engines: Option<PathBuf>,
    /// Phoneme ids (JSON from `talker engine ids`): its first `calibration` sentences calibrate
    /// INT8, the rest are held out for validation and benchmarks [default: the ids built into
    /// talker, which `render` calibrates with].
    #[arg(long, value_name = "FILE")]
    pub ids: Option<PathBuf>,
}

impl Common {
    fn engines(&self, global: &Global) -> PathBuf {
        self.engines
            .clone()
            .unwrap_or_else(|| super::common::cache_dir(global).join("engines"))
    }
}

/// CUDA graphs for `validate` and `bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphsArg {
    /// One kernel launch per step (the default unless TALKER_CUDA_GRAPHS=1).
    Off,
    /// Capture the static stretches of a run per (bucket, batch size) and replay them.
    On,
    /// As on, and pad the frame axis to buckets so the flow and decoder are captured too.
    Frames,
    /// bench only: time off and on in this process and print the ratio.
    Both,
}

/// The convolution paths `bench` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConvArg {
    /// im2col + cuBLAS GEMMs (the path of hosts without cuDNN).
    Gemm,
    /// cuDNN (libcudnn.so.9 must be on the library path).
    Cudnn,
    /// gemm, then cudnn, in this process, with the ratio printed.
    Both,
}

/// `--graphs` if given, else `$TALKER_CUDA_GRAPHS` (a bad value is bad input, exit 2).
fn graphs_mode(arg: Option<GraphsArg>) -> Result<check::GraphsMode> {
    let arg = match arg {
        Some(a) => a,
        None => match check::graphs_from_env().map_err(SpeechError::BadInput)? {
            check::GraphMode::Off => GraphsArg::Off,
            check::GraphMode::On => GraphsArg::On,
            check::GraphMode::Frames => GraphsArg::Frames,
        },
    };
    Ok(match arg {
        GraphsArg::Off => check::GraphsMode::Off,
        GraphsArg::On => check::GraphsMode::On,
        GraphsArg::Frames => check::GraphsMode::Frames,
        GraphsArg::Both => check::GraphsMode::Both,
    })
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
        /// Also write every sentence's audio as 16-bit mono WAV to DIR/<precision>/<index>.wav
        /// (index: the held-out sentence's position), e.g. for PESQ against the fp32 engine.
        /// DIR/<precision>/ must be new or empty.
        #[arg(long, value_name = "DIR")]
        save_audio: Option<PathBuf>,
        /// Run the sentences with CUDA graphs (on; frames: also the frame axis padded to buckets)
        /// or one launch per step (off) [default: $TALKER_CUDA_GRAPHS, else off]. The --trace
        /// sentence always runs step by step.
        #[arg(long, value_enum, value_name = "on|off|frames")]
        graphs: Option<GraphsArg>,
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
        /// Time with CUDA graphs (on; frames: also the frame axis padded to buckets), without
        /// (off), or off and on in this process with the ratio printed (both) [default:
        /// $TALKER_CUDA_GRAPHS, else off].
        #[arg(long, value_enum, value_name = "on|off|frames|both")]
        graphs: Option<GraphsArg>,
        /// Run the convolutions through the engine's own im2col + GEMM, through cuDNN (loaded
        /// for this; it must be on the library path), or both in this process with the ratio
        /// printed [default: the engine's path: GEMM, or cuDNN with TALKER_CUDA_CONV=cudnn].
        #[arg(long, value_enum, value_name = "gemm|cudnn|both")]
        conv: Option<ConvArg>,
        /// Bracket the last timed pass of the largest batch size (of the last convolution path
        /// and graphs mode timed) with the CUDA profiler's start and stop, so
        /// `ncu --profile-from-start off` times every kernel of that pass alone.
        #[arg(long)]
        mark: bool,
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

fn voice_files(global: &Global, voice: &str) -> Result<VoiceFiles> {
    Ok(VoiceFiles::resolve(
        voice,
        &Assets::locate(global.assets.as_deref()).voices_dir(),
    )?)
}

fn check_of<'a>(common: &'a Common, voice: &'a VoiceFiles, engines: &'a Path) -> Check<'a> {
    Check {
        voice,
        engines,
        ids: common.ids.as_deref(),
    }
}

pub fn run_engine(action: &EngineAction, global: &Global) -> Result<()> {
    // A bad convolution switch is bad input before any work, GPU or not.
    talker::tts::cuda::device::conv_from_env().map_err(SpeechError::BadInput)?;
    let out = match action {
        EngineAction::Build { common, precision } => {
            let files = voice_files(global, &common.voice)?;
            let ids = load_ids(common.ids.as_deref())?;
            let calibration: Vec<Vec<i64>> = ids.sentences[..ids.calibration]
                .iter()
                .map(|s| s.ids.clone())
                .collect();
            let t = Instant::now();
            let gpu = Gpu::open(0).map_err(SpeechError::from)?;
            let report = build_engine(
                gpu,
                &BuildOptions {
                    voice: &files,
                    precision: (*precision).into(),
                    dir: &common.engines(global),
                    calibration: &calibration,
                    on_step: &|_| {},
                },
            )
            .map_err(SpeechError::from)?;
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
            save_audio,
            graphs,
        } => {
            if let Some(dir) = save_audio {
                check::audio_dir(dir, (*precision).into())?;
            }
            let graphs = match graphs_mode(*graphs)? {
                check::GraphsMode::Off => check::GraphMode::Off,
                check::GraphsMode::On => check::GraphMode::On,
                check::GraphsMode::Frames => check::GraphMode::Frames,
                check::GraphsMode::Both => {
                    return Err(SpeechError::BadInput(
                        "validate --graphs takes on, off or frames (both is for bench)".into(),
                    )
                    .into());
                }
            };
            check::validate(
                &check_of(
                    common,
                    &voice_files(global, &common.voice)?,
                    &common.engines(global),
                ),
                (*precision).into(),
                check::ValidateOptions {
                    out: out.as_deref(),
                    save_audio: save_audio.as_deref(),
                    trace: *trace,
                    limit: *limit,
                    graphs,
                },
            )?
        }
        EngineAction::Bench {
            common,
            precision,
            batches,
            passes,
            profile,
            graphs,
            conv,
            mark,
        } => {
            let opts = check::BenchOptions {
                passes: *passes,
                profile: *profile,
                mark: *mark,
                graphs: graphs_mode(*graphs)?,
                conv: match conv {
                    None => check::ConvMode::Engine,
                    Some(ConvArg::Gemm) => check::ConvMode::Gemm,
                    Some(ConvArg::Cudnn) => check::ConvMode::Cudnn,
                    Some(ConvArg::Both) => check::ConvMode::Both,
                },
            };
            let files = voice_files(global, &common.voice)?;
            let engines = common.engines(global);
            let mut results = Vec::new();
            for p in precision {
                results.push(check::bench(
                    &check_of(common, &files, &engines),
                    (*p).into(),
                    batches,
                    opts,
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
        } => ids::make_ids(global, text, output, voice, *calibration)?,
    };
    print_result(&out.to_string(), || "the result".to_owned())
}

/// `talker engine ids` needs espeak-ng, so it is built with the renderer only.
#[cfg(feature = "render")]
mod ids {
    use std::path::Path;

    use serde_json::{Value, json};
    use talker::tts::cuda::device::check::{IdsFile, Sentence};
    use talker::tts::voice::VoiceConfig;
    use talker::{Error, Result};

    use super::{Global, voice_files};

    pub(super) fn make_ids(
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
            for s in talker::phonemize::Phonemizer::global()?
                .phonemize(&config.espeak_voice, &normalized)?
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
}
