//! Job specs: a JSON file → a validated [`JobSpec`] → a resolved [`Job`] with its content hash.
//!
//! Input: the spec file (format in the README, "Jobs and workers") and the output root.
//! Output: a [`Job`] with absolute input paths, an output path relative to a canonical root, and a
//! sha256 content hash over the job, the script's and portrait's bytes and the talker version.
//! Invariants: unknown fields are refused with a "did you mean" hint and every error names the
//! file and the field; `script` and `portrait` are relative to the spec file; `output` is relative
//! to the output root and confined to it (`..`, absolute paths and symlinks that lead outside are
//! refused), checked again by the worker before it writes, because a shared queue's rows are
//! only as trustworthy as everyone who can write to the database.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::assets::Assets;
use crate::look::Framing;
use crate::media::X264_PRESETS;
use crate::pipeline::{CacheLocation, RenderOptions};
use crate::script::{Script, did_you_mean, kind, read_input};
use crate::tts::select::SpeechSetup;

/// Specs are a few hundred bytes; anything this large is not one.
const MAX_SPEC_BYTES: u64 = 1 << 20;
const FIELDS: &[&str] = &[
    "script", "portrait", "output", "voice", "size", "fps", "framing", "still", "seed", "crf",
    "preset", "priority",
];
/// Bumped when the meaning of a resolved job changes, so old hashes stop matching.
const HASH_DOMAIN: &str = "talker-job-v1";

/// A spec that cannot be used: which file, which field, what to do.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    pub file: PathBuf,
    /// The field (`size[1]`), `line L, column C` for syntax errors, or empty for the whole file.
    pub at: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at.is_empty() {
            write!(f, "job spec {}: {}", self.file.display(), self.message)
        } else {
            write!(
                f,
                "job spec {}: {}: {}",
                self.file.display(),
                self.at,
                self.message
            )
        }
    }
}

impl std::error::Error for SpecError {}

/// How the frame is composed; mirrors [`Framing`] with a stable serialised name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SpecFraming {
    #[default]
    Full,
    Head,
}

/// What a spec file says, checked but not yet tied to the file system.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub script: PathBuf,
    pub portrait: PathBuf,
    pub output: PathBuf,
    pub voice: Option<String>,
    pub size: Option<(u32, u32)>,
    pub fps: Option<u32>,
    pub framing: SpecFraming,
    pub still: bool,
    pub seed: u64,
    pub crf: u8,
    pub preset: String,
    pub priority: i32,
}

/// A job as stored in the queue: everything a worker on any host needs to render it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub script: PathBuf,
    pub portrait: PathBuf,
    /// The canonical output root the output was confined to at enqueue time.
    pub out_root: PathBuf,
    /// Relative to `out_root`, normal components only.
    pub output: PathBuf,
    pub voice: Option<String>,
    pub size: Option<(u32, u32)>,
    pub fps: Option<u32>,
    pub framing: SpecFraming,
    pub still: bool,
    pub seed: u64,
    pub crf: u8,
    pub preset: String,
    /// Not part of the content hash: it changes the order, not the video.
    pub priority: i32,
}

/// What a worker adds to a job to render it.
#[derive(Debug, Clone)]
pub struct RenderEnv {
    pub assets: Assets,
    pub cache: PathBuf,
    pub threads: usize,
    /// Backend and batching; the worker's renders share one speech service built from it.
    pub speech: SpeechSetup,
}

type Fail = (String, String);

fn fail<T>(at: &str, message: impl Into<String>) -> Result<T, Fail> {
    Err((at.to_owned(), message.into()))
}

impl JobSpec {
    /// Reads and validates a spec file.
    pub fn load(path: &Path) -> Result<JobSpec, SpecError> {
        let err = |message: String| SpecError {
            file: path.to_path_buf(),
            at: String::new(),
            message,
        };
        let bytes = read_input(path, MAX_SPEC_BYTES).map_err(|e| err(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            err(format!(
                "is not UTF-8 text (invalid byte at offset {}); save it as UTF-8",
                e.utf8_error().valid_up_to()
            ))
        })?;
        JobSpec::parse(&text).map_err(|mut e| {
            e.file = path.to_path_buf();
            e
        })
    }

    /// Parses spec text; errors carry an empty `file` that [`JobSpec::load`] fills in.
    pub fn parse(text: &str) -> Result<JobSpec, SpecError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let to_err = |(at, message): Fail| SpecError {
            file: PathBuf::new(),
            at,
            message,
        };
        let value: Value = serde_json::from_str(text).map_err(|e| {
            to_err((
                format!("line {}, column {}", e.line(), e.column()),
                format!("invalid JSON: {e}"),
            ))
        })?;
        parse_value(&value).map_err(to_err)
    }
}

