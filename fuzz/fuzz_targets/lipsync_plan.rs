//! Fuzzes the lip-sync planner (`talker::lipsync::plan`) with arbitrary phone lists.
//!
//! Input: arbitrary bytes read as records of [IPA length (1 byte), IPA bytes (lossy UTF-8),
//! start (u32 LE), end (u32 LE)], the first two bytes giving the sample rate. Invariants
//! checked: no panic; the keys are contiguous, start at 0, have positive length and in-range
//! poses; `pose_at` is finite everywhere, before, inside and after the track.

#![no_main]

use libfuzzer_sys::fuzz_target;
use talker::lipsync::{Phone, plan};

fuzz_target!(|data: &[u8]| {
    let Some((rate, mut rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let rate = u32::from(u16::from_le_bytes(*rate));
    let mut phones = Vec::new();
    while let Some((&n, tail)) = rest.split_first() {
        let n = usize::from(n % 8).min(tail.len());
        let (ipa, tail) = tail.split_at(n);
        let Some((start, tail)) = tail.split_first_chunk::<4>() else {
            break;
        };
        let Some((end, tail)) = tail.split_first_chunk::<4>() else {
            break;
        };
        phones.push(Phone {
            ipa: String::from_utf8_lossy(ipa).into_owned(),
            start: u64::from(u32::from_le_bytes(*start)),
            end: u64::from(u32::from_le_bytes(*end)),
        });
        rest = tail;
    }
    let track = plan(&phones, rate);
    let keys = track.keys();
    if let Some(first) = keys.first() {
        assert_eq!(first.start, 0.0);
    }
    for w in keys.windows(2) {
        assert!((w[0].end - w[1].start).abs() < 1e-6, "gap between keys");
    }
    for k in keys {
        assert!(k.end > k.start, "empty key");
        assert_eq!(k.pose, k.pose.clamped(), "pose out of range");
    }
    let d = track.duration();
    for i in -2..=42 {
        let p = track.pose_at(d * f64::from(i) / 40.0);
        assert!(p.open.is_finite() && p.width.is_finite() && p.round.is_finite());
    }
});
