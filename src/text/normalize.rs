//! The normaliser: cleaned text → tokens → spoken words.
//!
//! Input: any text. Output: the same text with numbers, dates, times, money, units, abbreviations, Roman
//! numerals after their cue words and symbols written out as words (see the module docs of `text` for the
//! reading rules). Invariants: never panics; the output contains no ASCII digit; whitespace runs become one
//! space, one line break or one blank line; words it has no rule for pass through unchanged.

use std::borrow::Cow;

use super::abbreviations::{self, Kind};
use super::dates_times::{
    Date, Year, clock_words, day_of_month, is_valid_date, meridiem, month_from_abbrev,
    month_from_name, month_name, parse_clock, small_number,
};
use super::numbers::{cardinal_u64, digits_one_by_one, ordinal_u32};
use super::quantities::{
    expand_any, expand_single, is_phone, mixed_fraction_tail, parse_quantity, prefix_word,
    symbol_word,
};
use super::roman;
use super::tokens::{Gap, Token, tokenize};
use super::typography;
use super::units;

/// Words after which a four-digit number is a year ("in 2010" → "twenty ten").
/// Not "of" or "around": "a total of 2016 votes" and "around 2050 people" are counts, and a year read as a
/// cardinal ("two thousand sixteen") is still right.
const YEAR_WORDS: [&str; 22] = [
    "in", "since", "by", "until", "till", "from", "before", "after", "during", "circa", "c", "ca",
    "year", "early", "late", "mid", "summer", "winter", "spring", "autumn", "through", "ad",
];

/// Words joining two years ("in 2010 and 2012", "from 2010 to 2015").
const YEAR_LINKS: [&str; 6] = ["and", "or", "to", "through", "until", "till"];

/// Era markers after a year.
fn is_era(core: &str) -> bool {
    matches!(
        core,
        "AD" | "BC" | "BCE" | "CE" | "A.D" | "B.C" | "B.C.E" | "C.E"
    )
}

/// Expands `text` for a voice; see the module header.
pub fn normalize(text: &str) -> String {
    let cleaned = typography::clean(text);
    let toks = tokenize(&cleaned);
    let mut n = Normalizer {
        toks: &toks,
        out: String::with_capacity(cleaned.len() + cleaned.len() / 4),
        last_year: None,
    };
    n.run();
    n.out
}

/// What one rule made of one or more tokens.
struct Expansion<'a> {
    text: Cow<'a, str>,
    /// Tokens used, at least one.
    used: usize,
    /// Closing punctuation to write after `text`.
    trail: Cow<'a, str>,
}

impl<'a> Expansion<'a> {
    fn new(text: impl Into<Cow<'a, str>>, used: usize, trail: impl Into<Cow<'a, str>>) -> Self {
        Expansion {
            text: text.into(),
            used,
            trail: trail.into(),
        }
    }
}

struct Normalizer<'t, 'a> {
    toks: &'t [Token<'a>],
    out: String,
    /// Index of the last token read as a year, so "in 2010 and 2012" reads both as years.
    last_year: Option<usize>,
}

/// Emphasis marks are dropped: espeak would say "asterisk".
fn push_punct(out: &mut String, s: &str) {
    out.extend(s.chars().filter(|c| !matches!(c, '*' | '_')));
}

fn is_dash(t: &Token<'_>) -> bool {
    t.lead.is_empty() && t.trail.is_empty() && matches!(t.core, "-" | "–")
}

impl<'t, 'a> Normalizer<'t, 'a> {
    fn run(&mut self) {
        let mut i = 0;
        while i < self.toks.len() {
            let t = self.toks[i];
            if is_dash(&t) {
                self.dash(i);
                i += 1;
                continue;
            }
            let e = self.expand(i);
            let used = e.used.max(1);
            let capitalize_first = self.after_sentence_end()
                && !t.core.starts_with(char::is_lowercase)
                && e.text.starts_with(char::is_lowercase);
            if t.lead.is_empty() && t.core.is_empty() && self.out.ends_with(' ') {
                // Punctuation left alone by a removed emoji or a spaced ellipsis joins the word before it.
                self.out.pop();
            }
            push_punct(&mut self.out, t.lead);
            if capitalize_first {
                // "100 people came." → "One hundred people came.", so the sentence splitter sees a start.
                self.out.push_str(&capitalize(&e.text));
            } else {
                self.out.push_str(&e.text);
            }
            push_punct(&mut self.out, &e.trail);
            self.push_gap(self.toks[(i + used - 1).min(self.toks.len() - 1)].gap);
            i += used;
        }
        let len = self.out.trim_end().len();
        self.out.truncate(len);
    }