fn parse_value(v: &Value) -> Result<JobSpec, Fail> {
    let Some(obj) = v.as_object() else {
        return fail("", format!("must be a JSON object, found {}", kind(v)));
    };
    for key in obj.keys() {
        if !FIELDS.contains(&key.as_str()) {
            let hint = did_you_mean(key, FIELDS)
                .map(|s| format!("did you mean \"{s}\"?"))
                .unwrap_or_else(|| format!("allowed fields: {}", FIELDS.join(", ")));
            return fail(key, format!("unknown field; {hint}"));
        }
    }
    let script = path_field(
        obj,
        "script",
        "the script .json, relative to this spec file",
    )?;
    let portrait = path_field(
        obj,
        "portrait",
        "the portrait image, relative to this spec file",
    )?;
    let output = path_field(
        obj,
        "output",
        "the MP4 to write, relative to the output root",
    )?;
    check_output(&output)?;
    let voice = obj.get("voice").map(|v| string(v, "voice")).transpose()?;
    let size = obj.get("size").map(size).transpose()?;
    let fps = obj
        .get("fps")
        .map(|v| integer(v, "fps", 10, 60, "frames per second").map(|n| n as u32))
        .transpose()?;
    let framing = match obj.get("framing") {
        None => SpecFraming::Full,
        Some(v) => match v.as_str() {
            Some("full") => SpecFraming::Full,
            Some("head") => SpecFraming::Head,
            _ => {
                return fail(
                    "framing",
                    format!("must be \"full\" or \"head\", found {v}"),
                );
            }
        },
    };
    let still = match obj.get("still") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return fail("still", format!("must be true or false, found {}", kind(v))),
    };
    let seed = match obj.get("seed") {
        None => 0,
        Some(v) => match v.as_u64() {
            Some(n) => n,
            None => return fail("seed", format!("must be a whole number ≥ 0, found {v}")),
        },
    };
    let crf = obj
        .get("crf")
        .map(|v| integer(v, "crf", 0, 51, "x264 quality; lower is better").map(|n| n as u8))
        .transpose()?
        .unwrap_or(20);
    let preset = match obj.get("preset") {
        None => "veryfast".to_owned(),
        Some(v) => {
            let p = string(v, "preset")?;
            if !X264_PRESETS.contains(&p.as_str()) {
                return fail(
                    "preset",
                    format!(
                        "{p:?} is not an x264 preset; use one of {}",
                        X264_PRESETS.join(", ")
                    ),
                );
            }
            p
        }
    };
    let priority = obj
        .get("priority")
        .map(|v| integer(v, "priority", -1000, 1000, "higher runs first").map(|n| n as i32))
        .transpose()?
        .unwrap_or(0);
    Ok(JobSpec {
        script,
        portrait,
        output,
        voice,
        size,
        fps,
        framing,
        still,
        seed,
        crf,
        preset,
        priority,
    })
}

fn path_field(obj: &Map<String, Value>, name: &str, what: &str) -> Result<PathBuf, Fail> {
    match obj.get(name) {
        None => fail(name, format!("is missing; give {what}")),
        Some(v) => {
            let s = string(v, name)?;
            if s.contains('\0') {
                return fail(name, "contains a NUL character");
            }
            Ok(PathBuf::from(s))
        }
    }
}

/// The output's shape: relative, no `..`, an `.mp4` file name. Symlinks are checked in `resolve`.
fn check_output(output: &Path) -> Result<(), Fail> {
    let mut normal = 0;
    for c in output.components() {
        match c {
            Component::Normal(_) => normal += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                return fail(
                    "output",
                    "contains \"..\"; outputs stay inside the output root (--out-root)",
                );
            }
            Component::RootDir | Component::Prefix(_) => {
                return fail(
                    "output",
                    "is an absolute path; give a path relative to the output root (--out-root)",
                );
            }
        }
    }
    let is_mp4 = output
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("mp4"));
    if normal == 0 || !is_mp4 {
        return fail(
            "output",
            "must name an .mp4 file, e.g. \"series/episode-01.mp4\"",
        );
    }
    Ok(())
}

fn string(v: &Value, at: &str) -> Result<String, Fail> {
    match v.as_str() {
        Some(s) if !s.trim().is_empty() && s.len() <= 4096 => Ok(s.to_owned()),
        Some(s) if s.len() > 4096 => fail(at, "is longer than 4096 bytes"),
        Some(_) => fail(at, "must not be empty"),
        None => fail(at, format!("must be a string, found {}", kind(v))),
    }
}

