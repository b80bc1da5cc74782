//! Media I/O: the only module that talks to ffmpeg (through `ffmpeg-next`).
//!
//! Input: RGB24 frames and mono f32 PCM per script segment; later, the ordered list of the
//! segment chunks plus title, chapters and subtitle cues.
//! Output: one Matroska chunk per segment (H.264 + PCM), then one MP4 (H.264 copied from the
//! chunks, one continuous AAC track at 48 kHz, mov_text subtitles, chapters, faststart).
//! Invariants: every file appears under its final name only when complete (temp file +
//! fsync + rename); chunks written with identical `VideoSettings` concatenate without
//! re-encoding; frame i of a chunk has pts i in 1/fps.

mod aac;
mod aac_ahead;
mod aac_pieces;
mod assemble;
mod atomic;
mod audio;
mod check;
mod cover;
pub mod loudness;
mod mp4_audio;
pub use atomic::remove_stale_partials;
mod chunk;
mod error;
mod probe;
mod region;
mod subtitles;
#[cfg(test)]
mod tests;
mod timeline;
pub use region::Rect;

use std::sync::OnceLock;

pub use aac_ahead::AudioAhead;
pub use assemble::{ChunkRef, assemble, write_mp4};
pub use audio::{AudioFormat, AudioWriter};
pub use check::measure_file;
pub use chunk::ChunkWriter;
pub use error::MediaError;
pub use probe::probe_chunk;
pub use subtitles::{SubtitleFormat, srt_text, vtt_text, write_sidecar, write_srt};
pub use timeline::Timeline;

/// x264 presets accepted by `VideoSettings` (checked up front so a typo fails before any work).
/// The extensions of the files talker writes (`-o`), video first: each names its format.
pub const OUTPUT_EXTENSIONS: &[&str] = &["mp4", "m4b", "m4a", "wav", "mp3"];

pub const X264_PRESETS: [&str; 10] = [
    "ultrafast",
    "superfast",
    "veryfast",
    "faster",
    "fast",
    "medium",
    "slow",
    "slower",
    "veryslow",
    "placebo",
];

/// How chunks are encoded. Every chunk of one output must use the same values (apart from
/// `threads`), otherwise the H.264 parameter sets differ and `assemble` refuses the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoSettings {
    /// Even, because yuv420p halves the chroma planes.
    pub width: u32,
    /// Even, because yuv420p halves the chroma planes.
    pub height: u32,
    pub fps: u32,
    /// x264 constant rate factor, 0..=51.
    pub crf: u8,
    /// One of `X264_PRESETS`.
    pub preset: String,
    /// x264 threads; 0 lets x264 choose (about 1.5 per core).
    pub threads: usize,
}

impl Default for VideoSettings {
    fn default() -> Self {
        VideoSettings {
            width: 512,
            height: 512,
            fps: 25,
            crf: 20,
            preset: "veryfast".to_string(),
            threads: 0,
        }
    }
}

impl VideoSettings {
    /// Rejects what libx264 would reject later, with a message that says which value.
    pub fn validate(&self) -> Result<(), MediaError> {
        let bad = |msg: String| Err(MediaError::InvalidSettings(msg));
        if self.width == 0
            || self.height == 0
            || !self.width.is_multiple_of(2)
            || !self.height.is_multiple_of(2)
        {
            return bad(format!(
                "size {}x{} must be non-zero and even (yuv420p)",
                self.width, self.height
            ));
        }
        if self.width > 8192 || self.height > 8192 {
            return bad(format!("size {}x{} exceeds 8192", self.width, self.height));
        }
        if self.fps == 0 || self.fps > 240 {
            return bad(format!("fps {} must be within 1..=240", self.fps));
        }
        if self.crf > 51 {
            return bad(format!("crf {} must be within 0..=51", self.crf));
        }
        if !X264_PRESETS.contains(&self.preset.as_str()) {
            return bad(format!(
                "preset {:?} is not one of {}",
                self.preset,
                X264_PRESETS.join(", ")
            ));
        }
        if self.threads > 128 {
            return bad(format!("threads {} must be within 0..=128", self.threads));
        }
        Ok(())
    }
}

