//! Renderer tests on the bundled portrait with hand-placed landmarks, and on tilted/resized
//! copies of it.

use super::geometry::{P, mean};
use super::sample::{Rgb, luma};
use super::*;
use crate::lipsync::{MouthPose, Viseme};

fn portrait() -> image::RgbImage {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/portrait.png");
    image::open(path).expect("examples/portrait.png").to_rgb8()
}

fn landmarks() -> [P; 68] {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/lipsync/astronaut-68-estimated.json"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("landmarks file"))
            .expect("landmarks json");
    let pts: Vec<P> = serde_json::from_value(v["points"].clone()).expect("points");
    pts.try_into().expect("68 points")
}

fn render(rig: &FaceRig, pose: &FramePose) -> Vec<u8> {
    let mut out = vec![0u8; (rig.width() * rig.height() * 3) as usize];
    rig.render(pose, &mut out);
    out
}

fn mouth(m: MouthPose) -> FramePose {
    FramePose {
        mouth: m,
        ..FramePose::default()
    }
}

/// Extreme and typical poses: every viseme, the corners of the pose space, blinks, head motion.
fn poses() -> Vec<FramePose> {
    let mut out: Vec<FramePose> = Viseme::ALL.iter().map(|v| mouth(v.pose())).collect();
    for (open, width, round) in [(1.0, 1.0, 0.0), (1.0, -1.0, 1.0), (0.0, 1.0, 0.0)] {
        out.push(mouth(MouthPose {
            open,
            width,
            round,
            upper_lip: 1.0,
            lower_lip_tuck: 1.0,
            teeth: 1.0,
            tongue: 1.0,
        }));
    }
    for (blink, dx, dy, roll) in [
        (1.0, 0.0, 0.0, 0.0),
        (0.5, 0.15, 0.15, 0.1),
        (1.0, -0.15, -0.15, -0.1),
        (0.0, 0.5, -0.5, 0.5), // clamped by the renderer
    ] {
        out.push(FramePose {
            mouth: Viseme::Aa.pose(),
            blink,
            head: HeadPose { dx, dy, roll },
        });
    }
    out
}

fn px(buf: &[u8], w: usize, x: usize, y: usize) -> [f32; 3] {
    let i = (y * w + x) * 3;
    [
        f32::from(buf[i]),
        f32::from(buf[i + 1]),
        f32::from(buf[i + 2]),
    ]
}

fn dist(a: [f32; 3], b: [f32; 3]) -> f32 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

/// Where the face and head motion may reach: the landmarks' box grown by 1.25 face sizes
/// (the head, hair and neck move with the face; everything beyond must stay still).
fn face_box(lm: &[P; 68]) -> [f32; 4] {
    let xs = lm.iter().map(|p| p[0]);
    let ys = lm.iter().map(|p| p[1]);
    let (x0, x1) = (
        xs.clone().fold(f32::MAX, f32::min),
        xs.fold(f32::MIN, f32::max),
    );
    let (y0, y1) = (
        ys.clone().fold(f32::MAX, f32::min),
        ys.fold(f32::MIN, f32::max),
    );
    let g = 1.25 * (x1 - x0).max(y1 - y0);
    [x0 - g, y0 - g, x1 + g, y1 + g]
}

/// Asserts the border and everything well outside the face is the portrait, bit for bit.
fn assert_far_pixels_untouched(img: &image::RgbImage, lm: &[P; 68], frame: &[u8], border: usize) {
    let (w, h) = (img.width() as usize, img.height() as usize);
    let face = face_box(lm);
    let raw = img.as_raw();
    for y in 0..h {
        for x in 0..w {
            let in_border = x < border || y < border || x >= w - border || y >= h - border;
            let (xf, yf) = (x as f32, y as f32);
            let far = xf < face[0] || xf > face[2] || yf < face[1] || yf > face[3];
            if in_border || far {
                let i = (y * w + x) * 3;
                assert_eq!(
                    &frame[i..i + 3],
                    &raw[i..i + 3],
                    "pixel ({x}, {y}) changed (border {border})"
                );
            }
        }
    }
}

#[test]
fn border_and_far_pixels_stay_bit_identical_for_every_pose() {
    let img = portrait();
    let lm = landmarks();
    let rig = FaceRig::new(&img, &lm).expect("rig");
    assert!(rig.border() >= 60);
    for pose in poses() {
        let f = render(&rig, &pose);
        assert_far_pixels_untouched(&img, &lm, &f, 60);
    }
}

