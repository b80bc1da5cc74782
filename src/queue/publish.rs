//! Publishing a job's files together: an output and its subtitle sidecar appear as one set, or the
//! set a crash interrupted is finished by whoever takes the job next.
//!
//! Input: the files an attempt rendered into its own stage folder beside the output
//! (`.NAME.job<ID>-<TOKEN>.d/`), under their final names. Output: the files in place, and what was
//! published ([`OutputFile`]: path, size, sha256) for the job's result.
//! Invariants: a manifest (`.NAME.publish` beside the output, written atomically) names every
//! staged file and its destination before the first rename; renames follow its order, and a
//! rename whose staged file is gone already happened. So a crash between two renames leaves a
//! manifest that the next attempt at that output (the job's own retry, or the next job for the
//! output: one output has one live job at a time) applies before anything else
//! ([`roll_forward`]): the set it leaves is one render's, never old and new files mixed. A
//! manifest is only ever applied to the destinations the job writes, from stage folders of
//! that output.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::spec::file_sha256;

/// Manifests name a handful of files; a larger file is not one.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// One published file, as recorded in the job's result and checked by `talker batch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputFile {
    pub path: PathBuf,
    pub bytes: u64,
    pub sha256: String,
}

impl OutputFile {
    /// Whether the file is still what was published: same size, same sha256.
    pub fn is_intact(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| m.is_file() && m.len() == self.bytes)
            && file_sha256(&self.path).is_ok_and(|h| h == self.sha256)
    }
}

/// One rename of the set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Move {
    from: PathBuf,
    to: OutputFile,
}

/// The set of renames that publishes one render.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The attempt's stage folder, removed once every file is in place.
    stage: PathBuf,
    moves: Vec<Move>,
}

/// `NAME.job<ID>-<first 16 of TOKEN>`, or without the token: the part every attempt shares.
pub fn temp_tag(output: &Path, id: i64, token: &str) -> String {
    format!(
        "{}.job{id}-{}",
        file_name(output),
        &token[..16.min(token.len())]
    )
}

