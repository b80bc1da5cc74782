//! Face box and 68 landmarks of a portrait, with the @vladmandic/face-api 1.7.15 weights
//! (MIT) evaluated by our own code: the tiny face detector and the 68-point landmark net.
//!
//! Input: a model folder holding `tiny_face_detector_model` and `face_landmark_68_model`
//! (`-weights_manifest.json` + `.bin` each), and RGB images. Output: face boxes, landmarks in
//! image pixels, and for a portrait the largest face with its landmarks. Invariants: the models
//! are checked tensor by tensor at load time; `detect` and `landmarks` never fail on a loaded
//! model (they work on any frame); `analyse` refuses portraits whose face is absent or smaller
//! than [`MIN_FACE_PX`] with an error that names the file and says what to do.

mod detector;
mod landmarks;
mod layers;
mod ops;
mod portrait;
pub mod tfjs_weights;

use std::path::{Path, PathBuf};

use image::RgbImage;

pub use detector::{FaceBox, iou};
pub use landmarks::{Eye, Landmarks};
pub use portrait::{MAX_SIDE, MIN_SIDE, Portrait, decode_picture, to_rgb_over_white};
use tfjs_weights::WeightsError;

/// The narrowest face (detector box width, px) that is animated; below it the mouth is only a
/// few pixels wide and the landmarks too coarse to warp.
const MIN_FACE_PX: u32 = 64;

/// Base names of the two models inside the model folder.
pub const DETECTOR_MODEL: &str = "tiny_face_detector_model";
pub const LANDMARK_MODEL: &str = "face_landmark_68_model";

/// Everything that can go wrong when reading a portrait or the face models.
#[derive(Debug, thiserror::Error)]
pub enum FaceError {
    #[error("portrait {path} does not exist; check the path (a PNG or JPEG photo is expected)")]
    PortraitMissing { path: PathBuf },
    #[error("portrait {path} cannot be read ({reason}); check its permissions")]
    PortraitUnreadable { path: PathBuf, reason: String },
    #[error("portrait {path} is not a PNG or JPEG image; export the photo as PNG or JPEG")]
    NotAnImage { path: PathBuf },
    #[error(
        "portrait {path} is a {format} image, which talker does not read; only PNG and JPEG are supported: export the photo as PNG or JPEG"
    )]
    UnsupportedFormat { path: PathBuf, format: &'static str },
    #[error(
        "portrait {path} is damaged or truncated ({reason}); re-export or re-download the photo"
    )]
    PortraitCorrupt { path: PathBuf, reason: String },
    #[error(
        "portrait {path} is {width}x{height} px, under the minimum of {MIN_SIDE} px a side; use a larger photo"
    )]
    PortraitTooSmall {
        path: PathBuf,
        width: u32,
        height: u32,
    },
    #[error(
        "portrait {path} is {width}x{height} px, over the maximum of {MAX_SIDE} px a side; scale it down (about 1000 px is plenty)"
    )]
    PortraitTooLarge {
        path: PathBuf,
        width: u32,
        height: u32,
    },
    #[error(
        "no face found in portrait {path}; use a photo with one clearly visible, roughly frontal face"
    )]
    NoFace { path: PathBuf },
    #[error(
        "the face in portrait {path} is only {width_px} px wide (minimum {min_px}); use a larger photo or crop closer to the face"
    )]
    FaceTooSmall {
        path: PathBuf,
        width_px: u32,
        min_px: u32,
    },
    #[error(
        "face model file {path} is missing; the model folder must hold {DETECTOR_MODEL} and {LANDMARK_MODEL} (-weights_manifest.json and .bin) from @vladmandic/face-api 1.7.15"
    )]
    ModelMissing { path: PathBuf },
    #[error("face model file {path} cannot be read ({reason}); check its permissions")]
    ModelUnreadable { path: PathBuf, reason: String },
    #[error(
        "face model {path} is damaged or does not match the network: {source}; reinstall the @vladmandic/face-api 1.7.15 model files"
    )]
    ModelCorrupt {
        path: PathBuf,
        #[source]
        source: WeightsError,
    },
}

impl FaceError {
    /// True for problems with the portrait the user gave (exit code 2), false for broken model files.
    pub fn is_bad_input(&self) -> bool {
        !matches!(
            self,
            FaceError::ModelMissing { .. }
                | FaceError::ModelUnreadable { .. }
                | FaceError::ModelCorrupt { .. }
        )
    }
}

