//! The speech stage: utterances → [`Speech`], synthesising in length-bucketed batches.
//!
//! Input: planned utterances (phoneme ids + the phonemes they came from). Output: 16-bit PCM and
//! per-phoneme sample spans for each, in the order asked. The model is loaded on first use, so a
//! render whose speech is all cached never pays for it.

use std::path::PathBuf;
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::plan::{SpeechIdentity, Utterance};
use crate::tts::batch::{self, BatchLimits};
use crate::tts::piper::PiperModel;
use crate::tts::{Speech, align, to_pcm16};
use crate::voice::{Scales, VoiceConfig, VoiceFiles};

/// Every utterance is scaled so its peak sits here (Piper normalises to full scale; a little
/// headroom keeps the AAC encoder from clipping).
const PEAK: f32 = 0.9;

/// How a voice is to be run.
#[derive(Debug, Clone)]
pub struct SpeechOptions {
    pub voice: VoiceFiles,
    pub onnxruntime: PathBuf,
    pub threads: usize,
    /// 1.0 is the voice's own pace; 2.0 twice as fast.
    pub speed: f32,
    /// Sampling noise as the voice config sets it; `false` gives deterministic output.
    pub noise: bool,
    pub speaker: u32,
    pub limits: BatchLimits,
}

/// Counters the benchmark reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct SpeechStats {
    pub synthesized: u64,
    pub batches: u64,
    pub model_seconds: f64,
    pub load_seconds: f64,
    pub padded_ids: u64,
    pub real_ids: u64,
    pub audio_samples: u64,
}

impl SpeechStats {
    pub fn padding_waste(&self) -> f64 {
        if self.padded_ids == 0 {
            0.0
        } else {
            1.0 - self.real_ids as f64 / self.padded_ids as f64
        }
    }
}

pub struct SpeechEngine {
    options: SpeechOptions,
    config: VoiceConfig,
    identity: SpeechIdentity,
    model: Option<PiperModel>,
    pub stats: SpeechStats,
}

impl SpeechEngine {
    /// Reads the voice's config and hashes its model file; does not load the model yet.
    pub fn new(options: SpeechOptions) -> Result<SpeechEngine> {
        let config = VoiceConfig::load(&options.voice.config)?;
        if options.speaker >= config.num_speakers.max(1) {
            return Err(Error::Voice(format!(
                "speaker {} does not exist; {} has {} speaker(s)",
                options.speaker, options.voice.name, config.num_speakers
            )));
        }
        let voice_hash = hash_file(&options.voice.model)?;
        let d = config.defaults;
        let scales = Scales {
            noise: if options.noise { d.noise } else { 0.0 },
            length: d.length / options.speed,
            noise_w: if options.noise { d.noise_w } else { 0.0 },
        };
        let runtime = options
            .onnxruntime
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let identity = SpeechIdentity {
            voice_hash,
            scales,
            speaker: options.speaker,
            engine: format!("{runtime}/cpu/fp32"),
        };
        Ok(SpeechEngine {
            options,
            config,
            identity,
            model: None,
            stats: SpeechStats::default(),
        })
    }

    /// Whether several sentences may share a model call (then the pipeline gathers windows of
    /// sentences for the length buckets; otherwise it streams chunk by chunk).
    pub fn batches(&self) -> bool {
        self.options.limits.max_items > 1
    }

    pub fn config(&self) -> &VoiceConfig {
        &self.config
    }

    pub fn identity(&self) -> &SpeechIdentity {
        &self.identity
    }

    fn model(&mut self) -> Result<&mut PiperModel> {
        if self.model.is_none() {
            let t = Instant::now();
            let model = PiperModel::load(
                &self.options.voice,
                &self.options.onnxruntime,
                self.options.threads,
            )?;
            self.stats.load_seconds += t.elapsed().as_secs_f64();
            self.model = Some(model);
        }
        Ok(self.model.as_mut().expect("loaded above"))
    }

    /// Synthesises `utterances` in bucketed batches; results come back in the same order.
    pub fn synthesize(&mut self, utterances: &[&Utterance]) -> Result<Vec<Speech>> {
        let lengths: Vec<usize> = utterances.iter().map(|u| u.ids.len()).collect();
        let batches = batch::plan(&lengths, batch::DEFAULT_EDGES, self.options.limits);
        let (scales, speaker, hop, rate) = (
            self.identity.scales,
            self.identity.speaker,
            self.config.hop,
            self.config.sample_rate,
        );
        let mut out: Vec<Option<Speech>> = vec![None; utterances.len()];
        for b in &batches {
            let ids: Vec<&[i64]> = b.iter().map(|&i| utterances[i].ids.as_slice()).collect();
            let t = Instant::now();
            let raw = self.model()?.synthesize(&ids, scales, speaker)?;
            self.stats.model_seconds += t.elapsed().as_secs_f64();
            self.stats.batches += 1;
            let longest = ids.iter().map(|i| i.len()).max().unwrap_or(0);
            self.stats.padded_ids += (longest * ids.len()) as u64;
            self.stats.real_ids += ids.iter().map(|i| i.len() as u64).sum::<u64>();
            for (&i, r) in b.iter().zip(raw) {
                let pcm = to_pcm16(&normalize_peak(r.pcm));
                let phones = align(&utterances[i].kept, &r.id_frames, hop, pcm.len() as u64);
                self.stats.synthesized += 1;
                self.stats.audio_samples += pcm.len() as u64;
                out[i] = Some(Speech {
                    sample_rate: rate,
                    pcm,
                    phones,
                });
            }
            release_freed_memory();
        }
        Ok(out
            .into_iter()
            .map(|s| s.expect("every utterance is in exactly one batch"))
            .collect())
    }
}

/// Scales to a fixed peak; silence stays silence.
fn normalize_peak(mut pcm: Vec<f32>) -> Vec<f32> {
    let peak = pcm.iter().fold(0.0f32, |m, s| m.max(s.abs()));
    if peak > 1e-6 {
        let gain = PEAK / peak;
        pcm.iter_mut().for_each(|s| *s *= gain);
    }
    pcm
}

/// sha256 of a file, streamed.
pub fn hash_file(path: &std::path::Path) -> Result<[u8; 32]> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(Error::io(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(Error::io(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().into())
}

/// Hands memory freed during a call (output copies, buffers outside ONNX Runtime's arena) back to
/// the system after each call, so it does not pile up in glibc's arenas over a long script.
fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; no pointer is invalidated.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_normalisation_keeps_silence_and_scales_speech() {
        assert_eq!(normalize_peak(vec![0.0; 4]), vec![0.0; 4]);
        let out = normalize_peak(vec![0.1, -0.45, 0.2]);
        assert!((out[1] + PEAK).abs() < 1e-6);
        assert!((out[0] - 0.1 * PEAK / 0.45).abs() < 1e-6);
    }
}
