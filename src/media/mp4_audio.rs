//! The MP4 of an M4B or M4A, written by talker rather than by FFmpeg's `ipod` muxer, so that a long
//! book's index costs 4 bytes a packet: FFmpeg keeps a 64-byte entry a packet until its trailer,
//! about 10 MB an hour of audio.
//!
//! Input: the title, tags, chapters and cover up front; then the AAC packets of one track in order,
//! timed on its sample clock, the first being the encoder's priming packet at -1024.
//! Output: the layout of FFmpeg's `ipod` muxer with `+faststart`: `ftyp`, then `moov` (the audio
//! track, with an edit list over the priming and the `roll` sample group; the QuickTime chapter
//! text track that the audio track's `tref/chap` names, which Apple's players read; `udta` with
//! the iTunes tags in `ilst` and the Nero chapter list `chpl`, which others read), then `mdat`.
//! Memory: a packet's size (4 bytes) stays until the end, where the `moov` is built in memory
//! (4 bytes a packet again); runs of equal durations and chunks of 1 MiB cost a few bytes each.
//! Writing: the temp file holds the `mdat` payload as it comes, chapter samples first. At the end
//! the payload moves forward once, in place, and `ftyp`, `moov` and the `mdat` header go before
//! it: the one sequential copy that a fast start costs in FFmpeg too.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ffmpeg_next::Packet;

use super::AudioMeta;
use super::aac::{AacConfig, PacketOut};
use super::error::{MediaError, io};
use super::subtitles::to_ms;

/// The movie's and the chapter track's clock: milliseconds, as FFmpeg's.
const MOVIE_TIMESCALE: u32 = 1000;
/// Contiguous samples share a chunk up to this size, as in FFmpeg's muxer.
const CHUNK_BYTES: u64 = 1 << 20;
/// What a file may hold: its durations in milliseconds must fit the 32-bit fields of `mvhd`,
/// `tkhd` and `elst` (49 days), and a book this long is better split by chapters anyway.
const MAX_HOURS: u64 = 1000;
/// The payload moves forward in blocks of this size.
const SHIFT_BLOCK: usize = 1 << 20;
/// The identity matrix of `mvhd`, `tkhd` and the chapter track's `text` header.
const MATRIX: [u32; 9] = [0x1_0000, 0, 0, 0, 0x1_0000, 0, 0, 0, 0x4000_0000];
/// ISO 639-2 "und", packed as three 5-bit letters.
const UNDETERMINED: u16 = 0x55c4;

/// A chapter as the file stores it.
#[derive(Debug, Clone)]
struct Mark {
    start_ms: i64,
    end_ms: i64,
    title: String,
}

/// An M4B or M4A being written; packets arrive through [`PacketOut`].
pub(super) struct Mp4Audio {
    file: BufWriter<File>,
    output: PathBuf,
    temp: PathBuf,
    audiobook: bool,
    meta: AudioMeta,
    marks: Vec<Mark>,
    /// The chapter samples' sizes, at the start of the payload.
    mark_sizes: Vec<u32>,
    aac: AacConfig,
    index: Index,
}

/// The audio track's sample table, as it grows.
#[derive(Debug, Default)]
struct Index {
    sizes: Vec<u32>,
    /// Runs of (count, duration) for `stts`.
    durations: Vec<(u32, u32)>,
    /// (payload offset, samples) of each chunk.
    chunks: Vec<(u64, u32)>,
    chunk_bytes: u64,
    /// The first packet's dts: minus the priming.
    first_dts: Option<i64>,
    /// The last packet's dts and duration, whose duration is known only at the next one.
    last: Option<(i64, i64)>,
    audio_bytes: u64,
    /// Where the next byte of payload goes.
    payload: u64,
}

impl Index {
    fn add_duration(&mut self, duration: u32) {
        add_run(&mut self.durations, duration);
    }

    /// Sums of the table: media duration in samples (priming included) and the priming.
    fn span(&self) -> (u64, u64) {
        let total = self
            .durations
            .iter()
            .map(|&(n, d)| u64::from(n) * u64::from(d))
            .sum();
        let priming = self.first_dts.map_or(0, |d| d.min(0).unsigned_abs());
        (total, priming)
    }
}

