//! Plain text: blank lines separate paragraphs; a paragraph whose first line is one such as `Chapter 12`,
//! `CHAPTER XII`, `Chapter Twelve: The Storm` starts a chapter (the line is its title and is read
//! aloud). A paragraph of one line holding only a Roman numeral ("II", "IV.") does too when the
//! numerals before or after it count with it (I, II, III), and is spoken as the number ("Two").
//! CRLF and a UTF-8 BOM are fine (the BOM is removed by the caller).

use std::path::Path;

use super::Book;
use crate::script::{DEFAULT_PAUSE_MS, ScriptError};

/// Chapter lines are short; a longer line starting with "Chapter" is prose.
const MAX_HEADING_CHARS: usize = 80;

/// A chapter's number spelt out: a cardinal ("Twelve", "forty-two") or "first"/"last".
fn is_number_word(word: &str) -> bool {
    crate::text::is_cardinal_word(word) || matches!(word, "first" | "last")
}

/// Never fails today; the `Result` keeps the readers interchangeable.
pub fn read_text(_path: &Path, text: &str) -> Result<Book, ScriptError> {
    let mut book = Book::default();
    let mut chapter = None;
    let mut paragraph: Vec<&str> = Vec::new();
    let flush = |paragraph: &mut Vec<&str>, book: &mut Book, chapter: &mut Option<String>| {
        if paragraph.is_empty() {
            return;
        }
        let mut body = &paragraph[..];
        if is_chapter_line(body[0]) {
            *chapter = Some(body[0].trim().to_owned());
            book.push_heading(body[0], None, 1, chapter);
            body = &body[1..];
        } else if body.len() == 1 && crate::text::roman_numeral(body[0], false).is_some() {
            // A heading only if its neighbours count with it: see `speak_roman_headings`.
            book.push_heading(body[0], None, 1, &mut None);
            body = &[];
        }
        book.push(&body.join(" "), DEFAULT_PAUSE_MS, chapter);
        paragraph.clear();
    };
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            flush(&mut paragraph, &mut book, &mut chapter);
        } else {
            paragraph.push(line);
        }
    }
    flush(&mut paragraph, &mut book, &mut chapter);
    book.speak_roman_headings(true);
    Ok(book)
}

/// `Chapter N`, `CHAPTER XII`, `Chapter Twelve`, each optionally followed by `.`/`:`/`-` and a title.
fn is_chapter_line(line: &str) -> bool {
    let line = line.trim();
    if line.chars().count() > MAX_HEADING_CHARS {
        return false;
    }
    let mut words = line.split_whitespace();
    let Some(first) = words.next() else {
        return false;
    };
    if !first.eq_ignore_ascii_case("chapter") {
        return false;
    }
    let Some(number) = words.next() else {
        return false;
    };
    let number = number.trim_end_matches(['.', ':', '-', '—', '–', ',']);
    let lower = number.to_ascii_lowercase();
    !number.is_empty()
        && (number.chars().all(|c| c.is_ascii_digit())
            || (number.chars().all(|c| "IVXLCDM".contains(c)))
            || (number.chars().all(|c| "ivxlcdm".contains(c)) && number.len() <= 4)
            || is_number_word(&lower)
            || lower
                .split('-')
                .all(|w| is_number_word(w) || w.ends_with("ty")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chapter_lines() {
        for yes in [
            "Chapter 12",
            "CHAPTER XII",
            "Chapter Twelve: The Storm",
            "chapter 3. Home",
            "Chapter twenty-one",
            "  CHAPTER I  ",
        ] {
            assert!(is_chapter_line(yes), "{yes}");
        }
        for no in [
            "Chapter",
            "Chapters 1 and 2 were long.",
            "The chapter 12",
            "Chapter and verse are quoted here.",
        ] {
            assert!(!is_chapter_line(no), "{no}");
        }
    }

    #[test]
    fn paragraphs_and_chapters_with_crlf() {
        let text = "Title page words.\r\n\r\nCHAPTER I\r\n\r\nIt was a dark\r\nand stormy night.\r\n\r\n\r\nChapter 2: Morning\r\nThe sun rose.\r\n";
        let b = read_text(Path::new("t.txt"), text).unwrap();
        let texts: Vec<_> = b.segments.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "Title page words.",
                "CHAPTER I",
                "It was a dark and stormy night.",
                "Chapter 2: Morning",
                "The sun rose."
            ]
        );
        assert_eq!(b.segments[1].chapter.as_deref(), Some("CHAPTER I"));
        assert_eq!(b.segments[0].chapter, None);
        assert_eq!(b.segments[1].pause_ms, crate::book::HEADING_PAUSE_MS);
    }

    #[test]
    fn numeral_paragraphs_in_sequence_start_chapters() {
        let text = "I\n\nFirst part.\n\nII.\n\nSecond part.\n\nV\n\nA lone V is a letter.\n";
        let b = read_text(Path::new("n.txt"), text).unwrap();
        let got: Vec<_> = b
            .segments
            .iter()
            .map(|s| (s.text.as_str(), s.say.as_deref(), s.chapter.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("I", Some("One"), Some("I")),
                ("First part.", None, None),
                ("II.", Some("Two."), Some("II.")),
                ("Second part.", None, None),
                ("V", None, None),
                ("A lone V is a letter.", None, None),
            ]
        );
    }
}
