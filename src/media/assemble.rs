//! `assemble`: ordered chunks → the final MP4.
//!
//! Input: chunk paths in playback order (all from `ChunkWriter` with the same settings; a
//! path may repeat), plus title, chapters and cues, and the audio track, maybe already encoded
//! from the first chunks while the rest rendered ([`AudioAhead`]). Output: an MP4 with the chunks'
//! H.264 packets copied (never re-encoded), one continuous AAC-LC 48 kHz mono track (encoded in
//! pieces, interleaved with the video by time), an optional mov_text track, chapters, and the
//! moov atom in front (faststart).
//! Invariants: every chunk is validated before the output is created (each distinct file
//! once, by its header and packets, nothing decoded), and the file copied is the very one
//! validated (same inode, size and mtime: chunks are only ever replaced by a rename), as is the
//! file the audio was read from, so the cost is one header parse per chunk plus the bytes; video
//! pts are the chunk's frame index plus the frames before it, dts are rebuilt as a constant
//! reorder delay behind decode order (Matroska keeps no dts); the output appears only complete,
//! and any failure or a set stop flag (checked between packets) removes the temp file.
//! A chunk replaced while it is assembled (another render republished it under the same key: a
//! new file by a rename, the same content) makes the assembly start over from the files at the
//! paths now, the audio read again included, up to [`ATTEMPTS`] times in all.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use ffmpeg_next::{Dictionary, Rational, codec, encoder, format};

use super::aac_ahead::AudioAhead;
use super::atomic::{PartialFile, remove_stale_partials};
use super::cover::{add_cover_stream, write_cover};
use super::error::{MediaError, ff};
use super::probe::{ChunkScan, FileId, open_chunk, pts_to_frame, read_packet, scan_open};
use super::subtitles::{
    MS, SubtitleFormat, TimedText, mov_text_encoder, prepare_cues, to_ms, write_mov_text,
    write_sidecar,
};
use super::{AssembleInfo, Chapter, OutputMeta, init, text_tags};

/// Assembly attempts before a chunk that keeps being replaced fails it with
/// [`MediaError::ChunkChanged`].
pub(crate) const ATTEMPTS: usize = 3;

/// One chunk of the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRef {
    pub path: PathBuf,
    /// Frames and samples the caller found when it checked the chunk (its subtitles are laid
    /// out on them): a file at `path` holding others was replaced since, and fails assembly.
    pub expect: Option<(u64, u64)>,
}

impl From<PathBuf> for ChunkRef {
    fn from(path: PathBuf) -> ChunkRef {
        ChunkRef { path, expect: None }
    }
}

/// A render's MP4 from its finished chunks: a killed run's partial files are removed, then the MP4
/// is built ([`assemble`]) and, with `subtitles`, its sidecar written beside it.
pub fn write_mp4(
    chunks: &[ChunkRef],
    output: &Path,
    meta: &OutputMeta,
    subtitles: Option<SubtitleFormat>,
    audio: AudioAhead,
    stop: &AtomicBool,
) -> Result<(AssembleInfo, Option<PathBuf>), MediaError> {
    remove_stale_partials(output);
    let info = assemble(chunks, output, meta, audio, stop)?;
    let sidecar = subtitles
        .map(|format| write_sidecar(output, &meta.cues, format))
        .transpose()?;
    Ok((info, sidecar))
}

