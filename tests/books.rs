//! Books in (EPUB 2/3, Markdown, text), lexicon, audio-only outputs and subtitle sidecars, through
//! the real binary on files the tests build themselves.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

use talker::lexicon::Lexicon;
use talker::phonemize::Phonemizer;
use talker::tts::voice::VoiceConfig;
use zip::write::SimpleFileOptions;

use crate::util::{assert_success, default_voice, duration, listing, probe, repo, talker};

pub(crate) const CONTAINER: &str = r#"<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>"#;

/// Two chapters in two files; chapter 2 is nested under "Part Two" in the table of contents and
/// starts at an element id; one image, one script, a nav document in the spine.
const CH1: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">
<head><title>One</title><style>p { margin: 0 }</style></head>
<body><section><h1>The Storm</h1>
<p>It was a <em>dark</em> night&nbsp;&mdash; the wind rose.</p>
<img src="pic.png" alt="a picture"/>
<script>var x = 1;</script>
<p>Rain fell.</p></section></body></html>"#;

const CH2: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml">
<head><title>Two</title></head>
<body><p>Front words before the part.</p>
<section id="morning"><h2>Morning</h2><p>The sun came out.</p>
<ul><li>Birds sang.</li><li>Dogs barked.</li></ul></section></body></html>"#;

const NAV: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">
<head><title>Contents</title></head><body>
<nav epub:type="toc"><ol>
  <li><a href="ch1.xhtml">Chapter One: The Storm</a></li>
  <li><a href="ch2.xhtml#morning">Part Two</a>
    <ol><li><a href="ch2.xhtml#morning">Morning</a></li></ol></li>
</ol></nav>
<nav epub:type="landmarks"><ol><li><a href="ch2.xhtml">Not a chapter</a></li></ol></nav>
</body></html>"#;

const NCX: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><navMap>
  <navPoint id="n1" playOrder="1"><navLabel><text>NCX One</text></navLabel><content src="ch1.xhtml"/></navPoint>
  <navPoint id="n2" playOrder="2"><navLabel><text>NCX Part</text></navLabel><content src="ch2.xhtml"/>
    <navPoint id="n3" playOrder="3"><navLabel><text>NCX Morning</text></navLabel><content src="ch2.xhtml#morning"/></navPoint>
  </navPoint>
</navMap></ncx>"#;

fn opf(version: &str, with_nav: bool) -> String {
    let nav_item = if with_nav {
        r#"<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>"#
    } else {
        ""
    };
    let nav_ref = if with_nav {
        r#"<itemref idref="nav"/>"#
    } else {
        ""
    };
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="{version}" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:title>A Tiny Book</dc:title><dc:creator>Ada Writer</dc:creator><dc:identifier id="id">x</dc:identifier>
  </metadata>
  <manifest>
    {nav_item}
    <item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
    <item id="c1" href="ch1.xhtml" media-type="application/xhtml+xml"/>
    <item id="c2" href="ch2.xhtml" media-type="application/xhtml+xml"/>
    <item id="pic" href="pic.png" media-type="image/png"/>
  </manifest>
  <spine toc="ncx">{nav_ref}<itemref idref="c1"/><itemref idref="c2"/></spine>
</package>"#
    )
}

/// Writes a ZIP with these entries (the first stored, as EPUB's `mimetype` must be).
pub(crate) fn zip_file(path: &Path, entries: &[(&str, &[u8])]) {
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (i, (name, data)) in entries.iter().enumerate() {
        let method = if i == 0 {
            zip::CompressionMethod::Stored
        } else {
            zip::CompressionMethod::Deflated
        };
        z.start_file(
            *name,
            SimpleFileOptions::default().compression_method(method),
        )
        .unwrap();
        z.write_all(data).unwrap();
    }
    z.finish().unwrap();
}

pub(crate) fn epub(dir: &Path, name: &str, version: &str, with_nav: bool) -> PathBuf {
    let p = dir.join(name);
    let opf = opf(version, with_nav);
    let mut entries: Vec<(&str, &[u8])> = vec![
        ("mimetype", b"application/epub+zip"),
        ("META-INF/container.xml", CONTAINER.as_bytes()),
        ("OEBPS/content.opf", opf.as_bytes()),
        ("OEBPS/toc.ncx", NCX.as_bytes()),
        ("OEBPS/ch1.xhtml", CH1.as_bytes()),
        ("OEBPS/ch2.xhtml", CH2.as_bytes()),
        ("OEBPS/pic.png", b"\x89PNG not really"),
    ];
    if with_nav {
        entries.push(("OEBPS/nav.xhtml", NAV.as_bytes()));
    }
    zip_file(&p, &entries);
    p
}

fn convert(dir: &Path, input: &Path) -> (Output, PathBuf) {
    let out = dir.join(format!(
        "{}.json",
        input.file_name().unwrap().to_string_lossy()
    ));
    let o = talker(dir)
        .args(["script", "convert"])
        .arg(input)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    (o, out)
}

