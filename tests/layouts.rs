//! Layouts (`--layout fill|fit|slides`, `--background`, `--pip`) at lecture sizes, through the
//! real binary: the face is found again by the landmark model's detector where the layout puts it,
//! and a slide's pixels are behind the speaker.

use std::path::Path;
use std::process::Command;

use image::RgbImage;
use image::imageops::FilterType;
use talker::face::{FaceModels, Portrait};

use crate::util::{assert_success, assets, repo, talker, write_script};

/// The frame at `at` seconds, decoded to RGB.
pub fn frame_at(video: &Path, at: f64, (w, h): (u32, u32)) -> RgbImage {
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

/// Renders `script` as `case` says and finds the face in a frame where the layout puts it:
/// its height as the portrait scaled as the layout scales it shows it, its centre at the offset
/// (`None`: fill with head framing, whose crop is not recomputed here: only the scale is
/// checked). Returns the frame.
fn render_and_find_the_face(d: &Path, script: &Path, models: &FaceModels, case: Case) -> RgbImage {
    let (size, (w, h), flags, scale, offset) = case;
    let out = d.join(format!("{size}-{}.mp4", flags.len()));
    let o = talker(d)
        .args(["render", "--quiet", "--size", size, "-o"])
        .arg(&out)
        .arg(script)
        .arg(repo("examples/portrait.png"))
        .args(flags)
        .output()
        .unwrap();
    assert_success(&o);
    let frame = frame_at(&out, 0.5, (w, h));
    let found = face_box(models, &frame);
    // The detector's box depends a little on the resolution: compare with the portrait itself
    // scaled as the layout scales it.
    let portrait = Portrait::open(&repo("examples/portrait.png")).unwrap();
    let side = (512.0 * scale).round() as u32;
    let scaled = image::imageops::resize(&portrait.image, side, side, FilterType::Lanczos3);
    let source = face_box(models, &scaled);
    let what = format!("{size} {flags:?}: found {found:?}, in the scaled portrait {source:?}");
    // The box's height: its width drifts with the frame's shape (the detector pads to a
    // square, so a wide frame shows it the face smaller).
    let height_ratio = found[3] / source[3];
    assert!((0.85..1.15).contains(&height_ratio), "{what}");
    if let Some([x0, y0]) = offset {
        let centre = |b: [f32; 4]| [b[0] + b[2] / 2.0, b[1] + b[3] / 2.0];
        let [cx, cy] = centre(source);
        let want = [cx + x0, cy + y0];
        let got = centre(found);
        let off = ((got[0] - want[0]).powi(2) + (got[1] - want[1]).powi(2)).sqrt();
        assert!(
            off < 0.04 * w as f32,
            "{what}: centre {got:?}, want {want:?}"
        );
    }
    frame
}

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
    for case in cases {
        let frame = render_and_find_the_face(d, &script, &models, case);
        let (size, (_, h), flags, ..) = case;
        if flags.contains(&"#203040") {
            let p = frame.get_pixel(20, h / 2).0;
            let near = p
                .iter()
                .zip([0x20, 0x30, 0x40])
                .all(|(a, b)| a.abs_diff(b) <= 6);
            assert!(near, "{size}: background {p:?}");
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

/// A slide of smooth colours (a codec keeps them within a few levels), `tint` telling them apart.
pub fn draw_slide(path: &Path, (w, h): (u32, u32), tint: u8) {
    let img = RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(40 + 160 * x / w) as u8, (30 + 140 * y / h) as u8, tint])
    });
    img.save(path).unwrap();
}

/// Mean absolute difference of `a` and `b` over the pixels `keep` accepts.
pub fn mean_diff(a: &RgbImage, b: &RgbImage, keep: impl Fn(u32, u32) -> bool) -> f64 {
    let (mut sum, mut n) = (0u64, 0u64);
    for (x, y, p) in a.enumerate_pixels() {
        if keep(x, y) {
            let q = b.get_pixel(x, y);
            sum +=
                p.0.iter()
                    .zip(q.0)
                    .map(|(u, v)| u64::from(u.abs_diff(v)))
                    .sum::<u64>();
            n += 3;
        }
    }
    sum as f64 / n.max(1) as f64
}

