//! Numeric tokens that can be read without looking at their neighbours.
//!
//! Input: one token core that contains an ASCII digit ("$5.50", "3.5%", "22nd", "1990s", "1990-95",
//! "5km", "3/4", "555-1234", "9:30pm", "2024-03-05", "COVID-19"). Output: its spoken words.
//! Invariants: [`expand_any`] never fails and its output contains no ASCII digit; every other function
//! returns `None` instead of guessing, so the caller can try the next reading.

use std::borrow::Cow;

use super::dates_times::{clock_words, meridiem, parse_clock, parse_numeric_date};
use super::numbers::{
    cardinal, decimal, denominator, digits_one_by_one, ordinal, pluralize, short_year, year,
};
use super::units::{self, Currency, Name};

/// Plain integers without grouping commas longer than this are identifiers, read digit by digit.
const MAX_PLAIN_DIGITS: usize = 18;

/// A written number: optional minus, integer digits (grouping commas removed), optional decimal digits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Num<'a> {
    pub neg: bool,
    pub int: Cow<'a, str>,
    pub frac: Option<&'a str>,
    pub grouped: bool,
}

fn leading_digits(s: &str) -> usize {
    s.bytes().take_while(u8::is_ascii_digit).count()
}

/// Parses a number at the start of `s`: "-1,234.5", ".5", "007". Commas only count as grouping when every
/// group after the first has exactly three digits ("1,5" stops after "1").
fn parse_num(s: &str) -> Option<(Num<'_>, &str)> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let mut end = leading_digits(body);
    let mut grouped = false;
    if (1..=3).contains(&end) {
        while body[end..].starts_with(',') && leading_digits(&body[end + 1..]) == 3 {
            end += 4;
            grouped = true;
        }
    }
    let int_raw = &body[..end];
    let mut rest = &body[end..];
    let mut frac = None;
    if let Some(r) = rest.strip_prefix('.') {
        let n = leading_digits(r);
        if n > 0 {
            frac = Some(&r[..n]);
            rest = &r[n..];
        }
    }
    if int_raw.is_empty() && frac.is_none() {
        return None;
    }
    let int = if grouped {
        Cow::Owned(int_raw.replace(',', ""))
    } else {
        Cow::Borrowed(int_raw)
    };
    Some((
        Num {
            neg,
            int,
            frac,
            grouped,
        },
        rest,
    ))
}

/// Parses a whole string as one number.
fn parse_whole_num(s: &str) -> Option<Num<'_>> {
    parse_num(s)
        .filter(|(_, rest)| rest.is_empty())
        .map(|(n, _)| n)
}

impl Num<'_> {
    pub fn is_integer(&self) -> bool {
        self.frac.is_none()
    }

    /// Exactly one, so a unit after it is singular ("1 km", "-1 °C").
    fn is_one(&self) -> bool {
        self.frac.is_none() && self.int.trim_start_matches('0') == "1" && !self.int.starts_with('0')
    }

    /// The integer value when it is a plain integer that fits.
    pub fn small(&self) -> Option<u64> {
        if self.frac.is_some() || self.int.is_empty() || self.int.len() > MAX_PLAIN_DIGITS {
            return None;
        }
        self.int.parse().ok()
    }

    /// Value if this could be a four-digit year: no sign, comma, decimals or leading zero.
    fn year_value(&self) -> Option<u32> {
        if self.neg
            || self.grouped
            || self.frac.is_some()
            || self.int.len() != 4
            || self.int.starts_with('0')
        {
            return None;
        }
        self.int.parse().ok()
    }

    /// Words without sign: decimals read digit by digit after "point", leading-zero integers ("007") and
    /// over-long plain integers read digit by digit, everything else as a cardinal.
    fn magnitude_words(&self) -> String {
        match self.frac {
            Some(f) => decimal(&self.int, f),
            None if !self.grouped && self.int.len() > 1 && self.int.starts_with('0') => {
                digits_one_by_one(&self.int)
            }
            None if !self.grouped && self.int.len() > MAX_PLAIN_DIGITS => {
                digits_one_by_one(&self.int)
            }
            None => cardinal(&self.int),
        }
    }

    pub fn words(&self) -> String {
        let w = self.magnitude_words();
        if self.neg { format!("minus {w}") } else { w }
    }
}

