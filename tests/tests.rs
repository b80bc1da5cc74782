//! Integration tests. They run on the real models that scripts/fetch-assets installs.

mod audio;
mod bad_input;
mod books;
mod cache;
mod cover;
#[cfg(feature = "cuda")]
mod gpu;
mod guards;
mod layouts;
mod lipsync;
mod portraits;
mod queue;
mod render;
mod resume;
mod speech;
mod split;
mod util;
mod voices;
mod writes;
