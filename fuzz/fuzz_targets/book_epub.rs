//! Fuzz target for the EPUB reader (ZIP, container, OPF, nav/NCX, XHTML).
//!
//! Input: arbitrary bytes as an EPUB file. Checks: `read_epub_from` never panics and never reads
//! past its size caps; whatever it accepts becomes a script whose JSON parses back to the same
//! script, less its cover image (what `talker script convert` promises).
#![no_main]

use std::io::Cursor;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use talker::book::read_epub_from;
use talker::script::Script;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.epub");
    match read_epub_from(
        path,
        Cursor::new(data),
        &talker::book::BookOptions::default(),
    ) {
        Ok(book) => {
            if let Ok(script) = book.into_script(path) {
                let again =
                    Script::parse(&script.to_json().to_string()).expect("converted JSON parses");
                // The cover is an image, not part of the JSON (convert says so).
                assert_eq!(
                    again,
                    Script {
                        cover: None,
                        ..script
                    }
                );
            }
        }
        Err(e) => assert!(!e.message.is_empty()),
    }
});