fn file_name(output: &Path) -> String {
    output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// This attempt's stage folder beside the output.
pub fn stage_dir(output: &Path, id: i64, token: &str) -> PathBuf {
    output.with_file_name(format!(".{}.d", temp_tag(output, id, token)))
}

/// The output's manifest beside it: whoever renders that output next finds it.
pub fn manifest_path(output: &Path) -> PathBuf {
    output.with_file_name(format!(".{}.publish", file_name(output)))
}

impl Manifest {
    /// The set `staged` → `outputs` (pairwise, in publishing order), each staged file measured.
    pub fn new(stage: &Path, staged: &[PathBuf], outputs: &[PathBuf]) -> std::io::Result<Manifest> {
        let moves = staged
            .iter()
            .zip(outputs)
            .map(|(from, to)| {
                Ok(Move {
                    from: from.clone(),
                    to: OutputFile {
                        path: to.clone(),
                        bytes: std::fs::metadata(from)?.len(),
                        sha256: file_sha256(from)?,
                    },
                })
            })
            .collect::<std::io::Result<_>>()?;
        Ok(Manifest {
            stage: stage.to_path_buf(),
            moves,
        })
    }

    /// What the set publishes.
    pub fn files(&self) -> Vec<OutputFile> {
        self.moves.iter().map(|m| m.to.clone()).collect()
    }

    /// Writes the manifest atomically (temp file, fsync, rename, fsync of the folder).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut temp = tempfile::NamedTempFile::new_in(dir)?;
        temp.write_all(&serde_json::to_vec(self).map_err(std::io::Error::other)?)?;
        temp.as_file().sync_all()?;
        temp.persist(path).map_err(|e| e.error)?;
        sync_dir(dir)
    }

    /// Moves every staged file still in the stage onto its destination, in order; a staged
    /// file that is gone was moved already. Then the stage folder and the manifest go.
    pub fn apply(&self, manifest: &Path) -> std::io::Result<()> {
        for m in &self.moves {
            if std::fs::symlink_metadata(&m.from).is_ok() {
                std::fs::rename(&m.from, &m.to.path)?;
            } else if !m.to.path.is_file() {
                return Err(std::io::Error::other(format!(
                    "{} is neither staged nor in place",
                    m.to.path.display()
                )));
            }
        }
        for dir in self.moves.iter().filter_map(|m| m.to.path.parent()) {
            sync_dir(dir)?;
        }
        let _ = std::fs::remove_dir_all(&self.stage);
        std::fs::remove_file(manifest)
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Finishes a set an earlier attempt began publishing to `outputs` and did not end (a crash
/// between two renames). Returns whether it did; a set that lost a file (neither staged nor in
/// place) cannot be finished, and its manifest is dropped. A manifest that names other
/// destinations than `outputs`, or staged files outside the output's stage folders, is not this
/// job's to apply: it is refused, and nothing is moved.
pub fn roll_forward(outputs: &[PathBuf]) -> std::io::Result<bool> {
    let Some(output) = outputs.first() else {
        return Ok(false);
    };
    let path = manifest_path(output);
    let text = match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
        // A manifest names a few files; anything larger (or not a file) is not one.
        Ok(m) if !m.is_file() || m.len() > MAX_MANIFEST_BYTES => {
            return Err(std::io::Error::other(format!(
                "{} is not a publish manifest; remove it",
                path.display()
            )));
        }
        Ok(_) => std::fs::read(&path)?,
    };
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| std::io::Error::other(format!("{} cannot be read: {e}", path.display())))?;
    let stages = format!(".{}.job", file_name(output));
    let ours = |p: &Path| {
        p.parent().and_then(Path::file_name).is_some_and(|d| {
            let d = d.to_string_lossy();
            d.starts_with(&stages) && d.ends_with(".d")
        }) && p.parent().and_then(Path::parent) == output.parent()
    };
    let destinations: Vec<&PathBuf> = manifest.moves.iter().map(|m| &m.to.path).collect();
    let own = destinations.iter().all(|d| outputs.contains(d))
        && manifest.moves.iter().all(|m| ours(&m.from))
        && manifest.stage.parent() == output.parent();
    if !own {
        return Err(std::io::Error::other(format!(
            "{} names files that are not this job's; remove it",
            path.display()
        )));
    }
    let lost = manifest
        .moves
        .iter()
        .any(|m| std::fs::symlink_metadata(&m.from).is_err() && !m.to.path.is_file());
    if lost {
        // A file of the set is gone from both places: the set cannot be finished. The caller
        // renders and publishes a whole set anew, which replaces every file.
        let _ = std::fs::remove_dir_all(&manifest.stage);
        std::fs::remove_file(&path)?;
        return Ok(false);
    }
    manifest.apply(&path)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job with two files (video and sidecar), published over an older pair.
    fn setup(dir: &Path, token: &str) -> (Vec<PathBuf>, Vec<PathBuf>, PathBuf) {
        let outputs = vec![dir.join("talk.mp4"), dir.join("talk.srt")];
        let stage = stage_dir(&outputs[0], 7, token);
        std::fs::create_dir_all(&stage).unwrap();
        let staged: Vec<PathBuf> = outputs
            .iter()
            .map(|o| stage.join(o.file_name().unwrap()))
            .collect();
        for (s, o) in staged.iter().zip(&outputs) {
            std::fs::write(o, b"old").unwrap();
            std::fs::write(s, format!("new {}", o.display())).unwrap();
        }
        (outputs, staged, stage)
    }

    fn contents(files: &[PathBuf]) -> Vec<String> {
        files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect()
    }

    #[test]
    fn a_set_is_published_whole_and_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let (outputs, staged, stage) = setup(dir.path(), "0123456789abcdef0123");
        let manifest = Manifest::new(&stage, &staged, &outputs).unwrap();
        let path = manifest_path(&outputs[0]);
        manifest.write(&path).unwrap();
        manifest.apply(&path).unwrap();
        assert!(contents(&outputs).iter().all(|c| c.starts_with("new")));
        assert!(!path.exists() && !stage.exists());
        assert!(manifest.files().iter().all(OutputFile::is_intact));
        std::fs::write(&outputs[1], b"edited").unwrap();
        assert!(!manifest.files()[1].is_intact());
        assert!(!roll_forward(&outputs).unwrap(), "no manifest left");
    }

    /// The crash the manifest exists for: the first file renamed, the process gone before the
    /// second. The next attempt's roll-forward leaves both files of the one render.
    #[test]
    fn a_crash_between_two_renames_is_finished_by_the_next_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let (outputs, staged, stage) = setup(dir.path(), "0123456789abcdef0123");
        let manifest = Manifest::new(&stage, &staged, &outputs).unwrap();
        manifest.write(&manifest_path(&outputs[0])).unwrap();
        std::fs::rename(&staged[0], &outputs[0]).unwrap();
        assert_eq!(
            contents(&outputs)[1],
            "old",
            "a mixed set before the resume"
        );

        assert!(roll_forward(&outputs).unwrap());
        let now = contents(&outputs);
        assert!(now.iter().all(|c| c.starts_with("new")), "{now:?}");
        assert!(manifest.files().iter().all(OutputFile::is_intact));
        assert!(!stage.exists() && !manifest_path(&outputs[0]).exists());
    }

    #[test]
    fn a_manifest_that_is_not_the_jobs_moves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (outputs, staged, stage) = setup(dir.path(), "0123456789abcdef0123");
        let victim = dir.path().join("script.json");
        std::fs::write(&victim, b"input").unwrap();
        let manifest =
            Manifest::new(&stage, &staged, &[outputs[0].clone(), victim.clone()]).unwrap();
        manifest.write(&manifest_path(&outputs[0])).unwrap();
        let e = roll_forward(&outputs).unwrap_err();
        assert!(e.to_string().contains("not this job's"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"input");
        assert_eq!(contents(&outputs), ["old", "old"]);

        std::fs::write(manifest_path(&outputs[0]), vec![b' '; 2 << 20]).unwrap();
        let e = roll_forward(&outputs).unwrap_err();
        assert!(e.to_string().contains("not a publish manifest"), "{e}");
        std::fs::write(manifest_path(&outputs[0]), b"{").unwrap();
        let e = roll_forward(&outputs).unwrap_err();
        assert!(e.to_string().contains("cannot be read"), "{e}");
    }

    /// A staged file that is gone while its destination is missing too cannot be published:
    /// the set is incomplete, and that is said rather than passed over.
    #[test]
    fn a_set_missing_a_file_is_not_called_published() {
        let dir = tempfile::tempdir().unwrap();
        let (outputs, staged, stage) = setup(dir.path(), "0123456789abcdef0123");
        let manifest = Manifest::new(&stage, &staged, &outputs).unwrap();
        std::fs::remove_file(&staged[1]).unwrap();
        std::fs::remove_file(&outputs[1]).unwrap();
        let path = manifest_path(&outputs[0]);
        manifest.write(&path).unwrap();
        let e = manifest.apply(&path).unwrap_err();
        assert!(e.to_string().contains("neither staged nor in place"), "{e}");
        assert!(path.exists(), "the manifest stays for the next attempt");
        assert!(!roll_forward(&outputs).unwrap(), "which cannot finish it");
        assert!(
            !path.exists() && !stage.exists(),
            "and drops it, to publish anew"
        );
    }
}
