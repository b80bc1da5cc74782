//! Books and lectures as they come: EPUB 2/3, Markdown and plain text → a [`Script`].
//!
//! The JSON script stays the canonical form: every reader here produces segments (one per
//! paragraph, heading or list item) and chapter starts, and `talker script convert` writes exactly
//! the script that a render of the book would use. Errors are [`ScriptError`]s (exit 2) naming the
//! file and the place (a ZIP entry, a line), raised before any synthesis.
//!
//! Which file is which: a ZIP signature or an `.epub` extension is an EPUB, `.md`/`.markdown`
//! Markdown, `.txt` plain text, anything else a JSON script.

mod epub;
mod markdown;
mod text;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::script::{DEFAULT_PAUSE_MS, Script, ScriptError, Segment};

pub use epub::{read_epub, read_epub_from};
pub use markdown::read_markdown;
pub use text::read_text;

/// Silence after a heading: a little longer than after a paragraph, as a narrator pauses.
pub const HEADING_PAUSE_MS: u32 = 700;
/// Books larger than this (text files, or one EPUB entry decompressed) are refused.
pub const MAX_TEXT_BYTES: u64 = 64 << 20;
/// Chapter titles and the book's title and author are cut to this many characters.
const MAX_TITLE_CHARS: usize = 500;
/// Segments longer than this are cut at sentence ends (the script's own limit is 200 000).
const MAX_SEGMENT_CHARS: usize = 100_000;

/// What a reader found: the book's metadata, its segments and what it left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Book {
    pub title: Option<String>,
    pub author: Option<String>,
    pub segments: Vec<Segment>,
    /// Warnings for the user: skipped code blocks, images, scripts (with where they were).
    pub notes: Vec<String>,
    /// The EPUB's cover image, checked (Markdown and text books have none).
    pub cover: Option<crate::cover::Cover>,
    /// (segment index, level 1–6) of every heading, for [`Book::speak_roman_headings`].
    headings: Vec<(usize, u8)>,
    /// A slide (a Markdown image) waiting for the next segment, which shows it first.
    pub(crate) slide: Option<crate::script::Slide>,
}

/// `--matter`: which front and back matter of a book is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Matter {
    /// Everything the book holds.
    All,
    /// Leave out imprint, colophon, copyright page, index, contents, landmarks, lists of
    /// illustrations or tables, errata, half-title; the title page is announced "Title, by Author".
    #[default]
    Book,
    /// Only the body: also leave out everything marked front or back matter.
    Body,
}

impl Matter {
    /// The names flags and job specs take, in declaration order.
    pub const NAMES: &[&str] = &["all", "book", "body"];
}

/// `--notes`: what becomes of footnotes and endnotes. Note references (the superscript "1")
/// are never read in the running text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum NotesMode {
    /// Leave the notes out.
    #[default]
    Skip,
    /// Read them after the rest of the book, as a chapter named as the book names them
    /// ("Endnotes"), else "Notes".
    End,
}

impl NotesMode {
    /// The names flags and job specs take, in declaration order.
    pub const NAMES: &[&str] = &["skip", "end"];
}

/// Deepest level of a table of contents that `--chapter-depth` accepts.
pub const MAX_CHAPTER_DEPTH: u8 = 6;