fn converted(dir: &Path, input: &Path) -> serde_json::Value {
    let (o, out) = convert(dir, input);
    assert_success(&o);
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

/// (text, chapter) of every segment.
fn segments(script: &serde_json::Value) -> Vec<(String, Option<String>)> {
    script["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["text"].as_str().unwrap().to_owned(),
                s["chapter"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

fn chapters(s: &[(String, Option<String>)]) -> Vec<&str> {
    s.iter().filter_map(|(_, c)| c.as_deref()).collect()
}

#[test]
fn epub3_nav_gives_segments_chapters_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let book = epub(dir.path(), "book.epub", "3.0", true);
    let (o, out) = convert(dir.path(), &book);
    assert_success(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("skipped 1 images, 1 scripts or styles")
            && stderr.contains("1 spine items that are not prose"),
        "{stderr}"
    );
    let script: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    assert_eq!(script["title"], "A Tiny Book");
    assert_eq!(script["author"], "Ada Writer");
    let s = segments(&script);
    let texts: Vec<&str> = s.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        texts,
        [
            "The Storm",
            "It was a dark night — the wind rose.",
            "Rain fell.",
            "Front words before the part.",
            "Morning",
            "The sun came out.",
            "Birds sang.",
            "Dogs barked.",
        ]
    );
    assert_eq!(s[0].1.as_deref(), Some("Chapter One: The Storm"));
    assert_eq!(s[4].1.as_deref(), Some("Part Two: Morning"));
    assert_eq!(chapters(&s).len(), 2);
}

#[test]
fn epub2_ncx_gives_nested_chapters() {
    let dir = tempfile::tempdir().unwrap();
    let book = epub(dir.path(), "old.epub", "2.0", false);
    let s = segments(&converted(dir.path(), &book));
    // A nested entry's title carries its parent's.
    assert_eq!(
        chapters(&s),
        ["NCX One", "NCX Part", "NCX Part: NCX Morning"]
    );
    assert_eq!(
        s[3],
        (
            "Front words before the part.".into(),
            Some("NCX Part".into())
        )
    );
    assert_eq!(
        s[4],
        ("Morning".into(), Some("NCX Part: NCX Morning".into()))
    );
}

#[test]
fn markdown_and_text_convert() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("notes.md");
    std::fs::write(
        &md,
        "Intro\n=====\n\nSome *emphasis* and a [link](http://a.example).\n\n## Part B\n\n\
1. one item\n2. two item\n\n```\ncode()\n```\n\n<p>html</p>\n\n#### Deep heading\n\nEnd.\n",
    )
    .unwrap();
    let (o, out) = convert(dir.path(), &md);
    assert_success(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("line 11: code block skipped") && stderr.contains("line 15: HTML block"),
        "{stderr}"
    );
    // Nothing a user owns is overwritten: a second convert needs --force.
    let (again, _) = convert(dir.path(), &md);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    let s = segments(&serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap());
    assert_eq!(chapters(&s), ["Intro", "Part B"]);
    let texts: Vec<&str> = s.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        texts,
        [
            "Intro",
            "Some emphasis and a link.",
            "Part B",
            "one item",
            "two item",
            "Deep heading",
            "End."
        ]
    );

    let txt = dir.path().join("story.txt");
    std::fs::write(
        &txt,
        "\u{feff}Opening words.\r\n\r\nCHAPTER XII\r\nIt rained\r\nall day.\r\n\r\nChapter 13: Sun\r\n\r\nIt shone.\r\n",
    )
    .unwrap();
    let s = segments(&converted(dir.path(), &txt));
    assert_eq!(
        s,
        [
            ("Opening words.".into(), None),
            ("CHAPTER XII".into(), Some("CHAPTER XII".into())),
            ("It rained all day.".into(), None),
            ("Chapter 13: Sun".into(), Some("Chapter 13: Sun".into())),
            ("It shone.".into(), None),
        ]
    );
}

/// Every bad input: exit 2, the file and the place named, nothing written.
#[test]
fn bad_books_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let opf3 = opf("3.0", false);
    let missing_item = opf3.replace(r#"<itemref idref="c2"/>"#, r#"<itemref idref="ghost"/>"#);
    let missing_file = opf3.replace("ch2.xhtml", "gone.xhtml");
    let drm = r#"<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" xmlns:enc="http://www.w3.org/2001/04/xmlenc#">
<enc:EncryptedData><enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>
<enc:CipherData><enc:CipherReference URI="OEBPS/ch1.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>"#;
    let base = |opf: &str, extra: Option<(&str, &str)>| {
        let mut v: Vec<(String, Vec<u8>)> = vec![
            ("mimetype".into(), b"application/epub+zip".to_vec()),
            ("META-INF/container.xml".into(), CONTAINER.into()),
            ("OEBPS/content.opf".into(), opf.into()),
            ("OEBPS/ch1.xhtml".into(), CH1.into()),
            ("OEBPS/ch2.xhtml".into(), CH2.into()),
        ];
        if let Some((n, t)) = extra {
            v.push((n.into(), t.into()));
        }
        v
    };
    let write = |name: &str, entries: Vec<(String, Vec<u8>)>| {
        let p = d.join(name);
        let refs: Vec<(&str, &[u8])> = entries
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        zip_file(&p, &refs);
        p
    };
    let corrupt = d.join("corrupt.epub");
    let good = std::fs::read(epub(d, "good.epub", "3.0", true)).unwrap();
    std::fs::write(&corrupt, &good[..good.len() / 2]).unwrap();
    let mut no_container = base(&opf3, None);
    no_container.remove(1);
    let cases: Vec<(PathBuf, &str)> = vec![
        (corrupt, "corrupt ZIP"),
        (
            write("nocontainer.epub", no_container),
            "META-INF/container.xml: is missing",
        ),
        (
            write("noitem.epub", base(&missing_item, None)),
            "idref \"ghost\"",
        ),
        (
            write("nofile.epub", base(&missing_file, None)),
            "OEBPS/gone.xhtml: is in the spine",
        ),
        (
            write(
                "drm.epub",
                base(&opf3, Some(("META-INF/encryption.xml", drm))),
            ),
            "DRM",
        ),
    ];
    let md = d.join("code.md");
    std::fs::write(&md, "```\nonly code\n```\n\n<div>html</div>\n").unwrap();
    let latin1 = d.join("latin1.txt");
    std::fs::write(&latin1, b"fine line\ncaf\xe9 au lait\n").unwrap();
    let mut cases = cases;
    cases.push((PathBuf::from("/dev/zero"), "not a regular file"));
    cases.push((md, "nothing to speak"));
    cases.push((latin1, "line 2 (byte 13): is not UTF-8"));
    for (input, expect) in cases {
        let before = listing(d);
        let (o, out) = convert(d, &input);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {stderr}", input.display());
        assert!(
            stderr.contains(&input.display().to_string()) && stderr.contains(expect),
            "{}: expected {expect:?} in {stderr}",
            input.display()
        );
        assert!(!out.exists());
        let m4b = d.join("x.m4b");
        let o = talker(d)
            .args(["render", "-o"])
            .arg(&m4b)
            .arg(&input)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", input.display());
        assert_eq!(listing(d), before, "{}", input.display());
    }
}

fn render(dir: &Path, input: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let o = talker(dir)
        .args(["render", "--json", "--deterministic", "-o"])
        .arg(out)
        .arg(input)
        .args(extra)
        .output()
        .unwrap();
    assert_success(&o);
    serde_json::from_slice(&o.stdout).expect("the report is JSON")
}

