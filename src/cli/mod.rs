//! The binary's own code: arguments, the progress UI and the commands.

pub mod args;
#[cfg(feature = "render")]
pub mod audio;
pub mod commands;
pub mod common;
#[cfg(feature = "cuda")]
pub mod engine;
pub mod error;
#[cfg(feature = "render")]
pub mod queue;
#[cfg(feature = "render")]
pub mod render_cmds;
pub mod ui;
