//! What goes into and comes out of a voice plan, whichever executor runs it.
//!
//! Input: a batch of phoneme-id sequences of any lengths, the scales and a speaker. [`Feed`] pads
//! them into Piper's input tensors. Output: [`split`] cuts the batched audio into one
//! [`RawSpeech`] per item, trimmed to the item's own frame count (padding is not silent), with the
//! duration frames of each of its ids — the same contract as `PiperModel::synthesize`.

use super::tensor::{OpError, OpResult, Tensor, op_err};
use crate::tts::RawSpeech;
use crate::tts::voice::Scales;

#[derive(Debug, Clone)]
pub struct Feed {
    pub ids: Tensor,
    pub lengths: Tensor,
    pub scales: Tensor,
    pub speaker: Tensor,
}

impl Feed {
    pub fn new(batch: &[&[i64]], scales: Scales, speaker: u32) -> Feed {
        Feed::padded(batch, 0, scales, speaker)
    }

    /// Like [`Feed::new`], with the id axis padded to at least `width` (a length bucket's edge,
    /// so that every batch of a bucket has the same shapes); padding is masked by the lengths.
    pub fn padded(batch: &[&[i64]], width: usize, scales: Scales, speaker: u32) -> Feed {
        let n = batch.len();
        let longest = batch.iter().map(|b| b.len()).max().unwrap_or(0).max(width);
        let mut ids = vec![0i64; n * longest];
        for (row, b) in ids.chunks_mut(longest.max(1)).zip(batch) {
            row[..b.len()].copy_from_slice(b);
        }
        Feed {
            ids: Tensor::i64(vec![n, longest], ids),
            lengths: Tensor::i64(vec![n], batch.iter().map(|b| b.len() as i64).collect()),
            scales: Tensor::f32(vec![3], vec![scales.noise, scales.length, scales.noise_w]),
            speaker: Tensor::i64(vec![n], vec![i64::from(speaker); n]),
        }
    }
}

/// The plan's three outputs for one batch.
#[derive(Debug, Clone)]
pub struct Outputs {
    pub audio: Tensor,
    pub durations: Tensor,
    pub frames: Tensor,
}

/// One item per batch entry, each trimmed to `frames × hop` samples.
pub fn split(out: &Outputs, batch: &[&[i64]], hop: u32) -> OpResult<Vec<RawSpeech>> {
    let n = batch.len();
    let audio = out.audio.as_f32()?;
    let durations = out.durations.as_f32()?;
    let frames = out.frames.as_i64()?;
    if out.audio.shape.first() != Some(&n)
        || frames.len() != n
        || out.durations.shape.first() != Some(&n)
    {
        return op_err(format!(
            "unexpected output shapes: audio {:?}, durations {:?}, frames {:?}",
            out.audio.shape, out.durations.shape, out.frames.shape
        ));
    }
    let stride = audio.len() / n.max(1);
    let dur_stride = durations.len() / n.max(1);
    batch
        .iter()
        .enumerate()
        .map(|(b, ids)| {
            if ids.len() > dur_stride {
                return Err(OpError(format!(
                    "{} durations for {} ids",
                    dur_stride,
                    ids.len()
                )));
            }
            let samples = (frames[b].max(0) as usize * hop as usize).min(stride);
            Ok(RawSpeech {
                pcm: audio[b * stride..b * stride + samples].to_vec(),
                id_frames: durations[b * dur_stride..b * dur_stride + ids.len()]
                    .iter()
                    .map(|&f| f.max(0.0) as u32)
                    .collect(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feed_pads_and_split_trims() {
        let a: &[i64] = &[1, 2, 3];
        let b: &[i64] = &[4];
        let q = Scales {
            noise: 0.0,
            length: 1.0,
            noise_w: 0.0,
        };
        let f = Feed::new(&[a, b], q, 0);
        assert_eq!(f.ids.as_i64().unwrap(), [1, 2, 3, 4, 0, 0]);
        assert_eq!(f.lengths.as_i64().unwrap(), [3, 1]);
        let out = Outputs {
            audio: Tensor::f32(vec![2, 1, 1, 8], (0..16).map(|i| i as f32).collect()),
            durations: Tensor::f32(vec![2, 1, 3], vec![1.0, 0.0, 1.0, 1.0, 5.0, 5.0]),
            frames: Tensor::i64(vec![2], vec![2, 1]),
        };
        let items = split(&out, &[a, b], 3).unwrap();
        assert_eq!(items[0].pcm, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(items[1].pcm, [8.0, 9.0, 10.0]);
        assert_eq!(items[1].id_frames, [1]);
        let bad = Outputs {
            frames: Tensor::i64(vec![1], vec![1]),
            ..out
        };
        assert!(split(&bad, &[a, b], 3).is_err());
    }
}
