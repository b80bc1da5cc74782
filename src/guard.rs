//! Checks on the paths a render reads and writes, made before any work.
//!
//! Inputs must be regular files: a FIFO would block `open()` (and the render would ignore its
//! signals), a device such as `/dev/zero` never ends. Outputs must be regular files too (new or
//! existing), and never one of the inputs however it is spelled (relative, absolute, a symlink or a
//! hard link: the same device and inode), since the output replaces what is there. The output's
//! directory must accept a new file, which is tried by creating one, so a read-only mount fails in
//! milliseconds instead of after the render.
//!
//! A queued job's output is also confined to its output root ([`confine`]): relative, no `..`, and
//! no symlink that leads out, checked at enqueue time and again by the worker before it writes.

use std::fs::{FileType, Metadata};
use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// What a file that is not a regular file is, for messages.
fn describe(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Refuses an input (`what` is "script", "portrait", ...) that is not a regular file. `stat` does
/// not open the file, so a FIFO is refused without blocking; a missing or unreadable file is left
/// to the input's own reader, which says what it expected there.
pub fn regular_input(path: &Path, what: &str) -> Result<()> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    if meta.is_file() {
        return Ok(());
    }
    let hint = if meta.is_dir() {
        format!("give the path of a {what} file inside it")
    } else {
        format!("copy the {what} to a regular file and give that path")
    };
    Err(Error::Usage(format!(
        "{what} {} is {}; {hint}",
        path.display(),
        describe(meta.file_type())
    )))
}

/// Refuses an output that is not a regular file or that is one of `inputs` (`(what, path)`), then
/// checks that its directory exists and takes a new file.
pub fn check_output(output: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
    check_written("output", output, inputs)
}

/// Every file a render writes, before any work: the output, its subtitle sidecar (never the
/// output itself) and neither of them inside the cache directory, whose database and chunk files
/// a render must not replace. Temp files go beside the output, in the directory checked here.
pub fn check_render_outputs(
    output: &Path,
    sidecar: Option<&Path>,
    inputs: &[(&str, &Path)],
    cache: Option<&Path>,
) -> Result<()> {
    check_output(output, inputs)?;
    if let Some(cache) = cache {
        outside_cache("output", output, cache)?;
    }
    let Some(sidecar) = sidecar else {
        return Ok(());
    };
    let same = sidecar == output
        || std::fs::metadata(sidecar)
            .ok()
            .zip(std::fs::metadata(output).ok())
            .is_some_and(|(a, b)| same_file(&a, &b));
    if same {
        return Err(Error::Usage(format!(
            "the subtitles would be written to {}, the output itself; give -o another extension (such as .mp4) or leave out --subtitles",
            sidecar.display()
        )));
    }
    check_written("subtitles file", sidecar, inputs)?;
    if let Some(cache) = cache {
        outside_cache("subtitles file", sidecar, cache)?;
    }
    Ok(())
}

/// [`check_output`] for any file written, named `what` in messages.
fn check_written(what: &str, path: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
    names_a_file(what, path)?;
    let parent = existing_parent(what, path)?;
    check_file(what, path, inputs)?;
    probe_directory(parent, path)
}

/// The directory `path` (written as `what`) goes in, which must exist.
fn existing_parent<'a>(what: &str, path: &'a Path) -> Result<&'a Path> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(Error::Usage(format!(
            "{what} directory {} (of {}) does not exist; create it or choose another -o path",
            parent.display(),
            path.display()
        )));
    }
    Ok(parent)
}

