//! The normaliser: cleaned text → tokens → spoken words.
//!
//! Input: any text. Output: the same text with numbers, dates, times, money, units, abbreviations, Roman
//! numerals after their cue words and symbols written out as words (see the module docs of `text` for the
//! reading rules). Invariants: never panics; the output contains no ASCII digit; whitespace runs become one
//! space, one line break or one blank line; words it has no rule for pass through unchanged.

use std::borrow::Cow;

use super::quantities::symbol_word;
use super::tokens::{Gap, Token, tokenize};
use super::typography;

mod numeric;
mod words;

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
