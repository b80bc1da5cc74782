//! Before any audio or frame: every input read and checked, the face found, the look built and
//! the render planned. The render (`pipeline`), `preview` and `bench` all start here.
//!
//! Input: [`RenderOptions`]. Output: [`Prepared`] (script, speech engine, look, plan with chunk
//! keys). Cheapest checks first, so bad input fails in milliseconds and before any synthesis.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::assets::DEFAULT_VOICE;
use crate::cache::CacheLocation;
use crate::cache::KeyBuilder;
use crate::cover::Cover;
use crate::error::{Error, Result};
use crate::face::{FaceModels, Landmarks, Portrait};
use crate::guard;
use crate::lexicon::Lexicon;
use crate::look::{self, Backdrop, Look, LookOptions};
use crate::media::{AudioFormat, VideoSettings};
use crate::phonemize::Phonemizer;
use crate::plan::Plan;
use crate::progress::{Clock, Event, Progress, Stage};
use crate::render::RenderError;
use crate::script::{Script, ScriptError};
use crate::settings::{Background, Framing, Layout, OutputKind, RenderOptions};
use crate::slides::{self, Deck};
use crate::speech::{SpeechEngine, SpeechOptions, SpeechService};
use crate::split;
use crate::text;
use crate::tts::voice::VoiceFiles;

/// Everything a render needs before any audio or frame exists.
pub struct Prepared {
    pub script: Script,
    pub engine: SpeechEngine,
    pub look: Look,
    pub plan: Plan,
}

