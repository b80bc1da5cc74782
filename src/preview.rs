//! `talker preview`: a contact sheet with one labelled frame per viseme, to judge the mouth at a glance.
//!
//! Input: the same options as a render. Output: a PNG grid. Each cell is the face at the middle of
//! the first held key of that viseme in the script's own speech (so timing and coarticulation are
//! real), labelled with the viseme, its Rhubarb letter and the time in the video; visemes the
//! script never uses are drawn from their target pose and labelled "unused". The last cells show
//! a half-closed and a closed blink. Faces are drawn at twice their rendered size.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use font8x8::UnicodeFonts;
use image::imageops::{FilterType, crop_imm, resize};
use image::{Rgb, RgbImage};

use crate::animate::{chunk_audio, frame_quantum};
use crate::cache::open_cache;
use crate::error::{Error, Result};
use crate::lipsync::{self, KeyKind, MouthPose, Viseme};
use crate::prepare::{Prepared, prepare};
use crate::progress::{Clock, Progress};
use crate::render::{FramePose, HeadPose};
use crate::settings::RenderOptions;
use crate::speech::speak;

/// Each cell shows the face at twice its rendered size (so lids and lips can be judged pixel
/// by pixel), within these bounds.
const ZOOM: u32 = 2;
const MIN_CELL: u32 = 224;
const MAX_CELL: u32 = 640;
const LABEL: u32 = 22;
const COLUMNS: u32 = 4;
/// Speech searched for visemes before the rest are drawn from their target poses.
const MAX_SEARCH_S: f64 = 120.0;

#[derive(Debug, Clone, serde::Serialize)]
pub struct PreviewReport {
    pub cells: usize,
    /// Side of one cell in pixels (twice the face crop, within 224..=640).
    pub cell_px: u32,
    /// Visemes found in the script's speech (the rest come from target poses).
    pub found_in_script: usize,
}

/// Where and how a viseme first appears.
struct Sample {
    pose: MouthPose,
    at_s: Option<f64>,
}

