//! EPUB 2 and 3: ZIP through `zip`, every XML file (container, OPF, nav, NCX, XHTML) through
//! `quick-xml`'s streaming reader.
//!
//! - Spine order; each XHTML paragraph (`p`, `li`, `blockquote`, `div` text, `h1`–`h6`, ...)
//!   becomes a segment.
//! - Chapters start where the EPUB 3 nav document (`<nav epub:type="toc">`), else the EPUB 2 NCX,
//!   points (a file, or an element id inside it), titled as the table of contents says; nested
//!   entries carry their parents' titles ("A Scandal in Bohemia: I") and only the first
//!   `--chapter-depth` levels start chapters; entries that start at the same paragraph are
//!   joined ("Part One: The Storm"). A book without a table of contents gets its chapters from
//!   its headings (`h1`/`h2` by default). Headings are read aloud either way; one marked as a
//!   Roman ordinal (`epub:type="z3998:roman"`, in it or on it) is spoken as the number
//!   ("Chapter XIV" → "Chapter Fourteen") and still shown as printed.
//! - Front and back matter, by the book's own semantics: `epub:type` (and DPUB-ARIA `role`) on
//!   any element, the nav's landmarks and the EPUB 2 `<guide>`. `--matter book` leaves out
//!   [`NOT_READ`] (imprint, colophon, copyright page, index, ...), `body` also what is marked front
//!   or back matter or comes before the landmarks' `bodymatter`, `all` nothing; the title page is
//!   announced "Title, by Author". Note references (`noteref`) and backlinks are never read;
//!   footnotes and endnotes are left out, or read at the end with `--notes end`. A book without
//!   such markup has nothing left out: parts are never guessed by their titles.
//! - `dc:title` and the first `dc:creator` become the output's title and author.
//! - Not prose, skipped and counted in a note: images and SVG, scripts and styles, the nav
//!   document and non-XHTML spine items, `linear="no"` items (covers, notes).
//! - Refused (exit 2, naming the entry): a corrupt ZIP, no `META-INF/container.xml`, a spine item
//!   missing from the manifest or the archive, malformed XML, content encrypted as
//!   `META-INF/encryption.xml` declares (DRM; font obfuscation alone is fine), an entry that
//!   decompresses past 64 MiB or a book past 256 MiB in all (ZIP bombs).
//!
//! Memory: one spine item's text at a time, besides the segments.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek};
use std::path::Path;

use quick_xml::XmlVersion;
use quick_xml::events::{BytesEnd, BytesStart, Event};
use quick_xml::reader::Reader;
use zip::ZipArchive;

use super::{Book, BookOptions, MAX_TEXT_BYTES, Matter, NotesMode, fail};
use crate::cover::Cover;
use crate::script::{DEFAULT_PAUSE_MS, ScriptError};

/// Most bytes decompressed from one book, whatever its entries declare.
const MAX_TOTAL_BYTES: u64 = 256 << 20;
/// Most entries in the archive (a real book has a few hundred).
const MAX_ENTRIES: usize = 50_000;
/// Encryption algorithms that only obfuscate fonts: the text stays readable.
const FONT_OBFUSCATION: &[&str] = &[
    "http://www.idpf.org/2008/embedding",
    "http://ns.adobe.com/pdf/enc#RC",
];

/// Elements whose text is a paragraph of its own.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "li",
    "blockquote",
    "dd",
    "dt",
    "td",
    "th",
    "pre",
    "section",
    "article",
    "aside",
    "header",
    "footer",
    "figcaption",
    "tr",
    "ul",
    "ol",
    "dl",
    "table",
    "body",
    "hr",
];
/// Semantics `--matter book` leaves out: what a listener does not want read.
const NOT_READ: &[&str] = &[
    "imprint",
    "colophon",
    "copyright-page",
    "index",
    "toc",
    "landmarks",
    "page-list",
    "loi",
    "lot",
    "loa",
    "lov",
    "errata",
    "halftitlepage",
];
/// Semantics `--matter body` leaves out besides [`NOT_READ`]: the book's own front and back
/// matter ([`MATTER`] says only where a part is, these what it is). Epigraphs and prologues are
/// not here: books put them in the body too.
const FRONT_AND_BACK: &[&str] = &[
    "titlepage",
    "dedication",
    "foreword",
    "preface",
    "introduction",
    "afterword",
    "appendix",
    "acknowledgments",
    "bibliography",
    "glossary",
    "contributors",
    "other-credits",
];
const MATTER: &[&str] = &["frontmatter", "backmatter"];
/// Footnotes and endnotes, as sections or one by one.
const NOTES: &[&str] = &[
    "endnotes",
    "footnotes",
    "rearnotes",
    "endnote",
    "footnote",
    "rearnote",
];
/// Never read: the "1" of a note reference and the "↩" back to it.
const MARKERS: &[&str] = &["noteref", "backlink"];
/// EPUB 2 `<guide>` reference types that name the same things differently.
const GUIDE_TYPES: &[(&str, &str)] = &[
    ("title-page", "titlepage"),
    ("text", "bodymatter"),
    ("notes", "endnotes"),
    ("acknowledgements", "acknowledgments"),
];

/// Elements whose whole content is not prose.
const SKIPPED: &[&str] = &[
    "script", "style", "nav", "head", "svg", "math", "noscript", "template", "object", "video",
    "audio",
];

struct Archive<'p, R> {
    zip: ZipArchive<R>,
    path: &'p Path,
    read_total: u64,
}

impl<R: Read + Seek> Archive<'_, R> {
    /// The entry's bytes, `None` if the archive has no such entry.
    fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ScriptError> {
        let path = self.path;
        let mut entry = match self.zip.by_name(name) {
            Ok(e) => e,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => return Err(fail(path, name, &format!("cannot read this entry: {e}"))),
        };
        if entry.encrypted() {
            return Err(drm(path, name));
        }
        let bomb = |what: &str| {
            fail(
                path,
                name,
                &format!("{what}; this is not a book talker will read (a ZIP bomb?)"),
            )
        };
        if entry.size() > MAX_TEXT_BYTES {
            return Err(bomb(&format!(
                "decompresses to {} bytes, more than the 64 MiB allowed for one entry",
                entry.size()
            )));
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(MAX_TEXT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| fail(path, name, &format!("is corrupt: {e}")))?;
        if bytes.len() as u64 > MAX_TEXT_BYTES {
            return Err(bomb(
                "decompresses past the 64 MiB allowed for one entry (more than it declares)",
            ));
        }
        self.read_total += bytes.len() as u64;
        if self.read_total > MAX_TOTAL_BYTES {
            return Err(bomb("the book decompresses past 256 MiB"));
        }
        Ok(Some(bytes))
    }

    fn text(&mut self, name: &str) -> Result<Option<String>, ScriptError> {
        match self.read(name)? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes).map(Some).map_err(|e| {
                fail(
                    self.path,
                    name,
                    &format!(
                        "is not UTF-8 (invalid byte at offset {}); EPUB text must be UTF-8",
                        e.utf8_error().valid_up_to()
                    ),
                )
            }),
        }
    }
}

