//! EPUB 2 and 3: ZIP through `zip`, every XML file (container, OPF, nav, NCX, XHTML) through
//! `quick-xml`'s streaming reader.
//!
//! - Spine order; each XHTML paragraph (`p`, `li`, `blockquote`, `div` text, `h1`–`h6`, ...)
//!   becomes a segment.
//! - Chapters start where the EPUB 3 nav document (`<nav epub:type="toc">`), else the EPUB 2 NCX,
//!   points (a file, or an element id inside it), titled as the table of contents says; nested
//!   entries are flattened in reading order, and entries that start at the same paragraph are
//!   joined ("Part One: The Storm"). A book without a table of contents gets its chapters from
//!   its `h1`/`h2` headings. Headings are read aloud either way.
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
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;
use zip::ZipArchive;

use super::{Book, HEADING_PAUSE_MS, MAX_TEXT_BYTES, fail};
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

/// A table-of-contents entry: a file, maybe an element id in it, and its title.
struct TocEntry {
    file: String,
    fragment: Option<String>,
    title: String,
}

pub fn read_epub(path: &Path) -> Result<Book, ScriptError> {
    let file = File::open(path).map_err(|e| fail(path, "", &format!("cannot open: {e}")))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(fail(
            path,
            "",
            "is not a regular file (a directory or a device); give the path of an .epub",
        ));
    }
    read_epub_from(path, file)
}

/// As [`read_epub`], from any seekable bytes; `path` only names the book in messages.
pub fn read_epub_from(path: &Path, data: impl Read + Seek) -> Result<Book, ScriptError> {
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
    let opf_dir = parent(&opf_path);

    let toc = read_toc(&mut ar, &package, opf_dir)?;
    let mut book = Book {
        title: package.title.clone(),
        author: package.author.clone(),
        ..Book::default()
    };
    let mut skipped = Skipped::default();
    let use_headings = toc.is_empty();
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
        let targets: Vec<&TocEntry> = toc.iter().filter(|t| t.file == name).collect();
        for t in targets.iter().filter(|t| t.fragment.is_none()) {
            start_chapter(&mut chapter, &t.title);
        }
        let mut ids: HashMap<&str, Vec<&str>> = HashMap::new();
        for t in &targets {
            if let Some(f) = &t.fragment {
                ids.entry(f.as_str()).or_default().push(&t.title);
            }
        }
        let ctx = XhtmlContext {
            path,
            name: &name,
            ids: &ids,
            use_headings,
        };
        read_xhtml(&ctx, &text, &mut book, &mut chapter, &mut skipped)?;
    }
    if let Some(note) = skipped.note(path) {
        book.notes.push(note);
    }
    Ok(book)
}

fn start_chapter(chapter: &mut Option<String>, title: &str) {
    let title = super::collapse(title);
    if title.is_empty() {
        return;
    }
    *chapter = Some(match chapter.take() {
        Some(prev) if prev != title => format!("{prev}: {title}"),
        _ => title,
    });
}

/// What was left out, for the note.
#[derive(Default)]
struct Skipped {
    images: usize,
    scripts: usize,
    other: usize,
    items: usize,
    non_linear: usize,
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
}

struct Package {
    title: Option<String>,
    author: Option<String>,
    manifest: HashMap<String, Item>,
    /// (idref, linear)
    spine: Vec<(String, bool)>,
    /// The manifest id of the NCX (`<spine toc="...">`).
    ncx: Option<String>,
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
        spine: Vec::new(),
        ncx: None,
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
        "itemref" => {
            if let Some(idref) = attr(e, "idref") {
                let linear = attr(e, "linear").is_none_or(|l| l != "no");
                p.spine.push((idref, linear));
            }
        }
        _ => {}
    }
}

