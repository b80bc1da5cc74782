//! Draws the two slides of `examples/lecture/` (the Moon's phases), flat colours only so the
//! PNGs stay a few KB: `cargo run --example lecture_slides`.

use image::{Rgb, RgbImage};

const SKY: Rgb<u8> = Rgb([16, 24, 48]);
const LIT: Rgb<u8> = Rgb([240, 236, 210]);
const DARK: Rgb<u8> = Rgb([52, 58, 76]);
const BAR: Rgb<u8> = Rgb([232, 168, 56]);

/// A moon at (cx, cy) of radius r, lit from the right over `lit` of its width (0 new, 1 full).
fn moon(img: &mut RgbImage, (cx, cy, r): (f32, f32, f32), lit: f32) {
    let terminator = r - 2.0 * r * lit;
    for y in 0..img.height() {
        for x in 0..img.width() {
            let (dx, dy) = (x as f32 + 0.5 - cx, y as f32 + 0.5 - cy);
            if dx * dx + dy * dy > r * r {
                continue;
            }
            let half = (r * r - dy * dy).sqrt();
            let colour = if dx > terminator * half / r {
                LIT
            } else {
                DARK
            };
            img.put_pixel(x, y, colour);
        }
    }
}

fn bar(img: &mut RgbImage, x0: u32, y0: u32, w: u32, h: u32) {
    for y in y0..y0 + h {
        for x in x0..x0 + w {
            img.put_pixel(x, y, BAR);
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/lecture/slides");
    std::fs::create_dir_all(&dir)?;
    // 1: the question, one full moon under a title bar.
    let mut one = RgbImage::from_pixel(640, 480, SKY);
    bar(&mut one, 40, 40, 360, 28);
    moon(&mut one, (320.0, 280.0, 130.0), 1.0);
    one.save(dir.join("01.png"))?;
    // 2: the phases in a row, new to full.
    let mut two = RgbImage::from_pixel(640, 480, SKY);
    bar(&mut two, 40, 40, 260, 28);
    for (i, lit) in [0.0, 0.25, 0.5, 0.75, 1.0].into_iter().enumerate() {
        moon(&mut two, (80.0 + 120.0 * i as f32, 260.0, 48.0), lit);
    }
    bar(&mut two, 40, 380, 560, 12);
    two.save(dir.join("02.png"))?;
    Ok(())
}
