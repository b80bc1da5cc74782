//! Integration tests. They run on the real models that scripts/fetch-assets installs.

mod bad_input;
mod cache;
#[cfg(feature = "cuda")]
mod gpu;
mod lipsync;
mod render;
mod speech;
mod util;
