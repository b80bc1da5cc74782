//! Job specs: a JSON file → a validated [`JobSpec`] → a resolved [`Job`] with its content hash.
//!
//! Input: the spec file (format in the README, "Jobs and workers") and the output root.
//! Output: a [`Job`] with absolute input paths, an output path relative to a canonical root, and a
//! sha256 content hash over the job, the bytes of the script (or book), the portrait, the
//! lexicon file the script names, the job's own lexicons, its background and cover images, the
//! slides the script names, and the talker version.
//! Invariants: unknown fields are refused with a "did you mean" hint and every error names the
//! file and the field; `script` and `portrait` are relative to the spec file; `output` is relative
//! to the output root and confined to it (`..`, absolute paths and symlinks that lead outside are
//! refused, by `guard::confine`), checked again by the worker before it writes, because a shared
//! queue's rows are only as trustworthy as everyone who can write to the database. The render
//! settings (every `render` option that changes the output) are `settings::RenderSettings`, the
//! same type as the `render` flags; a spec adds its paths and `priority`. `portrait` is required
//! for a video and refused for audio only, which shows no face; `lexicon`, `background` and
//! `cover` paths are relative to the spec file, like `script` (a cover is checked at submit).

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::assets::Assets;
use crate::cache::CacheLocation;
use crate::guard::{canonical_root, confine, confine_dir, relative_output, relative_path};
use crate::pool::ChunkPool;
use crate::script::{did_you_mean, kind, read_input};
use crate::settings::{
    Background, Fail, OutputKind, RenderOptions, RenderSettings, fail, integer, string,
};
use crate::tts::select::SpeechSetup;

/// Specs are a few hundred bytes; anything this large is not one.
const MAX_SPEC_BYTES: u64 = 1 << 20;
/// A spec's own fields around the render settings' ([`RenderSettings::SPEC_FIELDS`]).
const PATH_FIELDS: &[&str] = &["script", "portrait", "output"];
const PRIORITY: &str = "priority";
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

/// What a spec file says, checked but not yet tied to the file system.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub script: PathBuf,
    /// `None` for audio-only outputs.
    pub portrait: Option<PathBuf>,
    pub output: PathBuf,
    pub settings: RenderSettings,
    pub priority: i32,
}

/// A job as stored in the queue: everything a worker on any host needs to render it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "StoredJob")]
pub struct Job {
    pub script: PathBuf,
    /// `None` for audio-only outputs (stored as `null`).
    pub portrait: Option<PathBuf>,
    /// The canonical output root the output was confined to at enqueue time.
    pub out_root: PathBuf,
    /// Relative to `out_root`, normal components only.
    pub output: PathBuf,
    /// Serialised flat, as specs have them; lexicon paths absolute.
    #[serde(flatten)]
    pub settings: RenderSettings,
    /// Not part of the content hash: it changes the order, not the video.
    pub priority: i32,
}

/// A [`Job`] as read back from the queue. serde cannot refuse unknown fields next to a flattened
/// one, so `rest` collects what the named fields leave and anything that is not a setting is
/// refused: a row is only as trustworthy as whoever wrote it.
#[derive(Deserialize)]
struct StoredJob {
    script: PathBuf,
    portrait: Option<PathBuf>,
    out_root: PathBuf,
    output: PathBuf,
    #[serde(flatten)]
    settings: RenderSettings,
    priority: i32,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

impl TryFrom<StoredJob> for Job {
    type Error = String;

