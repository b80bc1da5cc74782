//! Word-level rules of the normaliser: month dates, abbreviations, "Dr."/"St.", initialisms and Roman
//! numerals.
//!
//! Input: the token at an index and its neighbours. Output: an [`Expansion`] covering one or more tokens,
//! or `None` when no rule applies (the word is then only checked for symbols). Invariants: a rule only
//! consumes tokens of the same phrase (no paragraph break between them) and never drops letters.

use std::borrow::Cow;

use super::{Expansion, Normalizer, capitalize};
use crate::text::abbreviations::{self, Kind};
use crate::text::dates_times::{
    Date, Year, day_of_month, is_valid_date, month_from_abbrev, month_from_name, month_name,
};
use crate::text::numbers::{cardinal_u64, ordinal_u32};
use crate::text::roman;
use crate::text::tokens::{Gap, Token};

impl<'a> Normalizer<'_, 'a> {
    pub(super) fn word(&mut self, i: usize) -> Option<Expansion<'a>> {
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
    pub(super) fn year_after(&self, i: usize, trails: &[&str]) -> Option<Year> {
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
}
