//! Command-line arguments (clap derive). Syntax and ranges only; meaning is checked by the library.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
#[cfg(feature = "render")]
use talker::settings::{LookSettings, RenderSettings};

use super::common::{Global, SpeechArgs};

const ABOUT: &str = "Render a narrated talking-portrait video from a script and one photo.";

const LONG_ABOUT: &str = "\
Render a narrated talking-portrait video from a script and one photo.

talker reads a JSON script, speaks it with a neural Piper voice, and animates the portrait's mouth
phoneme by phoneme (with blinks and slight head motion) into an H.264 + AAC MP4.

Work is cached: speech per sentence and video per chunk. Re-rendering after an edit redoes only the
changed parts, and a render that was killed resumes where it stopped.";

const AFTER_HELP: &str = "\
Examples:
  talker render examples/script.json examples/portrait.png -o talk.mp4
  talker render book.json face.jpg -o book.mp4 --framing head --size 720x720
  talker render book.epub -o book.m4b --subtitles vtt --lexicon names.json
  talker render book.epub -o book.mp3 --loudness acx && talker audio check book.mp3
  talker script convert notes.md -o notes.json
  talker preview examples/script.json examples/portrait.png -o sheet.png
  talker cache stats

Exit codes: 0 success, 2 bad input (script, portrait, voice, arguments), 3 `audio check` found
a file that misses its standard, 1 other failure, 130 interrupted. See the README for the script format.";

#[derive(Debug, Parser)]
#[command(name = "talker", version, about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub global: Global,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render SCRIPT (JSON, EPUB, Markdown or text) spoken by PORTRAIT to an MP4, or to audio
    /// only (.m4b, .m4a, .mp3, .wav; no portrait).
    #[cfg(feature = "render")]
    Render(RenderArgs),
    /// Draw a contact sheet: one labelled frame per mouth shape (viseme), taken from the script's
    /// own speech, to judge the animation at a glance.
    #[cfg(feature = "render")]
    Preview(PreviewArgs),
    /// Measure every stage and print one JSON object: per-stage seconds, real-time factor, frames/s,
    /// peak RSS, cache hits, and ratios (batch 1 vs bucketed, cold vs cached, ours vs piper-tts).
    #[cfg(feature = "render")]
    Bench(BenchArgs),
    /// GPU speech engines: build, validate, benchmark (see docs/gpu.md).
    #[cfg(feature = "cuda")]
    Engine {
        #[command(subcommand)]
        action: super::engine::EngineAction,
    },
    /// Work with scripts: convert a book (EPUB, Markdown, text) to the JSON a render would use.
    #[cfg(feature = "render")]
    Script {
        #[command(subcommand)]
        action: ScriptAction,
    },
    /// Measure audio files against a publishing standard (ACX, podcast, EBU R128 broadcast).
    #[cfg(feature = "render")]
    Audio {
        #[command(subcommand)]
        action: AudioAction,
    },
    /// Inspect or trim the cache.
    Cache {
        #[command(subcommand)]
        action: CacheAction,
    },
    /// Add job specs to the queue; a job whose content is already queued or running is not added twice.
    #[cfg(feature = "render")]
    Enqueue(super::queue::EnqueueArgs),
    /// Enqueue every job spec in DIR whose inputs changed since its last success, then work them.
    #[cfg(feature = "render")]
    Batch(super::queue::BatchArgs),
    /// Take jobs from the queue and render them until stopped (SIGINT/SIGTERM) or, with --drain, done.
    #[cfg(feature = "render")]
    Worker(super::queue::WorkerArgs),
    /// Jobs in the queue: state, attempts, output, last error.
    #[cfg(feature = "render")]
    Status(super::queue::StatusArgs),
    /// Cancel a queued or running job.
    #[cfg(feature = "render")]
    Cancel(super::queue::JobIdArgs),
    /// Queue a failed or cancelled job again, with its attempts reset.
    #[cfg(feature = "render")]
    Retry(super::queue::JobIdArgs),
}