#[test]
fn mouth_region_differs_between_open_vowel_and_rest() {
    let img = portrait();
    let lm = landmarks();
    let rig = FaceRig::new(&img, &lm).expect("rig");
    let open = render(&rig, &mouth(Viseme::Aa.pose()));
    let rest = render(&rig, &mouth(MouthPose::REST));
    let w = img.width() as usize;
    let (mut changed, mut total) = (0, 0.0f32);
    for y in 130..165 {
        for x in 200..248 {
            let d = dist(px(&open, w, x, y), px(&rest, w, x, y));
            total += d;
            changed += usize::from(d > 30.0);
        }
    }
    assert!(changed > 150, "only {changed} pixels differ strongly");
    assert!(total / (35.0 * 48.0) > 12.0);
    // The open mouth is dark inside (cavity below the teeth at the middle of the opening).
    let inner = (148..158)
        .map(|y| luma(px(&open, w, 223, y)))
        .fold(f32::MAX, f32::min);
    assert!(inner < 60.0, "no dark cavity: {inner}");
}

/// Median of the lips' own colour and the portrait's teeth colour.
fn lip_and_teeth(img: &image::RgbImage, lm: &[P; 68]) -> ([f32; 3], [f32; 3]) {
    let rgb = Rgb::from_image(img);
    let mut lips: Vec<[f32; 3]> = [(50, 61), (51, 62), (52, 63), (58, 67), (57, 66), (56, 65)]
        .iter()
        .map(|&(a, b)| {
            let p = mean(&[lm[a], lm[b]]);
            rgb.bilinear(p[0], p[1])
        })
        .collect();
    lips.sort_by(|a, b| luma(*a).total_cmp(&luma(*b)));
    let t = mean(&[lm[62], lm[66]]);
    (lips[lips.len() / 2], rgb.bilinear(t[0], t[1]))
}

/// Asserts the rendered gap between the inner lips (62↔66 and its neighbours) is lip-coloured.
fn assert_closed_gap_is_lip(img: &image::RgbImage, lm: &[P; 68], frame: &[u8]) {
    let (lip, teeth) = lip_and_teeth(img, lm);
    assert!(
        dist(lip, teeth) > 30.0,
        "portrait's teeth and lips look alike"
    );
    let out = Rgb {
        width: img.width() as usize,
        height: img.height() as usize,
        data: frame.to_vec(),
    };
    for (a, b) in [(62, 66), (61, 67), (63, 65)] {
        for i in 1..8 {
            let t = i as f32 / 8.0;
            let p = [
                lm[a][0] + (lm[b][0] - lm[a][0]) * t,
                lm[a][1] + (lm[b][1] - lm[a][1]) * t,
            ];
            let c = out.bilinear(p[0], p[1]);
            assert!(
                dist(c, lip) < dist(c, teeth),
                "{a}-{b} at {t}: {c:?} is closer to teeth {teeth:?} than lip {lip:?}"
            );
            assert!(
                luma(c) > 0.55 * luma(lip),
                "{a}-{b} at {t}: {c:?} is dark (lip {lip:?})"
            );
        }
    }
}

#[test]
fn closed_pose_fills_the_inner_lip_gap_with_lip_colour() {
    let img = portrait();
    let lm = landmarks();
    let rig = FaceRig::new(&img, &lm).expect("rig");
    for m in [Viseme::Pp.pose(), MouthPose::REST] {
        assert_closed_gap_is_lip(&img, &lm, &render(&rig, &mouth(m)));
    }
    // The portrait itself shows teeth there, so the test can tell.
    let (_, teeth) = lip_and_teeth(&img, &lm);
    assert!(luma(teeth) > 200.0);
}

/// Mean squared forward-difference gradient of `f` over `pts`.
fn grad_energy(f: &dyn Fn(usize, usize) -> [f32; 3], pts: &[(usize, usize)]) -> f32 {
    let mut e = 0.0;
    for &(x, y) in pts {
        let c = f(x, y);
        let (r, d) = (f(x + 1, y), f(x, y + 1));
        for k in 0..3 {
            e += (r[k] - c[k]).powi(2) + (d[k] - c[k]).powi(2);
        }
    }
    e / pts.len().max(1) as f32
}

