//! Error type of the media module.
//!
//! Input: failures from ffmpeg, the file system and argument checks. Output: one `MediaError`
//! whose message always names the file and the step, because a nightly batch log is read
//! long after the run and "Invalid data found" alone says nothing.

use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong while writing chunks, probing them or assembling the MP4.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MediaError {
    /// Settings that libx264/yuv420p cannot take (odd size, zero fps, crf > 51, ...).
    #[error("invalid video settings: {0}")]
    InvalidSettings(String),
    /// A frame buffer whose length is not width*height*3.
    #[error("{}: frame buffer has {got} bytes, expected {expected} (RGB24)", path.display())]
    FrameSize {
        path: PathBuf,
        got: usize,
        expected: usize,
    },
    /// An ffmpeg call failed.
    #[error("{}: {step}: {source}", path.display())]
    Ffmpeg {
        path: PathBuf,
        step: &'static str,
        #[source]
        source: ffmpeg_next::Error,
    },
    /// A file-system call (fsync, rename, stat, write) failed.
    #[error("{}: {step}: {source}", path.display())]
    Io {
        path: PathBuf,
        step: &'static str,
        #[source]
        source: io::Error,
    },
    /// A chunk file that opens but is not a complete chunk written by `ChunkWriter`.
    #[error("{}: not a usable chunk: {reason}", path.display())]
    BadChunk { path: PathBuf, reason: String },
    /// An audio file to measure that has nothing measurable.
    #[error("{}: {reason}", path.display())]
    BadAudio { path: PathBuf, reason: String },
    /// A chunk that cannot be concatenated with the first one.
    #[error("{}: {what} differs from the first chunk ({first} there, {found} here)", path.display())]
    ChunkMismatch {
        path: PathBuf,
        what: &'static str,
        first: String,
        found: String,
    },
    /// `assemble` was given an empty chunk list.
    #[error("nothing to assemble: the chunk list is empty")]
    NoChunks,
    /// Chunks whose total video and audio lengths differ by more than one frame.
    #[error(
        "chunks hold {video_s:.3} s of video but {audio_s:.3} s of audio (more than one frame apart)"
    )]
    DurationMismatch { video_s: f64, audio_s: f64 },
    /// A title, chapter or cue that cannot be written.
    #[error("invalid output metadata: {0}")]
    InvalidMeta(String),
    /// A chunk file that is not the one checked before (another process replaced or removed it
    /// meanwhile, e.g. `talker cache gc`): copying it would give an output that misses its own
    /// subtitles, or interleaves two renders. A replacement of the same length is assembled
    /// again from the new file; this comes only when one holds other frames or samples, or
    /// when chunks kept being replaced through every attempt.
    #[error("{}: changed while this render used it ({reason}); run the render again", path.display())]
    ChunkChanged { path: PathBuf, reason: String },
    /// The caller's stop flag (SIGINT/SIGTERM) was set; nothing was written.
    #[error("stopped before the output was complete")]
    Cancelled,
    /// A method was called after an earlier ffmpeg failure left the writer in an unknown state.
    #[error("{}: writer is unusable after an earlier error", path.display())]
    Poisoned { path: PathBuf },
}

/// Wraps an ffmpeg result with the file and step it belongs to.
pub(crate) fn ff<T>(
    path: &Path,
    step: &'static str,
    result: Result<T, ffmpeg_next::Error>,
) -> Result<T, MediaError> {
    result.map_err(|source| MediaError::Ffmpeg {
        path: path.to_path_buf(),
        step,
        source,
    })
}

/// Wraps an I/O result with the file and step it belongs to.
pub(crate) fn io<T>(
    path: &Path,
    step: &'static str,
    result: io::Result<T>,
) -> Result<T, MediaError> {
    result.map_err(|source| MediaError::Io {
        path: path.to_path_buf(),
        step,
        source,
    })
}
