//! Reading chunks back: `probe_chunk` for resume decisions, `scan` for assembly.
//!
//! Input: a chunk path. Output: its `ChunkInfo` (and, for assembly, what concatenation
//! needs: H.264 extradata, reorder delay, stream indices).
//! Invariants: a chunk is accepted only when it carries our tags, has exactly one H.264
//! yuv420p stream and one pcm_s16le mono stream matching them, every packet reads without
//! error, video pts form exactly 0..frames-1, and each track's duration recorded at finish
//! time equals what its packets cover (a truncated file fails this check).

use std::ffi::{CStr, CString};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::ptr;

use ffmpeg_next::{DictionaryRef, Packet, Rational, Rescale, codec, format, media};

use super::chunk::{CHUNK_VERSION, TAG_CRF, TAG_FPS, TAG_PRESET, TAG_SAMPLE_RATE, TAG_VERSION};
use super::error::{MediaError, ff, io};
use super::{ChunkInfo, init};

/// No real chunk comes near this (a week at 25 fps); a corrupt pts beyond it must not make
/// the frame bitmap allocate gigabytes.
const MAX_CHUNK_FRAMES: usize = 1 << 24;

/// Matroska stores milliseconds, so recorded and computed durations agree to about 1 ms.
const DURATION_TOLERANCE_US: i64 = 2_000;

/// Validates a checkpointed chunk; an error means "discard it and encode the segment again".
pub fn probe_chunk(path: &Path) -> Result<ChunkInfo, MediaError> {
    scan(path).map(|s| s.info)
}

/// Which file a path led to when it was opened: the same identity later means the same bytes,
/// because chunks are only ever replaced by a rename (a new inode), never rewritten in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

/// A chunk opened once: ffmpeg reads the very file `file` holds (through `/proc/self/fd`), so
/// a rename onto the path afterwards cannot change what is read.
pub(crate) struct OpenChunk {
    pub(crate) input: format::context::Input,
    pub(crate) id: FileId,
}

/// Opens a chunk reading only its Matroska header. `avformat_find_stream_info` is skipped: it
/// decodes frames of every chunk, which was most of assembly's cost per chunk, and everything
/// checked here (tags, streams, parameter sets, sizes, rates) is in the header.
pub(crate) fn open_chunk(path: &Path) -> Result<OpenChunk, MediaError> {
    init()?;
    let file = io(path, "open chunk", File::open(path))?;
    let m = io(path, "stat chunk", file.metadata())?;
    let id = FileId {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    };
    let fd_path =
        CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).expect("no NUL in a number");
    // SAFETY: `ps` starts null as avformat_open_input requires; on success it is a valid
    // context that `Input::wrap` takes ownership of (and closes on drop); on failure ffmpeg
    // frees it and leaves it null.
    let input = unsafe {
        let mut ps = ptr::null_mut();
        match ffmpeg_next::ffi::avformat_open_input(
            &mut ps,
            fd_path.as_ptr(),
            ptr::null(),
            ptr::null_mut(),
        ) {
            0 => format::context::Input::wrap(ps),
            e => return ff(path, "open chunk", Err(ffmpeg_next::Error::from(e))),
        }
    };
    // ffmpeg holds its own descriptor of the same file now.
    drop(file);
    Ok(OpenChunk { input, id })
}

/// Everything `assemble` needs to know about one chunk before it writes any output.
pub(crate) struct ChunkScan {
    pub(crate) info: ChunkInfo,
    pub(crate) video_index: usize,
    /// H.264 parameter sets (avcC); equal bytes across chunks mean the streams concatenate.
    pub(crate) extradata: Vec<u8>,
    /// The video stream's codec parameters (an owned copy), for the output stream.
    pub(crate) video_params: codec::Parameters,
    /// How many frames decode order runs ahead of display order (B-frames): the largest
    /// `k - pts_k` over the k-th packet. Matroska keeps no dts, so assembly rebuilds it.
    pub(crate) reorder_delay: i64,
}

pub(crate) fn scan(path: &Path) -> Result<ChunkScan, MediaError> {
    scan_open(path, &mut open_chunk(path)?.input)
}

