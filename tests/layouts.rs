//! Layouts (`--layout fill|fit`, `--background`) at lecture sizes, through the real binary: the
//! face is found again by the landmark model's detector where the layout puts it.

use std::path::Path;
use std::process::Command;

use image::RgbImage;
use image::imageops::FilterType;
use talker::face::{FaceModels, Portrait};

use crate::util::{assert_success, assets, repo, talker, write_script};

/// The frame at `at` seconds, decoded to RGB.
fn frame_at(video: &Path, at: f64, (w, h): (u32, u32)) -> RgbImage {
    let o = Command::new("ffmpeg")
        .args(["-v", "error", "-ss", &at.to_string(), "-i"])
        .arg(video)
        .args(["-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .expect("ffmpeg is installed");
    assert!(o.status.success());
    RgbImage::from_raw(w, h, o.stdout).expect("one whole frame")
}

/// The largest face's box `[x, y, w, h]`.
fn face_box(models: &FaceModels, img: &RgbImage) -> [f32; 4] {
    let faces = models.detect(img);
    let largest = faces
        .iter()
        .max_by(|a, b| (a.bbox[2] * a.bbox[3]).total_cmp(&(b.bbox[2] * b.bbox[3])))
        .expect("a face in the frame");
    largest.bbox
}

/// (size, its numbers, flags, the portrait's scale in the frame, its offset or `None`).
type Case<'a> = (&'a str, (u32, u32), &'a [&'a str], f32, Option<[f32; 2]>);

#[test]
fn each_layout_puts_the_face_where_it_says_at_720p_and_1080p() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(
        d,
        "s.json",
        r#"{"segments": [{"text": "Welcome to the lecture."}]}"#,
    );
    let models = FaceModels::load(&assets().face_dir()).unwrap();
    let portrait = Portrait::open(&repo("examples/portrait.png")).unwrap();
    // The detector's box depends a little on the resolution: compare with the portrait itself
    // scaled as the layout scales it.
    let scaled = |scale: f32| {
        let side = (512.0 * scale).round() as u32;
        let img = image::imageops::resize(&portrait.image, side, side, FilterType::Lanczos3);
        face_box(&models, &img)
    };
    let centre = |b: [f32; 4]| [b[0] + b[2] / 2.0, b[1] + b[3] / 2.0];
    // (size, flags, scale of the portrait, its offset in the frame; None: fill with head framing,
    // whose crop the test does not recompute: only the face's scale is checked).
    let cases: [Case; 3] = [
        // A square portrait in a 16:9 frame fits by default, on the blurred portrait.
        (
            "1280x720",
            (1280, 720),
            &[],
            720.0 / 512.0,
            Some([280.0, 0.0]),
        ),
        (
            "1920x1080",
            (1920, 1080),
            &["--layout", "fit", "--background", "#203040"],
            1080.0 / 512.0,
            Some([420.0, 0.0]),
        ),
        (
            "1280x720",
            (1280, 720),
            &["--layout", "fill", "--framing", "head"],
            1280.0 / 512.0,
            None,
        ),
    ];
    for (size, (w, h), flags, scale, offset) in cases {
        let out = d.join(format!("{size}-{}.mp4", flags.len()));
        let o = talker(d)
            .args(["render", "--quiet", "--size", size, "-o"])
            .arg(&out)
            .arg(&script)
            .arg(repo("examples/portrait.png"))
            .args(flags)
            .output()
            .unwrap();
        assert_success(&o);
        let frame = frame_at(&out, 0.5, (w, h));
        let found = face_box(&models, &frame);
        let source = scaled(scale);
        let what = format!("{size} {flags:?}: found {found:?}, in the scaled portrait {source:?}");
        // The box's height: its width drifts with the frame's shape (the detector pads to a
        // square, so a wide frame shows it the face smaller).
        let height_ratio = found[3] / source[3];
        assert!((0.85..1.15).contains(&height_ratio), "{what}");
        if let Some([x0, y0]) = offset {
            let [cx, cy] = centre(source);
            let want = [cx + x0, cy + y0];
            let got = centre(found);
            let off = ((got[0] - want[0]).powi(2) + (got[1] - want[1]).powi(2)).sqrt();
            assert!(
                off < 0.04 * w as f32,
                "{what}: centre {got:?}, want {want:?}"
            );
        }
        if flags.contains(&"#203040") {
            let p = frame.get_pixel(20, h / 2).0;
            let near = p
                .iter()
                .zip([0x20, 0x30, 0x40])
                .all(|(a, b)| a.abs_diff(b) <= 6);
            assert!(near, "{what}: background {p:?}");
        }
    }
}

/// A background image that is not an image is exit 2 before any work, naming the file.
#[test]
fn a_bad_background_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "s.json", r#"{"segments": [{"text": "Hello."}]}"#);
    let bad = d.join("bg.png");
    std::fs::write(&bad, b"not a picture").unwrap();
    let wide = d.join("wide.png");
    RgbImage::new(9000, 2).save(&wide).unwrap();
    for (background, says) in [
        (bad.to_str().unwrap(), "cannot be decoded"),
        (d.to_str().unwrap(), "is not a regular file"),
        (wide.to_str().unwrap(), "at most 8192 pixels a side"),
        ("#12345", "is not a colour"),
        ("/no/such/bg.png", "cannot be read"),
    ] {
        let out = d.join("o.mp4");
        let o = talker(d)
            .args([
                "render",
                "--size",
                "1280x720",
                "--background",
                background,
                "-o",
            ])
            .arg(&out)
            .arg(&script)
            .arg(repo("examples/portrait.png"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{background}: {err}");
        assert!(err.contains(says), "{background}: {err}");
        assert!(!out.exists());
    }
}
