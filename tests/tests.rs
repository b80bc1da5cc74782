//! Integration tests. They run on the real models that scripts/fetch-assets installs.

mod speech;
mod util;
