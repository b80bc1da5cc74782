//! Write-then-rename for every file this module produces.
//!
//! Input: the final path. Output: a hidden temp path beside it
//! (`.NAME.partial-HOST-PID-N`, same directory so the rename cannot cross file systems).
//! Invariants: the final path only ever receives a complete file (fsync file, rename,
//! fsync directory); a `PartialFile` dropped without `commit` deletes its temp file, so an
//! error or an early return leaves nothing behind. Only a kill -9 can leave a temp file,
//! never under the final name, and [`remove_stale_partials`] clears it on the next write.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::{MediaError, io};

/// This machine's name, so temp files of other hosts sharing a directory are never touched.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().replace(|c: char| !c.is_ascii_alphanumeric(), "_"))
        .unwrap_or_default()
}

/// Deletes temp files of `target` left by processes of this host that no longer run (a kill -9
/// mid-write). Returns how many were removed.
pub fn remove_stale_partials(target: &Path) -> usize {
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return 0;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!(".{}.partial-{}-", name.to_string_lossy(), host());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = file.strip_prefix(&prefix) else {
            continue;
        };
        let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        let alive = pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists());
        if pid.is_some() && !alive && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

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
            ".partial-{}-{}-{}",
            host(),
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

#[cfg(test)]
mod stale_tests {
    use super::*;

    #[test]
    fn only_dead_local_writers_are_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.mp4");
        let dead = dir
            .path()
            .join(format!(".out.mp4.partial-{}-999999999-0", host()));
        let mine = dir.path().join(format!(
            ".out.mp4.partial-{}-{}-0",
            host(),
            std::process::id()
        ));
        let other_host = dir.path().join(".out.mp4.partial-elsewhere-999999999-0");
        let other_file = dir
            .path()
            .join(format!(".other.mp4.partial-{}-999999999-0", host()));
        for f in [&dead, &mine, &other_host, &other_file] {
            std::fs::write(f, b"x").unwrap();
        }
        assert_eq!(remove_stale_partials(&target), 1);
        assert!(!dead.exists());
        assert!(mine.exists() && other_host.exists() && other_file.exists());
    }
}
