//! `ChunkWriter`: one script segment → one Matroska chunk (H.264 + PCM).
//!
//! Input: RGB24 frames (width*height*3 bytes each) and mono f32 PCM in [-1, 1]; optionally a
//! base picture the frames differ from only inside a given rectangle each (the face), so only
//! that rectangle goes through swscale per frame (see `region`), with the same result.
//! Output: a Matroska file with an H.264 yuv420p stream (frame i has pts i, time base
//! 1/fps) and a pcm_s16le mono stream at the voice's sample rate, plus tags that record the
//! settings so `probe_chunk` can validate a chunk found on resume.
//! Invariants: the file appears under its final name only after `finish` succeeded (temp +
//! fsync + rename); encoder settings are the same for every chunk with the same
//! `VideoSettings`, so the H.264 streams concatenate; x264 writes its SPS/PPS as global
//! extradata (no in-band copies), which is what both Matroska and MP4 want.

use std::path::{Path, PathBuf};

use ffmpeg_next::{
    ChannelLayout, Dictionary, Packet, Rational, codec, color, encoder, format, frame,
    software::scaling, util::error::EAGAIN,
};

use super::atomic::PartialFile;
use super::error::{MediaError, ff};
use super::region::{CONTEXT_ROWS, Rect, expand};
use super::{ChunkInfo, VideoSettings, init};

/// Tag names in the Matroska header; `probe` reads them back.
pub(crate) const TAG_VERSION: &str = "talker_chunk";
pub(crate) const TAG_FPS: &str = "talker_fps";
pub(crate) const TAG_SAMPLE_RATE: &str = "talker_sample_rate";
pub(crate) const TAG_CRF: &str = "talker_crf";
pub(crate) const TAG_PRESET: &str = "talker_preset";
/// Bumped when the chunk layout changes, so old checkpoints are discarded, not misread.
pub(crate) const CHUNK_VERSION: &str = "1";

/// PCM frames handed to the encoder hold at most this many samples (bounded packets).
const PCM_BLOCK: usize = 4096;

/// Writes one chunk. Dropping it without `finish` deletes the temp file: no half chunk
/// ever exists under the final name.
///
/// Feed audio and frames roughly in step (as the pipeline produces them): the muxer holds
/// packets of the stream that is ahead until the other catches up, up to 10 s of them.
/// After any error except `FrameSize`, the writer refuses further calls (`Poisoned`);
/// drop it and write the segment again.
pub struct ChunkWriter {
    // Field order is drop order: the muxer closes its file handle before `partial` deletes.
    out: format::context::Output,
    video: encoder::Video,
    audio: encoder::Audio,
    scaler: scaling::Context,
    rgb: frame::Video,
    /// The picture sent to x264; between frames it holds `base` except inside `dirty`.
    yuv: frame::Video,
    /// Set by `set_base`: the chunk's still picture, converted once.
    base: Option<frame::Video>,
    /// Where `yuv` may differ from `base`.
    dirty: Rect,
    /// The scaler and frames for the last rectangle's size (see `region`).
    part: Option<Part>,
    video_tb: Rational,
    video_stream_tb: Rational,
    audio_tb: Rational,
    audio_stream_tb: Rational,
    info: ChunkInfo,
    /// Set when an ffmpeg step failed halfway: the file may miss data, so `finish` refuses.
    failed: bool,
    target: PathBuf,
    partial: PartialFile,
}

/// swscale for one rectangle size: an RGB24 rectangle with its context rows → YUV420P.
struct Part {
    width: u32,
    height: u32,
    scaler: scaling::Context,
    rgb: frame::Video,
    yuv: frame::Video,
}

// SAFETY: the only members that are not `Send` are the swscale contexts (ffmpeg-next does not
// mark them). An SwsContext has no thread affinity; it must just not be used from two threads
// at once, and the writer owns them exclusively behind `&mut self`.
unsafe impl Send for ChunkWriter {}

