//! Every error path of the face module: portraits that are missing, not images, truncated,
//! faceless or with a too small face, and model folders with missing, corrupt or mismatched files.

use std::path::{Path, PathBuf};

use super::tests::{model_dir, models, portrait};
use super::*;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn analyse_path(path: &Path) -> Result<FaceAnalysis, FaceError> {
    models().analyse(&Portrait::open(path)?)
}

fn message_names(err: &FaceError, path: &Path) {
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
}

#[test]
fn missing_portrait() {
    let path = Path::new("tests/data/face/no-such-portrait.png");
    let err = Portrait::open(path).unwrap_err();
    assert!(matches!(err, FaceError::PortraitMissing { .. }), "{err}");
    message_names(&err, path);
}

#[test]
fn directory_as_portrait_is_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let err = Portrait::open(dir.path()).unwrap_err();
    assert!(matches!(err, FaceError::PortraitUnreadable { .. }), "{err}");
    message_names(&err, dir.path());
}

#[test]
fn text_file_named_png() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "notes.png",
        b"This is a shopping list, not a photo.\n",
    );
    let err = Portrait::open(&path).unwrap_err();
    assert!(matches!(err, FaceError::NotAnImage { .. }), "{err}");
    message_names(&err, &path);
}

#[test]
fn truncated_png() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read("examples/portrait.png").unwrap();
    let path = write(dir.path(), "truncated.png", &bytes[..2000]);
    let err = Portrait::open(&path).unwrap_err();
    assert!(matches!(err, FaceError::PortraitCorrupt { .. }), "{err}");
    message_names(&err, &path);
}

fn save(dir: &Path, name: &str, img: &RgbImage) -> PathBuf {
    let path = dir.join(name);
    img.save(&path).unwrap();
    path
}

#[test]
fn flag_crop_has_no_face() {
    let dir = tempfile::tempdir().unwrap();
    let flag = image::imageops::crop_imm(&portrait().image, 0, 0, 110, 320).to_image();
    let path = save(dir.path(), "flag.png", &flag);
    let err = analyse_path(&path).unwrap_err();
    assert!(matches!(err, FaceError::NoFace { .. }), "{err}");
    message_names(&err, &path);
}

#[test]
fn noise_has_no_face() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let noise = RgbImage::from_fn(512, 512, |_, _| {
        image::Rgb(std::array::from_fn(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 56) as u8
        }))
    });
    let path = save(dir.path(), "noise.png", &noise);
    assert!(matches!(analyse_path(&path), Err(FaceError::NoFace { .. })));
}

#[test]
fn face_under_64_px() {
    let dir = tempfile::tempdir().unwrap();
    let small = image::imageops::resize(
        &portrait().image,
        256,
        256,
        image::imageops::FilterType::CatmullRom,
    );
    let path = save(dir.path(), "small.png", &small);
    let err = analyse_path(&path).unwrap_err();
    let FaceError::FaceTooSmall {
        width_px, min_px, ..
    } = err
    else {
        panic!("expected FaceTooSmall, got {err}");
    };
    assert!((50..64).contains(&width_px), "{width_px}");
    assert_eq!(min_px, 64);
    message_names(&err, &path);
}

/// A copy of the real model folder whose files the test then damages.
fn model_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(model_dir()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

fn load_err(dir: &Path) -> FaceError {
    match FaceModels::load(dir) {
        Ok(_) => panic!("damaged models loaded"),
        Err(e) => e,
    }
}

fn manifest(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}-weights_manifest.json"))
}

#[test]
fn models_load_from_a_clean_copy() {
    let dir = model_copy();
    assert!(FaceModels::load(dir.path()).is_ok());
}

