//! Lossless storage of 16-bit mono PCM as FLAC (flacenc to write, claxon to read).
//!
//! FLAC roughly halves speech PCM with no loss, which keeps a phrase cache of a whole audiobook
//! series small; both crates are pure Rust.

use flacenc::component::BitRepr;
use flacenc::error::Verify;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("FLAC encoding failed: {0}")]
    Encode(String),
    #[error("stored audio is not valid FLAC: {0}")]
    Decode(String),
}

/// FLAC's smallest legal block (claxon also holds the last block to it); a short tail is padded
/// with silence and cut back on decode.
const MIN_BLOCK: usize = 16;

pub fn encode(pcm: &[i16], sample_rate: u32) -> Result<Vec<u8>, CodecError> {
    let config = flacenc::config::Encoder::default()
        .into_verified()
        .map_err(|(_, e)| CodecError::Encode(e.to_string()))?;
    let mut samples: Vec<i32> = pcm.iter().map(|&s| i32::from(s)).collect();
    let tail = samples.len() % config.block_size;
    if samples.is_empty() || (tail != 0 && tail < MIN_BLOCK) {
        samples.resize(samples.len() - tail + MIN_BLOCK, 0);
    }
    let source = flacenc::source::MemSource::from_samples(&samples, 1, 16, sample_rate as usize);
    let stream = flacenc::encode_with_fixed_block_size(&config, source, config.block_size)
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    let mut sink = flacenc::bitsink::ByteSink::new();
    stream
        .write(&mut sink)
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    Ok(sink.as_slice().to_vec())
}

/// Decodes `len` samples (the length given to [`encode`]).
pub fn decode(flac: &[u8], len: usize) -> Result<Vec<i16>, CodecError> {
    let mut reader =
        claxon::FlacReader::new(flac).map_err(|e| CodecError::Decode(e.to_string()))?;
    let info = reader.streaminfo();
    if info.channels != 1 || info.bits_per_sample != 16 {
        return Err(CodecError::Decode(format!(
            "{} channels, {} bits",
            info.channels, info.bits_per_sample
        )));
    }
    let mut out = Vec::with_capacity(len);
    for s in reader.samples().take(len) {
        let s = s.map_err(|e| CodecError::Decode(e.to_string()))?;
        out.push(s as i16);
    }
    if out.len() != len {
        return Err(CodecError::Decode(format!(
            "{} samples stored, {len} expected",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_exact_and_smaller() {
        let pcm: Vec<i16> = (0..22050)
            .map(|i| ((i as f32 * 0.05).sin() * 12000.0) as i16)
            .collect();
        let flac = encode(&pcm, 22050).unwrap();
        assert!(flac.len() < pcm.len() * 2);
        assert_eq!(decode(&flac, pcm.len()).unwrap(), pcm);
    }

    #[test]
    fn empty_and_odd_lengths_round_trip() {
        for n in [0usize, 1, 10, 4095, 4097] {
            let pcm: Vec<i16> = (0..n).map(|i| (i as i16).wrapping_mul(31)).collect();
            assert_eq!(
                decode(&encode(&pcm, 16000).unwrap(), n).unwrap(),
                pcm,
                "n={n}"
            );
        }
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(
            decode(b"not flac at all", 4),
            Err(CodecError::Decode(_))
        ));
        let pcm: Vec<i16> = (0..5000).map(|i| (i % 300) as i16).collect();
        let flac = encode(&pcm, 22050).unwrap();
        assert!(decode(&flac[..flac.len() / 2], pcm.len()).is_err());
        assert!(
            decode(&flac, pcm.len() + 1).is_err(),
            "fewer samples than expected"
        );
    }
}