fn chapter_list(p: &serde_json::Value) -> Vec<(String, f64, f64)> {
    p["chapters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["tags"]["title"].as_str().unwrap().to_owned(),
                c["start_time"].as_str().unwrap().parse().unwrap(),
                c["end_time"].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// Chapters start at 0, follow each other without gap and end with the audio.
fn check_times(ch: &[(String, f64, f64)], duration: f64) {
    assert!(ch[0].1.abs() < 0.01, "{ch:?}");
    for w in ch.windows(2) {
        assert!(
            (w[0].2 - w[1].1).abs() < 0.01 && w[1].1 > w[0].1 + 0.3,
            "{ch:?}"
        );
    }
    assert!(
        (ch.last().unwrap().2 - duration).abs() < 0.1,
        "{ch:?} vs {duration}"
    );
}

#[test]
fn epub_to_m4b_with_chapters_metadata_and_vtt() {
    let dir = tempfile::tempdir().unwrap();
    let book = epub(dir.path(), "book.epub", "3.0", true);
    let out = dir.path().join("book.m4b");
    let report = render(dir.path(), &book, &out, &["--subtitles", "vtt"]);
    assert_eq!(report["frames"], 0);
    let p = probe(&out);
    // One AAC track and the chapters' text track; no video.
    let kinds: Vec<&str> = p["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["codec_type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["audio", "data"]);
    assert_eq!(p["streams"][0]["codec_name"], "aac");
    assert_eq!(p["format"]["tags"]["title"], "A Tiny Book");
    assert_eq!(p["format"]["tags"]["artist"], "Ada Writer");
    assert_eq!(p["format"]["tags"]["major_brand"], "M4B ");
    let ch = chapter_list(&p);
    let titles: Vec<&str> = ch.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(titles, ["Chapter One: The Storm", "Part Two: Morning"]);
    let duration: f64 = p["format"]["duration"].as_str().unwrap().parse().unwrap();
    check_times(&ch, duration);

    let vtt = std::fs::read_to_string(dir.path().join("book.vtt")).unwrap();
    assert!(vtt.starts_with("WEBVTT"));
    assert_eq!(
        vtt.matches(" --> ").count(),
        8,
        "one cue per sentence: {vtt}"
    );
    // The second chapter starts at the cue of its first sentence ("Morning").
    let morning = vtt
        .split("\n\n")
        .find(|c| c.ends_with("\nMorning"))
        .expect("a Morning cue");
    let start = morning
        .lines()
        .nth(1)
        .unwrap()
        .split(" --> ")
        .next()
        .unwrap();
    let secs = |t: &str| -> f64 {
        let p: Vec<f64> = t.split(':').map(|x| x.parse().unwrap()).collect();
        p[0] * 3600.0 + p[1] * 60.0 + p[2]
    };
    assert!(
        secs(start) >= ch[1].1 && secs(start) - ch[1].1 < 0.5,
        "{start} vs {ch:?}"
    );
}

/// Long enough (about 40 s) that an M4B's AAC is encoded in several pieces on two threads: the
/// file is the same run to run, and as long, with the same chapters, as on one thread or with two
/// voice sessions.
#[test]
fn a_book_encoded_in_pieces_is_reproducible_and_timed_as_on_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let md = d.join("book.md");
    let para = |from: usize| -> String {
        let places = ["harbour", "bridge", "garden", "station"];
        (from..from + 4)
            .map(|i| {
                format!(
                    "The river carried boat number {i} past the quiet {} while everyone slept. ",
                    places[i % 4]
                )
            })
            .collect()
    };
    std::fs::write(
        &md,
        format!("# One\n\n{}\n\n# Two\n\n{}\n", para(1), para(5)),
    )
    .unwrap();
    let (a, b, one) = (d.join("a.m4b"), d.join("b.m4b"), d.join("one.m4b"));
    render(d, &md, &a, &["--threads", "2"]);
    render(d, &md, &b, &["--threads", "2"]);
    render(d, &md, &one, &["--threads", "1"]);
    assert!(
        std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
        "two deterministic renders differ"
    );
    let (pa, p1) = (probe(&a), probe(&one));
    let seconds: f64 = pa["format"]["duration"].as_str().unwrap().parse().unwrap();
    assert!(seconds > 25.0, "too short for several pieces: {seconds} s");
    assert_eq!(pa["format"]["duration"], p1["format"]["duration"]);
    assert_eq!(
        pa["streams"][0]["duration_ts"],
        p1["streams"][0]["duration_ts"]
    );
    assert_eq!(chapter_list(&pa), chapter_list(&p1));
    // Two voice sessions speaking at once (no cache: both speak) time the book the same.
    let lanes = d.join("lanes.m4b");
    let report = render(
        d,
        &md,
        &lanes,
        &["--threads", "2", "--speech-lanes", "2", "--no-cache"],
    );
    assert!(report["speech"]["synthesized"].as_u64().unwrap() > 0);
    let pl = probe(&lanes);
    assert_eq!(pl["format"]["duration"], p1["format"]["duration"]);
    assert_eq!(chapter_list(&pl), chapter_list(&p1));
}

/// A render of one book on the CPU lets its voice go once pass 1 has all the speech (pass 2 reads
/// it back from the cache), and the book is whole; a render to MP4 keeps it to the end.
#[test]
fn an_audio_render_unloads_its_voice_before_its_second_pass() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let md = d.join("short.md");
    std::fs::write(
        &md,
        "# One\n\nA short book, spoken once and then read back.\n",
    )
    .unwrap();
    let logged = |out: &Path, extra: &[&str]| {
        let o = talker(d)
            .args(["-v", "render", "--backend", "cpu", "-o"])
            .arg(out)
            .arg(&md)
            .args(extra)
            .output()
            .unwrap();
        assert_success(&o);
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let m4b = d.join("short.m4b");
    let log = logged(&m4b, &["--no-cache"]);
    assert!(log.contains("voices unloaded at rest"), "{log}");
    let seconds = duration(&m4b);
    assert!(seconds > 1.0, "{seconds} s");
    let mp4 = d.join("short.mp4");
    let log = logged(&mp4, &[repo("examples/portrait.png").to_str().unwrap()]);
    assert!(!log.contains("voices unloaded at rest"), "{log}");
}

#[test]
fn markdown_to_mp4_chapters_and_srt() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("talk.md");
    std::fs::write(
        &md,
        "# Hello\n\nOne line.\n\n## Second\n\nTwo lines here.\n",
    )
    .unwrap();
    let out = dir.path().join("talk.mp4");
    render(
        dir.path(),
        &md,
        &out,
        &[
            repo("examples/portrait.png").to_str().unwrap(),
            "--framing",
            "head",
            "--size",
            "128x128",
            "--fps",
            "10",
            "--subtitles",
            "srt",
        ],
    );
    let p = probe(&out);
    let ch = chapter_list(&p);
    let titles: Vec<&str> = ch.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(titles, ["Hello", "Second"]);
    let duration: f64 = p["format"]["duration"].as_str().unwrap().parse().unwrap();
    check_times(&ch, duration);
    let srt = std::fs::read_to_string(dir.path().join("talk.srt")).unwrap();
    assert_eq!(srt.matches(" --> ").count(), 4, "{srt}");
    // The converted JSON gives the same MP4, rendered afresh in a cache of its own.
    let (_, json) = convert(dir.path(), &md);
    let again = dir.path().join("again.mp4");
    let fresh = dir.path().join("fresh-cache");
    let report = render(
        dir.path(),
        &json,
        &again,
        &[
            repo("examples/portrait.png").to_str().unwrap(),
            "--framing",
            "head",
            "--size",
            "128x128",
            "--fps",
            "10",
            "--cache",
            fresh.to_str().unwrap(),
        ],
    );
    assert_eq!(report["chunks_reused"], 0, "a render of its own");
    assert!(
        std::fs::read(&out).unwrap() == std::fs::read(&again).unwrap(),
        "the converted script renders a different MP4"
    );
}

