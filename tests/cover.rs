//! Cover art: the EPUB's cover image (EPUB 3 `cover-image`, EPUB 2 `<meta name="cover">`) or
//! `--cover IMAGE`, embedded as an attached picture in M4B, MP3 and MP4, and refused (exit 2,
//! before the voice loads) when it is not a usable JPEG or PNG.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::books::{CONTAINER, zip_file};
use crate::util::{assert_success, decode_audio, listing, probe, repo, talker};

const CHAPTER: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>One</title></head>
<body><h1>One</h1><p>Covers matter.</p></body></html>"#;

fn image_bytes(format: image::ImageFormat, width: u32, height: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x * 3) as u8, (y * 5) as u8, 120])
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

/// A one-paragraph EPUB whose cover is `cover` (a file name in the archive and its bytes), marked
/// the EPUB 3 way (`properties="cover-image"`) or the EPUB 2 way (`<meta name="cover">`).
fn book(dir: &Path, epub3: bool, cover: (&str, &[u8])) -> PathBuf {
    let (mark, meta) = if epub3 {
        (r#"properties="cover-image""#, "")
    } else {
        ("", r#"<meta name="cover" content="cov"/>"#)
    };
    let version = if epub3 { "3.0" } else { "2.0" };
    let opf = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="{version}" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:title>Covered</dc:title><dc:identifier id="id">x</dc:identifier>{meta}
  </metadata>
  <manifest>
    <item id="c1" href="ch1.xhtml" media-type="application/xhtml+xml"/>
    <item id="cov" href="images/{name}" media-type="image/jpeg" {mark}/>
  </manifest>
  <spine><itemref idref="c1"/></spine>
</package>"#,
        name = cover.0
    );
    let p = dir.join(if epub3 { "book3.epub" } else { "book2.epub" });
    let image = format!("OEBPS/images/{}", cover.0);
    zip_file(
        &p,
        &[
            ("mimetype", b"application/epub+zip"),
            ("META-INF/container.xml", CONTAINER.as_bytes()),
            ("OEBPS/content.opf", opf.as_bytes()),
            ("OEBPS/ch1.xhtml", CHAPTER.as_bytes()),
            (&image, cover.1),
        ],
    );
    p
}

fn run(dir: &Path, args: &[&str], paths: &[&Path]) -> Output {
    talker(dir)
        .args(["render", "--deterministic"])
        .args(args)
        .args(paths)
        .output()
        .unwrap()
}

/// The one attached picture of `out`: (codec, width, height), after checking it is one.
fn attached_pic(out: &Path) -> (String, i64, i64) {
    let p = probe(out);
    let pics: Vec<&serde_json::Value> = p["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["disposition"]["attached_pic"] == 1)
        .collect();
    assert_eq!(pics.len(), 1, "{p}");
    let s = pics[0];
    (
        s["codec_name"].as_str().unwrap().to_owned(),
        s["width"].as_i64().unwrap(),
        s["height"].as_i64().unwrap(),
    )
}

/// The attached picture's bytes as the file holds them, and its size as FFmpeg decodes it.
fn picture(out: &Path) -> (Vec<u8>, (u32, u32)) {
    let o = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(out)
        .args(["-map", "0:v", "-c", "copy", "-f", "image2pipe", "-"])
        .output()
        .expect("ffmpeg is installed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let decoded = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(out)
        .args(["-map", "0:v", "-f", "image2pipe", "-c:v", "png", "-"])
        .output()
        .unwrap();
    assert!(decoded.status.success());
    let img = image::load_from_memory(&decoded.stdout).expect("the cover decodes");
    (o.stdout, (img.width(), img.height()))
}

/// `talker audio check`'s figures of `file`.
fn checked(dir: &Path, file: &Path) -> serde_json::Value {
    let o = talker(dir)
        .args(["audio", "check", "--json"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        matches!(o.status.code(), Some(0 | 3)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["files"][0]["figures"].clone()
}

#[test]
fn epub3_cover_image_goes_into_the_m4b_and_the_check_reads_only_the_audio() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let png = image_bytes(image::ImageFormat::Png, 60, 40);
    let book = book(d, true, ("cover.png", &png));
    let out = d.join("book.m4b");
    assert_success(&run(d, &["-o"], &[&out, &book]));
    assert_eq!(attached_pic(&out), ("png".to_owned(), 60, 40));
    assert_eq!(picture(&out), (png, (60, 40)));
    // The JSON script holds no image: convert says how to keep the cover.
    let o = talker(d)
        .args(["script", "convert", "-o"])
        .arg(d.join("book.json"))
        .arg(&book)
        .output()
        .unwrap();
    assert_success(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("render the JSON with --cover IMAGE"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The check decodes the audio stream alone: the same figures as the audio without its cover.
    let bare = d.join("bare.m4a");
    let o = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(&out)
        .args(["-map", "0:a", "-c", "copy"])
        .arg(&bare)
        .output()
        .unwrap();
    assert!(o.status.success());
    let (with, without) = (checked(d, &out), checked(d, &bare));
    assert!(with["integrated_lufs"].as_f64().is_some(), "{with}");
    assert_eq!(with, without);
}

#[test]
fn epub2_meta_cover_goes_into_the_m4b_and_the_cover_flag_wins() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let jpeg = image_bytes(image::ImageFormat::Jpeg, 32, 48);
    let book = book(d, false, ("front.jpg", &jpeg));
    let out = d.join("book.m4b");
    assert_success(&run(d, &["-o"], &[&out, &book]));
    assert_eq!(attached_pic(&out), ("mjpeg".to_owned(), 32, 48));
    assert_eq!(picture(&out), (jpeg, (32, 48)));

    let png = image_bytes(image::ImageFormat::Png, 20, 24);
    let flag = d.join("flag.png");
    std::fs::write(&flag, &png).unwrap();
    let again = d.join("again.m4b");
    let o = run(
        d,
        &["--cover", flag.to_str().unwrap(), "-o"],
        &[&again, &book],
    );
    assert_success(&o);
    assert_eq!(attached_pic(&again), ("png".to_owned(), 20, 24));
    assert_eq!(picture(&again).0, png);
}

#[test]
fn cover_flag_goes_into_mp3_and_mp4_and_wav_warns() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = d.join("words.txt");
    std::fs::write(&text, "Covers matter.\n").unwrap();
    let png = image_bytes(image::ImageFormat::Png, 50, 30);
    let cover = d.join("x.png");
    std::fs::write(&cover, &png).unwrap();
    let with = ["--cover", cover.to_str().unwrap(), "-o"];

    let mp3 = d.join("words.mp3");
    assert_success(&run(d, &with, &[&mp3, &text]));
    assert_eq!(attached_pic(&mp3), ("png".to_owned(), 50, 30));
    assert_eq!(picture(&mp3), (png.clone(), (50, 30)));
    // An ID3v2 APIC frame, which is what players read.
    let bytes = std::fs::read(&mp3).unwrap();
    assert!(bytes.starts_with(b"ID3"));
    assert!(bytes.windows(4).any(|w| w == b"APIC"));
    assert!(checked(d, &mp3)["integrated_lufs"].as_f64().is_some());
    // The audio is that of the same book without a cover, sample for sample, and as long.
    let bare = d.join("bare.mp3");
    assert_success(&run(d, &["-o"], &[&bare, &text]));
    assert_eq!(decode_audio(&mp3, 44_100), decode_audio(&bare, 44_100));
    assert_eq!(
        probe(&mp3)["format"]["duration"],
        probe(&bare)["format"]["duration"]
    );

    let mp4 = d.join("words.mp4");
    let portrait = repo("examples/portrait.png");
    let video = [
        "--size",
        "128x128",
        "--framing",
        "head",
        "--fps",
        "10",
        "--cover",
        cover.to_str().unwrap(),
        "-o",
    ];
    assert_success(&run(d, &video, &[&mp4, &text, &portrait]));
    let p = probe(&mp4);
    let kinds: Vec<&str> = p["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["codec_type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["video", "audio", "subtitle", "video"], "{p}");
    assert_eq!(p["streams"][0]["codec_name"], "h264");
    assert_eq!(attached_pic(&mp4), ("png".to_owned(), 50, 30));

    let wav = d.join("words.wav");
    let o = run(d, &with, &[&wav, &text]);
    assert_success(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        stderr.matches("WAV files hold no cover art").count(),
        1,
        "{stderr}"
    );
}

/// Every way a cover can be unusable is exit 2 naming the file and the fix, before the voice
/// loads (a missing voice would be reported otherwise) and with nothing written.
#[test]
fn bad_covers_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = d.join("words.txt");
    std::fs::write(&text, "Covers matter.\n").unwrap();
    let mut cut = image_bytes(image::ImageFormat::Png, 64, 64);
    cut.truncate(cut.len() / 2);
    let cases: Vec<(&str, Option<Vec<u8>>, &str)> = vec![
        ("missing.png", None, "cannot be read"),
        (
            "words.png",
            Some(b"Covers matter.".to_vec()),
            "not JPEG or PNG",
        ),
        ("cut.png", Some(cut), "not a whole PNG"),
        (
            "anim.gif",
            Some(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;".to_vec()),
            "GIF",
        ),
        (
            "wide.png",
            Some(image_bytes(image::ImageFormat::Png, 4097, 2)),
            "4097x2",
        ),
    ];
    for (name, bytes, reason) in cases {
        let cover = d.join(name);
        if let Some(b) = &bytes {
            std::fs::write(&cover, b).unwrap();
        }
        let before = listing(d);
        let out = d.join("words.m4b");
        let o = run(
            d,
            &[
                "--voice",
                "no-such-voice",
                "--cover",
                cover.to_str().unwrap(),
                "-o",
            ],
            &[&out, &text],
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(&cover.display().to_string()), "{stderr}");
        assert!(stderr.contains(reason), "{name}: {stderr}");
        assert!(stderr.contains("give a JPEG or PNG image"), "{stderr}");
        assert!(!stderr.contains("no-such-voice"), "{stderr}");
        assert_eq!(listing(d), before, "{name}");
    }
}

/// A book whose cover is broken is still read, with a note saying so; `--cover` gives another.
#[test]
fn a_broken_epub_cover_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = book(d, true, ("cover.jpg", b"\xff\xd8\xff not a JPEG"));
    let o = talker(d)
        .args(["script", "convert", "-o"])
        .arg(d.join("book.json"))
        .arg(&book)
        .output()
        .unwrap();
    assert_success(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("OEBPS/images/cover.jpg (the book's cover)") && stderr.contains("--cover"),
        "{stderr}"
    );
}
