//! Fuzz target for the script parser.
//!
//! Input: arbitrary bytes as script text. Checks: `Script::parse` never panics, and whatever it accepts
//! obeys the documented limits (at least one segment, each with speakable text, speed 0.5–2, even size,
//! no control character in the title or a chapter).
#![no_main]

use libfuzzer_sys::fuzz_target;
use talker::script::Script;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Script::parse(text) {
        Ok(s) => {
            assert!(!s.segments.is_empty());
            assert!((0.5..=2.0).contains(&s.speed));
            assert!((1..=120).contains(&s.fps));
            if let Some((w, h)) = s.size {
                assert!(w % 2 == 0 && h % 2 == 0);
            }
            assert!(s.segments.iter().all(|seg| talker::text::is_speakable(&seg.text)));
            // Titles and chapters go into MP4 metadata: never a control character.
            let labels = s.title.iter().chain(s.segments.iter().filter_map(|g| g.chapter.as_ref()));
            assert!(labels.flat_map(|l| l.chars()).all(|c| !c.is_control()));
        }
        Err(e) => assert!(!e.message.is_empty()),
    }
});