/// Creates the directory a `--split chapters` render writes into, when missing; its parent
/// must exist, as a single output's directory must.
pub fn create_output_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    existing_parent("output", dir)?;
    std::fs::create_dir(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// A path that ends in `/` or `..` names a directory, and the final rename would fail on it.
fn names_a_file(what: &str, path: &Path) -> Result<()> {
    let text = path.as_os_str().as_encoded_bytes();
    let dir_like = text.ends_with(b"/") || text.ends_with(b"/.") || path.file_name().is_none();
    if dir_like {
        return Err(Error::Usage(format!(
            "{what} {} names a directory; give a file name such as talk.mp4",
            path.display()
        )));
    }
    Ok(())
}

/// Refuses `path` (written as `what`) inside the cache directory `cache`, however spelled.
pub fn outside_cache(what: &str, path: &Path, cache: &Path) -> Result<()> {
    let Ok(cache_real) = cache.canonicalize() else {
        // No cache yet: nothing in it to destroy, and the output's directory exists.
        return Ok(());
    };
    let real = path.canonicalize().ok().or_else(|| {
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Some(parent.canonicalize().ok()?.join(path.file_name()?))
    });
    if real.is_some_and(|r| r.starts_with(&cache_real)) {
        return Err(Error::Usage(format!(
            "{what} {} is inside the cache directory {} (its database, chunks, engines and queue live there); choose a path outside it, or another --cache",
            path.display(),
            cache.display()
        )));
    }
    Ok(())
}

/// The part of [`check_output`] that needs no directory: an existing output must be a regular
/// file and none of `inputs`. The queue checks this at enqueue time, before the folders exist.
pub fn check_output_file(output: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
    names_a_file("output", output)?;
    check_file("output", output, inputs)
}

fn check_file(what: &str, output: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
    let Ok(meta) = std::fs::metadata(output) else {
        return Ok(());
    };
    if !meta.is_file() {
        return Err(Error::Usage(format!(
            "{what} {} is {}; only regular files are written: give a file name such as talk.mp4",
            output.display(),
            describe(meta.file_type())
        )));
    }
    for (input_what, input) in inputs {
        if std::fs::metadata(input).is_ok_and(|m| same_file(&m, &meta)) {
            return Err(Error::Usage(format!(
                "{what} {} is the {input_what} {} (the same file); writing it would destroy the input: choose another output path",
                output.display(),
                input.display()
            )));
        }
    }
    Ok(())
}

/// The file a JSON script's `lexicon` field names (relative to the script), an input that no
/// output may replace and that a job's content hash covers. Books name none.
pub fn script_lexicon(script: &Path) -> Option<PathBuf> {
    let value = script_json(script)?;
    let name = value.get("lexicon")?.as_str()?;
    if name.trim().is_empty() {
        return None;
    }
    Some(script.parent().unwrap_or(Path::new("")).join(name))
}

/// The voice files (each `.onnx` and its `.onnx.json`) a JSON script names by path, in its
/// `voice` or a segment's (relative to the script), each once: inputs that no output may replace
/// and that a job's content hash covers. A voice named by name lives in the assets' `voices/`,
/// as `--voice` names it; books name none.
pub fn script_voices(script: &Path) -> Vec<PathBuf> {
    let Some(value) = script_json(script) else {
        return Vec::new();
    };
    let segments = value.get("segments").and_then(|s| s.as_array());
    let named = std::iter::once(value.get("voice"))
        .chain(segments.into_iter().flatten().map(|s| s.get("voice")))
        .flatten()
        .filter_map(|v| v.as_str())
        .filter(|v| crate::tts::voice::VoiceFiles::is_path(v));
    let base = script.parent().unwrap_or(Path::new(""));
    let mut files: Vec<PathBuf> = Vec::new();
    for voice in named {
        let model = base.join(voice);
        if !files.contains(&model) {
            let mut config = model.clone().into_os_string();
            config.push(".json");
            files.extend([model, config.into()]);
        }
    }
    files
}

/// A JSON script's value, for the files it names; `None` for a book or an unreadable script.
fn script_json(script: &Path) -> Option<serde_json::Value> {
    // `detect` opens the file: only a regular one, which cannot block.
    if !std::fs::metadata(script).is_ok_and(|m| m.is_file())
        || crate::book::InputKind::detect(script) != crate::book::InputKind::Json
    {
        return None;
    }
    let bytes = crate::script::read_input(script, crate::script::MAX_SCRIPT_BYTES).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    serde_json::from_str(text.strip_prefix('\u{feff}').unwrap_or(text)).ok()
}

/// A queued job's output, relative to its output root: no `..`, not absolute, a file name with
/// the extension of a kind talker writes (`.mp4`, `.m4b`, `.m4a`, `.wav`, `.mp3`). Symlinks are
/// checked by [`confine`].
pub fn relative_output(output: &Path) -> std::result::Result<(), String> {
    let known = output
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| {
            crate::media::OUTPUT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str())
        });
    if normal_components(output)? == 0 || !known {
        return Err(
            "must name an .mp4, .m4b, .m4a, .wav or .mp3 file, e.g. \"series/episode-01.mp4\" or \"books/emma.m4b\""
                .into(),
        );
    }
    Ok(())
}