#[test]
fn no_seam_along_the_boundary_of_the_changed_region() {
    let img = portrait();
    let lm = landmarks();
    let rig = FaceRig::new(&img, &lm).expect("rig");
    let (w, h) = (img.width() as usize, img.height() as usize);
    let raw = img.as_raw().clone();
    let base = |x: usize, y: usize| px(&raw, w, x, y);
    // An untouched patch of face: the cheek between the eye and the nose base.
    let patch: Vec<(usize, usize)> = (112..126)
        .flat_map(|y| (196..206).map(move |x| (x, y)))
        .collect();
    let texture = grad_energy(&base, &patch);
    for pose in poses() {
        let f = render(&rig, &pose);
        let changed = |x: usize, y: usize| f[(y * w + x) * 3..][..3] != raw[(y * w + x) * 3..][..3];
        // The warp region: the changed pixels grown by 3 px (closing the narrow unchanged
        // channel that runs along the lip line into the mouth corners), plus every hole; i.e.
        // all that is not reachable from the frame's edge through pixels ≥ 3 px from a change.
        let mut near_change = vec![false; w * h];
        for y in 0..h {
            for x in 0..w {
                if changed(x, y) {
                    for v in y.saturating_sub(3)..(y + 4).min(h) {
                        for u in x.saturating_sub(3)..(x + 4).min(w) {
                            near_change[v * w + u] = true;
                        }
                    }
                }
            }
        }
        let mut outside = vec![false; w * h];
        let mut stack: Vec<(usize, usize)> = (0..w)
            .flat_map(|x| [(x, 0), (x, h - 1)])
            .chain((0..h).flat_map(|y| [(0, y), (w - 1, y)]))
            .collect();
        while let Some((x, y)) = stack.pop() {
            if outside[y * w + x] || near_change[y * w + x] {
                continue;
            }
            outside[y * w + x] = true;
            if x > 0 {
                stack.push((x - 1, y));
            }
            if y > 0 {
                stack.push((x, y - 1));
            }
            if x + 1 < w {
                stack.push((x + 1, y));
            }
            if y + 1 < h {
                stack.push((x, y + 1));
            }
        }
        // Its rim: region pixels within 6 px of the outside (3 px of growth + 3 px of change).
        let mut rim = Vec::new();
        for y in 7..h - 7 {
            for x in 7..w - 7 {
                if !outside[y * w + x]
                    && (y - 6..=y + 6).any(|v| (x - 6..=x + 6).any(|u| outside[v * w + u]))
                {
                    rim.push((x, y));
                }
            }
        }
        assert!(!rim.is_empty());
        let frame = |x: usize, y: usize| px(&f, w, x, y);
        // A seam or box edge would add gradient energy along the rim; a smooth warp only
        // moves what is there. The rim crosses the chin's own strong edge, so the reference
        // is the same rim in the portrait (never less than an untouched patch of face).
        let (e_frame, e_base) = (grad_energy(&frame, &rim), grad_energy(&base, &rim));
        assert!(
            e_frame <= 1.1 * e_base.max(texture),
            "{pose:?}: rim {e_frame} vs portrait {e_base} (face texture {texture})"
        );
        // Locally: no rim pixel may carry an edge (a step > 10 levels) that the portrait has
        // nowhere within 2 px of it (the displacement near the rim is below that).
        let new_edges = rim
            .iter()
            .filter(|&&(x, y)| {
                let near = (y - 2..=y + 2)
                    .flat_map(|v| (x - 2..=x + 2).map(move |u| (u, v)))
                    .map(|p| grad_energy(&base, &[p]))
                    .fold(0.0, f32::max);
                grad_energy(&frame, &[(x, y)]) > near + 300.0
            })
            .count();
        assert!(
            new_edges * 100 <= rim.len(),
            "{pose:?}: {new_edges} of {} rim pixels gained an edge",
            rim.len()
        );
    }
}

/// Checks that the mouth's backward map keeps orientation (no fold) everywhere it applies.
fn assert_no_fold(rig: &FaceRig) {
    let b = rig.mouth.bounds();
    let step = 0.5;
    let hd = 0.05;
    for pose in poses() {
        let f = rig.mouth.frame(&pose.mouth);
        let (mut worst, mut at) = (f32::MAX, [0.0, 0.0]);
        let mut y = b[1];
        while y < b[3] {
            let mut x = b[0];
            while x < b[2] {
                let three = [[x, y], [x + hd, y], [x, y + hd]].map(|q| rig.mouth.locate(&f, q));
                if let [Some(a), Some(r), Some(d)] = three {
                    let jumps = [r.src, d.src]
                        .iter()
                        .any(|s| (s[0] - a.src[0]).abs() + (s[1] - a.src[1]).abs() > 10.0 * hd);
                    if a.cover == 0.0 && r.cover == 0.0 && d.cover == 0.0 && !jumps {
                        let (jxx, jyx) = ((r.src[0] - a.src[0]) / hd, (r.src[1] - a.src[1]) / hd);
                        let (jxy, jyy) = ((d.src[0] - a.src[0]) / hd, (d.src[1] - a.src[1]) / hd);
                        let det = jxx * jyy - jxy * jyx;
                        if det < worst {
                            (worst, at) = (det, [x, y]);
                        }
                    }
                }
                x += step;
            }
            y += step;
        }
        // Positive: no fold; above 0.1: nowhere squeezed more than tenfold.
        assert!(
            worst > 0.1,
            "{pose:?}: map determinant down to {worst} at {at:?} ({}x{})",
            rig.width(),
            rig.height()
        );
    }
}

