//! Fuzz target for the ONNX graph patch the CPU voice runs through (`tts::graph_patch`, on the
//! shared protobuf reader `tts::wire`).
//!
//! Input: arbitrary bytes as an ONNX model. Checks: the patch never panics or allocates without
//! bound; patching is idempotent: a patched model patches again to the very same bytes and names
//! (the outputs it added are found and not added twice).
#![no_main]

use libfuzzer_sys::fuzz_target;
use talker::tts::graph_patch::add_alignment_outputs;

fuzz_target!(|data: &[u8]| {
    if let Ok((patched, names)) = add_alignment_outputs(data) {
        let (again, names_again) =
            add_alignment_outputs(&patched).expect("a patched model patches again");
        assert!(again == patched, "patching twice changed the model");
        assert_eq!(names, names_again);
    }
});
