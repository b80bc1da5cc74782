//! The render plan: script → sentences → utterances (with phoneme ids and cache keys) → chunks.
//!
//! Everything here follows from the text alone, before any audio exists, so the cache keys of every
//! phrase and every video chunk are known up front: a re-render looks them up and does only what is
//! missing, and a crashed render resumes from the chunks it finished.
//!
//! A chunk is a run of whole sentences of one segment, cut when its phoneme ids pass a budget (about
//! 20–30 s of speech), so that memory stays bounded however long a segment is. The last chunk of a
//! segment carries the segment's pause; the first chunk of the video a short lead-in.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::cache::{ChunkDone, Key, KeyBuilder};
use crate::error::{Error, Result};
use crate::lexicon::{Piece, key_text};
use crate::media::{OutputMeta, Timeline};
use crate::phonemize::Phonemizer;
use crate::progress::{Clock, Stage};
use crate::script::Script;
use crate::text;
use crate::tts::SpeechError;
use crate::tts::voice::{Kept, Scales, VoiceConfig};

/// Sentences longer than this are split at clause punctuation before synthesis. The voice model's
/// memory grows by about 20 MB per second of audio in one call, so this bounds the peak (about
/// 7 s of speech, about 140 MB of activations) whatever the script holds.
const MAX_SENTENCE_CHARS: usize = 110;
/// Most phonemes (word spaces and punctuation included) in one voice-model call. Text is split
/// before normalisation and again after it (numbers grow: "999999999999999" is 15 characters and
/// over 100 spoken), and what espeak-ng returns is cut again at word boundaries, or inside a word
/// that is longer by itself (a hash, 100,000 letters), so no call exceeds the bound above.
const MAX_UTTERANCE_PHONEMES: usize = 120;
/// Phoneme ids per chunk before a new chunk starts (about 12 s of speech).
const CHUNK_ID_BUDGET: usize = 700;
/// The video's first chunk is cut after about one sentence, so frames start while the rest of
/// the speech is still being synthesised.
const FIRST_CHUNK_ID_BUDGET: usize = 160;
/// Silence before the first word of the video.
const LEAD_IN_MS: u64 = 200;

/// What every phrase key depends on besides the phrase itself.
#[derive(Debug, Clone)]
pub struct SpeechIdentity {
    pub voice_hash: [u8; 32],
    pub scales: Scales,
    pub speaker: u32,
    /// Backend and precision, e.g. "onnxruntime-1.32.0/cpu/fp32".
    pub engine: String,
}

/// A voice as the plan uses it: its config (phonemes → ids, sample rate) and what keys its
/// phrases (model, scales, speaker).
#[derive(Debug, Clone, Copy)]
pub struct VoiceUse<'a> {
    pub config: &'a VoiceConfig,
    pub identity: &'a SpeechIdentity,
}

#[derive(Debug, Clone)]
pub struct Utterance {
    pub ids: Vec<i64>,
    pub kept: Vec<Kept>,
    pub key: Key,
    /// Which of the plan's voices speaks it (an index into the voices it was built with).
    pub voice: usize,
}

#[derive(Debug, Clone)]
pub struct Sentence {
    /// The text as the author wrote it, for subtitles.
    pub display: String,
    pub utterances: Range<usize>,
}

#[derive(Debug, Clone)]
pub struct ChunkPlan {
    pub segment: usize,
    pub sentences: Range<usize>,
    pub lead_in_samples: u64,
    pub tail_samples: u64,
    /// Filled in by [`Plan::assign_chunk_keys`] once the look of the video is known.
    pub key: Option<Key>,
}

impl ChunkPlan {
    /// The chunk's key; only a plan whose keys are assigned is rendered.
    pub fn key(&self) -> &Key {
        self.key.as_ref().expect("keys assigned")
    }
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub utterances: Vec<Utterance>,
    pub sentences: Vec<Sentence>,
    pub chunks: Vec<ChunkPlan>,
    /// Chapter titles by segment index.
    pub chapters: Vec<Option<String>>,
    pub sample_rate: u32,
}

