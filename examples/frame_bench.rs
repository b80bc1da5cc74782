//! Frame synthesis on one core for the example portrait and for close-ups made from it and from
//! the held-out portrait, in one process, so the ratios to the example are free of machine noise.
//!
//! A close-up is a square crop of 1.5 face-box widths about the detected face, scaled with
//! Lanczos to 600 and 1080 px: the face fills the frame, as in a head-and-shoulders shot.
//!
//! `cargo run --release --example frame_bench -- [--frames N] [--only CASE] [--render-only]
//! [--dump DIR | --compare DIR]`
//!
//! Each case also times [`FaceRig::render_exact`] (every pixel shaded, as the renderer did before
//! the cells) on the same poses and reports the lowest per-frame PSNR of `render` against it
//! over every 20th frame (99 dB: identical); `--render-only` skips that (for profiles and quick
//! A/Bs). `--dump DIR` writes those sampled frames of `render` (raw RGB24, `CASE-FRAME.rgb`);
//! `--compare DIR` reports the lowest PSNR of this build's frames against a dump from another
//! build and the largest byte difference: how a change to the renderer is checked against
//! today's. Each case also reports the pixels a frame changes and so the changed pixels drawn per
//! second. Figures are this thread's CPU time, one core.

use std::error::Error;
use std::path::{Path, PathBuf};

use image::RgbImage;
use image::imageops::FilterType;
use talker::assets::Assets;
use talker::bench::pose;
use talker::face::{FaceModels, Portrait};
use talker::render::FaceRig;

/// This thread's CPU seconds: one core's work, unaffected by other processes taking turns on
/// the machine's cores (wall time on a shared machine is not).
fn cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Frames sampled for `--dump`/`--compare`: every `SAMPLE_EVERY`th.
const SAMPLE_EVERY: usize = 20;

/// A square crop of 1.5 face widths about the face, scaled to `side`, and the face's landmarks
/// moved alike (a face this close fills more than the detector's input window).
fn close_up(models: &FaceModels, img: &RgbImage, side: u32) -> Result<Case, Box<dyn Error>> {
    let face = *models.detect(img).first().ok_or("no face")?;
    let lm = models.landmarks(img, face.bbox).points;
    let [x, y, w, h] = face.bbox;
    let crop = (1.5 * w.max(h)).min(img.width().min(img.height()) as f32) as u32;
    let cx = (x + 0.5 * w - 0.5 * crop as f32).clamp(0.0, (img.width() - crop) as f32) as u32;
    let cy = (y + 0.5 * h - 0.5 * crop as f32).clamp(0.0, (img.height() - crop) as f32) as u32;
    let cut = image::imageops::crop_imm(img, cx, cy, crop, crop).to_image();
    let k = side as f32 / crop as f32;
    // Pixel centres: source x maps to (x - cx + 0.5) * k - 0.5.
    let lm = lm.map(|[px, py]| {
        [
            (px - cx as f32 + 0.5) * k - 0.5,
            (py - cy as f32 + 0.5) * k - 0.5,
        ]
    });
    let img = image::imageops::resize(&cut, side, side, FilterType::Lanczos3);
    Ok(Case {
        face_share: w * k / side as f32,
        img,
        lm,
    })
}

/// A portrait with its landmarks.
struct Case {
    img: RgbImage,
    lm: [[f32; 2]; 68],
    /// Face box width over frame width.
    face_share: f32,
}

