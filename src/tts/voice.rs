//! Piper voices: where the files are, what their `.onnx.json` says, and phonemes → ids.
//!
//! A voice is a pair `NAME.onnx` + `NAME.onnx.json`. `--voice` takes either a name, looked up in the
//! asset directory's `voices/`, or a path to the `.onnx` file. Only espeak-phonemized voices are
//! supported, since espeak-ng is our phonemizer.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::error::SpeechError;

type Result<T, E = SpeechError> = std::result::Result<T, E>;

/// Piper's sentence markers and padding symbol.
const BOS: &str = "^";
const EOS: &str = "$";
const PAD: &str = "_";

/// Sample count per duration frame of every published Piper voice; overridable in the config.
const DEFAULT_HOP: u32 = 256;

#[derive(Debug, Clone)]
pub struct VoiceFiles {
    pub name: String,
    pub model: PathBuf,
    pub config: PathBuf,
}

impl VoiceFiles {
    /// Resolves `--voice`: a path to an `.onnx` file, or a name under `voices_dir`.
    pub fn resolve(voice: &str, voices_dir: &Path) -> Result<VoiceFiles> {
        Self::resolve_from(voice, Path::new(""), voices_dir)
    }

    /// Whether `voice` is a path to a model (it ends in `.onnx` or names a folder), not the name
    /// of one in the voices folder.
    pub fn is_path(voice: &str) -> bool {
        voice.ends_with(".onnx") || Path::new(voice).components().count() > 1
    }

    /// As [`VoiceFiles::resolve`], with a path taken relative to `base` (a script's folder, so a
    /// script names its voices as it names its lexicon, wherever it is rendered from).
    pub fn resolve_from(voice: &str, base: &Path, voices_dir: &Path) -> Result<VoiceFiles> {
        let model = if Self::is_path(voice) {
            base.join(voice)
        } else {
            voices_dir.join(format!("{voice}.onnx"))
        };
        let mut config = model.clone().into_os_string();
        config.push(".json");
        let config = PathBuf::from(config);
        let name = model
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| n.trim_end_matches(".onnx").to_owned())
            .unwrap_or_else(|| voice.to_owned());
        for path in [&model, &config] {
            if !path.is_file() {
                return Err(SpeechError::Voice(format!(
                    "{} not found; a Piper voice is NAME.onnx plus NAME.onnx.json. Give a path to the .onnx file, \
                     or the name of a voice in {} (run scripts/fetch-assets to get the default voice)",
                    path.display(),
                    voices_dir.display()
                )));
            }
        }
        Ok(VoiceFiles {
            name,
            model,
            config,
        })
    }
}

#[derive(Debug, Deserialize)]
struct RawConfig {
    audio: RawAudio,
    #[serde(default)]
    espeak: Option<RawEspeak>,
    #[serde(default)]
    inference: RawInference,
    #[serde(default = "default_phoneme_type")]
    phoneme_type: String,
    phoneme_id_map: HashMap<String, Vec<i64>>,
    #[serde(default = "one")]
    num_speakers: u32,
    #[serde(default)]
    hop_length: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct RawAudio {
    sample_rate: u32,
}

#[derive(Debug, Deserialize)]
struct RawEspeak {
    voice: String,
}

#[derive(Debug, Deserialize)]
struct RawInference {
    #[serde(default = "noise_scale")]
    noise_scale: f32,
    #[serde(default = "one_f")]
    length_scale: f32,
    #[serde(default = "noise_w")]
    noise_w: f32,
}

impl Default for RawInference {
    fn default() -> Self {
        RawInference {
            noise_scale: noise_scale(),
            length_scale: 1.0,
            noise_w: noise_w(),
        }
    }
}

fn default_phoneme_type() -> String {
    "espeak".into()
}
fn one() -> u32 {
    1
}
fn one_f() -> f32 {
    1.0
}
fn noise_scale() -> f32 {
    0.667
}
fn noise_w() -> f32 {
    0.8
}

/// Noise and length scales fed to the model (Piper's `scales` input).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scales {
    pub noise: f32,
    pub length: f32,
    pub noise_w: f32,
}