/// The script (any input kind, with every lexicon merged) and the speech engine; the output is
/// checked against every input, and the lexicon's IPA against the voice, before any synthesis.
pub fn load_inputs(
    opts: &RenderOptions,
    service: &SpeechService,
    progress: &dyn Progress,
    clock: &Clock,
    cancel: &AtomicBool,
) -> Result<(Script, SpeechEngine)> {
    let t = Instant::now();
    let stopped = || {
        if cancel.load(Ordering::Relaxed) {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    };
    if opts.settings.output_kind(&opts.output) != OutputKind::Audio(AudioFormat::Wav) {
        ffmpeg_path(&opts.output, "output", "choose an output name")?;
    }
    guard::regular_input(&opts.script, "script")?;
    let (mut script, notes) = crate::book::load_script(&opts.script, &opts.settings.book)?;
    for message in notes {
        progress.event(Event::Warning { message });
    }
    if let Some(path) = &opts.settings.cover {
        script.cover = Some(Cover::read(path).map_err(Error::Usage)?);
        if opts.settings.output_kind(&opts.output) == OutputKind::Audio(AudioFormat::Wav) {
            progress.event(Event::Warning {
                message: format!(
                    "--cover {}: WAV files hold no cover art; write .m4b or .mp3 for one",
                    path.display()
                ),
            });
        }
    }
    for path in &opts.settings.lexicon {
        stopped()?;
        let more = Lexicon::load(path)?;
        script
            .lexicon
            .get_or_insert_with(Lexicon::default)
            .merge(more);
    }
    let video = opts.settings.output_kind(&opts.output) == OutputKind::Mp4;
    // Slides are refused before the voice loads; an audio-only render shows none.
    let slides = match video && shows_slides(opts, &script, progress) {
        true => Some(slides::list(&script, &opts.script, true)?),
        false => None,
    };
    // `--voice` is taken from the working directory, a voice the script names from the script's.
    let voices_dir = opts.assets.voices_dir();
    let base = opts.script.parent().unwrap_or(Path::new(""));
    let voice = match (&opts.settings.voice, &script.voice) {
        (Some(v), _) => VoiceFiles::resolve(v, &voices_dir)?,
        (None, Some(v)) => VoiceFiles::resolve_from(v, base, &voices_dir)?,
        (None, None) => VoiceFiles::resolve(DEFAULT_VOICE, &voices_dir)?,
    };
    let segment_files = segment_voice_files(&script, &opts.script, &voices_dir)?;
    let named_lexicon = guard::script_lexicon(&opts.script);
    let mut inputs = opts.inputs(&voice.model, &voice.config);
    if let Some(lexicon) = &named_lexicon {
        inputs.push(("lexicon the script names", lexicon.as_path()));
    }
    for files in segment_files.iter().flatten() {
        inputs.push(("voice model a segment names", files.model.as_path()));
        inputs.push(("voice config a segment names", files.config.as_path()));
    }
    let files = slides.as_ref().map_or(&[][..], |s| &s.files[..]);
    inputs.extend(files.iter().map(|f| ("slide", f.slide.path.as_path())));
    check_outputs(opts, &script, &inputs)?;
    let noise = !opts.settings.deterministic;
    let mut engine = SpeechEngine::new(
        service,
        SpeechOptions {
            voice,
            speed: script.speed,
            noise,
            speaker: 0,
        },
    )?;
    add_segment_voices(&mut engine, &script, &opts.script, segment_files, noise)?;
    if let Some(lexicon) = &script.lexicon {
        for voice in engine.configs() {
            lexicon
                .check_symbols(&voice.espeak_voice, |s| voice.has_symbol(s))
                .map_err(|mut e| {
                    // An inline entry's file is the script's.
                    if e.file.as_os_str().is_empty() {
                        e.file = opts.script.clone();
                    }
                    e
                })?;
        }
    }
    let voice_of = |segment: usize| {
        let (name, config) = engine.segment_voice(segment);
        (name, config.espeak_voice.as_str())
    };
    for message in caveats(&script, &voice_of) {
        progress.event(Event::Warning { message });
    }
    stopped()?;
    clock.add(Stage::Script, t.elapsed());
    Ok((script, engine))
}

/// Every file the render writes, before any work: the output and its sidecar, or with
/// `--split chapters` each chapter's file and sidecar in the output directory (created here).
fn check_outputs(opts: &RenderOptions, script: &Script, inputs: &[(&str, &Path)]) -> Result<()> {
    let cache = match &opts.cache {
        CacheLocation::Dir(dir) => Some(dir.as_path()),
        CacheLocation::Temporary => None,
    };
    let Some(parts) = split::planned(opts, script)? else {
        let sidecar = opts.settings.sidecar(&opts.output);
        return guard::check_render_outputs(&opts.output, sidecar.as_deref(), inputs, cache);
    };
    guard::create_output_dir(&opts.output)?;
    for part in &parts {
        let sidecar = opts
            .settings
            .subtitles
            .map(|f| part.path.with_extension(f.extension()));
        guard::check_render_outputs(&part.path, sidecar.as_deref(), inputs, cache)?;
    }
    Ok(())
}

/// The voice files each segment names (`None` for a segment that names none), each name or path
/// resolved once; a voice that is missing is exit 2 naming `segments[N].voice`.
fn segment_voice_files(
    script: &Script,
    path: &Path,
    voices_dir: &Path,
) -> Result<Vec<Option<VoiceFiles>>> {
    let base = path.parent().unwrap_or(Path::new(""));
    let mut resolved: HashMap<&str, VoiceFiles> = HashMap::new();
    let mut out = Vec::with_capacity(script.segments.len());
    for (i, segment) in script.segments.iter().enumerate() {
        let Some(name) = segment.voice.as_deref() else {
            out.push(None);
            continue;
        };
        if !resolved.contains_key(name) {
            let files = VoiceFiles::resolve_from(name, base, voices_dir)
                .map_err(|e| segment_error(path, i, "voice", e.to_string()))?;
            resolved.insert(name, files);
        }
        out.push(resolved.get(name).cloned());
    }
    Ok(out)
}

/// Gives the engine the voice, pace and speaker of every segment that asks for its own, each
/// checked against its voice before any work: a speaker the voice lacks (or any speaker on a
/// single-speaker voice) and a voice of another sample rate are exit 2 naming the segment.
fn add_segment_voices(
    engine: &mut SpeechEngine,
    script: &Script,
    path: &Path,
    files: Vec<Option<VoiceFiles>>,
    noise: bool,
) -> Result<()> {
    let own =
        |s: &crate::script::Segment| s.voice.is_some() || s.speaker.is_some() || s.speed.is_some();
    if !script.segments.iter().any(own) {
        return Ok(());
    }
    let (rate, main_name) = (
        engine.config().sample_rate,
        engine.voice_files().name.clone(),
    );
    let mut by_segment = Vec::with_capacity(script.segments.len());
    for (i, (segment, files)) in script.segments.iter().zip(files).enumerate() {
        if !own(segment) {
            by_segment.push(0);
            continue;
        }
        let fail = |field: &str, message: String| segment_error(path, i, field, message);
        let files = match files {
            Some(f) => f,
            None => engine.voice_files().clone(),
        };
        let config = engine
            .voice_config(&files)
            .map_err(|e| fail("voice", e.to_string()))?;
        if let Some(speaker) = segment.speaker {
            if config.num_speakers <= 1 {
                return Err(fail(
                    "speaker",
                    format!(
                        "voice {} has a single speaker; remove \"speaker\", which chooses among the speakers of a multi-speaker voice",
                        files.name
                    ),
                ));
            }
            if speaker >= config.num_speakers {
                return Err(fail(
                    "speaker",
                    format!(
                        "voice {} has speakers 0 to {}, not {speaker}",
                        files.name,
                        config.num_speakers - 1
                    ),
                ));
            }
        }
        if config.sample_rate != rate {
            return Err(fail(
                "voice",
                format!(
                    "voice {} speaks at {} Hz and the render's voice {main_name} at {rate} Hz; talker does not resample between voices, so choose one of {rate} Hz (Piper's x_low and low voices are 16000 Hz, medium and high 22050 Hz)",
                    files.name, config.sample_rate
                ),
            ));
        }
        let index = engine
            .add_voice(SpeechOptions {
                voice: files,
                speed: segment.speed.unwrap_or(script.speed),
                noise,
                speaker: segment.speaker.unwrap_or(0),
            })
            .map_err(|e| fail("voice", e.to_string()))?;
        by_segment.push(index);
    }
    engine.set_segment_voices(by_segment);
    Ok(())
}

fn segment_error(path: &Path, i: usize, field: &str, message: String) -> Error {
    Error::Script(ScriptError {
        file: path.to_path_buf(),
        at: format!("segments[{i}].{field}"),
        message,
    })
}

/// Whether a video of `script` shows its slides: `--layout slides` (or the script's), or no layout
/// asked for and a script that names slides. A layout that shows none is warned about.
fn shows_slides(opts: &RenderOptions, script: &Script, progress: &dyn Progress) -> bool {
    let asked = opts.settings.look.layout;
    let shown = slides::shown(asked, script);
    if let Some(other) = asked
        .or(script.layout)
        .filter(|_| !shown && slides::named(script))
    {
        progress.event(Event::Warning {
            message: format!(
                "{}: the script names slides, which --layout {} does not show; use --layout slides for them",
                opts.script.display(),
                other.tag()
            ),
        });
    }
    shown
}

/// What the voices will read otherwise than meant, one warning per kind naming the first segment:
/// markup dropped (every tag but `<break>`), letters the language of the segment's voice (its
/// name and espeak-ng language from `voice_of`) does not use.
fn caveats<'a>(script: &Script, voice_of: &dyn Fn(usize) -> (&'a str, &'a str)) -> Vec<String> {
    let first_of = |found: &dyn Fn(usize, &str) -> Option<String>| {
        let mut hits = script
            .segments
            .iter()
            .enumerate()
            .filter_map(|(i, s)| found(i, &s.text).map(|what| (i, what)));
        let (i, what) = hits.next()?;
        let more = match hits.count() {
            0 => String::new(),
            n => format!(" (and {n} more segment{})", if n == 1 { "" } else { "s" }),
        };
        Some(format!("segments[{i}].text{more}: {what}"))
    };
    let markup = first_of(&|_, t| {
        text::markup::first_other_tag(t).map(|tag| {
            format!(
                "holds markup ({tag}), which is dropped (not read aloud, not shown): talker reads plain text and understands one tag, <break time=\"1.5s\"/>"
            )
        })
    });
    let foreign = first_of(&|i, t| {
        let (voice, language) = voice_of(i);
        text::caveats::foreign_letters(t, language).map(|system| {
            format!(
                "has {system} letters, which voice {voice} ({language}) does not speak: espeak-ng names them letter by letter; use a voice for that language or write the words in Latin letters"
            )
        })
    });
    markup.into_iter().chain(foreign).collect()
}

