//! From TTS phones (one IPA string and a sample range each) to clean sound segments in seconds.
//!
//! Input: `&[Phone]` in spoken order with sample indices at `sample_rate`.
//! Output: contiguous segments covering `[0, end of last phone]`, each a vowel, a consonant, a
//! transparent sound (h, ʔ) or a pause; no zero-length segment, adjacent pauses merged.
//! Invariants: stress marks, length marks, pads and diacritics never become segments of their
//! own: their time is given to the neighbouring sound (stress → next, the others → previous).
//! Overlapping or backwards phone times are clipped, gaps become pauses, so any input is valid.

use super::Phone;
use super::ipa::{Lips, Stress, Symbol, classify};
use super::viseme::Viseme;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Sound {
    /// A vowel and its stress (None = unstressed).
    Vowel(Viseme, Option<Stress>),
    Consonant(Viseme, Lips),
    Transparent,
    Pause,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Segment {
    pub start: f64,
    pub end: f64,
    pub sound: Sound,
}

/// One classified symbol with its share of its phone's time.
struct Unit {
    start: f64,
    end: f64,
    symbol: Symbol,
}

pub(crate) fn segments(phones: &[Phone], sample_rate: u32) -> Vec<Segment> {
    let rate = f64::from(sample_rate.max(1));
    let mut units = Vec::with_capacity(phones.len() * 2);
    let mut cursor = 0.0f64;
    for phone in phones {
        let start = (phone.start as f64 / rate).max(cursor);
        let end = (phone.end as f64 / rate).max(start);
        if start > cursor {
            units.push(Unit {
                start: cursor,
                end: start,
                symbol: Symbol::Pause,
            });
        }
        split_phone(&phone.ipa, start, end, &mut units);
        cursor = end;
    }
    resolve(units)
}

/// Splits one phone's time between the sounds in its IPA string. Piper gives one symbol per
/// phone, but a multi-letter string ("aɪ", "tʃ") is split 60/40 for two sounds (Rhubarb's
/// diphthong rule) and evenly for more.
fn split_phone(ipa: &str, start: f64, end: f64, out: &mut Vec<Unit>) {
    let symbols: Vec<Symbol> = ipa.chars().map(classify).collect();
    let sounds = symbols
        .iter()
        .filter(|s| !matches!(s, Symbol::AttachPrev | Symbol::Stress(_)))
        .count();
    if sounds <= 1 {
        // Marks travel with the phone's single sound (or are the phone itself).
        let symbol = symbols
            .iter()
            .copied()
            .find(|s| !matches!(s, Symbol::AttachPrev | Symbol::Stress(_)))
            .or_else(|| symbols.first().copied())
            .unwrap_or(Symbol::AttachPrev);
        if let Some(stress @ Symbol::Stress(_)) = symbols.first().copied()
            && sounds == 1
        {
            out.push(Unit {
                start,
                end: start,
                symbol: stress,
            });
        }
        out.push(Unit { start, end, symbol });
        return;
    }
    let dur = end - start;
    let mut t = start;
    let mut k = 0;
    for symbol in symbols {
        if matches!(symbol, Symbol::AttachPrev | Symbol::Stress(_)) {
            out.push(Unit {
                start: t,
                end: t,
                symbol,
            });
            continue;
        }
        let share = if sounds == 2 {
            if k == 0 { 0.6 } else { 0.4 }
        } else {
            1.0 / sounds as f64
        };
        let e = if k + 1 == sounds {
            end
        } else {
            t + dur * share
        };
        out.push(Unit {
            start: t,
            end: e,
            symbol,
        });
        t = e;
        k += 1;
    }
}

/// Gives marks' time to their neighbours and turns units into segments.
fn resolve(units: Vec<Unit>) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::with_capacity(units.len());
    // Time of marks waiting for the next sound (stress marks, or pads before any sound).
    let mut pending: Option<(f64, f64)> = None;
    // Stress waiting for the next vowel; it survives consonants but not pauses.
    let mut stress: Option<Stress> = None;
    for u in units {
        let sound = match u.symbol {
            Symbol::AttachPrev => {
                match (pending.as_mut(), out.last_mut()) {
                    (Some(p), _) => p.1 = u.end,
                    (None, Some(last)) => last.end = u.end,
                    (None, None) => pending = Some((u.start, u.end)),
                }
                continue;
            }
            Symbol::Stress(s) => {
                pending = Some(pending.map_or((u.start, u.end), |p| (p.0, u.end)));
                stress = Some(s);
                continue;
            }
            Symbol::Vowel(v) => Sound::Vowel(v, stress.take()),
            Symbol::Consonant(v, lips) => Sound::Consonant(v, lips),
            Symbol::Transparent => Sound::Transparent,
            Symbol::Pause => {
                stress = None;
                Sound::Pause
            }
        };
        let start = pending.take().map_or(u.start, |p| p.0);
        push(
            &mut out,
            Segment {
                start,
                end: u.end,
                sound,
            },
        );
    }
    // Marks with nothing after them: their time goes to the last sound.
    if let (Some((_, to)), Some(last)) = (pending, out.last_mut()) {
        last.end = last.end.max(to);
    }
    out
}

/// Appends a segment, merging adjacent pauses and dropping zero-length pieces.
fn push(out: &mut Vec<Segment>, mut seg: Segment) {
    if let Some(last) = out.last_mut() {
        seg.start = last.end;
        if seg.sound == Sound::Pause && last.sound == Sound::Pause {
            last.end = last.end.max(seg.end);
            return;
        }
    }
    if seg.end > seg.start {
        out.push(seg);
    } else if let Some(last) = out.last_mut() {
        last.end = last.end.max(seg.end);
    }
}