impl ChunkWriter {
    /// Opens the encoders and writes the Matroska header to a temp file beside `path`.
    pub fn create(
        path: &Path,
        video: &VideoSettings,
        sample_rate: u32,
    ) -> Result<ChunkWriter, MediaError> {
        init()?;
        video.validate()?;
        if !(8000..=192_000).contains(&sample_rate) {
            return Err(MediaError::InvalidSettings(format!(
                "sample rate {sample_rate} must be within 8000..=192000"
            )));
        }
        let partial = PartialFile::new(path)?;
        let mut out = ff(
            path,
            "create chunk file",
            format::output_as(partial.path(), "matroska"),
        )?;
        let global_header = out.format().flags().contains(format::Flags::GLOBAL_HEADER);

        let video_tb = Rational::new(1, video.fps as i32);
        let video_enc = open_x264(path, video, global_header)?;
        let mut st = ff(path, "add video stream", out.add_stream(video_enc.codec()))?;
        st.set_parameters(&video_enc);
        st.set_time_base(video_tb);
        st.set_avg_frame_rate(Rational::new(video.fps as i32, 1));
        st.set_rate(Rational::new(video.fps as i32, 1));

        let audio_tb = Rational::new(1, sample_rate as i32);
        let audio_enc = open_pcm(path, sample_rate, global_header)?;
        let mut st = ff(path, "add audio stream", out.add_stream(audio_enc.codec()))?;
        st.set_parameters(&audio_enc);
        st.set_time_base(audio_tb);

        let mut tags = Dictionary::new();
        tags.set(TAG_VERSION, CHUNK_VERSION);
        tags.set(TAG_FPS, &video.fps.to_string());
        tags.set(TAG_SAMPLE_RATE, &sample_rate.to_string());
        tags.set(TAG_CRF, &video.crf.to_string());
        tags.set(TAG_PRESET, &video.preset);
        out.set_metadata(tags);
        ff(path, "write chunk header", out.write_header())?;
        let video_stream_tb = out.stream(0).map_or(video_tb, |s| s.time_base());
        let audio_stream_tb = out.stream(1).map_or(audio_tb, |s| s.time_base());

        let (w, h) = (video.width, video.height);
        // swscale's default matrix for RGB→YUV is BT.601 limited range; open_x264 tags it so.
        let scaler = rgb_to_yuv(path, w, h)?;
        Ok(ChunkWriter {
            out,
            video: video_enc,
            audio: audio_enc,
            scaler,
            rgb: frame::Video::new(format::Pixel::RGB24, w, h),
            yuv: frame::Video::new(format::Pixel::YUV420P, w, h),
            base: None,
            dirty: Rect::full(w as usize, h as usize),
            part: None,
            video_tb,
            video_stream_tb,
            audio_tb,
            audio_stream_tb,
            info: ChunkInfo {
                frames: 0,
                samples: 0,
                width: w,
                height: h,
                fps: video.fps,
                sample_rate,
                crf: video.crf,
                preset: video.preset.clone(),
            },
            failed: false,
            target: path.to_path_buf(),
            partial,
        })
    }

    /// Encodes one RGB24 frame (rows top to bottom, no padding); its pts is the frame count.
    pub fn write_frame(&mut self, rgb24: &[u8]) -> Result<(), MediaError> {
        self.check_usable()?;
        self.check_size(rgb24)?;
        let result = self.convert_whole(rgb24).and_then(|()| self.encode_frame());
        self.failed |= result.is_err();
        result
    }

    /// Sets the still picture (RGB24, the frame's size) that the frames given to
    /// [`write_changed`](Self::write_changed) differ from; converted here, once.
    pub fn set_base(&mut self, rgb24: &[u8]) -> Result<(), MediaError> {
        self.check_usable()?;
        self.check_size(rgb24)?;
        let (w, h) = (self.info.width, self.info.height);
        let mut base = frame::Video::new(format::Pixel::YUV420P, w, h);
        put_rgb(&mut self.rgb, rgb24, w as usize * 3);
        let result = ff(
            &self.target,
            "convert RGB to YUV",
            self.scaler.run(&self.rgb, &mut base),
        );
        self.failed |= result.is_err();
        result?;
        self.base = Some(base);
        self.dirty = Rect::full(w as usize, h as usize);
        Ok(())
    }