    fn try_from(s: StoredJob) -> Result<Job, String> {
        if let Some(key) = s
            .rest
            .keys()
            .find(|k| !RenderSettings::SPEC_FIELDS.contains(&k.as_str()))
        {
            return Err(format!("unknown field `{key}` in a stored job"));
        }
        Ok(Job {
            script: s.script,
            portrait: s.portrait,
            out_root: s.out_root,
            output: s.output,
            settings: s.settings,
            priority: s.priority,
        })
    }
}

/// What a worker adds to a job to render it.
#[derive(Debug, Clone)]
pub struct RenderEnv {
    pub assets: Assets,
    pub cache: PathBuf,
    pub threads: usize,
    /// The chunk slots every render of the worker draws and encodes in.
    pub pool: ChunkPool,
    /// Backend and batching; the worker's renders share one speech service built from it.
    pub speech: SpeechSetup,
}

impl JobSpec {
    /// Every field a spec may have: its paths, the render settings and `priority`.
    pub fn fields() -> Vec<&'static str> {
        PATH_FIELDS
            .iter()
            .chain(RenderSettings::SPEC_FIELDS)
            .chain([&PRIORITY])
            .copied()
            .collect()
    }

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
        // The scripts' strict reader: a key given twice is refused rather than the first
        // value dropped.
        let value = crate::script::parse_json(text, Path::new(""))
            .map_err(|e| to_err((e.at, e.message)))?;
        parse_value(&value).map_err(to_err)
    }
}