#[test]
fn converted_json_renders_the_same_audio_and_wav_is_pcm16() {
    let dir = tempfile::tempdir().unwrap();
    let txt = dir.path().join("story.txt");
    std::fs::write(&txt, "Chapter 1\n\nA short story.\n").unwrap();
    let (a, b) = (dir.path().join("a.m4a"), dir.path().join("b.m4a"));
    render(dir.path(), &txt, &a, &[]);
    let (_, json) = convert(dir.path(), &txt);
    let report = render(dir.path(), &json, &b, &[]);
    assert_eq!(
        report["speech"]["synthesized"], 0,
        "all from the phrase cache"
    );
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let wav = dir.path().join("story.wav");
    render(dir.path(), &json, &wav, &[]);
    let s = &probe(&wav)["streams"][0];
    assert_eq!(s["codec_name"], "pcm_s16le");
    assert_eq!(s["sample_rate"], "22050");
    // --format forces the kind whatever the extension.
    let forced = dir.path().join("forced.bin");
    render(dir.path(), &json, &forced, &["--format", "wav"]);
    assert_eq!(&std::fs::read(&forced).unwrap()[..4], b"RIFF");
}

#[test]
fn lexicon_changes_only_the_words_it_names() {
    let voice = VoiceConfig::load(&default_voice().config).unwrap();
    let p = Phonemizer::global().unwrap();
    let sentence = "We met Nguyen at noon, then Siobhan came.";
    let words = |lex: Option<&Lexicon>| {
        let pieces = match lex {
            Some(l) => l.apply(sentence),
            None => vec![talker::lexicon::Piece::Text(sentence.into())],
        };
        let ph = p.phonemize_pieces(&voice.espeak_voice, &pieces).unwrap();
        assert_eq!(ph.len(), 1);
        let ids = voice.ids(&ph[0]).0;
        let text: String = ph[0].concat();
        (text.split(' ').map(str::to_owned).collect::<Vec<_>>(), ids)
    };
    let lex = Lexicon::from_json(
        &serde_json::json!({"nguyen": {"ipa": "wˈɪn"}, "Siobhan": "shivawn"}),
        Path::new("l.json"),
        "",
    )
    .unwrap();
    let (plain, plain_ids) = words(None);
    let (with, with_ids) = words(Some(&lex));
    assert_eq!(plain.len(), with.len(), "{plain:?} {with:?}");
    for (i, (a, b)) in plain.iter().zip(&with).enumerate() {
        if i == 2 || i == 6 {
            assert_ne!(a, b, "word {i} should change: {plain:?} {with:?}");
        } else {
            assert_eq!(a, b, "word {i} should not change: {plain:?} {with:?}");
        }
    }
    use unicode_normalization::UnicodeNormalization;
    assert_eq!(with[2], "wˈɪn".nfd().collect::<String>());
    assert_ne!(plain_ids, with_ids);
    assert!(with_ids.iter().all(|&id| id >= 0));
}