impl Command {
    /// Whether the command stops cleanly on SIGINT/SIGTERM (it reads the flag the handler sets).
    pub fn watches_signals(&self) -> bool {
        #[cfg(feature = "render")]
        if matches!(self, Command::Worker(_) | Command::Batch(_)) {
            return true;
        }
        self.renders()
    }

    /// Whether the command is a single render, which a second signal may end at once.
    pub fn renders(&self) -> bool {
        #[cfg(feature = "render")]
        if matches!(self, Command::Render(_) | Command::Preview(_)) {
            return true;
        }
        false
    }
}

#[derive(Debug, Subcommand)]
pub enum CacheAction {
    /// Entries, bytes and hit ratios.
    Stats,
    /// Delete least-recently-used entries until the cache fits in SIZE (e.g. 500M, 20G).
    Gc {
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        max_size: u64,
    },
}

#[cfg(feature = "render")]
#[derive(Debug, Subcommand)]
pub enum AudioAction {
    /// Decode each FILE (anything FFmpeg reads) and print every rule of the standard, the
    /// measured value and pass/fail: loudness per ITU BS.1770 / EBU R128, RMS, peaks, noise
    /// floor (quietest RMS, 50 ms time constant) and room tone. Exit 0 when every file passes,
    /// 3 when one misses a rule, 2 when one cannot be read.
    Check(CheckArgs),
}

#[cfg(feature = "render")]
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Audio files to measure.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The rules to check against.
    #[arg(long, value_enum, default_value_t = StandardArg::Acx)]
    pub standard: StandardArg,
}

/// A publishing standard's loudness rules.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum StandardArg {
    /// Audible's ACX: RMS -23 to -18 dB, peak <= -3 dBFS, noise floor <= -60 dB, 0.5-1 s of
    /// room tone at the start and 1-5 s at the end, mono, 44.1 kHz.
    Acx,
    /// Podcasts (Apple): -16 LUFS stereo or -19 LUFS mono, true peak <= -1 dBTP.
    Podcast,
    /// EBU R128: -23 LUFS, true peak <= -1 dBTP.
    Broadcast,
}

#[derive(Debug, Subcommand)]
pub enum ScriptAction {
    /// Write the JSON script that `talker render INPUT` would use, to read or edit it; rendering
    /// the JSON gives the same output as rendering INPUT.
    Convert(ConvertArgs),
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// An EPUB (2 or 3), Markdown (.md, .markdown), plain text (.txt) or JSON script.
    pub input: PathBuf,
    /// The JSON script to write (refused if it exists, unless --force).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Pronunciation lexicons (JSON) to include, later ones winning; repeat for several.
    #[arg(long, value_name = "FILE")]
    pub lexicon: Vec<PathBuf>,
    /// Replace OUTPUT if it exists (only a regular file that is none of the inputs).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub book: talker::book::BookOptions,
}

#[cfg(feature = "render")]
#[derive(Debug, Args, Clone)]
pub struct RenderArgs {
    /// The script: JSON (format in the README), or a book as it comes: EPUB, Markdown (.md) or
    /// plain text (.txt).
    pub script: PathBuf,
    /// The portrait (PNG or JPEG, one clearly visible face); not needed for audio-only outputs.
    pub portrait: Option<PathBuf>,
    /// Output file; its extension picks the kind: .mp4 video, .m4b/.m4a AAC audio with chapters,
    /// .mp3, .wav 16-bit PCM [default: the script's name with .mp4, beside it]. With --split
    /// chapters, a directory [default: the script's name without extension, beside it].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    // Everything that changes the output: each is a job-spec field too (see `settings`).
    #[command(flatten)]
    pub settings: RenderSettings,
    /// Worker threads [default: all cores].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// On the CPU backend: voice-model sessions speaking different sentences at once, sharing the
    /// threads (lanes x intra-op threads = --threads). Each costs about 200 MB (the model and its
    /// activations) [default: one per core from 4 threads (one per two from 8), else one].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub speech_lanes: Option<u16>,
    /// On the CPU: most phoneme ids per voice-model call; sentences of similar length share a call
    /// up to this budget (0 = one sentence per call; at most 8192, the GPU's own budget, about
    /// 330 s of audio in one call). On CPUs batching does not pay (see the README's figures).
    #[arg(long, value_name = "IDS", default_value_t = 0,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(0..=talker::tts::select::GPU_LIMITS.token_budget as u64))]
    pub batch_budget: usize,
    /// Use a temporary cache for this render only.
    #[arg(long)]
    pub no_cache: bool,
    #[command(flatten)]
    pub speech: SpeechArgs,
}

