//! Markdown (CommonMark, through `pulldown-cmark`).
//!
//! - Headings (ATX `#` and setext `===`/`---`) are read aloud as their own segment. Levels up to
//!   `--chapter-depth` (1 and 2 by default) start a chapter titled with the heading's text; deeper
//!   ones do not (they are sections inside a chapter). A heading of only a Roman numeral is
//!   spoken as a number when its siblings count with it (I, II, III).
//! - Paragraphs and list items become segments; emphasis, strong, strikethrough, inline code and
//!   links are read as their text.
//! - Code blocks and HTML blocks are skipped with a warning naming the line; inline HTML is
//!   skipped silently, except SSML's `<break time="1.5s"/>`, which is kept as a pause.
//! - An image of a local file (`![](slides/03.png)`, relative to the book) starts a slide, shown
//!   from the next paragraph on (`--layout slides`); its alt text is not read. Images on the web
//!   are skipped.

use std::path::Path;

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

use super::{Book, BookOptions};
use crate::script::{DEFAULT_PAUSE_MS, ScriptError, Slide};

pub fn read_markdown(path: &Path, text: &str, options: &BookOptions) -> Result<Book, ScriptError> {
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let line_of = |offset: usize| line_starts.partition_point(|&s| s <= offset);
    let mut book = Book::default();
    let mut chapter: Option<String> = None;
    let mut buf = String::new();
    // Inside a code block, HTML block or image: text there is not read.
    let mut skip_depth = 0usize;
    for (event, range) in Parser::new(text).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(_)) => {
                book.notes.push(format!(
                    "{}: line {}: code block skipped (code is not read aloud)",
                    path.display(),
                    line_of(range.start)
                ));
                skip_depth += 1;
            }
            Event::Start(Tag::HtmlBlock) => {
                book.notes.push(format!(
                    "{}: line {}: HTML block skipped",
                    path.display(),
                    line_of(range.start)
                ));
                skip_depth += 1;
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                if skip_depth == 0 && is_local(&dest_url) {
                    flush(&mut book, &mut buf, DEFAULT_PAUSE_MS, &mut chapter);
                    book.slide = Some(Slide {
                        path: path.parent().unwrap_or(Path::new("")).join(&*dest_url),
                        at: format!("line {}", line_of(range.start)),
                    });
                }
                skip_depth += 1;
            }
            Event::End(TagEnd::CodeBlock | TagEnd::HtmlBlock | TagEnd::Image) => {
                skip_depth = skip_depth.saturating_sub(1);
            }
            _ if skip_depth > 0 => {}
            Event::Start(Tag::Heading { .. }) => {
                flush(&mut book, &mut buf, DEFAULT_PAUSE_MS, &mut chapter);
            }
            Event::End(TagEnd::Heading(level)) => {
                let level = heading_level(level);
                if level <= options.chapter_depth && crate::text::is_speakable(&buf) {
                    chapter = Some(super::collapse(&buf));
                }
                book.push_heading(&buf, None, level, &mut chapter);
                buf.clear();
            }
            Event::Start(Tag::Paragraph | Tag::Item | Tag::BlockQuote(_))
            | Event::End(TagEnd::Paragraph | TagEnd::Item | TagEnd::BlockQuote(_)) => {
                flush(&mut book, &mut buf, DEFAULT_PAUSE_MS, &mut chapter);
            }
            Event::Text(t) | Event::Code(t) => buf.push_str(&t),
            // A pause the author marked up stays in the text (the plan makes it silence).
            Event::InlineHtml(t) if crate::text::markup::is_break(&t) => buf.push_str(&t),
            Event::SoftBreak | Event::HardBreak => buf.push(' '),
            _ => {}
        }
    }
    flush(&mut book, &mut buf, DEFAULT_PAUSE_MS, &mut chapter);
    if let Some(slide) = book.slide.take() {
        book.notes.push(format!(
            "{}: {}: the slide {} comes after the last paragraph, so nothing is said over it; it is not shown",
            path.display(),
            slide.at,
            slide.path.display()
        ));
    }
    book.speak_roman_headings(false);
    Ok(book)
}