fn drm(path: &Path, name: &str) -> ScriptError {
    fail(
        path,
        name,
        "is encrypted (DRM); talker cannot read DRM-protected books: use a DRM-free copy of the book",
    )
}

/// A manifest item.
struct Item {
    href: String,
    media_type: String,
    properties: String,
}

/// A table-of-contents entry: a file, maybe an element id in it, its title (with its parents')
/// and its level (1: top).
struct TocEntry {
    file: String,
    fragment: Option<String>,
    title: String,
    level: usize,
    /// Entries nested under this one follow it.
    parent: bool,
}

/// Semantics that the landmarks or the guide give a file or an element in it.
struct Mark {
    file: String,
    fragment: Option<String>,
    types: Vec<String>,
}

pub fn read_epub(path: &Path, options: &BookOptions) -> Result<Book, ScriptError> {
    let file = File::open(path).map_err(|e| fail(path, "", &format!("cannot open: {e}")))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(fail(
            path,
            "",
            "is not a regular file (a directory or a device); give the path of an .epub",
        ));
    }
    read_epub_from(path, file, options)
}

/// As [`read_epub`], from any seekable bytes; `path` only names the book in messages.
pub fn read_epub_from(
    path: &Path,
    data: impl Read + Seek,
    options: &BookOptions,
) -> Result<Book, ScriptError> {
    let (mut ar, opf_path, package) = open_package(path, data)?;
    let opf_dir = parent(&opf_path);

    let (mut toc, mut marks) = read_nav(&mut ar, &package, opf_dir)?;
    let use_headings = toc.is_empty();
    for i in 1..toc.len() {
        toc[i - 1].parent = toc[i].level > toc[i - 1].level;
    }
    toc.retain(|t| t.level <= usize::from(options.chapter_depth));
    marks.extend(guide_marks(&package, opf_dir));
    let body_start = body_start(&marks, &package, opf_dir);
    let mut book = Book {
        title: package.title.clone(),
        author: package.author.clone(),
        ..Book::default()
    };
    book.cover = read_cover(&mut ar, &package, opf_dir, &mut book.notes)?;
    let mut skipped = Skipped::default();
    let mut later = Later::default();
    let mut chapter: Option<String> = None;
    for (i, (idref, linear)) in package.spine.iter().enumerate() {
        let at = format!("{opf_path}: spine itemref {} (idref \"{idref}\")", i + 1);
        let item = package.manifest.get(idref).ok_or_else(|| {
            fail(
                path,
                &at,
                "names no item of the manifest; fix the package file",
            )
        })?;
        let name = resolve(opf_dir, &item.href).0;
        let is_nav = item.properties.split_whitespace().any(|p| p == "nav");
        let xhtml = matches!(
            item.media_type.as_str(),
            "application/xhtml+xml" | "text/html" | "application/xml"
        );
        if is_nav || !xhtml {
            skipped.items += 1;
            continue;
        }
        if !linear {
            skipped.non_linear += 1;
            continue;
        }
        let text = ar.text(&name)?.ok_or_else(|| {
            fail(
                path,
                &name,
                &format!("is in the spine ({at}) but does not exist in the archive"),
            )
        })?;
        let inherited = chapter.clone();
        let targets = FileTargets::new(&toc, &marks, &name);
        for t in &targets.file_titles {
            start_chapter(&mut chapter, t);
        }
        let ctx = XhtmlContext {
            path,
            name: &name,
            ids: &targets.ids,
            types: &targets.types,
            options,
            use_headings,
            file_title: targets.file_titles.last().copied(),
            title: book.title.clone(),
            author: book.author.clone(),
            item_start: book.segments.len(),
            before_body: options.matter == Matter::Body && body_start.is_some_and(|b| i < b),
        };
        let before = book.segments.len();
        let left_out = read_xhtml(
            &ctx,
            &text,
            &mut book,
            &mut chapter,
            &mut skipped,
            &mut later,
        )?;
        // A chapter that starts with this file, all of which was left out, starts none; but a
        // part whose title page was left out ("The Art of War", above its chapters) starts
        // with what it holds.
        if left_out && book.segments.len() == before && !targets.parent {
            chapter = inherited;
        }
    }
    Ok(finish_book(book, later, &skipped, path, options))
}

/// The book's cover: the manifest item marked `properties="cover-image"` (EPUB 3), else the one
/// `<meta name="cover">` names (EPUB 2). One that is missing or not a usable JPEG/PNG is a note,
/// not an error: the cover is not the book, and `--cover` gives another.
fn read_cover<R: Read + Seek>(
    ar: &mut Archive<'_, R>,
    package: &Package,
    opf_dir: &str,
    notes: &mut Vec<String>,
) -> Result<Option<Cover>, ScriptError> {
    let marked = package
        .manifest
        .values()
        .filter(|i| i.properties.split_whitespace().any(|p| p == "cover-image"))
        .min_by(|a, b| a.href.cmp(&b.href));
    let Some(item) = marked.or_else(|| {
        package
            .cover_meta
            .as_ref()
            .and_then(|id| package.manifest.get(id))
    }) else {
        return Ok(None);
    };
    let name = resolve(opf_dir, &item.href).0;
    let book = ar.path.display();
    let reason = match ar.read(&name)? {
        None => "is named as the cover but is not in the archive".to_owned(),
        Some(bytes) => match Cover::from_bytes(bytes) {
            Ok(cover) => return Ok(Some(cover)),
            Err(e) => e,
        },
    };
    notes.push(format!(
        "{book}: {name} (the book's cover) {reason}; the output has no cover (give one with --cover IMAGE)"
    ));
    Ok(None)
}

/// The archive, the package file's name and the package, once the archive has passed the checks
/// that come before reading any of the book: ZIP bomb limits, `container.xml`, DRM.
fn open_package<R: Read + Seek>(
    path: &Path,
    data: R,
) -> Result<(Archive<'_, R>, String, Package), ScriptError> {
    let zip = ZipArchive::new(data).map_err(|e| {
        fail(
            path,
            "",
            &format!("is not a readable EPUB (corrupt ZIP: {e}); download or export it again"),
        )
    })?;
    if zip.len() > MAX_ENTRIES {
        return Err(fail(
            path,
            "",
            &format!("has {} ZIP entries, more than {MAX_ENTRIES}", zip.len()),
        ));
    }
    let mut ar = Archive {
        zip,
        path,
        read_total: 0,
    };
    let container = ar.text("META-INF/container.xml")?.ok_or_else(|| {
        fail(
            path,
            "META-INF/container.xml",
            "is missing, so this is not an EPUB (every EPUB names its package file there)",
        )
    })?;
    let opf_path = rootfile(path, &container)?;
    if let Some(enc) = ar.text("META-INF/encryption.xml")? {
        check_encryption(path, &enc)?;
    }
    let opf = ar.text(&opf_path)?.ok_or_else(|| {
        fail(
            path,
            &opf_path,
            "is named by META-INF/container.xml but is not in the archive",
        )
    })?;
    let package = parse_opf(path, &opf_path, &opf)?;
    Ok((ar, opf_path, package))
}

