//! An audio file's AAC (or MP3) track on one thread, fed with PCM one push at a time; the
//! encoder, resampler and stream setup that the tracks encoded in pieces share.
//!
//! Input: s16 mono PCM at the voice's sample rate, in order, across all pushes.
//! Output: AAC-LC mono 48 kHz packets (or what a [`TrackCodec`] asks for) written to the muxer.
//! Invariants: one encoder for the whole file, so pushes join with no priming silence or
//! gap; frames are exactly `frame_size` (1024) samples except the last, with pts counted
//! in samples; leftovers wait in a FIFO until the next push.
//!
//! Why 48 kHz: AAC at 22.05 kHz is legal, but some hardware decoders, TVs and upload
//! pipelines handle only 44.1/48 kHz well; resampling costs little next to the video.

use std::path::{Path, PathBuf};

use ffmpeg_next::{
    ChannelLayout, Packet, Rational, codec, encoder, format, frame, software::resampling,
};

use super::chunk::receive;
use super::error::{MediaError, ff};

/// Output sample rate of the AAC track.
pub(crate) const AAC_RATE: u32 = 48_000;
/// Plenty for speech in mono at 48 kHz with ffmpeg's native encoder.
const AAC_BIT_RATE: usize = 96_000;

/// Which encoder a track uses, at which rate and constant bit rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TrackCodec {
    /// An FFmpeg encoder that takes planar f32 mono.
    pub(crate) name: &'static str,
    pub(crate) rate: u32,
    pub(crate) bit_rate: usize,
}

/// The video's and the M4B's codec.
pub(crate) const AAC: TrackCodec = TrackCodec {
    name: "aac",
    rate: AAC_RATE,
    bit_rate: AAC_BIT_RATE,
};

pub(crate) struct AacTrack {
    encoder: encoder::Audio,
    to_rate: ToRate,
    fifo: Vec<f32>,
    frame_size: usize,
    next_pts: i64,
    codec: TrackCodec,
    path: PathBuf,
}

/// What an MP4's `esds` says of an AAC track.
#[derive(Debug, Clone)]
pub(super) struct AacConfig {
    pub(super) rate: u32,
    pub(super) bit_rate: u32,
    /// The encoder's AudioSpecificConfig.
    pub(super) extradata: Vec<u8>,
}

/// Where a track's packets go, timed on its sample clock (1/rate): FFmpeg's muxer for an MP3 or
/// a video ([`Muxed`]), talker's own writer for an M4B or M4A ([`super::mp4_audio`]).
pub(super) trait PacketOut {
    fn write(&mut self, packet: &mut Packet) -> Result<(), MediaError>;
}

/// Stream `stream` (index, time base chosen by the muxer) of an FFmpeg output.
pub(super) struct Muxed<'a> {
    pub(super) out: &'a mut format::context::Output,
    pub(super) stream: (usize, Rational),
    /// The track's sample clock.
    pub(super) clock: Rational,
    pub(super) path: &'a Path,
}

impl PacketOut for Muxed<'_> {
    fn write(&mut self, packet: &mut Packet) -> Result<(), MediaError> {
        packet.set_stream(self.stream.0);
        packet.rescale_ts(self.clock, self.stream.1);
        ff(
            self.path,
            "write audio packet",
            packet.write_interleaved(self.out),
        )
    }
}

/// What an MP4's `esds` says of a track that `encoder` (opened for `codec`) encodes: its
/// AudioSpecificConfig is the encoder's extradata.
pub(super) fn aac_config(encoder: &encoder::Audio, codec: TrackCodec) -> AacConfig {
    // SAFETY: an opened encoder's context is valid while `encoder` lives; FFmpeg sets
    // `extradata` to a buffer of `extradata_size` bytes, or leaves it null and the size 0.
    let extradata = unsafe {
        let ctx = encoder.as_ptr();
        let (data, size) = ((*ctx).extradata, (*ctx).extradata_size);
        if data.is_null() || size <= 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(data, size as usize).to_vec()
        }
    };
    AacConfig {
        rate: codec.rate,
        bit_rate: codec.bit_rate as u32,
        extradata,
    }
}

