//! Fuzz target for the ONNX parser and the planner behind the GPU engines.
//!
//! Input: arbitrary bytes as an ONNX model. Checks: `Model::parse` never panics, and a model it
//! accepts goes through `Plan::build` (which refuses what it cannot run) without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use talker::tts::cuda::onnx::Model;
use talker::tts::cuda::program::Plan;

fuzz_target!(|data: &[u8]| {
    if let Ok(model) = Model::parse(data) {
        let _ = Plan::build(&model);
    }
});
