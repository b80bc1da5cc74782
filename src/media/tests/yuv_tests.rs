//! The writer's RGB→YUV conversion against swscale's (what chunks used before), and a chunk
//! written one changed region at a time against the same frames written whole.

use ffmpeg_next::{format, frame, software::scaling};

use super::super::init;
use super::super::yuv::{Rect, Yuv420};
use super::{frame_md5s, gradient, small, temp};
use crate::media::{ChunkWriter, MediaError};

/// swscale's conversion of `rgb` as the chunk writer did it before (bilinear, default matrix).
fn swscale(rgb: &[u8], w: u32, h: u32) -> Yuv420 {
    init().expect("ffmpeg");
    let mut ctx = scaling::Context::get(
        format::Pixel::RGB24,
        w,
        h,
        format::Pixel::YUV420P,
        w,
        h,
        scaling::Flags::BILINEAR,
    )
    .expect("scaler");
    let mut src = frame::Video::new(format::Pixel::RGB24, w, h);
    let (row, stride) = (w as usize * 3, src.stride(0));
    for (y, line) in rgb.chunks_exact(row).enumerate() {
        src.data_mut(0)[y * stride..y * stride + row].copy_from_slice(line);
    }
    let mut dst = frame::Video::new(format::Pixel::YUV420P, w, h);
    ctx.run(&src, &mut dst).expect("convert");
    let mut out = Yuv420::new(w as usize, h as usize);
    let cw = (w as usize).div_ceil(2);
    for (i, (plane, pw)) in [(&mut out.y, w as usize), (&mut out.u, cw), (&mut out.v, cw)]
        .into_iter()
        .enumerate()
    {
        let stride = dst.stride(i);
        for (y, line) in plane.chunks_exact_mut(pw).enumerate() {
            line.copy_from_slice(&dst.data(i)[y * stride..y * stride + pw]);
        }
    }
    out
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let mse = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum::<f64>()
        / a.len() as f64;
    10.0 * (255.0f64 * 255.0 / mse.max(1e-12)).log10()
}

fn max_diff(a: &[u8], b: &[u8]) -> u8 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| x.abs_diff(y))
        .max()
        .unwrap_or(0)
}

/// The example portrait, and a close-up of its middle scaled to 1280x720 (a face filling an HD
/// frame, the sharpest edges chroma subsampling sees).
fn pictures() -> Vec<image::RgbImage> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/portrait.png");
    let portrait = image::open(path).expect("example portrait").to_rgb8();
    let (w, h) = portrait.dimensions();
    let middle = image::imageops::crop_imm(&portrait, w / 4, h / 5, w / 2, h * 9 / 32).to_image();
    let close =
        image::imageops::resize(&middle, 1280, 720, image::imageops::FilterType::CatmullRom);
    vec![portrait, close]
}

#[test]
fn conversion_stays_within_a_level_of_swscale() {
    for img in pictures() {
        let (w, h) = img.dimensions();
        let theirs = swscale(img.as_raw(), w, h);
        let mut ours = Yuv420::new(w as usize, h as usize);
        ours.convert(img.as_raw(), Rect::full(w as usize, h as usize));
        for (name, a, b) in [
            ("Y", &ours.y, &theirs.y),
            ("U", &ours.u, &theirs.u),
            ("V", &ours.v, &theirs.v),
        ] {
            let (d, p) = (max_diff(a, b), psnr(a, b));
            assert!(d <= 1, "{w}x{h} {name}: max difference {d} levels");
            assert!(p >= 55.0, "{w}x{h} {name}: PSNR {p:.1} dB");
        }
    }
}

/// A chunk written with a base and changed regions decodes to the same frames as one written
/// from whole frames: the region conversion is the whole one.
#[test]
fn changed_regions_encode_the_same_frames_as_whole_ones() {
    let video = small(25);
    let (w, h) = (video.width as usize, video.height as usize);
    let base = gradient(video.width, video.height, 0);
    // A patch that moves and changes, at odd coordinates, touching the frame's edges at the end.
    let frames: Vec<(Vec<u8>, Rect)> = (0..12u64)
        .map(|i| {
            let i = i as usize;
            let rect = Rect {
                x0: (13 + 11 * i).min(w - 9),
                y0: (7 + 9 * i).min(h - 5),
                x1: (41 + 11 * i).min(w),
                y1: (30 + 9 * i).min(h),
            };
            let mut rgb = base.clone();
            for y in rect.y0..rect.y1 {
                for x in rect.x0..rect.x1 {
                    let p = (y * w + x) * 3;
                    rgb[p..p + 3].copy_from_slice(&[(x * 7 + i) as u8, (y * 5) as u8, 200]);
                }
            }
            (rgb, rect)
        })
        .collect();
    let (_dir, path) = temp("whole.mkv");
    let changed = path.with_file_name("changed.mkv");
    let mut whole = ChunkWriter::create(&path, &video, 22050).expect("create");
    let mut parts = ChunkWriter::create(&changed, &video, 22050).expect("create");
    parts.set_base(&base).expect("base");
    for (rgb, rect) in &frames {
        whole.write_frame(rgb).expect("frame");
        parts.write_changed(rgb, *rect).expect("frame");
    }
    whole.finish().expect("finish");
    parts.finish().expect("finish");
    let (a, b) = (frame_md5s(&path), frame_md5s(&changed));
    assert_eq!(a.len(), frames.len());
    assert_eq!(a, b);
}

#[test]
fn a_base_or_changed_frame_of_the_wrong_size_is_refused_and_the_writer_stays_usable() {
    let (_dir, path) = temp("c.mkv");
    let mut w = ChunkWriter::create(&path, &small(25), 22050).expect("create");
    let short = |e: MediaError| {
        matches!(
            e,
            MediaError::FrameSize {
                got: 100,
                expected: 57600,
                ..
            }
        )
    };
    assert!(short(w.set_base(&[0u8; 100]).expect_err("short base")));
    let full = Rect::full(160, 120);
    assert!(short(
        w.write_changed(&[0u8; 100], full).expect_err("short frame")
    ));
    w.write_changed(&gradient(160, 120, 0), full)
        .expect("frame");
    assert_eq!(w.finish().expect("finish").frames, 1);
}