#[test]
fn mouth_warp_never_folds() {
    let rig = FaceRig::new(&portrait(), &landmarks()).expect("rig");
    assert_no_fold(&rig);
}

#[test]
fn blink_covers_the_eyes_with_lid_skin() {
    let img = portrait();
    let lm = landmarks();
    let rig = FaceRig::new(&img, &lm).expect("rig");
    let w = img.width() as usize;
    let closed = render(
        &rig,
        &FramePose {
            blink: 1.0,
            ..FramePose::default()
        },
    );
    let open = render(&rig, &FramePose::default());
    for first in [36, 42] {
        let c = mean(&lm[first..first + 6]);
        // The iris at the eye's centre is dark in the portrait and skin-bright when closed.
        let (x, y) = (c[0].round() as usize, c[1].round() as usize);
        let before = luma(px(&open, w, x, y));
        let after = luma(px(&closed, w, x, y));
        assert!(
            before < 110.0,
            "eye centre not dark in the portrait: {before}"
        );
        assert!(
            after > 140.0 && after > 1.6 * before,
            "eye {first}: {before} → {after}"
        );
    }
    // Blink 0 leaves the eyes exactly as they are.
    let raw = img.as_raw();
    for first in [36, 42] {
        let c = mean(&lm[first..first + 6]);
        let i = (c[1].round() as usize * w + c[0].round() as usize) * 3;
        assert_eq!(&open[i..i + 3], &raw[i..i + 3]);
    }
}

#[test]
fn head_motion_shifts_the_face() {
    let img = portrait();
    let lm = landmarks();
    let rig = FaceRig::new(&img, &lm).expect("rig");
    let w = img.width() as usize;
    let iod = super::geometry::len(super::geometry::sub(mean(&lm[42..48]), mean(&lm[36..42])));
    let f = render(
        &rig,
        &FramePose {
            mouth: MouthPose::REST,
            blink: 0.0,
            head: HeadPose {
                dx: 0.1,
                dy: 0.0,
                roll: 0.0,
            },
        },
    );
    // Best horizontal shift of a patch around the nose (untouched by the mouth).
    let raw = img.as_raw();
    let err = |shift: i32| -> f32 {
        let mut e = 0.0;
        for y in 105..122 {
            for x in 205..240 {
                let xs = (x as i32 - shift) as usize;
                e += dist(px(&f, w, x, y), px(raw, w, xs, y));
            }
        }
        e
    };
    let best = (-3..=10)
        .min_by(|&a, &b| err(a).total_cmp(&err(b)))
        .unwrap();
    let expected = (0.1 * iod).round() as i32;
    assert!(
        (best - expected).abs() <= 1,
        "moved {best}, expected {expected}"
    );
}

#[test]
fn rendering_is_deterministic() {
    let rig = FaceRig::new(&portrait(), &landmarks()).expect("rig");
    for pose in poses() {
        assert_eq!(render(&rig, &pose), render(&rig, &pose));
    }
}

/// The portrait turned by `deg` about its centre and scaled to `size` px (bilinear), with
/// its landmarks moved alike.
fn transformed(deg: f32, size: u32) -> (image::RgbImage, [P; 68]) {
    let img = portrait();
    let src = Rgb::from_image(&img);
    let k = size as f32 / img.width() as f32;
    let (c, s) = (deg.to_radians().cos(), deg.to_radians().sin());
    let (sc, dc) = (255.5f32, (size as f32 - 1.0) / 2.0);
    let out = image::RgbImage::from_fn(size, size, |x, y| {
        let (dx, dy) = ((x as f32 - dc) / k, (y as f32 - dc) / k);
        let (sx, sy) = (c * dx + s * dy + sc, -s * dx + c * dy + sc);
        let v = src.bilinear(sx, sy);
        image::Rgb(v.map(|v| (v + 0.5) as u8))
    });
    let lm = landmarks().map(|p| {
        let (dx, dy) = (p[0] - sc, p[1] - sc);
        [(c * dx - s * dy) * k + dc, (s * dx + c * dy) * k + dc]
    });
    (out, lm)
}

#[test]
fn tilted_small_and_large_portraits_render_cleanly() {
    for (deg, size) in [(15.0, 512), (-15.0, 256), (8.0, 2000)] {
        let (img, lm) = transformed(deg, size);
        let rig = FaceRig::new(&img, &lm).expect("rig");
        assert_no_fold(&rig);
        let border = rig.border() as usize;
        for pose in [
            mouth(Viseme::Aa.pose()),
            mouth(Viseme::Ou.pose()),
            FramePose {
                mouth: Viseme::Ff.pose(),
                blink: 1.0,
                head: HeadPose {
                    dx: 0.1,
                    dy: -0.1,
                    roll: 0.05,
                },
            },
        ] {
            assert_far_pixels_untouched(&img, &lm, &render(&rig, &pose), border);
        }
        assert_closed_gap_is_lip(&img, &lm, &render(&rig, &mouth(Viseme::Pp.pose())));
    }
}