fn heading_level(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// A file next to the book, not an address on the web.
fn is_local(url: &str) -> bool {
    !url.trim().is_empty() && !url.contains("://") && !url.starts_with("data:")
}

fn flush(book: &mut Book, buf: &mut String, pause_ms: u32, chapter: &mut Option<String>) {
    if !buf.trim().is_empty() {
        book.push(buf, pause_ms, chapter);
    }
    buf.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(b: &Book) -> Vec<(&str, Option<&str>)> {
        b.segments
            .iter()
            .map(|s| (s.text.as_str(), s.chapter.as_deref()))
            .collect()
    }

    #[test]
    fn every_construct() {
        let md = "Book Title\n==========\n\nAn *opening* line with a [link](http://x.example) and `code`.\n\n\
## Chapter Two\n\n- first item\n- second **item**\n\n### A section\n\n```rust\nfn main() {}\n```\n\n\
<div>\nhidden html\n</div>\n\nSetext two\n----------\n\n> quoted words\n\n![alt text](img.png) after image.\n";
        let b = read_markdown(Path::new("b.md"), md, &BookOptions::default()).unwrap();
        assert_eq!(
            texts(&b),
            [
                ("Book Title", Some("Book Title")),
                ("An opening line with a link and code.", None),
                ("Chapter Two", Some("Chapter Two")),
                ("first item", None),
                ("second item", None),
                ("A section", None),
                ("Setext two", Some("Setext two")),
                ("quoted words", None),
                ("after image.", None),
            ]
        );
        assert_eq!(b.notes.len(), 2, "{:?}", b.notes);
        assert!(b.notes[0].contains("line 13: code block"), "{:?}", b.notes);
        assert!(b.notes[1].contains("line 17: HTML block"), "{:?}", b.notes);
    }

    /// An image line starts a slide at the next paragraph; one mid-paragraph cuts it there; web
    /// images and a slide after the last words show nothing (the last with a note).
    #[test]
    fn image_lines_start_slides() {
        let md = "# Talk\n\nBefore.\n\n![](s/1.png)\n\nOne.\n\nStill one, ![x](s/2.png) two.\n\n\
![](https://x.example/3.png)\n\nThree.\n\n![](s/4.png)\n";
        let b = read_markdown(Path::new("talks/t.md"), md, &BookOptions::default()).unwrap();
        let slides: Vec<(&str, Option<(String, &str)>)> = b
            .segments
            .iter()
            .map(|s| {
                let slide = s.slide.as_ref();
                (
                    s.text.as_str(),
                    slide.map(|sl| (sl.path.display().to_string(), sl.at.as_str())),
                )
            })
            .collect();
        let at = |p: &str, line: &'static str| Some((p.to_owned(), line));
        assert_eq!(
            slides,
            [
                ("Talk", None),
                ("Before.", None),
                ("One.", at("talks/s/1.png", "line 5")),
                ("Still one,", None),
                ("two.", at("talks/s/2.png", "line 9")),
                ("Three.", None),
            ]
        );
        assert_eq!(b.notes.len(), 1, "{:?}", b.notes);
        assert!(b.notes[0].contains("line 15: the slide talks/s/4.png comes after"));
    }

    #[test]
    fn roman_headings_in_sequence_are_numbers_and_letters_stay_letters() {
        let md = "# Story\n\n## I\n\nOne.\n\n## II\n\nTwo.\n\n# Words\n\n## H\n\nhat\n\n## I\n\nice\n\n## J\n\njam\n";
        let b = read_markdown(Path::new("r.md"), md, &BookOptions::default()).unwrap();
        let said: Vec<(&str, Option<&str>)> = b
            .segments
            .iter()
            .filter(|s| s.pause_ms == crate::book::HEADING_PAUSE_MS)
            .map(|s| (s.text.as_str(), s.say.as_deref()))
            .collect();
        assert_eq!(
            said,
            [
                ("Story", None),
                ("I", Some("One")),
                ("II", Some("Two")),
                ("Words", None),
                ("H", None),
                ("I", None),
                ("J", None),
            ]
        );
        // Chapter marks keep the printed form.
        assert_eq!(b.segments[1].chapter.as_deref(), Some("I"));
    }

    #[test]
    fn chapter_depth_limits_chapter_marks() {
        let md = "# A\n\n## B\n\n### C\n\ntext\n";
        let depth = |n| {
            let opts = BookOptions {
                chapter_depth: n,
                ..BookOptions::default()
            };
            let b = read_markdown(Path::new("d.md"), md, &opts).unwrap();
            b.segments.iter().filter(|s| s.chapter.is_some()).count()
        };
        assert_eq!((depth(1), depth(2), depth(3)), (1, 2, 3));
    }

    #[test]
    fn only_code_has_nothing_to_speak() {
        let b = read_markdown(
            Path::new("c.md"),
            "```\nlet x = 1;\n```\n",
            &BookOptions::default(),
        )
        .unwrap();
        assert!(b.segments.is_empty());
        let e = b.into_script(Path::new("c.md")).unwrap_err();
        assert!(e.message.contains("nothing to speak"), "{e}");
    }
}