/// What a finished (or probed) chunk holds, with the settings it was encoded with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkInfo {
    pub frames: u64,
    /// Mono PCM samples at `sample_rate`.
    pub samples: u64,
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    pub sample_rate: u32,
    pub crf: u8,
    pub preset: String,
}

/// An MP4 chapter, in seconds from the start of the output.
#[derive(Debug, Clone, PartialEq)]
pub struct Chapter {
    pub title: String,
    pub start: f64,
    pub end: f64,
}

/// One subtitle cue, in seconds from the start of the output.
#[derive(Debug, Clone, PartialEq)]
pub struct Cue {
    pub text: String,
    pub start: f64,
    pub end: f64,
}

/// A file's place in a set (`--split chapters`): (number, count), tagged `N/COUNT`.
pub type TrackNumber = (usize, usize);

/// The text tags of an output: FFmpeg's generic names, which the MP4 muxer writes as iTunes
/// atoms (`©nam`, `©alb`, `©ART`, `trkn`) and the MP3 muxer as ID3v2 frames (`TIT2`, `TALB`,
/// `TPE1`, `TPE2`, `TRCK`).
fn text_tags(
    title: Option<&str>,
    album: Option<&str>,
    author: Option<&str>,
    track: Option<TrackNumber>,
) -> ffmpeg_next::Dictionary<'static> {
    let mut tags = ffmpeg_next::Dictionary::new();
    if let Some(t) = title {
        tags.set("title", t);
    }
    if let Some(a) = album {
        tags.set("album", a);
    }
    if let Some(a) = author {
        tags.set("artist", a);
        tags.set("album_artist", a);
    }
    if let Some((n, count)) = track {
        tags.set("track", &format!("{n}/{count}"));
    }
    tags
}

/// Title, album, author, track, chapters and cover of an audio-only output (WAV keeps none of
/// them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AudioMeta {
    pub title: Option<String>,
    /// The book's title: the same as `title` for a whole book, apart for a chapter's file.
    pub album: Option<String>,
    pub author: Option<String>,
    /// The file's number in a `--split chapters` set.
    pub track: Option<TrackNumber>,
    pub chapters: Vec<Chapter>,
    /// Embedded as an attached picture: `covr` in M4B/M4A, an ID3v2 `APIC` frame in MP3.
    pub cover: Option<crate::cover::Cover>,
}

/// Optional extras of the final MP4.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutputMeta {
    pub title: Option<String>,
    /// The book's title when `title` is a chapter's (`--split chapters`).
    pub album: Option<String>,
    /// The `artist` tag.
    pub author: Option<String>,
    pub track: Option<TrackNumber>,
    pub chapters: Vec<Chapter>,
    pub cues: Vec<Cue>,
    /// Embedded as an attached picture (the iTunes `covr` atom).
    pub cover: Option<crate::cover::Cover>,
}

/// What `assemble` wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct AssembleInfo {
    pub frames: u64,
    /// Source PCM samples (at the chunks' sample rate) that went into the AAC track.
    pub audio_samples: u64,
    /// The longer of the video and audio durations.
    pub duration_s: f64,
    /// Size of the MP4 file.
    pub bytes: u64,
}

/// Initialises ffmpeg once per process and turns its console logging down to errors.
fn init() -> Result<(), MediaError> {
    static INIT: OnceLock<Result<(), ffmpeg_next::Error>> = OnceLock::new();
    let result = *INIT.get_or_init(|| {
        let r = ffmpeg_next::init();
        ffmpeg_next::util::log::set_level(ffmpeg_next::util::log::Level::Error);
        r
    });
    error::ff(
        std::path::Path::new("<ffmpeg>"),
        "initialise ffmpeg",
        result,
    )
}
