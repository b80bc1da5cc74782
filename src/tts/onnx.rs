//! A Piper voice run by ONNX Runtime (loaded at run time from the PyPI wheel's library).
//!
//! Input: batches of phoneme-id sequences. Output: for each item its own PCM, trimmed to the item's
//! length (batched items are padded to the longest, and that padding is not silent), plus the
//! duration in frames of every phoneme id. `samples = frames × hop` holds exactly per item. This is
//! the [`Backend`] behind `--backend cpu`.

use std::path::Path;
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;
use sha2::{Digest, Sha256};

use super::error::SpeechError;
use super::graph_patch::{AlignmentOutputs, add_alignment_outputs};
use super::voice::{Scales, VoiceConfig, VoiceFiles};
use super::{Backend, RawSpeech};

pub struct PiperModel {
    session: Session,
    pub config: VoiceConfig,
    /// sha256 of the `.onnx` file: part of every phrase-cache key.
    pub model_hash: [u8; 32],
    names: AlignmentOutputs,
}

/// ONNX Runtime's own log lines go through `tracing`, so they follow the binary's log settings
/// (plain text on a pipe, JSON events with `--json`) instead of writing coloured lines to stderr.
fn ort_log(level: ort::logging::LogLevel, category: &str, _: &str, location: &str, message: &str) {
    use ort::logging::LogLevel;
    match level {
        LogLevel::Verbose => tracing::trace!(category, location, "onnxruntime: {message}"),
        LogLevel::Info => tracing::debug!(category, location, "onnxruntime: {message}"),
        LogLevel::Warning => tracing::warn!("onnxruntime: {message}"),
        LogLevel::Error | LogLevel::Fatal => tracing::error!("onnxruntime: {message}"),
    }
}

fn environment(library: &Path) -> Result<&'static Environment, SpeechError> {
    static ENV: OnceLock<std::result::Result<Environment, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let builder = ort::init_from(library).map_err(|e| {
            format!(
                "cannot load the ONNX Runtime library {}: {e} (run scripts/fetch-assets, or set ORT_DYLIB_PATH)",
                library.display()
            )
        })?;
        builder
            .with_name("talker")
            .with_logger(std::sync::Arc::new(ort_log))
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| SpeechError::Runtime(e.clone()))
}

impl PiperModel {
    /// Loads and patches the voice; `threads` is ONNX Runtime's intra-op thread count.
    pub fn load(
        files: &VoiceFiles,
        library: &Path,
        threads: usize,
    ) -> Result<PiperModel, SpeechError> {
        let config = VoiceConfig::load(&files.config)?;
        let bytes = std::fs::read(&files.model).map_err(SpeechError::io(&files.model))?;
        let model_hash: [u8; 32] = Sha256::digest(&bytes).into();
        let (patched, names) =
            add_alignment_outputs(&bytes).map_err(|source| SpeechError::VoiceGraph {
                path: files.model.clone(),
                source,
            })?;
        drop(bytes);
        let env = environment(library)?;
        // ONNX Runtime's arena keeps the largest call's activations (about 20 MB per second of
        // audio) for the life of the session. That is bounded, because sentences are split at 110
        // characters, and it is what makes synthesis as fast as piper-tts: without the arena every
        // layer's buffers are fresh pages from the kernel (measured: half as fast). No memory
        // pattern: shapes change with every sentence. No spinning: the chunk workers need the
        // cores while synthesis waits.
        let session = Session::builder(env)?
            .with_execution_providers([ort::ep::CPU::default().with_arena_allocator(true).build()])
            .map_err(ort::Error::from)?
            .with_memory_pattern(false)
            .map_err(ort::Error::from)?
            .with_intra_op_spinning(false)
            .map_err(ort::Error::from)?
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(ort::Error::from)?
            .with_intra_threads(threads.max(1))
            .map_err(ort::Error::from)?
            .with_inter_threads(1)
            .map_err(ort::Error::from)?
            .commit_from_memory(&patched)
            .map_err(|e| {
                SpeechError::Voice(format!(
                    "{}: ONNX Runtime cannot load it: {e}",
                    files.model.display()
                ))
            })?;
        Ok(PiperModel {
            session,
            config,
            model_hash,
            names,
        })
    }

    /// Synthesises a batch. Items may differ in length; each comes back trimmed to its own.
    pub fn synthesize(
        &mut self,
        batch: &[&[i64]],
        scales: Scales,
        speaker: u32,
    ) -> Result<Vec<RawSpeech>, SpeechError> {
        let n = batch.len();
        let longest = batch.iter().map(|ids| ids.len()).max().unwrap_or(0);
        if n == 0 || longest == 0 {
            return Ok(Vec::new());
        }
        let mut input = vec![0i64; n * longest];
        for (row, ids) in input.chunks_mut(longest).zip(batch) {
            row[..ids.len()].copy_from_slice(ids);
        }
        let lengths: Vec<i64> = batch.iter().map(|ids| ids.len() as i64).collect();
        let scales = vec![scales.noise, scales.length, scales.noise_w];

        let input = Tensor::from_array(([n, longest], input))?;
        let lengths_t = Tensor::from_array(([n], lengths))?;
        let scales_t = Tensor::from_array(([3usize], scales))?;
        let outputs = if self.config.num_speakers > 1 {
            let sid = Tensor::from_array(([n], vec![i64::from(speaker); n]))?;
            self.session.run(ort::inputs![
                "input" => input, "input_lengths" => lengths_t, "scales" => scales_t, "sid" => sid
            ])?
        } else {
            self.session.run(
                ort::inputs!["input" => input, "input_lengths" => lengths_t, "scales" => scales_t],
            )?
        };

        let (audio_shape, audio) = outputs["output"].try_extract_tensor::<f32>()?;
        let (dur_shape, durations) =
            outputs[self.names.durations.as_str()].try_extract_tensor::<f32>()?;
        let (_, item_frames) = outputs[self.names.lengths.as_str()].try_extract_tensor::<i64>()?;
        let stride = audio.len() / n;
        let dur_stride = dur_shape.iter().last().copied().unwrap_or(0) as usize;
        if audio_shape.first().copied() != Some(n as i64)
            || dur_stride < longest
            || item_frames.len() != n
        {
            return Err(SpeechError::Engine(format!(
                "unexpected output shapes: audio {audio_shape:?}, durations {dur_shape:?}, lengths {}",
                item_frames.len()
            )));
        }
        let hop = self.config.hop as usize;
        let mut out = Vec::with_capacity(n);
        for (b, ids) in batch.iter().enumerate() {
            let samples = (item_frames[b].max(0) as usize * hop).min(stride);
            let pcm = audio[b * stride..b * stride + samples].to_vec();
            let id_frames = durations[b * dur_stride..b * dur_stride + ids.len()]
                .iter()
                .map(|&f| f.max(0.0) as u32)
                .collect();
            out.push(RawSpeech { pcm, id_frames });
        }
        Ok(out)
    }
}

impl Backend for PiperModel {
    fn synthesize(
        &mut self,
        batch: &[&[i64]],
        scales: Scales,
        speaker: u32,
    ) -> Result<Vec<RawSpeech>, SpeechError> {
        PiperModel::synthesize(self, batch, scales, speaker)
    }
}