/// What turns a sentence into phoneme ids and keys, for the whole plan.
#[derive(Clone, Copy)]
struct Voicing<'a> {
    script: &'a Script,
    voice: &'a VoiceConfig,
    id: &'a SpeechIdentity,
    /// `voice`'s index among the plan's voices.
    index: usize,
    phonemizer: &'a Phonemizer,
    clock: &'a Clock,
    cancel: &'a AtomicBool,
}

fn ms_to_samples(ms: u64, sample_rate: u32) -> u64 {
    ms * u64::from(sample_rate) / 1000
}

impl Plan {
    /// The plan of a script spoken with one voice.
    pub fn build(
        script: &Script,
        voice: &VoiceConfig,
        id: &SpeechIdentity,
        phonemizer: &Phonemizer,
        clock: &Clock,
        cancel: &AtomicBool,
    ) -> Result<Plan> {
        let voices = [VoiceUse {
            config: voice,
            identity: id,
        }];
        Plan::build_voiced(script, &voices, &[], phonemizer, clock, cancel)
    }

    /// The plan of a script whose segment `i` is spoken with `voices[by_segment[i]]` (the first
    /// voice past the end of `by_segment`). Every voice has the first one's sample rate (the
    /// speech engine refuses others).
    pub fn build_voiced(
        script: &Script,
        voices: &[VoiceUse<'_>],
        by_segment: &[usize],
        phonemizer: &Phonemizer,
        clock: &Clock,
        cancel: &AtomicBool,
    ) -> Result<Plan> {
        let sample_rate = voices
            .first()
            .map(|v| v.config.sample_rate)
            .ok_or_else(|| SpeechError::Engine("a plan needs a voice".into()))?;
        let mut plan = Plan {
            utterances: Vec::new(),
            sentences: Vec::new(),
            chunks: Vec::new(),
            chapters: script.segments.iter().map(|s| s.chapter.clone()).collect(),
            sample_rate,
        };
        for (si, segment) in script.segments.iter().enumerate() {
            let index = by_segment.get(si).copied().unwrap_or(0);
            let Some(voice) = voices.get(index) else {
                return Err(SpeechError::Engine(format!(
                    "segments[{si}]: voice {index} of {} was not loaded",
                    voices.len()
                ))
                .into());
            };
            let with = Voicing {
                script,
                voice: voice.config,
                id: voice.identity,
                index,
                phonemizer,
                clock,
                cancel,
            };
            // Each `<break>` ends a run of speech: its chunks end with the pause the tag asks for.
            let spoken = segment.say.as_deref().unwrap_or(&segment.text);
            let runs = text::markup::split(spoken).map_err(|e| {
                Error::Usage(format!("segments[{si}]: the tag {} {}", e.tag, e.message))
            })?;
            let last = runs.len() - 1;
            for (ri, run) in runs.into_iter().enumerate() {
                let first_sentence = plan.sentences.len();
                let t = Instant::now();
                // A segment with its own spoken form is shown whole while its first run is spoken.
                let pairs: Vec<(String, String)> = match &segment.say {
                    Some(_) => {
                        let shown = if ri == 0 {
                            text::markup::plain(&segment.text)
                        } else {
                            String::new()
                        };
                        vec![(shown, text::normalize(&run.text))]
                    }
                    None => text::split_sentences(&run.text, MAX_SENTENCE_CHARS)
                        .into_iter()
                        .map(|raw| {
                            let normalized = text::normalize(&raw);
                            (raw, normalized)
                        })
                        .collect(),
                };
                clock.add(Stage::Text, t.elapsed());
                plan.add_sentences(pairs, &with)?;
                let pause_ms = match run.pause_after_ms {
                    Some(ms) if ri < last => ms,
                    Some(ms) => ms.saturating_add(segment.pause_ms),
                    None => segment.pause_ms,
                };
                plan.cut_chunks(
                    si,
                    first_sentence,
                    ms_to_samples(u64::from(pause_ms), sample_rate),
                );
            }
        }
        if let Some(first) = plan.chunks.first_mut() {
            first.lead_in_samples = ms_to_samples(LEAD_IN_MS, sample_rate);
        }
        Ok(plan)
    }

    /// Phonemizes the `(shown, normalized)` sentences of one run and appends them with their
    /// utterances (a sentence with nothing to say is left out).
    fn add_sentences(&mut self, pairs: Vec<(String, String)>, with: &Voicing<'_>) -> Result<()> {
        let Voicing {
            script,
            voice,
            id,
            index: voice_index,
            phonemizer,
            clock,
            cancel,
        } = *with;
        for (raw, normalized) in pairs.into_iter().filter(|(_, n)| text::is_speakable(n)) {
            if cancel.load(Ordering::Relaxed) {
                return Err(Error::Cancelled);
            }
            let start = self.utterances.len();
            // The lexicon changes only the sentences it matches, and so only their keys.
            let lexicon = |text: &str| match &script.lexicon {
                Some(lexicon) => lexicon.apply(text),
                None => vec![Piece::Text(text.to_owned())],
            };
            let read_as = key_text(&lexicon(&normalized));
            for piece in text::split_sentences(&normalized, MAX_SENTENCE_CHARS) {
                let t = Instant::now();
                let phonemized =
                    phonemizer.phonemize_pieces(&voice.espeak_voice, &lexicon(&piece))?;
                clock.add(Stage::Phonemes, t.elapsed());
                for phonemes in phonemized {
                    let parts = bounded(&phonemes, MAX_UTTERANCE_PHONEMES);
                    for part in parts.into_iter().filter(|p| has_sound(p)) {
                        let (ids, kept) = voice.ids(part);
                        let index = self.utterances.len() - start;
                        let key = phrase_key(&read_as, index, &ids, id);
                        self.utterances.push(Utterance {
                            ids,
                            kept,
                            key,
                            voice: voice_index,
                        });
                    }
                }
            }
            if self.utterances.len() > start {
                self.sentences.push(Sentence {
                    display: raw.trim().to_owned(),
                    utterances: start..self.utterances.len(),
                });
            }
        }
        Ok(())
    }

    /// Groups the segment's sentences `[first, end)` into chunks by the id budget.
    fn cut_chunks(&mut self, segment: usize, first: usize, pause: u64) {
        let end = self.sentences.len();
        let mut start = first;
        let mut ids = 0;
        for s in first..end {
            let n: usize = self.sentences[s]
                .utterances
                .clone()
                .map(|u| self.utterances[u].ids.len())
                .sum();
            let budget = if self.chunks.is_empty() {
                FIRST_CHUNK_ID_BUDGET
            } else {
                CHUNK_ID_BUDGET
            };
            if s > start && ids + n > budget {
                self.chunks.push(ChunkPlan {
                    segment,
                    sentences: start..s,
                    lead_in_samples: 0,
                    tail_samples: 0,
                    key: None,
                });
                start = s;
                ids = 0;
            }
            ids += n;
        }
        // A segment that had nothing speakable after normalisation still keeps its pause.
        self.chunks.push(ChunkPlan {
            segment,
            sentences: start..end,
            lead_in_samples: 0,
            tail_samples: pause,
            key: None,
        });
    }

    /// Puts chunk `c` on `timeline`: the chapter of its segment when it is the segment's first
    /// chunk, one cue per sentence at `spans` (samples inside the chunk), then its `samples`.
    pub fn place_chunk(
        &self,
        timeline: &mut Timeline,
        c: usize,
        spans: &[(u64, u64)],
        samples: u64,
    ) {
        let chunk = &self.chunks[c];
        let first = c == 0 || self.chunks[c - 1].segment != chunk.segment;
        if let Some(title) = self.chapters[chunk.segment].as_deref().filter(|_| first) {
            timeline.chapter(title);
        }
        for (s, &span) in chunk.sentences.clone().zip(spans) {
            // A run after a `<break>` in a segment's `say` is spoken under the segment's one cue.
            let display = &self.sentences[s].display;
            if !display.is_empty() {
                timeline.cue(display, span);
            }
        }
        timeline.advance(samples);
    }

    /// The title, author, chapters and cues of an output of the `chunks`, once every chunk is
    /// `done`: the whole book's, or with `part` (number, count, chapter title) one chapter's
    /// file (`--split chapters`), its times from the file's start.
    pub fn output_meta(
        &self,
        script: &Script,
        done: &[ChunkDone],
        chunks: Range<usize>,
        part: Option<(usize, usize, &str)>,
    ) -> OutputMeta {
        let mut timeline = Timeline::new(self.sample_rate);
        for c in chunks {
            self.place_chunk(&mut timeline, c, &done[c].spans, done[c].samples);
        }
        let (chapters, cues) = timeline.finish();
        OutputMeta {
            title: part.map_or_else(|| script.title.clone(), |p| Some(p.2.to_owned())),
            album: part.and(script.title.clone()),
            author: script.author.clone(),
            track: part.map(|p| (p.0, p.1)),
            chapters,
            cues,
            cover: script.cover.clone(),
        }
    }

    /// Utterance indices of a chunk, in order.
    pub fn chunk_utterances(&self, chunk: &ChunkPlan) -> Range<usize> {
        let s = &self.sentences[chunk.sentences.clone()];
        match (s.first(), s.last()) {
            (Some(a), Some(b)) => a.utterances.start..b.utterances.end,
            _ => 0..0,
        }
    }

    /// Keys every chunk by its speech, its silences and `look` (everything about the picture).
    pub fn assign_chunk_keys(&mut self, look: &Key) {
        for i in 0..self.chunks.len() {
            let c = &self.chunks[i];
            let mut b = KeyBuilder::new("chunk")
                .bytes("look", &look.0)
                .u64("sample_rate", u64::from(self.sample_rate))
                .u64("lead_in", c.lead_in_samples)
                .u64("tail", c.tail_samples);
            for u in self.chunk_utterances(c) {
                b = b.bytes("utterance", &self.utterances[u].key.0);
            }
            for s in c.sentences.clone() {
                b = b.u64("sentence_len", self.sentences[s].utterances.len() as u64);
            }
            self.chunks[i].key = Some(b.finish());
        }
    }
}

/// `phonemes` in pieces of at most `max`, cut after a word space where one fits, else inside the
/// word (a word longer than `max` by itself).
fn bounded(phonemes: &[String], max: usize) -> Vec<&[String]> {
    let mut pieces = Vec::new();
    let mut rest = phonemes;
    while rest.len() > max {
        let cut = rest[..max]
            .iter()
            .rposition(|p| p == " ")
            .filter(|&i| i > 0)
            .map_or(max, |i| i + 1);
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    pieces
}

/// Whether a piece holds a phoneme, not only spaces and punctuation.
fn has_sound(phonemes: &[String]) -> bool {
    phonemes.iter().any(|p| p.chars().any(char::is_alphabetic))
}

/// Everything that changes the audio of one utterance.
pub fn phrase_key(normalized: &str, index: usize, ids: &[i64], id: &SpeechIdentity) -> Key {
    let [noise, length, noise_w] = id.scales.to_bits();
    KeyBuilder::new("phrase")
        .str("text", normalized)
        .u64("index", index as u64)
        .i64s("ids", ids)
        .bytes("voice", &id.voice_hash)
        .u64("noise", u64::from(noise))
        .u64("length", u64::from(length))
        .u64("noise_w", u64::from(noise_w))
        .u64("speaker", u64::from(id.speaker))
        .str("engine", &id.engine)
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> SpeechIdentity {
        SpeechIdentity {
            voice_hash: [7; 32],
            scales: Scales {
                noise: 0.667,
                length: 1.0,
                noise_w: 0.8,
            },
            speaker: 0,
            engine: "onnxruntime/cpu/fp32".into(),
        }
    }

    /// Two segments of the same text: keyed alike with one voice, apart with two, and each
    /// utterance names the voice that is to speak it; a voice not given is an error.
    #[test]
    fn each_segment_is_keyed_and_sent_with_its_own_voice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.onnx.json");
        std::fs::write(
            &path,
            r#"{"audio":{"sample_rate":22050},"espeak":{"voice":"en-us"},
                "phoneme_id_map":{"_":[0],"^":[1],"$":[2]," ":[3],"h":[20],"l":[24]}}"#,
        )
        .unwrap();
        let config = VoiceConfig::load(&path).unwrap();
        let (a, mut b) = (identity(), identity());
        b.scales.length = 1.0 / 0.7;
        let voices = [
            VoiceUse {
                config: &config,
                identity: &a,
            },
            VoiceUse {
                config: &config,
                identity: &b,
            },
        ];
        let script =
            Script::parse(r#"{"segments":[{"text":"Hello."},{"text":"Hello."}]}"#).unwrap();
        let phonemizer = Phonemizer::global().unwrap();
        let (clock, cancel) = (Clock::default(), AtomicBool::new(false));
        let build = |voices: &[VoiceUse<'_>], by_segment: &[usize]| {
            Plan::build_voiced(&script, voices, by_segment, &phonemizer, &clock, &cancel)
        };
        let one = build(&voices, &[]).unwrap();
        let two = build(&voices, &[0, 1]).unwrap();
        let of = |plan: &Plan, segment: usize| {
            let chunk = plan.chunks.iter().find(|c| c.segment == segment).unwrap();
            plan.utterances[plan.chunk_utterances(chunk)].to_vec()
        };
        assert_eq!(of(&one, 0)[0].key, of(&one, 1)[0].key);
        assert_ne!(of(&two, 0)[0].key, of(&two, 1)[0].key);
        assert_eq!(of(&two, 0)[0].key, of(&one, 0)[0].key);
        assert!(of(&two, 0).iter().all(|u| u.voice == 0));
        assert!(of(&two, 1).iter().all(|u| u.voice == 1));
        assert!(build(&[], &[]).is_err());
        let e = build(&voices, &[0, 2]).unwrap_err().to_string();
        assert!(e.contains("segments[1]"), "{e}");
    }

    #[test]
    fn long_phoneme_runs_are_cut_at_spaces_then_inside_words() {
        let p = |s: &str| -> Vec<String> { s.chars().map(String::from).collect() };
        let joined = |v: Vec<&[String]>| -> Vec<String> { v.iter().map(|x| x.concat()).collect() };
        assert_eq!(joined(bounded(&p("ab cd"), 5)), ["ab cd"]);
        assert_eq!(joined(bounded(&p("ab cd ef"), 5)), ["ab ", "cd ef"]);
        assert_eq!(
            joined(bounded(&p("abcdefghijk"), 4)),
            ["abcd", "efgh", "ijk"]
        );
        let long = p(&"a".repeat(10_000));
        let pieces = bounded(&long, 120);
        assert!(pieces.iter().all(|x| x.len() <= 120));
        assert_eq!(pieces.iter().map(|x| x.len()).sum::<usize>(), 10_000);
    }

    #[test]
    fn every_key_part_changes_the_phrase_key() {
        let base = phrase_key("hello", 0, &[1, 2, 3], &identity());
        assert_eq!(base, phrase_key("hello", 0, &[1, 2, 3], &identity()));
        assert_ne!(base, phrase_key("hello!", 0, &[1, 2, 3], &identity()));
        assert_ne!(base, phrase_key("hello", 1, &[1, 2, 3], &identity()));
        assert_ne!(base, phrase_key("hello", 0, &[1, 2, 4], &identity()));
        let mut id = identity();
        id.voice_hash[0] = 8;
        assert_ne!(base, phrase_key("hello", 0, &[1, 2, 3], &id));
        for change in [
            |s: &mut Scales| s.noise = 0.0,
            |s: &mut Scales| s.length = 0.8,
            |s: &mut Scales| s.noise_w = 0.1,
        ] {
            let mut id = identity();
            change(&mut id.scales);
            assert_ne!(base, phrase_key("hello", 0, &[1, 2, 3], &id));
        }
        let mut id = identity();
        id.speaker = 1;
        assert_ne!(base, phrase_key("hello", 0, &[1, 2, 3], &id));
        let mut id = identity();
        id.engine = "cuda/fp16".into();
        assert_ne!(base, phrase_key("hello", 0, &[1, 2, 3], &id));
    }
}