fn parse_value(v: &Value) -> Result<JobSpec, Fail> {
    let Some(obj) = v.as_object() else {
        return fail("", format!("must be a JSON object, found {}", kind(v)));
    };
    let fields = JobSpec::fields();
    for key in obj.keys() {
        if !fields.contains(&key.as_str()) {
            let hint = did_you_mean(key, &fields)
                .map(|s| format!("did you mean \"{s}\"?"))
                .unwrap_or_else(|| format!("allowed fields: {}", fields.join(", ")));
            return fail(key, format!("unknown field; {hint}"));
        }
    }
    let script = path_field(
        obj,
        "script",
        "the script .json, relative to this spec file",
    )?;
    let portrait = obj
        .contains_key("portrait")
        .then(|| path_field(obj, "portrait", "the portrait image"))
        .transpose()?;
    let output = path_field(
        obj,
        "output",
        "the file to write (.mp4, .m4b, .m4a, .wav or .mp3), relative to the output root",
    )?;
    let settings = RenderSettings::from_spec(obj)?;
    if settings.split.is_some() {
        // A directory, whose files take the kind `format` names.
        relative_path(&output).map_err(|m| ("output".to_owned(), m))?;
        if settings.format.is_none() {
            return fail(
                "format",
                "is missing; a split job writes a directory of chapter files: name their kind with \"format\" (\"m4b\", \"m4a\", \"mp3\", \"wav\" or \"mp4\")",
            );
        }
    } else {
        relative_output(&output).map_err(|m| ("output".to_owned(), m))?;
    }
    match (settings.output_kind(&output), &portrait) {
        (OutputKind::Mp4, None) => {
            return fail(
                "portrait",
                format!(
                    "is missing; the output {} is a video, which needs a face: give the portrait image (PNG or JPEG, relative to this spec file), or write audio only (an .m4b, .m4a, .wav or .mp3 output)",
                    output.display()
                ),
            );
        }
        (OutputKind::Audio(_), Some(_)) => {
            return fail(
                "portrait",
                format!(
                    "is not used: the output {} is audio only and shows no face; leave \"portrait\" out, or write an .mp4",
                    output.display()
                ),
            );
        }
        _ => {}
    }
    settings
        .check_output(&output)
        .map_err(|m| ("loudness".to_owned(), m))?;
    let priority = obj
        .get(PRIORITY)
        .map(|v| integer(v, PRIORITY, -1000..=1000, "higher runs first").map(|n| n as i32))
        .transpose()?
        .unwrap_or(0);
    Ok(JobSpec {
        script,
        portrait,
        output,
        settings,
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
        let portrait = spec
            .portrait
            .as_ref()
            .map(|p| input("portrait", p))
            .transpose()?;
        let mut settings = spec.settings;
        let count = settings.lexicon.len();
        let mut lexicons = Vec::with_capacity(count);
        for (i, given) in settings.lexicon.iter().enumerate() {
            let at = if count == 1 {
                "lexicon".to_owned()
            } else {
                format!("lexicon[{i}]")
            };
            let path = input(&at, given)?;
            crate::lexicon::Lexicon::load(&path).map_err(|e| err(&at, e.to_string()))?;
            lexicons.push(path);
        }
        settings.lexicon = lexicons;
        if let Background::Image(given) = &settings.look.background {
            settings.look.background = Background::Image(input("background", given)?);
        }
        if let Some(given) = &settings.cover {
            let path = input("cover", given)?;
            crate::cover::Cover::read(&path).map_err(|e| err("cover", e))?;
            settings.cover = Some(path);
        }
        // A book (EPUB, Markdown, text) is read as `render` reads it, detected the same way,
        // with the job's book options.
        let (loaded, _) = crate::book::load_script(&script, &settings.book)
            .map_err(|e| err("script", e.to_string()))?;
        // A slide that is missing or broken is refused at enqueue, as `render` refuses it.
        let video = settings.output_kind(&spec.output) == crate::settings::OutputKind::Mp4;
        if video && crate::slides::shown(settings.look.layout, &loaded) {
            crate::slides::list(&loaded, &script, true)
                .map_err(|e| err("script", e.to_string()))?;
        }
        let root = canonical_root(out_root)
            .map_err(|e| err("output", format!("output root {}: {e}", out_root.display())))?;
        let confined = if settings.split.is_some() {
            confine_dir(&root, &spec.output)
        } else {
            confine(&root, &spec.output)
        }
        .map_err(|m| err("output", m))?;
        let job = Job {
            script,
            portrait,
            out_root: root,
            output: spec
                .output
                .components()
                .filter(|c| matches!(c, Component::Normal(_)))
                .collect(),
            settings,
            priority: spec.priority,
        };
        let named = job.script_inputs();
        let inputs = job.inputs(&named);
        let files = job.output_files(&confined).map_err(|m| err("script", m))?;
        for file in files {
            crate::guard::check_output_file(&file, &inputs)
                .map_err(|e| err("output", e.to_string()))?;
        }
        Ok(job)
    }

    /// The lexicon file the script names, if any (see [`crate::guard::script_lexicon`]).
    pub fn script_lexicon(&self) -> Option<PathBuf> {
        crate::guard::script_lexicon(&self.script)
    }

    /// The files the script names: its lexicon, the voice files it names by path (see
    /// [`crate::guard::script_voices`]) and its slides, for [`Job::inputs`]. A worker renders
    /// into a stage folder, so only this check keeps a job from publishing over a slide.
    pub fn script_inputs(&self) -> Vec<(&'static str, PathBuf)> {
        let lexicon = self.script_lexicon();
        let lexicon = lexicon.map(|l| ("lexicon the script names", l));
        let voices = crate::guard::script_voices(&self.script);
        // A script that cannot be read now is refused by the render itself.
        let slides = self.slide_files().unwrap_or_default();
        lexicon
            .into_iter()
            .chain(
                voices
                    .into_iter()
                    .map(|v| ("voice file the script names", v)),
            )
            .chain(slides.into_iter().map(|s| ("slide", s)))
            .collect()
    }

    /// The distinct slide files a JSON or Markdown script names (relative to it); books and
    /// plain text name none.
    fn slide_files(&self) -> std::io::Result<Vec<PathBuf>> {
        let kind = crate::book::InputKind::detect(&self.script);
        if !matches!(
            kind,
            crate::book::InputKind::Json | crate::book::InputKind::Markdown
        ) {
            return Ok(Vec::new());
        }
        let (script, _) = crate::book::load_script(&self.script, &self.settings.book)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(crate::slides::files(&script)
            .into_iter()
            .map(Path::to_path_buf)
            .collect())
    }

    /// What the job's output must never be, named for messages; `named` is
    /// [`Job::script_inputs`].
    pub fn inputs<'a>(
        &'a self,
        named: &'a [(&'static str, PathBuf)],
    ) -> Vec<(&'static str, &'a Path)> {
        let mut inputs = vec![("script", self.script.as_path())];
        inputs.extend(self.portrait.as_deref().map(|p| ("portrait", p)));
        inputs.extend(named.iter().map(|(what, p)| (*what, p.as_path())));
        inputs.extend(
            self.settings
                .lexicon
                .iter()
                .map(|l| ("lexicon", l.as_path())),
        );
        inputs.extend(self.background_image().map(|b| ("background image", b)));
        inputs.extend(self.settings.cover.as_deref().map(|c| ("cover image", c)));
        inputs
    }

    /// The `--background` image, when the job names one.
    fn background_image(&self) -> Option<&Path> {
        match &self.settings.look.background {
            Background::Image(path) => Some(path),
            _ => None,
        }
    }

    /// Every file the job writes for `output`, in the order they are published: the output, then
    /// its subtitle sidecar when asked for; for a split job each chapter's file and sidecar in the
    /// directory `output`, named from the book as it is now (the error says why it cannot be read).
    pub fn output_files(&self, output: &Path) -> Result<Vec<PathBuf>, String> {
        let (Some(_), Some(format)) = (self.settings.split, self.settings.format) else {
            return Ok(std::iter::once(output.to_path_buf())
                .chain(self.settings.sidecar(output))
                .collect());
        };
        let (script, _) = crate::book::load_script(&self.script, &self.settings.book)
            .map_err(|e| e.to_string())?;
        let titles = crate::split::titles(&script, &self.script)?;
        let subtitles = self.settings.subtitles;
        Ok(crate::split::parts(output, &titles, format.extension())
            .into_iter()
            .flat_map(|p| {
                let sidecar = subtitles.map(|f| p.path.with_extension(f.extension()));
                std::iter::once(p.path).chain(sidecar)
            })
            .collect())
    }

    /// sha256 over everything that changes the output: the job (less its priority), the bytes of
    /// the script (or book), the portrait, the lexicon file the script names and the job's own
    /// lexicons, the voice files the script names by path, and the talker version. Equal hashes
    /// mean equal renders.
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
        // Streamed, in the same layout (name, length, bytes): a portrait file may be large. The
        // lexicon file a script names changes the speech too; a script without one hashes as
        // before, so jobs already in a queue keep their hashes.
        let lexicon = self.script_lexicon();
        let files = std::iter::once(("script", &self.script))
            .chain(self.portrait.as_ref().map(|p| ("portrait", p)))
            .chain(lexicon.as_ref().map(|l| ("lexicon", l)))
            .chain(self.settings.lexicon.iter().map(|l| ("lexicon", l)));
        for (name, path) in files {
            stream_file(&mut h, name, path)?;
        }
        // Likewise a voice the script names by path: a script that names none hashes as before.
        for path in crate::guard::script_voices(&self.script) {
            stream_file(&mut h, "voice", &path)?;
        }
        if let Some(path) = self.background_image() {
            stream_file(&mut h, "background", path)?;
        }
        // The slides a script names (relative to it); a script without any hashes as before.
        for path in self.slide_files()? {
            stream_file(&mut h, "slide", &path)?;
        }
        if let Some(path) = &self.settings.cover {
            stream_file(&mut h, "cover", path)?;
        }
        Ok(hex(h))
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
        if self.settings.split.is_some() {
            confine_dir(&self.out_root, &self.output)
        } else {
            confine(&self.out_root, &self.output)
        }
    }

    /// The one place a job becomes render options.
    pub fn render_options(&self, env: &RenderEnv, output: PathBuf) -> RenderOptions {
        RenderOptions {
            script: self.script.clone(),
            portrait: self.portrait.clone().unwrap_or_default(),
            output,
            assets: env.assets.clone(),
            cache: CacheLocation::Dir(env.cache.clone()),
            settings: self.settings.clone(),
            threads: env.threads.max(1),
            pool: Some(env.pool.clone()),
            speech: env.speech.clone(),
        }
    }
}

