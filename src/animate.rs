//! Animating one chunk of the video: its speech laid out on the frame grid, its frames drawn and
//! encoded into a chunk file (`media::chunk` writes the file).
//!
//! Input: the chunk's utterances (16-bit PCM + phoneme spans), its silences, and the [`Look`] of the
//! video. Output: a finished chunk file (H.264 + PCM, see `media`) and the sentence spans inside it.
//!
//! One clock: a chunk's sample count is padded with silence to a whole number of frames (a multiple
//! of `sample_rate / gcd(sample_rate, fps)` samples), so every chunk starts exactly on a frame and
//! frame `k` of a chunk shows time `k / fps` of that chunk's audio. Idle motion fades to rest at both
//! ends of a chunk and no blink straddles its end, so chunks join without a jump and a chunk's
//! frames depend on nothing outside it: that is what lets chunks be cached and reused.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::cache::Key;
use crate::error::{Error, Result};
use crate::lipsync::{self, Phone};
use crate::look::Look;
use crate::media::{ChunkInfo, ChunkWriter, Rect};
use crate::plan::Plan;
use crate::progress::{Clock, Stage};
use crate::render::{FramePose, HeadPose, Idle};
use crate::tts::Speech;

/// Idle head motion fades in and out over this long at each end of a chunk.
const HEAD_FADE_S: f64 = 0.8;
/// A blink still running this close to a chunk's end is left out.
const BLINK_GUARD_S: f64 = 0.3;

/// A chunk's audio on the frame grid.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkAudio {
    pub pcm: Vec<i16>,
    pub phones: Vec<Phone>,
    /// Sample span of each sentence inside the chunk, for subtitles.
    pub sentence_spans: Vec<(u64, u64)>,
}

impl ChunkAudio {
    pub fn frames(&self, sample_rate: u32, fps: u32) -> u64 {
        self.pcm.len() as u64 * u64::from(fps) / u64::from(sample_rate)
    }
}

/// Samples in the smallest stretch that is a whole number of frames.
pub fn frame_quantum(sample_rate: u32, fps: u32) -> u64 {
    let (mut a, mut b) = (sample_rate, fps);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    u64::from(sample_rate / a)
}

/// Lays sentences out: lead-in, each sentence's utterances back to back (the voice ends each with
/// its own breath of silence), then the tail, padded to the frame quantum (at least one quantum).
pub fn layout(sentences: &[Vec<&Speech>], lead_in: u64, tail: u64, quantum: u64) -> ChunkAudio {
    let mut pcm = vec![0i16; lead_in as usize];
    let mut phones = Vec::new();
    let mut sentence_spans = Vec::with_capacity(sentences.len());
    for sentence in sentences {
        let start = pcm.len() as u64;
        for speech in sentence {
            let offset = pcm.len() as u64;
            pcm.extend_from_slice(&speech.pcm);
            phones.extend(speech.phones.iter().map(|p| Phone {
                ipa: p.symbol.clone(),
                start: p.start + offset,
                end: p.end + offset,
            }));
        }
        sentence_spans.push((start, pcm.len() as u64));
    }
    let unpadded = pcm.len() as u64 + tail;
    let total = unpadded.div_ceil(quantum).max(1) * quantum;
    pcm.resize(total as usize, 0);
    ChunkAudio {
        pcm,
        phones,
        sentence_spans,
    }
}

/// The pose of frame `k` of a chunk lasting `duration` seconds.
fn frame_pose(
    track: &lipsync::MouthTrack,
    idle: &Idle,
    t: f64,
    duration: f64,
    blink_at_end: bool,
) -> FramePose {
    let (mut blink, head) = idle.pose_at(t);
    if blink_at_end && t > duration - BLINK_GUARD_S {
        blink = 0.0;
    }
    let edge = (t.min(duration - t) / HEAD_FADE_S).clamp(0.0, 1.0);
    let fade = (edge * edge * (3.0 - 2.0 * edge)) as f32;
    FramePose {
        mouth: track.pose_at(t),
        blink,
        head: HeadPose {
            dx: head.dx * fade,
            dy: head.dy * fade,
            roll: head.roll * fade,
        },
    }
}

