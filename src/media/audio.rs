//! Audio-only outputs, written as the speech arrives: M4B/M4A (AAC-LC 48 kHz mono in the `ipod`
//! flavour of MP4, with chapters, title and author, written by [`super::mp4_audio`]), MP3 (LAME,
//! CBR, 44.1 kHz mono, ID3 tags and chapters) and WAV (16-bit PCM at the voice's rate). For ACX
//! the AAC track is 44.1 kHz too and the MP3 192 kbps, as ACX asks.
//!
//! Input: title, author and chapters (times in seconds) up front; then s16 mono PCM in order, any
//! number of pushes. Output: the file under its final name,
//! only complete (temp file + rename), the moov atom in front (faststart).
//! Memory: one AAC frame of PCM at a time on one thread; on more, the AAC of an M4B/M4A is
//! encoded in pieces of about 11 s at once ([`super::aac_pieces`]), at most two a thread in
//! flight. A 10-hour book needs no more than a minute's either way. The M4B's index keeps 4
//! bytes a packet: about 0.6 MB an hour.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ffmpeg_next::{Dictionary, Rational, format};

use super::aac::{AAC, AacConfig, AacTrack, Muxed, PacketOut, TrackCodec};
use super::aac_pieces::PieceTrack;
use super::atomic::PartialFile;
use super::cover::{add_cover_stream, write_cover};
use super::error::{MediaError, ff, io};
use super::mp4_audio::Mp4Audio;
use super::subtitles::{MS, to_ms};
use super::{AudioMeta, init, text_tags};

/// The audio-only kinds of output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioFormat {
    /// Audiobook: AAC with chapters, brand `M4B `.
    M4b,
    /// AAC with chapters, brand `M4A `.
    M4a,
    /// 16-bit PCM, mono, at the voice's sample rate.
    Wav,
    /// MP3 (LAME), constant bit rate, 44.1 kHz mono, ID3v2 title, artist, album and chapters.
    Mp3,
}

/// ACX's sample rate.
const ACX_RATE: u32 = 44_100;

impl AudioFormat {
    /// The encoder of a compressed kind; `acx` asks for ACX's 44.1 kHz and 192 kbps.
    fn codec(self, acx: bool) -> Option<TrackCodec> {
        match self {
            AudioFormat::Wav => None,
            AudioFormat::M4b | AudioFormat::M4a if acx => Some(TrackCodec {
                rate: ACX_RATE,
                ..AAC
            }),
            AudioFormat::M4b | AudioFormat::M4a => Some(AAC),
            AudioFormat::Mp3 => Some(TrackCodec {
                name: "libmp3lame",
                rate: ACX_RATE,
                bit_rate: if acx { 192_000 } else { 128_000 },
            }),
        }
    }

    /// The sample rate of the file written from speech at `voice_rate`.
    pub fn output_rate(self, voice_rate: u32, acx: bool) -> u32 {
        self.codec(acx).map_or(voice_rate, |c| c.rate)
    }
}

/// WAV's sizes are 32-bit: about 27 hours of 22.05 kHz mono.
const WAV_MAX_DATA: u64 = u32::MAX as u64 - 36;

enum Sink {
    /// MP3: FFmpeg's muxer, one encoder.
    Mp3 {
        out: format::context::Output,
        aac: Box<AacTrack>,
        /// The stream's index and the time base the muxer chose.
        stream: (usize, Rational),
        /// The encoder's sample clock.
        clock: Rational,
    },
    /// M4B and M4A: talker's own MP4 writer.
    Mp4 {
        mp4: Box<Mp4Audio>,
        track: Box<Track>,
    },
    Wav {
        file: BufWriter<File>,
        rate: u32,
        bytes: u64,
    },
}

/// A streaming writer for one audio-only output.
pub struct AudioWriter {
    sink: Sink,
    partial: PartialFile,
    path: PathBuf,
}

