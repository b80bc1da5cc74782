//! Building engines (parse, plan, calibrate, compile for this GPU, write) and loading them
//! (check the header, upload, warm the buckets), plus the voice wrapper the speech stage calls.
//!
//! Input: a voice (`.onnx` + `.onnx.json`), a precision and, for INT8, calibration sentences as
//! phoneme ids. Output: `engines/<voice>-<gpu>-<precision>.engine`; a [`GpuVoice`] that turns
//! batches of phoneme ids into [`RawSpeech`] like `PiperModel::synthesize` does (the [`Backend`]
//! behind `--backend cuda`).

use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::exec::{DeviceExecutor, Hooks, padded_width};
use super::kernels::module_source;
use super::{Gpu, GpuError, Steps, nvrtc_version};
use crate::tts::batch::DEFAULT_EDGES;
use crate::tts::cuda::engine::{EngineError, EngineFile, Expect, FORMAT, Header, engine_path};
use crate::tts::cuda::io::{Feed, split};
use crate::tts::cuda::onnx::Model;
use crate::tts::cuda::program::Plan;
use crate::tts::cuda::program::op::Precision;
use crate::tts::cuda::program::precision::{self, PrecisionCounts};
use crate::tts::cuda::quant;
use crate::tts::voice::{Scales, VoiceConfig, VoiceFiles};
use crate::tts::{Backend, RawSpeech, SpeechError};

/// Quantile of |x| taken as each calibration batch's range (see `gpu::quant`).
const CALIBRATION_QUANTILE: f64 = 0.9999;
/// Batch sizes warmed for every length bucket when an engine is loaded.
const WARM_BATCHES: &[usize] = &[1, 8];

/// Compiles CUDA source to a CUBIN for compute capability `cc` with NVRTC.
pub fn compile(src: &str, cc: (i32, i32)) -> Result<Vec<u8>, GpuError> {
    use cudarc::nvrtc::{result, sys};
    let c_src = CString::new(src).map_err(|e| GpuError::Compile(e.to_string()))?;
    let prog =
        result::create_program(&c_src, None).map_err(|e| GpuError::Compile(format!("{e:?}")))?;
    let opts = [
        format!("--gpu-architecture=sm_{}{}", cc.0, cc.1),
        "--std=c++17".to_owned(),
    ];
    // SAFETY: `prog` was created above and is destroyed once at the end; the log and CUBIN
    // buffers are sized by NVRTC's own size queries.
    unsafe {
        let compiled = result::compile_program(prog, &opts);
        if let Err(e) = compiled {
            let log = result::get_program_log(prog).unwrap_or_default();
            let log: String = log.iter().map(|&c| c as u8 as char).collect();
            let _ = result::destroy_program(prog);
            return Err(GpuError::Compile(format!("{e:?}: {log}")));
        }
        let mut size = 0usize;
        sys::nvrtcGetCUBINSize(prog, &mut size)
            .result()
            .map_err(|e| GpuError::Compile(format!("{e:?}")))?;
        let mut cubin = vec![0u8; size];
        sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast())
            .result()
            .map_err(|e| GpuError::Compile(format!("{e:?}")))?;
        let _ = result::destroy_program(prog);
        Ok(cubin)
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of a kernel module's source, hex (what [`Header::kernels_sha256`] records).
fn source_sha256(src: &str) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(src.as_bytes()))
}

pub struct BuildOptions<'a> {
    pub voice: &'a VoiceFiles,
    pub precision: Precision,
    pub dir: &'a Path,
    /// Phoneme-id sequences for INT8 calibration (ignored for other precisions).
    pub calibration: &'a [Vec<i64>],
    /// Called after each build step (1 plan, 2 calibrate, 3 compile, 4 written), for a progress bar.
    pub on_step: &'a dyn Fn(u64),
}

/// Build steps reported through [`BuildOptions::on_step`].
pub const BUILD_STEPS: u64 = 4;

/// What a build did, for the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BuildReport {
    pub path: PathBuf,
    pub header: Header,
    pub seconds_plan: f64,
    pub seconds_calibrate: f64,
    pub seconds_compile: f64,
    pub bytes: usize,
}

