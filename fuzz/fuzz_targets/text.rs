//! Fuzz target for `talker::text`.
//!
//! Input: arbitrary bytes; invalid UTF-8 is skipped, the first byte also picks the piece length.
//! Checks: `normalize`, `split_sentences` and `is_speakable` never panic; the normalised text has no ASCII
//! digit; no piece is longer than the limit unless it is a single word; splitting keeps every word.
#![no_main]

use libfuzzer_sys::fuzz_target;
use talker::text::{is_speakable, normalize, split_sentences};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let max = data.first().map_or(80, |b| usize::from(*b));
    let norm = normalize(text);
    assert!(
        !norm.bytes().any(|b| b.is_ascii_digit()),
        "digit left in {norm:?}"
    );
    let pieces = split_sentences(&norm, max);
    for piece in &pieces {
        assert!(
            piece.chars().count() <= max || !piece.contains(' '),
            "piece too long: {piece:?}"
        );
    }
    let words: Vec<&str> = norm.split_whitespace().collect();
    let rejoined = pieces.join(" ");
    assert_eq!(rejoined.split_whitespace().collect::<Vec<_>>(), words);
    let _ = split_sentences(text, max);
    let _ = is_speakable(text);
});
