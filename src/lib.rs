//! talker: script + portrait → narrated talking-portrait MP4.

pub mod assets;
pub mod cache;
pub mod chunk;
pub mod error;
pub mod face;
pub mod lipsync;
pub mod media;
pub mod phonemize;
pub mod plan;
pub mod render;
pub mod script;
pub mod text;
pub mod tts;
pub mod voice;

pub use error::{Error, Result};
