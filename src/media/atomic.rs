//! Write-then-rename for every file this module produces.
//!
//! Input: the final path. Output: a hidden temp path beside it
//! (`.NAME.partial-PID-N`, same directory so the rename cannot cross file systems).
//! Invariants: the final path only ever receives a complete file (fsync file, rename,
//! fsync directory); a `PartialFile` dropped without `commit` deletes its temp file, so an
//! error or an early return leaves nothing behind. Only a kill -9 can leave a temp file,
//! and never under the final name.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::{MediaError, io};

/// Distinguishes two writers in one process aiming at the same target.
static SERIAL: AtomicU64 = AtomicU64::new(0);

/// A temp file that becomes `target` on `commit` and disappears otherwise.
#[derive(Debug)]
pub(crate) struct PartialFile {
    partial: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl PartialFile {
    /// Picks the temp name; creates nothing (ffmpeg opens the file itself).
    pub(crate) fn new(target: &Path) -> Result<PartialFile, MediaError> {
        let name = target.file_name().ok_or_else(|| MediaError::Io {
            path: target.to_path_buf(),
            step: "choose temp file name",
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "path has no file name"),
        })?;
        let mut temp = OsString::from(".");
        temp.push(name);
        temp.push(format!(
            ".partial-{}-{}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        Ok(PartialFile {
            partial: target.with_file_name(temp),
            target: target.to_path_buf(),
            committed: false,
        })
    }

    /// Where the data is written until `commit`.
    pub(crate) fn path(&self) -> &Path {
        &self.partial
    }

    /// Makes the finished temp file durable and moves it to the target.
    ///
    /// The caller must have closed its own handle (all data handed to the kernel).
    /// Returns the file size.
    pub(crate) fn commit(mut self) -> Result<u64, MediaError> {
        let file = io(&self.partial, "open for fsync", File::open(&self.partial))?;
        let meta = io(
            &self.partial,
            "fsync",
            file.sync_all().and_then(|()| file.metadata()),
        )?;
        drop(file);
        io(
            &self.target,
            "rename temp file onto target",
            std::fs::rename(&self.partial, &self.target),
        )?;
        self.committed = true;
        let dir = match self.target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let dir_handle = io(dir, "open directory for fsync", File::open(dir))?;
        io(dir, "fsync directory", dir_handle.sync_all())?;
        Ok(meta.len())
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.committed {
            // Nothing useful can be done with a failure here: the file may never have been
            // created (ffmpeg failed to open it), which is the common case.
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}