impl Scales {
    /// Bit-exact key material for the phrase cache.
    pub fn to_bits(self) -> [u32; 3] {
        [
            self.noise.to_bits(),
            self.length.to_bits(),
            self.noise_w.to_bits(),
        ]
    }
}

/// What talker needs from a voice's `.onnx.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceConfig {
    pub sample_rate: u32,
    pub espeak_voice: String,
    pub num_speakers: u32,
    pub hop: u32,
    pub defaults: Scales,
    /// Keyed by shared symbols, which every [`Kept`] of a plan points at.
    id_map: HashMap<Arc<str>, Vec<i64>>,
}

impl VoiceConfig {
    pub fn load(path: &Path) -> Result<VoiceConfig> {
        let text = fs::read_to_string(path)
            .map_err(|e| SpeechError::Voice(format!("cannot read {}: {e}", path.display())))?;
        Self::parse(&text).map_err(|msg| SpeechError::Voice(format!("{}: {msg}", path.display())))
    }

    fn parse(text: &str) -> std::result::Result<VoiceConfig, String> {
        let raw: RawConfig =
            serde_json::from_str(text).map_err(|e| format!("not a Piper voice config ({e})"))?;
        if raw.phoneme_type != "espeak" {
            return Err(format!(
                "phoneme_type {:?} is not supported; talker phonemizes with espeak-ng, so use a voice whose phoneme_type is \"espeak\"",
                raw.phoneme_type
            ));
        }
        let espeak_voice = raw
            .espeak
            .map(|e| e.voice)
            .ok_or("espeak.voice is missing: it names the espeak-ng voice that phonemizes text for this model")?;
        for symbol in [BOS, EOS, PAD] {
            if raw
                .phoneme_id_map
                .get(symbol)
                .is_none_or(|ids| ids.is_empty())
            {
                return Err(format!("phoneme_id_map has no id for {symbol:?}"));
            }
        }
        if !(8000..=96000).contains(&raw.audio.sample_rate) {
            return Err(format!(
                "audio.sample_rate {} is out of range",
                raw.audio.sample_rate
            ));
        }
        let inf = raw.inference;
        Ok(VoiceConfig {
            sample_rate: raw.audio.sample_rate,
            espeak_voice,
            num_speakers: raw.num_speakers,
            hop: raw.hop_length.unwrap_or(DEFAULT_HOP),
            defaults: Scales {
                noise: inf.noise_scale,
                length: inf.length_scale,
                noise_w: inf.noise_w,
            },
            id_map: raw
                .phoneme_id_map
                .into_iter()
                .map(|(symbol, ids)| (Arc::from(symbol), ids))
                .collect(),
        })
    }

    /// Whether the voice has an id for this phoneme (lexicon IPA is checked against it).
    pub fn has_symbol(&self, symbol: &str) -> bool {
        self.id_map.contains_key(symbol)
    }

    /// Piper's id sequence: `^ _`, then each known phoneme followed by `_`, then `$`.
    ///
    /// Returns the ids and, for each phoneme kept (BOS first, EOS last), how many ids it produced, so
    /// per-id durations can be summed back into per-phoneme times.
    pub fn ids(&self, phonemes: &[String]) -> (Vec<i64>, Vec<Kept>) {
        let pad = &self.id_map[PAD];
        let mut ids = Vec::with_capacity(phonemes.len() * 2 + 3);
        let mut kept = Vec::with_capacity(phonemes.len() + 2);
        let mut push = |symbol: &str, with_pad: bool, ids: &mut Vec<i64>| {
            let Some((shared, own)) = self.id_map.get_key_value(symbol) else {
                return;
            };
            ids.extend_from_slice(own);
            let mut n = own.len();
            if with_pad {
                ids.extend_from_slice(pad);
                n += pad.len();
            }
            kept.push(Kept {
                symbol: Arc::clone(shared),
                ids: n,
            });
        };
        push(BOS, true, &mut ids);
        for p in phonemes {
            push(p, true, &mut ids);
        }
        push(EOS, false, &mut ids);
        (ids, kept)
    }
}