/// Builds `output` from `chunks`; see the module header for what is guaranteed. `stop` set
/// (SIGINT/SIGTERM) ends it with [`MediaError::Cancelled`] and no output: within a packet, or,
/// where the audio track's encoding is behind the copy, once that encoding has caught up.
/// `audio` is handed the chunks it lacks (its encoding goes on while the chunks are checked).
pub fn assemble(
    chunks: &[ChunkRef],
    output: &Path,
    meta: &OutputMeta,
    audio: AudioAhead,
    stop: &AtomicBool,
) -> Result<AssembleInfo, MediaError> {
    init()?;
    if chunks.is_empty() {
        return Err(MediaError::NoChunks);
    }
    let paths: Vec<PathBuf> = chunks.iter().map(|c| c.path.clone()).collect();
    let threads = audio.threads();
    let mut ahead = Some(audio.complete(&paths));
    if let Some(title) = &meta.title {
        check_no_nul(title, "title")?;
    }
    let chapters = prepare_chapters(&meta.chapters)?;
    let cues = prepare_cues(&meta.cues)?;
    redo(ATTEMPTS, |attempt| {
        // A later attempt reads the audio again, from the files at the paths now.
        let aac = ahead
            .take()
            .unwrap_or_else(|| AudioAhead::start(output, threads).complete(&paths));
        if attempt > 0 {
            tracing::debug!(attempt, "a chunk was replaced: assembling again");
        }
        let made = Made {
            chunks,
            output,
            meta,
            chapters: &chapters,
            cues: &cues,
        };
        assemble_once(&made, aac, stop)
    })
}

/// How one attempt ended, short of an error.
enum Outcome<T> {
    Done(T),
    /// A chunk was replaced during it; the error says which, for when no attempt is left.
    Replaced(MediaError),
}

/// Runs `attempt` (given its number, from 0) until it ends otherwise than
/// [`Outcome::Replaced`], at most `attempts` times; then the last replacement's error.
fn redo<T>(
    attempts: usize,
    mut attempt: impl FnMut(usize) -> Result<Outcome<T>, MediaError>,
) -> Result<T, MediaError> {
    let mut n = 0;
    loop {
        match attempt(n)? {
            Outcome::Done(done) => return Ok(done),
            Outcome::Replaced(e) if n + 1 >= attempts => return Err(e),
            Outcome::Replaced(_) => n += 1,
        }
    }
}

/// What an attempt assembles, checked once for all attempts.
#[derive(Clone, Copy)]
struct Made<'a> {
    chunks: &'a [ChunkRef],
    output: &'a Path,
    meta: &'a OutputMeta,
    chapters: &'a [(i64, i64, String)],
    cues: &'a [TimedText],
}

/// One attempt of [`assemble`] with the audio track `aac`.
fn assemble_once(
    made: &Made<'_>,
    mut aac: AudioAhead,
    stop: &AtomicBool,
) -> Result<Outcome<AssembleInfo>, MediaError> {
    let Made {
        chunks,
        output,
        meta,
        chapters,
        cues,
    } = *made;
    let (files, order) = scan_chunks(chunks, stop)?;
    check_compatible(&files)?;
    let totals = Totals::of(order.iter().map(|&i| &files[i].1))?;
    let first = &files[0].1;

    let partial = PartialFile::new(output)?;
    let mut out = ff(
        output,
        "create output file",
        format::output_as(partial.path(), "mp4"),
    )?;
    let frame_tb = Rational::new(1, totals.fps as i32);

    add_video_stream(&mut out, output, first, frame_tb, totals.fps)?;
    // Stream 1: AAC.
    aac.add_stream(&mut out)?;
    // Stream 2 (only with cues): mov_text.
    if !cues.is_empty() {
        let enc = mov_text_encoder(output)?;
        let mut st = ff(output, "add subtitle stream", out.add_stream(enc.codec()))?;
        st.set_parameters(&enc);
        st.set_time_base(MS);
    }
    // Last (after the mov_text track, if any): the cover as an attached picture.
    let cover = meta
        .cover
        .as_ref()
        .map(|c| add_cover_stream(&mut out, output, c).map(|index| (index, c)))
        .transpose()?;
    write_header(&mut out, output, meta, chapters)?;
    if let Some((index, c)) = cover {
        write_cover(&mut out, output, index, c)?;
    }
    let tb = |out: &format::context::Output, i: usize| out.stream(i).map(|s| s.time_base());
    let video_tb = tb(&out, 0).unwrap_or(frame_tb);
    aac.set_stream(1, tb(&out, 1).unwrap_or(Rational::new(1, 48_000)));
    if !cues.is_empty() {
        let sub_tb = tb(&out, 2).unwrap_or(MS);
        write_mov_text(output, cues, 2, sub_tb, &mut out)?;
    }

    let mut frame_offset: i64 = 0;
    for &i in &order {
        stopped(stop)?;
        let (path, chunk, id) = &files[i];
        let mut open = open_chunk(path)?;
        if open.id != *id {
            return Ok(Outcome::Replaced(MediaError::ChunkChanged {
                path: path.to_path_buf(),
                reason: "another file is at its path now".into(),
            }));
        }
        if aac.next_read()? != Some(open.id) {
            return Ok(Outcome::Replaced(MediaError::ChunkChanged {
                path: path.to_path_buf(),
                reason: "its audio was read from another file".into(),
            }));
        }
        copy_chunk(
            path,
            chunk,
            &mut open.input,
            Join {
                frame_offset,
                reorder_delay: totals.reorder_delay,
                frame_tb,
                video_tb,
            },
            stop,
            &mut aac,
            &mut out,
        )?;
        frame_offset += chunk.info.frames as i64;
    }
    aac.write_until(None, &mut out)?;
    ff(output, "write MP4 trailer (faststart)", out.write_trailer())?;
    drop(out); // closes the file before fsync
    let bytes = partial.commit()?;
    Ok(Outcome::Done(AssembleInfo {
        frames: totals.frames,
        audio_samples: totals.samples,
        duration_s: totals.video_s().max(totals.audio_s()),
        bytes,
    }))
}