impl Mp4Audio {
    /// Checks `meta`, creates the temp file `temp` and writes the chapter samples to it.
    /// `audiobook`: an M4B (its brand, genre and media kind), else an M4A.
    pub(super) fn create(
        output: &Path,
        temp: &Path,
        audiobook: bool,
        meta: &AudioMeta,
        aac: AacConfig,
    ) -> Result<Mp4Audio, MediaError> {
        let marks = marks(meta)?;
        let samples: Vec<Vec<u8>> = marks.iter().map(|m| chapter_sample(&m.title)).collect();
        let file = io(
            output,
            "create output file",
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(temp),
        )?;
        let mut mp4 = Mp4Audio {
            file: BufWriter::new(file),
            output: output.to_path_buf(),
            temp: temp.to_path_buf(),
            audiobook,
            meta: meta.clone(),
            marks,
            mark_sizes: samples.iter().map(|s| s.len() as u32).collect(),
            aac,
            index: Index::default(),
        };
        for sample in &samples {
            mp4.append(sample)?;
        }
        Ok(mp4)
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), MediaError> {
        io(
            &self.output,
            "write audio packet",
            self.file.write_all(bytes),
        )?;
        self.index.payload += bytes.len() as u64;
        Ok(())
    }

    /// Writes the index in front of the payload. The temp file is then complete.
    pub(super) fn finish(mut self) -> Result<(), MediaError> {
        if let Some((_, duration)) = self.index.last.take() {
            self.index.add_duration(clock(duration, &self.output)?);
        }
        let payload = self.index.payload;
        let mut file = self.file.into_inner().map_err(|e| MediaError::Io {
            path: self.output.clone(),
            step: "write audio packet",
            source: e.into_error(),
        })?;
        let layout = Layout {
            audiobook: self.audiobook,
            meta: &self.meta,
            marks: &self.marks,
            mark_sizes: &self.mark_sizes,
            aac: &self.aac,
            index: &self.index,
        };
        let head = layout.head(payload);
        io(
            &self.temp,
            "move the audio behind the index",
            shift_forward(&mut file, payload, head.len() as u64, SHIFT_BLOCK),
        )?;
        io(&self.temp, "write the index", {
            file.seek(SeekFrom::Start(0))
                .and_then(|_| file.write_all(&head))
                .and_then(|()| file.flush())
        })
    }
}

impl PacketOut for Mp4Audio {
    fn write(&mut self, packet: &mut Packet) -> Result<(), MediaError> {
        let data = packet.data().unwrap_or_default();
        let dts = packet.dts().or(packet.pts()).unwrap_or(0);
        let index = &mut self.index;
        let first = *index.first_dts.get_or_insert(dts);
        let hours = (dts - first).unsigned_abs() / u64::from(self.aac.rate) / 3600;
        if hours >= MAX_HOURS {
            return Err(MediaError::InvalidMeta(format!(
                "{}: an M4B or M4A holds at most {MAX_HOURS} hours; split the book (--split chapters)",
                self.output.display()
            )));
        }
        if let Some((last, _)) = index.last {
            let step = dts - last;
            if step <= 0 {
                return Err(MediaError::InvalidMeta(format!(
                    "{}: audio packet at {dts} does not follow the one at {last}",
                    self.output.display()
                )));
            }
            index.add_duration(clock(step, &self.output)?);
        }
        index.last = Some((dts, packet.duration()));
        let size = data.len() as u64;
        match index.chunks.last_mut() {
            Some((_, samples)) if index.chunk_bytes + size < CHUNK_BYTES => {
                *samples += 1;
                index.chunk_bytes += size;
            }
            _ => {
                index.chunks.push((index.payload, 1));
                index.chunk_bytes = size;
            }
        }
        index.sizes.push(data.len() as u32);
        index.audio_bytes += size;
        self.append(data)
    }
}

/// One more sample of `duration` in `stts`'s runs of (count, duration).
fn add_run(runs: &mut Vec<(u32, u32)>, duration: u32) {
    match runs.last_mut() {
        Some((count, d)) if *d == duration => *count += 1,
        _ => runs.push((1, duration)),
    }
}

