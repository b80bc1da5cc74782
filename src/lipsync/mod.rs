//! Lip-sync planning: exact TTS phoneme timings → a track of mouth shapes.
//!
//! Input: [`Phone`]s as the TTS spoke them (Piper's one-symbol-per-id phones with sample ranges
//! at `sample_rate`, pads/stress/length/punctuation included). Output: a [`MouthTrack`] of
//! [`VisemeKey`]s that [`MouthTrack::pose_at`] turns into a [`MouthPose`] for any time.
//! Invariants: pure and deterministic (no clock, no randomness); total (any phone list gives a
//! valid track); keys are contiguous, start at 0 and end at the last phone's end.
//!
//! # Symbols → visemes
//! Visemes are Meta/Oculus's 15 (richer than Rhubarb's A–H + X; the letter is given for each).
//!
//! | viseme | Rhubarb | IPA symbols (espeak-ng / Piper) | lips |
//! |---|---|---|---|
//! | `Sil` | X | pauses: space `, . ! ? ; : - ( ) " ' #`, Piper `^ $` | rest |
//! | `Pp` | A | p b m ɓ ʙ ʘ | sealed (busy) |
//! | `Ff` | G | f v ɱ ɸ β ʋ ⱱ | lower lip under upper teeth (busy) |
//! | `Th` | B | θ ð | tongue between teeth (80 % own shape) |
//! | `Dd` | B | t d ɾ ʈ ɖ ɗ, clicks ǀ ǁ ǂ ǃ | 45 % own, rest from the next vowel |
//! | `Kk` | C | k g ɡ q ɢ x ɣ χ ŋ ɲ ɴ c ɟ ç ɠ ʛ ɧ ʝ | 40 % own |
//! | `Ch` | B | ʃ ʒ ɕ ʑ ʂ ʐ (tʃ, dʒ arrive as t+ʃ, d+ʒ) | protruded, 75 % own |
//! | `Ss` | B | s z | teeth nearly closed, 65 % own |
//! | `Nn` | H | n l ɫ ɬ ɮ ɭ ɳ ʎ ʟ ɺ | tongue up, 50 % own |
//! | `Rr` | E | ɹ r ɻ ʀ ʁ ɽ (60 % own); vowels ɚ ɜ ɝ | slightly rounded |
//! | `Aa` | D | ɑ a æ ʌ ɶ ä | wide open |
//! | `E` | C | ɛ e ə ɐ ɘ ε | mid open |
//! | `Ih` | B | ɪ i ᵻ ɨ ɯ ɤ; j (60 % own) | small, spread |
//! | `Oh` | E | ɔ o ɒ ɞ ɵ œ ø | rounded open |
//! | `Ou` | F | ʊ u ʉ y ʏ; w ʍ ɥ ɰ (busy) | puckered |
//! | (next vowel) | – | h ɦ ħ ʕ ʔ ʜ ʢ ʡ ʄ | no shape of their own |
//! | (merged) | – | stress ˈ ˌ → next vowel (primary 100 %, secondary 90 %, none 75 % opening); length ː ˑ, ˞ ʲ ʰ ˤ ↓, combining marks, digits, Piper pad `_` → previous sound | – |
//!
//! Diphthongs arrive as two phones (a+ɪ, o+ʊ, e+ɪ, a+ʊ, ɔ+ɪ) and so get two shapes in their own
//! timing; a multi-letter phone string is split 60/40 (Rhubarb's diphthong rule).
//!
//! # Timing rules
//! - Anticipation: after a tongue consonant, h or a pause the vowel's shape starts up to 50 ms
//!   (120 ms after a pause) before its sound; tongue consonants also blend towards the next
//!   vowel (lip rounding in "soon" starts on the s).
//! - m/b/p: a fully closed key (`open == 0`) held from the closure to the release (the start
//!   of the next sound), at least 70 ms so a 25 fps frame always lands on it; the lips start
//!   closing up to 30 ms before the sound, a short closure borrows time from before it, and a
//!   tween into or out of it takes at most 30 % of its time from the closure itself.
//! - f/v: a held key with `lower_lip_tuck == 1` and the upper teeth showing (same lead).
//! - No held shape shorter than 70 ms (shorter ones borrow spare time or merge into the most
//!   similar neighbour); tweens of 25–80 ms between visibly different shapes, carved from spare.
//! - Pauses: < 120 ms hold the shape, ≤ 350 ms relax it halfway, longer go to rest (`Sil`);
//!   the utterance's leading and trailing pauses are rest. After the last key the mouth eases
//!   to rest over 250 ms (so consecutive utterances can simply be played back to back).

