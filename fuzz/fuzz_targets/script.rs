//! Fuzz target for the script parser.
//!
//! Input: arbitrary bytes as script text. Checks: `Script::parse` never panics, and whatever it accepts
//! obeys the documented limits (at least one segment, each with speakable text, speed 0.5–2, even size).
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
            assert!((10..=60).contains(&s.fps));
            if let Some((w, h)) = s.size {
                assert!(w % 2 == 0 && h % 2 == 0);
            }
            assert!(s.segments.iter().all(|seg| talker::text::is_speakable(&seg.text)));
        }
        Err(e) => assert!(!e.message.is_empty()),
    }
});