/// A path relative to the output root: no `..`, not absolute, not empty (a queued job's output,
/// or the directory of a split job's files).
pub fn relative_path(output: &Path) -> std::result::Result<(), String> {
    if normal_components(output)? == 0 {
        return Err("is empty; give a path relative to the output root (--out-root)".into());
    }
    Ok(())
}

/// How many names `output` has, refusing `..` and absolute paths.
fn normal_components(output: &Path) -> std::result::Result<usize, String> {
    let mut normal = 0;
    for c in output.components() {
        match c {
            Component::Normal(_) => normal += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(
                    "contains \"..\"; outputs stay inside the output root (--out-root)".into(),
                );
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(
                    "is an absolute path; give a path relative to the output root (--out-root)"
                        .into(),
                );
            }
        }
    }
    Ok(normal)
}

/// Canonicalises the output root, creating it when missing (so `--out-root` may name a new folder).
pub fn canonical_root(root: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(root)?;
    root.canonicalize()
}

/// Where `rel` lands under the canonical `root`, or why it would leave it: the deepest part of
/// the path that exists (a symlink included) must resolve to somewhere inside the root.
pub fn confine(root: &Path, rel: &Path) -> std::result::Result<PathBuf, String> {
    confine_as(root, rel, false)
}

/// [`confine`] for a directory of outputs (a split job's): an existing one must be a directory.
pub fn confine_dir(root: &Path, rel: &Path) -> std::result::Result<PathBuf, String> {
    confine_as(root, rel, true)
}

fn confine_as(root: &Path, rel: &Path, dir: bool) -> std::result::Result<PathBuf, String> {
    relative_path(rel)?;
    let full = root.join(rel);
    let mut existing = full.clone();
    loop {
        match std::fs::symlink_metadata(&existing) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !existing.pop() {
                    return Err(format!("{} does not exist", root.display()));
                }
            }
            Err(e) => return Err(format!("{}: {e}", existing.display())),
        }
    }
    let real = existing.canonicalize().map_err(|e| {
        format!(
            "{} cannot be resolved ({e}); a dangling symlink is not a place to write",
            existing.display()
        )
    })?;
    if !real.starts_with(root) {
        return Err(format!(
            "{} leads outside the output root {} (to {}); symlinks out of the root are refused",
            existing.display(),
            root.display(),
            real.display()
        ));
    }
    if existing == full && real.is_dir() != dir {
        let what = if dir {
            "is not a directory; a split job writes a directory of chapter files"
        } else {
            "is a directory"
        };
        return Err(format!("{} {what}", full.display()));
    }
    Ok(full)
}