/// [`MediaError::Cancelled`] once `stop` is set; checked between chunks and packets.
fn stopped(stop: &AtomicBool) -> Result<(), MediaError> {
    if stop.load(Ordering::Relaxed) {
        Err(MediaError::Cancelled)
    } else {
        Ok(())
    }
}

/// A distinct chunk file validated: its path, its scan and its identity (to copy the very file
/// that was validated).
type ScannedFile<'c> = (&'c Path, ChunkScan, FileId);

/// Every chunk validated before the output is created, each distinct file once; the second list
/// gives each chunk's entry in the first. A chunk whose frames or samples differ from what its
/// caller checked fails here.
fn scan_chunks<'c>(
    chunks: &'c [ChunkRef],
    stop: &AtomicBool,
) -> Result<(Vec<ScannedFile<'c>>, Vec<usize>), MediaError> {
    let mut files: Vec<ScannedFile<'c>> = Vec::new();
    let mut seen: HashMap<&Path, usize> = HashMap::new();
    let mut order = Vec::with_capacity(chunks.len());
    for c in chunks {
        stopped(stop)?;
        if let Some(&i) = seen.get(c.path.as_path()) {
            order.push(i);
            continue;
        }
        let mut open = open_chunk(&c.path)?;
        let s = scan_open(&c.path, &mut open.input)?;
        if let Some((frames, samples)) = c.expect
            && (s.info.frames, s.info.samples) != (frames, samples)
        {
            return Err(MediaError::ChunkChanged {
                path: c.path.clone(),
                reason: format!(
                    "it holds {} frames and {} samples, {frames} and {samples} when checked",
                    s.info.frames, s.info.samples
                ),
            });
        }
        seen.insert(&c.path, files.len());
        order.push(files.len());
        files.push((&c.path, s, open.id));
    }
    Ok((files, order))
}

/// Stream 0: H.264, parameters (avcC) from the first chunk; all chunks have equal ones.
fn add_video_stream(
    out: &mut format::context::Output,
    output: &Path,
    first: &ChunkScan,
    frame_tb: Rational,
    fps: u32,
) -> Result<(), MediaError> {
    let mut st = ff(
        output,
        "add video stream",
        out.add_stream(encoder::find(codec::Id::None)),
    )?;
    st.set_parameters(first.video_params.clone());
    // SAFETY: the stream's codecpar is valid while `out` lives. Matroska's codec tag
    // means nothing in MP4; 0 lets the mp4 muxer pick `avc1`.
    unsafe {
        (*st.parameters().as_mut_ptr()).codec_tag = 0;
    }
    st.set_time_base(frame_tb);
    st.set_avg_frame_rate(Rational::new(fps as i32, 1));
    Ok(())
}