/// A duration on a track's clock, as the 32-bit `stts` field.
fn clock(duration: i64, output: &Path) -> Result<u32, MediaError> {
    u32::try_from(duration.max(0)).map_err(|_| {
        MediaError::InvalidMeta(format!(
            "{}: an audio packet lasts {duration} samples",
            output.display()
        ))
    })
}

/// `meta`'s chapters in milliseconds, checked to be in order.
fn marks(meta: &AudioMeta) -> Result<Vec<Mark>, MediaError> {
    let mut marks: Vec<Mark> = Vec::with_capacity(meta.chapters.len());
    for (i, c) in meta.chapters.iter().enumerate() {
        let what = format!("chapter {i}");
        let (start_ms, end_ms) = (to_ms(c.start, &what)?, to_ms(c.end, &what)?);
        if marks.last().is_some_and(|m| m.start_ms > start_ms) {
            return Err(MediaError::InvalidMeta(format!(
                "{what} ({:?}) starts before the chapter ahead of it",
                c.title
            )));
        }
        marks.push(Mark {
            start_ms,
            end_ms: end_ms.max(start_ms),
            title: c.title.clone(),
        });
    }
    Ok(marks)
}

/// A chapter track's sample: the title's length, the title, and the `encd` box saying UTF-8.
fn chapter_sample(title: &str) -> Vec<u8> {
    let title = clip(title, usize::from(u16::MAX));
    let mut sample = Vec::with_capacity(title.len() + 14);
    sample.extend_from_slice(&(title.len() as u16).to_be_bytes());
    sample.extend_from_slice(title.as_bytes());
    sample.extend_from_slice(&[0, 0, 0, 12, b'e', b'n', b'c', b'd', 0, 0, 1, 0]);
    sample
}

/// The longest start of `text` of at most `max` bytes that ends on a character.
fn clip(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Moves the first `len` bytes of `file` forward by `by`, from the end backwards, so that no
/// byte is overwritten before it has been read.
fn shift_forward(file: &mut File, len: u64, by: u64, block: usize) -> std::io::Result<()> {
    let mut buf = vec![0u8; block];
    let mut end = len;
    while end > 0 {
        let n = end.min(block as u64) as usize;
        let start = end - n as u64;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf[..n])?;
        file.seek(SeekFrom::Start(start + by))?;
        file.write_all(&buf[..n])?;
        end = start;
    }
    Ok(())
}

/// Everything the header is made of.
struct Layout<'a> {
    audiobook: bool,
    meta: &'a AudioMeta,
    marks: &'a [Mark],
    mark_sizes: &'a [u32],
    aac: &'a AacConfig,
    index: &'a Index,
}