/// How a book is read: shared by `talker render` and `talker script convert`, so both give the
/// same script. The markup these rely on is EPUB's (`epub:type`, landmarks, the EPUB 2 guide);
/// a book without it has nothing left out: parts are never guessed by their titles. In a job
/// (serialised flat with the render settings) a field at its default is left out, so jobs queued
/// before these options existed keep their content hashes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[serde(default)]
pub struct BookOptions {
    /// Which front and back matter of an EPUB is read, as the book's own markup names its parts
    /// (a book without such markup is read whole: parts are never guessed by their titles).
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = Matter::Book))]
    #[serde(skip_serializing_if = "is_default")]
    pub matter: Matter,
    /// Footnotes and endnotes of an EPUB (note references, the superscript numbers, are never
    /// read).
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = NotesMode::Skip))]
    #[serde(skip_serializing_if = "is_default")]
    pub notes: NotesMode,
    /// Chapter marks from the first N levels of the table of contents (or of the headings);
    /// a deeper entry's title carries its parents' ("A Scandal in Bohemia: I").
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", default_value_t = 2,
        value_parser = clap::value_parser!(u8).range(1..=i64::from(MAX_CHAPTER_DEPTH))))]
    #[serde(skip_serializing_if = "is_default_depth")]
    pub chapter_depth: u8,
    /// Only these chapters, numbered as the book's chapter marks count them from 1 (`3-5,7`);
    /// JSON scripts count their `chapter` fields. Everything before the first mark is left out.
    #[cfg_attr(feature = "cli", arg(long, value_name = "LIST"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chapters: Option<ChapterSelection>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn is_default_depth(depth: &u8) -> bool {
    *depth == BookOptions::default().chapter_depth
}

impl Default for BookOptions {
    fn default() -> BookOptions {
        BookOptions {
            matter: Matter::Book,
            notes: NotesMode::Skip,
            chapter_depth: 2,
            chapters: None,
        }
    }
}

/// Chapter numbers and ranges, as `--chapters 3-5,7` gives them (inclusive, from 1).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct ChapterSelection(Vec<(u32, u32)>);

impl From<ChapterSelection> for String {
    fn from(list: ChapterSelection) -> String {
        let items: Vec<String> = list
            .0
            .iter()
            .map(|&(a, b)| {
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                }
            })
            .collect();
        items.join(",")
    }
}

impl TryFrom<String> for ChapterSelection {
    type Error = String;

    fn try_from(s: String) -> Result<ChapterSelection, String> {
        s.parse()
    }
}

impl ChapterSelection {
    fn contains(&self, n: u32) -> bool {
        self.0.iter().any(|&(a, b)| (a..=b).contains(&n))
    }

    fn highest(&self) -> u32 {
        self.0.iter().map(|&(_, b)| b).max().unwrap_or(0)
    }
}

impl std::str::FromStr for ChapterSelection {
    type Err = String;