/// Chapters, title and author, then the header, asking for the moov atom in front (faststart).
fn write_header(
    out: &mut format::context::Output,
    output: &Path,
    meta: &OutputMeta,
    chapters: &[(i64, i64, String)],
) -> Result<(), MediaError> {
    for (i, (start, end, title)) in chapters.iter().enumerate() {
        ff(
            output,
            "add chapter",
            out.add_chapter(i as i64 + 1, MS, *start, *end, title),
        )?;
    }
    for (text, what) in [(&meta.album, "album"), (&meta.author, "author")] {
        if let Some(text) = text {
            check_no_nul(text, what)?;
        }
    }
    out.set_metadata(text_tags(
        meta.title.as_deref(),
        meta.album.as_deref(),
        meta.author.as_deref(),
        meta.track,
    ));
    let mut options = Dictionary::new();
    options.set("movflags", "+faststart");
    ff(
        output,
        "write MP4 header",
        out.write_header_with(options).map(drop),
    )
}

/// Sums and shared values of the chunk list.
struct Totals {
    frames: u64,
    samples: u64,
    fps: u32,
    sample_rate: u32,
    reorder_delay: i64,
}

impl Totals {
    /// Also enforces the one-frame agreement of audio and video that the caller promises.
    fn of<'a>(scans: impl Iterator<Item = &'a ChunkScan>) -> Result<Totals, MediaError> {
        let mut t = Totals {
            frames: 0,
            samples: 0,
            fps: 0,
            sample_rate: 0,
            reorder_delay: 0,
        };
        for s in scans {
            if t.fps == 0 {
                (t.fps, t.sample_rate) = (s.info.fps, s.info.sample_rate);
            }
            t.frames += s.info.frames;
            t.samples += s.info.samples;
            t.reorder_delay = t.reorder_delay.max(s.reorder_delay);
        }
        if (t.video_s() - t.audio_s()).abs() > 1.0 / f64::from(t.fps) + 1e-9 {
            return Err(MediaError::DurationMismatch {
                video_s: t.video_s(),
                audio_s: t.audio_s(),
            });
        }
        Ok(t)
    }

    fn video_s(&self) -> f64 {
        self.frames as f64 / f64::from(self.fps)
    }

    fn audio_s(&self) -> f64 {
        self.samples as f64 / f64::from(self.sample_rate)
    }
}

/// Where a chunk goes on the output's timeline.
struct Join {
    frame_offset: i64,
    reorder_delay: i64,
    frame_tb: Rational,
    video_tb: Rational,
}

/// Copies one chunk's video packets, each after the audio packets that start before it.
fn copy_chunk(
    path: &Path,
    chunk: &ChunkScan,
    input: &mut format::context::Input,
    join: Join,
    stop: &AtomicBool,
    aac: &mut AudioAhead,
    out: &mut format::context::Output,
) -> Result<(), MediaError> {
    let Join {
        frame_offset,
        reorder_delay,
        frame_tb,
        video_tb,
    } = join;
    let chunk_tb = input
        .stream(chunk.video_index)
        .map_or(frame_tb, |s| s.time_base());
    let mut decode_index: i64 = 0;
    while let Some(mut packet) = read_packet(path, input)? {
        if stop.load(Ordering::Relaxed) {
            return Err(MediaError::Cancelled);
        }
        if packet.stream() == chunk.video_index {
            let frame = pts_to_frame(packet.pts().unwrap_or(0), chunk_tb, frame_tb);
            packet.set_pts(Some(frame_offset + frame));
            // dts(k) = k - delay keeps dts strictly increasing across chunk joins and never
            // above pts (delay is the largest reorder depth of any chunk).
            let dts = frame_offset + decode_index - reorder_delay;
            aac.write_until(Some((dts, frame_tb)), out)?;
            packet.set_dts(Some(dts));
            packet.set_duration(1);
            packet.set_position(-1);
            packet.set_stream(0);
            packet.rescale_ts(frame_tb, video_tb);
            ff(path, "write video packet", packet.write_interleaved(out))?;
            decode_index += 1;
        }
    }
    Ok(())
}