    /// Encodes one RGB24 frame whose pixels outside `changed` are the base's (see
    /// [`set_base`](Self::set_base)): only `changed`, snapped to a grid and with context rows,
    /// goes through swscale, and the picture is the one [`write_frame`](Self::write_frame)
    /// makes of the same bytes. Without a base it is `write_frame`.
    pub fn write_changed(&mut self, rgb24: &[u8], changed: Rect) -> Result<(), MediaError> {
        self.check_usable()?;
        self.check_size(rgb24)?;
        let result = self
            .convert_changed(rgb24, changed)
            .and_then(|()| self.encode_frame());
        self.failed |= result.is_err();
        result
    }

    fn check_size(&self, rgb24: &[u8]) -> Result<(), MediaError> {
        let expected = self.info.width as usize * self.info.height as usize * 3;
        if rgb24.len() != expected {
            return Err(MediaError::FrameSize {
                path: self.target.clone(),
                got: rgb24.len(),
                expected,
            });
        }
        Ok(())
    }

    fn convert_whole(&mut self, rgb24: &[u8]) -> Result<(), MediaError> {
        let (w, h) = (self.info.width as usize, self.info.height as usize);
        put_rgb(&mut self.rgb, rgb24, w * 3);
        ff(
            &self.target,
            "convert RGB to YUV",
            self.scaler.run(&self.rgb, &mut self.yuv),
        )?;
        self.dirty = Rect::full(w, h);
        Ok(())
    }

    /// Brings `yuv` to the frame `rgb24`: the base back over the last frame's rectangle, then
    /// the rectangle around `changed` converted with its context rows and copied in.
    fn convert_changed(&mut self, rgb24: &[u8], changed: Rect) -> Result<(), MediaError> {
        let (w, h) = (self.info.width as usize, self.info.height as usize);
        let Some(base) = &self.base else {
            return self.convert_whole(rgb24);
        };
        copy_block(
            base,
            self.dirty,
            (self.dirty.x0, self.dirty.y0),
            &mut self.yuv,
        );
        let rect = expand(changed, w, h);
        // Context rows above and below, so the rectangle's edge rows see what the whole frame's do.
        let (top, bottom) = (
            rect.y0.saturating_sub(CONTEXT_ROWS),
            (rect.y1 + CONTEXT_ROWS).min(h),
        );
        let (pw, ph) = ((rect.x1 - rect.x0) as u32, (bottom - top) as u32);
        let part = match self.part.take() {
            Some(p) if (p.width, p.height) == (pw, ph) => p,
            _ => Part {
                width: pw,
                height: ph,
                scaler: rgb_to_yuv(&self.target, pw, ph)?,
                rgb: frame::Video::new(format::Pixel::RGB24, pw, ph),
                yuv: frame::Video::new(format::Pixel::YUV420P, pw, ph),
            },
        };
        let part = self.part.insert(part);
        let row = w * 3;
        let cols = rect.x0 * 3..rect.x1 * 3;
        let stride = part.rgb.stride(0);
        let dst = part.rgb.data_mut(0);
        for (i, y) in (top..bottom).enumerate() {
            dst[i * stride..i * stride + cols.len()]
                .copy_from_slice(&rgb24[y * row + cols.start..y * row + cols.end]);
        }
        ff(
            &self.target,
            "convert RGB to YUV",
            part.scaler.run(&part.rgb, &mut part.yuv),
        )?;
        let inner = Rect {
            x0: 0,
            y0: rect.y0 - top,
            x1: rect.x1 - rect.x0,
            y1: rect.y1 - top,
        };
        copy_block(&part.yuv, inner, (rect.x0, rect.y0), &mut self.yuv);
        self.dirty = rect;
        Ok(())
    }

    /// Appends mono samples; values outside [-1, 1] are clipped.
    pub fn write_audio(&mut self, pcm: &[f32]) -> Result<(), MediaError> {
        self.check_usable()?;
        for block in pcm.chunks(PCM_BLOCK) {
            let result = self.encode_pcm(block);
            self.failed |= result.is_err();
            result?;
        }
        Ok(())
    }

