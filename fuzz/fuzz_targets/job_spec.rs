//! Fuzz target for the job spec parser.
//!
//! Input: arbitrary bytes as spec text. Checks: `JobSpec::parse` never panics, and whatever it
//! accepts obeys the documented limits: the output is a relative `.mp4` path without `..`, the
//! size is even and 64–4096, fps 1–120, crf 0–51, priority ±1000, the preset is an x264 preset.
#![no_main]

use std::path::Component;

use libfuzzer_sys::fuzz_target;
use talker::media::X264_PRESETS;
use talker::queue::JobSpec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match JobSpec::parse(text) {
        Ok(s) => {
            assert!(
                s.output
                    .components()
                    .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
            );
            assert!(
                s.output
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("mp4"))
            );
            if let Some((w, h)) = s.settings.look.size {
                assert!(
                    w % 2 == 0
                        && h % 2 == 0
                        && (64..=4096).contains(&w)
                        && (64..=4096).contains(&h)
                );
            }
            assert!(s.settings.look.fps.is_none_or(|f| (1..=120).contains(&f)));
            assert!(s.settings.crf <= 51);
            assert!((-1000..=1000).contains(&s.priority));
            assert!(X264_PRESETS.contains(&s.settings.preset.as_str()));
        }
        Err(e) => assert!(!e.message.is_empty()),
    }
});