#[cfg(feature = "render")]
#[derive(Debug, Args)]
pub struct PreviewArgs {
    /// The script (its speech decides when each mouth shape is shown).
    pub script: PathBuf,
    /// The portrait.
    pub portrait: PathBuf,
    /// Output PNG.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Voice, as for render.
    #[arg(long)]
    pub voice: Option<String>,
    #[command(flatten)]
    pub look: LookSettings,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Script rendered cold and cached.
    #[arg(long, default_value = "examples/script.json")]
    pub script: PathBuf,
    /// Portrait for the render.
    #[arg(long, default_value = "examples/portrait.png")]
    pub portrait: PathBuf,
    /// Script whose sentences feed the TTS comparison.
    #[arg(long, default_value = "examples/lecture.json")]
    pub tts_script: PathBuf,
    /// A Python with piper-tts installed: also run the reference implementation (scripts/bench sets one up).
    #[arg(long, value_name = "PYTHON")]
    pub piper_python: Option<PathBuf>,
    /// Threads [default: all cores].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    #[command(flatten)]
    pub speech: SpeechArgs,
}

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("unknown unit {c:?}; use K, M, G or T")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size such as 500M or 20G"))?;
    if !n.is_finite() || n < 0.0 {
        return Err("size must be a positive number".into());
    }
    Ok((n * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    /// Every `render` flag that changes the output is a job-spec field of the same name (`-`
    /// read as `_`), so the queue renders whatever `render` does. The exceptions say how a
    /// process renders, not what: a worker sets them once for all its jobs, or they concern
    /// only this command's own output.
    #[cfg(feature = "render")]
    #[test]
    fn every_render_flag_is_a_job_spec_field() {
        use clap::CommandFactory;
        const NOT_IN_SPECS: &[&str] = &[
            // Threads, speech lanes, CPU batching and the cache: the same output however they
            // are set (a worker runs one speech session per concurrent render).
            "threads",
            "speech_lanes",
            "batch_budget",
            "no_cache",
            "cache",
            // Where speech runs: a worker's renders share one speech service (`talker worker
            // --backend`), so a job cannot choose its own.
            "backend",
            "precision",
            "engines",
            "max_batch_wait_ms",
            // What this command prints, and where it finds its models.
            "quiet",
            "json",
            "verbose",
            "assets",
            "help",
        ];
        let mut cli = Cli::command();
        cli.build();
        let render = cli.find_subcommand("render").expect("a render command");
        let ids: Vec<String> = render
            .get_arguments()
            .map(|a| a.get_id().as_str().replace('-', "_"))
            .collect();
        let fields = talker::queue::JobSpec::fields();
        let missing: Vec<&String> = ids
            .iter()
            .filter(|id| !fields.contains(&id.as_str()) && !NOT_IN_SPECS.contains(&id.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "render flags without a job-spec field: {missing:?}; add them to RenderSettings (or, \
             if they do not change the output, to NOT_IN_SPECS with the reason)"
        );
        let stale: Vec<&&str> = NOT_IN_SPECS
            .iter()
            .filter(|e| !ids.iter().any(|id| id == *e))
            .collect();
        assert!(stale.is_empty(), "no such render flags: {stale:?}");
    }
}
