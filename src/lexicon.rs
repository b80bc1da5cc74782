//! Pronunciation lexicon: words and phrases said the user's way.
//!
//! Format (the script's `lexicon` field inline, or a JSON file given by that field as a path or by
//! `--lexicon`): an object from a word or phrase to either a respelling, read by espeak-ng like
//! any text (`"Nguyen": "win"`), or IPA in the voice's phoneme set (`"Siobhan": {"ipa": "ʃɪvˈɔːn"}`,
//! the symbols `espeak-ng -v en-us --ipa -q WORD` prints).
//!
//! Matching: whole words only, on the text as it is read after normalisation (numbers in words,
//! abbreviations expanded); the longest entry wins where several start at one word. An entry in
//! lowercase matches any case (`"nguyen"` matches `NGUYEN`); an entry with a capital letter
//! matches only that exact case (`"US"` leaves `us` alone). Several lexicons: later ones win
//! (the script's first, then each `--lexicon` in order).
//!
//! Why this shape: respellings and IPA pieces change exactly the sentences that contain them, so the
//! phrase cache (keyed by the text as read and by the phoneme ids) re-synthesises only those.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

use crate::json::{ScriptError, kind, parse_json};

/// Lexicon files larger than this are refused (a lexicon of 100 000 names is about 3 MB).
const MAX_LEXICON_BYTES: u64 = 16 << 20;
const MAX_KEY_CHARS: usize = 200;

