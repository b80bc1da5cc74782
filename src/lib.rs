//! talker: script + portrait → narrated talking-portrait MP4.

pub mod assets;
pub mod cache;
pub mod error;
pub mod face;
pub mod lipsync;
pub mod media;
pub mod phonemize;
pub mod render;
pub mod text;
pub mod tts;
pub mod voice;

pub use error::{Error, Result};
