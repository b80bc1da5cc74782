//! Subtitle cues: the MP4's mov_text track and an optional sidecar .srt or .vtt.
//!
//! Input: `Cue`s in seconds, in any order. Output: timed text samples in milliseconds
//! (sorted, overlaps clipped, empty ones dropped), as mov_text packets or SRT text.
//! Invariants: samples have strictly increasing start times (MP4 needs monotonic dts) and
//! each mov_text payload is the 3GPP text sample: a big-endian u16 byte length and UTF-8.
//!
//! Why packets are written directly: ffmpeg's mov_text encoder would need an AVSubtitle
//! with ASS-escaped text that ffmpeg-next neither frees nor lets us fill without panics on
//! NUL bytes. The encoder is still opened once, because its extradata is the tx3g sample
//! description (default style and font table) that players expect.

use std::path::Path;

use ffmpeg_next::{Packet, Rational, codec, encoder, format};

use super::Cue;
use super::atomic::PartialFile;
use super::error::{MediaError, ff, io};

/// mov_text and chapter timestamps are in milliseconds.
pub(crate) const MS: Rational = Rational(1, 1000);

/// A cue ready for writing: integer milliseconds, non-empty, not overlapping the next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TimedText {
    pub(crate) start_ms: i64,
    pub(crate) end_ms: i64,
    pub(crate) text: String,
}

/// Seconds → milliseconds, rejecting what cannot be a timestamp.
pub(crate) fn to_ms(seconds: f64, what: &str) -> Result<i64, MediaError> {
    if !seconds.is_finite() || !(0.0..=1.0e9).contains(&seconds) {
        return Err(MediaError::InvalidMeta(format!(
            "{what}: time {seconds} is not a finite, non-negative number of seconds"
        )));
    }
    Ok((seconds * 1000.0).round() as i64)
}

/// Sorts cues by start, clips each to the next start, drops those left empty.
pub(crate) fn prepare_cues(cues: &[Cue]) -> Result<Vec<TimedText>, MediaError> {
    let mut timed = Vec::with_capacity(cues.len());
    for (i, cue) in cues.iter().enumerate() {
        let what = format!("cue {i}");
        let (start_ms, end_ms) = (to_ms(cue.start, &what)?, to_ms(cue.end, &what)?);
        if end_ms < start_ms {
            return Err(MediaError::InvalidMeta(format!(
                "{what} ends ({}) before it starts ({})",
                cue.end, cue.start
            )));
        }
        // Blank lines would end an SRT cue early.
        let text: Vec<&str> = cue
            .text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let text = text.join("\n");
        // A tx3g sample holds at most 64 KiB of text: a longer cue (one enormous word, a
        // sentence that never ends) becomes several that share its time in proportion.
        let pieces = split_text(&text, MAX_CUE_BYTES);
        let span = end_ms - start_ms;
        let mut before = 0;
        for piece in pieces {
            let at = |bytes: usize| start_ms + span * bytes as i64 / text.len().max(1) as i64;
            timed.push(TimedText {
                start_ms: at(before),
                end_ms: at(before + piece.len()),
                text: piece.trim().to_owned(),
            });
            before += piece.len();
        }
    }
    timed.sort_by_key(|t| t.start_ms);
    for i in 1..timed.len() {
        let next_start = timed[i].start_ms;
        let prev = &mut timed[i - 1];
        prev.end_ms = prev.end_ms.min(next_start);
    }
    timed.retain(|t| t.end_ms > t.start_ms && !t.text.is_empty());
    Ok(timed)
}

/// Most bytes of text in one cue: the tx3g sample's length field is a u16.
const MAX_CUE_BYTES: usize = u16::MAX as usize;

/// `text` cut into consecutive pieces of at most `max` bytes, at the last whitespace before the
/// limit (which then ends the piece), or at a character boundary inside a word longer than
/// `max`; the pieces joined give `text` back.
fn split_text(text: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Some(space) = rest[..cut].rfind(char::is_whitespace).filter(|&i| i > 0) {
            cut = space + rest[space..].chars().next().map_or(1, char::len_utf8);
        }
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    pieces.push(rest);
    pieces
}