/// The EPUB 2 guide's references as marks, their types named as the landmarks name them.
fn guide_marks<'p>(package: &'p Package, opf_dir: &'p str) -> impl Iterator<Item = Mark> + 'p {
    package.guide.iter().map(move |(kind, href)| {
        let kind = kind.strip_prefix("other.").unwrap_or(kind);
        let kind = GUIDE_TYPES
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(kind, |(_, t)| *t);
        let (file, fragment) = resolve(opf_dir, href);
        Mark {
            file,
            fragment,
            types: vec![kind.to_owned()],
        }
    })
}

/// Where `--matter body` starts reading: the spine index of the landmarks' (or guide's) body
/// matter.
fn body_start(marks: &[Mark], package: &Package, opf_dir: &str) -> Option<usize> {
    marks
        .iter()
        .find(|m| m.types.iter().any(|t| t == "bodymatter"))
        .and_then(|m| {
            package.spine.iter().position(|(idref, _)| {
                package
                    .manifest
                    .get(idref)
                    .is_some_and(|i| resolve(opf_dir, &i.href).0 == m.file)
            })
        })
}

/// What the table of contents and the landmarks say of one spine file, gathered before the
/// file is read so that [`read_xhtml`] looks each element up by id.
struct FileTargets<'t> {
    /// An entry for the whole file has entries nested under it.
    parent: bool,
    /// Titles of the entries for the whole file, outermost first.
    file_titles: Vec<&'t str>,
    /// Element ids where an entry starts a chapter, with its titles.
    ids: HashMap<&'t str, Vec<&'t str>>,
    /// Semantics given element ids ("" for the whole file).
    types: HashMap<&'t str, Vec<&'t str>>,
}

impl<'t> FileTargets<'t> {
    fn new(toc: &'t [TocEntry], marks: &'t [Mark], name: &str) -> Self {
        let targets: Vec<&TocEntry> = toc.iter().filter(|t| t.file == name).collect();
        let parent = targets.iter().any(|t| t.fragment.is_none() && t.parent);
        let file_titles: Vec<&str> = targets
            .iter()
            .filter(|t| t.fragment.is_none())
            .map(|t| t.title.as_str())
            .collect();
        let mut ids: HashMap<&str, Vec<&str>> = HashMap::new();
        for t in &targets {
            if let Some(f) = &t.fragment {
                ids.entry(f.as_str()).or_default().push(&t.title);
            }
        }
        let mut types: HashMap<&str, Vec<&str>> = HashMap::new();
        for m in marks.iter().filter(|m| m.file == name) {
            let key = m.fragment.as_deref().unwrap_or("");
            types
                .entry(key)
                .or_default()
                .extend(m.types.iter().map(String::as_str));
        }
        FileTargets {
            parent,
            file_titles,
            ids,
            types,
        }
    }
}

/// The notes read at the end appended (under "Notes" unless a chapter names them), Roman
/// headings spoken, and what was left out noted.
fn finish_book(
    mut book: Book,
    mut later: Later,
    skipped: &Skipped,
    path: &Path,
    options: &BookOptions,
) -> Book {
    if let Some(first) = later.book.segments.first_mut()
        && first.chapter.is_none()
    {
        first.chapter = Some("Notes".to_owned());
    }
    book.segments.append(&mut later.book.segments);
    book.speak_roman_headings(false);
    if let Some(note) = skipped.note(path) {
        book.notes.push(note);
    }
    book.notes.extend(skipped.matter_note(path, options));
    book
}

/// Starts a chapter, or joins a pending one ("Part One" and "The Storm" at the same paragraph
/// → "Part One: The Storm"); a nested entry already carries its parent's title.
fn start_chapter(chapter: &mut Option<String>, title: &str) {
    let title = super::collapse(title);
    if title.is_empty() {
        return;
    }
    *chapter = Some(match chapter.take() {
        Some(prev) if prev != title && !title.starts_with(&format!("{prev}: ")) => {
            format!("{prev}: {title}")
        }
        _ => title,
    });
}

/// Notes read at the end of the book (`--notes end`), with their own pending chapter.
#[derive(Default)]
struct Later {
    book: Book,
    chapter: Option<String>,
}

/// What was left out, for the note.
#[derive(Default)]
struct Skipped {
    images: usize,
    scripts: usize,
    other: usize,
    items: usize,
    non_linear: usize,
    /// Front and back matter left out, by name ("imprint", "copyright page").
    parts: Vec<String>,
    /// Note sections left out (`--notes skip`) or moved to the end (`end`).
    notes: usize,
    /// Note references ("1") not read.
    markers: usize,
}

