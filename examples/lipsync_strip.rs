//! Plans the mouth for real Piper phone timings and renders the utterance at 25 frames/s as one
//! contact sheet of mouth crops (rows of 10 frames), printing the keys and each frame's pose.
//!
//! Input: the Piper timing fixture and the bundled portrait with its landmark estimate.
//! Output: `<out_dir>/strip-<n>.png` per utterance and the plan on stdout.
//!
//! `cargo run --release --example lipsync_strip -- [out_dir]`

use std::error::Error;
use talker::lipsync::{Phone, plan};
use talker::render::{FaceRig, FramePose, Idle};

const FPS: f64 = 25.0;

fn main() -> Result<(), Box<dyn Error>> {
    let out_dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/tmp/talker-strip".into());
    std::fs::create_dir_all(&out_dir)?;
    let img = image::open("examples/portrait.png")?.to_rgb8();
    let lm_json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        "tests/data/lipsync/astronaut-68-estimated.json",
    )?)?;
    let pts: Vec<[f32; 2]> = serde_json::from_value(lm_json["points"].clone())?;
    let lm: [[f32; 2]; 68] = pts.try_into().map_err(|_| "68 points expected")?;
    let rig = FaceRig::new(&img, &lm)?;
    let idle = Idle::new(1, false);
    let fixture: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        "tests/data/lipsync/piper-joe-phones.json",
    )?)?;
    let (w, h) = (rig.width(), rig.height());
    let mut buf = vec![0u8; (w * h * 3) as usize];
    // Mouth crop: around the lip landmarks.
    let (cx, cy) = (lm[51][0].round() as u32, lm[62][1].round() as u32);
    let (tw, th) = (80u32, 70u32);
    for (n, u) in fixture["utterances"]
        .as_array()
        .ok_or("utterances")?
        .iter()
        .enumerate()
    {
        let rate = u["sample_rate"].as_u64().ok_or("rate")? as u32;
        let phones: Vec<Phone> = u["phones"]
            .as_array()
            .ok_or("phones")?
            .iter()
            .map(|p| Phone {
                ipa: p[0].as_str().unwrap_or("").to_string(),
                start: p[1].as_u64().unwrap_or(0),
                end: p[2].as_u64().unwrap_or(0),
            })
            .collect();
        let track = plan(&phones, rate);
        println!("{}", u["text"]);
        for k in track.keys() {
            println!(
                "  {:6.3}-{:6.3} {:?} {:?} open {:.2}",
                k.start, k.end, k.viseme, k.kind, k.pose.open
            );
        }
        let frames = (track.duration() * FPS).ceil() as u32 + 3;
        let cols = 10;
        let rows = frames.div_ceil(cols);
        let mut sheet = image::RgbImage::new(tw * cols, th * rows);
        for i in 0..frames {
            let t = f64::from(i) / FPS;
            let (blink, head) = idle.pose_at(t);
            let pose = FramePose {
                mouth: track.pose_at(t),
                blink,
                head,
            };
            rig.render(&pose, &mut buf);
            let frame = image::RgbImage::from_raw(w, h, buf.clone()).ok_or("size")?;
            let crop = image::imageops::crop_imm(&frame, cx - tw / 2, cy - th / 2, tw, th);
            image::imageops::replace(
                &mut sheet,
                &crop.to_image(),
                i64::from(i % cols * tw),
                i64::from(i / cols * th),
            );
        }
        sheet.save(format!("{out_dir}/strip-{n}.png"))?;
    }
    Ok(())
}
