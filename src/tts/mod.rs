//! The speech wing: phoneme ids → PCM plus the sample span of every phoneme.
//!
//! Module map: `voice` (voice files, their config, phonemes → ids), [`Backend`] (a voice loaded
//! once, then `synthesize(batch of id slices, scales, speaker)` → per-item audio and per-id
//! durations) with its two implementations, `onnx` (ONNX Runtime on the CPU; `graph_patch` exposes
//! the durations) and `cuda` (compiled engines on an NVIDIA GPU), `select` (which backend a run
//! uses: `--backend auto|cpu|cuda`, `--precision`), `batch` (length buckets) and `batcher` (one
//! queue per process that groups the requests of every running render into model calls); `wire` is
//! the protobuf reader that `graph_patch` and `cuda::onnx` share. This file turns per-id durations
//! into per-phoneme times. Nothing here imports the rest of the crate's wings: errors are
//! [`SpeechError`], which `crate::Error` wraps once.

pub mod batch;
pub mod batcher;
pub mod cuda;
pub mod error;
pub mod graph_patch;
pub mod onnx;
pub mod select;
pub mod voice;
pub mod wire;

pub use cuda::program::op::Precision;
pub use error::SpeechError;
use voice::{Kept, Scales};

/// One synthesised item before phoneme grouping.
#[derive(Debug, Clone)]
pub struct RawSpeech {
    pub pcm: Vec<f32>,
    /// Duration frames of each input id (length = number of ids of the item).
    pub id_frames: Vec<u32>,
}

/// A voice loaded once and run many times: ONNX Runtime on the CPU or a CUDA engine. It lives on
/// the thread that loaded it (a CUDA context is bound to its thread), hence no `Send`.
///
/// Items of a batch may differ in length; each comes back trimmed to its own length, with the
/// duration (in frames of `hop` samples) of each of its ids, in the order given.
pub trait Backend {
    fn synthesize(
        &mut self,
        batch: &[&[i64]],
        scales: Scales,
        speaker: u32,
    ) -> Result<Vec<RawSpeech>, SpeechError>;

    /// Runs the next of the backend's warm-up calls (kernels, library heuristics, memory pool
    /// for the shapes real batches take), `None` once none is left. The batcher calls it only
    /// while no request is queued, one call at a time, so a warm-up never holds the first
    /// sentences back by more than one call. Backends that need none keep the default.
    fn warm_step(&mut self) -> Option<Result<(), SpeechError>> {
        None
    }
}

/// One phoneme and the samples it covers, relative to the start of its utterance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phone {
    pub symbol: String,
    pub start: u64,
    pub end: u64,
}

/// Speech of one utterance: 16-bit PCM (what the video carries; also what the cache stores, so a
/// cached re-render is bit-identical to a cold one) and the span of every phoneme.
#[derive(Debug, Clone, PartialEq)]
pub struct Speech {
    pub sample_rate: u32,
    pub pcm: Vec<i16>,
    pub phones: Vec<Phone>,
}

/// Float model output → 16-bit PCM, clipping overshoots.
pub fn to_pcm16(samples: &[f32]) -> Vec<i16> {
    samples
        .iter()
        .map(|&s| (s.clamp(-1.0, 1.0) * 32767.0).round() as i16)
        .collect()
}

/// Sums per-id duration frames into per-phoneme sample spans.
///
/// The spans tile `[0, total)` exactly: the model's item length is the sum of its id durations
/// (clamped to at least one frame), and the last span absorbs that clamp if it ever applies.
pub fn align(kept: &[Kept], id_frames: &[u32], hop: u32, total: u64) -> Vec<Phone> {
    let mut phones = Vec::with_capacity(kept.len());
    let mut at = 0usize;
    let mut start = 0u64;
    for k in kept {
        let frames: u64 = id_frames[at.min(id_frames.len())..(at + k.ids).min(id_frames.len())]
            .iter()
            .map(|&f| u64::from(f))
            .sum();
        at += k.ids;
        let end = (start + frames * u64::from(hop)).min(total);
        phones.push(Phone {
            symbol: k.symbol.to_string(),
            start,
            end,
        });
        start = end;
    }
    if let Some(last) = phones.last_mut() {
        last.end = total;
    }
    phones
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(symbol: &str, ids: usize) -> Kept {
        Kept {
            symbol: symbol.into(),
            ids,
        }
    }

    #[test]
    fn spans_tile_the_audio() {
        let k = [kept("^", 2), kept("a", 2), kept("$", 1)];
        let phones = align(&k, &[1, 0, 3, 2, 1], 256, 7 * 256);
        assert_eq!(
            phones.iter().map(|p| (p.start, p.end)).collect::<Vec<_>>(),
            [(0, 256), (256, 6 * 256), (6 * 256, 7 * 256)]
        );
    }

    #[test]
    fn clamped_length_goes_to_the_last_phone() {
        let k = [kept("^", 2), kept("$", 1)];
        let phones = align(&k, &[0, 0, 0], 256, 256);
        assert_eq!(phones.last().unwrap().end, 256);
    }
}