/// (script, its two slides, frame size, flags, corner, box size, bar colour).
type SlidesCase<'a> = (
    &'a Path,
    &'a [std::path::PathBuf; 2],
    (u32, u32),
    &'a [&'a str],
    talker::slides::Corner,
    f64,
    [u8; 3],
);

/// Renders `script` as `case` says (with SRT subtitles) and checks two frames, one while each
/// slide shows: away from the speaker's box the frame is that slide letterboxed (and not the
/// other), and the face is found inside the box. Returns the video and its report.
fn render_and_find_the_slides(
    d: &Path,
    models: &FaceModels,
    case: SlidesCase,
) -> (std::path::PathBuf, serde_json::Value) {
    use talker::slides::{PipBox, PipSize, letterbox};
    let (script, slides, (w, h), flags, corner, size, bars) = case;
    let out = d.join(format!("{w}.mp4"));
    let o = talker(d)
        .args(["render", "--json", "--subtitles", "srt", "-o"])
        .arg(&out)
        .arg(script)
        .arg(repo("examples/portrait.png"))
        .args(flags)
        .output()
        .unwrap();
    assert_success(&o);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (report["width"].as_u64(), report["height"].as_u64()),
        (Some(w.into()), Some(h.into()))
    );
    let pip = PipBox::place((512, 512), (w, h), corner, PipSize::try_from(size).unwrap());
    let bars = RgbImage::from_pixel(w, h, image::Rgb(bars));
    // The portrait as the box shows it (square portrait, square box: scaled whole).
    let in_box = image::imageops::resize(
        &Portrait::open(&repo("examples/portrait.png"))
            .unwrap()
            .image,
        pip.w,
        pip.h,
        FilterType::Lanczos3,
    );
    let away = |x: u32, y: u32| {
        let m = 6;
        x + m < pip.x || x > pip.x + pip.w + m || y + m < pip.y || y > pip.y + pip.h + m
    };
    let seconds = report["audio_seconds"].as_f64().unwrap();
    for (at, shown, other) in [(0.4, 0, 1), (seconds - 0.3, 1, 0)] {
        let frame = frame_at(&out, at, (w, h));
        let what = format!("{w}x{h} at {at:.1} s");
        let slide = |i: usize| letterbox(&image::open(&slides[i]).unwrap().to_rgb8(), &bars);
        let near = mean_diff(&frame, &slide(shown), away);
        let far = mean_diff(&frame, &slide(other), away);
        assert!(
            near < 3.0 && far > 8.0,
            "{what}: off the slide by {near:.2}, the other by {far:.2}"
        );
        // The detector wants a face that is not tiny in its picture: it looks at the box
        // and a quarter of its size around it.
        let m = pip.h / 4;
        let (x0, y0) = (pip.x.saturating_sub(m), pip.y.saturating_sub(m));
        let (x1, y1) = ((pip.x + pip.w + m).min(w), (pip.y + pip.h + m).min(h));
        let around = image::imageops::crop_imm(&frame, x0, y0, x1 - x0, y1 - y0).to_image();
        let [fx, fy, fw, fh] = face_box(models, &around);
        let got = [x0 as f32 + fx + fw / 2.0, y0 as f32 + fy + fh / 2.0];
        let [sx, sy, sw, sh] = face_box(models, &in_box);
        let want = [pip.x as f32 + sx + sw / 2.0, pip.y as f32 + sy + sh / 2.0];
        let off = ((got[0] - want[0]).powi(2) + (got[1] - want[1]).powi(2)).sqrt();
        assert!(
            off < 0.08 * pip.h as f32 && (0.8..1.25).contains(&(fh / sh)),
            "{what}: face centre {got:?} height {fh}, want {want:?} height {sh} ({pip:?})"
        );
    }
    (out, report)
}