fn integer(v: &Value, at: &str, lo: i64, hi: i64, what: &str) -> Result<i64, Fail> {
    match v.as_i64() {
        Some(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => fail(
            at,
            format!("must be a whole number from {lo} to {hi} ({what}), found {v}"),
        ),
    }
}

fn size(v: &Value) -> Result<(u32, u32), Fail> {
    let fix = "give [width, height] in pixels, both even, from 64 to 4096, e.g. [256, 256]";
    let Some([w, h]) = v.as_array().map(Vec::as_slice) else {
        return fail("size", format!("must be a two-number array; {fix}"));
    };
    let w = integer(w, "size[0]", 64, 4096, "pixels")? as u32;
    let h = integer(h, "size[1]", 64, 4096, "pixels")? as u32;
    if !w.is_multiple_of(2) || !h.is_multiple_of(2) {
        return fail("size", format!("{w}x{h} has an odd side; {fix}"));
    }
    Ok((w, h))
}

/// Canonicalises the output root, creating it when missing (so `--out-root` may name a new folder).
pub fn canonical_root(root: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(root)?;
    root.canonicalize()
}

/// Where `rel` lands under the canonical `root`, or why it would leave it: the deepest part of
/// the path that exists (a symlink included) must resolve to somewhere inside the root.
pub fn confine(root: &Path, rel: &Path) -> Result<PathBuf, String> {
    check_output(rel).map_err(|(_, m)| m)?;
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
    if existing == full && real.is_dir() {
        return Err(format!("{} is a directory", full.display()));
    }
    Ok(full)
}

impl Job {
    /// Ties a spec to the file system: inputs relative to the spec file must exist, the script must
    /// be valid, and the output must stay inside `out_root` (created if missing).
    pub fn resolve(spec_file: &Path, spec: JobSpec, out_root: &Path) -> Result<Job, SpecError> {
        let err = |at: &str, message: String| SpecError {
            file: spec_file.to_path_buf(),
            at: at.to_owned(),
            message,
        };
        let base = spec_file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let input = |at: &str, p: &Path| -> Result<PathBuf, SpecError> {
            let joined = base.join(p);
            let real = joined
                .canonicalize()
                .map_err(|e| err(at, format!("{}: {e}", joined.display())))?;
            if !real.is_file() {
                return Err(err(at, format!("{} is not a file", real.display())));
            }
            Ok(real)
        };
        let script = input("script", &spec.script)?;
        let portrait = input("portrait", &spec.portrait)?;
        Script::load(&script).map_err(|e| err("script", e.to_string()))?;
        let root = canonical_root(out_root)
            .map_err(|e| err("output", format!("output root {}: {e}", out_root.display())))?;
        let confined = confine(&root, &spec.output).map_err(|m| err("output", m))?;
        crate::guard::check_output_file(&confined, &[("script", &script), ("portrait", &portrait)])
            .map_err(|e| err("output", e.to_string()))?;
        let output: PathBuf = spec
            .output
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        Ok(Job {
            script,
            portrait,
            out_root: root,
            output,
            voice: spec.voice,
            size: spec.size,
            fps: spec.fps,
            framing: spec.framing,
            still: spec.still,
            seed: spec.seed,
            crf: spec.crf,
            preset: spec.preset,
            priority: spec.priority,
        })
    }

    /// sha256 over everything that changes the video: the job (less its priority), the bytes of
    /// the script and the portrait, and the talker version. Equal hashes mean equal renders.
    pub fn content_hash(&self) -> std::io::Result<String> {
        let mut h = Sha256::new();
        let mut field = |name: &str, bytes: &[u8]| {
            h.update(name.as_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field("domain", HASH_DOMAIN.as_bytes());
        field("version", env!("CARGO_PKG_VERSION").as_bytes());
        let mut canonical = self.clone();
        canonical.priority = 0;
        let json = serde_json::to_vec(&canonical).expect("a job serialises");
        field("job", &json);
        // Streamed, in the same layout (name, length, bytes): a portrait file may be large.
        for (name, path) in [("script", &self.script), ("portrait", &self.portrait)] {
            let file = std::fs::File::open(path)?;
            let len = file.metadata()?.len();
            h.update(name.as_bytes());
            h.update(len.to_le_bytes());
            let copied = std::io::copy(&mut std::io::Read::take(file, len), &mut h)?;
            if copied != len {
                return Err(std::io::Error::other(format!(
                    "{} changed while it was read",
                    path.display()
                )));
            }
        }
        Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The final output path (not re-checked; see [`Job::confined_output`]).
    pub fn output_path(&self) -> PathBuf {
        self.out_root.join(&self.output)
    }

    /// The output path after checking, at run time, that the job's root lies inside the worker's
    /// own root and that no symlink now leads out of it.
    pub fn confined_output(&self, worker_root: &Path) -> Result<PathBuf, String> {
        if !self.out_root.starts_with(worker_root) {
            return Err(format!(
                "the job writes under {}, outside this worker's output root {} (--out-root)",
                self.out_root.display(),
                worker_root.display()
            ));
        }
        confine(&self.out_root, &self.output)
    }

    /// The one place a job becomes render options.
    pub fn render_options(&self, env: &RenderEnv, output: PathBuf) -> RenderOptions {
        RenderOptions {
            script: self.script.clone(),
            portrait: self.portrait.clone(),
            output,
            assets: env.assets.clone(),
            cache: CacheLocation::Dir(env.cache.clone()),
            voice: self.voice.clone(),
            size: self.size,
            fps: self.fps,
            framing: match self.framing {
                SpecFraming::Full => Framing::Full,
                SpecFraming::Head => Framing::Head,
            },
            still: self.still,
            seed: self.seed,
            crf: self.crf,
            preset: self.preset.clone(),
            threads: env.threads.max(1),
            noise: true,
            speech: env.speech.clone(),
            extra: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> SpecError {
        JobSpec::parse(text).unwrap_err()
    }

    #[test]
    fn minimal_spec_gets_defaults() {
        let s = JobSpec::parse(r#"{"script": "s.json", "portrait": "p.png", "output": "a.mp4"}"#)
            .unwrap();
        assert_eq!(s.crf, 20);
        assert_eq!(s.preset, "veryfast");
        assert_eq!(s.framing, SpecFraming::Full);
        assert_eq!((s.priority, s.seed, s.still), (0, 0, false));
    }

    #[test]
    fn full_spec_parses() {
        let s = JobSpec::parse(
            r#"{"script": "s.json", "portrait": "p.png", "output": "x/a.mp4", "voice": "v",
                "size": [128, 96], "fps": 10, "framing": "head", "still": true, "seed": 7,
                "crf": 30, "preset": "ultrafast", "priority": -5}"#,
        )
        .unwrap();
        assert_eq!(s.size, Some((128, 96)));
        assert_eq!(s.fps, Some(10));
        assert_eq!(s.framing, SpecFraming::Head);
        assert_eq!((s.still, s.seed, s.crf, s.priority), (true, 7, 30, -5));
    }

    #[test]
    fn each_field_is_checked() {
        let base = r#""script": "s.json", "portrait": "p.png""#;
        let cases = [
            (format!("{{{base}}}"), "output", "is missing"),
            (
                format!(r#"{{{base}, "output": "a.mp4", "outptu": 1}}"#),
                "outptu",
                "did you mean \"output\"",
            ),
            (
                format!(r#"{{{base}, "output": "../a.mp4"}}"#),
                "output",
                "\"..\"",
            ),
            (
                format!(r#"{{{base}, "output": "/tmp/a.mp4"}}"#),
                "output",
                "absolute",
            ),
            (
                format!(r#"{{{base}, "output": "a.mov"}}"#),
                "output",
                ".mp4",
            ),
            (
                format!(r#"{{{base}, "output": "a.mp4", "size": [129, 128]}}"#),
                "size",
                "odd",
            ),
            (
                format!(r#"{{{base}, "output": "a.mp4", "size": [128, 8]}}"#),
                "size[1]",
                "64 to 4096",
            ),
            (
                format!(r#"{{{base}, "output": "a.mp4", "fps": 5}}"#),
                "fps",
                "10 to 60",
            ),
            (
                format!(r#"{{{base}, "output": "a.mp4", "framing": "wide"}}"#),
                "framing",
                "\"head\"",
            ),
            (
                format!(r#"{{{base}, "output": "a.mp4", "still": "yes"}}"#),
                "still",
                "true or false",
            ),
            (
                format!(r#"{{{base}, "output": "a.mp4", "seed": -1}}"#),
                "seed",
                "≥ 0",
            ),
            (
                format!(r#"{{{base}, "output": "a.mp4", "preset": "fastest"}}"#),
                "preset",
                "veryfast",
            ),
            (
                format!(r#"{{{base}, "output": "a.mp4", "priority": 5000}}"#),
                "priority",
                "-1000 to 1000",
            ),
            (
                format!(r#"{{{base}, "output": "a.mp4", "voice": ""}}"#),
                "voice",
                "empty",
            ),
            (
                r#"{"script": 3, "portrait": "p.png", "output": "a.mp4"}"#.into(),
                "script",
                "a number",
            ),
        ];
        for (text, at, needle) in cases {
            let e = err(&text);
            assert_eq!(e.at, at, "{text}: {e}");
            assert!(e.message.contains(needle), "{text}: {e}");
        }
        assert!(err("[1]").message.contains("an array"));
        assert!(err("{").at.starts_with("line 1"));
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
}