/// What every chunk of a render is drawn with.
#[derive(Clone, Copy)]
pub struct ChunkContext<'a> {
    pub look: &'a Look,
    /// The speech's sample rate.
    pub sample_rate: u32,
    /// Ends the chunk between frames (the partial file is removed).
    pub stop: &'a AtomicBool,
    /// Collects the time spent drawing and encoding.
    pub clock: &'a Clock,
}

/// Renders and encodes a chunk of segment `segment` to `path` (written under a temporary name,
/// renamed when complete).
///
/// `on_frame` is called after each frame.
pub fn render_chunk(
    cx: &ChunkContext,
    segment: usize,
    audio: &ChunkAudio,
    path: &Path,
    mut on_frame: impl FnMut(),
) -> Result<ChunkInfo> {
    let ChunkContext {
        look,
        sample_rate,
        stop,
        clock,
    } = *cx;
    let fps = look.video.fps;
    let frames = audio.frames(sample_rate, fps);
    let duration = frames as f64 / f64::from(fps);
    let track = lipsync::plan(&audio.phones, sample_rate);
    let idle = Idle::new(look.seed, look.still);
    let blink_at_end = idle.pose_at(duration - 1.0 / f64::from(fps)).0 > 0.0;

    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    }
    let mut writer = ChunkWriter::create(path, &look.video, sample_rate)?;
    // i16 → f32 → i16 is exact through the writer's ×32767 rounding.
    let pcm: Vec<f32> = audio.pcm.iter().map(|&s| f32::from(s) / 32767.0).collect();
    // Frame k carries samples [k·len/frames, (k+1)·len/frames): integer boundaries that cover the
    // chunk exactly even when a frame is a fraction of samples (22050 Hz at 24 fps is 918.75).
    // Writing them with their frame keeps the muxer's interleaving queue short.
    let sample_at = |k: u64| (k * pcm.len() as u64 / frames.max(1)) as usize;
    let mut buf = vec![0u8; look.rig.width() as usize * look.rig.height() as usize * 3];
    let mut last = None;
    // `slides`: the slide's frame, copied once; each frame rewrites only the speaker's box.
    let mut slide = match &look.slides {
        Some(deck) => {
            let base = deck.base(segment)?;
            Some((deck, base.to_vec(), base))
        }
        None => None,
    };
    // The still picture every frame differs from only around the face: converted to YUV once,
    // then each frame only inside the region the rig reports.
    match &slide {
        Some((deck, frame, base)) => {
            let mut still = frame.clone();
            deck.paste(look.rig.base_frame(), base, &mut still);
            writer.set_base(&still)?;
        }
        None => writer.set_base(look.rig.base_frame())?,
    }
    for k in 0..frames {
        if stop.load(Ordering::Relaxed) {
            return Err(Error::Cancelled);
        }
        let t = k as f64 / f64::from(fps);
        let t0 = Instant::now();
        let pose = frame_pose(&track, &idle, t, duration, blink_at_end);
        // After the first frame `buf` differs from the portrait only inside the last region.
        let roi = match last {
            Some(last) => look.rig.render_over(&pose, &mut buf, last),
            None => look.rig.render(&pose, &mut buf),
        };
        last = Some(roi);
        let mut changed = Rect {
            x0: roi.x0,
            y0: roi.y0,
            x1: roi.x1,
            y1: roi.y1,
        };
        let frame = match &mut slide {
            Some((deck, frame, base)) => {
                deck.paste(&buf, base, frame);
                let pip = deck.pip();
                let (dx, dy) = (pip.x as usize, pip.y as usize);
                changed = Rect {
                    x0: changed.x0 + dx,
                    y0: changed.y0 + dy,
                    x1: changed.x1 + dx,
                    y1: changed.y1 + dy,
                };
                &frame[..]
            }
            None => &buf[..],
        };
        let t1 = Instant::now();
        writer.write_audio(&pcm[sample_at(k)..sample_at(k + 1)])?;
        writer.write_changed(frame, changed)?;
        clock.add(Stage::Frames, t1 - t0);
        clock.add(Stage::Encode, t1.elapsed());
        on_frame();
    }
    let t0 = Instant::now();
    let info = writer.finish()?;
    clock.add(Stage::Encode, t0.elapsed());
    Ok(info)
}

