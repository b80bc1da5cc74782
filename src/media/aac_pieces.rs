//! An AAC track (an M4B's or M4A's, or a video's through [`super::aac_ahead`]) encoded in pieces on
//! several threads and joined without a seam.
//!
//! Input: s16 mono PCM in order, any number of pushes (as [`super::aac::AacTrack`]). Output: the
//! same packets a single encoder would write in the same order, each piece's from its own encoder.
//!
//! Joins: AAC frames are MDCT blocks of 2048 samples that overlap by 1024, so the decoder's output
//! around a join is the overlap-add of the last frame of one piece and the first of the next. Every
//! piece is encoded from [`PRE_ROLL_FRAMES`] before its start to [`POST_ROLL_FRAMES`] after its end,
//! on the one global grid of 1024-sample frames, and keeps only the packets whose time falls inside
//! it: both frames at a join were then encoded from the same samples with the same look-ahead,
//! their aliasing cancels as it does inside one encoder, and nothing but quantisation noise differs
//! from a serial encode. The first piece keeps the encoder's priming packet (time -1024), which the
//! muxer turns into the edit list, and the last one the encoder's flush: priming and padding are
//! those of a serial encode, so durations, chapters and cues do not move.
//!
//! Order and memory: pieces are cut at fixed sample positions (the output does not depend on
//! timing) and muxed in order as they finish; at most `2 × threads` pieces (about 11 s of audio
//! each) are in flight. MP3 stays on [`super::aac::AacTrack`]: LAME's bit reservoir ties each
//! frame to the bytes of the frames before it, so its pieces cannot be cut and joined.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use ffmpeg_next::{Packet, encoder};

use super::aac::{AacConfig, FLTP, PacketOut, ToRate, TrackCodec, aac_config, mono, open_encoder};
use super::chunk::receive;
use super::error::{MediaError, ff};

/// Frames per piece: about 11 s at 48 kHz, long enough that the rolls cost about 1.4% more encoding.
const PIECE_FRAMES: usize = 512;
/// Frames encoded before a piece and dropped: the psychoacoustic model's history and the window
/// shape of the piece's first frame settle as they would in a serial encode.
const PRE_ROLL_FRAMES: usize = 4;
/// Frames encoded after a piece and dropped: its last frame sees the look-ahead a serial encode
/// gives it (window switching decides a frame's shape from the next one).
const POST_ROLL_FRAMES: usize = 3;

/// One packet of a piece, on the output's sample clock.
pub(super) struct Encoded {
    data: Vec<u8>,
    pub(super) pts: i64,
    dts: i64,
    duration: i64,
    key: bool,
}

impl Encoded {
    /// Writes the packet to `out`.
    pub(super) fn write(&self, out: &mut dyn PacketOut) -> Result<(), MediaError> {
        let mut packet = Packet::copy(&self.data);
        packet.set_pts(Some(self.pts));
        packet.set_dts(Some(self.dts));
        packet.set_duration(self.duration);
        if self.key {
            packet.set_flags(ffmpeg_next::packet::Flags::KEY);
        }
        out.write(&mut packet)
    }
}

type Piece = JoinHandle<Result<Vec<Encoded>, MediaError>>;

/// Where finished pieces go, in order.
pub(super) type Done<'a> = dyn FnMut(Vec<Encoded>) -> Result<(), MediaError> + 'a;

/// The encoding side: PCM in, each piece's packets out in order (to the M4B or M4A in
/// [`PieceTrack`], to assembly in [`super::aac_ahead`]).
pub(super) struct Pieces {
    /// Opened for the stream's parameters; every piece opens one like it.
    template: encoder::Audio,
    codec: TrackCodec,
    global_header: bool,
    to_rate: ToRate,
    frame_size: usize,
    /// Resampled samples, `fifo[0]` being sample `fifo_start` of the output.
    fifo: Vec<f32>,
    fifo_start: usize,
    /// Where the next piece starts: a multiple of the piece length.
    next: usize,
    running: VecDeque<Piece>,
    threads: usize,
    path: PathBuf,
}

impl Pieces {
    /// Opens `codec`'s encoder (for the stream's parameters) and a resampler from `in_rate`;
    /// `threads` pieces are encoded at once.
    pub(super) fn open(
        path: &Path,
        in_rate: u32,
        global_header: bool,
        codec: TrackCodec,
        threads: usize,
    ) -> Result<Pieces, MediaError> {
        let template = open_encoder(path, codec, global_header)?;
        let frame_size = (template.frame_size() as usize).max(1);
        Ok(Pieces {
            template,
            codec,
            global_header,
            to_rate: ToRate::new(path, in_rate, codec.rate)?,
            frame_size,
            fifo: Vec::new(),
            fifo_start: 0,
            next: 0,
            running: VecDeque::new(),
            threads: threads.max(1),
            path: path.to_path_buf(),
        })
    }

    /// Resamples `pcm`, starts every piece whose samples (and post-roll) are now all here, and
    /// hands the pieces finished in order to `done`.
    pub(super) fn push(&mut self, pcm: &[i16], done: &mut Done) -> Result<(), MediaError> {
        self.to_rate.run(pcm, &mut self.fifo)?;
        let piece = PIECE_FRAMES * self.frame_size;
        let post = POST_ROLL_FRAMES * self.frame_size;
        while self.fifo_start + self.fifo.len() >= self.next + piece + post {
            while self.running.len() >= 2 * self.threads {
                self.hand_oldest(done)?;
            }
            self.start(false);
        }
        while self.running.front().is_some_and(JoinHandle::is_finished) {
            self.hand_oldest(done)?;
        }
        Ok(())
    }