/// The plan an engine of `precision` runs, from the voice's plan: each convolution's precision
/// (INT8 where `amax` calibrated it) and, in an FP16 engine, the decoder's activations stored as
/// FP16. Also gives the convolutions per precision and the FP16 activations' count.
pub fn engine_plan(
    mut plan: Plan,
    precision: Precision,
    amax: &HashMap<usize, f32>,
) -> (Plan, PrecisionCounts, usize) {
    let counts = precision::assign(&mut plan, precision, amax);
    let half = if precision == Precision::F16 {
        precision::half_activations(&mut plan)
    } else {
        0
    };
    (plan, counts, half)
}

/// Builds the engine for `gpu` and writes it under `opts.dir`.
pub fn build_engine(gpu: Gpu, opts: &BuildOptions<'_>) -> Result<BuildReport, GpuError> {
    let other = |e: String| GpuError::Other(e);
    let t0 = Instant::now();
    let bytes = std::fs::read(&opts.voice.model)
        .map_err(|e| other(format!("{}: {e}", opts.voice.model.display())))?;
    let sha = hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    let config = VoiceConfig::load(&opts.voice.config).map_err(|e| other(e.to_string()))?;
    let model = Model::parse(&bytes).map_err(|e| other(e.to_string()))?;
    drop(bytes);
    let base = Plan::build(&model).map_err(|e| other(e.to_string()))?;
    let seconds_plan = t0.elapsed().as_secs_f64();
    (opts.on_step)(1);
    let identity = gpu.identity.clone();
    let conv = gpu.conv_path();

    let t1 = Instant::now();
    let mut amax: HashMap<usize, f32> = HashMap::new();
    let mut gpu = Some(gpu);
    if opts.precision == Precision::I8 {
        if opts.calibration.is_empty() {
            return Err(other("INT8 needs calibration sentences".into()));
        }
        let mut f16 = base.clone();
        precision::assign(&mut f16, Precision::F16, &HashMap::new());
        let candidates = precision::int8_candidates(&f16);
        let (src, _) = module_source(&f16);
        let cubin = compile(&src, identity.capability)?;
        let mut exec = DeviceExecutor::new(gpu.take().expect("gpu"), f16, cubin)?;
        let quiet = Scales {
            noise: 0.0,
            length: config.defaults.length,
            noise_w: 0.0,
        };
        for chunk in opts.calibration.chunks(8) {
            let refs: Vec<&[i64]> = chunk.iter().map(Vec::as_slice).collect();
            let mut hook = |i: usize, x: &crate::tts::cuda::tensor::Tensor| {
                if candidates.contains(&i) {
                    let q = quant::abs_quantile(x.as_f32().unwrap_or(&[]), CALIBRATION_QUANTILE);
                    let e = amax.entry(i).or_insert(0.0);
                    *e = e.max(q);
                }
            };
            exec.run(
                &Feed::new(&refs, quiet, 0),
                Hooks {
                    conv_input: Some(&mut hook),
                    step_output: None,
                },
            )?;
        }
        gpu = Some(exec.gpu);
    }
    let seconds_calibrate = t1.elapsed().as_secs_f64();
    (opts.on_step)(2);
    drop(gpu);

    let (plan, counts, fp16_activations) = engine_plan(base, opts.precision, &amax);
    let int8_layers = plan
        .steps
        .iter()
        .filter_map(|s| match &s.op {
            crate::tts::cuda::program::op::Op::Conv(c)
            | crate::tts::cuda::program::op::Op::ConvTranspose(c)
                if c.precision == Precision::I8 =>
            {
                Some((s.name.clone(), c.input_amax.unwrap_or(0.0)))
            }
            _ => None,
        })
        .collect();
    let t2 = Instant::now();
    let (src, names) = module_source(&plan);
    let cubin = compile(&src, identity.capability)?;
    let seconds_compile = t2.elapsed().as_secs_f64();
    (opts.on_step)(3);
    let mut kernels: Vec<&String> = names.values().collect();
    kernels.sort();
    kernels.dedup();
    let header = Header {
        format: FORMAT,
        talker_version: env!("CARGO_PKG_VERSION").into(),
        voice: opts.voice.name.clone(),
        voice_sha256: sha,
        precision: opts.precision,
        gpu: identity.clone(),
        nvrtc: nvrtc_version()?,
        buckets: DEFAULT_EDGES.to_vec(),
        warm_batches: WARM_BATCHES.to_vec(),
        sample_rate: config.sample_rate,
        hop: config.hop,
        convs: counts,
        int8_layers,
        calibration_sentences: if opts.precision == Precision::I8 {
            opts.calibration.len()
        } else {
            0
        },
        kernels: kernels.len(),
        conv,
        kernels_sha256: source_sha256(&src),
        fp16_activations,
    };
    let file = EngineFile {
        header: header.clone(),
        plan,
        cubin,
    };
    let out = file.to_bytes().map_err(other)?;
    std::fs::create_dir_all(opts.dir).map_err(|e| other(format!("{}: {e}", opts.dir.display())))?;
    let path = engine_path(
        opts.dir,
        &opts.voice.name,
        &file.header.voice_sha256,
        &identity,
        opts.precision,
    );
    write_atomically(&path, &out).map_err(|e| other(format!("{}: {e}", path.display())))?;
    (opts.on_step)(4);
    Ok(BuildReport {
        path,
        header,
        seconds_plan,
        seconds_calibrate,
        seconds_compile,
        bytes: out.len(),
    })
}