#[test]
fn bad_portraits_and_landmarks_are_rejected() {
    let img = portrait();
    let lm = landmarks();
    let small = image::RgbImage::new(20, 40);
    assert!(matches!(
        FaceRig::new(&small, &lm),
        Err(RenderError::ImageTooSmall {
            width: 20,
            height: 40
        })
    ));
    let mut nan = lm;
    nan[50][1] = f32::NAN;
    assert!(matches!(
        FaceRig::new(&img, &nan),
        Err(RenderError::BadLandmark { index: 50, .. })
    ));
    let mut outside = lm;
    outside[40] = [600.0, 100.0];
    assert!(matches!(
        FaceRig::new(&img, &outside),
        Err(RenderError::BadLandmark { index: 40, .. })
    ));
    // The jaw may leave the frame (tight crops) but not by more than the image size.
    let mut jaw = lm;
    jaw[0] = [-30.0, 100.0];
    assert!(FaceRig::new(&img, &jaw).is_ok());
    jaw[0] = [-3000.0, 100.0];
    assert!(matches!(
        FaceRig::new(&img, &jaw),
        Err(RenderError::BadLandmark { index: 0, .. })
    ));
    let c = mean(&lm[..]);
    let tiny = lm.map(|p| [c[0] + 0.05 * (p[0] - c[0]), c[1] + 0.05 * (p[1] - c[1])]);
    assert!(matches!(
        FaceRig::new(&img, &tiny),
        Err(RenderError::FaceTooSmall { .. })
    ));
    let upside_down = lm.map(|p| [2.0 * c[0] - p[0], 2.0 * c[1] - p[1]]);
    assert!(matches!(
        FaceRig::new(&img, &upside_down),
        Err(RenderError::NotAFace(_))
    ));
    let mut crossed = lm;
    crossed.swap(48, 54);
    assert!(matches!(
        FaceRig::new(&img, &crossed),
        Err(RenderError::NotAFace(_))
    ));
    let mut mouth_up = lm;
    for p in &mut mouth_up[48..68] {
        p[1] -= 70.0;
    }
    assert!(matches!(
        FaceRig::new(&img, &mouth_up),
        Err(RenderError::NotAFace(_))
    ));
    let mut closed_eye = lm;
    closed_eye[39] = closed_eye[36];
    assert!(matches!(
        FaceRig::new(&img, &closed_eye),
        Err(RenderError::EyeTooSmall { .. })
    ));
}

#[test]
#[should_panic(expected = "frame buffer must be width × height × 3 bytes")]
fn wrong_buffer_size_panics() {
    let rig = FaceRig::new(&portrait(), &landmarks()).expect("rig");
    let mut out = vec![0u8; 10];
    rig.render(&FramePose::default(), &mut out);
}

#[test]
fn odd_pose_values_are_clamped_not_propagated() {
    let img = portrait();
    let lm = landmarks();
    let rig = FaceRig::new(&img, &lm).expect("rig");
    let wild = FramePose {
        mouth: MouthPose {
            open: f32::NAN,
            width: 7.0,
            round: -3.0,
            upper_lip: f32::INFINITY,
            lower_lip_tuck: 2.0,
            teeth: f32::NAN,
            tongue: 9.0,
        },
        blink: f32::NAN,
        head: HeadPose {
            dx: f32::INFINITY,
            dy: f32::NAN,
            roll: 3.0,
        },
    };
    let f = render(&rig, &wild);
    assert_far_pixels_untouched(&img, &lm, &f, 60);
}

