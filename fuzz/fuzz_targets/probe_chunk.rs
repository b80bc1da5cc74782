//! Fuzzes `media::probe_chunk`, the parser a resume runs on checkpointed chunk files.
//!
//! Input: arbitrary bytes written to a temp file. Output: nothing; the property is that
//! probing never panics, hangs or allocates without bound, whatever the file holds.
//! Seeds: fuzz/seeds/probe_chunk/ holds a real chunk written by `ChunkWriter`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("talker-fuzz-chunk-{}.mkv", std::process::id()));
    if std::fs::write(&path, data).is_ok() {
        let _ = talker::media::probe_chunk(&path);
    }
});