/// The table of contents: the EPUB 3 nav document if there is one, else the NCX.
fn read_toc<R: Read + Seek>(
    ar: &mut Archive<R>,
    package: &Package,
    opf_dir: &str,
) -> Result<Vec<TocEntry>, ScriptError> {
    let nav = package
        .manifest
        .values()
        .find(|i| i.properties.split_whitespace().any(|p| p == "nav"));
    if let Some(item) = nav {
        let name = resolve(opf_dir, &item.href).0;
        if let Some(xml) = ar.text(&name)? {
            let entries = parse_nav(ar.path, &name, &xml)?;
            if !entries.is_empty() {
                return Ok(entries);
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
            return parse_ncx(ar.path, &name, &xml);
        }
    }
    Ok(Vec::new())
}

fn toc_entry(base: &str, href: &str, title: &str) -> Option<TocEntry> {
    let title = super::collapse(title);
    if title.is_empty() || href.is_empty() {
        return None;
    }
    let (file, fragment) = resolve(base, href);
    Some(TocEntry {
        file,
        fragment,
        title,
    })
}

fn parse_nav(path: &Path, name: &str, xml: &str) -> Result<Vec<TocEntry>, ScriptError> {
    let base = parent(name);
    let mut r = reader(xml);
    let mut entries = Vec::new();
    // Depth inside the chosen <nav>; the toc nav wins over landmarks or page lists.
    let mut in_nav = 0usize;
    let mut seen_toc = false;
    let mut link: Option<(String, String)> = None;
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) => {
                let tag = local(&e);
                if in_nav > 0 {
                    in_nav += 1;
                } else if tag == "nav" && !seen_toc {
                    let kind = attr(&e, "type").unwrap_or_default();
                    if kind.split_whitespace().any(|k| k == "toc") {
                        seen_toc = true;
                        in_nav = 1;
                    }
                }
                if in_nav > 0 && tag == "a" {
                    link = Some((attr(&e, "href").unwrap_or_default(), String::new()));
                }
            }
            Ok(Event::End(e)) => {
                if in_nav > 0 {
                    in_nav -= 1;
                    if e.local_name().as_ref().eq_ignore_ascii_case("a")
                        && let Some((href, title)) = link.take()
                    {
                        entries.extend(toc_entry(base, &href, &title));
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
    Ok(entries)
}

fn parse_ncx(path: &Path, name: &str, xml: &str) -> Result<Vec<TocEntry>, ScriptError> {
    let base = parent(name);
    let mut r = reader(xml);
    let mut entries = Vec::new();
    let (mut in_label, mut in_text) = (false, false);
    let mut title = String::new();
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) => match local(&e).as_str() {
                "navpoint" => title.clear(),
                "navlabel" => in_label = true,
                "text" if in_label => in_text = true,
                "content" => entries.extend(toc_entry(
                    base,
                    &attr(&e, "src").unwrap_or_default(),
                    &title,
                )),
                _ => {}
            },
            Ok(Event::Empty(e)) if local(&e) == "content" => entries.extend(toc_entry(
                base,
                &attr(&e, "src").unwrap_or_default(),
                &title,
            )),
            Ok(Event::End(e)) => match e.local_name().as_ref().to_ascii_lowercase().as_str() {
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

struct XhtmlContext<'a> {
    path: &'a Path,
    name: &'a str,
    /// Element ids where a table-of-contents entry starts a chapter, with its titles.
    ids: &'a HashMap<&'a str, Vec<&'a str>>,
    /// No table of contents: `h1`/`h2` start chapters.
    use_headings: bool,
}

fn read_xhtml(
    ctx: &XhtmlContext,
    xml: &str,
    book: &mut Book,
    chapter: &mut Option<String>,
    skipped: &mut Skipped,
) -> Result<(), ScriptError> {
    let mut r = reader(xml);
    let mut buf = String::new();
    // Depth inside a skipped element (0: reading).
    let mut skip = 0usize;
    let mut heading: Option<u8> = None;
    let flush = |buf: &mut String, book: &mut Book, chapter: &mut Option<String>, pause| {
        if !buf.trim().is_empty() {
            book.push(buf, pause, chapter);
        }
        buf.clear();
    };
    loop {
        let event = r
            .read_event()
            .map_err(|e| xml_error(ctx.path, ctx.name, &r, e))?;
        match event {
            Event::Start(e) if skip > 0 => {
                skip += 1;
                count_image(&local(&e), skipped);
            }
            Event::End(_) if skip > 0 => skip -= 1,
            Event::Empty(e) if skip > 0 => count_image(&local(&e), skipped),
            _ if skip > 0 => {}
            Event::Start(e) => {
                let tag = local(&e);
                if SKIPPED.contains(&tag.as_str()) {
                    flush(&mut buf, book, chapter, DEFAULT_PAUSE_MS);
                    match tag.as_str() {
                        "script" | "style" => skipped.scripts += 1,
                        "svg" => skipped.images += 1,
                        "head" => {}
                        _ => skipped.other += 1,
                    }
                    skip = 1;
                    continue;
                }
                element_start(ctx, &e, &tag, &mut buf, book, chapter, skipped);
                if let Some(level) = heading_level(&tag) {
                    flush(&mut buf, book, chapter, DEFAULT_PAUSE_MS);
                    heading = Some(level);
                } else if BLOCKS.contains(&tag.as_str()) {
                    flush(&mut buf, book, chapter, DEFAULT_PAUSE_MS);
                }
            }
            Event::Empty(e) => {
                let tag = local(&e);
                match tag.as_str() {
                    "script" | "style" => skipped.scripts += 1,
                    "svg" => skipped.images += 1,
                    "object" | "video" | "audio" => skipped.other += 1,
                    _ => {}
                }
                element_start(ctx, &e, &tag, &mut buf, book, chapter, skipped);
                if BLOCKS.contains(&tag.as_str()) {
                    flush(&mut buf, book, chapter, DEFAULT_PAUSE_MS);
                }
            }
            Event::End(e) => {
                let tag = e.local_name().as_ref().to_ascii_lowercase();
                if let Some(level) = heading_level(&tag) {
                    if ctx.use_headings && level <= 2 && heading.is_some() {
                        start_chapter(chapter, &buf);
                    }
                    heading = None;
                    flush(&mut buf, book, chapter, HEADING_PAUSE_MS);
                } else if BLOCKS.contains(&tag.as_str()) {
                    flush(&mut buf, book, chapter, DEFAULT_PAUSE_MS);
                }
            }
            Event::Text(t) => buf.push_str(&t.xml10_content()),
            Event::CData(t) => buf.push_str(&t),
            Event::GeneralRef(g) => buf.push_str(&entity(&g)),
            Event::Eof => break,
            _ => {}
        }
    }
    flush(&mut buf, book, chapter, DEFAULT_PAUSE_MS);
    Ok(())
}

/// Line breaks, images and table-of-contents targets (an `id` a chapter starts at).
fn element_start(
    ctx: &XhtmlContext,
    e: &BytesStart,
    tag: &str,
    buf: &mut String,
    book: &mut Book,
    chapter: &mut Option<String>,
    skipped: &mut Skipped,
) {
    count_image(tag, skipped);
    if tag == "br" {
        buf.push(' ');
    }
    if let Some(titles) = attr(e, "id").and_then(|id| ctx.ids.get(id.as_str())) {
        if !buf.trim().is_empty() {
            book.push(buf, DEFAULT_PAUSE_MS, chapter);
        }
        buf.clear();
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
        let e = read_epub_from(Path::new("bomb.epub"), std::io::Cursor::new(bytes)).unwrap_err();
        assert_eq!(e.at, "META-INF/container.xml");
        assert!(e.message.contains("ZIP bomb"), "{e}");
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