impl AudioWriter {
    /// `threads` above one encodes an M4B's or M4A's AAC in pieces on that many threads.
    pub fn create(
        output: &Path,
        kind: AudioFormat,
        sample_rate: u32,
        meta: &AudioMeta,
        acx: bool,
        threads: usize,
    ) -> Result<AudioWriter, MediaError> {
        let texts = [
            (&meta.title, "title"),
            (&meta.album, "album"),
            (&meta.author, "author"),
        ];
        for (text, what) in texts {
            if text.as_ref().is_some_and(|t| t.contains('\0')) {
                return Err(MediaError::InvalidMeta(format!(
                    "{what} contains a NUL byte"
                )));
            }
        }
        if meta.chapters.iter().any(|c| c.title.contains('\0')) {
            return Err(MediaError::InvalidMeta(
                "a chapter title contains a NUL byte".into(),
            ));
        }
        let partial = PartialFile::new(output)?;
        let sink = match kind {
            AudioFormat::Wav => {
                let file = io(output, "create WAV file", File::create(partial.path()))?;
                let mut file = BufWriter::new(file);
                io(
                    output,
                    "write WAV header",
                    file.write_all(&wav_header(sample_rate, 0)),
                )?;
                Sink::Wav {
                    file,
                    rate: sample_rate,
                    bytes: 0,
                }
            }
            AudioFormat::M4b | AudioFormat::M4a => {
                init()?;
                let codec = kind.codec(acx).unwrap_or(AAC);
                mp4_sink(
                    output,
                    partial.path(),
                    kind == AudioFormat::M4b,
                    (sample_rate, codec),
                    meta,
                    threads,
                )?
            }
            AudioFormat::Mp3 => {
                init()?;
                let codec = kind.codec(acx).unwrap_or(AAC);
                mp3_sink(output, partial.path(), (sample_rate, codec), meta)?
            }
        };
        Ok(AudioWriter {
            sink,
            partial,
            path: output.to_path_buf(),
        })
    }

    pub fn push(&mut self, pcm: &[i16]) -> Result<(), MediaError> {
        match &mut self.sink {
            Sink::Mp3 {
                out,
                aac,
                stream,
                clock,
            } => aac.push(
                pcm,
                &mut Muxed {
                    out,
                    stream: *stream,
                    clock: *clock,
                    path: &self.path,
                },
            ),
            Sink::Mp4 { mp4, track } => track.push(pcm, &mut **mp4),
            Sink::Wav { file, bytes, .. } => {
                *bytes += 2 * pcm.len() as u64;
                if *bytes > WAV_MAX_DATA {
                    return Err(MediaError::InvalidMeta(
                        "WAV files cannot hold more than 4 GiB of audio; write .m4b instead".into(),
                    ));
                }
                let raw: Vec<u8> = pcm.iter().flat_map(|s| s.to_le_bytes()).collect();
                io(&self.path, "write WAV samples", file.write_all(&raw))
            }
        }
    }

    /// Closes the file and renames it onto the output. Returns its size.
    pub fn finish(self) -> Result<u64, MediaError> {
        let path = self.path;
        match self.sink {
            Sink::Mp3 {
                mut out,
                aac,
                stream,
                clock,
            } => {
                (*aac).finish(&mut Muxed {
                    out: &mut out,
                    stream,
                    clock,
                    path: &path,
                })?;
                ff(&path, "write trailer", out.write_trailer())?;
                drop(out);
            }
            Sink::Mp4 { mut mp4, track } => {
                track.finish(&mut *mp4)?;
                (*mp4).finish()?;
            }
            Sink::Wav {
                mut file,
                rate,
                bytes,
            } => {
                let patch = |file: &mut BufWriter<File>| -> std::io::Result<()> {
                    file.seek(SeekFrom::Start(0))?;
                    file.write_all(&wav_header(rate, bytes as u32))?;
                    file.flush()
                };
                io(&path, "finish WAV header", patch(&mut file))?;
                drop(file);
            }
        }
        self.partial.commit()
    }
}

/// An M4B's (`audiobook`) or M4A's writer, its AAC track from one encoder or, on more threads,
/// in pieces.
fn mp4_sink(
    output: &Path,
    temp: &Path,
    audiobook: bool,
    (sample_rate, codec): (u32, TrackCodec),
    meta: &AudioMeta,
    threads: usize,
) -> Result<Sink, MediaError> {
    // Raw AAC packets with the AudioSpecificConfig apart, as an MP4 stores them.
    let global_header = true;
    let track = if threads < 2 {
        Track::Serial(AacTrack::open_codec(
            output,
            sample_rate,
            global_header,
            codec,
        )?)
    } else {
        Track::Pieces(PieceTrack::open(
            output,
            sample_rate,
            global_header,
            codec,
            threads,
        )?)
    };
    let mp4 = Mp4Audio::create(output, temp, audiobook, meta, track.config())?;
    Ok(Sink::Mp4 {
        mp4: Box::new(mp4),
        track: Box::new(track),
    })
}

