//! Fuzz target for the Markdown reader.
//!
//! Input: arbitrary UTF-8 as a Markdown file. Checks: `read_markdown` never panics; every segment
//! it makes is speakable, and the script's JSON parses back to the same script.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use talker::book::read_markdown;
use talker::script::Script;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz.md");
    let book = read_markdown(path, text, &talker::book::BookOptions::default())
        .expect("Markdown always parses");
    assert!(
        book.segments
            .iter()
            .all(|s| talker::text::is_speakable(&s.text))
    );
    if let Ok(script) = book.into_script(path) {
        let again = Script::parse(&script.to_json().to_string()).expect("converted JSON parses");
        assert_eq!(again, script);
    }
});