/// An amount with everything that can be glued to it: currency before, a range, a suffix after.
#[derive(Clone, Debug)]
pub struct Quantity<'a> {
    pub currency: Option<Currency>,
    pub a: Num<'a>,
    pub b: Option<Num<'a>>,
    pub suffix: &'a str,
}

/// Parses "[-][currency]number[-[currency]number]suffix".
pub fn parse_quantity(core: &str) -> Option<Quantity<'_>> {
    let mut s = core;
    let mut neg = false;
    if let Some(r) = s.strip_prefix('-')
        && units::currency_prefix(r).is_some()
    {
        neg = true;
        s = r;
    }
    let currency = units::currency_prefix(s).map(|(c, rest)| {
        s = rest;
        c
    });
    let (mut a, rest) = parse_num(s)?;
    a.neg |= neg;
    let (b, suffix) = match rest.strip_prefix('-') {
        Some(r)
            if r.starts_with(|c: char| c.is_ascii_digit() || c == '.') || currency.is_some() =>
        {
            let r = match currency {
                Some(_) => units::currency_prefix(r).map_or(r, |(_, x)| x),
                None => r,
            };
            let (b, rest) = parse_num(r)?;
            if b.neg {
                return None;
            }
            (Some(b), rest)
        }
        _ => (None, rest),
    };
    Some(Quantity {
        currency,
        a,
        b,
        suffix,
    })
}

impl Quantity<'_> {
    /// The last number (the one a following unit agrees with).
    pub fn last(&self) -> &Num<'_> {
        self.b.as_ref().unwrap_or(&self.a)
    }

    /// "five", "five to ten".
    fn amount_words(&self) -> String {
        match &self.b {
            Some(b) if self.a == *b && self.a.int == "50" && self.currency.is_none() => {
                "fifty-fifty".to_owned()
            }
            Some(b) => format!("{} to {}", self.a.words(), b.words()),
            None => self.a.words(),
        }
    }

    /// The amount followed by a unit that agrees with it.
    pub fn with_unit(&self, unit: Name) -> String {
        let name = if self.last().is_one() {
            unit.one
        } else {
            unit.many
        };
        format!("{} {name}", self.amount_words())
    }

    /// A year range "1990-1995" / "1990-95", or `None` if this is not one.
    fn year_range(&self) -> Option<String> {
        let b = self.b.as_ref()?;
        let from = self.a.year_value().filter(|y| (1000..=2099).contains(y))?;
        if let Some(to) = b.year_value() {
            return (to > from).then(|| format!("{} to {}", year(from), year(to)));
        }
        if b.int.len() != 2 || !b.is_integer() {
            return None;
        }
        let short: u32 = b.int.parse().ok()?;
        (short > from % 100 || from % 100 == 0)
            .then(|| format!("{} to {}", year(from), short_year(short)))
    }

    /// Reads a bare amount (no suffix, no currency). `year_context` says the words around it ask for a year.
    /// Returns the words and whether they were read as a year.
    pub fn plain(&self, year_context: bool) -> (String, bool) {
        if let Some(r) = self.year_range() {
            return (r, true);
        }
        if self.b.is_none()
            && let Some(y) = self.a.year_value()
            && ((year_context && (1000..=2099).contains(&y)) || (1100..=1999).contains(&y))
        {
            return (year(y), true);
        }
        (self.amount_words(), false)
    }

    /// An amount of money, with an optional scale word ("million").
    pub fn money(&self, c: Currency, scale: Option<&str>) -> String {
        if let Some(scale) = scale {
            return format!("{} {scale} {}", self.amount_words(), c.main.many);
        }
        match &self.b {
            Some(b) if self.a.frac.is_none() && b.frac.is_none() => self.with_unit(c.main),
            Some(b) => format!("{} to {}", money(&self.a, c), money(b, c)),
            None => money(&self.a, c),
        }
    }
}

/// "$5.50" → "five dollars and fifty cents"; a non-two-digit fraction is read as a decimal.
fn money(n: &Num<'_>, c: Currency) -> String {
    let body = match (n.frac, c.minor) {
        (Some(f), Some(minor)) if f.len() == 2 => {
            let int = n.int.trim_start_matches('0');
            let cents = f.trim_start_matches('0');
            let mut parts = Vec::with_capacity(2);
            if !int.is_empty() || cents.is_empty() {
                let name = if int == "1" { c.main.one } else { c.main.many };
                parts.push(format!("{} {name}", cardinal(int)));
            }
            if !cents.is_empty() {
                let name = if cents == "1" { minor.one } else { minor.many };
                parts.push(format!("{} {name}", cardinal(cents)));
            }
            parts.join(" and ")
        }
        _ => {
            let name = if n.is_one() { c.main.one } else { c.main.many };
            return format!("{} {name}", n.words());
        }
    };
    if n.neg { format!("minus {body}") } else { body }
}