/// Adds `name`, the file's length and its bytes to `h`, streamed (a portrait or a book may be
/// large); a file that changes length while it is read is an error.
fn stream_file(h: &mut Sha256, name: &str, path: &Path) -> std::io::Result<()> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    h.update(name.as_bytes());
    h.update(len.to_le_bytes());
    let copied = std::io::copy(&mut std::io::Read::take(file, len), h)?;
    if copied != len {
        return Err(std::io::Error::other(format!(
            "{} changed while it was read",
            path.display()
        )));
    }
    Ok(())
}

fn hex(h: Sha256) -> String {
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of a file's bytes, as published outputs are recorded and checked.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut file = std::fs::File::open(path)?;
    std::io::copy(&mut file, &mut h)?;
    Ok(hex(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Framing;

    fn err(text: &str) -> SpecError {
        JobSpec::parse(text).unwrap_err()
    }

    #[test]
    fn minimal_spec_gets_defaults() {
        let s = JobSpec::parse(r#"{"script": "s.json", "portrait": "p.png", "output": "a.mp4"}"#)
            .unwrap();
        assert_eq!(s.settings.crf, 20);
        assert_eq!(s.settings.preset, "veryfast");
        assert_eq!(s.settings.look.framing, Framing::Full);
        assert_eq!(
            (s.priority, s.settings.look.seed, s.settings.look.still),
            (0, 0, false)
        );
    }

    #[test]
    fn full_spec_parses() {
        let s = JobSpec::parse(
            r#"{"script": "s.json", "portrait": "p.png", "output": "x/a.mp4", "voice": "v",
                "size": [128, 96], "fps": 10, "framing": "head", "still": true, "seed": 7,
                "crf": 30, "preset": "ultrafast", "priority": -5}"#,
        )
        .unwrap();
        let look = &s.settings.look;
        assert_eq!(look.size, Some((128, 96)));
        assert_eq!(look.fps, Some(10));
        assert_eq!(look.framing, Framing::Head);
        assert_eq!(
            (look.still, look.seed, s.settings.crf, s.priority),
            (true, 7, 30, -5)
        );
    }

    /// Jobs already in a queue were stored with the fields side by side, in this order, and the
    /// content hash covers this text: both must stay as they were.
    #[test]
    fn stored_jobs_keep_their_layout() {
        let stored = r#"{"script":"/in/s.json","portrait":"/in/p.png","out_root":"/out","output":"x/a.mp4","voice":"v","size":[128,96],"fps":null,"framing":"head","still":true,"seed":7,"crf":30,"preset":"ultrafast","priority":-5}"#;
        let job: Job = serde_json::from_str(stored).unwrap();
        assert_eq!(job.settings.look.size, Some((128, 96)));
        assert_eq!(job.settings.look.framing, Framing::Head);
        assert_eq!((job.settings.crf, job.priority), (30, -5));
        assert_eq!(serde_json::to_string(&job).unwrap(), stored);
        let unknown = stored.replace(r#""seed":7"#, r#""seed":7,"sede":1"#);
        let e = serde_json::from_str::<Job>(&unknown).unwrap_err();
        assert!(e.to_string().contains("sede"), "{e}");
        let missing = stored.replace(r#""crf":30,"#, "");
        assert!(serde_json::from_str::<Job>(&missing).is_err());
    }

    /// An audiobook job: no portrait, every book and audio option, one lexicon or several.
    #[test]
    fn audio_jobs_take_no_portrait_and_every_render_option() {
        let s = JobSpec::parse(
            r#"{"script": "b.epub", "output": "books/b.m4b", "subtitles": "srt",
                "loudness": "podcast", "lexicon": "names.json", "matter": "body", "notes": "end",
                "chapter_depth": 1, "deterministic": true}"#,
        )
        .unwrap();
        assert_eq!(s.portrait, None);
        assert_eq!(s.settings.lexicon, [PathBuf::from("names.json")]);
        assert_eq!(s.settings.book.chapter_depth, 1);
        assert_eq!(
            s.settings.sidecar(Path::new("/o/b.m4b")),
            Some(PathBuf::from("/o/b.srt"))
        );
        let s = JobSpec::parse(
            r#"{"script": "b.md", "output": "b.mp4", "format": "wav", "lexicon": ["a.json", "b.json"]}"#,
        )
        .unwrap();
        assert_eq!(s.settings.lexicon.len(), 2);

        let cases = [
            (
                r#"{"script": "b.md", "output": "talk.mp4"}"#,
                "portrait",
                "is missing; the output talk.mp4 is a video, which needs a face",
            ),
            (
                r#"{"script": "b.md", "portrait": "p.png", "output": "b.m4b"}"#,
                "portrait",
                "audio only and shows no face",
            ),
            (
                r#"{"script": "b.md", "portrait": "p.png", "output": "b.mp4", "loudness": "acx"}"#,
                "loudness",
                "is for audio-only outputs",
            ),
            (
                r#"{"script": "b.md", "output": "b.wav", "subtitle": "srt"}"#,
                "subtitle",
                "did you mean \"subtitles\"",
            ),
            (r#"{"script": "b.md", "output": "b.ogg"}"#, "output", ".m4b"),
            (
                r#"{"script": "b.md", "output": "b", "split": "chapters"}"#,
                "format",
                "a split job writes a directory",
            ),
            (
                r#"{"script": "b.md", "output": "../b", "split": "chapters", "format": "mp3"}"#,
                "output",
                "contains \"..\"",
            ),
        ];
        for (text, at, needle) in cases {
            let e = err(text);
            assert_eq!(e.at, at, "{text}: {e}");
            assert!(e.message.contains(needle), "{text}: {e}");
        }
    }

    /// The specs in `jobs/` (the README's examples) are valid jobs.
    #[test]
    fn the_example_specs_resolve() {
        let out = tempfile::tempdir().unwrap();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs");
        let mut kinds = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let spec = JobSpec::load(&path).unwrap_or_else(|e| panic!("{e}"));
            let job = Job::resolve(&path, spec, out.path()).unwrap_or_else(|e| panic!("{e}"));
            kinds.push(job.settings.output_kind(&job.output));
        }
        assert!(kinds.contains(&OutputKind::Mp4), "{kinds:?}");
        assert!(kinds.iter().any(|k| *k != OutputKind::Mp4), "{kinds:?}");
    }

    /// A video job's slides are checked at submit (a missing one named by its segment) and their
    /// bytes are in the content hash; an audio job shows none and checks none.
    #[test]
    fn slides_are_checked_and_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("p.png"), b"portrait bytes").unwrap();
        std::fs::write(
            d.join("s.json"),
            r#"{"segments": [{"text": "Hi.", "slide": "a.png"}]}"#,
        )
        .unwrap();
        let video = || {
            let spec =
                JobSpec::parse(r#"{"script": "s.json", "portrait": "p.png", "output": "o.mp4"}"#)
                    .unwrap();
            Job::resolve(&d.join("job.json"), spec, &d.join("out"))
        };
        let e = video().unwrap_err();
        assert!(
            e.at == "script" && e.message.contains("segments[0].slide"),
            "{e}"
        );
        let audio = JobSpec::parse(r#"{"script": "s.json", "output": "o.m4b"}"#).unwrap();
        assert!(Job::resolve(&d.join("job.json"), audio, &d.join("out")).is_ok());
        image::RgbImage::new(8, 8).save(d.join("a.png")).unwrap();
        let job = video().unwrap();
        let first = job.content_hash().unwrap();
        image::RgbImage::from_pixel(8, 8, image::Rgb([1, 2, 3]))
            .save(d.join("a.png"))
            .unwrap();
        assert_ne!(job.content_hash().unwrap(), first);
    }

    /// A slide is an input no output may be: a worker renders into a stage folder and publishes
    /// it over the output, so a job whose output is one of its slides is refused at enqueue.
    #[test]
    fn an_output_that_is_a_slide_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("p.png"), b"portrait bytes").unwrap();
        std::fs::create_dir(d.join("out")).unwrap();
        image::RgbImage::new(8, 8).save(d.join("a.png")).unwrap();
        std::fs::copy(d.join("a.png"), d.join("out/o.mp4")).unwrap();
        std::fs::write(
            d.join("s.json"),
            r#"{"segments": [{"text": "Hi.", "slide": "a.png"}, {"text": "Ho.", "slide": "out/o.mp4"}]}"#,
        )
        .unwrap();
        let resolve = |output: &str| {
            let json =
                format!(r#"{{"script": "s.json", "portrait": "p.png", "output": "{output}"}}"#);
            Job::resolve(
                &d.join("job.json"),
                JobSpec::parse(&json).unwrap(),
                &d.join("out"),
            )
        };
        let e = resolve("o.mp4").unwrap_err();
        assert!(
            e.at == "output" && e.message.contains("is the slide"),
            "{e}"
        );
        let job = resolve("other.mp4").unwrap();
        let slides = job
            .script_inputs()
            .into_iter()
            .filter(|(what, _)| *what == "slide")
            .count();
        assert_eq!(slides, 2);
    }

    /// Editing the book or one of the job's lexicons changes the job's content hash (so
    /// `talker batch` renders it again); the same files give the same hash.
    #[test]
    fn the_hash_covers_the_book_and_its_lexicons() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("b.md"), "# One\n\nHello there.\n").unwrap();
        std::fs::write(d.join("l.json"), r#"{"Hello": "hullo"}"#).unwrap();
        let spec = JobSpec::parse(r#"{"script": "b.md", "output": "b.m4b", "lexicon": "l.json"}"#)
            .unwrap();
        let job = Job::resolve(&d.join("job.json"), spec, &d.join("out")).unwrap();
        assert_eq!(
            job.settings.lexicon,
            [d.join("l.json").canonicalize().unwrap()]
        );
        let first = job.content_hash().unwrap();
        assert_eq!(job.content_hash().unwrap(), first);
        std::fs::write(d.join("l.json"), r#"{"Hello": "hallo"}"#).unwrap();
        let lexicon_edited = job.content_hash().unwrap();
        std::fs::write(d.join("b.md"), "# One\n\nHello here.\n").unwrap();
        let book_edited = job.content_hash().unwrap();
        assert!(first != lexicon_edited && lexicon_edited != book_edited);

        // A lexicon that is not one is refused at enqueue, naming the field.
        std::fs::write(d.join("l.json"), "[1]").unwrap();
        let spec = JobSpec::parse(r#"{"script": "b.md", "output": "b.m4b", "lexicon": "l.json"}"#)
            .unwrap();
        let e = Job::resolve(&d.join("job.json"), spec, &d.join("out")).unwrap_err();
        assert_eq!(e.at, "lexicon", "{e}");
    }

    /// A job's cover is relative to the spec, checked at enqueue (exit 2 naming the field) and
    /// part of the content hash; a job without one hashes as before.
    #[test]
    fn the_cover_is_an_input_checked_and_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("b.md"), "# One\n\nHello there.\n").unwrap();
        let png = |shade: u8| {
            let img = image::RgbImage::from_pixel(8, 8, image::Rgb([shade, 0, 0]));
            img.save(d.join("c.png")).unwrap();
        };
        png(10);
        let resolve = |json: &str| {
            Job::resolve(
                &d.join("job.json"),
                JobSpec::parse(json).unwrap(),
                &d.join("out"),
            )
        };
        let without = resolve(r#"{"script": "b.md", "output": "b.m4b"}"#).unwrap();
        let job = resolve(r#"{"script": "b.md", "output": "b.m4b", "cover": "c.png"}"#).unwrap();
        assert_eq!(
            job.settings.cover,
            Some(d.join("c.png").canonicalize().unwrap())
        );
        assert!(
            job.inputs(&[])
                .iter()
                .any(|(what, _)| *what == "cover image")
        );
        let first = job.content_hash().unwrap();
        assert_ne!(first, without.content_hash().unwrap());
        png(20);
        assert_ne!(job.content_hash().unwrap(), first);

        std::fs::write(d.join("c.png"), "not a picture").unwrap();
        let e = resolve(r#"{"script": "b.md", "output": "b.m4b", "cover": "c.png"}"#).unwrap_err();
        assert_eq!(e.at, "cover", "{e}");
        assert!(e.message.contains("JPEG or PNG"), "{e}");
    }

    /// The voice files a script names by path (relative to the script) are inputs no output may
    /// be, and their bytes are part of the content hash; a voice named by name is not a file of
    /// the job's (as `voice` in the spec).
    #[test]
    fn the_voice_files_a_script_names_are_inputs_and_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("v")).unwrap();
        std::fs::write(d.join("v/x.onnx"), "model").unwrap();
        std::fs::write(d.join("v/x.onnx.json"), "{}").unwrap();
        std::fs::write(
            d.join("s.json"),
            r#"{"segments": [{"text": "A."}, {"text": "B.", "voice": "v/x.onnx"},
                {"text": "C.", "voice": "en_US-joe-medium"}, {"text": "D.", "voice": "v/x.onnx"}]}"#,
        )
        .unwrap();
        let spec = JobSpec::parse(r#"{"script": "s.json", "output": "s.m4b"}"#).unwrap();
        let job = Job::resolve(&d.join("job.json"), spec, &d.join("out")).unwrap();
        let named = job.script_inputs();
        let voices: Vec<&Path> = job
            .inputs(&named)
            .into_iter()
            .filter(|(what, _)| *what == "voice file the script names")
            .map(|(_, p)| p)
            .collect();
        let script_dir = job.script.parent().unwrap();
        assert_eq!(
            voices,
            [
                script_dir.join("v/x.onnx"),
                script_dir.join("v/x.onnx.json")
            ]
        );
        let first = job.content_hash().unwrap();
        assert_eq!(job.content_hash().unwrap(), first);
        std::fs::write(d.join("v/x.onnx"), "another model").unwrap();
        let model_edited = job.content_hash().unwrap();
        std::fs::write(d.join("v/x.onnx.json"), r#"{"a": 1}"#).unwrap();
        let config_edited = job.content_hash().unwrap();
        assert!(first != model_edited && model_edited != config_edited);
    }

    #[test]
    fn stored_audio_jobs_read_back() {
        let stored = r#"{"script":"/in/b.epub","portrait":null,"out_root":"/out","output":"b.m4b","voice":null,"size":null,"fps":null,"framing":"full","still":false,"seed":0,"crf":20,"preset":"veryfast","subtitles":"srt","lexicon":["/in/l.json"],"chapter_depth":3,"priority":0}"#;
        let job: Job = serde_json::from_str(stored).unwrap();
        assert_eq!(job.portrait, None);
        assert_eq!(job.settings.book.chapter_depth, 3);
        assert_eq!(serde_json::to_string(&job).unwrap(), stored);
        assert_eq!(
            job.output_files(Path::new("/out/b.m4b")).unwrap(),
            [PathBuf::from("/out/b.m4b"), PathBuf::from("/out/b.srt")]
        );
    }

    /// A split job writes a directory: its files are the book's chapters (with their subtitles),
    /// named as `render --split chapters` names them; a book without chapters is refused at
    /// enqueue, naming the script.
    #[test]
    fn a_split_job_writes_each_chapter_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("b.md"), "# One\n\nHello.\n\n# Two: A/B\n\nThere.\n").unwrap();
        let spec = JobSpec::parse(
            r#"{"script": "b.md", "output": "books/b", "format": "mp3", "split": "chapters", "subtitles": "vtt"}"#,
        )
        .unwrap();
        let job = Job::resolve(&d.join("job.json"), spec, &d.join("out")).unwrap();
        let dir_out = Path::new("/o/books/b");
        assert_eq!(
            job.output_files(dir_out).unwrap(),
            [
                "01 - One.mp3",
                "01 - One.vtt",
                "02 - Two_ A_B.mp3",
                "02 - Two_ A_B.vtt"
            ]
            .map(|f| dir_out.join(f))
        );
        std::fs::write(d.join("flat.txt"), "No headings at all.\n").unwrap();
        let spec = JobSpec::parse(
            r#"{"script": "flat.txt", "output": "flat", "format": "m4b", "split": "chapters"}"#,
        )
        .unwrap();
        let e = Job::resolve(&d.join("job.json"), spec, &d.join("out")).unwrap_err();
        assert_eq!(e.at, "script", "{e}");
        assert!(e.message.contains("has no chapters"), "{e}");
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
                format!(r#"{{{base}, "output": "a.mp4", "fps": 0}}"#),
                "fps",
                "1 to 120",
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
                format!(r#"{{{base}, "output": "a.mp4", "output": "b.mp4"}}"#),
                "output",
                "is given twice",
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
}