/// A chunk's sentences laid out on the frame grid.
pub fn chunk_audio(
    plan: &Plan,
    chunk: usize,
    speeches: &HashMap<Key, Speech>,
    quantum: u64,
) -> ChunkAudio {
    let c = &plan.chunks[chunk];
    let sentences: Vec<Vec<&Speech>> = c
        .sentences
        .clone()
        .map(|s| {
            plan.sentences[s]
                .utterances
                .clone()
                .map(|u| &speeches[&plan.utterances[u].key])
                .collect()
        })
        .collect();
    layout(&sentences, c.lead_in_samples, c.tail_samples, quantum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tts::Phone as TtsPhone;

    fn speech(n: usize) -> Speech {
        Speech {
            sample_rate: 22050,
            pcm: vec![100; n],
            phones: vec![
                TtsPhone {
                    symbol: "^".into(),
                    start: 0,
                    end: n as u64 / 2,
                },
                TtsPhone {
                    symbol: "a".into(),
                    start: n as u64 / 2,
                    end: n as u64,
                },
            ],
        }
    }

    #[test]
    fn quantum_is_one_frame_when_rates_divide() {
        assert_eq!(frame_quantum(22050, 25), 882);
        assert_eq!(frame_quantum(22050, 30), 735);
        assert_eq!(frame_quantum(22050, 24), 3675, "4 frames of 918.75 samples");
        assert_eq!(frame_quantum(16000, 25), 640);
    }

    #[test]
    fn layout_pads_to_whole_frames_and_shifts_phones() {
        let a = speech(1000);
        let b = speech(500);
        let audio = layout(&[vec![&a], vec![&b]], 300, 441, 882);
        assert_eq!(audio.pcm.len() % 882, 0);
        assert!(audio.pcm.len() >= 300 + 1500 + 441);
        assert_eq!(audio.sentence_spans, vec![(300, 1300), (1300, 1800)]);
        assert_eq!(audio.phones[2].start, 1300);
        assert_eq!(audio.phones.last().unwrap().end, 1800);
        assert!(
            audio.pcm[1800..].iter().all(|&s| s == 0),
            "silence after speech"
        );
        assert_eq!(audio.frames(22050, 25), audio.pcm.len() as u64 / 882);
    }

    #[test]
    fn empty_chunk_still_has_a_frame() {
        let audio = layout(&[], 0, 0, 882);
        assert_eq!(audio.pcm.len(), 882);
        assert_eq!(audio.frames(22050, 25), 1);
    }

    #[test]
    fn head_motion_is_at_rest_at_both_ends() {
        let track = lipsync::plan(&[], 22050);
        let idle = Idle::new(3, false);
        for t in [0.0, 10.0] {
            let p = frame_pose(&track, &idle, t, 10.0, false);
            assert_eq!((p.head.dx, p.head.dy, p.head.roll), (0.0, 0.0, 0.0));
        }
        let mid = frame_pose(&track, &idle, 5.0, 10.0, false);
        assert!(mid.head.dx != 0.0 || mid.head.dy != 0.0);
    }

    #[test]
    fn no_blink_runs_into_the_end() {
        let track = lipsync::plan(&[], 22050);
        let idle = Idle::new(1, true);
        let p = frame_pose(&track, &idle, 9.9, 10.0, true);
        assert_eq!(p.blink, 0.0);
    }
}
