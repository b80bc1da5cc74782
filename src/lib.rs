//! talker: script + portrait → narrated talking-portrait MP4.

#[cfg(feature = "render")]
pub mod animate;
pub mod assets;
#[cfg(feature = "render")]
pub mod bench;
pub mod book;
pub mod cache;
pub mod cover;
pub mod error;
pub mod face;
#[cfg(feature = "render")]
pub mod guard;
pub mod json;
pub mod lexicon;
pub mod lipsync;
#[cfg(feature = "render")]
pub mod look;
#[cfg(feature = "render")]
pub mod media;
mod migrations;
#[cfg(feature = "render")]
pub mod phonemize;
#[cfg(feature = "render")]
pub mod pipeline;
#[cfg(feature = "render")]
pub mod plan;
pub mod pool;
#[cfg(feature = "render")]
pub mod prepare;
#[cfg(feature = "render")]
pub mod preview;
pub mod progress;
#[cfg(feature = "render")]
pub mod queue;
pub mod render;
#[cfg(feature = "render")]
pub mod report;
pub mod script;
#[cfg(feature = "render")]
pub mod settings;
#[cfg(feature = "render")]
pub mod slides;
#[cfg(feature = "render")]
pub mod speech;
#[cfg(feature = "render")]
pub mod split;
mod sqlite_file;
pub mod text;
pub mod tts;

pub use error::{Error, Result};