/// FFmpeg opens the files it writes by UTF-8 name only (ffmpeg-next panics on any other), so a
/// path that is not UTF-8 is refused before any work rather than failing after all of it.
fn ffmpeg_path(path: &Path, what: &str, fix: &str) -> Result<()> {
    if path.to_str().is_some() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{}: the {what} path is not valid UTF-8, and FFmpeg writes only to UTF-8 names; {fix} in UTF-8",
        path.display()
    )))
}

/// Text, phonemes and phrase keys of every sentence.
pub fn build_plan(
    script: &Script,
    engine: &SpeechEngine,
    progress: &dyn Progress,
    clock: &Clock,
    cancel: &AtomicBool,
) -> Result<Plan> {
    progress.event(Event::Start {
        stage: Stage::Phonemes,
        total: script.segments.len() as u64,
    });
    let (voices, by_segment) = engine.plan_voices();
    let plan = Plan::build_voiced(
        script,
        &voices,
        by_segment,
        &Phonemizer::global()?,
        clock,
        cancel,
    )?;
    progress.event(Event::Finish {
        stage: Stage::Phonemes,
    });
    Ok(plan)
}

/// Reads and checks every input (script, voice, portrait and face) and plans the render, cheapest
/// checks first, so bad input fails in milliseconds.
pub fn prepare(
    opts: &RenderOptions,
    service: &SpeechService,
    progress: &dyn Progress,
    clock: &Clock,
    cancel: &AtomicBool,
) -> Result<Prepared> {
    if opts.portrait.as_os_str().is_empty() {
        return Err(Error::Usage(
            "a video needs a portrait: talker render SCRIPT PORTRAIT -o talk.mp4 (audio-only outputs, -o book.m4b or .wav, need none)".into(),
        ));
    }
    guard::regular_input(&opts.portrait, "portrait")?;
    if let CacheLocation::Dir(dir) = &opts.cache {
        ffmpeg_path(
            dir,
            "cache directory",
            "point --cache (or $TALKER_CACHE) at a directory named",
        )?;
    }
    // A bad background image is refused before the voice loads.
    let background = backdrop(&opts.settings.look.background)?;
    let (script, engine) = load_inputs(opts, service, progress, clock, cancel)?;
    let t = Instant::now();
    progress.event(Event::Start {
        stage: Stage::Face,
        total: 0,
    });
    let portrait = Portrait::open(&opts.portrait)?;
    let models = FaceModels::load(&opts.assets.face_dir())?;
    let analysis = models.analyse(&portrait)?;
    if cancel.load(Ordering::Relaxed) {
        return Err(Error::Cancelled);
    }
    if analysis.faces_found > 1 {
        progress.event(Event::Warning {
            message: format!(
                "{} faces found in {}; animating the largest",
                analysis.faces_found,
                opts.portrait.display()
            ),
        });
    }
    let settings = &opts.settings;
    let slides_shown = slides::shown(settings.look.layout, &script);
    // Slides are made for lecture frames, whatever the portrait's shape.
    let size = settings
        .look
        .size
        .or(script.size)
        .unwrap_or_else(|| match slides_shown {
            true => slides::DEFAULT_SIZE,
            false => look::default_size(portrait.image.width(), portrait.image.height()),
        });
    let video = VideoSettings {
        width: size.0,
        height: size.1,
        fps: settings.look.fps.unwrap_or(script.fps),
        crf: settings.crf,
        preset: settings.preset.clone(),
        threads: 1,
    };
    video.validate()?;
    let layout = match slides_shown {
        true => Layout::Slides,
        false => settings
            .look
            .layout
            .or(script.layout)
            .unwrap_or_else(|| look::default_layout(portrait.image.dimensions(), size)),
    };
    let look_opts = LookOptions {
        framing: settings.look.framing,
        layout,
        background: &background,
        pip: settings.look.pip,
        pip_size: settings.look.pip_size,
        size,
        still: settings.look.still,
        seed: settings.look.seed,
    };
    let (mut look, mut look_key) = look::prepare(
        &portrait.image,
        &analysis.face.landmarks,
        &look_opts,
        video.clone(),
    )
    .map_err(|e| blame_the_size(e, &portrait, &analysis.face.landmarks, &look_opts, video))?;
    drop(portrait);
    clock.add(Stage::Face, t.elapsed());
    progress.event(Event::Finish { stage: Stage::Face });

    // Checked (decoded) before the voice loaded; read again here for the keys.
    let deck = match look.pip {
        Some(pip) => {
            let list = slides::list(&script, &opts.script, false)?;
            let bars = look::bars(&background, size.0, size.1);
            let deck = Deck::new(list, &opts.script, bars, pip);
            look_key = KeyBuilder::new("look")
                .bytes("portrait", &look_key.0)
                .bytes("slides", &deck.key(settings.look.pip).0)
                .finish();
            Some(deck)
        }
        None => None,
    };
    let mut plan = build_plan(&script, &engine, progress, clock, cancel)?;
    plan.assign_chunk_keys(&look_key);
    if let Some(deck) = &deck {
        deck.key_chunks(&mut plan);
    }
    look.slides = deck;
    Ok(Prepared {
        script,
        engine,
        look,
        plan,
    })
}

