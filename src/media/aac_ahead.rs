//! A video's AAC track encoded ahead of assembly, so that assembly has little audio left to do.
//!
//! Input: the chunk files of one MP4, handed over in output order as the render finishes them
//! ([`AudioAhead::add`]). A thread of its own reads each one's PCM back from the file and encodes
//! it in pieces on several threads ([`super::aac_pieces`]: the same seamless joins, priming and
//! padding as an M4B's), while later chunks still render. Output: the packets, which assembly
//! interleaves with the video it copies; the track is that of [`super::aac::AacTrack`] over the
//! same PCM but for each encoder's quantisation noise, and does not depend on timing or on the
//! number of threads.
//!
//! Memory: at most [`QUEUED`] finished pieces (about 11 s and 130 kB each) and chunk records wait
//! for assembly to take them; the encoding waits beyond that.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use ffmpeg_next::{Rational, format};

use super::aac::{AAC, Muxed, add_stream, open_encoder};
use super::aac_pieces::{Encoded, Pieces};
use super::error::MediaError;
use super::probe::{FileId, open_chunk, pcm_stream, read_packet};

/// Pieces and chunk records the encoding may have finished before assembly takes them.
const QUEUED: usize = 256;
/// The mp4 muxer asks its encoders for global headers (AVFMT_GLOBALHEADER).
const MP4_GLOBAL_HEADER: bool = true;

/// What the encoding thread reports, in order.
enum Report {
    /// It opened the next chunk handed over: this file.
    Read(FileId),
    Piece(Vec<Encoded>),
}

/// One MP4's audio track being encoded from its chunks.
pub struct AudioAhead {
    output: PathBuf,
    threads: usize,
    /// Chunk paths handed over, in output order.
    added: Vec<PathBuf>,
    /// `None` once every chunk is handed over.
    paths: Option<Sender<PathBuf>>,
    reports: Receiver<Report>,
    job: Option<JoinHandle<Result<(), MediaError>>>,
    /// The files read, from the reports received and not yet checked.
    reads: VecDeque<FileId>,
    /// Packets received and not yet written.
    pending: VecDeque<Encoded>,
    stream: (usize, Rational),
}

impl AudioAhead {
    /// Starts the track of `output`, encoding `threads` pieces at once.
    pub fn start(output: &Path, threads: usize) -> AudioAhead {
        let (paths, to_read) = unbounded();
        let (report, reports) = bounded(QUEUED);
        let path = output.to_path_buf();
        let job = std::thread::Builder::new()
            .name("aac-ahead".into())
            .spawn(move || encode_chunks(&path, threads, &to_read, &report))
            .expect("spawn the audio encoding thread");
        AudioAhead {
            output: output.to_path_buf(),
            threads,
            added: Vec::new(),
            paths: Some(paths),
            reports,
            job: Some(job),
            reads: VecDeque::new(),
            pending: VecDeque::new(),
            stream: (1, Rational::new(1, AAC.rate as i32)),
        }
    }

    /// Pieces it encodes at once.
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Hands over the output's next chunk, finished under its final name.
    pub fn add(&mut self, chunk: &Path) {
        if let Some(paths) = &self.paths {
            // Fails only when the encoding stopped on an error, which assembly reports.
            let _ = paths.send(chunk.to_path_buf());
        }
        self.added.push(chunk.to_path_buf());
    }

    /// This track with every one of `chunks` handed over: the rest of them when it was handed
    /// the first ones, else a new track of them all (what it was handed is not this output's).
    pub(crate) fn complete(self, chunks: &[PathBuf]) -> AudioAhead {
        let ours = self.paths.is_some() && chunks.starts_with(&self.added);
        let mut track = if ours {
            self
        } else {
            AudioAhead::start(&self.output, self.threads)
        };
        for chunk in &chunks[track.added.len()..] {
            track.add(chunk);
        }
        track.paths = None;
        track
    }