    /// True if what was written so far ends a sentence (an abbreviation's period that does not end one has
    /// already been dropped).
    fn after_sentence_end(&self) -> bool {
        self.out
            .trim_end()
            .trim_end_matches(['"', '\'', ')', ']'])
            .ends_with(['.', '!', '?'])
    }

    fn push_gap(&mut self, gap: Gap) {
        if self.out.is_empty() {
            return;
        }
        match gap {
            Gap::Space if !self.out.ends_with(char::is_whitespace) => self.out.push(' '),
            Gap::Line | Gap::Paragraph => {
                let len = self.out.trim_end_matches([' ', '\n']).len();
                let had_paragraph = self.out[len..].contains("\n\n");
                self.out.truncate(len);
                self.out
                    .push_str(if had_paragraph { "\n\n" } else { gap.as_str() });
            }
            _ => {}
        }
    }

    /// A free-standing "-": "minus" between numbers ("5 - 3"), otherwise a comma pause.
    fn dash(&mut self, i: usize) {
        let t = self.toks[i];
        let between_numbers = i > 0
            && self.toks[i - 1].trail.is_empty()
            && self.toks[i - 1]
                .core
                .ends_with(|c: char| c.is_ascii_digit())
            && self
                .toks
                .get(i + 1)
                .is_some_and(|n| n.core.starts_with(|c: char| c.is_ascii_digit()));
        if between_numbers {
            self.out.push_str("minus");
        } else {
            let len = self.out.trim_end_matches(' ').len();
            self.out.truncate(len);
            if self
                .out
                .ends_with(|c: char| c.is_alphanumeric() || matches!(c, '"' | '\'' | ')'))
            {
                self.out.push(',');
            }
        }
        self.push_gap(t.gap);
    }

