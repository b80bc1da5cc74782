//! Renders preview PNGs of the main mouth shapes and a blink, and measures frames/s.
//!
//! Input: a portrait and a landmarks JSON (`{"points": [[x, y], ...68]}`), default the bundled
//! astronaut portrait with its hand-placed estimate. Output: PNGs in the given folder and the
//! single-core frame rate on stdout.
//!
//! `cargo run --release --example render_preview -- [out_dir] [portrait.png] [landmarks.json]`

use std::error::Error;
use std::time::Instant;
use talker::lipsync::{MouthPose, Viseme};
use talker::render::{FaceRig, FramePose, HeadPose};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let out_dir = args.get(1).map_or("/tmp/talker-preview", String::as_str);
    let portrait = args.get(2).map_or("examples/portrait.png", String::as_str);
    let lm_path = args.get(3).map_or(
        "tests/data/lipsync/astronaut-68-estimated.json",
        String::as_str,
    );
    std::fs::create_dir_all(out_dir)?;
    let img = image::open(portrait)?.to_rgb8();
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(lm_path)?)?;
    let pts: Vec<[f32; 2]> = serde_json::from_value(json["points"].clone())?;
    let lm: [[f32; 2]; 68] = pts
        .try_into()
        .map_err(|_| "landmarks file must hold 68 points")?;
    let rig = FaceRig::new(&img, &lm)?;
    let (w, h) = (rig.width(), rig.height());
    let mut buf = vec![0u8; (w * h * 3) as usize];
    let shapes = [
        ("rest", Viseme::Sil.pose(), 0.0),
        ("open", Viseme::Aa.pose(), 0.0),
        ("closed_mbp", Viseme::Pp.pose(), 0.0),
        ("fv", Viseme::Ff.pose(), 0.0),
        ("rounded", Viseme::Ou.pose(), 0.0),
        ("oh", Viseme::Oh.pose(), 0.0),
        ("ee", Viseme::Ih.pose(), 0.0),
        ("e", Viseme::E.pose(), 0.0),
        ("th", Viseme::Th.pose(), 0.0),
        ("blink", MouthPose::REST, 1.0),
        ("half_blink", MouthPose::REST, 0.5),
    ];
    for (name, mouth, blink) in shapes {
        let pose = FramePose {
            mouth,
            blink,
            head: HeadPose::default(),
        };
        rig.render(&pose, &mut buf);
        let frame = image::RgbImage::from_raw(w, h, buf.clone()).ok_or("buffer size")?;
        frame.save(format!("{out_dir}/{name}.png"))?;
    }
    // Frame rate over a cycle of shapes with blinks and head motion.
    let visemes = Viseme::ALL;
    let n = 2000;
    let start = Instant::now();
    for i in 0..n {
        let t = i as f32 / 25.0;
        let pose = FramePose {
            mouth: visemes[i % visemes.len()].pose(),
            blink: if i % 50 < 4 { 0.8 } else { 0.0 },
            head: HeadPose {
                dx: 0.02 * (0.7 * t).sin(),
                dy: 0.01 * (0.5 * t).sin(),
                roll: 0.01 * (0.3 * t).sin(),
            },
        };
        rig.render(&pose, &mut buf);
    }
    let with_head = n as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    for i in 0..n {
        let pose = FramePose {
            mouth: visemes[i % visemes.len()].pose(),
            blink: if i % 50 < 4 { 0.8 } else { 0.0 },
            head: HeadPose::default(),
        };
        rig.render(&pose, &mut buf);
    }
    let still = n as f64 / start.elapsed().as_secs_f64();
    println!(
        "{w}x{h}: {with_head:.0} frames/s with head motion, {still:.0} frames/s still (1 thread)"
    );
    Ok(())
}