    fn from_str(list: &str) -> Result<ChapterSelection, String> {
        let number = |s: &str| -> Result<u32, String> {
            match s.trim().parse::<u32>() {
                Ok(0) => Err("chapters are numbered from 1".to_owned()),
                Ok(n) => Ok(n),
                Err(_) => Err(format!(
                    "\"{}\" is not a chapter number; write numbers and ranges such as 3-5,7",
                    s.trim()
                )),
            }
        };
        let ranges = list
            .split(',')
            .map(|item| {
                let (a, b) = match item.split_once('-') {
                    Some((a, b)) => (number(a)?, number(b)?),
                    None => (number(item)?, number(item)?),
                };
                if b < a {
                    return Err(format!("{a}-{b} runs backwards; write {b}-{a}"));
                }
                Ok((a, b))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(ChapterSelection(ranges))
    }
}

/// Keeps the chapters `selection` names (and nothing before the first chapter mark).
fn select_chapters(
    script: &mut Script,
    selection: &ChapterSelection,
    path: &Path,
) -> Result<(), ScriptError> {
    let total = script
        .segments
        .iter()
        .filter(|s| s.chapter.is_some())
        .count();
    let total = u32::try_from(total).unwrap_or(u32::MAX);
    if total == 0 {
        return Err(fail(
            path,
            "",
            "has no chapter marks, so --chapters picks nothing; leave --chapters out, or mark chapters (headings in a book, \"chapter\" fields in a script)",
        ));
    }
    if selection.highest() > total {
        return Err(fail(
            path,
            "",
            &format!(
                "has {total} chapter{}, and --chapters names chapter {}; `talker script convert` lists them",
                if total == 1 { "" } else { "s" },
                selection.highest()
            ),
        ));
    }
    // A slide persists until the next one, also into the chapters kept.
    let mut last = None;
    for s in &mut script.segments {
        match &s.slide {
            Some(slide) => last = Some(slide.clone()),
            None => s.slide.clone_from(&last),
        }
    }
    let mut n = 0;
    script.segments.retain(|s| {
        n += u32::from(s.chapter.is_some());
        n >= 1 && selection.contains(n)
    });
    Ok(())
}

/// The kinds of input `talker render` and `talker script convert` accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Json,
    Epub,
    Markdown,
    Text,
}

impl InputKind {
    /// By extension, except that a ZIP signature always means EPUB.
    pub fn detect(path: &Path) -> InputKind {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let mut magic = [0u8; 4];
        let zip = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
            .is_ok()
            && magic == *b"PK\x03\x04";
        match ext.as_str() {
            _ if zip => InputKind::Epub,
            "epub" => InputKind::Epub,
            "md" | "markdown" => InputKind::Markdown,
            "txt" | "text" => InputKind::Text,
            _ => InputKind::Json,
        }
    }
}

/// The script `path` stands for, and the readers' notes (empty for JSON scripts).
pub fn load_script(
    path: &Path,
    options: &BookOptions,
) -> Result<(Script, Vec<String>), ScriptError> {
    // A device or FIFO would be read forever; a missing file gets its loader's message.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return Err(fail(
            path,
            "",
            "is not a regular file (a device or a pipe); give the path of a script or a book",
        ));
    }
    let book = match InputKind::detect(path) {
        InputKind::Json => None,
        InputKind::Epub => Some(read_epub(path, options)?),
        InputKind::Markdown => Some(read_markdown(path, &read_utf8(path)?, options)?),
        InputKind::Text => Some(read_text(path, &read_utf8(path)?)?),
    };
    let (mut script, notes) = match book {
        None => (Script::load(path)?, Vec::new()),
        Some(book) => {
            let notes = book.notes.clone();
            (book.into_script(path)?, notes)
        }
    };
    if let Some(selection) = &options.chapters {
        select_chapters(&mut script, selection, path)?;
    }
    Ok((script, notes))
}

impl Book {
    /// The script of this book; refuses a book with nothing to speak.
    pub fn into_script(self, path: &Path) -> Result<Script, ScriptError> {
        if self.segments.is_empty() {
            return Err(fail(
                path,
                "",
                "has nothing to speak (no paragraph, heading or list item with words); check that it is the right file",
            ));
        }
        for (i, segment) in self.segments.iter().enumerate() {
            if let Err(e) = crate::text::markup::split(&segment.text) {
                let start: String = segment.text.chars().take(40).collect();
                return Err(fail(
                    path,
                    &format!("paragraph {} (\"{start}\")", i + 1),
                    &format!("the tag {} {}", e.tag, e.message),
                ));
            }
        }
        Ok(Script {
            title: self.title.map(|t| clip(&t, MAX_TITLE_CHARS)),
            author: self.author.map(|t| clip(&t, MAX_TITLE_CHARS)),
            voice: None,
            speed: 1.0,
            fps: crate::script::DEFAULT_FPS,
            size: None,
            layout: None,
            lexicon: None,
            cover: self.cover,
            segments: self.segments,
        })
    }

    /// Adds a paragraph (whitespace collapsed) if it has something to say; `chapter` starts a
    /// chapter here (a pending one waits for the next speakable paragraph).
    pub(crate) fn push(&mut self, text: &str, pause_ms: u32, chapter: &mut Option<String>) {
        let text = collapse(text);
        if !crate::text::is_speakable(&text) {
            return;
        }
        for (i, piece) in cut(&text, MAX_SEGMENT_CHARS).into_iter().enumerate() {
            self.segments.push(Segment {
                text: piece,
                say: None,
                pause_ms: if i == 0 { pause_ms } else { DEFAULT_PAUSE_MS },
                chapter: if i == 0 {
                    chapter.take().map(|c| clip(&c, MAX_TITLE_CHARS))
                } else {
                    None
                },
                voice: None,
                speaker: None,
                speed: None,
                slide: self.slide.take(),
            });
        }
    }
}