    /// Drains the resampler, encodes the rest as the last piece (with the encoder's flush) and
    /// hands every piece still running to `done`, in order.
    pub(super) fn finish(mut self, done: &mut Done) -> Result<(), MediaError> {
        self.to_rate.flush(&mut self.fifo)?;
        self.start(true);
        while !self.running.is_empty() {
            self.hand_oldest(done)?;
        }
        Ok(())
    }

    /// Starts the piece at `next`: to the end of the fifo if `last`, else one piece and its
    /// post-roll; then drops the samples no later piece needs.
    fn start(&mut self, last: bool) {
        let piece = PIECE_FRAMES * self.frame_size;
        let pre = PRE_ROLL_FRAMES * self.frame_size;
        let post = POST_ROLL_FRAMES * self.frame_size;
        let first = self.next.saturating_sub(pre);
        let from = first - self.fifo_start;
        let to = if last {
            self.fifo.len()
        } else {
            self.next + piece + post - self.fifo_start
        };
        let samples = self.fifo[from..to].to_vec();
        let keep = (
            if self.next == 0 {
                i64::MIN
            } else {
                self.next as i64
            },
            if last {
                i64::MAX
            } else {
                (self.next + piece) as i64
            },
        );
        let (path, codec, global_header) = (self.path.clone(), self.codec, self.global_header);
        self.running.push_back(std::thread::spawn(move || {
            encode_piece(&path, codec, global_header, first as i64, &samples, keep)
        }));
        if !last {
            self.next += piece;
            let cut = self.next - pre - self.fifo_start;
            self.fifo.drain(..cut);
            self.fifo_start += cut;
        }
    }

    /// Waits for the oldest piece and hands its packets to `done`.
    fn hand_oldest(&mut self, done: &mut Done) -> Result<(), MediaError> {
        let Some(handle) = self.running.pop_front() else {
            return Ok(());
        };
        let packets = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        done(packets)
    }
}

/// An M4B's or M4A's track: [`Pieces`] written out as they finish.
pub(crate) struct PieceTrack {
    pieces: Pieces,
}

impl PieceTrack {
    /// Opens `codec`'s encoder (for the stream's parameters) and a resampler from `in_rate`;
    /// `threads` pieces are encoded at once.
    pub(crate) fn open(
        path: &Path,
        in_rate: u32,
        global_header: bool,
        codec: TrackCodec,
        threads: usize,
    ) -> Result<PieceTrack, MediaError> {
        Ok(PieceTrack {
            pieces: Pieces::open(path, in_rate, global_header, codec, threads)?,
        })
    }

    /// What an MP4's `esds` says of this track.
    pub(super) fn config(&self) -> AacConfig {
        aac_config(&self.pieces.template, self.pieces.codec)
    }

    /// Resamples `pcm`, starts every piece now complete, and writes the pieces finished in order.
    pub(crate) fn push(&mut self, pcm: &[i16], out: &mut dyn PacketOut) -> Result<(), MediaError> {
        self.pieces
            .push(pcm, &mut |packets| write_all(&packets, out))
    }

    /// Encodes the rest and writes every piece still running, in order.
    pub(crate) fn finish(self, out: &mut dyn PacketOut) -> Result<(), MediaError> {
        self.pieces.finish(&mut |packets| write_all(&packets, out))
    }
}

/// Writes a piece's packets to `out`.
fn write_all(packets: &[Encoded], out: &mut dyn PacketOut) -> Result<(), MediaError> {
    packets.iter().try_for_each(|e| e.write(out))
}

/// Encodes `samples` (output sample `first` onwards) with an encoder of its own and returns the
/// packets whose time is in `keep`, timed on the output's clock.
fn encode_piece(
    path: &Path,
    codec: TrackCodec,
    global_header: bool,
    first: i64,
    samples: &[f32],
    keep: (i64, i64),
) -> Result<Vec<Encoded>, MediaError> {
    let mut encoder = open_encoder(path, codec, global_header)?;
    let frame_size = (encoder.frame_size() as usize).max(1);
    let mut kept = Vec::new();
    let mut packet = Packet::empty();
    let mut collect = |encoder: &mut encoder::Audio, kept: &mut Vec<Encoded>| {
        while receive(path, encoder, &mut packet)? {
            let pts = packet.pts().unwrap_or(0) + first;
            if (keep.0..keep.1).contains(&pts) {
                kept.push(Encoded {
                    data: packet.data().unwrap_or_default().to_vec(),
                    pts,
                    dts: packet.dts().map_or(pts, |d| d + first),
                    duration: packet.duration(),
                    key: packet.is_key(),
                });
            }
        }
        Ok::<(), MediaError>(())
    };
    for (i, block) in samples.chunks(frame_size).enumerate() {
        let mut frame = mono(FLTP, block.len(), codec.rate);
        frame.plane_mut::<f32>(0).copy_from_slice(block);
        frame.set_pts(Some((i * frame_size) as i64));
        ff(
            path,
            "send audio to the encoder",
            encoder.send_frame(&frame),
        )?;
        collect(&mut encoder, &mut kept)?;
    }
    ff(path, "flush aac encoder", encoder.send_eof())?;
    collect(&mut encoder, &mut kept)?;
    Ok(kept)
}
