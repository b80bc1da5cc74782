//! talker: script + portrait → narrated talking-portrait MP4.

pub mod assets;
pub mod bench;
pub mod cache;
pub mod chunk;
pub mod error;
pub mod face;
pub mod lipsync;
pub mod look;
pub mod media;
pub mod phonemize;
pub mod pipeline;
pub mod plan;
pub mod preview;
pub mod progress;
pub mod queue;
pub mod render;
pub mod script;
pub mod speech;
pub mod text;
pub mod tts;
pub mod voice;

pub use error::{Error, Result};