/// Words for units written after "/": "$5/hr" → "per hour".
fn per_unit(s: &str) -> Option<&'static str> {
    Some(match s {
        "h" | "hr" | "hour" => "hour",
        "d" | "day" => "day",
        "wk" | "week" => "week",
        "mo" | "month" => "month",
        "yr" | "year" => "year",
        "min" | "minute" => "minute",
        "person" => "person",
        "night" => "night",
        "item" => "item",
        "unit" => "unit",
        _ => return units::unit(s, false).map(|u| u.one),
    })
}

/// Renders the quantity with its glued suffix, without looking at other tokens.
fn render_quantity(q: &Quantity<'_>, year_context: bool) -> Option<(String, bool)> {
    let suffix = q.suffix;
    if let Some(c) = q.currency {
        if suffix.is_empty() {
            return Some((q.money(c, None), false));
        }
        if let Some(scale) = units::scale(suffix, true) {
            return Some((q.money(c, Some(scale)), false));
        }
        let per = per_unit(suffix.strip_prefix('/')?)?;
        return Some((format!("{} per {per}", q.money(c, None)), false));
    }
    if suffix.is_empty() {
        return Some(q.plain(year_context));
    }
    let integer = q.a.is_integer() && q.last().is_integer();
    if crate::text::dates_times::is_ordinal_suffix(suffix) && integer && q.b.is_none() && !q.a.neg {
        return Some((ordinal(&q.a.int), false));
    }
    if matches!(suffix, "s" | "'s") && integer && q.b.is_none() && !q.a.neg {
        return Some(match q.a.year_value() {
            Some(y) if y.is_multiple_of(10) && y != 1000 => (pluralize(&year(y)), true),
            _ => {
                let words = q.a.words();
                // "100s of people" → "hundreds", not "one hundreds".
                let round = matches!(q.a.int.as_ref(), "100" | "1000" | "1000000" | "1000000000");
                (pluralize(if round { &words[4..] } else { &words }), false)
            }
        });
    }
    if let Some(m) = meridiem(suffix) {
        let h =
            q.a.small()
                .filter(|h| (1..=12).contains(h) && q.b.is_none())?;
        return Some((format!("{} {m}", cardinal(&h.to_string())), false));
    }
    if let Some(scale) = match suffix {
        "bn" => Some("billion"),
        "mn" => Some("million"),
        "tn" => Some("trillion"),
        _ => None,
    } {
        return Some((format!("{} {scale}", q.amount_words()), false));
    }
    if suffix == "¢" {
        return Some((
            q.with_unit(Name {
                one: "cent",
                many: "cents",
            }),
            false,
        ));
    }
    units::unit(suffix, true).map(|u| (q.with_unit(u), false))
}

