//! `--split chapters`: a book as one file per chapter in the output directory, each named
//! `NN - Title.ext` after its number and chapter title.
//!
//! The render still plans, speaks and caches the whole book at once; only the writing is cut,
//! at the chunk where each chapter starts (chapters always start a chunk). What comes before
//! the first chapter (a book's title read aloud) opens the first file, so the files together
//! hold the whole book.

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::script::Script;
use crate::settings::{RenderOptions, RenderSettings};

/// The longest file name written, in bytes: well under the 255 of common file systems, leaving
/// room for the temp name's `.NAME.partial-HOST-PID-N` while the file is written.
pub const MAX_NAME_BYTES: usize = 150;

/// What Windows or macOS refuse in a file name (`/` everywhere); each becomes `_`.
const ILLEGAL: &[char] = &['<', '>', ':', '"', '/', '\\', '|', '?', '*'];

/// One file of a split output.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// 1-based: the file's track number.
    pub number: usize,
    pub title: String,
    pub path: PathBuf,
}

/// The files of a `--split chapters` render (`None` without `--split`), named from the script's
/// chapters; a script without any is a usage error.
pub fn planned(opts: &RenderOptions, script: &Script) -> Result<Option<Vec<Part>>> {
    let (Some(_), Some(format)) = (opts.settings.split, opts.settings.format) else {
        return Ok(None);
    };
    let titles = titles(script, &opts.script).map_err(Error::Usage)?;
    Ok(Some(parts(&opts.output, &titles, format.extension())))
}

/// Refuses, before any work, a split output that cannot be a directory of files of a known kind;
/// anything goes without `--split`.
pub fn check_output(settings: &RenderSettings, output: &Path) -> Result<(), String> {
    if settings.split.is_none() {
        return Ok(());
    }
    if settings.format.is_none() {
        return Err(format!(
            "--split chapters writes a directory ({}), whose name says nothing of the files' kind: add --format m4b (or m4a, mp3, wav, mp4)",
            output.display()
        ));
    }
    match std::fs::metadata(output) {
        Ok(meta) if !meta.is_dir() => Err(format!(
            "{} is a file, and --split chapters writes a directory of files: give a directory path for -o (such as {}) or leave out --split",
            output.display(),
            output.with_extension("").join("").display()
        )),
        _ => Ok(()),
    }
}

/// The chapter titles of `script`, in order; an error naming the fix when it has none.
pub fn titles(script: &Script, path: &Path) -> Result<Vec<String>, String> {
    let titles: Vec<String> = script
        .segments
        .iter()
        .filter_map(|s| s.chapter.clone())
        .collect();
    if titles.is_empty() {
        return Err(format!(
            "{} has no chapters, so --split chapters has nowhere to cut: mark them (\"chapter\" on a JSON segment, headings in Markdown, the table of contents of an EPUB) or leave out --split",
            path.display()
        ));
    }
    Ok(titles)
}

/// The files for `titles` in `dir`, with extension `ext`.
pub fn parts(dir: &Path, titles: &[String], ext: &str) -> Vec<Part> {
    titles
        .iter()
        .enumerate()
        .map(|(i, title)| Part {
            number: i + 1,
            title: title.clone(),
            path: dir.join(file_name(i + 1, titles.len(), title, ext)),
        })
        .collect()
}

/// The chunks of each chapter's file: each chapter from its first chunk to the next chapter's,
/// the first from the book's start. As many ranges as [`titles`] gives titles.
pub fn chunk_ranges(plan: &Plan) -> Vec<Range<usize>> {
    let starts: Vec<usize> = (0..plan.chunks.len())
        .filter(|&c| {
            let segment = plan.chunks[c].segment;
            let first = c == 0 || plan.chunks[c - 1].segment != segment;
            first && plan.chapters[segment].is_some()
        })
        .collect();
    let ends = starts.iter().skip(1).copied().chain([plan.chunks.len()]);
    let mut ranges: Vec<Range<usize>> = starts
        .iter()
        .copied()
        .zip(ends)
        .map(|(a, b)| a..b)
        .collect();
    if let Some(first) = ranges.first_mut() {
        first.start = 0;
    }
    ranges
}