pub(super) fn mono(format: format::Sample, samples: usize, rate: u32) -> frame::Audio {
    let mut frame = frame::Audio::new(format, samples, ChannelLayout::MONO);
    frame.set_channels(1);
    frame.set_rate(rate);
    frame
}

const S16: format::Sample = format::Sample::I16(format::sample::Type::Packed);
pub(super) const FLTP: format::Sample = format::Sample::F32(format::sample::Type::Planar);

/// Adds `out`'s stream for a track encoded by `encoder` (or one opened alike).
pub(super) fn add_stream(
    path: &Path,
    encoder: &encoder::Audio,
    rate: u32,
    out: &mut format::context::Output,
) -> Result<(), MediaError> {
    let mut st = ff(path, "add audio stream", out.add_stream(encoder.codec()))?;
    st.set_parameters(encoder);
    st.set_time_base(Rational::new(1, rate as i32));
    Ok(())
}

/// Opens `spec`'s encoder for planar f32 mono at its rate and bit rate.
pub(super) fn open_encoder(
    path: &Path,
    spec: TrackCodec,
    global_header: bool,
) -> Result<encoder::Audio, MediaError> {
    let codec = encoder::find_by_name(spec.name).ok_or_else(|| MediaError::Ffmpeg {
        path: path.to_path_buf(),
        step: "find audio encoder",
        source: ffmpeg_next::Error::EncoderNotFound,
    })?;
    let mut enc = ff(
        path,
        "create aac encoder",
        codec::Context::new_with_codec(codec).encoder().audio(),
    )?;
    enc.set_rate(spec.rate as i32);
    enc.set_format(FLTP);
    enc.set_channel_layout(ChannelLayout::MONO);
    enc.set_channels(1);
    enc.set_bit_rate(spec.bit_rate);
    enc.set_time_base(Rational::new(1, spec.rate as i32));
    if global_header {
        enc.set_flags(codec::Flags::GLOBAL_HEADER);
    }
    // The default "twoloop" coder made AAC most of the assembly time; "fast" is several times
    // quicker and transparent for speech at this bit rate.
    let mut opts = ffmpeg_next::Dictionary::new();
    if spec.name == "aac" {
        opts.set("aac_coder", "fast");
    }
    ff(path, "open audio encoder", enc.open_with(opts))
}

/// The resampler in front of an encoder: s16 at the voice's rate in, f32 at the codec's out.
pub(super) struct ToRate {
    resampler: resampling::Context,
    in_rate: u32,
    rate: u32,
    path: PathBuf,
}

impl ToRate {
    pub(super) fn new(path: &Path, in_rate: u32, rate: u32) -> Result<ToRate, MediaError> {
        let resampler = ff(
            path,
            "create resampler",
            resampling::Context::get(
                S16,
                ChannelLayout::MONO,
                in_rate,
                FLTP,
                ChannelLayout::MONO,
                rate,
            ),
        )?;
        Ok(ToRate {
            resampler,
            in_rate,
            rate,
            path: path.to_path_buf(),
        })
    }

    /// Resamples `pcm` onto the end of `fifo`.
    pub(super) fn run(&mut self, pcm: &[i16], fifo: &mut Vec<f32>) -> Result<(), MediaError> {
        if pcm.is_empty() {
            return Ok(());
        }
        let mut input = mono(S16, pcm.len(), self.in_rate);
        input.plane_mut::<i16>(0).copy_from_slice(pcm);
        let pending = self
            .resampler
            .delay()
            .map_or(0, |d| d.output.max(0) as usize);
        let room = pending + (pcm.len() * self.rate as usize).div_ceil(self.in_rate as usize) + 16;
        let mut resampled = mono(FLTP, room, self.rate);
        ff(
            &self.path,
            "resample audio",
            self.resampler.run(&input, &mut resampled),
        )?;
        fifo.extend_from_slice(&resampled.plane::<f32>(0)[..resampled.samples()]);
        Ok(())
    }