/// A phoneme that had an id, and how many consecutive ids it produced. A plan holds one for
/// every phoneme of the book until it is spoken, so the symbol is the voice's shared one, not a
/// string of its own (which cost 40 bytes a phoneme, 30 MB in a 10-hour book).
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    pub symbol: Arc<str>,
    pub ids: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = r#"{"audio":{"sample_rate":22050},"espeak":{"voice":"en-us"},
        "phoneme_id_map":{"_":[0],"^":[1],"$":[2]," ":[3],"a":[14],"b":[15]}}"#;

    #[test]
    fn ids_follow_piper_convention() {
        let cfg = VoiceConfig::parse(MINI).unwrap();
        let (ids, kept) = cfg.ids(&["a".into(), " ".into(), "b".into(), "?".into()]);
        assert_eq!(ids, vec![1, 0, 14, 0, 3, 0, 15, 0, 2]);
        let symbols: Vec<_> = kept.iter().map(|k| &*k.symbol).collect();
        assert_eq!(symbols, ["^", "a", " ", "b", "$"], "unknown '?' is skipped");
        assert_eq!(kept.iter().map(|k| k.ids).sum::<usize>(), ids.len());
    }

    #[test]
    fn defaults_and_hop() {
        let cfg = VoiceConfig::parse(MINI).unwrap();
        assert_eq!(cfg.hop, 256);
        assert_eq!(
            cfg.defaults,
            Scales {
                noise: 0.667,
                length: 1.0,
                noise_w: 0.8
            }
        );
    }

    #[test]
    fn rejects_non_espeak_voices() {
        let text = MINI.replace(r#""audio""#, r#""phoneme_type":"pinyin","audio""#);
        assert!(VoiceConfig::parse(&text).unwrap_err().contains("pinyin"));
    }

    #[test]
    fn rejects_missing_pad() {
        let text = MINI.replace(r#""_":[0],"#, "");
        assert!(VoiceConfig::parse(&text).unwrap_err().contains("\"_\""));
    }

    #[test]
    fn rejects_missing_espeak_voice() {
        let text = MINI.replace(r#""espeak":{"voice":"en-us"},"#, "");
        assert!(
            VoiceConfig::parse(&text)
                .unwrap_err()
                .contains("espeak.voice")
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(
            VoiceConfig::parse("{not json")
                .unwrap_err()
                .contains("not a Piper voice config")
        );
    }

    #[test]
    fn resolve_reports_missing_files() {
        let dir = std::env::temp_dir();
        let err = VoiceFiles::resolve("no-such-voice", &dir).unwrap_err();
        assert!(
            err.to_string().contains("no-such-voice.onnx not found"),
            "{err}"
        );
    }

    #[test]
    fn paths_are_taken_relative_to_the_base_and_names_from_the_voices_dir() {
        let dir = tempfile::tempdir().unwrap();
        let (voices, scripts) = (dir.path().join("voices"), dir.path().join("scripts"));
        for d in [&voices, &scripts.join("v")] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("a.onnx"), b"").unwrap();
            std::fs::write(d.join("a.onnx.json"), b"").unwrap();
        }
        let named = VoiceFiles::resolve_from("a", &scripts, &voices).unwrap();
        assert_eq!(named.model, voices.join("a.onnx"));
        let by_path = VoiceFiles::resolve_from("v/a.onnx", &scripts, &voices).unwrap();
        assert_eq!(by_path.model, scripts.join("v/a.onnx"));
        assert_eq!(by_path.config, scripts.join("v/a.onnx.json"));
        assert_eq!(by_path.name, "a");
        let absolute = VoiceFiles::resolve_from(
            voices.join("a.onnx").to_str().unwrap(),
            &scripts,
            Path::new("/nowhere"),
        )
        .unwrap();
        assert_eq!(absolute.model, voices.join("a.onnx"));
        assert!(VoiceFiles::resolve_from("a.onnx", &scripts, &voices).is_err());
    }
}