/// Two slides of smooth colours and a JSON script that shows them, each in a chapter of its
/// own with one of `texts`, in `d`; the script's and the slides' paths.
fn two_slides(d: &Path, texts: [&str; 2]) -> (std::path::PathBuf, [std::path::PathBuf; 2]) {
    std::fs::create_dir_all(d.join("slides")).unwrap();
    draw_slide(&d.join("slides/a.png"), (800, 600), 20);
    draw_slide(&d.join("slides/b.png"), (1600, 800), 220);
    let segments: Vec<serde_json::Value> = texts
        .iter()
        .zip(["a", "b"])
        .zip(["One", "Two"])
        .map(|((text, slide), chapter)| {
            serde_json::json!({"text": text, "slide": format!("slides/{slide}.png"), "chapter": chapter})
        })
        .collect();
    let script = serde_json::json!({ "segments": segments }).to_string();
    let json = write_script(d, "talk.json", &script);
    (json, [d.join("slides/a.png"), d.join("slides/b.png")])
}

/// `--layout slides` at 720p (the Markdown example, slides chosen by default) and 1080p (a JSON
/// script, another corner, size and bar colour): the face is found inside the box the layout
/// puts it in, and away from the box the frame is the slide letterboxed, each slide while its
/// segments are spoken.
#[test]
fn slides_show_behind_the_speaker_in_the_corner_at_720p_and_1080p() {
    use talker::slides::Corner;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (json, slides_of_json) =
        two_slides(d, ["Welcome to the lecture.", "Here is the second slide."]);
    let models = FaceModels::load(&assets().face_dir()).unwrap();
    let example = repo("examples/lecture/lecture.md");
    let slides_of_example = [
        repo("examples/lecture/slides/01.png"),
        repo("examples/lecture/slides/02.png"),
    ];
    let cases: [SlidesCase; 2] = [
        // No --size: a slides render is 1280x720 unless told otherwise.
        (
            &example,
            &slides_of_example,
            (1280, 720),
            &[],
            Corner::BottomRight,
            0.28,
            [0; 3],
        ),
        (
            &json,
            &slides_of_json,
            (1920, 1080),
            &[
                "--size",
                "1920x1080",
                "--layout",
                "slides",
                "--pip",
                "top-left",
                "--pip-size",
                "0.35",
                "--background",
                "#203040",
            ],
            Corner::TopLeft,
            0.35,
            [0x20, 0x30, 0x40],
        ),
    ];
    for case in cases {
        let script = case.0;
        let (out, _) = render_and_find_the_slides(d, &models, case);
        // Chapters and subtitles stay as the script has them.
        let srt = std::fs::read_to_string(out.with_extension("srt")).unwrap();
        assert!(
            srt.contains("Half of the Moon") || srt.contains("second slide"),
            "{srt}"
        );
        let chapters = crate::util::probe(&out)["chapters"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(chapters, if script == json.as_path() { 2 } else { 1 });
    }
}

/// Editing a slide renders again only the chunks that show it: the render report counts the
/// chunks taken from the cache.
#[test]
fn a_slide_edit_renders_only_the_chunks_that_show_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    draw_slide(&d.join("a.png"), (640, 360), 10);
    draw_slide(&d.join("b.png"), (640, 360), 120);
    let script = write_script(
        d,
        "talk.json",
        r#"{"size": [640, 360], "segments": [
            {"text": "First.", "slide": "a.png"},
            {"text": "Second.", "slide": "b.png"},
            {"text": "Still the second slide."}]}"#,
    );
    let render = || {
        let out = d.join("o.mp4");
        let _ = std::fs::remove_file(&out);
        crate::util::render_json(d, &script, &out, &["--deterministic", "--pip-size", "0.5"])
    };
    let first = render();
    assert_eq!(first["chunks"], 3, "{first}");
    assert_eq!(first["chunks_reused"], 0, "{first}");
    assert_eq!(render()["chunks_reused"], 3);
    draw_slide(&d.join("a.png"), (640, 360), 11);
    assert_eq!(
        render()["chunks_reused"],
        2,
        "only the first segment shows a.png"
    );
    draw_slide(&d.join("b.png"), (640, 360), 121);
    assert_eq!(render()["chunks_reused"], 1, "b.png shows in two segments");
}