/// Writes a private temp file beside `path` and renames it over `path`: processes that build the
/// same engine at once each publish a whole file, and a reader never sees a partial one.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".engine-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A voice running on the GPU from an engine.
pub struct GpuVoice {
    pub exec: DeviceExecutor,
    pub header: Header,
    /// Warm-up calls run so far, in the order of [`GpuVoice::warm_step`].
    warmed: usize,
}

impl GpuVoice {
    /// Loads `path` after checking it was built for this GPU, voice, precision and talker.
    pub fn load(
        gpu: Gpu,
        path: &Path,
        voice_sha256: &str,
        precision: Precision,
    ) -> Result<GpuVoice, GpuError> {
        let mut steps = Steps::start();
        let file = EngineFile::read(path)?;
        steps.done("file");
        let identity = gpu.identity.clone();
        let kernels = source_sha256(&module_source(&file.plan).0);
        steps.done("kernel source");
        file.header.check(
            path,
            &Expect {
                gpu: &identity,
                voice_sha256,
                precision,
                nvrtc: nvrtc_version()?,
                conv: gpu.conv_path(),
                kernels_sha256: &kernels,
            },
        )?;
        steps.done("checks");
        let mut exec = DeviceExecutor::new(gpu, file.plan, file.cubin)?;
        exec.set_graphs(super::exec::graphs_from_env().map_err(GpuError::BadInput)?);
        steps.done("module and weights");
        steps.log("engine loaded");
        Ok(GpuVoice {
            exec,
            header: file.header,
            warmed: 0,
        })
    }

    /// Loads the engine for this voice and precision, building it first when it is missing or
    /// was built for something else; `on_build` hears why before the build starts (a line for
    /// people), and `on_step` each build step (see [`BUILD_STEPS`]).
    pub fn open_or_build(
        voice: &VoiceFiles,
        voice_sha256: &[u8; 32],
        precision: Precision,
        dir: &Path,
        calibration: &[Vec<i64>],
        on_build: &dyn Fn(String),
        on_step: &dyn Fn(u64),
    ) -> Result<GpuVoice, GpuError> {
        let gpu = Gpu::open(0)?;
        let sha = hex(voice_sha256);
        let path = engine_path(dir, &voice.name, &sha, &gpu.identity, precision);
        match Self::load(gpu, &path, &sha, precision) {
            Ok(v) => Ok(v),
            Err(GpuError::Engine(
                e @ (EngineError::Mismatch { .. } | EngineError::Corrupt { .. }),
            )) => {
                on_build(if path.is_file() {
                    format!("{e}; rebuilding it")
                } else {
                    format!(
                        "no CUDA engine at {} yet: building it (takes seconds, once per voice, GPU and precision)",
                        path.display()
                    )
                });
                let report = build_engine(
                    Gpu::open(0)?,
                    &BuildOptions {
                        voice,
                        precision,
                        dir,
                        calibration,
                        on_step,
                    },
                )?;
                Self::load(Gpu::open(0)?, &report.path, &sha, precision)
            }
            Err(e) => Err(e),
        }
    }