#[test]
fn framing_crops_head_and_shoulders_and_moves_landmarks() {
    let img = portrait();
    let lm = landmarks();
    let src = Rgb::from_image(&img);
    for (w, h) in [(384, 512), (720, 720), (1280, 720), (256, 256)] {
        let (out, moved) = framing::head_and_shoulders(&img, &lm, w, h).expect("framing");
        assert_eq!((out.width(), out.height()), (w, h));
        let dst = Rgb::from_image(&out);
        for i in [8, 30, 36, 45, 48, 51, 54, 57] {
            let (a, b) = (lm[i], moved[i]);
            assert!(b[0] >= 0.0 && b[1] >= 0.0 && b[0] < w as f32 && b[1] < h as f32);
            let d = dist(src.bilinear(a[0], a[1]), dst.bilinear(b[0], b[1]));
            assert!(
                d < 40.0,
                "{w}x{h}: landmark {i} lands on a different colour ({d})"
            );
        }
        // The face is the subject: wider than a fifth of the output for tall frames.
        let face_w = moved[16][0] - moved[0][0];
        if h >= w {
            assert!(face_w > 0.2 * w as f32, "{w}x{h}: face {face_w} px wide");
        }
        // Eyes in the upper half.
        assert!(mean(&moved[36..48])[1] < 0.5 * h as f32);
        // The framed portrait is a valid rig input.
        assert!(FaceRig::new(&out, &moved).is_ok());
    }
    for (w, h) in [(0, 10), (10, 0), (20000, 10)] {
        assert_eq!(
            framing::head_and_shoulders(&img, &lm, w, h).err(),
            Some(RenderError::BadOutputSize {
                width: w,
                height: h
            })
        );
    }
    let mut nan = lm;
    nan[30] = [f32::NAN, 0.0];
    assert!(matches!(
        framing::head_and_shoulders(&img, &nan, 100, 100),
        Err(RenderError::BadLandmark { index: 30, .. })
    ));
}

#[test]
fn a_closed_mouth_portrait_opens_with_synthetic_teeth_and_cavity() {
    // Make a closed-mouth portrait: our rest frame, with the inner lip landmarks on its seam.
    let img = portrait();
    let lm = landmarks();
    let rig = FaceRig::new(&img, &lm).expect("rig");
    let w = img.width();
    let closed = image::RgbImage::from_raw(w, img.height(), render(&rig, &mouth(MouthPose::REST)))
        .expect("frame");
    let mut closed_lm = lm;
    for (a, b) in [(61, 67), (62, 66), (63, 65)] {
        let seam = lm[a][1] + 0.35 * (lm[b][1] - lm[a][1]);
        closed_lm[a][1] = seam;
        closed_lm[b][1] = seam;
    }
    let rig = FaceRig::new(&closed, &closed_lm).expect("rig");
    let open = render(&rig, &mouth(Viseme::Aa.pose()));
    let column: Vec<[f32; 3]> = (138..162).map(|y| px(&open, w as usize, 223, y)).collect();
    let before: Vec<f32> = (138..162)
        .map(|y| luma(px(closed.as_raw(), w as usize, 223, y)))
        .collect();
    let dark_y = column
        .iter()
        .position(|&c| luma(c) < 60.0)
        .expect("no dark cavity");
    // New bright pixels (teeth, not the lips' own highlights) right above the cavity.
    let new_teeth = (0..dark_y)
        .filter(|&i| luma(column[i]) > 215.0 && before[i] <= 215.0)
        .count();
    assert!(new_teeth >= 2, "no synthetic teeth above the cavity");
}

/// A square crop of 1.5 face widths about the face, scaled to `side` px (bilinear), with its
/// landmarks moved alike: the face fills the frame, as in a close-up.
fn close_up(side: u32) -> (image::RgbImage, [P; 68]) {
    let img = portrait();
    let lm = landmarks();
    let (xs, ys) = (lm.map(|p| p[0]), lm.map(|p| p[1]));
    let lo = |v: [f32; 68]| v.iter().copied().fold(f32::MAX, f32::min);
    let hi = |v: [f32; 68]| v.iter().copied().fold(f32::MIN, f32::max);
    let (x0, y0, x1, y1) = (lo(xs), lo(ys), hi(xs), hi(ys));
    let crop = 1.5 * (x1 - x0).max(y1 - y0);
    let (cx, cy) = (0.5 * (x0 + x1) - 0.5 * crop, 0.5 * (y0 + y1) - 0.5 * crop);
    let k = side as f32 / crop;
    let src = Rgb::from_image(&img);
    let out = image::RgbImage::from_fn(side, side, |x, y| {
        let v = src.bilinear(cx + x as f32 / k, cy + y as f32 / k);
        image::Rgb(v.map(|v| (v + 0.5) as u8))
    });
    (out, lm.map(|p| [(p[0] - cx) * k, (p[1] - cy) * k]))
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let se: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    10.0 * (255.0f64 * 255.0 * a.len() as f64 / se.max(1e-9)).log10()
}

/// The portraits the fast renderer is checked on: the example, a close-up, a tilted upscale.
fn fast_cases() -> Vec<(image::RgbImage, [P; 68])> {
    vec![
        (portrait(), landmarks()),
        close_up(600),
        transformed(12.0, 700),
    ]
}