impl Layout<'_> {
    /// `ftyp`, `moov` and the `mdat` header for a payload of `payload` bytes.
    fn head(&self, payload: u64) -> Vec<u8> {
        let mdat_header = if payload + 8 > u64::from(u32::MAX) {
            16
        } else {
            8
        };
        let mut head = self.ftyp();
        // An offset's value changes no size, only whether offsets need 64 bits does.
        let narrow = (head.len() + self.moov(0, false).len() + mdat_header) as u64;
        let wide = narrow + payload > u64::from(u32::MAX);
        let base = if wide {
            (head.len() + self.moov(0, true).len() + mdat_header) as u64
        } else {
            narrow
        };
        head.extend(self.moov(base, wide));
        if mdat_header == 16 {
            head.extend_from_slice(&1u32.to_be_bytes());
            head.extend_from_slice(b"mdat");
            head.extend_from_slice(&(payload + 16).to_be_bytes());
        } else {
            head.extend_from_slice(&(payload as u32 + 8).to_be_bytes());
            head.extend_from_slice(b"mdat");
        }
        head
    }

    fn ftyp(&self) -> Vec<u8> {
        let mut out = Vec::new();
        atom(&mut out, b"ftyp", |b| {
            let brand = if self.audiobook { b"M4B " } else { b"M4A " };
            b.extend_from_slice(brand);
            put32(b, 0x200);
            for brand in [brand, b"isom", b"iso2"] {
                b.extend_from_slice(brand);
            }
        });
        out
    }

    /// The whole `moov`; `base` is the payload's offset in the file, `wide` asks for `co64`.
    fn moov(&self, base: u64, wide: bool) -> Vec<u8> {
        let (media, priming) = self.index.span();
        let rate = u64::from(self.aac.rate);
        let ms = |samples: u64| (samples * 1000).div_ceil(rate.max(1));
        // The track lasts to the next millisecond. Its edit is rounded as FFmpeg's muxer rounds
        // it (the media's end up, the priming's end up), which FFmpeg's demuxer then reads as
        // the last packet's duration: the same file length either way, to the millisecond.
        let audio_ms = ms(media - priming) as u32;
        let edit_ms = (ms(media) - ms(priming)) as u32;
        let marks_ms = self.marks.last().map_or(0, |m| m.end_ms as u32);
        let has_marks = !self.marks.is_empty();
        let mut out = Vec::new();
        atom(&mut out, b"moov", |b| {
            full(b, b"mvhd", 0, 0, |b| {
                put32(b, 0);
                put32(b, 0);
                put32(b, MOVIE_TIMESCALE);
                put32(b, audio_ms.max(marks_ms));
                put32(b, 0x1_0000);
                put16(b, 0x100);
                b.extend_from_slice(&[0; 10]);
                MATRIX.iter().for_each(|&m| put32(b, m));
                b.extend_from_slice(&[0; 24]);
                put32(b, if has_marks { 3 } else { 2 });
            });
            self.audio_trak(b, (base, wide), (audio_ms, edit_ms), (media, priming));
            if has_marks {
                self.chapter_trak(b, base, wide, marks_ms);
            }
            self.udta(b);
        });
        out
    }

    /// `ms`: the track's and its edit's lengths; `span`: its media's, and the priming, in samples.
    fn audio_trak(
        &self,
        b: &mut Vec<u8>,
        (base, wide): (u64, bool),
        (ms, edit_ms): (u32, u32),
        (media, priming): (u64, u64),
    ) {
        atom(b, b"trak", |b| {
            tkhd(b, 3, 1, ms, (1, 0x100));
            if !self.index.sizes.is_empty() {
                atom(b, b"edts", |b| elst(b, &[(edit_ms, priming as i32)]));
            }
            if !self.marks.is_empty() {
                atom(b, b"tref", |b| atom(b, b"chap", |b| put32(b, 2)));
            }
            atom(b, b"mdia", |b| {
                mdhd(b, self.aac.rate, media, UNDETERMINED);
                hdlr(b, b"soun", "SoundHandler");
                atom(b, b"minf", |b| {
                    full(b, b"smhd", 0, 0, |b| put32(b, 0));
                    dinf(b);
                    atom(b, b"stbl", |b| {
                        full(b, b"stsd", 0, 0, |b| {
                            put32(b, 1);
                            self.mp4a(b);
                        });
                        stts(b, &self.index.durations);
                        let runs = self.index.chunks.iter().map(|&(_, n)| n);
                        stsc(b, runs);
                        stsz(b, &self.index.sizes);
                        let offsets = self.index.chunks.iter().map(|&(at, _)| base + at);
                        chunk_offsets(b, wide, offsets);
                        if !self.index.sizes.is_empty() {
                            roll(b, self.index.sizes.len() as u32);
                        }
                    });
                });
            });
        });
    }

    /// The sample entry: AAC through the MPEG-4 elementary stream descriptor.
    fn mp4a(&self, b: &mut Vec<u8>) {
        let (media, _) = self.index.span();
        let rate = u64::from(self.aac.rate);
        // FFmpeg's figures: the mean over the media, at least the encoder's target.
        let mean = (self.index.audio_bytes * 8 * rate)
            .checked_div(media)
            .unwrap_or(0) as u32;
        let peak = mean.max(self.aac.bit_rate);
        atom(b, b"mp4a", |b| {
            b.extend_from_slice(&[0; 6]);
            put16(b, 1);
            b.extend_from_slice(&[0; 8]);
            put16(b, 1);
            put16(b, 16);
            put32(b, 0);
            put32(b, self.aac.rate << 16);
            full(b, b"esds", 0, 0, |b| {
                let asc = &self.aac.extradata;
                let config = descriptor(0x05, asc);
                let mut decoder = vec![0x40, 0x15, 0, 0, 0];
                decoder.extend_from_slice(&peak.to_be_bytes());
                decoder.extend_from_slice(&mean.to_be_bytes());
                decoder.extend(config);
                let mut es = vec![0, 1, 0];
                es.extend(descriptor(0x04, &decoder));
                es.extend(descriptor(0x06, &[2]));
                b.extend(descriptor(0x03, &es));
            });
        });
    }

    /// The QuickTime chapter track, which covers the file from its start as Apple's players expect:
    /// the first chapter's sample takes in any audio before it, as FFmpeg's muxer writes it.
    /// `chpl` keeps every chapter's own start.
    fn chapter_trak(&self, b: &mut Vec<u8>, base: u64, wide: bool, ms: u32) {
        atom(b, b"trak", |b| {
            tkhd(b, 2, 2, ms, (0, 0));
            atom(b, b"edts", |b| elst(b, &[(ms, 0)]));
            atom(b, b"mdia", |b| {
                mdhd(b, MOVIE_TIMESCALE, u64::from(ms), 0);
                hdlr(b, b"text", "SubtitleHandler");
                atom(b, b"minf", |b| {
                    atom(b, b"gmhd", |b| {
                        full(b, b"gmin", 0, 0, |b| {
                            for v in [0x40, 0x8000, 0x8000, 0x8000, 0, 0] {
                                put16(b, v);
                            }
                        });
                        atom(b, b"text", |b| MATRIX.iter().for_each(|&m| put32(b, m)));
                    });
                    dinf(b);
                    atom(b, b"stbl", |b| self.chapter_table(b, base, wide));
                });
            });
        });
    }

    /// The chapter track's samples: one a chapter, lasting to the next one's start.
    fn chapter_table(&self, b: &mut Vec<u8>, base: u64, wide: bool) {
        full(b, b"stsd", 0, 0, |b| {
            put32(b, 1);
            atom(b, b"text", |b| {
                b.extend_from_slice(&[0; 6]);
                put16(b, 1);
                b.extend_from_slice(&TEXT_SAMPLE_ENTRY);
            });
        });
        let mut runs = Vec::new();
        for (i, m) in self.marks.iter().enumerate() {
            let start = if i == 0 { 0 } else { m.start_ms };
            let next = self.marks.get(i + 1).map_or(m.end_ms, |n| n.start_ms);
            add_run(&mut runs, (next - start).max(0) as u32);
        }
        stts(b, &runs);
        stsc(b, std::iter::once(self.mark_sizes.len() as u32));
        stsz(b, self.mark_sizes);
        chunk_offsets(b, wide, std::iter::once(base));
    }

    /// The iTunes tags and the Nero chapter list.
    fn udta(&self, b: &mut Vec<u8>) {
        atom(b, b"udta", |b| {
            full(b, b"meta", 0, 0, |b| {
                full(b, b"hdlr", 0, 0, |b| {
                    put32(b, 0);
                    b.extend_from_slice(b"mdirappl");
                    b.extend_from_slice(&[0; 9]);
                });
                atom(b, b"ilst", |b| self.ilst(b));
            });
            if !self.marks.is_empty() {
                full(b, b"chpl", 1, 0, |b| self.chpl(b));
            }
        });
    }

    fn ilst(&self, b: &mut Vec<u8>) {
        let m = self.meta;
        let texts = [
            (b"\xa9nam", m.title.as_deref()),
            (b"\xa9ART", m.author.as_deref()),
            (b"aART", m.author.as_deref()),
            (b"\xa9alb", m.album.as_deref()),
            (b"\xa9too", Some(ENCODER)),
            (b"\xa9gen", self.audiobook.then_some("Audiobook")),
        ];
        for (kind, text) in texts {
            if let Some(text) = text {
                tag(b, kind, 1, text.as_bytes());
            }
        }
        if self.audiobook {
            tag(b, b"stik", 21, &[STIK_AUDIOBOOK]);
        }
        if let Some(cover) = &m.cover {
            tag(b, b"covr", if cover.png { 14 } else { 13 }, &cover.bytes);
        }
        if let Some((n, count)) = m.track {
            let mut trkn = [0u8; 8];
            trkn[2..4].copy_from_slice(&(n.min(0xffff) as u16).to_be_bytes());
            trkn[4..6].copy_from_slice(&(count.min(0xffff) as u16).to_be_bytes());
            tag(b, b"trkn", 0, &trkn);
        }
    }

    /// At most 255 chapters of 255-byte titles, starts in units of 100 ns.
    fn chpl(&self, b: &mut Vec<u8>) {
        put32(b, 0);
        let listed = &self.marks[..self.marks.len().min(255)];
        b.push(listed.len() as u8);
        for mark in listed {
            b.extend_from_slice(&(mark.start_ms as u64 * 10_000).to_be_bytes());
            let title = clip(&mark.title, 255);
            b.push(title.len() as u8);
            b.extend_from_slice(title.as_bytes());
        }
    }
}

