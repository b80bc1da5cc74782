//! A chunk written one changed region at a time against the same frames written whole.

use super::{frame_md5s, gradient, small, temp};
use crate::media::{ChunkWriter, MediaError, Rect};

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