mod ipa;
mod pose;
mod segments;
mod timing;
mod viseme;

pub use pose::MouthPose;
pub use timing::{MIN_SHAPE, PAUSE_HOLD, PAUSE_RELAX, TWEEN_MAX, TWEEN_MIN};
pub use viseme::Viseme;

/// One phoneme as the TTS spoke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phone {
    /// IPA symbol(s) (Piper: one symbol per phone, including `_ ^ $`, stress and punctuation).
    pub ipa: String,
    /// First sample of the phone.
    pub start: u64,
    /// One past the last sample.
    pub end: u64,
}

/// What a key does with the mouth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// The viseme's shape, held for the whole key.
    Shape,
    /// A pause of 120–350 ms: the previous shape, relaxed halfway towards rest.
    Relax,
    /// A transition from the previous key's pose to this key's pose (smoothstep).
    Tween,
}

/// One span of the mouth track.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VisemeKey {
    /// Start in seconds from the first sample.
    pub start: f64,
    /// End in seconds (the next key's start).
    pub end: f64,
    /// The shape held (or, for a tween, reached at the end).
    pub viseme: Viseme,
    pub kind: KeyKind,
    /// The exact pose held (or reached at the end of a tween); differs from `viseme.pose()`
    /// through stress, coarticulation and relaxing.
    pub pose: MouthPose,
}

/// The planned mouth motion of one utterance.
#[derive(Debug, Clone, PartialEq)]
pub struct MouthTrack {
    keys: Vec<VisemeKey>,
}

/// How long the mouth takes to ease back to rest after the last key.
const EASE_OUT: f64 = 0.25;

/// Plans the mouth shapes for `phones`, whose sample indices are at `sample_rate` Hz.
pub fn plan(phones: &[Phone], sample_rate: u32) -> MouthTrack {
    let segs = segments::segments(phones, sample_rate);
    MouthTrack {
        keys: timing::keys(&segs),
    }
}

fn smoothstep(u: f64) -> f32 {
    let u = u.clamp(0.0, 1.0);
    (u * u * (3.0 - 2.0 * u)) as f32
}

impl MouthTrack {
    /// The keys, contiguous and in time order.
    pub fn keys(&self) -> &[VisemeKey] {
        &self.keys
    }

    /// End of the last key in seconds (0 for an empty track).
    pub fn duration(&self) -> f64 {
        self.keys.last().map_or(0.0, |k| k.end)
    }

    /// The mouth at `t_seconds`: held keys give their pose, tweens blend with a smoothstep;
    /// before the start the first pose, after the end an ease back to rest.
    pub fn pose_at(&self, t_seconds: f64) -> MouthPose {
        let (Some(first), Some(last)) = (self.keys.first(), self.keys.last()) else {
            return MouthPose::REST;
        };
        if t_seconds.is_nan() || t_seconds < first.start {
            return first.pose;
        }
        if t_seconds >= last.end {
            let u = (t_seconds - last.end) / EASE_OUT;
            return last.pose.lerp(&MouthPose::REST, smoothstep(u));
        }
        let i = self.keys.partition_point(|k| k.end <= t_seconds);
        let key = &self.keys[i];
        match (key.kind, i.checked_sub(1)) {
            (KeyKind::Tween, Some(p)) => {
                let u = (t_seconds - key.start) / (key.end - key.start);
                self.keys[p].pose.lerp(&key.pose, smoothstep(u))
            }
            _ => key.pose,
        }
    }
}

#[cfg(test)]
mod tests;