/// The `©too` tag.
const ENCODER: &str = concat!("talker ", env!("CARGO_PKG_VERSION"));
/// iTunes' media kind of an audiobook (`stik`), which Apple's players file under Audiobooks.
const STIK_AUDIOBOOK: u8 = 2;

/// A QuickTime text sample entry after its reserved bytes and data reference: display flags,
/// justification, background colour, default text box, one style record and a one-font table.
/// FFmpeg writes the same for its chapter tracks. A line a record, so the layout shows.
#[rustfmt::skip]
const TEXT_SAMPLE_ENTRY: [u8; 43] = [
    0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0x0d, b'f', b't', b'a', b'b', 0, 1, 0, 1, 0,
];

fn put16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_be_bytes());
}

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_be_bytes());
}

/// Appends a box: its size, its type, then what `body` writes. A `moov` is far under 4 GiB:
/// [`MAX_HOURS`] of packets at 4 bytes each is under 700 MB.
fn atom(out: &mut Vec<u8>, kind: &[u8; 4], body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(kind);
    body(out);
    let size = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
}

/// A full box: version and flags before the body.
fn full(
    out: &mut Vec<u8>,
    kind: &[u8; 4],
    version: u8,
    flags: u32,
    body: impl FnOnce(&mut Vec<u8>),
) {
    atom(out, kind, |b| {
        put32(b, u32::from(version) << 24 | flags);
        body(b);
    });
}

