//! Fuzz target for the plain-text reader (encoding check included).
//!
//! Input: arbitrary bytes as a .txt file. Checks: non-UTF-8 is an error naming a line, never a
//! panic; UTF-8 text gives speakable segments whose script's JSON parses back to the same script.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use talker::book::{read_text, utf8};
use talker::script::Script;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.txt");
    let text = match utf8(path, data.to_vec()) {
        Ok(t) => t,
        Err(e) => {
            assert!(e.at.starts_with("line "));
            return;
        }
    };
    let book = read_text(path, &text).expect("text always reads");
    assert!(book.segments.iter().all(|s| talker::text::is_speakable(&s.text)));
    if let Ok(script) = book.into_script(path) {
        let again = Script::parse(&script.to_json().to_string()).expect("converted JSON parses");
        assert_eq!(again, script);
    }
});