#[test]
fn missing_model_files() {
    let dir = model_copy();
    std::fs::remove_file(dir.path().join(format!("{LANDMARK_MODEL}.bin"))).unwrap();
    let err = load_err(dir.path());
    assert!(matches!(err, FaceError::ModelMissing { .. }), "{err}");
    assert!(
        err.to_string().contains("face_landmark_68_model.bin"),
        "{err}"
    );
    std::fs::remove_file(manifest(dir.path(), DETECTOR_MODEL)).unwrap();
    assert!(matches!(
        load_err(dir.path()),
        FaceError::ModelMissing { .. }
    ));
}

#[test]
fn unreadable_model_file() {
    let dir = model_copy();
    let path = manifest(dir.path(), DETECTOR_MODEL);
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    assert!(matches!(
        load_err(dir.path()),
        FaceError::ModelUnreadable { .. }
    ));
}

#[test]
fn corrupt_manifest() {
    let dir = model_copy();
    let path = manifest(dir.path(), DETECTOR_MODEL);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() / 2]).unwrap();
    let err = load_err(dir.path());
    assert!(
        matches!(
            &err,
            FaceError::ModelCorrupt {
                source: WeightsError::Manifest(_),
                ..
            }
        ),
        "{err}"
    );
    message_names(&err, &path);
    std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
    assert!(matches!(
        load_err(dir.path()),
        FaceError::ModelCorrupt { .. }
    ));
}

#[test]
fn weights_bin_of_the_wrong_size() {
    let dir = model_copy();
    let bin = dir.path().join(format!("{DETECTOR_MODEL}.bin"));
    let bytes = std::fs::read(&bin).unwrap();
    std::fs::write(&bin, &bytes[..bytes.len() - 1]).unwrap();
    let err = load_err(dir.path());
    assert!(
        matches!(
            err,
            FaceError::ModelCorrupt {
                source: WeightsError::Size {
                    expected: 193_321,
                    actual: 193_320
                },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn models_swapped_or_reshaped() {
    let dir = model_copy();
    // The landmark manifest and weights in the detector's place: a different network.
    for ext in ["-weights_manifest.json", ".bin"] {
        std::fs::copy(
            dir.path().join(format!("{LANDMARK_MODEL}{ext}")),
            dir.path().join(format!("{DETECTOR_MODEL}{ext}")),
        )
        .unwrap();
    }
    let text = std::fs::read_to_string(manifest(dir.path(), DETECTOR_MODEL)).unwrap();
    std::fs::write(
        manifest(dir.path(), DETECTOR_MODEL),
        text.replace(LANDMARK_MODEL, DETECTOR_MODEL),
    )
    .unwrap();
    let err = load_err(dir.path());
    assert!(
        matches!(
            &err,
            FaceError::ModelCorrupt {
                source: WeightsError::Missing { .. },
                ..
            }
        ),
        "{err}"
    );
    // Same tensors, one shape changed (same element count, so the size check passes).
    let dir = model_copy();
    let path = manifest(dir.path(), DETECTOR_MODEL);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("[1,1,512,25]", "[1,1,25,512]", 1)).unwrap();
    let err = load_err(dir.path());
    assert!(
        matches!(
            &err,
            FaceError::ModelCorrupt {
                source: WeightsError::WrongShape { .. },
                ..
            }
        ),
        "{err}"
    );
    // An extra tensor the network does not use.
    let dir = model_copy();
    let path = manifest(dir.path(), DETECTOR_MODEL);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen(
            r#"{"name":"conv0/filters""#,
            r#"{"name":"zzz/extra","shape":[1],"dtype":"float32"},{"name":"conv0/filters""#,
            1,
        ),
    )
    .unwrap();
    let bin = dir.path().join(format!("{DETECTOR_MODEL}.bin"));
    let mut bytes = std::fs::read(&bin).unwrap();
    bytes.splice(0..0, 1.0f32.to_le_bytes());
    std::fs::write(&bin, bytes).unwrap();
    let err = load_err(dir.path());
    assert!(
        matches!(
            &err,
            FaceError::ModelCorrupt {
                source: WeightsError::Unexpected { .. },
                ..
            }
        ),
        "{err}"
    );
}
