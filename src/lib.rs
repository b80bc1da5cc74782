//! talker: script + portrait → narrated talking-portrait MP4.