/// An MP3 through FFmpeg's muxer: ID3v2.4 tags, chapters and cover, and a Xing header.
fn mp3_sink(
    output: &Path,
    temp: &Path,
    (sample_rate, codec): (u32, TrackCodec),
    meta: &AudioMeta,
) -> Result<Sink, MediaError> {
    let mut out = ff(output, "create output file", format::output_as(temp, "mp3"))?;
    let global_header = out.format().flags().contains(format::Flags::GLOBAL_HEADER);
    let aac = AacTrack::open_codec(output, sample_rate, global_header, codec)?;
    aac.add_stream(&mut out)?;
    let cover = meta
        .cover
        .as_ref()
        .map(|c| add_cover_stream(&mut out, output, c).map(|index| (index, c)))
        .transpose()?;
    audiobook_meta(&mut out, output, meta)?;
    let mut options = Dictionary::new();
    // ID3v2.4 (UTF-8 text, chapter frames) and a Xing header with the exact length.
    options.set("id3v2_version", "4");
    options.set("write_xing", "1");
    ff(
        output,
        "write header",
        out.write_header_with(options).map(drop),
    )?;
    if let Some((index, c)) = cover {
        write_cover(&mut out, output, index, c)?;
    }
    let clock = Rational::new(1, codec.rate as i32);
    let tb = out.stream(0).map_or(clock, |s| s.time_base());
    Ok(Sink::Mp3 {
        out,
        aac: Box::new(aac),
        stream: (0, tb),
        clock,
    })
}

/// Gives FFmpeg's output `out` the chapters and tags of `meta`, with the genre of an audiobook.
pub(super) fn audiobook_meta(
    out: &mut format::context::Output,
    output: &Path,
    meta: &AudioMeta,
) -> Result<(), MediaError> {
    for (i, c) in meta.chapters.iter().enumerate() {
        let what = format!("chapter {i}");
        let (start, end) = (to_ms(c.start, &what)?, to_ms(c.end, &what)?);
        ff(
            output,
            "add chapter",
            out.add_chapter(i as i64 + 1, MS, start, end.max(start), &c.title),
        )?;
    }
    let mut tags = text_tags(
        meta.title.as_deref(),
        meta.album.as_deref(),
        meta.author.as_deref(),
        meta.track,
    );
    tags.set("genre", "Audiobook");
    out.set_metadata(tags);
    Ok(())
}

/// The AAC track of an M4B or M4A.
enum Track {
    Serial(AacTrack),
    Pieces(PieceTrack),
}

impl Track {
    fn config(&self) -> AacConfig {
        match self {
            Track::Serial(aac) => aac.config(),
            Track::Pieces(aac) => aac.config(),
        }
    }

    fn push(&mut self, pcm: &[i16], out: &mut dyn PacketOut) -> Result<(), MediaError> {
        match self {
            Track::Serial(aac) => aac.push(pcm, out),
            Track::Pieces(aac) => aac.push(pcm, out),
        }
    }

    fn finish(self, out: &mut dyn PacketOut) -> Result<(), MediaError> {
        match self {
            Track::Serial(aac) => aac.finish(out),
            Track::Pieces(aac) => aac.finish(out),
        }
    }
}

/// The 44-byte header of a mono 16-bit PCM WAV file with `data_bytes` of samples.
fn wav_header(rate: u32, data_bytes: u32) -> [u8; 44] {
    let mut h = [0u8; 44];
    let mut put = |at: usize, b: &[u8]| h[at..at + b.len()].copy_from_slice(b);
    put(0, b"RIFF");
    put(4, &(36 + data_bytes).to_le_bytes());
    put(8, b"WAVEfmt ");
    put(16, &16u32.to_le_bytes());
    put(20, &1u16.to_le_bytes()); // PCM
    put(22, &1u16.to_le_bytes()); // mono
    put(24, &rate.to_le_bytes());
    put(28, &(rate * 2).to_le_bytes());
    put(32, &2u16.to_le_bytes());
    put(34, &16u16.to_le_bytes());
    put(36, b"data");
    put(40, &data_bytes.to_le_bytes());
    h
}