/// First chunk's size, fps, sample rate and H.264 parameter sets must hold for all.
fn check_compatible(files: &[ScannedFile]) -> Result<(), MediaError> {
    let first = &files[0].1;
    for (path, s, _) in files.iter().skip(1) {
        let mismatch = |what: &'static str, first: String, found: String| {
            Err(MediaError::ChunkMismatch {
                path: path.to_path_buf(),
                what,
                first,
                found,
            })
        };
        let size = |c: &ChunkScan| format!("{}x{}", c.info.width, c.info.height);
        if size(s) != size(first) {
            return mismatch("frame size", size(first), size(s));
        }
        if s.info.fps != first.info.fps {
            return mismatch("fps", first.info.fps.to_string(), s.info.fps.to_string());
        }
        if s.info.sample_rate != first.info.sample_rate {
            return mismatch(
                "sample rate",
                first.info.sample_rate.to_string(),
                s.info.sample_rate.to_string(),
            );
        }
        if s.extradata != first.extradata {
            return mismatch(
                "H.264 parameter sets (encoder settings)",
                hex(&first.extradata),
                hex(&s.extradata),
            );
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Chapters in milliseconds, checked so that ffmpeg-next never panics on them.
fn prepare_chapters(chapters: &[Chapter]) -> Result<Vec<(i64, i64, String)>, MediaError> {
    chapters
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let what = format!("chapter {i}");
            check_no_nul(&c.title, &what)?;
            let (start, end) = (to_ms(c.start, &what)?, to_ms(c.end, &what)?);
            if end < start {
                return Err(MediaError::InvalidMeta(format!(
                    "{what} ends ({}) before it starts ({})",
                    c.end, c.start
                )));
            }
            Ok((start, end, c.title.clone()))
        })
        .collect()
}

/// ffmpeg-next turns metadata into C strings with `unwrap`, so a NUL byte would panic.
fn check_no_nul(text: &str, what: &str) -> Result<(), MediaError> {
    if text.contains('\0') {
        return Err(MediaError::InvalidMeta(format!(
            "{what} contains a NUL byte"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(n: usize) -> MediaError {
        MediaError::ChunkChanged {
            path: PathBuf::from(format!("c{n}.mkv")),
            reason: "another file is at its path now".into(),
        }
    }

    #[test]
    fn a_replacement_is_tried_again_and_one_that_goes_on_fails_with_the_last() {
        let mut tried = Vec::new();
        let once = redo(ATTEMPTS, |n| {
            tried.push(n);
            Ok(match n {
                0 => Outcome::Replaced(changed(n)),
                _ => Outcome::Done(n),
            })
        });
        assert_eq!((once.unwrap(), tried), (1, vec![0, 1]));

        let mut tried = Vec::new();
        let always = redo(ATTEMPTS, |n| {
            tried.push(n);
            Ok(Outcome::<()>::Replaced(changed(n)))
        });
        assert_eq!(tried, [0, 1, 2]);
        let e = always.unwrap_err();
        assert!(e.to_string().starts_with("c2.mkv: changed"), "{e}");

        let mut tried = 0;
        let failed = redo(ATTEMPTS, |_| {
            tried += 1;
            Err::<Outcome<()>, _>(MediaError::Cancelled)
        });
        assert!(matches!(failed, Err(MediaError::Cancelled)));
        assert_eq!(tried, 1, "other errors are not tried again");
    }
}