#[derive(Debug, Clone, PartialEq)]
pub enum Say {
    /// Text read instead of the entry.
    Respell(String),
    /// Phonemes spoken instead of the entry, NFD-decomposed like espeak-ng's output.
    Ipa(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub word: String,
    pub say: Say,
    /// Where the entry came from (a lexicon file or the script), for error messages.
    pub file: PathBuf,
    /// Whether the entry matches only its exact case (it has a capital letter).
    exact_case: bool,
    /// Its words, lowercased unless `exact_case`.
    words: Vec<String>,
}

/// A part of a sentence after the lexicon: text for espeak-ng, or phonemes to splice in.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Text(String),
    Ipa(String),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lexicon {
    entries: Vec<Entry>,
    /// Entry indices by their first word (lowercased).
    by_first_word: HashMap<String, Vec<usize>>,
    /// Entry index by what it matches (its words and case rule), so a replacing entry is found in
    /// constant time: a scan per insert made a 100 000-entry lexicon take minutes to load.
    by_match: HashMap<(Vec<String>, bool), usize>,
}

impl Lexicon {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Reads a lexicon file.
    pub fn load(path: &Path) -> Result<Lexicon, ScriptError> {
        let fail = |message: String| ScriptError {
            file: path.to_path_buf(),
            at: String::new(),
            message,
        };
        let meta =
            std::fs::metadata(path).map_err(|e| fail(format!("cannot read the lexicon: {e}")))?;
        if !meta.is_file() {
            return Err(fail(
                "is not a regular file; give the path of a lexicon .json".into(),
            ));
        }
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_LEXICON_BYTES + 1).read_to_string(&mut text))
            .map_err(|e| fail(format!("cannot read the lexicon as UTF-8 text: {e}")))?;
        if text.len() as u64 > MAX_LEXICON_BYTES {
            return Err(fail(
                "is larger than 16 MiB, the most a lexicon may have".into(),
            ));
        }
        let value = parse_json(&text, path)?;
        Lexicon::from_json(&value, path, "")
    }

    /// Entries from a JSON object; `at` is the JSON path of the object for messages.
    pub fn from_json(value: &Value, file: &Path, at: &str) -> Result<Lexicon, ScriptError> {
        let fail = |at: String, message: String| ScriptError {
            file: file.to_path_buf(),
            at,
            message,
        };
        let Some(obj) = value.as_object() else {
            return Err(fail(
                at.to_owned(),
                format!(
                    "must be an object from words to pronunciations, e.g. {{\"Nguyen\": \"win\", \"Siobhan\": {{\"ipa\": \"ʃɪvˈɔːn\"}}}}, found {}",
                    kind(value)
                ),
            ));
        };
        let mut lex = Lexicon::default();
        for (word, v) in obj {
            let here = if at.is_empty() {
                format!("{word:?}")
            } else {
                format!("{at}[{word:?}]")
            };
            let words: Vec<&str> = word.split_whitespace().collect();
            if words.is_empty() || word.chars().count() > MAX_KEY_CHARS {
                return Err(fail(
                    here,
                    format!("an entry must be a word or phrase of 1 to {MAX_KEY_CHARS} characters"),
                ));
            }
            let say = match v {
                Value::String(s) if !s.trim().is_empty() => Say::Respell(s.trim().to_owned()),
                Value::Object(o) => ipa_entry(o).map_err(|m| fail(here.clone(), m))?,
                _ => {
                    return Err(fail(
                        here,
                        format!(
                            "must be a respelling (\"win\") or {{\"ipa\": \"...\"}}, found {}",
                            kind(v)
                        ),
                    ));
                }
            };
            let exact_case = word.chars().any(char::is_uppercase);
            let words = words
                .iter()
                .map(|w| {
                    if exact_case {
                        (*w).to_owned()
                    } else {
                        w.to_lowercase()
                    }
                })
                .collect();
            lex.insert(Entry {
                word: word.clone(),
                say,
                file: file.to_path_buf(),
                exact_case,
                words,
            });
        }
        Ok(lex)
    }

    /// Adds `other`'s entries; an entry for the same words replaces the earlier one.
    pub fn merge(&mut self, other: Lexicon) {
        for e in other.entries {
            self.insert(e);
        }
    }

    fn insert(&mut self, entry: Entry) {
        let n = self.entries.len();
        match self.by_match.entry((entry.words.clone(), entry.exact_case)) {
            std::collections::hash_map::Entry::Occupied(i) => self.entries[*i.get()] = entry,
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(n);
                self.by_first_word
                    .entry(entry.words[0].to_lowercase())
                    .or_default()
                    .push(n);
                self.entries.push(entry);
            }
        }
    }

    /// The JSON object this lexicon reads from (for `talker script convert`).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for e in &self.entries {
            let v = match &e.say {
                Say::Respell(s) => Value::String(s.clone()),
                Say::Ipa(s) => serde_json::json!({ "ipa": s.nfc().collect::<String>() }),
            };
            m.insert(e.word.clone(), v);
        }
        Value::Object(m)
    }

    /// Checks every IPA entry against the voice's phoneme set, before any synthesis.
    pub fn check_symbols(
        &self,
        voice: &str,
        known: impl Fn(&str) -> bool,
    ) -> Result<(), ScriptError> {
        for e in &self.entries {
            let Say::Ipa(ipa) = &e.say else { continue };
            if let Some(c) = ipa
                .chars()
                .find(|c| !c.is_whitespace() && !known(&c.to_string()))
            {
                return Err(ScriptError {
                    file: e.file.clone(),
                    at: format!("lexicon entry {:?}", e.word),
                    message: format!(
                        "the IPA symbol {c:?} (U+{:04X}) is not in the phoneme set of voice {voice}; \
use the symbols espeak-ng prints for this voice (espeak-ng -v {voice} --ipa -q WORD) or a respelling",
                        c as u32
                    ),
                });
            }
        }
        Ok(())
    }

    /// The sentence with entries applied: respellings in place, IPA entries as their own pieces.
    /// Without a match the result is the sentence itself, one text piece.
    pub fn apply(&self, text: &str) -> Vec<Piece> {
        if self.entries.is_empty() {
            return vec![Piece::Text(text.to_owned())];
        }
        let words = word_spans(text);
        let mut pieces = Vec::new();
        let mut plain = String::new();
        let mut copied = 0;
        let mut i = 0;
        while i < words.len() {
            let Some((entry, n)) = self.longest_match(text, &words[i..]) else {
                i += 1;
                continue;
            };
            let (start, end) = (words[i].0, words[i + n - 1].1);
            plain.push_str(&text[copied..start]);
            match &entry.say {
                Say::Respell(s) => plain.push_str(s),
                Say::Ipa(ipa) => {
                    if !plain.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut plain)));
                    }
                    pieces.push(Piece::Ipa(ipa.clone()));
                }
            }
            copied = end;
            i += n;
        }
        plain.push_str(&text[copied..]);
        if !plain.is_empty() || pieces.is_empty() {
            pieces.push(Piece::Text(plain));
        }
        pieces
    }

    fn longest_match(&self, text: &str, words: &[(usize, usize)]) -> Option<(&Entry, usize)> {
        let first = text[words[0].0..words[0].1].to_lowercase();
        let candidates = self.by_first_word.get(&first)?;
        candidates
            .iter()
            .map(|&i| &self.entries[i])
            .filter(|e| {
                e.words.len() <= words.len()
                    && e.words.iter().zip(words).all(|(w, &(a, b))| {
                        let t = &text[a..b];
                        if e.exact_case {
                            t == w
                        } else {
                            t.to_lowercase() == *w
                        }
                    })
            })
            .max_by_key(|e| e.words.len())
            .map(|e| (e, e.words.len()))
    }
}