/// "1/2" → "one half", "3/4" → "three quarters", "24/7", "9/11", "50/50" as people say them.
pub fn fraction(core: &str) -> Option<String> {
    let (n, d) = core.split_once('/')?;
    if n.is_empty() || d.is_empty() || n.len() > 4 || d.len() > 4 {
        return None;
    }
    if let (Some(x), Some(y)) = (parse_whole_num(n), parse_whole_num(d))
        && x.frac.is_some()
        && !x.neg
        && !y.neg
    {
        // A rating: "4.5/5" → "four point five out of five".
        return Some(format!("{} out of {}", x.words(), y.words()));
    }
    if !n.bytes().chain(d.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(match (n, d) {
        ("24", "7") => "twenty-four seven".to_owned(),
        ("9", "11") => "nine eleven".to_owned(),
        ("50", "50") => "fifty-fifty".to_owned(),
        _ if matches!(d.trim_start_matches('0'), "" | "1") => {
            format!("{} over {}", cardinal(n), cardinal(d))
        }
        _ if n == d => format!("{} out of {}", cardinal(n), cardinal(d)),
        _ => {
            let one = n.trim_start_matches('0') == "1";
            format!("{} {}", cardinal(n), denominator(d, !one))
        }
    })
}

/// "3 1/2" → "and a half" part: the words after "three".
pub fn mixed_fraction_tail(core: &str) -> Option<String> {
    let (n, d) = core.split_once('/')?;
    let (nv, dv) = (n.parse::<u32>().ok()?, d.parse::<u32>().ok()?);
    if nv == 0 || dv < 2 || nv >= dv || dv > 100 {
        return None;
    }
    Some(if nv == 1 {
        format!("and a {}", denominator(d, false))
    } else {
        format!("and {} {}", cardinal(n), denominator(d, true))
    })
}

/// US-style phone numbers "555-1234", "555-123-4567", "1-800-555-1234", "555.123.4567", read digit by
/// digit in groups. "NNN-NNNN" where both groups end in 0 is left to be read as a range ("100-1000").
pub fn phone(core: &str) -> Option<String> {
    let sep = if core.contains('-') { '-' } else { '.' };
    let groups: Vec<&str> = core.split(sep).collect();
    if !groups
        .iter()
        .all(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    let ok = match lens.as_slice() {
        [3, 4] => sep == '-' && !(groups[0].ends_with('0') && groups[1].ends_with('0')),
        [3, 3, 4] | [1, 3, 3, 4] => true,
        _ => false,
    };
    ok.then(|| {
        groups
            .iter()
            .map(|g| digits_one_by_one(g))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// Whether `core` is a phone number (see [`phone`]).
pub fn is_phone(core: &str) -> bool {
    phone(core).is_some()
}

/// "1920x1080" → "one thousand nine hundred twenty by one thousand eighty".
fn dimensions(core: &str) -> Option<String> {
    let parts: Vec<&str> = core.split(['x', '×']).collect();
    if parts.len() < 2 {
        return None;
    }
    let nums: Option<Vec<String>> = parts
        .iter()
        .map(|p| parse_whole_num(p).filter(|n| !n.neg).map(|n| n.words()))
        .collect();
    nums.map(|n| n.join(" by "))
}

/// Two-digit year or decade after an apostrophe: "'90s" → "nineties", "'99" → "ninety-nine".
fn apostrophe_year(core: &str) -> Option<String> {
    let rest = core.strip_prefix('\'')?;
    let (digits, plural) = match rest.strip_suffix('s') {
        Some(d) => (d, true),
        None => (rest, false),
    };
    if digits.len() != 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u32 = digits.parse().ok()?;
    if plural {
        v.is_multiple_of(10).then(|| pluralize(&cardinal(digits)))
    } else {
        Some(short_year(v))
    }
}

/// Prefix symbols that read as words before a number.
pub fn prefix_word(c: char) -> Option<&'static str> {
    Some(match c {
        '#' => "number",
        '§' => "section",
        '~' => "about",
        '≈' => "approximately",
        '<' => "less than",
        '>' => "more than",
        '≤' => "at most",
        '≥' => "at least",
        '±' => "plus or minus",
        '+' => "plus",
        _ => return None,
    })
}

/// Context-free readings of a core with digits, in order of specificity.
pub fn expand_single(core: &str, year_context: bool) -> Option<(String, bool)> {
    if let Some(d) = parse_numeric_date(core) {
        return Some((d.words(), false));
    }
    if let Some((clock, rest)) = parse_clock(core) {
        let m = meridiem(rest);
        if rest.is_empty() || rest == "h" || m.is_some() {
            if m.is_some() && !(1..=12).contains(&clock.hour) {
                return None;
            }
            return Some((clock_words(clock, m), false));
        }
    }
    if let Some((a, b)) = core.split_once(':')
        && let (Some(x), Some(y)) = (parse_whole_num(a), parse_whole_num(b))
    {
        return Some((format!("{} to {}", x.words(), y.words()), false));
    }
    if let Some(p) = phone(core) {
        return Some((p, false));
    }
    if let Some(f) = fraction(core) {
        return Some((f, false));
    }
    if let Some(y) = apostrophe_year(core) {
        return Some((y, true));
    }
    let mut chars = core.chars();
    if let Some(word) = chars.next().and_then(prefix_word) {
        let rest = chars.as_str();
        if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '$') {
            let (w, _) = expand_single(rest, false).unwrap_or_else(|| (expand_any(rest), false));
            return Some((format!("{word} {w}"), false));
        }
    }
    if let Some(q) = parse_quantity(core)
        && let Some(r) = render_quantity(&q, year_context)
    {
        return Some(r);
    }
    dimensions(core).map(|d| (d, false))
}

/// Symbols inside words that a voice should say (or skip).
pub fn symbol_word(c: char) -> Option<&'static str> {
    Some(match c {
        '&' => "and",
        '+' => "plus",
        '=' => "equals",
        '@' => "at",
        '%' => "percent",
        '×' => "times",
        '÷' => "divided by",
        '±' => "plus or minus",
        '≈' => "approximately",
        '≤' => "less than or equal to",
        '≥' => "greater than or equal to",
        '^' => "to the power of",
        _ => return None,
    })
}

fn push_spaced(out: &mut String, word: &str) {
    if !out.is_empty() && !out.ends_with([' ', '-']) {
        out.push(' ');
    }
    out.push_str(word);
}

/// Reads any core: hyphen compounds part by part ("5-year-old", "COVID-19", "21st-century"), then runs of
/// digits as numbers between the letters ("MP3" → "MP three"), symbols as words. Never fails; the output
/// contains no ASCII digit.
pub fn expand_any(core: &str) -> String {
    if let Some((w, _)) = expand_single(core, false) {
        return w;
    }
    if core.contains('-') && core.split('-').filter(|p| !p.is_empty()).count() >= 2 {
        let mut prev = "";
        let mut parts = Vec::new();
        let mut all_numbers = true;
        for part in core.split('-') {
            let year_prefix = matches!(
                prev.to_ascii_lowercase().as_str(),
                "mid" | "pre" | "post" | "early" | "late"
            );
            let single = expand_single(part, year_prefix);
            all_numbers &= single.is_some();
            parts.push(match single {
                Some((w, _)) if year_prefix => w,
                _ if part.bytes().any(|b| b.is_ascii_digit()) => expand_any(part),
                _ => part.to_owned(),
            });
            prev = part;
        }
        // "10am-12pm", "3rd-4th": a range of readings that each stand alone.
        return parts.join(if all_numbers { " to " } else { "-" });
    }
    let mut out = String::with_capacity(core.len() * 4);
    let mut rest = core;
    while let Some(c) = rest.chars().next() {
        if c.is_ascii_digit() || (c == '.' && rest[1..].starts_with(|d: char| d.is_ascii_digit())) {
            let (num, after) = match parse_num(rest) {
                Some(x) => x,
                None => {
                    rest = &rest[1..];
                    continue;
                }
            };
            push_spaced(&mut out, &num.words());
            rest = after;
        } else if let Some(w) = symbol_word(c) {
            push_spaced(&mut out, w);
            rest = &rest[c.len_utf8()..];
        } else {
            let len = rest
                .find(|d: char| d.is_ascii_digit() || symbol_word(d).is_some())
                .unwrap_or(rest.len())
                .max(c.len_utf8());
            let chunk = &rest[..len];
            if chunk.starts_with(char::is_alphanumeric) {
                push_spaced(&mut out, chunk);
            } else {
                out.push_str(chunk);
            }
            rest = &rest[len..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_numbers() {
        let (n, rest) = parse_num("-1,234.5kg").unwrap();
        assert_eq!(
            (n.neg, n.int.as_ref(), n.frac, n.grouped, rest),
            (true, "1234", Some("5"), true, "kg")
        );
        let (n, rest) = parse_num("1,5").unwrap();
        assert_eq!((n.int.as_ref(), rest), ("1", ",5"));
        let (n, rest) = parse_num("1234,567").unwrap();
        assert_eq!((n.int.as_ref(), n.grouped, rest), ("1234", false, ",567"));
        assert!(parse_num("-").is_none());
        assert!(parse_num("abc").is_none());
        assert_eq!(parse_num(".5").unwrap().0.frac, Some("5"));
    }

    #[test]
    fn expand_any_never_leaves_digits() {
        for core in [
            "COVID-19", "MP3", "B2B", "1,5", "3:16-18", "1.2.3", "x86_64", "a1b2c3", "--1--", "9.",
            "5-",
        ] {
            let out = expand_any(core);
            assert!(!out.bytes().any(|b| b.is_ascii_digit()), "{core} → {out}");
        }
        assert_eq!(expand_any("COVID-19"), "COVID-nineteen");
        assert_eq!(expand_any("MP3"), "MP three");
        assert_eq!(expand_any("1,5"), "one, five");
        assert_eq!(expand_any("1.2.3"), "one point two point three");
    }
}
