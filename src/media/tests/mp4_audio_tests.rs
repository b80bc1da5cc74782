//! talker's own M4B writer against FFmpeg's `ipod` muxer fed the very same AAC packets: the same
//! packets at the same times, the same audio decoded, the same chapters (from the chapter track
//! and from `chpl`), tags and cover, as ffprobe and the ffmpeg CLI read them.

use std::path::Path;
use std::process::Command;

use ffmpeg_next::{Dictionary, Rational, format};

use super::super::aac::{AAC, AacTrack, Muxed};
use super::super::audio::audiobook_meta;
use super::super::cover::{add_cover_stream, write_cover};
use super::super::{AudioFormat, AudioMeta, AudioWriter, Chapter, init};
use super::audio_piece_tests::{RATE, decode, speechlike};
use super::{ffprobe, num, stream, temp, top_level_atoms};

/// A book's metadata: two chapters, every tag, and a PNG cover.
fn meta(seconds: f64) -> AudioMeta {
    let img = image::RgbImage::from_fn(24, 16, |x, y| image::Rgb([x as u8 * 9, y as u8 * 13, 77]));
    let mut png = std::io::Cursor::new(Vec::new());
    img.write_to(&mut png, image::ImageFormat::Png).unwrap();
    AudioMeta {
        title: Some("Chapter Two".into()),
        album: Some("A Book \u{e9}t\u{e9}".into()),
        author: Some("An Author".into()),
        track: Some((2, 7)),
        chapters: vec![
            Chapter {
                title: "Opening".into(),
                start: 0.0,
                end: 3.25,
            },
            Chapter {
                title: "The \u{2014} Middle".into(),
                start: 3.25,
                end: seconds,
            },
        ],
        cover: Some(crate::cover::Cover::from_bytes(png.into_inner()).unwrap()),
    }
}

/// What FFmpeg's `ipod` muxer makes of `pcm` and `meta`, encoded by the same encoder.
fn reference(path: &Path, pcm: &[i16], meta: &AudioMeta) {
    init().unwrap();
    let mut out = format::output_as(path, "ipod").unwrap();
    let mut aac = AacTrack::open_codec(path, RATE, true, AAC).unwrap();
    aac.add_stream(&mut out).unwrap();
    let cover = meta.cover.as_ref().unwrap();
    let index = add_cover_stream(&mut out, path, cover).unwrap();
    audiobook_meta(&mut out, path, meta).unwrap();
    let mut options = Dictionary::new();
    options.set("movflags", "+faststart");
    options.set("brand", "M4B ");
    out.write_header_with(options).unwrap();
    write_cover(&mut out, path, index, cover).unwrap();
    let clock = Rational::new(1, RATE as i32);
    let stream = (0, out.stream(0).unwrap().time_base());
    let mut muxed = Muxed {
        out: &mut out,
        stream,
        clock,
        path,
    };
    for part in pcm.chunks(7_919) {
        aac.push(part, &mut muxed).unwrap();
    }
    aac.finish(&mut muxed).unwrap();
    out.write_trailer().unwrap();
}

/// The audio packets as ffprobe lists them, without their place in the file.
fn packets(path: &Path) -> Vec<String> {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "a", "-show_packets"])
        .args(["-show_data_hash", "md5", "-of", "compact"])
        .arg(path)
        .output()
        .expect("run ffprobe");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            l.split('|')
                .filter(|f| !f.starts_with("pos="))
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

/// `ours` equal to `theirs`, or the first place where they differ.
fn same<T: PartialEq + std::fmt::Debug>(ours: &[T], theirs: &[T], what: &str) {
    let first = ours.iter().zip(theirs).position(|(a, b)| a != b);
    if let Some(i) = first {
        panic!(
            "{what} differ at {i}: {:?} against {:?}",
            ours[i], theirs[i]
        );
    }
    assert_eq!(ours.len(), theirs.len(), "{what}: how many");
}

/// The body of the box at `path` (types from the top level down), the first one found.
fn find_box<'a>(data: &'a [u8], path: &[&[u8; 4]]) -> Option<&'a [u8]> {
    let (want, rest) = path.split_first()?;
    // Containers whose children start after a version and flags, or a sample entry's fields.
    let skip = |kind: &[u8]| match kind {
        b"meta" => 4,
        _ => 0,
    };
    let mut at = 0;
    while at + 8 <= data.len() {
        let size = u32::from_be_bytes(data[at..at + 4].try_into().ok()?) as usize;
        let kind = &data[at + 4..at + 8];
        if size < 8 || at + size > data.len() {
            return None;
        }
        if kind == *want {
            let body = &data[at + 8..at + size];
            return if rest.is_empty() {
                Some(body)
            } else {
                find_box(&body[skip(kind)..], rest)
            };
        }
        at += size;
    }
    None
}