fn ipa_entry(o: &Map<String, Value>) -> Result<Say, String> {
    match (o.get("ipa"), o.len()) {
        (Some(Value::String(s)), 1) if !s.trim().is_empty() => {
            Ok(Say::Ipa(s.trim().nfd().collect()))
        }
        _ => Err(
            "an IPA entry is {\"ipa\": \"...\"} with the phonemes as espeak-ng writes them, and nothing else".into(),
        ),
    }
}

/// Byte spans of the words of `text`: runs of letters, digits, apostrophes and hyphens inside a word.
fn word_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        let inner = (c == '\'' || c == '’' || c == '-')
            && start.is_some()
            && chars.get(k + 1).is_some_and(|&(_, n)| n.is_alphanumeric());
        if c.is_alphanumeric() || inner {
            start.get_or_insert(i);
        } else if let Some(s) = start.take() {
            spans.push((s, i));
        }
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    spans
}

/// The text a phrase key is built from: the pieces, IPA marked so it cannot collide with text.
pub fn key_text(pieces: &[Piece]) -> String {
    let mut s = String::new();
    for p in pieces {
        match p {
            Piece::Text(t) => s.push_str(t),
            Piece::Ipa(i) => {
                s.push_str("[[");
                s.push_str(i);
                s.push_str("]]");
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex(json: &str) -> Lexicon {
        Lexicon::from_json(
            &serde_json::from_str(json).unwrap(),
            Path::new("l.json"),
            "",
        )
        .unwrap()
    }

    #[test]
    fn respellings_and_ipa_apply_to_whole_words() {
        let l = lex(r#"{"Nguyen": "win", "siobhan": {"ipa": "ʃɪvˈɔːn"}, "New York": "noo york"}"#);
        assert_eq!(
            l.apply("Mr Nguyen met Siobhan in New York, not Nguyenville."),
            [
                Piece::Text("Mr win met ".into()),
                Piece::Ipa("ʃɪvˈɔːn".nfd().collect()),
                Piece::Text(" in noo york, not Nguyenville.".into()),
            ]
        );
        assert_eq!(
            l.apply("nothing here"),
            [Piece::Text("nothing here".into())]
        );
    }

    #[test]
    fn case_rules() {
        let l = lex(r#"{"US": "you ess", "sql": "sequel"}"#);
        assert_eq!(
            l.apply("us and US; SQL, Sql"),
            [Piece::Text("us and you ess; sequel, sequel".into())]
        );
    }

    #[test]
    fn later_lexicons_win_and_longest_match_wins() {
        let mut a = lex(r#"{"Ada": "ay da", "Ada Lovelace": "the countess"}"#);
        a.merge(lex(r#"{"Ada": "ah da"}"#));
        assert_eq!(a.entries().len(), 2);
        assert_eq!(
            a.apply("Ada Lovelace and Ada."),
            [Piece::Text("the countess and ah da.".into())]
        );
    }

    #[test]
    fn bad_entries_name_the_entry() {
        let v: Value = serde_json::from_str(r#"{"x": 3}"#).unwrap();
        let e = Lexicon::from_json(&v, Path::new("s.json"), "lexicon").unwrap_err();
        assert_eq!(e.at, "lexicon[\"x\"]");
        let v: Value = serde_json::from_str(r#"{"x": {"ipa": "a", "say": "b"}}"#).unwrap();
        assert!(Lexicon::from_json(&v, Path::new("s.json"), "").is_err());
        let l = lex(r#"{"Zed": {"ipa": "zɛd☃"}}"#);
        let e = l.check_symbols("en-us", |s| s != "☃").unwrap_err();
        assert!(e.message.contains("'☃'"), "{e}");
        assert_eq!(e.at, "lexicon entry \"Zed\"");
    }

    #[test]
    fn devices_and_missing_files_are_refused() {
        let e = Lexicon::load(Path::new("/dev/zero")).unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
        let e = Lexicon::load(Path::new("/nonexistent/l.json")).unwrap_err();
        assert!(e.message.contains("cannot read"), "{e}");
    }

    #[test]
    fn key_text_marks_ipa() {
        assert_eq!(
            key_text(&[Piece::Text("a ".into()), Piece::Ipa("b".into())]),
            "a [[b]]"
        );
    }
}