/// A slide that is missing, no picture or broken is exit 2 naming the segment (or the Markdown
/// line) before any work: before the voice is even looked for.
#[test]
fn a_bad_slide_is_refused_naming_the_segment_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    draw_slide(&d.join("good.png"), (64, 48), 0);
    let png = std::fs::read(d.join("good.png")).unwrap();
    std::fs::write(d.join("cut.png"), &png[..png.len() / 2]).unwrap();
    std::fs::write(d.join("notes.txt"), "not a picture").unwrap();
    std::fs::create_dir(d.join("folder")).unwrap();
    let json = |slide: &str| {
        format!(
            r#"{{"segments": [{{"text": "One.", "slide": "good.png"}}, {{"text": "Two.", "slide": "{slide}"}}]}}"#
        )
    };
    std::fs::write(d.join("talk.md"), "Hello.\n\n![](gone.png)\n\nMore.\n").unwrap();
    let cases = [
        (json("gone.png"), "segments[1].slide", "No such file"),
        (json("cut.png"), "segments[1].slide", "cannot be decoded"),
        (
            json("notes.txt"),
            "segments[1].slide",
            "neither PNG nor JPEG",
        ),
        (json("folder"), "segments[1].slide", "is a directory"),
        (String::new(), "line 3", "gone.png"),
        (
            r#"{"segments": [{"text": "No slide."}]}"#.to_owned(),
            "names no slide",
            "--layout fit",
        ),
    ];
    for (text, at, says) in cases {
        let script = if text.is_empty() {
            d.join("talk.md")
        } else {
            write_script(d, "talk.json", &text)
        };
        let out = d.join("o.mp4");
        let o = talker(d)
            .args([
                "render",
                "--layout",
                "slides",
                "--voice",
                "/no/such/voice.onnx",
                "-o",
            ])
            .arg(&out)
            .arg(&script)
            .arg(repo("examples/portrait.png"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{at}: {err}");
        assert!(err.contains(at) && err.contains(says), "{at}: {err}");
        assert!(!err.contains("voice"), "refused before the voice: {err}");
        assert!(!out.exists());
    }
}

/// Every layout at the largest size a render takes, 3840x2160: the face is found where the
/// layout puts it, and the slides behind the speaker. Short scripts, so that CI stays fast.
#[test]
fn each_layout_renders_at_3840x2160() {
    use talker::slides::Corner;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "s.json", r#"{"segments": [{"text": "Welcome."}]}"#);
    let (json, slides) = two_slides(d, ["Welcome.", "Slides."]);
    let models = FaceModels::load(&assets().face_dir()).unwrap();
    let size = (3840, 2160);
    let cases: [Case; 2] = [
        (
            "3840x2160",
            size,
            &["--layout", "fit"],
            2160.0 / 512.0,
            Some([840.0, 0.0]),
        ),
        (
            "3840x2160",
            size,
            &["--layout", "fill", "--framing", "head"],
            3840.0 / 512.0,
            None,
        ),
    ];
    for case in cases {
        let t = std::time::Instant::now();
        render_and_find_the_face(d, &script, &models, case);
        eprintln!("{:?}: {:.1} s", case.2, t.elapsed().as_secs_f64());
    }
    let t = std::time::Instant::now();
    let flags = ["--size", "3840x2160", "--layout", "slides"];
    let case = (
        &*json,
        &slides,
        size,
        &flags[..],
        Corner::BottomRight,
        0.28,
        [0; 3],
    );
    render_and_find_the_slides(d, &models, case);
    eprintln!("slides: {:.1} s", t.elapsed().as_secs_f64());
}

/// `fit` and `slides` at 24 and 60 fps (neither divides 22050 Hz into whole samples a frame):
/// the two chunks join, and the video has the frames its report counts, as long as its audio.
#[test]
fn fit_and_slides_keep_any_frame_rate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (json, _) = two_slides(d, ["One chunk here.", "And a second one."]);
    // At 640x360 the whole portrait leaves too small a face: a close-up, a larger box.
    for (layout, closer) in [
        ("fit", ["--framing", "head"]),
        ("slides", ["--pip-size", "0.5"]),
    ] {
        for fps in [24u64, 60] {
            let out = d.join(format!("{layout}-{fps}.mp4"));
            let fps_text = fps.to_string();
            let mut flags = vec!["--layout", layout, "--size", "640x360", "--fps", &fps_text];
            flags.extend(closer);
            let report = crate::util::render_json(d, &json, &out, &flags);
            assert_eq!(report["chunks"], 2, "{layout} at {fps} fps: {report}");
            crate::util::assert_synced(&out, &report, fps);
        }
    }
}