    /// Flushes both encoders, finalises the file and moves it to its final name.
    pub fn finish(mut self) -> Result<ChunkInfo, MediaError> {
        self.check_usable()?;
        let path = self.target.clone();
        ff(&path, "flush video encoder", self.video.send_eof())?;
        self.drain_video()?;
        ff(&path, "flush audio encoder", self.audio.send_eof())?;
        self.drain_audio()?;
        ff(&path, "write chunk trailer", self.out.write_trailer())?;
        let ChunkWriter {
            out, info, partial, ..
        } = self;
        drop(out); // closes the file so every byte has reached the kernel before fsync
        partial.commit()?;
        Ok(info)
    }

    fn check_usable(&self) -> Result<(), MediaError> {
        if self.failed {
            return Err(MediaError::Poisoned {
                path: self.target.clone(),
            });
        }
        Ok(())
    }

    fn encode_frame(&mut self) -> Result<(), MediaError> {
        let path = &self.target;
        // Reusing `yuv` is safe: drain_video ran until EAGAIN after the previous send, so
        // libx264 has already copied that picture into its own buffers.
        self.yuv.set_pts(Some(self.info.frames as i64));
        ff(path, "send frame to x264", self.video.send_frame(&self.yuv))?;
        self.info.frames += 1;
        self.drain_video()
    }

    fn encode_pcm(&mut self, block: &[f32]) -> Result<(), MediaError> {
        let mut frame = frame::Audio::new(
            format::Sample::I16(format::sample::Type::Packed),
            block.len(),
            ChannelLayout::MONO,
        );
        frame.set_channels(1);
        frame.set_rate(self.info.sample_rate);
        for (dst, &src) in frame.plane_mut::<i16>(0).iter_mut().zip(block) {
            *dst = pcm_to_i16(src);
        }
        frame.set_pts(Some(self.info.samples as i64));
        ff(
            &self.target,
            "send PCM to encoder",
            self.audio.send_frame(&frame),
        )?;
        self.info.samples += block.len() as u64;
        self.drain_audio()
    }

    fn drain_video(&mut self) -> Result<(), MediaError> {
        let mut packet = Packet::empty();
        while receive(&self.target, &mut self.video, &mut packet)? {
            packet.set_stream(0);
            // libx264 on FFmpeg 5.1 leaves the duration at 0; without it the last frame
            // has no length and the stream reads one frame short.
            packet.set_duration(1);
            packet.rescale_ts(self.video_tb, self.video_stream_tb);
            let result = packet.write_interleaved(&mut self.out);
            self.failed |= result.is_err();
            ff(&self.target, "write video packet", result)?;
        }
        Ok(())
    }

    fn drain_audio(&mut self) -> Result<(), MediaError> {
        let mut packet = Packet::empty();
        while receive(&self.target, &mut self.audio, &mut packet)? {
            packet.set_stream(1);
            packet.rescale_ts(self.audio_tb, self.audio_stream_tb);
            let result = packet.write_interleaved(&mut self.out);
            self.failed |= result.is_err();
            ff(&self.target, "write audio packet", result)?;
        }
        Ok(())
    }
}

/// One `receive_packet` step: `Ok(true)` with a packet, `Ok(false)` when the encoder needs
/// more input or is drained.
pub(crate) fn receive(
    path: &Path,
    encoder: &mut encoder::encoder::Encoder,
    packet: &mut Packet,
) -> Result<bool, MediaError> {
    match encoder.receive_packet(packet) {
        Ok(()) => Ok(true),
        Err(ffmpeg_next::Error::Other { errno: EAGAIN }) | Err(ffmpeg_next::Error::Eof) => {
            Ok(false)
        }
        Err(e) => ff(path, "receive encoded packet", Err(e)),
    }
}

/// swscale RGB24 → YUV420P at the same size; its default matrix is BT.601 limited range, which
/// open_x264 tags.
fn rgb_to_yuv(path: &Path, w: u32, h: u32) -> Result<scaling::Context, MediaError> {
    ff(
        path,
        "create RGB→YUV scaler",
        scaling::Context::get(
            format::Pixel::RGB24,
            w,
            h,
            format::Pixel::YUV420P,
            w,
            h,
            scaling::Flags::BILINEAR,
        ),
    )
}

/// Copies packed RGB24 `src` (rows of `row` bytes) into `dst`.
fn put_rgb(dst: &mut frame::Video, src: &[u8], row: usize) {
    let stride = dst.stride(0);
    let data = dst.data_mut(0);
    for (i, line) in src.chunks_exact(row).enumerate() {
        data[i * stride..i * stride + row].copy_from_slice(line);
    }
}

