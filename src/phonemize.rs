//! Text → IPA phonemes with espeak-ng, the way Piper's own phonemizer splits and marks them.
//!
//! Input: one normalised sentence (or more) and an espeak voice name. Output: the phonemes of each
//! sentence espeak finds, one Unicode scalar per phoneme (NFD-decomposed, as Piper's id maps expect),
//! with clause punctuation kept (`, ; :` followed by a space, `. ? !` ending a sentence).
//!
//! espeak-ng is not re-entrant and may be initialised once per process, so one thread owns it for the
//! whole process and every caller sends it requests over a channel.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;
use std::thread;

use crossbeam_channel::{Sender, bounded, unbounded};
use unicode_normalization::UnicodeNormalization;

use crate::lexicon::Piece;

/// The phonemes of one sentence as espeak read it.
pub type SentencePhonemes = Vec<String>;

#[derive(Debug, thiserror::Error)]
pub enum PhonemizeError {
    #[error(
        "espeak-ng could not start (is the espeak-ng-data package installed? on Debian: apt-get install espeak-ng-data)"
    )]
    Init,
    #[error(
        "espeak-ng has no voice {0:?} (the voice's .onnx.json names it under espeak.voice; `espeak-ng --voices` lists what is installed)"
    )]
    UnknownVoice(String),
    #[error("the espeak-ng thread has stopped")]
    ThreadLost,
}

#[link(name = "espeak-ng")]
unsafe extern "C" {
    fn espeak_Initialize(
        output: c_int,
        buflength: c_int,
        path: *const c_char,
        options: c_int,
    ) -> c_int;
    fn espeak_SetVoiceByName(name: *const c_char) -> c_int;
    fn espeak_TextToPhonemes(
        textptr: *mut *const c_void,
        textmode: c_int,
        phonememode: c_int,
    ) -> *const c_char;
}

const AUDIO_OUTPUT_RETRIEVAL: c_int = 1;
const ESPEAK_INITIALIZE_DONT_EXIT: c_int = 0x8000;
const ESPEAK_CHARS_UTF8: c_int = 1;
const ESPEAK_PHONEMES_IPA: c_int = 0x02;

struct Request {
    voice: String,
    text: String,
    reply: Sender<Result<Vec<SentencePhonemes>, PhonemizeError>>,
}

/// Handle to the process-wide espeak-ng owner thread.
#[derive(Clone)]
pub struct Phonemizer {
    tx: Sender<Request>,
}

impl Phonemizer {
    /// The shared phonemizer, started on first use.
    pub fn global() -> Result<Phonemizer, PhonemizeError> {
        static GLOBAL: OnceLock<Result<Phonemizer, ()>> = OnceLock::new();
        GLOBAL
            .get_or_init(|| start().map_err(|_| ()))
            .clone()
            .map_err(|()| PhonemizeError::Init)
    }

    /// Phonemes of `text`, grouped by the sentences espeak-ng finds in it.
    pub fn phonemize(
        &self,
        voice: &str,
        text: &str,
    ) -> Result<Vec<SentencePhonemes>, PhonemizeError> {
        let (reply, rx) = bounded(1);
        let request = Request {
            voice: voice.to_owned(),
            text: text.to_owned(),
            reply,
        };
        self.tx
            .send(request)
            .map_err(|_| PhonemizeError::ThreadLost)?;
        rx.recv().map_err(|_| PhonemizeError::ThreadLost)?
    }

    /// Phonemes of a sentence after the lexicon: text pieces through espeak-ng, IPA pieces spliced
    /// in as they are, joined by a word space (none before punctuation). One text piece gives
    /// exactly what [`Phonemizer::phonemize`] gives.
    pub fn phonemize_pieces(
        &self,
        voice: &str,
        pieces: &[Piece],
    ) -> Result<Vec<SentencePhonemes>, PhonemizeError> {
        if let [Piece::Text(t)] = pieces {
            return self.phonemize(voice, t);
        }
        let mut sentences: Vec<SentencePhonemes> = Vec::new();
        // Whether the last sentence ended with . ? ! (the next piece starts a new one).
        let mut closed = true;
        for piece in pieces {
            let parts: Vec<SentencePhonemes> = match piece {
                Piece::Ipa(ipa) => vec![ipa.nfd().map(String::from).collect()],
                Piece::Text(t) => {
                    // espeak-ng drops punctuation before the first word, which here follows
                    // an IPA word ("Nguyen, then"): keep those clause marks as it would.
                    let lead = t.find(char::is_alphanumeric).unwrap_or(t.len());
                    let mut parts = vec![clause_marks(&t[..lead])];
                    if crate::text::is_speakable(&t[lead..]) {
                        parts.extend(self.phonemize(voice, &t[lead..])?);
                    }
                    merge_marks(parts)
                }
            };
            for (i, part) in parts.into_iter().enumerate() {
                if part.is_empty() {
                    continue;
                }
                match sentences.last_mut() {
                    Some(last) if i == 0 && !closed => {
                        let punctuation = part[0].chars().all(|c| ".,?!:;".contains(c));
                        if !punctuation && last.last().is_some_and(|p| p != " ") {
                            last.push(" ".to_owned());
                        }
                        last.extend(part);
                    }
                    _ => sentences.push(part),
                }
                closed = sentences
                    .last()
                    .and_then(|s| s.iter().rev().find(|p| *p != " "))
                    .is_some_and(|p| matches!(p.as_str(), "." | "?" | "!"));
            }
        }
        Ok(sentences)
    }
}

