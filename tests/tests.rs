//! Integration tests. They run on the real models that scripts/fetch-assets installs.

mod cache;
mod speech;
mod util;
