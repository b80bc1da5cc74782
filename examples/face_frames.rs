//! Renders one still per face state (rest, mid-blink, rounded and spread lips) from a portrait's
//! own detected landmarks, for measuring with a second landmark model
//! (`scripts/face-measure.py`, MediaPipe's face mesh, which does see closed eyelids).
//!
//! `cargo run --release --example face_frames -- portrait.png out_dir [full|head]`

use std::error::Error;
use std::path::Path;

use talker::assets::Assets;
use talker::face::{FaceModels, Portrait};
use talker::lipsync::Viseme;
use talker::render::{FaceRig, FramePose, framing};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(portrait), Some(out_dir)) = (args.get(1), args.get(2)) else {
        return Err("usage: face_frames portrait.png out_dir [full|head]".into());
    };
    let head = args.get(3).is_some_and(|f| f == "head");
    std::fs::create_dir_all(out_dir)?;
    let models = FaceModels::load(&Assets::locate(None).face_dir())?;
    let portrait = Portrait::open(Path::new(portrait))?;
    let lm = models.analyse(&portrait)?.face.landmarks.points;
    let (img, lm) = if head {
        framing::head_and_shoulders(&portrait.image, &lm, 384, 384)?
    } else {
        (portrait.image.clone(), lm)
    };
    let rig = FaceRig::new(&img, &lm)?;
    let mut buf = vec![0u8; (rig.width() * rig.height() * 3) as usize];
    let states = [
        ("rest", Viseme::Sil, 0.0),
        ("blink", Viseme::Sil, 1.0),
        ("half-blink", Viseme::Sil, 0.5),
        ("rounded-ou", Viseme::Ou, 0.0),
        ("rounded-oh", Viseme::Oh, 0.0),
        ("spread-ih", Viseme::Ih, 0.0),
        ("spread-ss", Viseme::Ss, 0.0),
    ];
    for (name, viseme, blink) in states {
        let pose = FramePose {
            mouth: viseme.pose(),
            blink,
            ..FramePose::default()
        };
        rig.render(&pose, &mut buf);
        let path = Path::new(out_dir).join(format!("{name}.png"));
        image::RgbImage::from_raw(rig.width(), rig.height(), buf.clone())
            .ok_or("frame size")?
            .save(&path)?;
        println!("{}", path.display());
    }
    Ok(())
}