#[test]
fn one_lexicon_entry_resynthesises_only_its_sentence_and_bad_ipa_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let script = d.join("s.json");
    std::fs::write(
        &script,
        r#"{"lexicon": {"Nguyen": "win"}, "segments": [{"text": "Hello Nguyen."}, {"text": "Siobhan waved."}, {"text": "Nothing here."}]}"#,
    )
    .unwrap();
    let lex = d.join("names.json");
    std::fs::write(&lex, r#"{"Siobhan": "shivawn"}"#).unwrap();
    let out = d.join("s.wav");
    let lexicon = lex.to_str().unwrap();
    let r = render(d, &script, &out, &["--lexicon", lexicon]);
    assert_eq!(r["speech"]["synthesized"], 3);
    std::fs::write(&lex, r#"{"Siobhan": {"ipa": "ʃɪvˈɔːn"}}"#).unwrap();
    let r = render(d, &script, &out, &["--lexicon", lexicon]);
    assert_eq!(r["speech"]["synthesized"], 1, "only the Siobhan sentence");
    assert_eq!(r["phrase_hits"], 2);
    // A later lexicon wins over the script's: "Nguyen" changes, one sentence again.
    let later = d.join("later.json");
    std::fs::write(&later, r#"{"Nguyen": "nuh win"}"#).unwrap();
    let r = render(
        d,
        &script,
        &out,
        &["--lexicon", lexicon, "--lexicon", later.to_str().unwrap()],
    );
    assert_eq!(r["speech"]["synthesized"], 1);

    std::fs::write(&lex, r#"{"Siobhan": {"ipa": "ʃɪv☃n"}}"#).unwrap();
    std::fs::remove_file(&out).unwrap();
    let before = listing(d);
    let o = talker(d)
        .args(["render", "-o"])
        .arg(&out)
        .arg(&script)
        .args(["--lexicon", lexicon])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("names.json")
            && stderr.contains("lexicon entry \"Siobhan\"")
            && stderr.contains("'☃'"),
        "{stderr}"
    );
    assert_eq!(listing(d), before);
}

#[test]
fn video_without_portrait_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("t.md");
    std::fs::write(&md, "Hello.\n").unwrap();
    let o = talker(dir.path())
        .args(["render", "-o"])
        .arg(dir.path().join("t.mp4"))
        .arg(&md)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs a portrait"));
}

/// The lexicon reaches both halves of a sentence split for length, and the phrase keys of the
/// sentences without its words stay as they were.
#[test]
fn lexicon_applies_inside_split_sentences_and_keys_only_what_it_changes() {
    use talker::plan::{Plan, SpeechIdentity};
    use talker::script::Script;
    let voice = VoiceConfig::load(&default_voice().config).unwrap();
    let id = SpeechIdentity {
        voice_hash: [1; 32],
        scales: voice.defaults,
        speaker: 0,
        engine: "test".into(),
    };
    let long = "Nguyen walked along the harbour wall for an hour, counting the boats, the gulls, \
the nets and the ropes, until at last he met Nguyen.";
    let script = |lexicon: &str| {
        Script::parse(&format!(
            r#"{{{lexicon}"segments": [{{"text": "{long}"}}, {{"text": "Nothing to change here."}}]}}"#
        ))
        .unwrap()
    };
    let p = Phonemizer::global().unwrap();
    let clock = talker::progress::Clock::default();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let plain = Plan::build(&script(""), &voice, &id, &p, &clock, &stop).unwrap();
    let lexed = Plan::build(
        &script(r#""lexicon": {"nguyen": {"ipa": "wˈɪn"}}, "#),
        &voice,
        &id,
        &p,
        &clock,
        &stop,
    )
    .unwrap();
    assert!(plain.sentences.len() >= 3, "the long sentence is split");
    assert_eq!(plain.sentences.len(), lexed.sentences.len());
    let word = voice.ids(&["w", "ˈ", "ɪ", "n"].map(String::from)).0;
    let word = &word[2..word.len() - 1]; // without BOS, its pad and EOS
    let contains = |ids: &[i64]| ids.windows(word.len()).any(|w| w == word);
    let n = plain.utterances.len();
    let last = n - 1;
    for (u, (a, b)) in plain.utterances.iter().zip(&lexed.utterances).enumerate() {
        let first_or_last_piece = u == 0 || u == last - 1;
        if first_or_last_piece {
            assert!(contains(&b.ids) && !contains(&a.ids), "utterance {u}");
            assert_ne!(a.key, b.key, "utterance {u}");
        } else {
            assert_eq!(a.ids, b.ids, "utterance {u}");
            assert_eq!(a.key, b.key, "utterance {u} must keep its cache key");
        }
    }
}

#[test]
fn epub_without_a_table_of_contents_takes_chapters_from_headings() {
    let dir = tempfile::tempdir().unwrap();
    let opf = opf("3.0", false)
        .replace(
            r#"<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>"#,
            "",
        )
        .replace(r#" toc="ncx""#, "");
    let book = dir.path().join("plain.epub");
    zip_file(
        &book,
        &[
            ("mimetype", b"application/epub+zip"),
            ("META-INF/container.xml", CONTAINER.as_bytes()),
            ("OEBPS/content.opf", opf.as_bytes()),
            ("OEBPS/ch1.xhtml", CH1.as_bytes()),
            ("OEBPS/ch2.xhtml", CH2.as_bytes()),
        ],
    );
    let s = segments(&converted(dir.path(), &book));
    assert_eq!(chapters(&s), ["The Storm", "Morning"]);
    assert_eq!(s[0].0, "The Storm");
}

/// A 100 000-entry lexicon (and a second that replaces half of it) loads in one pass: each entry
/// used to be compared with every earlier one, minutes for this size. A lexicon file that names a
/// word twice is refused, naming the word.
#[test]
fn a_large_lexicon_loads_and_a_repeated_word_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = d.join("b.txt");
    std::fs::write(&book, "Word7 and word99999 are here.\n").unwrap();
    let entries = |n: usize, step: usize, say: &str| {
        let body: Vec<String> = (0..n)
            .step_by(step)
            .map(|i| format!("\"word{i}\": \"{say} {i}\""))
            .collect();
        format!("{{{}}}", body.join(",\n"))
    };
    let big = d.join("big.json");
    std::fs::write(&big, entries(100_000, 1, "first")).unwrap();
    let half = d.join("half.json");
    std::fs::write(&half, entries(100_000, 2, "later")).unwrap();
    let out = d.join("b.json");
    let o = talker(d)
        .args(["script", "convert"])
        .arg(&book)
        .arg("-o")
        .arg(&out)
        .arg("--lexicon")
        .arg(&big)
        .arg("--lexicon")
        .arg(&half)
        .output()
        .unwrap();
    assert_success(&o);
    let script: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let lexicon = script["lexicon"].as_object().unwrap();
    assert_eq!(lexicon.len(), 100_000);
    assert_eq!(lexicon["word7"], "first 7");
    assert_eq!(lexicon["word8"], "later 8");

    let twice = d.join("twice.json");
    std::fs::write(&twice, "{\"Nguyen\": \"win\",\n \"Nguyen\": \"nuh win\"}").unwrap();
    let o = talker(d)
        .args(["script", "convert", "--force"])
        .arg(&book)
        .arg("-o")
        .arg(&out)
        .arg("--lexicon")
        .arg(&twice)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("twice.json: Nguyen: is given twice (the second at line 2"),
        "{err}"
    );
}

/// A story collection marked up as Standard Ebooks mark theirs (EPUB 3 semantics, our own short
/// text): title page, imprint, two stories (the first in parts headed by Roman ordinals), a
/// chapter "XIV", endnotes, colophon and copyright page.
mod se {
    pub const HEAD: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" epub:prefix="z3998: http://www.daisy.org/z3998/2012/vocab/structure/, se: https://standardebooks.org/vocab/1.0" xml:lang="en-GB">
	<head>
		<title>Part</title>
		<link href="../css/core.css" rel="stylesheet" type="text/css"/>
	</head>
"#;

    pub const TITLEPAGE: &str = r#"	<body epub:type="frontmatter">
		<section id="titlepage" epub:type="titlepage">
			<h1 epub:type="title">Tales of the Harbour</h1>
			<p>By <b epub:type="z3998:personal-name z3998:author">Ada Writer</b>.</p>
			<img alt="" src="../images/titlepage.svg" epub:type="se:image.color-depth.black-on-transparent"/>
		</section>
	</body>
</html>"#;

    pub const IMPRINT: &str = r#"	<body epub:type="frontmatter">
		<section id="imprint" epub:type="imprint">
			<header>
				<h2 epub:type="title">Imprint</h2>
			</header>
			<p>This ebook was made by volunteers of a harbour press.</p>
		</section>
	</body>
</html>"#;

    /// Word joiners around em dashes, a no-break space after titles, a soft hyphen, small caps,
    /// `<abbr>`, period money and a year, a note reference.
    pub const STORY1: &str = "	<body epub:type=\"bodymatter z3998:fiction\">
		<article id=\"the-lamp\" epub:type=\"se:short-story\">
			<h2 epub:type=\"title\">The Lamp at the Quay</h2>
			<section id=\"the-lamp-1\" epub:type=\"chapter\">
				<h3 epub:type=\"ordinal z3998:roman\">I</h3>
				<p>It was <abbr epub:type=\"z3998:name-title\">Mr.</abbr>\u{a0}Pell\u{2060}\u{2014}the lamp\u{2060}\u{2014}keeper who paid \u{a3}1000 in <time datetime=\"1888\">1888</time> for the light at <abbr>St.</abbr>\u{a0}Anne\u{2019}s, a non\u{ad}descript tower.<a href=\"endnotes.xhtml#note-1\" id=\"noteref-1\" epub:type=\"noteref\">1</a></p>
				<p>He read it in <span class=\"small-caps\">The Harbour Gazette</span>.</p>
			</section>
			<section id=\"the-lamp-2\" epub:type=\"chapter\">
				<h3 epub:type=\"ordinal z3998:roman\">II</h3>
				<p>The light burned all winter.</p>
			</section>
		</article>
	</body>
</html>";

    pub const STORY2: &str = r#"	<body epub:type="bodymatter z3998:fiction">
		<section id="chapter-14" epub:type="chapter">
			<h2 epub:type="title"><span epub:type="label">Chapter</span> <span epub:type="ordinal z3998:roman">XIV</span></h2>
			<p>The boats came home.</p>
		</section>
	</body>
</html>"#;

    pub const ENDNOTES: &str = r#"	<body epub:type="backmatter z3998:fiction">
		<section id="endnotes" epub:type="endnotes">
			<h2 epub:type="title">Endnotes</h2>
			<ol>
				<li id="note-1" epub:type="endnote">
					<p>A lamp of the old kind. <a href="story1.xhtml#noteref-1" epub:type="backlink">↩</a></p>
				</li>
			</ol>
		</section>
	</body>
</html>"#;

    pub const COLOPHON: &str = r#"	<body epub:type="backmatter">
		<section id="colophon" epub:type="colophon">
			<header>
				<h2 epub:type="title">Colophon</h2>
			</header>
			<p>Set in a harbour typeface.</p>
		</section>
	</body>
</html>"#;

    pub const UNCOPYRIGHT: &str = r#"	<body epub:type="backmatter">
		<section id="uncopyright" epub:type="copyright-page">
			<h2 epub:type="title">Uncopyright</h2>
			<p>This text belongs to everyone.</p>
		</section>
	</body>
</html>"#;

    pub const TOC: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" epub:prefix="z3998: http://www.daisy.org/z3998/2012/vocab/structure/, se: https://standardebooks.org/vocab/1.0" xml:lang="en-GB">
	<head>
		<title>Table of Contents</title>
	</head>
	<body epub:type="frontmatter">
		<nav id="toc" epub:type="toc">
			<h2 epub:type="title">Table of Contents</h2>
			<ol>
				<li>
					<a href="text/titlepage.xhtml">Titlepage</a>
				</li>
				<li>
					<a href="text/imprint.xhtml">Imprint</a>
				</li>
				<li>
					<a href="text/story1.xhtml">The Lamp at the Quay</a>
					<ol>
						<li>
							<a href="text/story1.xhtml#the-lamp-1" epub:type="z3998:roman">I</a>
						</li>
						<li>
							<a href="text/story1.xhtml#the-lamp-2" epub:type="z3998:roman">II</a>
						</li>
					</ol>
				</li>
				<li>
					<a href="text/story2.xhtml">Chapter XIV</a>
				</li>
				<li>
					<a href="text/endnotes.xhtml">Endnotes</a>
				</li>
				<li>
					<a href="text/colophon.xhtml">Colophon</a>
				</li>
				<li>
					<a href="text/uncopyright.xhtml">Uncopyright</a>
				</li>
			</ol>
		</nav>
		<nav id="landmarks" epub:type="landmarks">
			<h2 epub:type="title">Landmarks</h2>
			<ol>
				<li>
					<a href="text/story1.xhtml" epub:type="bodymatter z3998:fiction">Tales of the Harbour</a>
				</li>
				<li>
					<a href="text/endnotes.xhtml" epub:type="backmatter endnotes">Endnotes</a>
				</li>
			</ol>
		</nav>
	</body>
</html>"#;

    pub const FILES: &[&str] = &[
        "titlepage",
        "imprint",
        "story1",
        "story2",
        "endnotes",
        "colophon",
        "uncopyright",
    ];

    pub fn opf() -> String {
        let items: String = FILES
            .iter()
            .map(|f| format!(r#"<item href="text/{f}.xhtml" id="{f}.xhtml" media-type="application/xhtml+xml"/>"#))
            .collect();
        let spine: String = FILES
            .iter()
            .map(|f| format!(r#"<itemref idref="{f}.xhtml"/>"#))
            .collect();
        format!(
            r#"<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://www.idpf.org/2007/opf" dir="ltr" prefix="se: https://standardebooks.org/vocab/1.0" unique-identifier="uid" version="3.0" xml:lang="en-GB">
	<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
		<dc:identifier id="uid">url:https://example.org/tales</dc:identifier>
		<dc:title id="title">Tales of the Harbour</dc:title>
		<dc:creator id="author">Ada Writer</dc:creator>
	</metadata>
	<manifest>
		<item href="toc.xhtml" id="toc.xhtml" media-type="application/xhtml+xml" properties="nav"/>
		<item href="images/titlepage.svg" id="titlepage.svg" media-type="image/svg+xml"/>
		{items}
	</manifest>
	<spine>{spine}</spine>
</package>"#
        )
    }
}

/// The Standard Ebooks-like book as an EPUB (`mimetype` stored first, as `scripts/real-books`
/// zips a real one).
fn se_epub(dir: &Path) -> PathBuf {
    let p = dir.join("tales.epub");
    let opf = se::opf();
    let pages: Vec<(String, String)> = [
        se::TITLEPAGE,
        se::IMPRINT,
        se::STORY1,
        se::STORY2,
        se::ENDNOTES,
        se::COLOPHON,
        se::UNCOPYRIGHT,
    ]
    .iter()
    .zip(se::FILES)
    .map(|(body, f)| {
        (
            format!("epub/text/{f}.xhtml"),
            format!("{}{body}", se::HEAD),
        )
    })
    .collect();
    let container = CONTAINER.replace("OEBPS/content.opf", "epub/content.opf");
    let mut entries: Vec<(&str, &[u8])> = vec![
        ("mimetype", b"application/epub+zip"),
        ("META-INF/container.xml", container.as_bytes()),
        ("epub/content.opf", opf.as_bytes()),
        ("epub/toc.xhtml", se::TOC.as_bytes()),
        (
            "epub/images/titlepage.svg",
            b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
        ),
    ];
    entries.extend(pages.iter().map(|(n, t)| (n.as_str(), t.as_bytes())));
    zip_file(&p, &entries);
    p
}

fn convert_with(dir: &Path, input: &Path, out: &str, args: &[&str]) -> (Output, serde_json::Value) {
    let out = dir.join(out);
    let o = talker(dir)
        .args(["script", "convert"])
        .arg(input)
        .arg("-o")
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    assert_success(&o);
    let script = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    (o, script)
}

/// (text, say) of the segments that have a spoken form of their own.
fn said(script: &serde_json::Value) -> Vec<(String, String)> {
    script["segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            Some((
                s["text"].as_str()?.to_owned(),
                s["say"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

#[test]
fn real_book_markup_leaves_out_imprint_colophon_copyright_and_notes_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let book = se_epub(dir.path());
    let (o, script) = convert_with(dir.path(), &book, "default.json", &[]);
    let s = segments(&script);
    assert_eq!(
        chapters(&s),
        [
            "Tales of the Harbour",
            "The Lamp at the Quay",
            "The Lamp at the Quay: I",
            "The Lamp at the Quay: II",
            "Chapter XIV",
        ]
    );
    let texts: Vec<&str> = s.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(texts[0], "Tales of the Harbour, by Ada Writer");
    let all = texts.join(" | ");
    for gone in [
        "volunteers",
        "typeface",
        "belongs to everyone",
        "old kind",
        "↩",
    ] {
        assert!(!all.contains(gone), "{gone} in {all}");
    }
    // The note reference "1" is not read after "tower.".
    assert!(all.contains("descript tower. |"), "{all}");
    // Headings marked as Roman ordinals are spoken as numbers, shown as printed.
    assert_eq!(
        said(&script),
        [
            ("I".to_owned(), "One".to_owned()),
            ("II".to_owned(), "Two".to_owned()),
            ("Chapter XIV".to_owned(), "Chapter Fourteen".to_owned()),
        ]
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("left out 3 parts a listener would not want read: imprint, colophon, copyright page (--matter all keeps them)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 notes or note sections left out (--notes end reads them at the end); 1 note references not read"),
        "{stderr}"
    );
}

#[test]
fn matter_and_notes_options_choose_what_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let book = se_epub(dir.path());
    let (_, all) = convert_with(
        dir.path(),
        &book,
        "all.json",
        &["--matter", "all", "--notes", "end"],
    );
    let s = segments(&all);
    assert_eq!(
        chapters(&s),
        [
            "Tales of the Harbour",
            "Imprint",
            "The Lamp at the Quay",
            "The Lamp at the Quay: I",
            "The Lamp at the Quay: II",
            "Chapter XIV",
            "Colophon",
            "Uncopyright",
            "Endnotes",
        ]
    );
    let last = &s[s.len() - 1].0;
    assert_eq!(last, "A lamp of the old kind.");

    let (o, body) = convert_with(dir.path(), &book, "body.json", &["--matter", "body"]);
    let s = segments(&body);
    assert_eq!(s[0].0, "The Lamp at the Quay");
    assert_eq!(
        chapters(&s),
        [
            "The Lamp at the Quay",
            "The Lamp at the Quay: I",
            "The Lamp at the Quay: II",
            "Chapter XIV",
        ]
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("left out 4 parts a listener would not want read: title page, imprint, colophon, copyright page (--matter book or all keeps them)"),
        "{stderr}"
    );

    let (_, shallow) = convert_with(dir.path(), &book, "depth1.json", &["--chapter-depth", "1"]);
    assert_eq!(
        chapters(&segments(&shallow)),
        [
            "Tales of the Harbour",
            "The Lamp at the Quay",
            "Chapter XIV"
        ]
    );
}

/// The real book's paragraph as a voice hears it: word joiners, soft hyphens and no-break spaces
/// gone, em dashes a pause, titles and money and years in words, the note reference not read.
#[test]
fn real_book_characters_are_read_as_a_narrator_would() {
    let dir = tempfile::tempdir().unwrap();
    let book = se_epub(dir.path());
    let (_, script) = convert_with(dir.path(), &book, "chars.json", &[]);
    let s = segments(&script);
    let para = &s.iter().find(|(t, _)| t.starts_with("It was")).unwrap().0;
    // Printed as the book prints it (subtitles), but for the note reference; no-break spaces
    // are spaces, as every whitespace run is.
    assert_eq!(
        para,
        "It was Mr. Pell\u{2060}\u{2014}the lamp\u{2060}\u{2014}keeper who paid \u{a3}1000 in 1888 for the light at St. Anne\u{2019}s, a non\u{ad}descript tower."
    );
    let spoken = talker::text::normalize(para);
    assert_eq!(
        spoken,
        "It was Mister Pell, the lamp, keeper who paid one thousand pounds in eighteen eighty-eight for the light at Saint Anne's, a nondescript tower.",
    );
    let small_caps = &s.iter().find(|(t, _)| t.starts_with("He read")).unwrap().0;
    assert_eq!(small_caps, "He read it in The Harbour Gazette.");
}

/// An EPUB 2 book: `<guide>` types leave out the contents and the copyright page; the same book
/// without a guide has nothing left out (titles such as "Copyright" are never guessed at), and
/// its bare "I", "II" headings, in sequence, are spoken as numbers.
#[test]
fn epub2_guide_types_are_left_out_and_a_book_without_semantics_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let page = |body: &str| {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>p</title></head><body>{body}</body></html>"#
        )
    };
    let files = [
        (
            "contents",
            page("<h1>Contents</h1><p>I. The storm. II. The calm.</p>"),
        ),
        (
            "copyright",
            page("<h1>Copyright</h1><p>All rights kept by the author.</p>"),
        ),
        ("one", page("<h2>I</h2><p>The storm came.</p>")),
        ("two", page("<h2>II</h2><p>The storm passed.</p>")),
    ];
    let ncx = r#"<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><navMap>
<navPoint id="a"><navLabel><text>Contents</text></navLabel><content src="contents.xhtml"/></navPoint>
<navPoint id="b"><navLabel><text>Copyright</text></navLabel><content src="copyright.xhtml"/></navPoint>
<navPoint id="c"><navLabel><text>I</text></navLabel><content src="one.xhtml"/></navPoint>
<navPoint id="d"><navLabel><text>II</text></navLabel><content src="two.xhtml"/></navPoint>
</navMap></ncx>"#;
    let build = |name: &str, guide: &str| {
        let items: String = files
            .iter()
            .map(|(f, _)| {
                format!(r#"<item id="{f}" href="{f}.xhtml" media-type="application/xhtml+xml"/>"#)
            })
            .collect();
        let spine: String = files
            .iter()
            .map(|(f, _)| format!(r#"<itemref idref="{f}"/>"#))
            .collect();
        let opf = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="id">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Old Book</dc:title><dc:identifier id="id">x</dc:identifier></metadata>
<manifest><item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>{items}</manifest>
<spine toc="ncx">{spine}</spine>{guide}</package>"#
        );
        let p = dir.path().join(name);
        let mut entries: Vec<(String, Vec<u8>)> = vec![
            ("mimetype".into(), b"application/epub+zip".to_vec()),
            ("META-INF/container.xml".into(), CONTAINER.into()),
            ("OEBPS/content.opf".into(), opf.into_bytes()),
            ("OEBPS/toc.ncx".into(), ncx.into()),
        ];
        entries.extend(
            files
                .iter()
                .map(|(f, t)| (format!("OEBPS/{f}.xhtml"), t.clone().into_bytes())),
        );
        let refs: Vec<(&str, &[u8])> = entries
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        zip_file(&p, &refs);
        p
    };
    let guided = build(
        "guided.epub",
        r#"<guide><reference type="toc" title="Contents" href="contents.xhtml"/>
<reference type="copyright-page" title="Copyright" href="copyright.xhtml"/>
<reference type="text" title="Start" href="one.xhtml"/></guide>"#,
    );
    let (o, script) = convert_with(dir.path(), &guided, "guided.json", &[]);
    let s = segments(&script);
    assert_eq!(chapters(&s), ["I", "II"]);
    assert_eq!(s[0].0, "I");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "left out 2 parts a listener would not want read: table of contents, copyright page"
        ),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        said(&script),
        [
            ("I".to_owned(), "One".to_owned()),
            ("II".to_owned(), "Two".to_owned())
        ]
    );

    let plain = build("plain.epub", "");
    let (o, script) = convert_with(dir.path(), &plain, "plain.json", &["--matter", "body"]);
    let s = segments(&script);
    assert_eq!(chapters(&s), ["Contents", "Copyright", "I", "II"]);
    assert!(s.iter().any(|(t, _)| t == "All rights kept by the author."));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("left out"));
    assert_eq!(said(&script).len(), 2, "{script}");
}

/// `render` reads a book as `script convert` does: the M4B's chapters are the script's.
#[test]
fn render_and_convert_give_the_same_chapters() {
    let dir = tempfile::tempdir().unwrap();
    let book = se_epub(dir.path());
    let (_, script) = convert_with(dir.path(), &book, "tales.json", &["--chapter-depth", "2"]);
    let converted = segments(&script);
    let out = dir.path().join("tales.m4b");
    render(dir.path(), &book, &out, &[]);
    let rendered: Vec<String> = chapter_list(&probe(&out))
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(rendered, chapters(&converted));
    assert_eq!(rendered[2], "The Lamp at the Quay: I");
}

/// Bad values of the book options: exit 2 naming the option, before any work, on both commands.
#[test]
fn bad_book_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let book = se_epub(dir.path());
    let before = listing(dir.path());
    for command in [&["script", "convert"][..], &["render"][..]] {
        for (flag, value) in [
            ("--matter", "front"),
            ("--notes", "footnotes"),
            ("--chapter-depth", "0"),
            ("--chapter-depth", "7"),
            ("--chapter-depth", "two"),
        ] {
            let o = talker(dir.path())
                .args(command)
                .arg(&book)
                .args(["-o", "out.json", flag, value])
                .current_dir(dir.path())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{command:?} {flag} {value}: {stderr}"
            );
            assert!(stderr.contains(flag) && stderr.contains(value), "{stderr}");
        }
    }
    assert_eq!(listing(dir.path()), before);
}

/// A segment's `say` is what the voice speaks (the same phrases, from the cache, as the text
/// "Two") while its `text` is what the subtitles show.
#[test]
fn a_segments_say_is_spoken_and_its_text_shown() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let printed = crate::util::write_script(
        d,
        "printed.json",
        r#"{"segments":[{"text":"II","say":"Two"},{"text":"The end."}]}"#,
    );
    let spoken = crate::util::write_script(
        d,
        "spoken.json",
        r#"{"segments":[{"text":"Two"},{"text":"The end."}]}"#,
    );
    let (a, b) = (d.join("printed.wav"), d.join("spoken.wav"));
    render(d, &printed, &a, &["--subtitles", "srt"]);
    let report = render(d, &spoken, &b, &[]);
    assert_eq!(report["speech"]["synthesized"], 0, "{report}");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let srt = std::fs::read_to_string(d.join("printed.srt")).unwrap();
    assert!(srt.contains("\nII\n") && !srt.contains("Two"), "{srt}");
}