impl Book {
    /// Adds a heading of `level` (1–6), spoken as `say` where that differs from the printed text.
    pub(crate) fn push_heading(
        &mut self,
        text: &str,
        say: Option<&str>,
        level: u8,
        chapter: &mut Option<String>,
    ) {
        let at = self.segments.len();
        self.push(text, HEADING_PAUSE_MS, chapter);
        if self.segments.len() == at + 1 {
            let say = say.map(collapse).filter(|s| *s != self.segments[at].text);
            self.segments[at].say = say.filter(|s| crate::text::is_speakable(s));
            self.headings.push((at, level));
        }
    }

    /// A heading of only a Roman numeral ("II") is spoken as a number ("Two") when a sibling
    /// heading (same level, same parent) is the numeral before or after it, so that "I" between
    /// "H" and "J" in a dictionary stays a letter. With `chapters`, such a heading also starts a
    /// chapter (plain text has no other mark of one).
    pub(crate) fn speak_roman_headings(&mut self, chapters: bool) {
        let numeral = |s: &Segment| {
            s.say
                .is_none()
                .then(|| crate::text::roman_numeral(&s.text, false))
                .flatten()
        };
        // Siblings: headings of one level under the same nearest higher heading.
        let mut open: Vec<usize> = Vec::new();
        let mut groups: HashMap<(Option<usize>, u8), Vec<usize>> = HashMap::new();
        for (k, &(_, level)) in self.headings.iter().enumerate() {
            while open.last().is_some_and(|&j| self.headings[j].1 >= level) {
                open.pop();
            }
            groups
                .entry((open.last().copied(), level))
                .or_default()
                .push(self.headings[k].0);
            open.push(k);
        }
        for siblings in groups.values() {
            let values: Vec<Option<u32>> = siblings
                .iter()
                .map(|&i| numeral(&self.segments[i]))
                .collect();
            for (k, &i) in siblings.iter().enumerate() {
                let Some(n) = values[k] else { continue };
                let before = k > 0 && values[k - 1] == Some(n - 1);
                let after = values.get(k + 1).copied().flatten() == Some(n + 1);
                if before || after {
                    let s = &mut self.segments[i];
                    s.say = crate::text::roman_heading(&s.text, false);
                    if chapters && s.chapter.is_none() {
                        s.chapter = Some(clip(&s.text, MAX_TITLE_CHARS));
                    }
                }
            }
        }
    }
}

/// The file as UTF-8 text (a BOM removed), refused with the byte offset and line if it is not.
pub(crate) fn read_utf8(path: &Path) -> Result<String, ScriptError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| fail(path, "", &format!("cannot read the file: {e}")))?;
    if !meta.is_file() {
        return Err(fail(
            path,
            "",
            "is not a regular file (a directory or a device); give the path of a book",
        ));
    }
    let too_big = || {
        fail(
            path,
            "",
            "is larger than 64 MiB; split such a book into several files",
        )
    };
    if meta.len() > MAX_TEXT_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_TEXT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| fail(path, "", &format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        return Err(too_big());
    }
    utf8(path, bytes)
}

/// Bytes → text (a BOM removed), or an error naming the line and byte of the first bad byte.
pub fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, ScriptError> {
    match String::from_utf8(bytes) {
        Ok(mut s) => {
            if s.starts_with('\u{feff}') {
                s.drain(..3);
            }
            Ok(s)
        }
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            Err(fail(
                path,
                &format!("line {line} (byte {at})"),
                "is not UTF-8 text; other encodings (Latin-1, UTF-16, Windows-1252) are not read: convert it first, e.g. iconv -f LATIN1 -t UTF-8",
            ))
        }
    }
}

