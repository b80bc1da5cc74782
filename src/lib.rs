//! talker: script + portrait → narrated talking-portrait MP4.
pub mod media;