impl Skipped {
    fn note(&self, path: &Path) -> Option<String> {
        let parts: Vec<String> = [
            (self.images, "images"),
            (self.scripts, "scripts or styles"),
            (
                self.other,
                "other non-prose elements (nav, SVG, MathML, media)",
            ),
            (
                self.items,
                "spine items that are not prose (nav, non-XHTML)",
            ),
            (self.non_linear, "non-linear spine items (linear=\"no\")"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        (!parts.is_empty()).then(|| format!("{}: skipped {}", path.display(), parts.join(", ")))
    }

    /// What `--matter` and `--notes` left out, and how to keep it.
    fn matter_note(&self, path: &Path, options: &BookOptions) -> Vec<String> {
        let mut out = Vec::new();
        if !self.parts.is_empty() {
            let keep = match options.matter {
                Matter::Body => "--matter book or all keeps them",
                _ => "--matter all keeps them",
            };
            // Each name once, in order, with how many there were: "introduction (5)".
            let mut names: Vec<(&str, usize)> = Vec::new();
            for part in &self.parts {
                match names.iter_mut().find(|(n, _)| n == part) {
                    Some((_, count)) => *count += 1,
                    None => names.push((part, 1)),
                }
            }
            let names: Vec<String> = names
                .iter()
                .map(|(n, c)| match c {
                    1 => (*n).to_owned(),
                    c => format!("{n} ({c})"),
                })
                .collect();
            out.push(format!(
                "{}: left out {} parts a listener would not want read: {} ({keep})",
                path.display(),
                self.parts.len(),
                names.join(", "),
            ));
        }
        if self.notes > 0 || self.markers > 0 {
            let what = match options.notes {
                NotesMode::Skip => "left out (--notes end reads them at the end)",
                NotesMode::End => "read at the end of the book",
            };
            out.push(format!(
                "{}: {} notes or note sections {what}; {} note references not read",
                path.display(),
                self.notes,
                self.markers,
            ));
        }
        out
    }
}

struct Package {
    title: Option<String>,
    author: Option<String>,
    manifest: HashMap<String, Item>,
    /// The EPUB 2 `<guide>`: (type, href).
    guide: Vec<(String, String)>,
    /// (idref, linear)
    spine: Vec<(String, bool)>,
    /// The manifest id of the NCX (`<spine toc="...">`).
    ncx: Option<String>,
    /// The manifest id of the EPUB 2 cover (`<meta name="cover" content="ID"/>`).
    cover_meta: Option<String>,
}

fn reader(text: &str) -> Reader<&[u8]> {
    let mut r = Reader::from_str(text);
    let c = r.config_mut();
    c.check_end_names = false;
    c.allow_unmatched_ends = true;
    r
}

fn xml_error(path: &Path, name: &str, r: &Reader<&[u8]>, e: impl std::fmt::Display) -> ScriptError {
    fail(
        path,
        &format!("{name}: byte {}", r.error_position()),
        &format!("is not well-formed XML ({e}); repair the book, e.g. with Calibre"),
    )
}

fn local(e: &BytesStart) -> String {
    e.local_name().as_ref().to_ascii_lowercase()
}

/// The value of the attribute whose local name is `name` (any prefix).
fn attr(e: &BytesStart, name: &str) -> Option<String> {
    e.attributes().flatten().find_map(|a| {
        (a.key.local_name().as_ref() == name)
            .then(|| {
                a.normalized_value(XmlVersion::Implicit1_0)
                    .ok()
                    .map(|v| v.into_owned())
            })
            .flatten()
    })
}

fn rootfile(path: &Path, container: &str) -> Result<String, ScriptError> {
    let name = "META-INF/container.xml";
    let mut r = reader(container);
    loop {
        match r.read_event() {
            Ok(Event::Start(e) | Event::Empty(e)) if local(&e) == "rootfile" => {
                if let Some(p) = attr(&e, "full-path") {
                    return Ok(p);
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(xml_error(path, name, &r, e)),
        }
    }
    Err(fail(
        path,
        name,
        "names no package file (<rootfile full-path=\"...\">)",
    ))
}

fn check_encryption(path: &Path, xml: &str) -> Result<(), ScriptError> {
    let name = "META-INF/encryption.xml";
    let mut r = reader(xml);
    let mut algorithm = String::new();
    loop {
        match r.read_event() {
            Ok(Event::Start(e) | Event::Empty(e)) => match local(&e).as_str() {
                "encrypteddata" => algorithm.clear(),
                "encryptionmethod" => algorithm = attr(&e, "Algorithm").unwrap_or_default(),
                "cipherreference" => {
                    let uri = attr(&e, "URI").unwrap_or_default();
                    if !FONT_OBFUSCATION.contains(&algorithm.as_str()) {
                        return Err(fail(
                            path,
                            name,
                            &format!(
                                "declares {uri} encrypted ({algorithm}): the book is DRM-protected and talker cannot read it; use a DRM-free copy"
                            ),
                        ));
                    }
                }
                _ => {}
            },
            Ok(Event::Eof) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(xml_error(path, name, &r, e)),
        }
    }
}

fn parse_opf(path: &Path, name: &str, xml: &str) -> Result<Package, ScriptError> {
    let mut p = Package {
        title: None,
        author: None,
        manifest: HashMap::new(),
        guide: Vec::new(),
        spine: Vec::new(),
        ncx: None,
        cover_meta: None,
    };
    let mut r = reader(xml);
    // Which metadata element's text is being read.
    let mut field: Option<String> = None;
    let mut text = String::new();
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) => {
                let tag = local(&e);
                if matches!(tag.as_str(), "title" | "creator") {
                    field = Some(tag.clone());
                    text.clear();
                } else if tag == "spine" {
                    p.ncx = attr(&e, "toc");
                }
                opf_element(&mut p, &tag, &e);
            }
            Ok(Event::Empty(e)) => {
                let tag = local(&e);
                if tag == "spine" {
                    p.ncx = attr(&e, "toc");
                }
                opf_element(&mut p, &tag, &e);
            }
            Ok(Event::Text(t)) if field.is_some() => text.push_str(&t.xml10_content()),
            Ok(Event::GeneralRef(g)) if field.is_some() => text.push_str(&entity(&g)),
            Ok(Event::End(e)) => {
                let tag = e.local_name().as_ref().to_ascii_lowercase();
                if field.as_deref() == Some(tag.as_str()) {
                    let value = super::collapse(&text);
                    let slot = if tag == "title" {
                        &mut p.title
                    } else {
                        &mut p.author
                    };
                    if slot.is_none() && !value.is_empty() {
                        *slot = Some(value);
                    }
                    field = None;
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(xml_error(path, name, &r, e)),
        }
    }
    if p.spine.is_empty() {
        return Err(fail(
            path,
            name,
            "has an empty spine (<spine> lists no itemref), so the book has no reading order",
        ));
    }
    Ok(p)
}

fn opf_element(p: &mut Package, tag: &str, e: &BytesStart) {
    match tag {
        "item" => {
            if let (Some(id), Some(href)) = (attr(e, "id"), attr(e, "href")) {
                p.manifest.insert(
                    id,
                    Item {
                        href,
                        media_type: attr(e, "media-type").unwrap_or_default(),
                        properties: attr(e, "properties").unwrap_or_default(),
                    },
                );
            }
        }
        "reference" => {
            if let (Some(kind), Some(href)) = (attr(e, "type"), attr(e, "href")) {
                p.guide.push((kind.to_ascii_lowercase(), href));
            }
        }
        // The first `<meta name="cover">` wins, as readers take it.
        "meta"
            if p.cover_meta.is_none()
                && attr(e, "name").is_some_and(|n| n.eq_ignore_ascii_case("cover")) =>
        {
            p.cover_meta = attr(e, "content");
        }
        "itemref" => {
            if let Some(idref) = attr(e, "idref") {
                let linear = attr(e, "linear").is_none_or(|l| l != "no");
                p.spine.push((idref, linear));
            }
        }
        _ => {}
    }
}

/// The table of contents (the EPUB 3 nav document's if it has one, else the NCX's) and the
/// nav's landmarks.
fn read_nav<R: Read + Seek>(
    ar: &mut Archive<R>,
    package: &Package,
    opf_dir: &str,
) -> Result<(Vec<TocEntry>, Vec<Mark>), ScriptError> {
    let nav = package
        .manifest
        .values()
        .find(|i| i.properties.split_whitespace().any(|p| p == "nav"));
    let mut marks = Vec::new();
    if let Some(item) = nav {
        let name = resolve(opf_dir, &item.href).0;
        if let Some(xml) = ar.text(&name)? {
            let (entries, landmarks) = parse_nav(ar.path, &name, &xml)?;
            marks = landmarks;
            if !entries.is_empty() {
                return Ok((entries, marks));
            }
        }
    }
    let ncx = package
        .ncx
        .as_ref()
        .and_then(|id| package.manifest.get(id))
        .or_else(|| {
            package
                .manifest
                .values()
                .find(|i| i.media_type == "application/x-dtbncx+xml")
        });
    if let Some(item) = ncx {
        let name = resolve(opf_dir, &item.href).0;
        if let Some(xml) = ar.text(&name)? {
            return Ok((parse_ncx(ar.path, &name, &xml)?, marks));
        }
    }
    Ok((Vec::new(), marks))
}

/// Titles of the open entries, one a level, so that a nested entry carries its parents'.
#[derive(Default)]
struct Nesting(Vec<String>);

impl Nesting {
    fn entry(&mut self, base: &str, href: &str, title: &str, level: usize) -> Option<TocEntry> {
        let title = super::collapse(title);
        if title.is_empty() || href.is_empty() || level == 0 {
            return None;
        }
        self.0.truncate(level - 1);
        let full = self
            .0
            .iter()
            .map(String::as_str)
            .chain([title.as_str()])
            .collect::<Vec<_>>()
            .join(": ");
        // A skipped level (an entry without a title) leaves no gap in the levels.
        let level = self.0.len() + 1;
        self.0.push(title);
        let (file, fragment) = resolve(base, href);
        Some(TocEntry {
            file,
            fragment,
            title: full,
            level,
            parent: false,
        })
    }
}

fn parse_nav(
    path: &Path,
    name: &str,
    xml: &str,
) -> Result<(Vec<TocEntry>, Vec<Mark>), ScriptError> {
    let base = parent(name);
    let mut r = reader(xml);
    let mut entries = Vec::new();
    let mut marks = Vec::new();
    let mut nesting = Nesting::default();
    // Depth inside the <nav> being read; the first toc nav wins over a second one.
    let mut in_nav = 0usize;
    let mut landmarks = false;
    let mut seen_toc = false;
    // Open <ol>s inside the toc nav: an entry's level.
    let mut lists = 0usize;
    let mut link: Option<(String, String)> = None;
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) => {
                let tag = local(&e);
                if in_nav > 0 {
                    in_nav += 1;
                } else if tag == "nav" {
                    let kinds = epub_types(&e);
                    if kinds.iter().any(|k| k == "toc") && !seen_toc {
                        seen_toc = true;
                        landmarks = false;
                        in_nav = 1;
                    } else if kinds.iter().any(|k| k == "landmarks") {
                        landmarks = true;
                        in_nav = 1;
                    }
                }
                if in_nav > 0 && tag == "ol" {
                    lists += 1;
                }
                if in_nav > 0 && tag == "a" {
                    let href = attr(&e, "href").unwrap_or_default();
                    if landmarks {
                        let (file, fragment) = resolve(base, &href);
                        marks.push(Mark {
                            file,
                            fragment,
                            types: epub_types(&e),
                        });
                    } else {
                        link = Some((href, String::new()));
                    }
                }
            }
            Ok(Event::End(e)) => {
                if in_nav > 0 {
                    in_nav -= 1;
                    let tag = e.local_name().as_ref().to_ascii_lowercase();
                    if tag == "ol" {
                        lists = lists.saturating_sub(1);
                    }
                    if tag == "a"
                        && let Some((href, title)) = link.take()
                    {
                        entries.extend(nesting.entry(base, &href, &title, lists));
                    }
                    if in_nav == 0 {
                        lists = 0;
                    }
                }
            }
            Ok(Event::Text(t)) => {
                if let Some((_, title)) = &mut link {
                    title.push_str(&t.xml10_content());
                }
            }
            Ok(Event::GeneralRef(g)) => {
                if let Some((_, title)) = &mut link {
                    title.push_str(&entity(&g));
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(xml_error(path, name, &r, e)),
        }
    }
    Ok((entries, marks))
}

fn parse_ncx(path: &Path, name: &str, xml: &str) -> Result<Vec<TocEntry>, ScriptError> {
    let base = parent(name);
    let mut r = reader(xml);
    let mut entries = Vec::new();
    let mut nesting = Nesting::default();
    let (mut in_label, mut in_text) = (false, false);
    let mut depth = 0usize;
    let mut title = String::new();
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) => match local(&e).as_str() {
                "navpoint" => {
                    depth += 1;
                    title.clear();
                }
                "navlabel" => in_label = true,
                "text" if in_label => in_text = true,
                "content" => entries.extend(nesting.entry(
                    base,
                    &attr(&e, "src").unwrap_or_default(),
                    &title,
                    depth,
                )),
                _ => {}
            },
            Ok(Event::Empty(e)) if local(&e) == "content" => entries.extend(nesting.entry(
                base,
                &attr(&e, "src").unwrap_or_default(),
                &title,
                depth,
            )),
            Ok(Event::End(e)) => match e.local_name().as_ref().to_ascii_lowercase().as_str() {
                "navpoint" => depth = depth.saturating_sub(1),
                "navlabel" => in_label = false,
                "text" => in_text = false,
                _ => {}
            },
            Ok(Event::Text(t)) if in_text => title.push_str(&t.xml10_content()),
            Ok(Event::GeneralRef(g)) if in_text => title.push_str(&entity(&g)),
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => return Err(xml_error(path, name, &r, e)),
        }
    }
    Ok(entries)
}

