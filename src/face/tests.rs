//! End-to-end checks of the face module against the face-api JavaScript reference
//! (tests/data/face/astronaut-reference.json, made by scripts/reference/face_api_reference.js).
//!
//! Input: the real model files (folder from `TALKER_FACE_MODELS`, else
//! `~/.cache/talker/assets/face-api`) and examples/portrait.png. The tests fail, never skip,
//! when the models are absent.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::Deserialize;

use super::*;

pub(super) fn model_dir() -> PathBuf {
    std::env::var_os("TALKER_FACE_MODELS").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/talker/assets/face-api")
        },
        PathBuf::from,
    )
}

pub(super) fn models() -> &'static FaceModels {
    static MODELS: OnceLock<FaceModels> = OnceLock::new();
    MODELS.get_or_init(|| {
        FaceModels::load(&model_dir()).unwrap_or_else(|e| {
            panic!("face tests need the face-api models (set TALKER_FACE_MODELS): {e}")
        })
    })
}

#[derive(Deserialize)]
pub(super) struct Reference {
    pub box_: [f32; 4],
    pub score: f32,
    pub landmarks: Vec<[f32; 2]>,
}

pub(super) fn reference() -> Reference {
    #[derive(Deserialize)]
    struct Raw {
        #[serde(rename = "box")]
        bbox: [f32; 4],
        score: f32,
        landmarks: Vec<[f32; 2]>,
    }
    let text = std::fs::read_to_string("tests/data/face/astronaut-reference.json").unwrap();
    let raw: Raw = serde_json::from_str(&text).unwrap();
    assert_eq!(raw.landmarks.len(), 68);
    Reference {
        box_: raw.bbox,
        score: raw.score,
        landmarks: raw.landmarks,
    }
}

pub(super) fn portrait() -> Portrait {
    Portrait::open(Path::new("examples/portrait.png")).unwrap()
}

fn dist(a: [f32; 2], b: [f32; 2]) -> f32 {
    (a[0] - b[0]).hypot(a[1] - b[1])
}

fn mean(points: &[[f32; 2]]) -> [f32; 2] {
    let n = points.len() as f32;
    [
        points.iter().map(|p| p[0]).sum::<f32>() / n,
        points.iter().map(|p| p[1]).sum::<f32>() / n,
    ]
}

#[test]
fn astronaut_matches_the_face_api_reference() {
    let reference = reference();
    let analysis = models().analyse(&portrait()).unwrap();
    let face = analysis.face;
    assert_eq!(analysis.faces_found, 1);
    let box_iou = iou(face.bbox, reference.box_);
    assert!(
        box_iou >= 0.9,
        "box {:?} vs {:?}: IoU {box_iou}",
        face.bbox,
        reference.box_
    );
    assert!(
        (face.score - reference.score).abs() < 0.02,
        "score {}",
        face.score
    );
    let ours = &face.landmarks;
    let mut worst = 0.0f32;
    for i in Landmarks::MOUTH_CORNERS {
        worst = worst.max(dist(ours.points[i], reference.landmarks[i]));
    }
    for (eye, range) in [
        (Eye::Left, Landmarks::LEFT_EYE),
        (Eye::Right, Landmarks::RIGHT_EYE),
    ] {
        worst = worst.max(dist(
            ours.eye_centre(eye),
            mean(&reference.landmarks[range]),
        ));
    }
    let all = (0..68)
        .map(|i| dist(ours.points[i], reference.landmarks[i]))
        .fold(0.0f32, f32::max);
    eprintln!(
        "astronaut: box IoU {box_iou:.4}, mouth corners/eye centres max {worst:.3} px, all 68 max {all:.3} px"
    );
    assert!(
        worst <= 3.0,
        "mouth corners / eye centres off by {worst} px"
    );
}