/// `--chapters 2-3` keeps those chapters, numbered as the book counts them, in `script convert`
/// and `render` alike; a list naming no chapter of the book, or a book without chapter marks, is
/// exit 2 before any work.
#[test]
fn chapters_picks_chapters_by_number() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let book = d.join("b.md");
    std::fs::write(
        &book,
        "Preface words.\n\n# One\n\nFirst chapter words.\n\n# Two\n\nSecond chapter words.\n\n# Three\n\nThird chapter words.\n",
    )
    .unwrap();
    let out = d.join("picked.json");
    let o = talker(d)
        .args(["script", "convert", "--chapters", "2-3"])
        .arg(&book)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_success(&o);
    let script: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let s = segments(&script);
    assert_eq!(chapters(&s), ["Two", "Three"]);
    assert_eq!(s.len(), 4, "{s:?}");

    let m4a = d.join("picked.m4a");
    render(d, &book, &m4a, &["--chapters", "1,3"]);
    let titles: Vec<String> = chapter_list(&probe(&m4a))
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(titles, ["One", "Three"]);

    let plain = d.join("plain.txt");
    std::fs::write(&plain, "Just words, no chapters at all.\n").unwrap();
    for (input, list, says) in [
        (&book, "4", "has 3 chapters, and --chapters names chapter 4"),
        (&book, "3-1", "3-1 runs backwards; write 1-3"),
        (&book, "0", "chapters are numbered from 1"),
        (&book, "two", "\"two\" is not a chapter number"),
        (&plain, "1", "has no chapter marks"),
    ] {
        let o = talker(d)
            .args(["render", "--chapters", list, "-o"])
            .arg(d.join("x.m4a"))
            .arg(input)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{list}: {err}");
        assert!(err.contains(says), "{list}: {err}");
        assert!(!d.join("x.m4a").exists());
    }
}