/// The largest face of a portrait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Face {
    /// `[x, y, w, h]` in image pixels, as the detector gave it.
    pub bbox: [f32; 4],
    pub score: f32,
    pub landmarks: Landmarks,
}

/// What `analyse` found in a portrait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaceAnalysis {
    pub face: Face,
    /// How many faces the detector found (the largest is analysed); more than one may deserve
    /// a warning to the user.
    pub faces_found: usize,
}

/// The two loaded nets.
pub struct FaceModels {
    detector: detector::TinyFaceDetector,
    landmark_net: landmarks::LandmarkNet,
}

impl FaceModels {
    /// Loads both models from `dir`.
    pub fn load(dir: &Path) -> Result<FaceModels, FaceError> {
        let detector = load_model(dir, DETECTOR_MODEL, detector::TinyFaceDetector::load)?;
        let landmark_net = load_model(dir, LANDMARK_MODEL, landmarks::LandmarkNet::load)?;
        Ok(FaceModels {
            detector,
            landmark_net,
        })
    }

    /// All faces scoring above 0.5, largest first.
    pub fn detect(&self, img: &RgbImage) -> Vec<FaceBox> {
        self.detector.detect(img)
    }

    /// The 68 landmarks of the face in `bbox` (`[x, y, w, h]`, image pixels), for any image,
    /// e.g. a rendered video frame.
    pub fn landmarks(&self, img: &RgbImage, bbox: [f32; 4]) -> Landmarks {
        self.landmark_net.landmarks(img, bbox)
    }

    /// The largest face of the portrait with its landmarks.
    pub fn analyse(&self, portrait: &Portrait) -> Result<FaceAnalysis, FaceError> {
        let faces = self.detect(&portrait.image);
        let Some(largest) = faces.first() else {
            return Err(FaceError::NoFace {
                path: portrait.path.clone(),
            });
        };
        let width_px = largest.bbox[2].max(0.0).round() as u32;
        if width_px < MIN_FACE_PX {
            return Err(FaceError::FaceTooSmall {
                path: portrait.path.clone(),
                width_px,
                min_px: MIN_FACE_PX,
            });
        }
        Ok(FaceAnalysis {
            face: Face {
                bbox: largest.bbox,
                score: largest.score,
                landmarks: self.landmarks(&portrait.image, largest.bbox),
            },
            faces_found: faces.len(),
        })
    }
}

/// Reads `{name}-weights_manifest.json` and its shards from `dir` and builds a net from them,
/// requiring that the net uses every tensor (a leftover means a different model).
fn load_model<T>(
    dir: &Path,
    name: &str,
    build: impl FnOnce(
        &mut std::collections::HashMap<String, tfjs_weights::Tensor>,
    ) -> Result<T, WeightsError>,
) -> Result<T, FaceError> {
    let manifest_path = dir.join(format!("{name}-weights_manifest.json"));
    let corrupt = |path: &Path| {
        let path = path.to_path_buf();
        move |source| FaceError::ModelCorrupt { path, source }
    };
    let manifest =
        String::from_utf8(read(&manifest_path)?).map_err(|_| FaceError::ModelCorrupt {
            path: manifest_path.clone(),
            source: WeightsError::Manifest("the file is not UTF-8 text".to_owned()),
        })?;
    let mut bin = Vec::new();
    for shard in tfjs_weights::shard_paths(&manifest).map_err(corrupt(&manifest_path))? {
        bin.extend(read(&dir.join(shard))?);
    }
    let mut map = tfjs_weights::decode(&manifest, &bin).map_err(corrupt(&manifest_path))?;
    let net = build(&mut map).map_err(corrupt(&manifest_path))?;
    if let Some(extra) = map.keys().min() {
        return Err(FaceError::ModelCorrupt {
            path: manifest_path,
            source: WeightsError::Unexpected {
                name: extra.clone(),
            },
        });
    }
    Ok(net)
}

fn read(path: &Path) -> Result<Vec<u8>, FaceError> {
    std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => FaceError::ModelMissing {
            path: path.to_path_buf(),
        },
        _ => FaceError::ModelUnreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        },
    })
}

#[cfg(test)]
mod error_tests;
#[cfg(test)]
mod tests;
