//! Which cache a render uses: the shared directory, or (`--no-cache`, or a shared one that cannot
//! be opened) a private one beside the output that is removed however the render ends.

use std::path::{Path, PathBuf};

use super::{Cache, CacheError};
use crate::progress::{Event, Progress};

/// Where the cache lives for this render.
#[derive(Debug, Clone)]
pub enum CacheLocation {
    Dir(PathBuf),
    /// `--no-cache`: a private directory beside the output, removed afterwards.
    Temporary,
}

/// Removes the temporary cache directory however the render ends.
pub struct TempDir(Option<PathBuf>);

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Opens the render's cache. A shared cache that cannot be opened costs speed, not the render:
/// a warning, then a temporary cache.
pub fn open_cache(
    location: &CacheLocation,
    output: &Path,
    progress: &dyn Progress,
) -> Result<(Cache, TempDir), CacheError> {
    let temp = || {
        let parent = output
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        parent.join(format!(".talker-cache-{}", std::process::id()))
    };
    match location {
        CacheLocation::Dir(dir) => match Cache::open(dir) {
            Ok(c) => Ok((c, TempDir(None))),
            Err(e) => {
                progress.event(Event::Warning {
                    message: format!("{e}; rendering with a temporary cache"),
                });
                let dir = temp();
                Ok((Cache::open(&dir)?, TempDir(Some(dir))))
            }
        },
        CacheLocation::Temporary => {
            let dir = temp();
            Ok((Cache::open(&dir)?, TempDir(Some(dir))))
        }
    }
}

/// Shows what the cache found damaged (and repaired) as warnings.
pub fn report_warnings(cache: &Cache, progress: &dyn Progress) {
    for message in cache.take_warnings() {
        progress.event(Event::Warning { message });
    }
}