/// An MPEG-4 descriptor with its length in the four-byte form FFmpeg writes.
fn descriptor(tag: u8, body: &[u8]) -> Vec<u8> {
    let n = body.len() as u32;
    let mut out = vec![
        tag,
        0x80 | (n >> 21) as u8 & 0x7f,
        0x80 | (n >> 14) as u8 & 0x7f,
        0x80 | (n >> 7) as u8 & 0x7f,
        n as u8 & 0x7f,
    ];
    out.extend_from_slice(body);
    out
}

/// `flags` 3 is enabled and in the movie, 2 only in the movie (a chapter track is not played).
fn tkhd(b: &mut Vec<u8>, flags: u32, id: u32, ms: u32, (group, volume): (u16, u16)) {
    full(b, b"tkhd", 0, flags, |b| {
        put32(b, 0);
        put32(b, 0);
        put32(b, id);
        put32(b, 0);
        put32(b, ms);
        b.extend_from_slice(&[0; 8]);
        put16(b, 0);
        put16(b, group);
        put16(b, volume);
        put16(b, 0);
        MATRIX.iter().for_each(|&m| put32(b, m));
        put32(b, 0);
        put32(b, 0);
    });
}

/// Edits of (duration in ms, media time; -1 is an empty edit).
fn elst(b: &mut Vec<u8>, edits: &[(u32, i32)]) {
    full(b, b"elst", 0, 0, |b| {
        put32(b, edits.len() as u32);
        for &(ms, at) in edits {
            put32(b, ms);
            b.extend_from_slice(&at.to_be_bytes());
            put32(b, 0x1_0000);
        }
    });
}

/// Version 1 where the duration needs 64 bits: from about 25 hours of 48 kHz audio.
fn mdhd(b: &mut Vec<u8>, timescale: u32, duration: u64, language: u16) {
    let long = duration > u64::from(u32::MAX);
    full(b, b"mdhd", u8::from(long), 0, |b| {
        if long {
            b.extend_from_slice(&[0; 16]);
            put32(b, timescale);
            b.extend_from_slice(&duration.to_be_bytes());
        } else {
            b.extend_from_slice(&[0; 8]);
            put32(b, timescale);
            put32(b, duration as u32);
        }
        put16(b, language);
        put16(b, 0);
    });
}