    /// Runs every warm-up call left (see [`GpuVoice::warm_step`]) so kernels, cuBLAS heuristics
    /// and the memory pool are ready before real work; returns the seconds it took.
    pub fn warm(&mut self) -> Result<f64, GpuError> {
        let t = Instant::now();
        while let Some(done) = self.warm_step() {
            done?;
        }
        Ok(t.elapsed().as_secs_f64())
    }

    /// Runs the next warm-up call, one batch per (bucket edge, warm batch size), shortest edge
    /// first; `None` once all have run. One call at a time, so that the speech batcher can serve
    /// a request between two of them.
    pub fn warm_step(&mut self) -> Option<Result<(), GpuError>> {
        let (edge, n) = warm_shape(&self.header.buckets, &self.header.warm_batches, self.warmed)?;
        self.warmed += 1;
        // BOS, then pad/phoneme pairs: a valid id sequence of the bucket's length.
        let ids: Vec<i64> = (0..edge)
            .map(|i| {
                if i == 0 {
                    1
                } else if i % 2 == 1 {
                    0
                } else {
                    20 + (i % 30) as i64
                }
            })
            .collect();
        let batch: Vec<&[i64]> = vec![ids.as_slice(); n];
        let quiet = Scales {
            noise: 0.0,
            length: 1.0,
            noise_w: 0.0,
        };
        Some(self.synthesize(&batch, quiet, 0).map(drop))
    }

    pub fn synthesize(
        &mut self,
        batch: &[&[i64]],
        scales: Scales,
        speaker: u32,
    ) -> Result<Vec<RawSpeech>, GpuError> {
        if batch.is_empty() || batch.iter().all(|b| b.is_empty()) {
            return Ok(Vec::new());
        }
        // With graphs on, pad to the bucket's edge: a bucket's batches then share their shapes
        // and so their captured graphs.
        let width = if self.exec.graphs_on() {
            let longest = batch.iter().map(|b| b.len()).max().unwrap_or(0);
            padded_width(&self.header.buckets, longest)
        } else {
            0
        };
        let out = self.exec.run(
            &Feed::padded(batch, width, scales, speaker),
            Hooks::default(),
        )?;
        split(&out, batch, self.header.hop).map_err(|e| GpuError::Other(e.0))
    }
}

/// The `k`th warm-up call's (ids per item, items): every size of `sizes` at each edge of
/// `buckets`, shortest edge first; `None` past the last.
fn warm_shape(buckets: &[usize], sizes: &[usize], k: usize) -> Option<(usize, usize)> {
    let edge = *buckets.get(k.checked_div(sizes.len())?)?;
    Some((edge, sizes[k % sizes.len()]))
}

impl Backend for GpuVoice {
    fn synthesize(
        &mut self,
        batch: &[&[i64]],
        scales: Scales,
        speaker: u32,
    ) -> Result<Vec<RawSpeech>, SpeechError> {
        Ok(GpuVoice::synthesize(self, batch, scales, speaker)?)
    }

    fn warm_step(&mut self) -> Option<Result<(), SpeechError>> {
        Some(GpuVoice::warm_step(self)?.map_err(SpeechError::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_calls_cover_every_edge_and_size_once_in_order() {
        let shapes: Vec<_> = (0..5).map(|k| warm_shape(&[48, 96], &[1, 8], k)).collect();
        assert_eq!(
            shapes,
            [
                Some((48, 1)),
                Some((48, 8)),
                Some((96, 1)),
                Some((96, 8)),
                None
            ]
        );
        assert_eq!(warm_shape(&[48], &[], 0), None);
    }

    /// Builders racing on one engine path each publish a whole file; no temp file is left.
    #[test]
    fn concurrent_writers_never_leave_a_partial_engine() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v-abc-gpu-fp16.engine");
        let bodies: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 1 << 20]).collect();
        let (bodies, path) = (&bodies, &path);
        std::thread::scope(|s| {
            for body in bodies {
                s.spawn(move || {
                    for _ in 0..5 {
                        write_atomically(path, body).unwrap();
                        let seen = std::fs::read(path).unwrap();
                        assert!(bodies.contains(&seen), "a reader saw a partial file");
                    }
                });
            }
        });
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [path.file_name().unwrap()]);
    }
}