/// The ASS header the mov_text encoder turns into the tx3g sample description: one
/// "Default" style (font, size, colours) as ffmpeg's own default header has it.
const ASS_HEADER: &str = "[Script Info]\n\
ScriptType: v4.00+\n\
PlayResX: 384\n\
PlayResY: 288\n\
\n\
[V4+ Styles]\n\
Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, BackColour, \
Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, \
Shadow, Alignment, MarginL, MarginR, MarginV, Encoding\n\
Style: Default,Arial,16,&Hffffff,&Hffffff,&H0,&H0,0,0,0,0,100,100,0,0,1,1,0,2,10,10,10,0\n\
\n\
[Events]\n\
Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n";

/// Opens the mov_text encoder only for its extradata (see the module header).
pub(crate) fn mov_text_encoder(path: &Path) -> Result<encoder::Subtitle, MediaError> {
    let codec = encoder::find(codec::Id::MOV_TEXT).ok_or_else(|| MediaError::Ffmpeg {
        path: path.to_path_buf(),
        step: "find mov_text encoder",
        source: ffmpeg_next::Error::EncoderNotFound,
    })?;
    let mut enc = ff(
        path,
        "create mov_text encoder",
        codec::Context::new_with_codec(codec).encoder().subtitle(),
    )?;
    enc.set_time_base(MS);
    // SAFETY: `enc` owns a valid, unopened AVCodecContext whose subtitle_header is null.
    // The buffer comes from av_mallocz (zero-terminated, as ffmpeg expects) and is owned by
    // the context from here on: avcodec_free_context frees it.
    unsafe {
        let ctx = enc.as_mut_ptr();
        let header = ASS_HEADER.as_bytes();
        let buf = ffmpeg_next::ffi::av_mallocz(header.len() + 1).cast::<u8>();
        if buf.is_null() {
            return ff(
                path,
                "allocate subtitle header",
                Err(ffmpeg_next::Error::Bug),
            );
        }
        std::ptr::copy_nonoverlapping(header.as_ptr(), buf, header.len());
        (*ctx).subtitle_header = buf;
        (*ctx).subtitle_header_size = header.len() as i32;
    }
    ff(path, "open mov_text encoder", enc.open())
}

/// Writes every cue as one mov_text packet on `stream` (time base `stream_tb`).
pub(crate) fn write_mov_text(
    path: &Path,
    cues: &[TimedText],
    stream: usize,
    stream_tb: Rational,
    out: &mut format::context::Output,
) -> Result<(), MediaError> {
    for cue in cues {
        let mut data = Vec::with_capacity(cue.text.len() + 2);
        data.extend_from_slice(&(cue.text.len() as u16).to_be_bytes());
        data.extend_from_slice(cue.text.as_bytes());
        let mut packet = Packet::copy(&data);
        packet.set_stream(stream);
        packet.set_pts(Some(cue.start_ms));
        packet.set_dts(Some(cue.start_ms));
        packet.set_duration(cue.end_ms - cue.start_ms);
        packet.rescale_ts(MS, stream_tb);
        ff(path, "write subtitle packet", packet.write_interleaved(out))?;
    }
    Ok(())
}

/// The cues as SubRip text (same sorting and clipping as the mov_text track).
pub fn srt_text(cues: &[Cue]) -> Result<String, MediaError> {
    let mut s = String::new();
    for (i, cue) in prepare_cues(cues)?.iter().enumerate() {
        s.push_str(&format!(
            "{}\n{} --> {}\n{}\n\n",
            i + 1,
            srt_time(cue.start_ms),
            srt_time(cue.end_ms),
            cue.text
        ));
    }
    Ok(s)
}

/// Writes a sidecar .srt atomically: for players that ignore mov_text (most browsers).
pub fn write_srt(path: &Path, cues: &[Cue]) -> Result<(), MediaError> {
    let text = srt_text(cues)?;
    let partial = PartialFile::new(path)?;
    io(path, "write srt", std::fs::write(partial.path(), text))?;
    partial.commit().map(drop)
}