pub(crate) fn fail(path: &Path, at: &str, message: &str) -> ScriptError {
    ScriptError {
        file: PathBuf::from(path),
        at: at.to_owned(),
        message: message.to_owned(),
    }
}

/// Whitespace runs (newlines included) become one space.
/// Whitespace collapsed to single spaces and other control characters dropped: a book's stray
/// BEL or ESC would reach the subtitles (a JSON script is refused for them instead).
pub(crate) fn collapse(text: &str) -> String {
    let printable: String = text
        .chars()
        .filter(|c| !c.is_control() || c.is_whitespace())
        .collect();
    printable.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn clip(text: &str, max: usize) -> String {
    // Labels go into MP4 metadata, which holds only printable text (the script validator refuses
    // control characters there), so a book's stray ones are dropped rather than failing it.
    let text = collapse(text);
    match text.char_indices().nth(max) {
        Some((i, _)) => text[..i].to_owned(),
        None => text,
    }
}

/// Pieces of at most `max` characters, cut after a sentence end where there is one.
fn cut(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while rest.chars().count() > max {
        let limit = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let head = &rest[..limit];
        let at = head
            .rfind(". ")
            .map(|i| i + 1)
            .or_else(|| head.rfind(' '))
            .filter(|&i| i > 0)
            .unwrap_or(limit);
        out.push(rest[..at].trim().to_owned());
        rest = rest[at..].trim_start();
    }
    if !rest.is_empty() {
        out.push(rest.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--chapters` keeps the slide a chosen chapter starts under, though it was named before.
    #[test]
    fn chosen_chapters_keep_the_slide_shown_before_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("talk.md");
        std::fs::write(&path, "# A\n\n![](a.png)\n\nOne.\n\n# B\n\nTwo.\n").unwrap();
        let options = BookOptions {
            chapters: Some("2".parse().unwrap()),
            ..BookOptions::default()
        };
        let (script, _) = load_script(&path, &options).unwrap();
        let slides: Vec<(&str, Option<&Path>)> = script
            .segments
            .iter()
            .map(|s| (s.text.as_str(), s.slide.as_ref().map(|s| s.path.as_path())))
            .collect();
        let a = dir.path().join("a.png");
        assert_eq!(
            slides,
            [("B", Some(a.as_path())), ("Two.", Some(a.as_path()))]
        );
    }

    #[test]
    fn long_paragraphs_are_cut_at_sentence_ends() {
        let p = "One two. ".repeat(10);
        let pieces = cut(p.trim(), 20);
        assert!(pieces.iter().all(|s| s.chars().count() <= 20), "{pieces:?}");
        assert!(pieces.iter().all(|s| s.ends_with('.')), "{pieces:?}");
        assert_eq!(pieces.join(" "), p.trim());
    }

    #[test]
    fn labels_lose_control_characters() {
        assert_eq!(
            clip("In\u{1}tro\u{0} one\ntwo", MAX_TITLE_CHARS),
            "Intro one two"
        );
    }

    #[test]
    fn pending_chapter_goes_to_the_next_speakable_paragraph() {
        let mut b = Book::default();
        let mut ch = Some("One".to_owned());
        b.push("  ...  ", 300, &mut ch);
        assert!(b.segments.is_empty());
        b.push("Hello\n  world.", 300, &mut ch);
        assert_eq!(b.segments[0].text, "Hello world.");
        assert_eq!(b.segments[0].chapter.as_deref(), Some("One"));
        assert!(ch.is_none());
    }

    #[test]
    fn non_utf8_names_line_and_byte() {
        let e = utf8(Path::new("x.txt"), b"ok\nbad \xe9 here".to_vec()).unwrap_err();
        assert_eq!(e.at, "line 2 (byte 7)");
        assert!(e.message.contains("not UTF-8"));
        assert_eq!(
            utf8(Path::new("x"), b"\xef\xbb\xbfhi".to_vec()).unwrap(),
            "hi"
        );
    }
}