    fn tok(&self, j: usize) -> Option<&Token<'a>> {
        self.toks.get(j)
    }

    /// The token after `i`, if it belongs to the same phrase (no paragraph break, no lead punctuation).
    fn next_in_phrase(&self, i: usize) -> Option<&Token<'a>> {
        let t = self.toks[i];
        if !matches!(t.gap, Gap::Space | Gap::Line) {
            return None;
        }
        self.tok(i + 1).filter(|n| n.lead.is_empty())
    }

    /// True if a sentence starts after token `i` (so an abbreviation's period there also ends one).
    fn sentence_ends_after(&self, i: usize) -> bool {
        let t = self.toks[i];
        if matches!(t.gap, Gap::Paragraph | Gap::End) {
            return true;
        }
        match self.tok(i + 1) {
            None => true,
            Some(n) => {
                n.core.starts_with(char::is_uppercase) || (n.core.is_empty() && !n.lead.is_empty())
            }
        }
    }

    /// True if token `i` starts a sentence.
    fn starts_sentence(&self, i: usize) -> bool {
        if i == 0 {
            return true;
        }
        let p = self.toks[i - 1];
        p.gap == Gap::Paragraph
            || p.trail
                .trim_end_matches(['"', '\'', ')', ']'])
                .ends_with(['.', '!', '?'])
    }

    /// The trail of an abbreviation at token `i`: its own period is dropped unless the sentence ends there.
    fn abbreviation_trail(&self, i: usize) -> Cow<'a, str> {
        let trail = self.toks[i].trail;
        match trail.strip_prefix('.') {
            Some(rest) if !self.sentence_ends_after(i) => Cow::Borrowed(rest),
            _ => Cow::Borrowed(trail),
        }
    }

    fn expand(&mut self, i: usize) -> Expansion<'a> {
        let t = self.toks[i];
        if t.core.bytes().any(|b| b.is_ascii_digit()) {
            return self.numeric(i, t.core);
        }
        if let Some(e) = self.word(i) {
            return e;
        }
        Expansion::new(symbols(t.core), 1, t.trail)
    }

    // ----- words -------------------------------------------------------------------------------------------

    fn word(&mut self, i: usize) -> Option<Expansion<'a>> {
        let t = self.toks[i];
        let core = t.core;
        if core.is_empty() {
            return Some(Expansion::new("", 1, t.trail));
        }
        let abbrev_month = month_from_abbrev(core);
        if let Some(m) = month_from_name(core).or(abbrev_month) {
            if let Some(e) = self.month_first_date(i, m) {
                return Some(e);
            }
            if abbrev_month.is_some() && t.has_period() {
                return Some(Expansion::new(month_name(m), 1, self.abbreviation_trail(i)));
            }
        }
        if let Some(day) = abbreviations::weekday(core)
            && t.has_period()
            && (t.trail.starts_with(".,")
                || self.next_in_phrase(i).is_some_and(|n| {
                    month_from_name(n.core).is_some() || month_from_abbrev(n.core).is_some()
                }))
        {
            return Some(Expansion::new(day, 1, &t.trail[1..]));
        }
        if matches!(core, "Dr" | "St" | "DR" | "ST") && (t.has_period() || t.trail.is_empty()) {
            let prev_is_name = i > 0 && {
                let p = self.toks[i - 1];
                p.trail.is_empty()
                    && ((p.is_capitalized() && !self.starts_sentence(i - 1))
                        || p.core.starts_with(|c: char| c.is_ascii_digit()))
            };
            let next_is_name = self.next_in_phrase(i).is_some_and(Token::is_capitalized);
            if t.has_period() || next_is_name || prev_is_name {
                let (word, kind) = abbreviations::dr_or_st(core, prev_is_name, next_is_name)?;
                return Some(self.abbreviation(i, word, kind));
            }
        }
        if t.has_period()
            && let Some((word, kind)) = abbreviations::dotted(core)
        {
            let next_is_number = self.next_in_phrase(i).is_some_and(|n| {
                n.core.starts_with(|c: char| c.is_ascii_digit() || c == '#')
                    || (matches!(word, "volume" | "chapter" | "section")
                        && roman::parse(&n.core.to_ascii_uppercase()).is_some())
            });
            if kind != Kind::BeforeNumber || next_is_number {
                return Some(self.abbreviation(i, word, kind));
            }
        }
        if t.has_period() && abbreviations::is_initialism(core) {
            let letters: String = core
                .chars()
                .filter(|c| *c != '.')
                .flat_map(char::to_uppercase)
                .collect();
            return Some(self.abbreviation(i, letters, Kind::Suffix));
        }
        if let Some((word, kind)) = abbreviations::undotted(core)
            && (kind != Kind::Inner
                || (t.trail.is_empty()
                    && self.next_in_phrase(i).is_some_and(Token::is_capitalized)))
        {
            return Some(Expansion::new(word, 1, t.trail));
        }
        if let Some(v) = roman::parse(core) {
            return self.roman(i, v);
        }
        if core.len() >= 2
            && core.bytes().all(|b| matches!(b, b'i' | b'v' | b'x'))
            && let Some(v) = roman::parse(&core.to_ascii_uppercase())
            && self.counting_word_before(i)
        {
            // "Act III, Scene ii".
            return Some(Expansion::new(cardinal_u64(u64::from(v)), 1, t.trail));
        }
        None
    }

    fn abbreviation(&self, i: usize, word: impl Into<Cow<'a, str>>, kind: Kind) -> Expansion<'a> {
        let t = self.toks[i];
        let dropped = Cow::Borrowed(t.trail.strip_prefix('.').unwrap_or(t.trail));
        let trail = match kind {
            Kind::Inner | Kind::BeforeNumber if !matches!(t.gap, Gap::Paragraph | Gap::End) => {
                dropped
            }
            Kind::Inner | Kind::BeforeNumber => Cow::Borrowed(t.trail),
            Kind::Word => self.abbreviation_trail(i),
            Kind::Suffix => {
                let ends = matches!(t.gap, Gap::Paragraph | Gap::End)
                    || self.tok(i + 1).is_none_or(|n| {
                        abbreviations::is_sentence_starter(n.core)
                            || (n.core.is_empty() && !n.lead.is_empty())
                    });
                if ends {
                    Cow::Borrowed(t.trail)
                } else {
                    dropped
                }
            }
        };
        Expansion::new(word, 1, trail)
    }

    /// "March 5", "Jan. 5th, 2024", "March 5 2024" (month token at `i`).
    fn month_first_date(&self, i: usize, month: u32) -> Option<Expansion<'a>> {
        let t = self.toks[i];
        let is_abbrev = month_from_name(t.core).is_none();
        if !(t.trail.is_empty() || (is_abbrev && t.trail == ".")) {
            return None;
        }
        let day_tok = self.next_in_phrase(i)?;
        let day = day_of_month(day_tok.core).filter(|d| is_valid_date(month, *d))?;
        let (year, used) = match self.year_after(i + 1, &["", ","]) {
            Some(y) => (Some(y), 3),
            None => (None, 2),
        };
        let date = Date {
            year,
            month,
            day,
            day_first: false,
        };
        let last = self.toks[i + used - 1];
        Some(Expansion::new(date.words(), used, last.trail))
    }

    /// A four-digit year token right after token `i`, if token `i`'s trail is one of `trails`.
    fn year_after(&self, i: usize, trails: &[&str]) -> Option<Year> {
        let t = self.toks[i];
        if !trails.contains(&t.trail) {
            return None;
        }
        let y = self.next_in_phrase(i)?;
        let v: u32 = (y.core.len() == 4 && y.core.bytes().all(|b| b.is_ascii_digit()))
            .then(|| y.core.parse().ok())??;
        (1000..=2999).contains(&v).then_some(Year::Full(v))
    }

    /// True if token `i` follows a counting word ("Chapter", "Part", or "Vol."/"ch." with their period).
    fn counting_word_before(&self, i: usize) -> bool {
        let Some(prev) = i.checked_sub(1).map(|j| self.toks[j]) else {
            return false;
        };
        let abbreviated =
            prev.trail == "." && matches!(prev.core, "Vol" | "vol" | "Ch" | "ch" | "Pt" | "pt");
        matches!(prev.gap, Gap::Space | Gap::Line)
            && (prev.trail.is_empty() || abbreviated)
            && roman::is_counting_word(prev.core)
    }

    /// Roman numerals after a counting word ("Chapter IV"), a regnal name ("Henry VIII", "King Harold II")
    /// or, for multi-letter I/V/X numerals, any capitalised word ("Rocky II").
    fn roman(&self, i: usize, value: u32) -> Option<Expansion<'a>> {
        let t = self.toks[i];
        let prev = self.toks.get(i.checked_sub(1)?)?;
        if !matches!(prev.gap, Gap::Space | Gap::Line) || !t.lead.is_empty() {
            return None;
        }
        if self.counting_word_before(i) {
            return Some(Expansion::new(cardinal_u64(u64::from(value)), 1, t.trail));
        }
        if !prev.trail.is_empty() {
            return None;
        }
        let regnal = roman::is_regnal_name(prev.core)
            || (prev.is_capitalized() && i >= 2 && roman::is_royal_title(self.toks[i - 2].core));
        if regnal {
            let pronoun_like = t.core == "I"
                && t.trail.is_empty()
                && self.next_in_phrase(i).is_some_and(|n| n.core != "of");
            if pronoun_like {
                return None;
            }
            return Some(Expansion::new(
                format!("the {}", capitalize(&ordinal_u32(value))),
                1,
                t.trail,
            ));
        }
        let generic = t.core.len() >= 2 && t.core.bytes().all(|b| matches!(b, b'I' | b'V' | b'X'));
        if generic && prev.is_capitalized() {
            return Some(Expansion::new(cardinal_u64(u64::from(value)), 1, t.trail));
        }
        None
    }

    // ----- numbers -----------------------------------------------------------------------------------------

    /// Token `i`, whose core ends with `core` (the whole core, or what follows a prefix symbol such as "~").
    fn numeric(&mut self, i: usize, core: &'a str) -> Expansion<'a> {
        let t = self.toks[i];
        let mut chars = core.chars();
        if let Some(word) = chars.next().and_then(prefix_word) {
            let rest = chars.as_str();
            if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '$') {
                let mut e = self.numeric(i, rest);
                e.text = Cow::Owned(format!("{word} {}", e.text));
                return e;
            }
        }
        if core == t.core {
            if let Some(e) = self.area_code(i) {
                return e;
            }
            if let Some(e) = self.day_first_date(i) {
                return e;
            }
        }
        if let Some(e) = self.with_next_word(i, core) {
            return e;
        }
        if let Some(e) = self.feet_and_inches(i, core) {
            return e;
        }
        if let Some(words) = self.verse(i, core) {
            return Expansion::new(words, 1, t.trail);
        }
        let year_context = self.year_context(i);
        let (text, was_year) =
            expand_single(core, year_context).unwrap_or_else(|| (expand_any(core), false));
        if was_year {
            self.last_year = Some(i);
        }
        let trail = if core.ends_with(".m")
            && meridiem(core.trim_start_matches(|c: char| !c.is_alphabetic())).is_some()
        {
            self.abbreviation_trail(i)
        } else {
            Cow::Borrowed(t.trail)
        };
        Expansion::new(text, 1, trail)
    }

    /// "6'2\"" → "six foot two" (the closing inch mark is dropped from the trail).
    fn feet_and_inches(&self, i: usize, core: &str) -> Option<Expansion<'a>> {
        let t = self.toks[i];
        let (feet, inches) = core.split_once('\'')?;
        let inch_mark = t.trail.strip_prefix('"')?;
        let f = small_number(feet, 2)?;
        let n = small_number(inches, 2).filter(|n| *n < 12)?;
        let text = format!(
            "{} foot {}",
            cardinal_u64(u64::from(f)),
            cardinal_u64(u64::from(n))
        );
        Some(Expansion::new(text, 1, inch_mark))
    }

    /// "Psalm 23:4", "Genesis 1:1": chapter and verse after a capitalised word when the numbers are not a
    /// clock reading ("John 3:16" already reads as one); elsewhere "3:1" is a ratio.
    fn verse(&self, i: usize, core: &str) -> Option<String> {
        let (chapter, verse) = core.split_once(':')?;
        let (c, v) = (small_number(chapter, 3)?, small_number(verse, 3)?);
        if parse_clock(core).is_some() || i == 0 || self.starts_sentence(i - 1) {
            return None;
        }
        let prev = self.toks[i - 1];
        (prev.trail.is_empty() && prev.is_capitalized()).then(|| {
            format!(
                "{} {}",
                cardinal_u64(u64::from(c)),
                cardinal_u64(u64::from(v))
            )
        })
    }

    /// "(555) 123-4567": the area code is read digit by digit.
    fn area_code(&self, i: usize) -> Option<Expansion<'a>> {
        let t = self.toks[i];
        let is_code = t.lead.ends_with('(')
            && t.trail.starts_with(')')
            && t.core.len() == 3
            && t.core.bytes().all(|b| b.is_ascii_digit())
            && self.tok(i + 1).is_some_and(|n| is_phone(n.core));
        is_code.then(|| Expansion::new(digits_one_by_one(t.core), 1, t.trail))
    }

    /// "5 March 2024", "5th March" → "the fifth of March, twenty twenty-four".
    fn day_first_date(&self, i: usize) -> Option<Expansion<'a>> {
        let t = self.toks[i];
        if !t.trail.is_empty() {
            return None;
        }
        let day = day_of_month(t.core)?;
        let m_tok = self.next_in_phrase(i)?;
        let month = month_from_name(m_tok.core)
            .or_else(|| month_from_abbrev(m_tok.core).filter(|_| m_tok.has_period()))?;
        if !is_valid_date(month, day) {
            return None;
        }
        let (year, used) = match self.year_after(i + 1, &["", ","]) {
            Some(y) if month_from_name(m_tok.core).is_some() => (Some(y), 3),
            _ => (None, 2),
        };
        let date = Date {
            year,
            month,
            day,
            day_first: true,
        };
        let mut text = date.words();
        if i > 0
            && self.toks[i - 1].core.eq_ignore_ascii_case("the")
            && self.toks[i - 1].trail.is_empty()
        {
            text = text.trim_start_matches("the ").to_owned();
        }
        let trail = if used == 2 && m_tok.has_period() {
            self.abbreviation_trail(i + 1)
        } else {
            Cow::Borrowed(self.toks[i + used - 1].trail)
        };
        Some(Expansion::new(text, used, trail))
    }

    /// A number followed by a word that belongs to it: a unit ("5 km"), "%", a currency code ("5 USD"),
    /// a scale after money ("$1.5 million"), "a.m."/"pm" ("3:30 pm"), or a fraction ("3 1/2").
    fn with_next_word(&mut self, i: usize, core: &str) -> Option<Expansion<'a>> {
        let t = self.toks[i];
        if !t.trail.is_empty() {
            return None;
        }
        let next = self.next_in_phrase(i)?;
        let used = 2;
        if let Some((clock, "")) = parse_clock(core)
            && let Some(m) = meridiem(next.core)
            && (1..=12).contains(&clock.hour)
            && clock.second.is_none()
        {
            let text = clock_words(clock, Some(m));
            return Some(Expansion::new(text, used, self.abbreviation_trail(i + 1)));
        }
        let q = parse_quantity(core).filter(|q| q.suffix.is_empty())?;
        if let Some(c) = q.currency {
            let scale = units::scale(next.core, false)?;
            return Some(Expansion::new(q.money(c, Some(scale)), used, next.trail));
        }
        if let Some(m) = meridiem(next.core)
            && q.b.is_none()
            && q.a.small().is_some_and(|h| (1..=12).contains(&h))
        {
            let text = format!("{} {m}", q.a.words());
            return Some(Expansion::new(text, used, self.abbreviation_trail(i + 1)));
        }
        if let Some(name) =
            units::currency_code(next.core).or_else(|| units::unit(next.core, false))
        {
            return Some(Expansion::new(q.with_unit(name), used, next.trail));
        }
        if q.b.is_none()
            && q.a.is_integer()
            && !q.a.neg
            && let Some(tail) = mixed_fraction_tail(next.core)
        {
            return Some(Expansion::new(
                format!("{} {tail}", q.a.words()),
                used,
                next.trail,
            ));
        }
        None
    }

    /// Whether the words around token `i` make a four-digit number a year.
    fn year_context(&self, i: usize) -> bool {
        let t = self.toks[i];
        if t.trail.is_empty() && self.next_in_phrase(i).is_some_and(|n| is_era(n.core)) {
            return true;
        }
        let Some(p) = i.checked_sub(1).map(|j| self.toks[j]) else {
            return false;
        };
        if !matches!(p.gap, Gap::Space | Gap::Line) || !t.lead.is_empty() {
            return false;
        }
        let word = p.core.to_ascii_lowercase();
        let month = month_from_name(p.core).is_some() || month_from_abbrev(p.core).is_some();
        match p.trail {
            "" => {
                YEAR_WORDS.contains(&word.as_str())
                    || month
                    || (YEAR_LINKS.contains(&word.as_str())
                        && i >= 2
                        && self.last_year == Some(i - 2))
            }
            "." => matches!(word.as_str(), "c" | "ca" | "a.d") || month,
            "," => month,
            _ => false,
        }
    }
}

