//! The binary's own code: arguments, the progress UI and the commands.

pub mod args;
pub mod commands;
pub mod queue;
pub mod ui;
