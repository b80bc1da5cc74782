//! One error type for the library's stages (inputs, speech, face, media, cache, a render), and
//! the exit code each maps to. It stands below the queue, whose worker runs renders: the queue's
//! own errors stay in `queue`, and the binary joins the two (`cli/error.rs`).
//!
//! Exit codes (documented in the README): 0 success, 2 bad input (script, portrait, voice,
//! arguments), 3 `audio check` found a file that misses its standard, 1 anything else
//! (missing assets, runtime, media, I/O, cache), 130 when cancelled by a signal.

use std::path::PathBuf;

use crate::assets::AssetsError;
use crate::cache::CacheError;
use crate::face::FaceError;
#[cfg(feature = "render")]
use crate::media::MediaError;
#[cfg(feature = "render")]
use crate::phonemize::PhonemizeError;
use crate::render::RenderError;
use crate::script::ScriptError;
use crate::tts::SpeechError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Script(#[from] ScriptError),
    #[error(transparent)]
    Speech(SpeechError),
    #[error("{0}")]
    Face(#[from] FaceError),
    #[error("portrait cannot be animated: {0}")]
    Rig(#[from] RenderError),
    #[error("{0}")]
    Assets(#[from] AssetsError),
    #[cfg(feature = "render")]
    #[error("phonemizer: {0}")]
    Phonemize(#[from] PhonemizeError),
    #[cfg(feature = "render")]
    #[error("{}", media_message(.0))]
    Media(#[source] MediaError),
    #[error("cache: {0}")]
    Cache(#[from] CacheError),
    #[error("{}", io_message(path, source))]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The result could not be printed; the work itself is done (`what` says so).
    #[error("cannot write {what} to standard output: {source}")]
    Stdout {
        what: String,
        source: std::io::Error,
    },
    #[error("interrupted (SIGINT/SIGTERM); nothing was written")]
    Cancelled,
    #[error("a worker thread stopped unexpectedly: {0}")]
    ThreadLost(String),
    /// `talker audio check`: the files were measured, and some miss the standard.
    #[error("{failed} of {total} files miss the {standard} standard")]
    CheckFailed {
        failed: usize,
        total: usize,
        standard: &'static str,
    },
}

impl Error {
    /// 2 for anything the user can fix in what they passed in, 1 otherwise, 130 when cancelled.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::Script(_) | Error::Rig(_) => 2,
            Error::Speech(e) => e.exit_code(),
            #[cfg(feature = "render")]
            Error::Phonemize(PhonemizeError::UnknownVoice(_)) => 2,
            #[cfg(feature = "render")]
            Error::Phonemize(_) | Error::Media(_) => 1,
            Error::Face(e) => {
                if e.is_bad_input() {
                    2
                } else {
                    1
                }
            }
            Error::Cancelled => 130,
            Error::CheckFailed { .. } => 3,
            Error::Assets(_)
            | Error::Cache(_)
            | Error::Io { .. }
            | Error::Stdout { .. }
            | Error::ThreadLost(_) => 1,
        }
    }

    /// The message, then each cause that says something new: a cause whose text an earlier line
    /// already holds (a wrapper that prints its source) is left out, so nothing is said twice.
    pub fn chain(&self) -> Vec<String> {
        chain(self)
    }

    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}

/// An error's message, then each cause that says something new (see [`Error::chain`]); the
/// binary's own errors are said the same way.
pub fn chain(error: &dyn std::error::Error) -> Vec<String> {
    let mut lines = vec![error.to_string()];
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !lines.iter().any(|l| l.contains(&text)) {
            lines.push(text);
        }
        source = s.source();
    }
    lines
}

/// `path: cause`, except that a full disk names the device rather than the file that hit it.
fn io_message(path: &std::path::Path, source: &std::io::Error) -> String {
    if source.kind() == std::io::ErrorKind::StorageFull {
        full_disk(path)
    } else {
        format!("{}: {source}", path.display())
    }
}

/// What to say when writing `path` found its disk full: the place to free, not a cache key.
fn full_disk(path: &std::path::Path) -> String {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(path);
    format!(
        "no space left on the device holding {}; free some space there or point the cache (--cache) or output (-o) elsewhere",
        dir.display()
    )
}

#[cfg(feature = "render")]
fn media_message(e: &MediaError) -> String {
    let full = match e {
        MediaError::Ffmpeg { path, source, .. } => {
            matches!(source, ffmpeg_next::Error::Other { errno } if *errno == libc::ENOSPC)
                .then_some(path)
        }
        MediaError::Io { path, source, .. } => {
            (source.kind() == std::io::ErrorKind::StorageFull).then_some(path)
        }
        _ => None,
    };
    match full {
        Some(path) => full_disk(path),
        None => format!("video: {e}"),
    }
}

/// The speech wing's error, wrapped once; its cancellation is the render's.
impl From<SpeechError> for Error {
    fn from(e: SpeechError) -> Self {
        match e.root() {
            SpeechError::Cancelled => Error::Cancelled,
            _ => Error::Speech(e),
        }
    }
}

/// Media errors wrapped once; a muxer stopped by the signal is the render's cancellation.
#[cfg(feature = "render")]
impl From<MediaError> for Error {
    fn from(e: MediaError) -> Self {
        match e {
            MediaError::Cancelled => Error::Cancelled,
            e => Error::Media(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_2_and_the_rest_1() {
        assert_eq!(Error::Usage("x".into()).exit_code(), 2);
        assert_eq!(Error::from(SpeechError::Voice("x".into())).exit_code(), 2);
        assert!(matches!(
            Error::from(SpeechError::Cancelled),
            Error::Cancelled
        ));
        #[cfg(feature = "render")]
        assert!(matches!(
            Error::from(MediaError::Cancelled),
            Error::Cancelled
        ));
        assert_eq!(
            Error::Face(FaceError::NoFace { path: "p".into() }).exit_code(),
            2
        );
        assert_eq!(
            Error::Face(FaceError::ModelMissing { path: "m".into() }).exit_code(),
            1
        );
        assert_eq!(Error::Assets(AssetsError("x".into())).exit_code(), 1);
        assert_eq!(Error::Cancelled.exit_code(), 130);
    }

    #[test]
    fn each_cause_is_said_once() {
        let e = Error::Script(ScriptError {
            file: "s.json".into(),
            at: "title".into(),
            message: "bad".into(),
        });
        assert_eq!(e.chain(), ["s.json: title: bad"]);
        let e = Error::Io {
            path: "/x/out.mp4".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        let chain = e.chain();
        assert!(
            chain[0].starts_with("no space left on the device holding /x"),
            "{chain:?}"
        );
        let e = Error::Io {
            path: "/x/out.mp4".into(),
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        };
        assert_eq!(e.chain().len(), 1, "{:?}", e.chain());
    }
}