/// The `trak` of `handler` ("soun" or "text").
fn trak<'a>(data: &'a [u8], handler: &[u8; 4]) -> &'a [u8] {
    let moov = find_box(data, &[b"moov"]).expect("moov");
    let mut at = 0;
    while at + 8 <= moov.len() {
        let size = u32::from_be_bytes(moov[at..at + 4].try_into().unwrap()) as usize;
        let body = &moov[at + 8..at + size];
        if &moov[at + 4..at + 8] == b"trak"
            && find_box(body, &[b"mdia", b"hdlr"]).is_some_and(|h| &h[8..12] == handler)
        {
            return body;
        }
        at += size;
    }
    panic!("no {handler:?} track");
}

#[test]
fn an_m4b_holds_what_ffmpegs_muxer_writes_from_the_same_packets() {
    let (_dir, ours) = temp("ours.m4b");
    let theirs = ours.with_file_name("theirs.m4b");
    let pcm = speechlike(RATE as usize * 7 + 333, RATE);
    let seconds = pcm.len() as f64 / f64::from(RATE);
    let meta = meta(seconds);
    let mut w = AudioWriter::create(&ours, AudioFormat::M4b, RATE, &meta, false, 1).unwrap();
    for part in pcm.chunks(7_919) {
        w.push(part).unwrap();
    }
    w.finish().unwrap();
    reference(&theirs, &pcm, &meta);

    assert_eq!(top_level_atoms(&ours), ["ftyp", "moov", "mdat"]);
    same(&packets(&ours), &packets(&theirs), "audio packets");
    same(&decode(&ours), &decode(&theirs), "decoded audio");
    let (a, b) = (ffprobe(&ours, &[]), ffprobe(&theirs, &[]));
    assert_eq!(a["chapters"], b["chapters"]);
    let titles: Vec<_> = a["chapters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tags"]["title"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(titles, ["Opening", "The \u{2014} Middle"]);
    let (tags, their_tags) = (&a["format"]["tags"], &b["format"]["tags"]);
    for key in [
        "major_brand",
        "title",
        "artist",
        "album_artist",
        "album",
        "genre",
        "track",
    ] {
        assert_eq!(tags[key], their_tags[key], "{key}");
    }
    assert_eq!(tags["track"], "2/7");
    assert_eq!(tags["media_type"], "2", "an audiobook for Apple's players");
    assert_eq!(
        tags["encoder"],
        concat!("talker ", env!("CARGO_PKG_VERSION"))
    );
    let duration = |p: &serde_json::Value| num(&stream(p, "audio")["duration"]);
    assert!((duration(&a) - seconds).abs() < 0.001, "{}", duration(&a));
    assert!((duration(&a) - duration(&b)).abs() < 0.001);
    let pic = |p: &serde_json::Value| {
        let s = stream(p, "video");
        (
            s["codec_name"].clone(),
            s["disposition"]["attached_pic"].clone(),
        )
    };
    assert_eq!(pic(&a), pic(&b));
    assert_eq!(pic(&a).1, 1);

    // The boxes that no reader above shows whole: each byte for byte as FFmpeg's.
    let (ours, theirs) = (
        std::fs::read(&ours).unwrap(),
        std::fs::read(&theirs).unwrap(),
    );
    let udta = |d: &[u8]| find_box(d, &[b"moov", b"udta", b"chpl"]).map(<[u8]>::to_vec);
    assert_eq!(udta(&ours), udta(&theirs), "chpl");
    let covr =
        |d: &[u8]| find_box(d, &[b"moov", b"udta", b"meta", b"ilst", b"covr"]).map(<[u8]>::to_vec);
    assert_eq!(covr(&ours), covr(&theirs), "covr");
    // The audio track names the chapter track (FFmpeg numbers the cover as a track too).
    let chapter_id = |d: &[u8]| find_box(trak(d, b"text"), &[b"tkhd"]).map(|t| t[12..16].to_vec());
    let named = |d: &[u8]| find_box(trak(d, b"soun"), &[b"tref", b"chap"]).map(<[u8]>::to_vec);
    assert_eq!(named(&ours), chapter_id(&ours), "tref/chap");
    assert_eq!(named(&theirs), chapter_id(&theirs), "FFmpeg's tref/chap");
    for handler in [b"soun", b"text"] {
        let (x, y) = (trak(&ours, handler), trak(&theirs, handler));
        for table in [b"stts", b"stsz", b"sgpd", b"sbgp"] {
            let at = [b"mdia", b"minf", b"stbl", table];
            let (p, q) = (find_box(x, &at), find_box(y, &at));
            assert_eq!(
                p,
                q,
                "{} of the {} track",
                String::from_utf8_lossy(table),
                String::from_utf8_lossy(handler)
            );
        }
        assert_eq!(
            find_box(x, &[b"mdia", b"minf", b"stbl", b"stsd"]).map(|d| d.len()),
            find_box(y, &[b"mdia", b"minf", b"stbl", b"stsd"]).map(|d| d.len()),
            "sample description"
        );
    }
    // The decoder's configuration and bit rates; the sample entry around it says one channel
    // where FFmpeg's says the template's two.
    let esds = |d: &[u8]| {
        let stsd = find_box(trak(d, b"soun"), &[b"mdia", b"minf", b"stbl", b"stsd"]).unwrap();
        let at = stsd.windows(4).position(|w| w == b"esds").expect("esds") - 4;
        let size = u32::from_be_bytes(stsd[at..at + 4].try_into().unwrap()) as usize;
        stsd[at..at + size].to_vec()
    };
    assert_eq!(esds(&ours), esds(&theirs), "esds");
}

#[test]
fn an_m4a_without_chapters_or_audio_is_still_a_whole_file() {
    let (_dir, path) = temp("empty.m4a");
    let w = AudioWriter::create(
        &path,
        AudioFormat::M4a,
        RATE,
        &AudioMeta::default(),
        false,
        3,
    )
    .unwrap();
    w.finish().unwrap();
    assert_eq!(top_level_atoms(&path), ["ftyp", "moov", "mdat"]);
    let p = ffprobe(&path, &[]);
    assert_eq!(p["format"]["tags"]["major_brand"], "M4A ");
    assert!(p["chapters"].as_array().unwrap().is_empty());
    assert!(p["format"]["tags"].get("media_type").is_none());
    assert_eq!(stream(&p, "audio")["codec_name"], "aac");
}

/// The chapter track covers the file from its start (Apple's players know no gap there), so its
/// first chapter takes in the audio before it, as FFmpeg's does; `chpl` keeps the real start.
#[test]
fn a_first_chapter_after_the_start_is_where_ffmpeg_puts_it() {
    let (_dir, ours) = temp("late.m4a");
    let theirs = ours.with_file_name("theirs.m4a");
    let pcm = speechlike(RATE as usize * 6, RATE);
    let chapter = |title: &str, start: f64, end: f64| Chapter {
        title: title.into(),
        start,
        end,
    };
    let meta = AudioMeta {
        chapters: vec![chapter("Late", 1.5, 4.0), chapter("Later", 4.0, 6.0)],
        ..meta(6.0)
    };
    let mut w = AudioWriter::create(&ours, AudioFormat::M4a, RATE, &meta, false, 2).unwrap();
    w.push(&pcm).unwrap();
    w.finish().unwrap();
    reference(&theirs, &pcm, &meta);
    let (a, b) = (ffprobe(&ours, &[]), ffprobe(&theirs, &[]));
    let times = |p: &serde_json::Value| -> Vec<(f64, f64)> {
        p["chapters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (num(&c["start_time"]), num(&c["end_time"])))
            .collect()
    };
    assert_eq!(times(&a), [(0.0, 4.0), (4.0, 6.0)]);
    assert_eq!(times(&a), times(&b));
    let (ours, theirs) = (
        std::fs::read(&ours).unwrap(),
        std::fs::read(&theirs).unwrap(),
    );
    let chpl = |d: &[u8]| find_box(d, &[b"moov", b"udta", b"chpl"]).map(<[u8]>::to_vec);
    assert_eq!(chpl(&ours), chpl(&theirs));
    let first = chpl(&ours).unwrap()[9..17].to_vec();
    assert_eq!(
        u64::from_be_bytes(first.try_into().unwrap()),
        15_000_000,
        "1.5 s in chpl"
    );
    let stts = |d: &[u8]| {
        find_box(trak(d, b"text"), &[b"mdia", b"minf", b"stbl", b"stts"]).map(<[u8]>::to_vec)
    };
    assert_eq!(stts(&ours), stts(&theirs));
}