fn as_is(models: &FaceModels, img: RgbImage) -> Result<Case, Box<dyn Error>> {
    let face = *models.detect(&img).first().ok_or("no face")?;
    Ok(Case {
        lm: models.landmarks(&img, face.bbox).points,
        face_share: face.bbox[2] / img.width() as f32,
        img,
    })
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let se: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    let mse = se / a.len() as f64;
    if mse == 0.0 {
        99.0
    } else {
        (10.0 * (255.0f64 * 255.0 / mse).log10()).min(99.0)
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let mut frames = 1000usize;
    let mut only = None::<String>;
    let mut render_only = false;
    let (mut dump, mut compare) = (None::<PathBuf>, None::<PathBuf>);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--frames" => frames = args.next().ok_or("--frames N")?.parse()?,
            "--only" => only = Some(args.next().ok_or("--only CASE")?),
            "--render-only" => render_only = true,
            "--dump" => dump = Some(args.next().ok_or("--dump DIR")?.into()),
            "--compare" => compare = Some(args.next().ok_or("--compare DIR")?.into()),
            _ => return Err(format!("unknown argument {a}").into()),
        }
    }
    let models = FaceModels::load(&Assets::locate(None).face_dir())?;
    let example = Portrait::open(Path::new("examples/portrait.png"))?.image;
    let held_out = Portrait::open(Path::new("tests/data/face/woman-pexels-27411.jpg"))?.image;
    let cases = [
        ("example-512", as_is(&models, example.clone())?),
        ("closeup-600", close_up(&models, &example, 600)?),
        ("closeup-1080", close_up(&models, &example, 1080)?),
        ("heldout-closeup-600", close_up(&models, &held_out, 600)?),
        ("heldout-closeup-1080", close_up(&models, &held_out, 1080)?),
    ];
    let mut base_fps = None;
    for (name, case) in cases {
        if only.as_ref().is_some_and(|o| o != name) {
            continue;
        }
        let Case {
            img,
            lm,
            face_share,
        } = case;
        let rig = FaceRig::new(&img, &lm)?;
        let mut buf = vec![0u8; img.as_raw().len()];
        // One untimed pass warms the caches and the allocator.
        for i in 0..frames.min(50) {
            rig.render(&pose(i), &mut buf);
        }
        let t = cpu_seconds();
        for i in 0..frames {
            rig.render(&pose(i), &mut buf);
        }
        let fps = frames as f64 / (cpu_seconds() - t);
        let base = *base_fps.get_or_insert(fps);
        let exact_fps = (!render_only).then(|| {
            let t = cpu_seconds();
            for i in 0..frames {
                rig.render_exact(&pose(i), &mut buf);
            }
            frames as f64 / (cpu_seconds() - t)
        });
        if let Some(dir) = &dump {
            std::fs::create_dir_all(dir)?;
        }
        // Every sampled frame rendered once, for all that is asked of it: the pixels it changes
        // (what a frame's cost should be in proportion to, so portraits compare in pixels per
        // second), and its PSNR against the exact renderer and against another build's dump.
        let sampled = (0..frames).step_by(SAMPLE_EVERY);
        let (mut changed, mut vs_exact, mut vs_dump, mut step) =
            (0usize, f64::INFINITY, f64::INFINITY, 0u8);
        let mut exact = buf.clone();
        for i in sampled.clone() {
            rig.render(&pose(i), &mut buf);
            changed += buf
                .chunks_exact(3)
                .zip(rig.base_frame().chunks_exact(3))
                .filter(|(a, b)| a != b)
                .count();
            if !render_only {
                rig.render_exact(&pose(i), &mut exact);
                vs_exact = vs_exact.min(psnr(&buf, &exact));
            }
            let file = format!("{name}-{i}.rgb");
            if let Some(dir) = &dump {
                std::fs::write(dir.join(&file), &buf)?;
            }
            if let Some(dir) = &compare {
                let theirs = std::fs::read(dir.join(&file))?;
                vs_dump = vs_dump.min(psnr(&buf, &theirs));
                step = buf
                    .iter()
                    .zip(&theirs)
                    .map(|(a, b)| a.abs_diff(*b))
                    .fold(step, u8::max);
            }
        }
        let changed = changed as f64 / sampled.len().max(1) as f64;
        let mut line = format!(
            "{{\"case\":\"{name}\",\"size\":{},\"face_width_share\":{face_share:.2},\"frames\":{frames},\"fps_one_core\":{fps:.1},\"ratio_to_example\":{:.3},\"changed_pixels_per_frame\":{changed:.0},\"changed_megapixels_per_s\":{:.1}",
            img.width(),
            fps / base,
            changed * fps / 1e6,
        );
        if let Some(exact_fps) = exact_fps {
            line += &format!(
                ",\"exact_fps_one_core\":{exact_fps:.1},\"min_psnr_vs_exact_db\":{vs_exact:.2},\"speedup_over_exact\":{:.2}",
                fps / exact_fps
            );
        }
        if compare.is_some() {
            line +=
                &format!(",\"min_psnr_vs_dump_db\":{vs_dump:.2},\"max_byte_diff_vs_dump\":{step}");
        }
        println!("{line}}}");
    }
    Ok(())
}
