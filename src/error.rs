//! One error type for the library, and the single place that decides the process exit code.
//!
//! Exit codes (documented in the README): 0 success, 2 bad input (script, portrait, voice,
//! arguments, job spec), 1 anything else (missing assets, runtime, media, I/O, cache).

use std::path::PathBuf;

use crate::phonemize::PhonemizeError;
use crate::tts::graph_patch::PatchError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{0}")]
    Usage(String),
    #[error("voice: {0}")]
    Voice(String),
    #[error("voice model {path}: {source}")]
    VoiceGraph { path: PathBuf, source: PatchError },
    #[error("{0}")]
    Assets(String),
    #[error("speech engine: {0}")]
    Engine(String),
    #[error("phonemizer: {0}")]
    Phonemize(#[from] PhonemizeError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Error {
    /// 2 for anything the user can fix in what they passed in, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Voice(_) | Error::VoiceGraph { .. } => 2,
            Error::Phonemize(PhonemizeError::UnknownVoice(_)) => 2,
            Error::Assets(_) | Error::Engine(_) | Error::Phonemize(_) | Error::Io { .. } => 1,
        }
    }

    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}

impl From<ort::Error> for Error {
    fn from(e: ort::Error) -> Self {
        Error::Engine(e.to_string())
    }
}
