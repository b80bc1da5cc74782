//! Portraits of every kind a user brings: JPEG, grayscale, RGBA, small, large, tilted, two faces.

use std::path::Path;

use image::{DynamicImage, RgbImage, imageops};

use crate::util::*;

const LINE: &str = r#"{"segments": [{"text": "Mama made a pot of soup.", "pause_ms": 100}]}"#;

fn portrait() -> RgbImage {
    image::open(repo("examples/portrait.png"))
        .unwrap()
        .to_rgb8()
}

/// Rotates about the centre by `deg`, filling with edge-ish grey.
fn rotate(img: &RgbImage, deg: f32) -> RgbImage {
    let (w, h) = img.dimensions();
    let (c, s) = (deg.to_radians().cos(), deg.to_radians().sin());
    let (cx, cy) = (w as f32 / 2.0, h as f32 / 2.0);
    RgbImage::from_fn(w, h, |x, y| {
        let (dx, dy) = (x as f32 - cx, y as f32 - cy);
        let (sx, sy) = (c * dx + s * dy + cx, -s * dx + c * dy + cy);
        if sx >= 0.0 && sy >= 0.0 && (sx as u32) < w && (sy as u32) < h {
            *img.get_pixel(sx as u32, sy as u32)
        } else {
            image::Rgb([128, 128, 128])
        }
    })
}

fn renders(dir: &Path, portrait: &Path, extra: &[&str]) -> std::process::Output {
    let script = write_script(dir, "line.json", LINE);
    let out = dir.join("out.mp4");
    let _ = std::fs::remove_file(&out);
    let o = talker(dir)
        .args(["render", "-o"])
        .arg(&out)
        .arg(&script)
        .arg(portrait)
        .args(["--size", "192x192", "--framing", "head", "--deterministic"])
        .args(extra)
        .output()
        .unwrap();
    assert_success(&o);
    let p = probe(&out);
    assert_eq!(p["streams"][0]["width"], 192, "{}", portrait.display());
    o
}

#[test]
fn jpeg_grayscale_rgba_small_large_and_tilted_portraits_render() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let img = portrait();

    let jpeg = d.join("gray.jpg");
    DynamicImage::ImageLuma8(DynamicImage::ImageRgb8(img.clone()).to_luma8())
        .save(&jpeg)
        .unwrap();
    let rgba = d.join("rgba.png");
    DynamicImage::ImageRgb8(img.clone())
        .to_rgba8()
        .save(&rgba)
        .unwrap();
    // 256 px, the face filling most of it.
    let small = d.join("small.png");
    imageops::resize(
        &imageops::crop_imm(&img, 120, 20, 220, 220).to_image(),
        256,
        256,
        imageops::FilterType::Lanczos3,
    )
    .save(&small)
    .unwrap();
    let large = d.join("large.png");
    imageops::resize(&img, 2000, 2000, imageops::FilterType::CatmullRom)
        .save(&large)
        .unwrap();
    let tilted = d.join("tilted.png");
    rotate(&img, 12.0).save(&tilted).unwrap();
    for p in [&jpeg, &rgba, &small, &large, &tilted] {
        renders(d, p, &[]);
    }
}

#[test]
fn two_faces_animate_the_largest_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let img = portrait();
    let mut pair = RgbImage::new(1024, 512);
    imageops::replace(&mut pair, &img, 0, 0);
    imageops::replace(&mut pair, &imageops::flip_horizontal(&img), 512, 0);
    let path = dir.path().join("pair.png");
    pair.save(&path).unwrap();
    let o = renders(dir.path(), &path, &[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("2 faces found"), "{stderr}");
}

#[test]
fn preview_draws_a_labelled_sheet() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "line.json", LINE);
    let sheet = dir.path().join("sheet.png");
    let o = talker(dir.path())
        .args(["preview", "-o"])
        .arg(&sheet)
        .arg(&script)
        .arg(repo("examples/portrait.png"))
        .arg("--json")
        .output()
        .unwrap();
    assert_success(&o);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["cells"], 17);
    assert!(report["found_in_script"].as_u64().unwrap() >= 4, "{report}");
    let cell = report["cell_px"].as_u64().unwrap() as u32;
    // Twice the face crop (about 1.3 × the landmarks' extent, ≈ 140 px on the example).
    assert!((224..=330).contains(&cell), "{report}");
    let img = image::open(&sheet).unwrap();
    assert_eq!(img.width(), 4 * cell);
    assert!(!dir.path().join("sheet.png.partial").exists());
}
