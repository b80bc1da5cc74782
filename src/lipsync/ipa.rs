//! IPA symbol classes: what each Piper/espeak-ng phoneme symbol means for the mouth.
//!
//! Input: one Unicode scalar from a phone's IPA string. Output: a [`Symbol`] class.
//! Invariant: total (every `char` gets a class); every symbol of Piper's phoneme_id_map for the
//! en-us voices gets a deliberate class, not the fallback (see the test at the bottom).

use super::viseme::Viseme;

/// How strongly a consonant keeps its own mouth shape against its neighbouring vowels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Lips {
    /// The lips make the sound (p b m f v w): the shape is kept exactly.
    Busy,
    /// The tongue makes the sound; the lips blend towards the next vowel. The value is the
    /// weight of the consonant's own shape (0..1).
    Free(f32),
}

/// Vowel stress as marked by espeak-ng (ˈ primary, ˌ secondary, none = unstressed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Stress {
    Primary,
    Secondary,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Symbol {
    Vowel(Viseme),
    Consonant(Viseme, Lips),
    /// h, ɦ, ʔ: no mouth shape of their own, they take the next vowel's.
    Transparent,
    /// A stress mark: its time goes to the following vowel, which it also marks.
    Stress(Stress),
    /// Length marks, diacritics, downstep, Piper's pad `_`, tone digits: time goes to the previous sound.
    AttachPrev,
    /// Space, punctuation, Piper's `^`/`$`, unknown symbols: a pause of the given duration.
    Pause,
}