/// [`scan`] of a chunk already open (read to its end): its tags, its two streams, then every
/// packet, and last the durations its tracks record against what the packets cover.
pub(crate) fn scan_open(
    path: &Path,
    input: &mut format::context::Input,
) -> Result<ChunkScan, MediaError> {
    let tags = read_tags(path, input)?;
    let streams = read_streams(path, input, tags.sample_rate)?;
    let count = count_packets(path, input, &streams, tags.fps)?;
    check_durations(path, input, &streams, &count, &tags)?;
    Ok(ChunkScan {
        info: ChunkInfo {
            frames: count.frames,
            samples: count.samples,
            width: streams.width,
            height: streams.height,
            fps: tags.fps,
            sample_rate: tags.sample_rate,
            crf: tags.crf,
            preset: tags.preset,
        },
        video_index: streams.video_index,
        extradata: streams.extradata,
        video_params: streams.video_params,
        reorder_delay: count.reorder_delay,
    })
}

fn bad(path: &Path, reason: String) -> MediaError {
    MediaError::BadChunk {
        path: path.to_path_buf(),
        reason,
    }
}

/// What talker wrote into a chunk's tags when it encoded it.
struct ChunkTags {
    fps: u32,
    sample_rate: u32,
    crf: u8,
    preset: String,
}

fn read_tags(path: &Path, input: &format::context::Input) -> Result<ChunkTags, MediaError> {
    let tags = input.metadata();
    let tag = |key: &'static str| meta_value(&tags, key);
    if tag(TAG_VERSION).as_deref() != Some(CHUNK_VERSION) {
        return Err(bad(
            path,
            format!(
                "tag {TAG_VERSION} is {:?}, expected {CHUNK_VERSION:?}",
                tag(TAG_VERSION)
            ),
        ));
    }
    let number = |key: &'static str| -> Result<u32, MediaError> {
        tag(key)
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&v| v > 0 || key == TAG_CRF)
            .ok_or_else(|| bad(path, format!("tag {key} missing or not a number")))
    };
    let fps = number(TAG_FPS)?;
    let sample_rate = number(TAG_SAMPLE_RATE)?;
    let crf =
        u8::try_from(number(TAG_CRF)?).map_err(|_| bad(path, format!("tag {TAG_CRF} too big")))?;
    let preset = tag(TAG_PRESET).ok_or_else(|| bad(path, format!("tag {TAG_PRESET} missing")))?;
    Ok(ChunkTags {
        fps,
        sample_rate,
        crf,
        preset,
    })
}

/// The chunk's H.264 video and PCM audio streams, as the muxer copies them.
struct ChunkStreams {
    video_index: usize,
    video_tb: Rational,
    audio_index: usize,
    width: u32,
    height: u32,
    extradata: Vec<u8>,
    video_params: codec::Parameters,
}