/// The element's `epub:type` values (any prefix but none; a plain `type` is HTML's), with its
/// DPUB-ARIA `role` ("doc-endnotes" → "endnotes").
fn epub_types(e: &BytesStart) -> Vec<String> {
    let mut out = Vec::new();
    for a in e.attributes().flatten() {
        let key = a.key;
        let value = || {
            a.normalized_value(XmlVersion::Implicit1_0)
                .map(|v| v.into_owned())
                .unwrap_or_default()
        };
        if key.prefix().is_some() && key.local_name().as_ref() == "type" {
            out.extend(value().split_whitespace().map(str::to_owned));
        } else if key.as_ref() == "role" {
            out.extend(
                value()
                    .split_whitespace()
                    .filter_map(|r| r.strip_prefix("doc-"))
                    .map(str::to_owned),
            );
        }
    }
    out
}

struct XhtmlContext<'a> {
    path: &'a Path,
    name: &'a str,
    /// Element ids where a table-of-contents entry starts a chapter, with its titles.
    ids: &'a HashMap<&'a str, Vec<&'a str>>,
    /// Semantics the landmarks or the guide give element ids ("" for the whole file).
    types: &'a HashMap<&'a str, Vec<&'a str>>,
    options: &'a BookOptions,
    /// No table of contents: headings start chapters.
    use_headings: bool,
    /// The title of the chapter this file starts, if it starts one.
    file_title: Option<&'a str>,
    title: Option<String>,
    author: Option<String>,
    /// The number of segments before this file.
    item_start: usize,
    /// `--matter body` and this file comes before the body matter the landmarks name.
    before_body: bool,
}

/// A paragraph being gathered: as printed, and as spoken (a heading's Roman ordinal in words).
#[derive(Default)]
struct Buf {
    shown: String,
    said: String,
}

