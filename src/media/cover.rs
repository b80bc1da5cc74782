//! Cover art as an attached picture: one extra video stream with the `attached_pic` disposition
//! and a single packet holding the image's original bytes (MJPEG or PNG codec id). FFmpeg's MP4
//! muxer writes it as the iTunes `covr` atom of a video, its MP3 muxer as an ID3v2 `APIC` frame
//! (an M4B's `covr` is written by [`super::mp4_audio`]); neither re-encodes it, and players and `ffprobe` read it back as an attached picture.
//!
//! Order: the stream is added after the output's other streams (their indices stay as they were)
//! and before the header; the packet is written right after the header, before any audio, because
//! the MP3 muxer holds back the audio until every picture has arrived.

use std::path::Path;

use ffmpeg_next::ffi::{AV_DISPOSITION_ATTACHED_PIC, AVCodecID, AVMediaType};
use ffmpeg_next::{Packet, Rational, codec, encoder, format};

use super::error::{MediaError, ff};
use crate::cover::Cover;

/// The picture's time base; any would do for a single packet at time 0.
const COVER_TB: Rational = Rational(1, 90_000);

/// Adds `cover`'s stream to `out` (before its header) and returns the stream's index.
pub(super) fn add_cover_stream(
    out: &mut format::context::Output,
    output: &Path,
    cover: &Cover,
) -> Result<usize, MediaError> {
    let mut st = ff(
        output,
        "add cover stream",
        out.add_stream(encoder::find(codec::Id::None)),
    )?;
    // A checked cover is at most MAX_COVER_SIDE pixels a side, far inside i32.
    let (width, height) = (cover.width as i32, cover.height as i32);
    // SAFETY: `st` is a stream of `out`, whose AVStream and codecpar (avformat_new_stream
    // allocates both, else add_stream fails) are valid while `out` lives; only plain fields are
    // set, before the header is written, which is when muxers read them.
    unsafe {
        let stream = st.as_mut_ptr();
        let par = (*stream).codecpar;
        (*par).codec_type = AVMediaType::AVMEDIA_TYPE_VIDEO;
        (*par).codec_id = if cover.png {
            AVCodecID::AV_CODEC_ID_PNG
        } else {
            AVCodecID::AV_CODEC_ID_MJPEG
        };
        (*par).codec_tag = 0;
        (*par).width = width;
        (*par).height = height;
        (*stream).disposition = AV_DISPOSITION_ATTACHED_PIC;
    }
    st.set_time_base(COVER_TB);
    Ok(st.index())
}

/// Writes the cover's one packet to stream `index`; call it right after the header.
pub(super) fn write_cover(
    out: &mut format::context::Output,
    output: &Path,
    index: usize,
    cover: &Cover,
) -> Result<(), MediaError> {
    let mut packet = Packet::copy(&cover.bytes);
    packet.set_stream(index);
    packet.set_pts(Some(0));
    packet.set_dts(Some(0));
    packet.set_flags(ffmpeg_next::packet::Flags::KEY);
    ff(output, "write cover picture", packet.write_interleaved(out))
}