/// The background's pixels: an image is read (and refused, exit 2, if it is no PNG or JPEG).
fn backdrop(background: &Background) -> Result<Backdrop> {
    Ok(match background {
        Background::Blur => Backdrop::Blur,
        Background::Color(c) => Backdrop::Color(*c),
        Background::Image(path) => {
            let bad = |why: String| {
                Error::Usage(format!(
                    "{}: the --background image {why}; give a PNG or JPEG file, a colour such as #1e2a3c, or blur",
                    path.display()
                ))
            };
            // A FIFO would block the open and a huge image would exhaust memory: a regular file
            // only, no larger a side than a portrait may have.
            if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
                return Err(bad(match std::fs::metadata(path) {
                    Err(e) => format!("cannot be read ({e})"),
                    Ok(_) => "is not a regular file".to_owned(),
                }));
            }
            let reader =
                image::ImageReader::open(path).map_err(|e| bad(format!("cannot be read ({e})")))?;
            Backdrop::Image(crate::face::decode_picture(reader, bad)?)
        }
    })
}

/// A frame whose shape crops the face away is the size's fault, not the face's: when the portrait
/// works at its own shape (its default size, else at the requested size's longest side) or with
/// `--framing head` at the requested size, the error says so and names what works.
fn blame_the_size(
    e: Error,
    portrait: &Portrait,
    landmarks: &Landmarks,
    asked: &LookOptions,
    video: VideoSettings,
) -> Error {
    if !matches!(e, Error::Rig(_)) {
        return e;
    }
    let works = |opts: &LookOptions| {
        let video = VideoSettings {
            width: opts.size.0,
            height: opts.size.1,
            ..video.clone()
        };
        look::prepare(&portrait.image, landmarks, opts, video).is_ok()
    };
    let (pw, ph) = (
        u64::from(portrait.image.width()),
        u64::from(portrait.image.height()),
    );
    let (w, h) = asked.size;
    let side = u64::from(w.max(h));
    let even = |v: u64| (v.max(64) as u32) & !1;
    let own = (even(side * pw / pw.max(ph)), even(side * ph / pw.max(ph)));
    let mut fixes = Vec::new();
    if let Some((sw, sh)) = [look::default_size(pw as u32, ph as u32), own]
        .into_iter()
        .filter(|&size| size != asked.size)
        .find(|&size| works(&LookOptions { size, ..*asked }))
    {
        fixes.push(format!(
            "a --size (or script \"size\") closer to the portrait's shape, such as {sw}x{sh}"
        ));
    }
    if asked.layout == Layout::Fill
        && works(&LookOptions {
            layout: Layout::Fit,
            ..*asked
        })
    {
        fixes.push(format!(
            "--layout fit, which shows the whole portrait inside the {w}x{h} frame on a background"
        ));
    }
    let largest = crate::slides::PipSize::try_from(*crate::slides::PipSize::RANGE.end()).ok();
    if let Some(pip_size) = largest.filter(|_| asked.layout == Layout::Slides)
        && pip_size != asked.pip_size
        && works(&LookOptions { pip_size, ..*asked })
    {
        fixes.push(format!(
            "a larger --pip-size, such as {pip_size}, which gives the speaker more of the frame"
        ));
    }
    let head = LookOptions {
        framing: Framing::Head,
        ..*asked
    };
    if asked.framing != Framing::Head && works(&head) {
        fixes.push(format!(
            "--framing head, which frames the head and shoulders at {w}x{h}"
        ));
    }
    if fixes.is_empty() {
        return e;
    }
    let what = if matches!(e, Error::Rig(RenderError::FaceTooSmall { .. })) {
        "leaves too small a face to animate in"
    } else {
        "crops the face out of"
    };
    Error::Usage(format!(
        "a {w}x{h} frame {what} portrait {} ({pw}x{ph} px); choose {}",
        portrait.path.display(),
        fixes.join(", or ")
    ))
}