fn read_streams(
    path: &Path,
    input: &format::context::Input,
    sample_rate: u32,
) -> Result<ChunkStreams, MediaError> {
    if input.nb_streams() != 2 {
        return Err(bad(
            path,
            format!("{} streams, expected 2", input.nb_streams()),
        ));
    }
    let mut video = None;
    let mut audio = None;
    for stream in input.streams() {
        let params = stream.parameters();
        match params.medium() {
            media::Type::Video => video = Some((stream.index(), stream.time_base(), params)),
            media::Type::Audio => audio = Some((stream.index(), params)),
            other => return Err(bad(path, format!("unexpected {other:?} stream"))),
        }
    }
    let (video_index, video_tb, video_params) =
        video.ok_or_else(|| bad(path, "no video stream".to_string()))?;
    let (audio_index, audio_params) =
        audio.ok_or_else(|| bad(path, "no audio stream".to_string()))?;
    if video_params.id() != codec::Id::H264 || audio_params.id() != codec::Id::PCM_S16LE {
        return Err(bad(
            path,
            format!(
                "codecs {:?}/{:?}, expected H264/PCM_S16LE",
                video_params.id(),
                audio_params.id()
            ),
        ));
    }
    let extradata = extradata(&video_params);
    let owned_params = video_params.clone();
    let decoder = ff(
        path,
        "read video parameters",
        codec::Context::from_parameters(video_params),
    )?;
    let v = ff(path, "read video parameters", decoder.decoder().video())?;
    // Matroska does not store the pixel format (ffmpeg learns it only by decoding, which the
    // header-only open skips); the avcC record's profile tells it: Baseline, Main, Extended
    // and High are 8-bit 4:2:0 only.
    match extradata.get(1) {
        Some(66 | 77 | 88 | 100) => {}
        other => {
            return Err(bad(
                path,
                format!(
                    "pixel format is not yuv420p (H.264 profile {other:?} is not an 8-bit 4:2:0 one)"
                ),
            ));
        }
    }
    let (width, height) = (v.width(), v.height());
    let decoder = ff(
        path,
        "read audio parameters",
        codec::Context::from_parameters(audio_params),
    )?;
    let a = ff(path, "read audio parameters", decoder.decoder().audio())?;
    if a.channels() != 1 || a.rate() != sample_rate {
        return Err(bad(
            path,
            format!(
                "audio is {} channel(s) at {} Hz, tags say mono at {sample_rate} Hz",
                a.channels(),
                a.rate()
            ),
        ));
    }
    Ok(ChunkStreams {
        video_index,
        video_tb,
        audio_index,
        width,
        height,
        extradata,
        video_params: owned_params,
    })
}

/// The PCM stream of a chunk opened by [`open_chunk`]: its index and sample rate.
pub(crate) fn pcm_stream(
    path: &Path,
    input: &format::context::Input,
) -> Result<(usize, u32), MediaError> {
    let stream = input
        .streams()
        .best(media::Type::Audio)
        .ok_or_else(|| bad(path, "no audio stream".to_string()))?;
    let step = "read audio parameters";
    let context = ff(
        path,
        step,
        codec::Context::from_parameters(stream.parameters()),
    )?;
    let audio = ff(path, step, context.decoder().audio())?;
    Ok((stream.index(), audio.rate()))
}

/// What the packets hold: frames (each pts once, none missing), PCM samples, and how far decode
/// order runs ahead of display order.
struct PacketCount {
    frames: u64,
    samples: u64,
    reorder_delay: i64,
}

fn count_packets(
    path: &Path,
    input: &mut format::context::Input,
    streams: &ChunkStreams,
    fps: u32,
) -> Result<PacketCount, MediaError> {
    let frame_tb = Rational::new(1, fps as i32);
    let mut seen: Vec<bool> = Vec::new();
    let mut frames: u64 = 0;
    let mut samples: u64 = 0;
    let mut reorder_delay: i64 = 0;
    while let Some(packet) = read_packet(path, input)? {
        if packet.stream() == streams.video_index {
            let pts = packet
                .pts()
                .ok_or_else(|| bad(path, format!("video packet {frames} has no pts")))?;
            let index = pts_to_frame(pts, streams.video_tb, frame_tb);
            let slot = usize::try_from(index)
                .ok()
                .filter(|&s| s < MAX_CHUNK_FRAMES)
                .ok_or_else(|| bad(path, format!("video pts {pts} is out of range")))?;
            if slot >= seen.len() {
                seen.resize(slot + 1, false);
            }
            if std::mem::replace(&mut seen[slot], true) {
                return Err(bad(path, format!("frame {slot} appears twice")));
            }
            reorder_delay = reorder_delay.max(frames as i64 - index);
            frames += 1;
        } else if packet.stream() == streams.audio_index {
            let size = packet.size();
            if !size.is_multiple_of(2) {
                return Err(bad(path, format!("odd PCM packet size {size}")));
            }
            samples += size as u64 / 2;
        }
    }
    if seen.len() as u64 != frames {
        return Err(bad(
            path,
            format!(
                "{frames} video packets but pts reach frame {}",
                seen.len().saturating_sub(1)
            ),
        ));
    }
    Ok(PacketCount {
        frames,
        samples,
        reorder_delay,
    })
}