impl Buf {
    fn push_str(&mut self, text: &str) {
        self.shown.push_str(text);
        self.said.push_str(text);
    }

    fn clear(&mut self) {
        self.shown.clear();
        self.said.clear();
    }

    fn flush(&mut self, book: &mut Book, chapter: &mut Option<String>) {
        if !self.shown.trim().is_empty() {
            book.push(&self.shown, DEFAULT_PAUSE_MS, chapter);
        }
        self.clear();
    }
}

/// Why an element is not read where it stands.
enum Verdict {
    Read,
    /// A note reference or a backlink: not a word of the text.
    Marker {
        noteref: bool,
    },
    /// A note or a section of notes (`--notes`).
    Notes,
    /// Front or back matter (`--matter`), by name.
    Part(String),
    /// The title page, announced instead.
    Titlepage,
}

fn verdict(types: &[&str], options: &BookOptions, has_title: bool) -> Verdict {
    let has = |list: &[&str]| types.iter().find(|t| list.contains(t)).copied();
    if let Some(t) = has(MARKERS) {
        return Verdict::Marker {
            noteref: t == "noteref",
        };
    }
    if has(NOTES).is_some() {
        return Verdict::Notes;
    }
    let leave = match options.matter {
        Matter::All => None,
        Matter::Book => has(NOT_READ),
        // The specific name where there is one: "dedication" rather than "front matter".
        Matter::Body => has(NOT_READ)
            .or_else(|| has(FRONT_AND_BACK))
            .or_else(|| has(MATTER)),
    };
    if let Some(name) = leave {
        return Verdict::Part(part_name(name));
    }
    if has_title && types.contains(&"titlepage") {
        return Verdict::Titlepage;
    }
    Verdict::Read
}

/// A part's name in the warning: "copyright-page" → "copyright page", "toc" → "table of
/// contents", "frontmatter" → "front matter".
fn part_name(kind: &str) -> String {
    match kind {
        "frontmatter" => "front matter",
        "backmatter" => "back matter",
        "toc" => "table of contents",
        "loi" => "list of illustrations",
        "lot" => "list of tables",
        "loa" => "list of audio",
        "lov" => "list of videos",
        "titlepage" => "title page",
        "halftitlepage" => "half-title page",
        k => return k.replace('-', " "),
    }
    .to_owned()
}