fn same_file(a: &Metadata, b: &Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Creates and removes a file beside `output`, the way the render's temp file will be created.
fn probe_directory(dir: &Path, output: &Path) -> Result<()> {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let probe = dir.join(format!(".{name}.talker-check-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            Err(Error::Usage(format!(
                "output directory {} is not writable ({e}); choose another -o path",
                dir.display()
            )))
        }
        Err(e) => Err(Error::Io {
            path: dir.to_path_buf(),
            source: e,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_that_is_an_input_is_refused_however_spelled() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let script = d.join("s.json");
        std::fs::write(&script, "{}").unwrap();
        std::os::unix::fs::symlink(&script, d.join("link.mp4")).unwrap();
        std::fs::hard_link(&script, d.join("hard.mp4")).unwrap();
        let inputs = [("script", script.as_path())];
        for out in [
            script.clone(),
            d.join(".").join("s.json"),
            d.join("link.mp4"),
            d.join("hard.mp4"),
        ] {
            let e = check_output(&out, &inputs).unwrap_err().to_string();
            assert!(e.contains("is the script"), "{}: {e}", out.display());
        }
        check_output(&d.join("new.mp4"), &inputs).unwrap();
        assert_eq!(
            std::fs::read_dir(d).unwrap().count(),
            3,
            "the probe is removed"
        );
    }

    #[test]
    fn sidecars_directory_names_and_the_cache_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let script = d.join("talk.srt");
        std::fs::write(&script, "{}").unwrap();
        let inputs = [("script", script.as_path())];
        let out = d.join("talk.mp4");
        let e = check_render_outputs(&out, Some(&script), &inputs, None).unwrap_err();
        assert!(e.to_string().contains("subtitles file"), "{e}");
        let e = check_render_outputs(&script, Some(&script), &[], None).unwrap_err();
        assert!(e.to_string().contains("the output itself"), "{e}");
        for bad in ["x.mp4/", "x/.", "."] {
            let e = check_output(&d.join(bad), &[]).unwrap_err().to_string();
            assert!(e.contains("names a directory"), "{bad}: {e}");
        }
        let cache = d.join("cache");
        std::fs::create_dir_all(cache.join("chunks")).unwrap();
        for inside in [
            "cache/cache.sqlite",
            "cache/chunks/a.mp4",
            "cache/../cache/x.mp4",
        ] {
            let e = check_render_outputs(&d.join(inside), None, &[], Some(&cache)).unwrap_err();
            assert!(e.to_string().contains("inside the cache"), "{inside}: {e}");
        }
        check_render_outputs(&out, Some(&d.join("talk.vtt")), &inputs, Some(&cache)).unwrap();
    }

    #[test]
    fn special_files_are_neither_inputs_nor_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = regular_input(&fifo, "script").unwrap_err().to_string();
        assert!(e.contains("FIFO"), "{e}");
        let e = check_output(&fifo, &[]).unwrap_err().to_string();
        assert!(e.contains("only regular files"), "{e}");
        let e = check_output(Path::new("/dev/null"), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("character device"), "{e}");
        let e = regular_input(dir.path(), "portrait")
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a directory"), "{e}");
    }

    #[test]
    fn confinement_refuses_symlinks_out_of_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = canonical_root(&dir.path().join("out")).unwrap();
        let outside = dir.path().join("elsewhere");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
        std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling.mp4")).unwrap();
        std::fs::create_dir(root.join("inside")).unwrap();
        std::os::unix::fs::symlink(root.join("inside"), root.join("alias")).unwrap();

        assert!(
            confine(&root, Path::new("escape/a.mp4"))
                .unwrap_err()
                .contains("outside")
        );
        assert!(confine(&root, Path::new("escape/deeper/a.mp4")).is_err());
        assert!(
            confine(&root, Path::new("dangling.mp4"))
                .unwrap_err()
                .contains("dangling")
        );
        assert!(confine(&root, Path::new("../a.mp4")).is_err());
        assert_eq!(
            confine(&root, Path::new("alias/a.mp4")).unwrap(),
            root.join("alias/a.mp4")
        );
        assert_eq!(
            confine(&root, Path::new("new/dir/a.mp4")).unwrap(),
            root.join("new/dir/a.mp4")
        );
        std::fs::create_dir(root.join("d.mp4")).unwrap();
        assert!(
            confine(&root, Path::new("d.mp4"))
                .unwrap_err()
                .contains("directory")
        );
    }

    /// A split job's directory: new or an existing directory inside the root, never a file there
    /// nor a way out.
    #[test]
    fn a_split_jobs_directory_is_confined_too() {
        let dir = tempfile::tempdir().unwrap();
        let root = canonical_root(&dir.path().join("out")).unwrap();
        std::fs::create_dir(root.join("books")).unwrap();
        std::fs::write(root.join("file"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join("escape")).unwrap();
        assert_eq!(
            confine_dir(&root, Path::new("books")).unwrap(),
            root.join("books")
        );
        assert!(confine_dir(&root, Path::new("books/new")).is_ok());
        let e = confine_dir(&root, Path::new("file")).unwrap_err();
        assert!(e.contains("is not a directory"), "{e}");
        assert!(confine_dir(&root, Path::new("escape")).is_err());
        let e = relative_path(Path::new(".")).unwrap_err();
        assert!(e.contains("is empty"), "{e}");
    }
}