fn hdlr(b: &mut Vec<u8>, kind: &[u8; 4], name: &str) {
    full(b, b"hdlr", 0, 0, |b| {
        put32(b, 0);
        b.extend_from_slice(kind);
        b.extend_from_slice(&[0; 12]);
        b.extend_from_slice(name.as_bytes());
        b.push(0);
    });
}

/// The data is in this file.
fn dinf(b: &mut Vec<u8>) {
    atom(b, b"dinf", |b| {
        full(b, b"dref", 0, 0, |b| {
            put32(b, 1);
            full(b, b"url ", 0, 1, |_| {});
        });
    });
}

fn stts(b: &mut Vec<u8>, runs: &[(u32, u32)]) {
    full(b, b"stts", 0, 0, |b| {
        put32(b, runs.len() as u32);
        for &(count, duration) in runs {
            put32(b, count);
            put32(b, duration);
        }
    });
}

/// Chunks of `samples` each, written as runs of equal counts.
fn stsc(b: &mut Vec<u8>, samples: impl Iterator<Item = u32>) {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for (i, n) in samples.enumerate() {
        if runs.last().is_none_or(|&(_, last)| last != n) {
            runs.push((i as u32 + 1, n));
        }
    }
    full(b, b"stsc", 0, 0, |b| {
        put32(b, runs.len() as u32);
        for (first, n) in runs {
            put32(b, first);
            put32(b, n);
            put32(b, 1);
        }
    });
}

fn stsz(b: &mut Vec<u8>, sizes: &[u32]) {
    full(b, b"stsz", 0, 0, |b| {
        put32(b, 0);
        put32(b, sizes.len() as u32);
        sizes.iter().for_each(|&s| put32(b, s));
    });
}

/// `stco`, or `co64` where the file passes 4 GiB.
fn chunk_offsets(b: &mut Vec<u8>, wide: bool, offsets: impl ExactSizeIterator<Item = u64>) {
    full(b, if wide { b"co64" } else { b"stco" }, 0, 0, |b| {
        put32(b, offsets.len() as u32);
        for at in offsets {
            if wide {
                b.extend_from_slice(&at.to_be_bytes());
            } else {
                put32(b, at as u32);
            }
        }
    });
}

/// Every AAC sample in the `roll` group of distance -1: it decodes whole only after the one
/// before it, which is how a player seeking into the track knows to start a packet early.
fn roll(b: &mut Vec<u8>, samples: u32) {
    full(b, b"sgpd", 1, 0, |b| {
        b.extend_from_slice(b"roll");
        put32(b, 2);
        put32(b, 1);
        put16(b, 0xffff);
    });
    full(b, b"sbgp", 0, 0, |b| {
        b.extend_from_slice(b"roll");
        put32(b, 1);
        put32(b, samples);
        put32(b, 1);
    });
}