fn is_email_part(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'))
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Words made of or containing symbols: "&" → "and", "AT&T" → "AT and T", "C++" → "C plus plus",
/// "jo@example.com" → "jo at example dot com", "#tag" → "tag". Other words are returned as they are.
fn symbols(core: &str) -> Cow<'_, str> {
    let needs = core
        .chars()
        .any(|c| symbol_word(c).is_some() || c == '#' || c == '~');
    if !needs {
        return Cow::Borrowed(core);
    }
    if let Some((user, domain)) = core.split_once('@')
        && is_email_part(user)
        && is_email_part(domain)
        && domain.split('.').count() >= 2
        && domain.split('.').all(|p| !p.is_empty())
    {
        return Cow::Owned(format!("{user} at {}", domain.replace('.', " dot ")));
    }
    let mut out = String::with_capacity(core.len() + 16);
    for c in core.chars() {
        match (c, symbol_word(c)) {
            (_, Some(w)) => {
                if !out.is_empty() && !out.ends_with(' ') {
                    out.push(' ');
                }
                out.push_str(w);
                out.push(' ');
            }
            ('#', None) if out.is_empty() => {}
            ('~', None) => {}
            _ => out.push(c),
        }
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    if out.is_empty() {
        Cow::Borrowed(core)
    } else {
        Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialisms_and_symbols() {
        assert_eq!(symbols("AT&T"), "AT and T");
        assert_eq!(symbols("C++"), "C plus plus");
        assert_eq!(symbols("&"), "and");
        assert_eq!(symbols("#tag"), "tag");
        assert_eq!(symbols("jo@example.com"), "jo at example dot com");
        assert_eq!(symbols("plain"), "plain");
        assert_eq!(symbols("#"), "#");
        assert_eq!(capitalize("eighth"), "Eighth");
    }
}
