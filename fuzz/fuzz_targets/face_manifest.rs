//! Fuzzes the TensorFlow.js weights parser (`talker::face::tfjs_weights`).
//!
//! Input: arbitrary bytes, split by the first two (little-endian length) into manifest text
//! and shard bytes. Invariant checked: the parser returns `Ok` or `Err`, never panics or
//! over-allocates, and every decoded tensor holds exactly as many values as its shape says.

#![no_main]

use libfuzzer_sys::fuzz_target;
use talker::face::tfjs_weights;

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let split = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    let (manifest, bin) = rest.split_at(split);
    let Ok(manifest) = std::str::from_utf8(manifest) else {
        return;
    };
    let _ = tfjs_weights::shard_paths(manifest);
    if let Ok(map) = tfjs_weights::decode(manifest, bin) {
        for tensor in map.values() {
            assert_eq!(tensor.shape.iter().product::<usize>(), tensor.data.len());
        }
    }
});