/// Reads one XHTML file into `book` (notes deferred into `later`); true if it left something
/// out by `--matter` or `--notes`.
fn read_xhtml(
    ctx: &XhtmlContext,
    xml: &str,
    book: &mut Book,
    chapter: &mut Option<String>,
    skipped: &mut Skipped,
    later: &mut Later,
) -> Result<bool, ScriptError> {
    let mut r = reader(xml);
    let mut x = XhtmlReader {
        ctx,
        book,
        chapter,
        skipped,
        later,
        buf: Buf::default(),
        skip: 0,
        depth: 0,
        heading: None,
        romans: Vec::new(),
        deferred: None,
        dropped: None,
        left_out: false,
    };
    loop {
        let event = r
            .read_event()
            .map_err(|e| xml_error(ctx.path, ctx.name, &r, e))?;
        let opening = matches!(event, Event::Start(_));
        match event {
            Event::Start(e) | Event::Empty(e) if x.skip > 0 => {
                if opening {
                    x.skip += 1;
                }
                count_image(&local(&e), x.skipped);
            }
            Event::End(_) if x.skip > 0 => x.skip -= 1,
            _ if x.skip > 0 => {}
            Event::Start(e) => x.start(&e),
            Event::Empty(e) => x.empty(&e),
            Event::End(e) => x.end(&e),
            Event::Text(t) => x.buf.push_str(&t.xml10_content()),
            Event::CData(t) => x.buf.push_str(&t),
            Event::GeneralRef(g) => x.buf.push_str(&entity(&g)),
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(x.finish())
}

/// The state of reading one XHTML file. A struct, so that each kind of XML event has a method of
/// its own while they share what the file has opened so far.
struct XhtmlReader<'a, 'c> {
    ctx: &'a XhtmlContext<'c>,
    book: &'a mut Book,
    chapter: &'a mut Option<String>,
    skipped: &'a mut Skipped,
    later: &'a mut Later,
    buf: Buf,
    /// Depth inside a skipped element (0: reading).
    skip: usize,
    /// Open elements being read, and where special ones opened.
    depth: usize,
    /// The level of the heading being read.
    heading: Option<u8>,
    /// Roman ordinals open in a heading: (depth, where they start in `buf.said`).
    romans: Vec<(usize, usize)>,
    /// The depth of the notes being read into `later` (`--notes end`).
    deferred: Option<usize>,
    /// Inside front or back matter that `--matter body` leaves out: read into a book that is
    /// dropped, so that notes in it still go where `--notes` says; its name in `skipped.parts`,
    /// "front matter" until a part inside names it better.
    dropped: Option<(usize, usize, Later)>,
    left_out: bool,
}

impl XhtmlReader<'_, '_> {
    fn flush(&mut self) {
        self.buf.flush(self.book, self.chapter);
    }

    /// Puts the notes read at the end in place of the book, or the book back: notes read while
    /// swapped in go where `--notes end` says.
    fn swap_later(&mut self) {
        std::mem::swap(self.book, &mut self.later.book);
        std::mem::swap(self.chapter, &mut self.later.chapter);
    }

    fn start(&mut self, e: &BytesStart) {
        let tag = local(e);
        if SKIPPED.contains(&tag.as_str()) {
            self.flush();
            match tag.as_str() {
                "script" | "style" => self.skipped.scripts += 1,
                "svg" => self.skipped.images += 1,
                "head" => {}
                _ => self.skipped.other += 1,
            }
            self.skip = 1;
            return;
        }
        let owned = epub_types(e);
        let types = element_types(self.ctx, &tag, e, &owned);
        if !self.enter(verdict(&types, self.ctx.options, self.ctx.title.is_some())) {
            return;
        }
        self.depth += 1;
        element_start(
            self.ctx,
            e,
            &tag,
            &mut self.buf,
            self.book,
            self.chapter,
            self.skipped,
        );
        if let Some(level) = heading_level(&tag) {
            self.flush();
            self.heading = Some(level);
        } else if BLOCKS.contains(&tag.as_str()) {
            self.flush();
        }
        if self.heading.is_some() && types.contains(&"z3998:roman") {
            self.romans.push((self.depth, self.buf.said.len()));
        }
    }

    /// Acts on what `--matter` and `--notes` say of an element being opened; true if its
    /// content is read (maybe into the notes or the dropped matter), false if it is skipped.
    fn enter(&mut self, verdict: Verdict) -> bool {
        match verdict {
            Verdict::Marker { noteref } => {
                self.skipped.markers += usize::from(noteref);
                self.skip = 1;
                return false;
            }
            Verdict::Notes if self.deferred.is_some() => {}
            Verdict::Notes if self.ctx.options.notes == NotesMode::Skip => {
                self.flush();
                self.skipped.notes += 1;
                self.left_out = true;
                self.skip = 1;
                return false;
            }
            Verdict::Notes => {
                self.flush();
                self.skipped.notes += 1;
                self.left_out = true;
                let main = self.dropped.as_ref().map_or(&*self.book, |d| &d.2.book);
                if main.segments.len() == self.ctx.item_start && self.later.chapter.is_none() {
                    self.later.chapter = self.ctx.file_title.map(str::to_owned);
                }
                self.swap_later();
                self.deferred = Some(self.depth + 1);
            }
            Verdict::Part(name) if self.dropped.is_some() => {
                if let Some((_, i, _)) = &self.dropped
                    && self.skipped.parts[*i].ends_with(" matter")
                    && !name.ends_with(" matter")
                {
                    self.skipped.parts[*i] = name;
                }
                self.skip = 1;
                return false;
            }
            Verdict::Part(name) if name.ends_with(" matter") => {
                self.flush();
                self.left_out = true;
                let mut scratch = Later::default();
                std::mem::swap(self.book, &mut scratch.book);
                std::mem::swap(self.chapter, &mut scratch.chapter);
                self.dropped = Some((self.depth + 1, self.skipped.parts.len(), scratch));
                self.skipped.parts.push(name);
            }
            Verdict::Part(name) => {
                self.flush();
                self.skipped.parts.push(name);
                self.left_out = true;
                self.skip = 1;
                return false;
            }
            Verdict::Titlepage => {
                self.flush();
                announce_title(self.ctx, self.book, self.chapter);
                self.skip = 1;
                return false;
            }
            Verdict::Read => {}
        }
        true
    }

    fn empty(&mut self, e: &BytesStart) {
        let tag = local(e);
        match tag.as_str() {
            "script" | "style" => self.skipped.scripts += 1,
            "svg" => self.skipped.images += 1,
            "object" | "video" | "audio" => self.skipped.other += 1,
            _ => {}
        }
        element_start(
            self.ctx,
            e,
            &tag,
            &mut self.buf,
            self.book,
            self.chapter,
            self.skipped,
        );
        if BLOCKS.contains(&tag.as_str()) {
            self.flush();
        }
    }

    fn end(&mut self, e: &BytesEnd) {
        let tag = e.local_name().as_ref().to_ascii_lowercase();
        if let Some(&(at, from)) = self.romans.last()
            && at == self.depth
        {
            self.romans.pop();
            if let Some(words) = self
                .buf
                .said
                .get(from..)
                .and_then(|n| crate::text::roman_heading(n, true))
            {
                self.buf.said.truncate(from);
                self.buf.said.push_str(&words);
            }
        }
        if let Some(level) = heading_level(&tag) {
            let ctx = self.ctx;
            if ctx.use_headings && level <= ctx.options.chapter_depth && self.heading.is_some() {
                start_chapter(self.chapter, &self.buf.shown);
            }
            self.heading = None;
            if !self.buf.shown.trim().is_empty() {
                self.book
                    .push_heading(&self.buf.shown, Some(&self.buf.said), level, self.chapter);
            }
            self.buf.clear();
        } else if BLOCKS.contains(&tag.as_str()) {
            self.flush();
        }
        if self.deferred == Some(self.depth) {
            self.flush();
            self.swap_later();
            self.deferred = None;
        }
        if self.dropped.as_ref().is_some_and(|d| d.0 == self.depth) {
            self.flush();
            restore(self.book, self.chapter, self.dropped.take(), self.skipped);
        }
        self.depth = self.depth.saturating_sub(1);
    }

    /// The end of the file; true if something was left out.
    fn finish(mut self) -> bool {
        self.flush();
        // A file whose elements do not close: what was swapped in is swapped back.
        if self.deferred.is_some() {
            self.swap_later();
        }
        restore(self.book, self.chapter, self.dropped, self.skipped);
        self.left_out
    }
}

/// The semantics of an element being opened: its own `epub:type`s and `role`s, those the
/// landmarks or the guide give its id, and for `body` those given its file (and front matter
/// before the landmarks' body matter).
fn element_types<'x>(
    ctx: &'x XhtmlContext,
    tag: &str,
    e: &BytesStart,
    owned: &'x [String],
) -> Vec<&'x str> {
    let mut types: Vec<&str> = owned.iter().map(String::as_str).collect();
    if tag == "body" {
        types.extend(ctx.types.get("").into_iter().flatten());
        if ctx.before_body {
            types.push("frontmatter");
        }
    }
    if let Some(id) = attr(e, "id") {
        types.extend(ctx.types.get(id.as_str()).into_iter().flatten());
    }
    types
}

/// Ends front or back matter being dropped: the book read before it is back in place, and a part
/// that held nothing but notes is not counted as left out.
fn restore(
    book: &mut Book,
    chapter: &mut Option<String>,
    dropped: Option<(usize, usize, Later)>,
    skipped: &mut Skipped,
) {
    let Some((_, i, mut kept)) = dropped else {
        return;
    };
    std::mem::swap(book, &mut kept.book);
    std::mem::swap(chapter, &mut kept.chapter);
    if kept.book.segments.is_empty() && skipped.parts[i].ends_with(" matter") {
        skipped.parts.remove(i);
    }
}

/// The title page as one line, "Title, by Author"; a chapter this file starts is named by the
/// book's title rather than "Titlepage".
fn announce_title(ctx: &XhtmlContext, book: &mut Book, chapter: &mut Option<String>) {
    let Some(title) = &ctx.title else { return };
    if chapter.is_some() && book.segments.len() == ctx.item_start {
        *chapter = Some(title.clone());
    }
    let line = match &ctx.author {
        Some(author) => format!("{title}, by {author}"),
        None => title.clone(),
    };
    book.push(&line, crate::book::HEADING_PAUSE_MS, chapter);
}

/// Line breaks, images and table-of-contents targets (an `id` a chapter starts at).
fn element_start(
    ctx: &XhtmlContext,
    e: &BytesStart,
    tag: &str,
    buf: &mut Buf,
    book: &mut Book,
    chapter: &mut Option<String>,
    skipped: &mut Skipped,
) {
    count_image(tag, skipped);
    if tag == "br" {
        buf.push_str(" ");
    }
    if let Some(titles) = attr(e, "id").and_then(|id| ctx.ids.get(id.as_str())) {
        buf.flush(book, chapter);
        for t in titles {
            start_chapter(chapter, t);
        }
    }
}

fn count_image(tag: &str, skipped: &mut Skipped) {
    if matches!(tag, "img" | "image") {
        skipped.images += 1;
    }
}

fn heading_level(tag: &str) -> Option<u8> {
    match tag.as_bytes() {
        [b'h', d @ b'1'..=b'6'] => Some(d - b'0'),
        _ => None,
    }
}