/// `NN - Title.ext`: the number zero-padded to the width of the count (two digits at least, so
/// the files sort in order), the title made safe on every common file system and cut to fit
/// [`MAX_NAME_BYTES`]. A title with nothing left gives `NN.ext`; equal titles stay distinct by
/// their numbers.
pub fn file_name(number: usize, total: usize, title: &str, ext: &str) -> String {
    let width = total.to_string().len().max(2);
    let prefix = format!("{number:0width$}");
    let room = MAX_NAME_BYTES.saturating_sub(prefix.len() + " - ".len() + 1 + ext.len());
    let title = safe_title(title, room);
    if title.is_empty() {
        format!("{prefix}.{ext}")
    } else {
        format!("{prefix} - {title}.{ext}")
    }
}

/// `title` as part of a file name: path separators, control characters and what Windows or
/// macOS refuse replaced by `_`, spaces and dots trimmed from the end (Windows drops them), at
/// most `max_bytes`, cut on a character boundary. Windows' reserved names (`CON`, `NUL`...)
/// cannot arise: the title always follows the number.
fn safe_title(title: &str, max_bytes: usize) -> String {
    let clean: String = title
        .trim()
        .chars()
        .map(|c| {
            if c.is_control() || ILLEGAL.contains(&c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    let mut end = clean.len().min(max_bytes);
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    clean[..end].trim_end_matches(['.', ' ']).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Format, Split};

    #[test]
    fn names_are_numbered_to_the_width_of_the_count() {
        assert_eq!(file_name(3, 9, "Three", "m4b"), "03 - Three.m4b");
        assert_eq!(file_name(7, 120, "Seven", "mp3"), "007 - Seven.mp3");
        assert_eq!(file_name(1, 1, "One", "wav"), "01 - One.wav");
    }

    #[test]
    fn separators_controls_and_reserved_characters_are_replaced() {
        assert_eq!(
            file_name(1, 2, "Part 1: A/B \\ <c>?*|\"d\"", "m4b"),
            "01 - Part 1_ A_B _ _c_____d_.m4b"
        );
        assert_eq!(
            file_name(2, 2, "tab\there\u{7f}", "mp3"),
            "02 - tab_here_.mp3"
        );
        assert_eq!(file_name(1, 2, "..", "mp3"), "01.mp3");
        assert_eq!(file_name(1, 2, "  ", "mp3"), "01.mp3");
    }

    #[test]
    fn trailing_dots_and_spaces_go() {
        assert_eq!(
            file_name(1, 2, "And so on. . .", "m4a"),
            "01 - And so on.m4a"
        );
        assert_eq!(file_name(1, 2, "CON", "wav"), "01 - CON.wav");
    }

    #[test]
    fn long_titles_are_cut_on_a_character_boundary() {
        let title = "é".repeat(200);
        let name = file_name(12, 40, &title, "m4b");
        assert!(name.len() <= MAX_NAME_BYTES, "{}", name.len());
        assert!(
            name.starts_with("12 - éé") && name.ends_with("é.m4b"),
            "{name}"
        );
        // Cut at 141 bytes, right after a space, which then goes too.
        let spaced = format!("{}{}", "a".repeat(140), " b");
        let name = file_name(1, 2, &spaced, "m4b");
        assert_eq!(name, format!("01 - {}.m4b", "a".repeat(140)));
    }

    #[test]
    fn equal_titles_stay_distinct() {
        let dir = Path::new("out");
        let titles = vec!["Intro".to_owned(), "Intro".to_owned()];
        let p = parts(dir, &titles, "mp3");
        assert_eq!(p[0].path, dir.join("01 - Intro.mp3"));
        assert_eq!(p[1].path, dir.join("02 - Intro.mp3"));
        assert_eq!((p[1].number, p[1].title.as_str()), (2, "Intro"));
    }

    #[test]
    fn a_split_needs_a_kind_and_no_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = RenderSettings {
            split: Some(Split::Chapters),
            ..RenderSettings::default()
        };
        let e = check_output(&settings, dir.path()).unwrap_err();
        assert!(e.contains("--format m4b"), "{e}");
        settings.format = Some(Format::M4b);
        assert!(check_output(&settings, dir.path()).is_ok());
        assert!(check_output(&settings, &dir.path().join("new")).is_ok());
        let file = dir.path().join("book.m4b");
        std::fs::write(&file, b"x").unwrap();
        assert!(check_output(&RenderSettings::default(), &file).is_ok());
        let e = check_output(&settings, &file).unwrap_err();
        assert!(e.contains("is a file") && e.contains("book/"), "{e}");
    }
}