    /// Drains what the resampler still holds onto the end of `fifo`.
    pub(super) fn flush(&mut self, fifo: &mut Vec<f32>) -> Result<(), MediaError> {
        loop {
            // Left unallocated so swresample sizes it to what it still holds.
            let mut tail = frame::Audio::empty();
            tail.set_format(FLTP);
            tail.set_channel_layout(ChannelLayout::MONO);
            tail.set_channels(1);
            tail.set_rate(self.rate);
            ff(
                &self.path,
                "flush resampler",
                self.resampler.flush(&mut tail),
            )?;
            if tail.samples() == 0 {
                return Ok(());
            }
            fifo.extend_from_slice(&tail.plane::<f32>(0)[..tail.samples()]);
        }
    }
}

impl AacTrack {
    /// Opens `codec`'s encoder and a resampler from `in_rate` to its rate.
    pub(crate) fn open_codec(
        path: &Path,
        in_rate: u32,
        global_header: bool,
        codec: TrackCodec,
    ) -> Result<AacTrack, MediaError> {
        let encoder = open_encoder(path, codec, global_header)?;
        let frame_size = encoder.frame_size() as usize;
        Ok(AacTrack {
            encoder,
            to_rate: ToRate::new(path, in_rate, codec.rate)?,
            fifo: Vec::with_capacity(frame_size * 4),
            frame_size: frame_size.max(1),
            next_pts: 0,
            codec,
            path: path.to_path_buf(),
        })
    }

    /// Adds the output's stream for this track, described by the opened encoder's parameters.
    pub(crate) fn add_stream(&self, out: &mut format::context::Output) -> Result<(), MediaError> {
        add_stream(&self.path, &self.encoder, self.codec.rate, out)
    }

    /// What an MP4's `esds` says of this track.
    pub(super) fn config(&self) -> AacConfig {
        aac_config(&self.encoder, self.codec)
    }

    /// Resamples `pcm` and encodes every complete frame now available.
    pub(crate) fn push(&mut self, pcm: &[i16], out: &mut dyn PacketOut) -> Result<(), MediaError> {
        self.to_rate.run(pcm, &mut self.fifo)?;
        self.encode_full_frames(out)
    }

    /// Drains the resampler, encodes the short last frame and flushes the encoder.
    pub(crate) fn finish(mut self, out: &mut dyn PacketOut) -> Result<(), MediaError> {
        self.to_rate.flush(&mut self.fifo)?;
        self.encode_full_frames(out)?;
        if !self.fifo.is_empty() {
            // The encoder accepts one short frame at the end (AV_CODEC_CAP_SMALL_LAST_FRAME).
            self.encode(0, self.fifo.len(), out)?;
        }
        ff(&self.path, "flush aac encoder", self.encoder.send_eof())?;
        self.drain(out)
    }

    fn encode_full_frames(&mut self, out: &mut dyn PacketOut) -> Result<(), MediaError> {
        let mut start = 0;
        while self.fifo.len() - start >= self.frame_size {
            self.encode(start, self.frame_size, out)?;
            start += self.frame_size;
        }
        self.fifo.drain(..start);
        Ok(())
    }

    /// Encodes `fifo[start..start + len]` as one frame.
    fn encode(
        &mut self,
        start: usize,
        len: usize,
        out: &mut dyn PacketOut,
    ) -> Result<(), MediaError> {
        let mut frame = mono(FLTP, len, self.codec.rate);
        frame
            .plane_mut::<f32>(0)
            .copy_from_slice(&self.fifo[start..start + len]);
        frame.set_pts(Some(self.next_pts));
        self.next_pts += len as i64;
        ff(
            &self.path,
            "send audio to the encoder",
            self.encoder.send_frame(&frame),
        )?;
        self.drain(out)
    }

    fn drain(&mut self, out: &mut dyn PacketOut) -> Result<(), MediaError> {
        let mut packet = Packet::empty();
        while receive(&self.path, &mut self.encoder, &mut packet)? {
            out.write(&mut packet)?;
        }
        Ok(())
    }
}
