//! `talker audio check`: any audio file FFmpeg reads, decoded and measured.
//!
//! Input: a path. Output: its [`Figures`] (first audio stream, every channel, at its own rate).
//! Memory: one decoded frame at a time.

use std::path::Path;

use ffmpeg_next::{ChannelLayout, format, frame, media, software::resampling};

use super::error::{MediaError, ff};
use super::init;
use super::loudness::{Figures, Meter};

const F32: format::Sample = format::Sample::F32(format::sample::Type::Packed);

/// Decodes the first audio stream of `path` and measures it.
pub fn measure_file(path: &Path) -> Result<Figures, MediaError> {
    init()?;
    let bad = |reason: &str| MediaError::BadAudio {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };
    let mut input = ff(path, "open audio file", format::input(path))?;
    let stream = input
        .streams()
        .best(media::Type::Audio)
        .ok_or_else(|| bad("has no audio stream"))?;
    let index = stream.index();
    let context = ff(
        path,
        "read audio parameters",
        ffmpeg_next::codec::Context::from_parameters(stream.parameters()),
    )?;
    let mut decoder = ff(path, "open audio decoder", context.decoder().audio())?;
    let channels = u32::from(decoder.channels());
    let rate = decoder.rate();
    let mut meter = Meter::new(channels, rate)
        .ok_or_else(|| bad("has a channel count or sample rate that cannot be measured"))?;
    let layout = if decoder.channel_layout().is_empty() {
        ChannelLayout::default(i32::from(decoder.channels()))
    } else {
        decoder.channel_layout()
    };
    let mut resampler = ff(
        path,
        "create resampler",
        resampling::Context::get(decoder.format(), layout, rate, F32, layout, rate),
    )?;
    let mut decoded = frame::Audio::empty();
    let mut feed =
        |decoder: &mut ffmpeg_next::decoder::Audio, meter: &mut Meter| -> Result<(), MediaError> {
            while decoder.receive_frame(&mut decoded).is_ok() {
                if decoded.channel_layout().is_empty() {
                    decoded.set_channel_layout(layout);
                }
                let mut packed = frame::Audio::empty();
                ff(
                    path,
                    "convert samples",
                    resampler.run(&decoded, &mut packed),
                )?;
                let n = packed.samples() * channels as usize;
                // Packed f32: all channels interleaved in plane 0 (`plane` would cut it to one
                // channel's length).
                let bytes = &packed.data(0)[..n * 4];
                let samples: Vec<f32> = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                meter.add(&samples);
            }
            Ok(())
        };
    for (s, packet) in input.packets() {
        if s.index() != index {
            continue;
        }
        ff(path, "decode audio", decoder.send_packet(&packet))?;
        feed(&mut decoder, &mut meter)?;
    }
    ff(path, "flush audio decoder", decoder.send_eof())?;
    feed(&mut decoder, &mut meter)?;
    Ok(meter.figures())
}