/// Each track's recorded duration must match what its packets cover: a chunk cut short after
/// its header was written (a killed encoder) fails here.
fn check_durations(
    path: &Path,
    input: &format::context::Input,
    streams: &ChunkStreams,
    count: &PacketCount,
    tags: &ChunkTags,
) -> Result<(), MediaError> {
    let tracks = [
        ("video", streams.video_index, count.frames, tags.fps),
        (
            "audio",
            streams.audio_index,
            count.samples,
            tags.sample_rate,
        ),
    ];
    for (kind, index, units, rate) in tracks {
        let covered_us = (units as i128 * 1_000_000 / i128::from(rate)) as i64;
        let recorded_us = input
            .stream(index)
            .and_then(|s| meta_value(&s.metadata(), "DURATION"))
            .and_then(|v| parse_duration_us(&v));
        let ok = match recorded_us {
            Some(us) => (us - covered_us).abs() <= DURATION_TOLERANCE_US,
            None => covered_us == 0,
        };
        if !ok {
            return Err(bad(
                path,
                format!(
                    "{kind} track records {recorded_us:?} us but its packets cover {covered_us} us \
                     (truncated?)"
                ),
            ));
        }
    }
    Ok(())
}

/// A metadata value as an owned, valid String.
///
/// ffmpeg-next's `DictionaryRef::get` turns the file's bytes into `&str` without checking
/// UTF-8, which a corrupt chunk turns into undefined behaviour (the fuzzer found a panic),
/// so the value is read through the C API and validated here.
fn meta_value(dict: &DictionaryRef, key: &'static str) -> Option<String> {
    let key = CString::new(key).ok()?;
    // SAFETY: `dict.as_ptr()` is a valid AVDictionary or null (both accepted by
    // av_dict_get) and lives as long as `dict`; an entry's value is a NUL-terminated
    // string owned by the dictionary, copied here before the borrow ends.
    unsafe {
        let entry = ffmpeg_next::ffi::av_dict_get(dict.as_ptr(), key.as_ptr(), ptr::null(), 0);
        if entry.is_null() || (*entry).value.is_null() {
            return None;
        }
        let bytes = CStr::from_ptr((*entry).value).to_bytes();
        Some(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// The next packet of `input`, or `None` at the end.
///
/// Each call returns a fresh packet: `av_read_frame` does not unreference the packet it
/// fills, so reusing one would leak every packet's buffer (the fuzzer found this).
pub(crate) fn read_packet(
    path: &Path,
    input: &mut format::context::Input,
) -> Result<Option<Packet>, MediaError> {
    let mut packet = Packet::empty();
    match packet.read(input) {
        Ok(()) => Ok(Some(packet)),
        Err(ffmpeg_next::Error::Eof) => Ok(None),
        Err(e) => ff(path, "read chunk packets", Err(e)),
    }
}

/// Matroska's per-track `DURATION` tag ("HH:MM:SS.nnnnnnnnn"), written at finish time,
/// in microseconds.
pub(crate) fn parse_duration_us(text: &str) -> Option<i64> {
    let mut parts = text.splitn(3, ':');
    let hours: i64 = parts.next()?.parse().ok()?;
    let minutes: i64 = parts.next()?.parse().ok()?;
    let seconds: f64 = parts.next()?.parse().ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    let whole = hours
        .checked_mul(3600)?
        .checked_add(minutes.checked_mul(60)?)?;
    whole
        .checked_mul(1_000_000)?
        .checked_add((seconds * 1e6).round() as i64)
}

/// Frame index of a pts; exact because Matroska's millisecond rounding is far below half
/// a frame for any fps this module accepts.
pub(crate) fn pts_to_frame(pts: i64, stream_tb: Rational, frame_tb: Rational) -> i64 {
    pts.rescale(stream_tb, frame_tb)
}

/// The codec parameters' extradata; ffmpeg-next exposes no accessor for it.
fn extradata(params: &codec::Parameters) -> Vec<u8> {
    // SAFETY: `params` owns a valid AVCodecParameters; extradata is either null or points
    // to `extradata_size` readable bytes owned by it, and we copy them before it can change.
    unsafe {
        let p = params.as_ptr();
        let (data, size) = ((*p).extradata, (*p).extradata_size);
        if data.is_null() || size <= 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(data, size as usize).to_vec()
        }
    }
}