/// The clause punctuation in `text` as phonemes (`,` `:` `;` followed by a space).
fn clause_marks(text: &str) -> SentencePhonemes {
    text.chars()
        .filter(|c| matches!(c, '.' | ',' | '?' | '!' | ':' | ';'))
        .flat_map(|c| {
            let space = matches!(c, ',' | ':' | ';').then(|| " ".to_owned());
            std::iter::once(c.to_string()).chain(space)
        })
        .collect()
}

/// Leading marks join the first sentence after them, unless they end a sentence themselves.
fn merge_marks(mut parts: Vec<SentencePhonemes>) -> Vec<SentencePhonemes> {
    let ends = parts[0]
        .iter()
        .any(|p| matches!(p.as_str(), "." | "?" | "!"));
    if parts.len() > 1 && !ends {
        let marks = parts.remove(0);
        parts[0].splice(0..0, marks);
    }
    parts
}

fn start() -> Result<Phonemizer, PhonemizeError> {
    let (tx, rx) = unbounded::<Request>();
    let (ready_tx, ready_rx) = bounded(1);
    thread::Builder::new()
        .name("espeak".into())
        .spawn(move || {
            // SAFETY: this thread is the only caller of espeak-ng in the process.
            let rate = unsafe {
                espeak_Initialize(
                    AUDIO_OUTPUT_RETRIEVAL,
                    0,
                    std::ptr::null(),
                    ESPEAK_INITIALIZE_DONT_EXIT,
                )
            };
            let ok = rate > 0;
            let _ = ready_tx.send(ok);
            if !ok {
                return;
            }
            let mut current_voice = String::new();
            for req in rx {
                let result =
                    set_voice(&mut current_voice, &req.voice).map(|()| phonemize_text(&req.text));
                let _ = req.reply.send(result);
            }
        })
        .map_err(|_| PhonemizeError::Init)?;
    match ready_rx.recv() {
        Ok(true) => Ok(Phonemizer { tx }),
        _ => Err(PhonemizeError::Init),
    }
}

fn set_voice(current: &mut String, voice: &str) -> Result<(), PhonemizeError> {
    if current == voice {
        return Ok(());
    }
    let name = CString::new(voice).map_err(|_| PhonemizeError::UnknownVoice(voice.to_owned()))?;
    // SAFETY: called only on the owner thread after espeak_Initialize succeeded.
    if unsafe { espeak_SetVoiceByName(name.as_ptr()) } != 0 {
        return Err(PhonemizeError::UnknownVoice(voice.to_owned()));
    }
    voice.clone_into(current);
    Ok(())
}

/// Runs espeak clause by clause and rebuilds Piper's phoneme stream.
///
/// Stock espeak-ng drops the clause punctuation that Piper's fork returns, so it is recovered from the
/// text itself: after each call the text pointer sits one character past the clause, and the clause's
/// last non-space character is its terminator.
fn phonemize_text(text: &str) -> Vec<SentencePhonemes> {
    // Interior NULs would end the C string early; they carry nothing speakable.
    let clean: String = text.chars().filter(|&c| c != '\0').collect();
    let c_text = CString::new(clean).expect("NULs were removed");
    let bytes = c_text.as_bytes();
    let base = c_text.as_ptr();

    let mut sentences = Vec::new();
    let mut current = String::new();
    let mut ptr: *const c_void = base.cast();
    let mut clause_start = 0usize;
    while !ptr.is_null() {
        // SAFETY: owner thread only; `ptr` points into `c_text`, which outlives the loop.
        let phonemes =
            unsafe { espeak_TextToPhonemes(&mut ptr, ESPEAK_CHARS_UTF8, ESPEAK_PHONEMES_IPA) };
        let clause_end = if ptr.is_null() {
            bytes.len()
        } else {
            let next = (ptr as usize) - (base as usize);
            back_one_char(bytes, next)
        };
        let ipa = if phonemes.is_null() {
            String::new()
        } else {
            // SAFETY: espeak returns a NUL-terminated UTF-8 string valid until the next call.
            unsafe { CStr::from_ptr(phonemes) }
                .to_string_lossy()
                .into_owned()
        };
        let terminator = clause_terminator(&bytes[clause_start.min(clause_end)..clause_end]);
        current.push_str(&strip_language_flags(&ipa));
        if let Some(t) = terminator {
            current.push(t);
            if matches!(t, ',' | ':' | ';') {
                current.push(' ');
            }
        }
        let end_of_sentence = matches!(terminator, Some('.' | '?' | '!'));
        if end_of_sentence || ptr.is_null() {
            let phonemes: SentencePhonemes = current.nfd().map(String::from).collect();
            if phonemes.iter().any(|p| !p.trim().is_empty()) {
                sentences.push(phonemes);
            }
            current.clear();
        } else if !current.is_empty() && !current.ends_with(' ') {
            current.push(' ');
        }
        clause_start = clause_end;
    }
    sentences
}

