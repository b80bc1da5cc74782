//! Audio-only outputs, written as the speech arrives: M4B/M4A (AAC-LC 48 kHz mono in the `ipod`
//! flavour of MP4, with chapters, title and author) and WAV (16-bit PCM at the voice's rate).
//!
//! Input: title, author and chapters (times in seconds) up front; then s16 mono PCM in order, any
//! number of pushes. Output: the file under its final name,
//! only complete (temp file + rename), the moov atom in front (faststart).
//! Memory: one AAC frame of PCM at a time; a 10-hour book needs no more than a minute's.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ffmpeg_next::{Dictionary, Rational, format};

use super::aac::{AAC_RATE, AacTrack};
use super::atomic::PartialFile;
use super::error::{MediaError, ff, io};
use super::subtitles::{MS, to_ms};
use super::{Chapter, init};

/// The audio-only kinds of output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioFormat {
    /// Audiobook: AAC with chapters, brand `M4B `.
    M4b,
    /// AAC with chapters, brand `M4A `.
    M4a,
    /// 16-bit PCM, mono, at the voice's sample rate.
    Wav,
}

/// WAV's sizes are 32-bit: about 27 hours of 22.05 kHz mono.
const WAV_MAX_DATA: u64 = u32::MAX as u64 - 36;

enum Sink {
    Mp4 {
        out: format::context::Output,
        aac: Box<AacTrack>,
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

/// Title, author and chapters of an audio-only output (WAV keeps none of them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AudioMeta {
    pub title: Option<String>,
    pub author: Option<String>,
    pub chapters: Vec<Chapter>,
}

impl AudioWriter {
    pub fn create(
        output: &Path,
        kind: AudioFormat,
        sample_rate: u32,
        meta: &AudioMeta,
    ) -> Result<AudioWriter, MediaError> {
        for (text, what) in [(&meta.title, "title"), (&meta.author, "author")] {
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
                mp4_sink(output, partial.path(), kind, sample_rate, meta)?
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
            Sink::Mp4 { out, aac, .. } => aac.push(pcm, out),
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
            Sink::Mp4 { mut out, aac } => {
                (*aac).finish(&mut out)?;
                ff(&path, "write MP4 trailer (faststart)", out.write_trailer())?;
                drop(out);
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

fn mp4_sink(
    output: &Path,
    temp: &Path,
    kind: AudioFormat,
    sample_rate: u32,
    meta: &AudioMeta,
) -> Result<Sink, MediaError> {
    let mut out = ff(
        output,
        "create output file",
        format::output_as(temp, "ipod"),
    )?;
    let global_header = out.format().flags().contains(format::Flags::GLOBAL_HEADER);
    let mut aac = AacTrack::open(output, sample_rate, global_header)?;
    aac.add_stream(&mut out)?;
    for (i, c) in meta.chapters.iter().enumerate() {
        let what = format!("chapter {i}");
        let (start, end) = (to_ms(c.start, &what)?, to_ms(c.end, &what)?);
        ff(
            output,
            "add chapter",
            out.add_chapter(i as i64 + 1, MS, start, end.max(start), &c.title),
        )?;
    }
    let mut tags = Dictionary::new();
    if let Some(t) = &meta.title {
        tags.set("title", t);
        tags.set("album", t);
    }
    if let Some(a) = &meta.author {
        tags.set("artist", a);
        tags.set("album_artist", a);
    }
    if kind == AudioFormat::M4b {
        tags.set("genre", "Audiobook");
    }
    out.set_metadata(tags);
    let mut options = Dictionary::new();
    options.set("movflags", "+faststart");
    options.set(
        "brand",
        if kind == AudioFormat::M4b {
            "M4B "
        } else {
            "M4A "
        },
    );
    ff(
        output,
        "write MP4 header",
        out.write_header_with(options).map(drop),
    )?;
    let tb = out
        .stream(0)
        .map_or(Rational::new(1, AAC_RATE as i32), |s| s.time_base());
    aac.set_stream(0, tb);
    Ok(Sink::Mp4 {
        out,
        aac: Box::new(aac),
    })
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
