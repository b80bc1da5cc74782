//! Shared helpers for the integration tests: assets, the built binary, temp dirs.

use talker::assets::{Assets, DEFAULT_VOICE};
use talker::tts::piper::PiperModel;
use talker::voice::VoiceFiles;

/// The assets that scripts/fetch-assets installs; tests need the real models.
pub fn assets() -> Assets {
    let a = Assets::locate(None);
    assert!(
        a.voices_dir()
            .join(format!("{DEFAULT_VOICE}.onnx"))
            .is_file(),
        "models missing in {}: run scripts/fetch-assets first",
        a.root.display()
    );
    a
}

pub fn default_voice() -> VoiceFiles {
    VoiceFiles::resolve(DEFAULT_VOICE, &assets().voices_dir()).unwrap()
}

pub fn load_model(threads: usize) -> PiperModel {
    let a = assets();
    PiperModel::load(&default_voice(), &a.onnxruntime_library().unwrap(), threads).unwrap()
}