/// The cues as WebVTT text (same sorting and clipping as the mov_text track).
pub fn vtt_text(cues: &[Cue]) -> Result<String, MediaError> {
    let mut s = String::from("WEBVTT\n\n");
    for (i, cue) in prepare_cues(cues)?.iter().enumerate() {
        // "-->" would end the timing line early inside a cue's text.
        let text = cue.text.replace("-->", "->");
        s.push_str(&format!(
            "{}\n{} --> {}\n{}\n\n",
            i + 1,
            vtt_time(cue.start_ms),
            vtt_time(cue.end_ms),
            text
        ));
    }
    Ok(s)
}

/// Sidecar subtitle formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum SubtitleFormat {
    /// SubRip (.srt).
    Srt,
    /// WebVTT (.vtt).
    Vtt,
}

impl SubtitleFormat {
    /// The names flags and specs take, in declaration order.
    pub const NAMES: &[&str] = &["srt", "vtt"];

    pub fn extension(self) -> &'static str {
        match self {
            SubtitleFormat::Srt => "srt",
            SubtitleFormat::Vtt => "vtt",
        }
    }
}

/// Writes the sidecar next to `output` (`book.m4b` → `book.srt`), atomically; returns its path.
pub fn write_sidecar(
    output: &Path,
    cues: &[Cue],
    format: SubtitleFormat,
) -> Result<std::path::PathBuf, MediaError> {
    let path = output.with_extension(format.extension());
    let text = match format {
        SubtitleFormat::Srt => srt_text(cues)?,
        SubtitleFormat::Vtt => vtt_text(cues)?,
    };
    let partial = PartialFile::new(&path)?;
    io(
        &path,
        "write subtitles",
        std::fs::write(partial.path(), text),
    )?;
    partial.commit()?;
    Ok(path)
}

fn vtt_time(ms: i64) -> String {
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

fn srt_time(ms: i64) -> String {
    format!(
        "{:02}:{:02}:{:02},{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod sidecar_tests {
    use super::*;

    #[test]
    fn a_cue_over_the_sample_limit_becomes_several_over_its_time() {
        let words = "word ".repeat(30_000);
        let long = format!("{words}{}", "x".repeat(70_000));
        let cues = prepare_cues(&[Cue {
            text: long.clone(),
            start: 1.0,
            end: 11.0,
        }])
        .unwrap();
        assert!(cues.len() >= 3, "{} cues", cues.len());
        assert!(cues.iter().all(|c| c.text.len() <= MAX_CUE_BYTES));
        assert_eq!(cues[0].start_ms, 1000);
        assert_eq!(cues.last().unwrap().end_ms, 11_000);
        for pair in cues.windows(2) {
            assert_eq!(pair[0].end_ms, pair[1].start_ms, "no gap, no overlap");
        }
        // Cut after a space while there are spaces, inside the long word after that.
        assert!(
            cues[0].text.ends_with("word"),
            "{:?}",
            &cues[0].text[65_500..]
        );
        let kept: String = cues.iter().flat_map(|c| c.text.split(' ')).collect();
        assert_eq!(kept, long.replace(' ', ""), "nothing lost");
    }

    #[test]
    fn split_text_keeps_characters_whole() {
        let text = "é".repeat(10);
        let pieces = split_text(&text, 5);
        assert!(pieces.iter().all(|p| p.len() <= 5 && !p.is_empty()));
        assert_eq!(pieces.concat(), text);
    }

    #[test]
    fn vtt_and_srt_share_the_clock() {
        let cues = [
            Cue {
                text: "Two --> three".into(),
                start: 3723.5,
                end: 3724.0,
            },
            Cue {
                text: "One.".into(),
                start: 0.25,
                end: 1.0,
            },
        ];
        let vtt = vtt_text(&cues).unwrap();
        assert!(
            vtt.starts_with("WEBVTT\n\n1\n00:00:00.250 --> 00:00:01.000\nOne.\n"),
            "{vtt}"
        );
        assert!(
            vtt.contains("01:02:03.500 --> 01:02:04.000\nTwo -> three"),
            "{vtt}"
        );
        let srt = srt_text(&cues).unwrap();
        assert!(srt.contains("00:00:00,250 --> 00:00:01,000"), "{srt}");
    }
}