/// A character or entity reference as text. XHTML books use HTML's named entities without
/// declaring them; the common ones are known, others read as a space.
fn entity(r: &quick_xml::events::BytesRef) -> String {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return c.to_string();
    }
    let s = match &**r {
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" | "rsquo" | "lsquo" => "'",
        "ldquo" | "rdquo" => "\"",
        "mdash" => "—",
        "ndash" => "–",
        "hellip" => "…",
        "shy" | "zwnj" | "zwj" => "",
        "eacute" => "é",
        "egrave" => "è",
        "aacute" => "á",
        "agrave" => "à",
        "ouml" => "ö",
        "uuml" => "ü",
        "auml" => "ä",
        "ccedil" => "ç",
        "szlig" => "ß",
        "copy" => "©",
        _ => " ",
    };
    s.to_owned()
}

/// The folder of an archive path ("OEBPS/content.opf" → "OEBPS").
fn parent(name: &str) -> &str {
    name.rfind('/').map_or("", |i| &name[..i])
}

/// An href relative to `base` → the archive path (percent-decoded, `.`/`..` resolved) and its
/// fragment.
fn resolve(base: &str, href: &str) -> (String, Option<String>) {
    let (file, fragment) = match href.split_once('#') {
        Some((f, frag)) => (f, Some(frag.to_owned()).filter(|f| !f.is_empty())),
        None => (href, None),
    };
    let mut parts: Vec<String> = if file.starts_with('/') {
        Vec::new()
    } else {
        base.split('/')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    };
    for part in file.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(percent_decode(p)),
        }
    }
    (parts.join("/"), fragment)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zip_bombs_are_refused() {
        use std::io::Write;
        let mut buf = std::io::Cursor::new(Vec::new());
        {
            let mut z = zip::ZipWriter::new(&mut buf);
            let opts = zip::write::SimpleFileOptions::default();
            z.start_file("META-INF/container.xml", opts).unwrap();
            let zeros = vec![b' '; 1 << 20];
            for _ in 0..65 {
                z.write_all(&zeros).unwrap();
            }
            z.finish().unwrap();
        }
        let bytes = buf.into_inner();
        assert!(bytes.len() < 1 << 20, "{} bytes compressed", bytes.len());
        let e = read_epub_from(
            Path::new("bomb.epub"),
            std::io::Cursor::new(bytes),
            &BookOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.at, "META-INF/container.xml");
        assert!(e.message.contains("ZIP bomb"), "{e}");
    }

    /// An EPUB 3 of `files` (name, body) in this spine order, with this nav document.
    fn epub(files: &[(&str, &str)], nav: &str, options: &BookOptions) -> Book {
        use std::io::Write;
        let mut buf = std::io::Cursor::new(Vec::new());
        {
            let mut z = zip::ZipWriter::new(&mut buf);
            let opts = zip::write::SimpleFileOptions::default();
            let items: String = files
                .iter()
                .map(|(f, _)| {
                    format!(r#"<item id="{f}" href="{f}" media-type="application/xhtml+xml"/>"#)
                })
                .collect();
            let spine: String = files
                .iter()
                .map(|(f, _)| format!(r#"<itemref idref="{f}"/>"#))
                .collect();
            let mut put = |name: &str, text: &str| {
                z.start_file(name, opts).unwrap();
                z.write_all(text.as_bytes()).unwrap();
            };
            put(
                "META-INF/container.xml",
                r#"<container><rootfiles><rootfile full-path="content.opf"/></rootfiles></container>"#,
            );
            put(
                "content.opf",
                &format!(
                    r#"<package version="3.0"><metadata><title>Book</title></metadata><manifest><item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>{items}</manifest><spine>{spine}</spine></package>"#
                ),
            );
            put(
                "nav.xhtml",
                &format!(
                    r#"<html xmlns:epub="http://www.idpf.org/2007/ops"><body><nav epub:type="toc">{nav}</nav></body></html>"#
                ),
            );
            for (f, body) in files {
                put(
                    f,
                    &format!(
                        r#"<html xmlns:epub="http://www.idpf.org/2007/ops"><body>{body}</body></html>"#
                    ),
                );
            }
            z.finish().unwrap();
        }
        buf.set_position(0);
        read_epub_from(Path::new("t.epub"), buf, options).unwrap()
    }

    fn chapters(b: &Book) -> Vec<(&str, &str)> {
        b.segments
            .iter()
            .filter_map(|s| Some((s.chapter.as_deref()?, s.text.as_str())))
            .collect()
    }

    /// A left-out file's chapter starts nowhere, unless entries are nested under it: then it
    /// titles what it holds.
    #[test]
    fn chapters_of_left_out_files() {
        let files = [
            (
                "imprint.xhtml",
                r#"<section epub:type="imprint"><p>Made by us.</p></section>"#,
            ),
            (
                "half.xhtml",
                r#"<section epub:type="halftitlepage"><h2>Book One</h2></section>"#,
            ),
            ("c1.xhtml", "<p>First words.</p>"),
        ];
        let nav = r#"<ol><li><a href="imprint.xhtml">Imprint</a></li>
            <li><a href="half.xhtml">Book One</a><ol><li><a href="c1.xhtml">Chapter 1</a></li></ol></li></ol>"#;
        let deep = epub(&files, nav, &BookOptions::default());
        assert_eq!(chapters(&deep), [("Book One: Chapter 1", "First words.")]);
        let shallow = BookOptions {
            chapter_depth: 1,
            ..BookOptions::default()
        };
        assert_eq!(
            chapters(&epub(&files, nav, &shallow)),
            [("Book One", "First words.")]
        );
        let all = BookOptions {
            matter: Matter::All,
            ..BookOptions::default()
        };
        assert_eq!(
            chapters(&epub(&files, nav, &all)),
            [
                ("Imprint", "Made by us."),
                ("Book One", "Book One"),
                ("Book One: Chapter 1", "First words.")
            ]
        );
    }

    /// HTML's own `type` (an ordered list's "I") is no semantics; DPUB-ARIA roles are.
    #[test]
    fn only_namespaced_types_and_roles_count() {
        let files = [(
            "c.xhtml",
            r#"<ol type="I"><li>kept</li></ol><section role="doc-colophon"><p>gone</p></section>"#,
        )];
        let b = epub(&files, "", &BookOptions::default());
        let texts: Vec<&str> = b.segments.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, ["kept"]);
        assert!(
            b.notes.iter().any(|n| n.contains("colophon")),
            "{:?}",
            b.notes
        );
    }

    #[test]
    fn hrefs_resolve() {
        assert_eq!(
            resolve("OEBPS", "text/ch%201.xhtml#s2"),
            ("OEBPS/text/ch 1.xhtml".into(), Some("s2".into()))
        );
        assert_eq!(resolve("OEBPS/nav", "../ch1.xhtml").0, "OEBPS/ch1.xhtml");
        assert_eq!(resolve("", "ch1.xhtml#").1, None);
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
