//! talker: script + portrait → narrated talking-portrait MP4.

pub mod lipsync;
pub mod render;
