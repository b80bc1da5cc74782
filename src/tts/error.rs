//! The speech wing's own error: what can go wrong between a voice file and a waveform.
//!
//! It depends on nothing above `tts/`, so the wing sits on the ground floor; `crate::Error` wraps
//! it once and asks [`SpeechError::exit_code`] for the process exit code (2 for a voice the user
//! can fix, 1 for the machine, 130 when cancelled).

use std::path::PathBuf;
use std::sync::Arc;

use super::graph_patch::PatchError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpeechError {
    /// A voice that cannot be used as given (missing files, bad config, unknown speaker).
    #[error("voice: {0}")]
    Voice(String),
    #[error("voice model {path}: {source}")]
    VoiceGraph { path: PathBuf, source: PatchError },
    /// Bad input to a speech command (e.g. an ids file).
    #[error("{0}")]
    BadInput(String),
    /// The ONNX Runtime library is missing or does not load.
    #[error("{0}")]
    Runtime(String),
    /// `--backend cuda` on a machine without a usable GPU, or a build without CUDA support.
    #[error("{0}")]
    Unavailable(String),
    /// The model failed to run (ONNX Runtime or the CUDA engine).
    #[error("speech engine: {0}")]
    Engine(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cancelled")]
    Cancelled,
    /// One error delivered to every item of a failed batch.
    #[error(transparent)]
    Shared(Arc<SpeechError>),
}

impl SpeechError {
    pub fn exit_code(&self) -> u8 {
        match self {
            SpeechError::Voice(_) | SpeechError::VoiceGraph { .. } | SpeechError::BadInput(_) => 2,
            SpeechError::Cancelled => 130,
            SpeechError::Shared(e) => e.exit_code(),
            SpeechError::Runtime(_)
            | SpeechError::Unavailable(_)
            | SpeechError::Engine(_)
            | SpeechError::Io { .. } => 1,
        }
    }

    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SpeechError {
        let path = path.into();
        move |source| SpeechError::Io { path, source }
    }

    /// The error itself, looking through [`SpeechError::Shared`].
    pub fn root(&self) -> &SpeechError {
        match self {
            SpeechError::Shared(e) => e.root(),
            e => e,
        }
    }
}

impl From<ort::Error> for SpeechError {
    fn from(e: ort::Error) -> Self {
        SpeechError::Engine(e.to_string())
    }
}

#[cfg(feature = "cuda")]
impl From<super::cuda::device::GpuError> for SpeechError {
    fn from(e: super::cuda::device::GpuError) -> Self {
        match e {
            super::cuda::device::GpuError::Unavailable(m) => {
                SpeechError::Unavailable(format!("no usable GPU: {m}"))
            }
            super::cuda::device::GpuError::BadInput(m) => SpeechError::BadInput(m),
            e => SpeechError::Engine(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(SpeechError::Voice("v".into()).exit_code(), 2);
        assert_eq!(SpeechError::Unavailable("u".into()).exit_code(), 1);
        assert_eq!(SpeechError::Cancelled.exit_code(), 130);
        let shared = SpeechError::Shared(Arc::new(SpeechError::Voice("v".into())));
        assert_eq!(shared.exit_code(), 2);
        assert!(matches!(shared.root(), SpeechError::Voice(_)));
    }
}
