//! Every bad input exits 2 with a message naming the problem, and leaves no output file.

use std::path::Path;

use crate::util::*;

const GOOD: &str = r#"{"segments": [{"text": "Hello there."}]}"#;

/// Runs talker, expects exit 2 and `needle` in stderr, and no output or temp file in `dir`.
fn refused(dir: &Path, args: &[&str], needle: &str) {
    let before = listing(dir);
    let o = talker(dir).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "args {args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "args {args:?}: expected {needle:?} in:\n{stderr}"
    );
    let after: Vec<String> = listing(dir).into_iter().filter(|f| f != "cache").collect();
    let before: Vec<String> = before.into_iter().filter(|f| f != "cache").collect();
    assert_eq!(after, before, "args {args:?} left files behind");
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn bad_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let portrait = repo("examples/portrait.png");
    let out = d.join("out.mp4");
    let cases = [
        ("syntax.json", r#"{"segments": [}"#, "line 1, column 15"),
        (
            "unknown.json",
            r#"{"segments": [{"text": "hi", "pause": 1}]}"#,
            "did you mean \"pause_ms\"",
        ),
        ("empty.json", r#"{"segments": []}"#, "segments: is empty"),
        (
            "silent.json",
            r#"{"segments": [{"text": "hi"}, {"text": "?!"}]}"#,
            "segments[1].text",
        ),
        (
            "speed.json",
            r#"{"speed": 9, "segments": [{"text": "hi"}]}"#,
            "speed",
        ),
        (
            "fps.json",
            r#"{"fps": 121, "segments": [{"text": "hi"}]}"#,
            "fps: must be a whole number from 1 to 120",
        ),
        (
            "twice.json",
            "{\"segments\": [{\"text\": \"Keep me.\",\n \"text\": \"Lost.\"}]}",
            "segments[0].text: is given twice (the second at line 2",
        ),
        (
            "twice-top.json",
            r#"{"title": "A", "segments": [{"text": "hi"}], "title": "B"}"#,
            "title: is given twice",
        ),
        (
            "bell.json",
            "{\"segments\": [{\"text\": \"Tab\\tand line\\nare fine.\"}, {\"text\": \"Ring \\u0007 here.\"}]}",
            "segments[1].text: contains the control character U+0007",
        ),
    ];
    for (name, body, needle) in cases {
        let script = write_script(d, name, body);
        refused(
            d,
            &["render", s(&script), s(&portrait), "-o", s(&out)],
            needle,
        );
        assert!(
            String::from_utf8_lossy(
                &talker(d)
                    .args(["render", s(&script), s(&portrait), "-o", s(&out)])
                    .output()
                    .unwrap()
                    .stderr
            )
            .contains(name),
            "the message names the file"
        );
    }
    refused(
        d,
        &[
            "render",
            s(&d.join("missing.json")),
            s(&portrait),
            "-o",
            s(&out),
        ],
        "missing.json",
    );
}

#[test]
fn bad_portraits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "ok.json", GOOD);
    let out = d.join("out.mp4");
    let png = std::fs::read(repo("examples/portrait.png")).unwrap();
    let truncated = d.join("truncated.png");
    std::fs::write(&truncated, &png[..2000]).unwrap();
    let text = d.join("text.png");
    std::fs::write(&text, "not an image").unwrap();
    let img = image::open(repo("examples/portrait.png"))
        .unwrap()
        .to_rgb8();
    let flag = d.join("flag.png");
    image::imageops::crop_imm(&img, 0, 0, 120, 300)
        .to_image()
        .save(&flag)
        .unwrap();
    let tiny = d.join("tiny.png");
    image::imageops::resize(&img, 256, 256, image::imageops::FilterType::Triangle)
        .save(&tiny)
        .unwrap();
    let mut jpeg = Vec::new();
    image::DynamicImage::ImageRgb8(img.clone())
        .write_to(
            &mut std::io::Cursor::new(&mut jpeg),
            image::ImageFormat::Jpeg,
        )
        .unwrap();
    let cut_jpeg = d.join("cut.jpg");
    std::fs::write(&cut_jpeg, &jpeg[..jpeg.len() / 2]).unwrap();
    let mut formats = Vec::new();
    for (name, magic, format) in [
        (
            "anim.gif",
            &b"GIF89a\x00\x02\x00\x02\x00\x00\x00"[..],
            "GIF",
        ),
        (
            "photo.webp",
            b"RIFF\x24\x00\x00\x00WEBPVP8 \x00\x00",
            "WebP",
        ),
        ("scan.bmp", b"BM\x36\x00\x0c\x00\x00\x00\x00\x00", "BMP"),
        ("scan.tif", b"II*\x00\x08\x00\x00\x00\x00\x00", "TIFF"),
    ] {
        let path = d.join(name);
        let mut bytes = magic.to_vec();
        bytes.resize(4096, 0);
        std::fs::write(&path, bytes).unwrap();
        formats.push((
            path,
            format!("is a {format} image, which talker does not read; only PNG and JPEG"),
        ));
    }
    for (p, needle) in &formats {
        refused(d, &["render", s(&script), s(p), "-o", s(&out)], needle);
    }
    for (p, needle) in [
        (truncated.as_path(), "damaged or truncated"),
        (
            cut_jpeg.as_path(),
            "the JPEG data ends before its end-of-image marker",
        ),
        (text.as_path(), "not a PNG or JPEG"),
        (flag.as_path(), "no face found"),
        (tiny.as_path(), "px wide"),
        (d.join("nope.png").as_path(), "does not exist"),
    ] {
        refused(d, &["render", s(&script), s(p), "-o", s(&out)], needle);
    }
}

