//! Fuzz target for the engine file reader.
//!
//! Input: arbitrary bytes as the body of an engine file; the target adds the magic number and the
//! sha256 trailer so the sections behind the checksum get fuzzed too (a raw random file never
//! passes it). Checks: `EngineFile::from_bytes` never panics, a refusal names its reason, and a
//! file it accepts writes back to bytes that read back the same.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};
use talker::tts::cuda::engine::{EngineError, EngineFile, MAGIC};

fuzz_target!(|data: &[u8]| {
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(data);
    let digest = Sha256::digest(&bytes);
    bytes.extend_from_slice(&digest);
    match EngineFile::from_bytes(&bytes, Path::new("fuzz.engine")) {
        Ok(file) => {
            let out = file.to_bytes().expect("an accepted engine serialises");
            let again = EngineFile::from_bytes(&out, Path::new("fuzz.engine")).expect("round trip");
            assert_eq!(again, file);
        }
        Err(EngineError::Corrupt { reason, .. }) => assert!(!reason.is_empty()),
        Err(e) => panic!("reading bytes can only fail as corrupt: {e}"),
    }
});