pub(crate) fn classify(c: char) -> Symbol {
    use Symbol::{AttachPrev, Consonant, Pause, Transparent, Vowel};
    use Viseme as V;
    let free = |v, w| Consonant(v, Lips::Free(w));
    let busy = |v| Consonant(v, Lips::Busy);
    match c {
        // Vowels (espeak en-us emits a e i o u æ ɐ ɑ ɔ ə ɚ ɛ ɜ ɪ ʊ ʌ ᵻ; the rest for other voices).
        'a' | 'ɑ' | 'æ' | 'ʌ' | 'ɶ' | 'ä' => Vowel(V::Aa),
        'ɐ' | 'ə' | 'ɛ' | 'ε' | 'e' | 'ɘ' => Vowel(V::E),
        'ɚ' | 'ɜ' | 'ɝ' => Vowel(V::Rr),
        'ɪ' | 'i' | 'ᵻ' | 'ɨ' | 'ɯ' | 'ɤ' => Vowel(V::Ih),
        'ɔ' | 'o' | 'ɒ' | 'ɞ' | 'ɵ' | 'œ' | 'ø' => Vowel(V::Oh),
        'ʊ' | 'u' | 'ʉ' | 'y' | 'ʏ' => Vowel(V::Ou),
        // Consonants whose sound the lips make.
        'p' | 'b' | 'm' | 'ɓ' | 'ʙ' | 'ʘ' => busy(V::Pp),
        'f' | 'v' | 'ɱ' | 'ɸ' | 'β' | 'ʋ' | 'ⱱ' => busy(V::Ff),
        'w' | 'ʍ' | 'ɥ' | 'ɰ' => busy(V::Ou),
        // Tongue consonants: the own-shape weight follows how visible the articulation is.
        'θ' | 'ð' => free(V::Th, 0.8),
        't' | 'd' | 'ɾ' | 'ʈ' | 'ɖ' | 'ɗ' | 'ǀ' | 'ǁ' | 'ǂ' | 'ǃ' => free(V::Dd, 0.45),
        'k' | 'g' | 'ɡ' | 'q' | 'ɢ' | 'x' | 'ɣ' | 'χ' | 'ŋ' | 'ɲ' | 'ɴ' | 'c' | 'ɟ' | 'ç' | 'ɠ'
        | 'ʛ' | 'ɧ' | 'ʝ' => free(V::Kk, 0.4),
        'ʃ' | 'ʒ' | 'ɕ' | 'ʑ' | 'ʂ' | 'ʐ' => free(V::Ch, 0.75),
        's' | 'z' => free(V::Ss, 0.65),
        'n' | 'l' | 'ɫ' | 'ɬ' | 'ɮ' | 'ɭ' | 'ɳ' | 'ʎ' | 'ʟ' | 'ɺ' => free(V::Nn, 0.5),
        'ɹ' | 'r' | 'ɻ' | 'ʀ' | 'ʁ' | 'ɽ' => free(V::Rr, 0.6),
        'j' => free(V::Ih, 0.6),
        'h' | 'ɦ' | 'ħ' | 'ʕ' | 'ʔ' | 'ʜ' | 'ʢ' | 'ʡ' | 'ʄ' => Transparent,
        'ˈ' => Symbol::Stress(Stress::Primary),
        'ˌ' => Symbol::Stress(Stress::Secondary),
        // Length, rhotic hook, secondary articulations, combining diacritics, tone digits, pad.
        'ː' | 'ˑ' | '˞' | 'ʲ' | 'ʰ' | 'ˤ' | '↓' | '_' | '0'..='9' | '\u{0300}'..='\u{036F}' => {
            AttachPrev
        }
        _ => Pause,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key of `phoneme_id_map` in Piper's en_US voices' .onnx.json (151 symbols).
    const PIPER_SYMBOLS: &str = "_^$ !'(),-.:;?abcdefhijklmnopqrstuvwxyzæçðøħŋœǀǁǂǃɐɑɒɓɔɕɖɗɘəɚɛɜɞɟɠɡɢɣɤɥɦɧɨɪɫɬɭɮɯɰɱɲɳɴɵɶɸɹɺɻɽɾʀʁʂʃʄʈʉʊʋʌʍʎʏʐʑʒʔʕʘʙʛʜʝʟʡʢʲˈˌːˑ˞βθχᵻⱱ0123456789\u{0327}\u{0303}\u{032A}\u{032F}\u{0329}ʰˤε↓#\"";

    #[test]
    fn piper_symbol_list_is_complete() {
        assert_eq!(PIPER_SYMBOLS.chars().count(), 151);
    }

    #[test]
    fn every_piper_letter_is_a_sound_and_every_mark_is_not() {
        let pauses: Vec<char> = PIPER_SYMBOLS
            .chars()
            .filter(|&c| classify(c) == Symbol::Pause)
            .collect();
        // Only punctuation, word space and Piper's sentence start/end symbols are pauses.
        let expected: Vec<char> = "^$ !'(),-.:;?#\"".chars().collect();
        assert_eq!(pauses, expected);
    }

    #[test]
    fn espeak_en_us_output_maps_as_expected() {
        // From `espeak-ng -q --ipa -v en-us`: "jumps over", "father", "five", "thought", "wish".
        let cases = [
            ('d', Symbol::Consonant(Viseme::Dd, Lips::Free(0.45))),
            ('ʒ', Symbol::Consonant(Viseme::Ch, Lips::Free(0.75))),
            ('m', Symbol::Consonant(Viseme::Pp, Lips::Busy)),
            ('p', Symbol::Consonant(Viseme::Pp, Lips::Busy)),
            ('ɑ', Symbol::Vowel(Viseme::Aa)),
            ('ɚ', Symbol::Vowel(Viseme::Rr)),
            ('ɜ', Symbol::Vowel(Viseme::Rr)),
            ('ɐ', Symbol::Vowel(Viseme::E)),
            ('f', Symbol::Consonant(Viseme::Ff, Lips::Busy)),
            ('v', Symbol::Consonant(Viseme::Ff, Lips::Busy)),
            ('θ', Symbol::Consonant(Viseme::Th, Lips::Free(0.8))),
            ('ʊ', Symbol::Vowel(Viseme::Ou)),
            ('w', Symbol::Consonant(Viseme::Ou, Lips::Busy)),
            ('h', Symbol::Transparent),
            ('ˈ', Symbol::Stress(Stress::Primary)),
            ('ː', Symbol::AttachPrev),
            ('_', Symbol::AttachPrev),
            ('.', Symbol::Pause),
        ];
        for (c, want) in cases {
            assert_eq!(classify(c), want, "{c}");
        }
    }
}