/// Every viseme with the head still and moved, blinking or not, plus the extreme poses.
fn fast_poses() -> Vec<FramePose> {
    let mut out = poses();
    for (i, v) in Viseme::ALL.iter().enumerate() {
        let t = i as f32;
        out.push(FramePose {
            mouth: v.pose(),
            blink: if i % 3 == 0 {
                1.0
            } else {
                0.3 * (i % 2) as f32
            },
            head: HeadPose {
                dx: 0.05 * (0.9 * t).sin(),
                dy: 0.04 * (0.7 * t).cos(),
                roll: 0.03 * (0.5 * t).sin(),
            },
        });
    }
    out
}

#[test]
fn fast_frames_match_the_exact_renderer_on_small_faces_and_close_ups() {
    for (n, (img, lm)) in fast_cases().iter().enumerate() {
        let rig = FaceRig::new(img, lm).expect("rig");
        let mut exact = vec![0u8; img.as_raw().len()];
        for pose in fast_poses() {
            rig.render_exact(&pose, &mut exact);
            let fast = render(&rig, &pose);
            let db = psnr(&fast, &exact);
            assert!(db >= 45.0, "case {n} pose {pose:?}: {db:.1} dB");
        }
    }
}

/// Outside the mouth's and a blinking eye's boxes the head alone moves a pixel, and the fast
/// renderer draws it as the exact renderer does, bit for bit, with the head moved.
#[test]
fn pixels_only_the_head_moves_are_the_exact_renderers() {
    for (n, (img, lm)) in fast_cases().iter().enumerate() {
        let rig = FaceRig::new(img, lm).expect("rig");
        let w = img.width() as usize;
        let mut exact = vec![0u8; img.as_raw().len()];
        let mut scratch = exact.clone();
        let mut checked = 0;
        for pose in fast_poses()
            .into_iter()
            .filter(|p| p.head != HeadPose::default())
        {
            rig.render_exact(&pose, &mut exact);
            let fast = render(&rig, &pose);
            let (f, roi) = rig.prepare(&pose, &mut scratch, None);
            let snap = |b| cells::snap(roi, b);
            let cells = f
                .eye_roi
                .map_or(snap(f.mouth_roi), |e| snap(e).union(snap(f.mouth_roi)));
            for y in roi.y0..roi.y1 {
                for x in (roi.x0..roi.x1).filter(|&x| !cells.contains(x, y)) {
                    let i = (y * w + x) * 3;
                    let (a, b) = (&fast[i..i + 3], &exact[i..i + 3]);
                    assert_eq!(a, b, "case {n} ({x}, {y}), pose {pose:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 100_000, "case {n}: {checked} pixels");
    }
}

/// CIELAB (D65) of an sRGB colour, as tests/lipsync.rs measures lips against the cheek.
fn lab(c: [f64; 3]) -> [f64; 3] {
    let lin = |v: f64| {
        let v = v / 255.0;
        if v <= 0.04045 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    let [r, g, b] = c.map(lin);
    let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
    let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
    let f = |t: f64| {
        if t > 0.008856 {
            t.cbrt()
        } else {
            7.787 * t + 16.0 / 116.0
        }
    };
    let (fx, fy, fz) = (f(x), f(y), f(z));
    [116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)]
}

/// The two lip corners' distances (px) from the mouth's middle along the mouth, found as
/// tests/lipsync.rs finds them: the last half-pixel step, walking out, at which some row across
/// the mouth is redder or much darker than the cheeks.
fn lip_corners(frame: &[u8], w: usize, h: usize, lm: &[P; 68]) -> [f32; 2] {
    let (l, r) = (lm[48], lm[54]);
    let c = [(l[0] + r[0]) / 2.0, (l[1] + r[1]) / 2.0];
    let half = ((r[0] - l[0]).powi(2) + (r[1] - l[1]).powi(2)).sqrt() / 2.0;
    let u = [(r[0] - l[0]) / (2.0 * half), (r[1] - l[1]) / (2.0 * half)];
    let v = [-u[1], u[0]];
    let at = |a: f32, b: f32| {
        let (x, y) = (c[0] + a * u[0] + b * v[0], c[1] + a * u[1] + b * v[1]);
        let x = x.round().clamp(0.0, w as f32 - 1.0) as usize;
        let y = y.round().clamp(0.0, h as f32 - 1.0) as usize;
        lab(px(frame, w, x, y).map(f64::from))
    };
    let mut cheek = [0.0f64; 3];
    for side in [-1.0f32, 1.0] {
        for i in 0..5 {
            let p = at(side * 1.7 * half, (i as f32 - 2.0) * 0.05 * half);
            (0..3).for_each(|k| cheek[k] += p[k] / 10.0);
        }
    }
    let mouth = |a: f32| {
        (0..=14).any(|i| {
            let p = at(a, (i as f32 / 14.0 - 0.5) * 0.7 * half);
            p[1] >= cheek[1] + 5.0 || p[0] <= cheek[0] - 20.0
        })
    };
    let extent = |side: f32| {
        let (mut last, mut a, mut gap) = (0.0f32, 0.0f32, 0);
        while a < 1.6 * half && gap < 2 {
            if mouth(side * a) {
                (last, gap) = (a, 0);
            } else {
                gap += 1;
            }
            a += 0.5;
        }
        last
    };
    [extent(-1.0), extent(1.0)]
}

/// The defect that took the first cell renderer out: interpolating across the lips' corners
/// (where the horizontal scaling stops) kept spread lips from widening in pixels. The fast
/// frame must put the corners where the exact one does (the measure steps by half a pixel and
/// thresholds colour, so two steps of slack), and no channel may differ by more than a tenth
/// of a pixel's shift across a strong edge explains.
#[test]
fn lip_corners_and_lips_match_the_exact_renderer_for_spread_and_rounded_mouths() {
    let shaped: Vec<MouthPose> = Viseme::ALL
        .iter()
        .map(|v| v.pose())
        .filter(|p| p.round >= 0.5 || (p.width >= 0.25 && p.round == 0.0))
        .collect();
    assert!(shaped.len() >= 4);
    for (n, (img, lm)) in fast_cases().iter().enumerate() {
        let rig = FaceRig::new(img, lm).expect("rig");
        let (w, h) = (img.width() as usize, img.height() as usize);
        let mut exact = vec![0u8; img.as_raw().len()];
        for (i, m) in shaped.iter().enumerate() {
            for head in [
                HeadPose::default(),
                HeadPose {
                    dx: 0.03,
                    dy: -0.02,
                    roll: 0.02 * (i as f32 - 2.0),
                },
            ] {
                let pose = FramePose {
                    mouth: *m,
                    blink: 0.0,
                    head,
                };
                rig.render_exact(&pose, &mut exact);
                let fast = render(&rig, &pose);
                let (a, b) = (lip_corners(&fast, w, h, lm), lip_corners(&exact, w, h, lm));
                assert!(
                    (a[0] - b[0]).abs() <= 1.0 && (a[1] - b[1]).abs() <= 1.0,
                    "case {n} pose {pose:?}: corners {a:?} fast, {b:?} exact"
                );
                let worst = fast
                    .iter()
                    .zip(&exact)
                    .map(|(&p, &q)| p.abs_diff(q))
                    .max()
                    .unwrap_or(0);
                assert!(
                    worst <= 24,
                    "case {n} pose {pose:?}: a channel differs by {worst}"
                );
            }
        }
    }
}

/// `render_over` the last frame, restoring only its region, gives every pose's frame byte for
/// byte as `render` from scratch does, whichever pose came before.
#[test]
fn rendering_over_the_last_frame_equals_rendering_afresh() {
    for (img, lm) in fast_cases() {
        let rig = FaceRig::new(&img, &lm).expect("rig");
        let len = rig.width() as usize * rig.height() as usize * 3;
        let (mut over, mut fresh) = (vec![0u8; len], vec![0u8; len]);
        let poses = poses();
        let mut last = rig.render(&poses[0], &mut over);
        for (i, pose) in poses.iter().enumerate().rev() {
            last = rig.render_over(pose, &mut over, last);
            assert_eq!(last, rig.render(pose, &mut fresh), "pose {i}");
            assert!(over == fresh, "pose {i}: the frames differ");
        }
    }
}

/// The region `render` returns is what an encoder converts again: every pixel outside it is the
/// base frame's, for every pose, on the portrait and on close-ups; on the example portrait, with
/// the head still, it is the face's parts, not the frame (on a close-up the face is the frame).
#[test]
fn pixels_outside_the_returned_region_are_the_base_frames() {
    for (case, (img, lm)) in fast_cases().into_iter().enumerate() {
        let rig = FaceRig::new(&img, &lm).expect("rig");
        let (w, h) = (rig.width() as usize, rig.height() as usize);
        let mut out = vec![0u8; w * h * 3];
        for pose in poses() {
            let roi = rig.render(&pose, &mut out);
            assert!(roi.x1 <= w && roi.y1 <= h && roi.x0 < roi.x1 && roi.y0 < roi.y1);
            if case == 0 && pose.head == HeadPose::default() {
                let area = (roi.x1 - roi.x0) * (roi.y1 - roi.y0);
                assert!(
                    area < w * h / 2,
                    "{roi:?}: a still head changes half the frame"
                );
            }
            for y in 0..h {
                for x in (0..w).filter(|&x| !roi.contains(x, y)) {
                    let i = (y * w + x) * 3;
                    assert_eq!(
                        out[i..i + 3],
                        rig.base_frame()[i..i + 3],
                        "({x}, {y}) {roi:?}"
                    );
                }
            }
        }
    }
}