#[test]
fn bad_voice_and_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "ok.json", GOOD);
    let portrait = repo("examples/portrait.png");
    let out = d.join("out.mp4");
    refused(
        d,
        &[
            "render",
            s(&script),
            s(&portrait),
            "-o",
            s(&out),
            "--voice",
            "xx_XX-nobody",
        ],
        "xx_XX-nobody.onnx not found",
    );
    let broken = d.join("broken.onnx");
    std::fs::write(&broken, b"not a model").unwrap();
    std::fs::write(
        d.join("broken.onnx.json"),
        std::fs::read(default_voice().config).unwrap(),
    )
    .unwrap();
    refused(
        d,
        &[
            "render",
            s(&script),
            s(&portrait),
            "-o",
            s(&out),
            "--voice",
            s(&broken),
        ],
        "broken.onnx",
    );
    std::fs::remove_file(&broken).unwrap();
    std::fs::remove_file(d.join("broken.onnx.json")).unwrap();
    refused(
        d,
        &[
            "render",
            s(&script),
            s(&portrait),
            "-o",
            s(&out),
            "--size",
            "641x480",
        ],
        "even",
    );
    refused(
        d,
        &[
            "render",
            s(&script),
            s(&portrait),
            "-o",
            s(&d.join("no/such/dir/out.mp4")),
        ],
        "does not exist",
    );
    refused(d, &["render", s(&script)], "PORTRAIT");
    for fps in ["0", "121"] {
        refused(
            d,
            &[
                "render",
                s(&script),
                s(&portrait),
                "-o",
                s(&out),
                "--fps",
                fps,
            ],
            "1..=120",
        );
    }
    refused(
        d,
        &[
            "render",
            s(&script),
            s(&portrait),
            "-o",
            s(&out),
            "--batch-budget",
            "100000000000000",
        ],
        "0..=8192",
    );
    refused(
        d,
        &[
            "render",
            s(&script),
            s(&portrait),
            "-o",
            s(&out),
            "--speech-lanes",
            "0",
        ],
        "1..=256",
    );
}

/// FFmpeg writes only to UTF-8 names: another output or cache name is refused before any work.
#[test]
fn names_ffmpeg_cannot_write_are_refused_first() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "ok.json", GOOD);
    let portrait = repo("examples/portrait.png");
    let latin1 = d.join(OsStr::from_bytes(b"caf\xe9.mp4"));
    let o = talker(d)
        .arg("render")
        .args([&script, &portrait])
        .arg("-o")
        .arg(&latin1)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the output path is not valid UTF-8"), "{err}");
    assert!(!latin1.exists());
    let cache = d.join(OsStr::from_bytes(b"cach\xe9"));
    let o = talker(d)
        .arg("--cache")
        .arg(&cache)
        .arg("render")
        .args([&script, &portrait])
        .arg("-o")
        .arg(d.join("out.mp4"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the cache directory path is not valid UTF-8"),
        "{err}"
    );
    assert!(!cache.exists() && !d.join("out.mp4").exists());
}

/// A square frame on a wide portrait whose face is off centre crops the face: the message says
/// which size or framing works instead of naming a landmark.
#[test]
fn a_size_that_crops_the_face_names_what_works() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = write_script(d, "ok.json", GOOD);
    let img = image::open(repo("examples/portrait.png"))
        .unwrap()
        .to_rgb8();
    let mut wide = image::RgbImage::from_pixel(1024, 512, image::Rgb([128, 128, 128]));
    image::imageops::replace(&mut wide, &img, 0, 0);
    let portrait = d.join("wide.png");
    wide.save(&portrait).unwrap();
    let out = d.join("out.mp4");
    refused(
        d,
        &[
            "render",
            s(&script),
            s(&portrait),
            "-o",
            s(&out),
            "--size",
            "256x256",
        ],
        "a 256x256 frame crops the face out of portrait",
    );
    let o = talker(d)
        .args([
            "render",
            s(&script),
            s(&portrait),
            "-o",
            s(&out),
            "--size",
            "256x256",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--framing head"), "{err}");
    assert!(!err.contains("landmark"), "{err}");
}

#[test]
fn fetch_assets_refuses_an_unknown_option_before_any_download() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("bash")
        .arg(repo("scripts/fetch-assets"))
        .arg("--test")
        .env("TALKER_ASSETS", dir.path().join("assets"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("usage: scripts/fetch-assets [--tests]"),
        "{err}"
    );
    assert!(!dir.path().join("assets").exists(), "nothing is created");
}
