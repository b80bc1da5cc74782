//! Number rules of the normaliser that need the neighbouring tokens: prefix symbols, area codes, day-first
//! dates, units/currency codes/scales/"a.m." in the next token, mixed fractions, heights, chapter and verse,
//! and the year context of a bare four-digit number.
//!
//! Input: the token at an index (or the part of its core after a prefix symbol). Output: an [`Expansion`];
//! everything without a contextual rule falls back to the context-free readings in `quantities`.
//! Invariants: the expansion contains no ASCII digit; it consumes at most the next two tokens.

use std::borrow::Cow;

use super::{Expansion, Normalizer};
use crate::text::dates_times::{
    Date, clock_words, day_of_month, is_valid_date, meridiem, month_from_abbrev, month_from_name,
    parse_clock, small_number,
};
use crate::text::numbers::{cardinal_u64, digits_one_by_one};
use crate::text::quantities::{
    expand_any, expand_single, is_phone, mixed_fraction_tail, parse_quantity, prefix_word,
};
use crate::text::tokens::Gap;
use crate::text::units;

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

impl<'a> Normalizer<'_, 'a> {
    /// Token `i`, whose core ends with `core` (the whole core, or what follows a prefix symbol such as "~").
    pub(super) fn numeric(&mut self, i: usize, core: &'a str) -> Expansion<'a> {
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