/// Index of the start of the UTF-8 character that ends just before `end`.
fn back_one_char(bytes: &[u8], end: usize) -> usize {
    let mut i = end.min(bytes.len()).saturating_sub(1);
    while i > 0 && (bytes[i] & 0xC0) == 0x80 {
        i -= 1;
    }
    i
}

fn clause_terminator(clause: &[u8]) -> Option<char> {
    let text = String::from_utf8_lossy(clause);
    match text.trim_end().chars().last()? {
        c @ ('.' | ',' | '?' | '!' | ':' | ';') => Some(c),
        '…' => Some('.'),
        _ => None,
    }
}

/// Removes espeak's `(en)`-style language-switch markers, as Piper does.
fn strip_language_flags(ipa: &str) -> String {
    let mut out = String::with_capacity(ipa.len());
    let mut depth = 0usize;
    for c in ipa.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(s: &[SentencePhonemes]) -> Vec<String> {
        s.iter().map(|p| p.concat()).collect()
    }

    #[test]
    fn keeps_clause_punctuation_and_splits_sentences() {
        let p = Phonemizer::global().unwrap();
        let out = p
            .phonemize("en-us", "Hello, world. How are you? Fine; thanks!")
            .unwrap();
        assert_eq!(
            joined(&out),
            vec!["həlˈoʊ, wˈɜːld.", "hˈaʊ ɑːɹ juː?", "fˈaɪn; θˈæŋks!"]
        );
    }

    #[test]
    fn text_without_terminator_is_one_sentence() {
        let p = Phonemizer::global().unwrap();
        let out = p.phonemize("en-us", "no full stop here").unwrap();
        assert_eq!(out.len(), 1);
        assert!(!out[0].last().unwrap().ends_with('.'));
    }

    #[test]
    fn phonemes_are_single_scalars() {
        let p = Phonemizer::global().unwrap();
        let out = p.phonemize("en-us", "Naïve café owners.").unwrap();
        assert!(out[0].iter().all(|ph| ph.chars().count() == 1));
    }

    #[test]
    fn unknown_voice_is_an_error() {
        let p = Phonemizer::global().unwrap();
        let err = p.phonemize("xx-no-such-voice", "hello").unwrap_err();
        assert!(matches!(err, PhonemizeError::UnknownVoice(_)), "{err}");
        // The thread survives a bad request.
        assert_eq!(p.phonemize("en-us", "hi.").unwrap().len(), 1);
    }

    #[test]
    fn nothing_speakable_gives_no_sentences() {
        let p = Phonemizer::global().unwrap();
        assert!(p.phonemize("en-us", "  \0 ").unwrap().is_empty());
    }

    #[test]
    fn ipa_pieces_are_spliced_between_words() {
        let p = Phonemizer::global().unwrap();
        let pieces = [
            Piece::Text("I met ".into()),
            Piece::Ipa("wˈɪn".into()),
            Piece::Text(", then left. Bye".into()),
        ];
        let out = p.phonemize_pieces("en-us", &pieces).unwrap();
        assert_eq!(joined(&out), vec!["aɪ mˈɛt wˈɪn, ðˈɛn lˈɛft.", "bˈaɪ"]);
        let end = [
            Piece::Text("Hello ".into()),
            Piece::Ipa("wˈɪn".into()),
            Piece::Text(".".into()),
        ];
        assert_eq!(
            joined(&p.phonemize_pieces("en-us", &end).unwrap()),
            vec!["həlˈoʊ wˈɪn."]
        );
        let one = [Piece::Text("Hello there.".into())];
        assert_eq!(
            p.phonemize_pieces("en-us", &one).unwrap(),
            p.phonemize("en-us", "Hello there.").unwrap()
        );
    }

    #[test]
    fn language_flags_are_removed() {
        assert_eq!(strip_language_flags("(en)hɛloʊ(fr)bɔ̃"), "hɛloʊbɔ̃");
    }

    #[test]
    fn terminator_is_found_after_multibyte_text() {
        let bytes = "é, ü".as_bytes();
        // pointer after the read-ahead "ü": the clause ends before it.
        let end = back_one_char(bytes, bytes.len());
        assert_eq!(clause_terminator(&bytes[..end]), Some(','));
    }
}