/// An `ilst` item holding one `data` box of type `kind` (1 UTF-8, 13 JPEG, 14 PNG, 21 integer).
fn tag(b: &mut Vec<u8>, name: &[u8; 4], kind: u32, value: &[u8]) {
    atom(b, name, |b| {
        atom(b, b"data", |b| {
            put32(b, kind);
            put32(b, 0);
            b.extend_from_slice(value);
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_moves_forward_whole_across_many_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..10_007u32).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        shift_forward(&mut file, data.len() as u64, 333, 1_000).unwrap();
        drop(file);
        let moved = std::fs::read(&path).unwrap();
        assert_eq!(moved.len(), data.len() + 333);
        assert_eq!(&moved[333..], &data[..]);
    }

    #[test]
    fn a_long_track_gets_a_64_bit_media_duration() {
        let (mut short, mut long) = (Vec::new(), Vec::new());
        mdhd(&mut short, 48_000, u64::from(u32::MAX), UNDETERMINED);
        mdhd(&mut long, 48_000, u64::from(u32::MAX) + 1, UNDETERMINED);
        assert_eq!((short.len(), short[8]), (32, 0));
        assert_eq!((long.len(), long[8]), (44, 1));
        assert_eq!(&long[32..40], &(u64::from(u32::MAX) + 1).to_be_bytes());
    }

    #[test]
    fn titles_are_clipped_on_a_character() {
        assert_eq!(clip("ab\u{e9}cd", 3), "ab");
        assert_eq!(clip("ab\u{e9}cd", 4), "ab\u{e9}");
        assert_eq!(clip("abc", 255), "abc");
        let long = "\u{e9}".repeat(40_000);
        let sample = chapter_sample(&long);
        let n = usize::from(u16::from_be_bytes([sample[0], sample[1]]));
        assert_eq!(n, 65_534);
        assert_eq!(sample.len(), 2 + n + 12);
    }

    #[test]
    fn chapters_out_of_order_are_refused_before_any_file_is_made() {
        let chapter = |title: &str, start: f64| super::super::Chapter {
            title: title.into(),
            start,
            end: start + 1.0,
        };
        let meta = AudioMeta {
            chapters: vec![chapter("One", 5.0), chapter("Two", 2.0)],
            ..AudioMeta::default()
        };
        let err = marks(&meta).unwrap_err();
        assert!(err.to_string().contains("chapter 1"), "{err}");
        assert!(err.to_string().contains("starts before"), "{err}");
    }

    /// A writer of an M4A in `dir`, and a packet of `size` bytes at `dts`.
    fn writer(dir: &Path) -> Mp4Audio {
        let (out, temp) = (dir.join("a.m4a"), dir.join(".a.m4a.partial"));
        let aac = AacConfig {
            rate: 48_000,
            bit_rate: 96_000,
            extradata: vec![0x11, 0x90],
        };
        Mp4Audio::create(&out, &temp, false, &AudioMeta::default(), aac).unwrap()
    }

    fn packet(dts: i64) -> Packet {
        let mut p = Packet::copy(&[1, 2, 3]);
        p.set_dts(Some(dts));
        p.set_pts(Some(dts));
        p.set_duration(1024);
        p
    }

    #[test]
    fn packets_out_of_order_too_far_apart_or_past_1000_hours_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let refused = |dts: [i64; 2], says: &str| {
            let mut w = writer(dir.path());
            w.write(&mut packet(dts[0])).unwrap();
            let err = w.write(&mut packet(dts[1])).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        };
        refused([0, 0], "does not follow the one at 0");
        refused([5_000, 1_024], "does not follow");
        refused([0, 1 << 32], "lasts 4294967296 samples");
        let thousand_hours = 48_000 * 3_600 * 1_000;
        refused([0, thousand_hours], "at most 1000 hours; split the book");
        let mut w = writer(dir.path());
        w.write(&mut packet(-1024)).unwrap();
        w.write(&mut packet(0)).unwrap();
        w.finish().unwrap();
        let file = std::fs::read(dir.path().join(".a.m4a.partial")).unwrap();
        assert_eq!(&file[4..8], b"ftyp");
        assert_eq!(&file[file.len() - 14..file.len() - 6], b"\0\0\0\x0emdat");
    }

    #[test]
    fn a_file_past_4_gib_points_at_its_chunks_with_64_bits() {
        let index = Index {
            sizes: vec![100, 100],
            durations: vec![(2, 1024)],
            chunks: vec![(0, 2)],
            first_dts: Some(-1024),
            audio_bytes: 200,
            payload: 200,
            ..Index::default()
        };
        let (meta, aac) = (
            AudioMeta::default(),
            AacConfig {
                rate: 48_000,
                bit_rate: 96_000,
                extradata: vec![0x11, 0x90],
            },
        );
        let layout = Layout {
            audiobook: true,
            meta: &meta,
            marks: &[],
            mark_sizes: &[],
            aac: &aac,
            index: &index,
        };
        let find = |head: &[u8], kind: &[u8]| head.windows(4).position(|w| w == kind);
        let small = layout.head(200);
        assert!(find(&small, b"stco").is_some() && find(&small, b"co64").is_none());
        let big = u64::from(u32::MAX);
        let head = layout.head(big);
        let at = find(&head, b"co64").expect("co64") + 12;
        let offset = u64::from_be_bytes(head[at..at + 8].try_into().unwrap());
        assert_eq!(
            offset,
            head.len() as u64,
            "the chunk starts right after the header"
        );
        assert_eq!(&head[head.len() - 12..head.len() - 8], b"mdat");
        let size = u64::from_be_bytes(head[head.len() - 8..].try_into().unwrap());
        assert_eq!(size, big + 16);
    }
}