/// Copies rectangle `from` (even corners) of the YUV420P frame `src` into `dst` with its top left
/// corner at `to` (even), plane by plane.
fn copy_block(src: &frame::Video, from: Rect, to: (usize, usize), dst: &mut frame::Video) {
    for plane in 0..3 {
        let k = if plane == 0 { 1 } else { 2 };
        let (x0, x1, y0, y1) = (from.x0 / k, from.x1 / k, from.y0 / k, from.y1 / k);
        let (tx, ty) = (to.0 / k, to.1 / k);
        let (ss, ds) = (src.stride(plane), dst.stride(plane));
        let s = src.data(plane);
        let d = dst.data_mut(plane);
        for (i, y) in (y0..y1).enumerate() {
            d[(ty + i) * ds + tx..(ty + i) * ds + tx + (x1 - x0)]
                .copy_from_slice(&s[y * ss + x0..y * ss + x1]);
        }
    }
}

/// f32 in [-1, 1] → s16 with clipping (NaN becomes silence).
pub(crate) fn pcm_to_i16(x: f32) -> i16 {
    (x.clamp(-1.0, 1.0) * 32767.0).round() as i16
}

/// libx264 with the settings that must match across chunks.
fn open_x264(
    path: &Path,
    video: &VideoSettings,
    global_header: bool,
) -> Result<encoder::Video, MediaError> {
    let codec = encoder::find_by_name("libx264").ok_or_else(|| MediaError::Ffmpeg {
        path: path.to_path_buf(),
        step: "find libx264 encoder",
        source: ffmpeg_next::Error::EncoderNotFound,
    })?;
    let mut enc = ff(
        path,
        "create video encoder",
        codec::Context::new_with_codec(codec).encoder().video(),
    )?;
    enc.set_width(video.width);
    enc.set_height(video.height);
    enc.set_format(format::Pixel::YUV420P);
    enc.set_time_base(Rational::new(1, video.fps as i32));
    enc.set_frame_rate(Some(Rational::new(video.fps as i32, 1)));
    // Matches swscale's RGB→YUV conversion (BT.601 matrix, limited range) so players do not
    // guess BT.709 for HD sizes; primaries/transfer are sRGB's (BT.709) because the input is
    // an ordinary photo.
    enc.set_colorspace(color::Space::SMPTE170M);
    enc.set_color_range(color::Range::MPEG);
    enc.set_color_primaries(color::Primaries::BT709);
    enc.set_color_transfer_characteristic(color::TransferCharacteristic::BT709);
    enc.set_threading(codec::threading::Config {
        kind: codec::threading::Type::Frame,
        count: video.threads,
        ..Default::default()
    });
    if global_header {
        enc.set_flags(codec::Flags::GLOBAL_HEADER);
    }
    let mut opts = Dictionary::new();
    opts.set("preset", &video.preset);
    opts.set("crf", &video.crf.to_string());
    ff(path, "open libx264", enc.open_with(opts))
}

/// pcm_s16le mono: lossless, so assembly can decode it and encode one seamless AAC track.
fn open_pcm(
    path: &Path,
    sample_rate: u32,
    global_header: bool,
) -> Result<encoder::Audio, MediaError> {
    let codec = encoder::find(codec::Id::PCM_S16LE).ok_or_else(|| MediaError::Ffmpeg {
        path: path.to_path_buf(),
        step: "find pcm_s16le encoder",
        source: ffmpeg_next::Error::EncoderNotFound,
    })?;
    let mut enc = ff(
        path,
        "create audio encoder",
        codec::Context::new_with_codec(codec).encoder().audio(),
    )?;
    enc.set_rate(sample_rate as i32);
    enc.set_format(format::Sample::I16(format::sample::Type::Packed));
    enc.set_channel_layout(ChannelLayout::MONO);
    enc.set_channels(1);
    enc.set_time_base(Rational::new(1, sample_rate as i32));
    if global_header {
        enc.set_flags(codec::Flags::GLOBAL_HEADER);
    }
    ff(path, "open pcm_s16le encoder", enc.open())
}