pub fn preview(
    opts: &RenderOptions,
    out: &Path,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Result<PreviewReport> {
    let clock = Clock::default();
    let service = crate::speech::SpeechService::start(&opts.speech)?;
    let Prepared {
        mut engine,
        look,
        plan,
        ..
    } = prepare(opts, &service, progress, &clock, cancel)?;
    let (cache, _temp) = open_cache(&opts.cache, out, progress)?;
    let sr = plan.sample_rate;
    let quantum = frame_quantum(sr, look.video.fps);

    let mut found: HashMap<Viseme, Sample> = HashMap::new();
    let mut offset = 0u64;
    for c in 0..plan.chunks.len() {
        if cancel.load(Ordering::Relaxed) {
            return Err(Error::Cancelled);
        }
        if found.len() == Viseme::ALL.len() || offset as f64 / f64::from(sr) > MAX_SEARCH_S {
            break;
        }
        let speeches = speak(&plan, &[c], &mut engine, &cache, progress, &clock, cancel)?;
        let audio = chunk_audio(&plan, c, &speeches, quantum);
        let track = lipsync::plan(&audio.phones, sr);
        for key in track.keys().iter().filter(|k| k.kind == KeyKind::Shape) {
            let mid = 0.5 * (key.start + key.end);
            found.entry(key.viseme).or_insert(Sample {
                pose: track.pose_at(mid),
                at_s: Some(offset as f64 / f64::from(sr) + mid),
            });
        }
        offset += audio.pcm.len() as u64;
    }
    let found_in_script = found.len();

    let (w, h) = (look.rig.width(), look.rig.height());
    let crop = face_crop(&look.landmarks, w, h);
    let cell = (ZOOM * crop[2]).clamp(MIN_CELL, MAX_CELL);
    let mut cells: Vec<(RgbImage, String)> = Vec::new();
    let mut frame = vec![0u8; (w * h * 3) as usize];
    let mut draw = |pose: FramePose| -> Result<RgbImage> {
        look.rig.render(&pose, &mut frame);
        let img = RgbImage::from_raw(w, h, frame.clone())
            .ok_or_else(|| Error::Usage("frame buffer size".into()))?;
        let face = crop_imm(&img, crop[0], crop[1], crop[2], crop[3]).to_image();
        Ok(resize(&face, cell, cell, FilterType::Lanczos3))
    };
    for v in Viseme::ALL {
        let sample = found.remove(&v).unwrap_or(Sample {
            pose: v.pose(),
            at_s: None,
        });
        let when = sample.at_s.map_or("unused".to_owned(), |t| {
            format!("{}:{:05.2}", (t / 60.0) as u32, t % 60.0)
        });
        let label = format!("{v:?} {} {when}", v.rhubarb());
        let pose = FramePose {
            mouth: sample.pose,
            blink: 0.0,
            head: HeadPose::default(),
        };
        cells.push((draw(pose)?, label));
    }
    for (blink, label) in [(0.5, "half blink"), (1.0, "blink")] {
        let pose = FramePose {
            mouth: MouthPose::REST,
            blink,
            head: HeadPose::default(),
        };
        cells.push((draw(pose)?, label.to_owned()));
    }

    let rows = (cells.len() as u32).div_ceil(COLUMNS);
    let mut sheet = RgbImage::from_pixel(COLUMNS * cell, rows * (cell + LABEL), Rgb([24, 24, 28]));
    for (i, (img, label)) in cells.iter().enumerate() {
        let (x, y) = (
            (i as u32 % COLUMNS) * cell,
            (i as u32 / COLUMNS) * (cell + LABEL),
        );
        image::imageops::replace(&mut sheet, img, i64::from(x), i64::from(y));
        text(&mut sheet, x + 4, y + cell + 3, label);
    }
    let tmp = out.with_extension("png.partial");
    sheet
        .save_with_format(&tmp, image::ImageFormat::Png)
        .map_err(|e| Error::Usage(format!("cannot write {}: {e}", out.display())))?;
    std::fs::rename(&tmp, out).map_err(Error::io(out))?;
    Ok(PreviewReport {
        cells: cells.len(),
        cell_px: cell,
        found_in_script,
    })
}

/// `[x, y, w, h]`: a square around the landmarks with a margin, inside the frame.
fn face_crop(lm: &[[f32; 2]; 68], w: u32, h: u32) -> [u32; 4] {
    let (mut x0, mut y0, mut x1, mut y1) = (f32::MAX, f32::MAX, f32::MIN, f32::MIN);
    for p in lm {
        (x0, y0, x1, y1) = (x0.min(p[0]), y0.min(p[1]), x1.max(p[0]), y1.max(p[1]));
    }
    let side = ((x1 - x0).max(y1 - y0) * 1.3).clamp(8.0, w.min(h) as f32);
    let (cx, cy) = (0.5 * (x0 + x1), 0.5 * (y0 + y1));
    let left = (cx - side / 2.0).clamp(0.0, w as f32 - side) as u32;
    let top = (cy - side / 2.0).clamp(0.0, h as f32 - side) as u32;
    [left, top, side as u32, side as u32]
}

/// Draws `s` with the 8×8 bitmap font at double size.
fn text(img: &mut RgbImage, x: u32, y: u32, s: &str) {
    let fonts = font8x8::BASIC_FONTS;
    for (i, c) in s.chars().enumerate() {
        let Some(glyph) = fonts.get(c) else { continue };
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..8u32 {
                if bits & (1 << col) == 0 {
                    continue;
                }
                for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                    let (px, py) = (x + i as u32 * 16 + col * 2 + dx, y + row as u32 * 2 + dy);
                    if px < img.width() && py < img.height() {
                        img.put_pixel(px, py, Rgb([235, 235, 235]));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crop_is_inside_the_frame() {
        let lm = [[500.0f32, 500.0]; 68];
        let c = face_crop(&lm, 512, 512);
        assert!(c[0] + c[2] <= 512 && c[1] + c[3] <= 512);
    }

    #[test]
    fn text_draws_pixels() {
        let mut img = RgbImage::new(100, 20);
        text(&mut img, 2, 2, "Aa");
        assert!(img.pixels().any(|p| p.0[0] > 200));
    }
}