    /// Adds the output's stream for the track, described by an encoder opened alike.
    pub(crate) fn add_stream(&self, out: &mut format::context::Output) -> Result<(), MediaError> {
        let global_header = out.format().flags().contains(format::Flags::GLOBAL_HEADER);
        let template = open_encoder(&self.output, AAC, global_header)?;
        add_stream(&self.output, &template, AAC.rate, out)
    }

    /// Where packets go; the time base is the one the muxer chose in `write_header`.
    pub(crate) fn set_stream(&mut self, index: usize, time_base: Rational) {
        self.stream = (index, time_base);
    }

    /// The file the encoding read as the next chunk (`None` if it read no more), to check that
    /// the audio comes from the very file whose video is copied.
    pub(crate) fn next_read(&mut self) -> Result<Option<FileId>, MediaError> {
        self.wait_read()?;
        Ok(self.reads.pop_front())
    }

    /// Waits until the encoding has opened the next chunk handed over, or has ended.
    pub(crate) fn wait_read(&mut self) -> Result<(), MediaError> {
        while self.reads.is_empty() && self.receive()? {}
        Ok(())
    }

    /// Writes the packets that start at or before `until` (a time on its time base), or all that
    /// are left without it.
    pub(crate) fn write_until(
        &mut self,
        until: Option<(i64, Rational)>,
        out: &mut format::context::Output,
    ) -> Result<(), MediaError> {
        let clock = Rational::new(1, AAC.rate as i32);
        let due = |pts: i64| {
            until.is_none_or(|(t, tb)| {
                i128::from(pts) * i128::from(tb.denominator())
                    <= i128::from(t) * i128::from(tb.numerator()) * i128::from(AAC.rate)
            })
        };
        loop {
            let Some(e) = self.pending.front() else {
                if self.receive()? {
                    continue;
                }
                return Ok(());
            };
            if !due(e.pts) {
                return Ok(());
            }
            e.write(&mut Muxed {
                out,
                stream: self.stream,
                clock,
                path: &self.output,
            })?;
            self.pending.pop_front();
        }
    }

    /// Takes the next report; `false` at the end of the track. The encoding's error, if it
    /// stopped on one, is returned here.
    fn receive(&mut self) -> Result<bool, MediaError> {
        match self.reports.recv() {
            Ok(Report::Read(id)) => self.reads.push_back(id),
            Ok(Report::Piece(packets)) => self.pending.extend(packets),
            Err(_) => {
                if let Some(job) = self.job.take() {
                    job.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
                }
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The encoding thread: each chunk handed over read back and pushed through one [`Pieces`]
/// (opened for the first chunk's rate; assembly refuses chunks whose rates differ).
fn encode_chunks(
    output: &Path,
    threads: usize,
    paths: &Receiver<PathBuf>,
    report: &Sender<Report>,
) -> Result<(), MediaError> {
    // A failed send: assembly stopped, or never came; nobody reads on.
    let mut done = |packets| {
        report
            .send(Report::Piece(packets))
            .map_err(|_| MediaError::Cancelled)
    };
    let mut pieces: Option<Pieces> = None;
    let mut pcm = Vec::new();
    for path in paths {
        let mut open = open_chunk(&path)?;
        if report.send(Report::Read(open.id)).is_err() {
            return Err(MediaError::Cancelled);
        }
        let (index, rate) = pcm_stream(&path, &open.input)?;
        let track = match &mut pieces {
            Some(track) => track,
            slot @ None => {
                slot.insert(Pieces::open(output, rate, MP4_GLOBAL_HEADER, AAC, threads)?)
            }
        };
        while let Some(packet) = read_packet(&path, &mut open.input)? {
            if packet.stream() == index {
                let data = packet.data().unwrap_or(&[]);
                pcm.clear();
                pcm.extend(
                    data.chunks_exact(2)
                        .map(|b| i16::from_le_bytes([b[0], b[1]])),
                );
                track.push(&pcm, &mut done)?;
            }
        }
    }
    pieces.map_or(Ok(()), |track| track.finish(&mut done))
}
