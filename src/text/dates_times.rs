//! Dates and clock times → words.
//!
//! Input: token cores ("2024-03-05", "3/5/2024", "5.3.2024", "14:05", "9:30pm", "March", "Jan", "5th").
//! Output: spoken forms: month-first dates read "March fifth, twenty twenty-four", day-first ones "the fifth
//! of March, twenty twenty-four"; times "three thirty PM", "three o'clock", "fourteen hundred",
//! "fourteen oh five". Invariants: parsers validate ranges (month 1..=12, day within the month, hour
//! 0..=24, minute and second 0..=59) and return `None` rather than guess; nothing here panics.

use super::numbers::{cardinal_u64, ordinal_u32, short_year, year};

pub const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// A full month name, capitalised as a proper noun ("may" and "march" are verbs).
pub fn month_from_name(core: &str) -> Option<u32> {
    MONTHS.iter().position(|m| *m == core).map(|i| i as u32 + 1)
}

/// A month abbreviation as written before a period ("Jan", "Sept").
pub fn month_from_abbrev(core: &str) -> Option<u32> {
    Some(match core {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" | "Sept" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    })
}

/// Name of month `m` (1..=12).
pub fn month_name(m: u32) -> &'static str {
    MONTHS[(m.clamp(1, 12) - 1) as usize]
}

fn days_in_month(m: u32) -> u32 {
    match m {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses 1..=len ASCII digits as a number; `None` for anything else.
pub fn small_number(s: &str, max_len: usize) -> Option<u32> {
    if s.is_empty() || s.len() > max_len || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A day of the month as written after or before a month name: "5", "05", "5th", "21st" (1..=31).
pub fn day_of_month(core: &str) -> Option<u32> {
    let digits = core.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &core[digits.len()..];
    if !suffix.is_empty() && !is_ordinal_suffix(suffix) {
        return None;
    }
    small_number(digits, 2).filter(|d| (1..=31).contains(d))
}

/// "st", "nd", "rd", "th" in any case.
pub fn is_ordinal_suffix(s: &str) -> bool {
    ["st", "nd", "rd", "th"]
        .iter()
        .any(|x| s.eq_ignore_ascii_case(x))
}

/// The year part of a numeric date, as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Year {
    Full(u32),
    Short(u32),
}

impl Year {
    fn words(self) -> String {
        match self {
            Year::Full(y) => year(y),
            Year::Short(y) => short_year(y),
        }
    }
}

/// A calendar date and the order it is read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Date {
    pub year: Option<Year>,
    pub month: u32,
    pub day: u32,
    pub day_first: bool,
}

impl Date {
    pub fn words(&self) -> String {
        let mut out = if self.day_first {
            format!(
                "the {} of {}",
                ordinal_u32(self.day),
                month_name(self.month)
            )
        } else {
            format!("{} {}", month_name(self.month), ordinal_u32(self.day))
        };
        if let Some(y) = self.year {
            out.push_str(", ");
            out.push_str(&y.words());
        }
        out
    }
}

/// Whether `day` exists in `month` (February has 29 days, for leap years).
pub fn is_valid_date(month: u32, day: u32) -> bool {
    (1..=12).contains(&month) && day >= 1 && day <= days_in_month(month)
}

fn parse_year(s: &str) -> Option<Year> {
    match s.len() {
        4 => small_number(s, 4).filter(|y| *y >= 1000).map(Year::Full),
        2 => small_number(s, 2).map(Year::Short),
        _ => None,
    }
}

/// Numeric dates: ISO "2024-03-05" and "2024/03/05"; US "3/5/2024", "3-5-2024", "3/5/24" (month first;
/// day first when the first number cannot be a month, "25/12/2024"); European "5.3.2024" (day first,
/// four-digit year only, so version numbers like "1.2.3" are not dates).
pub fn parse_numeric_date(core: &str) -> Option<Date> {
    let sep = core.chars().find(|c| matches!(c, '-' | '/' | '.'))?;
    let mut parts = core.split(sep);
    let (a, b, c) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    if a.len() == 4 && sep != '.' {
        let y = parse_year(a)?;
        let (m, d) = (small_number(b, 2)?, small_number(c, 2)?);
        return is_valid_date(m, d).then_some(Date {
            year: Some(y),
            month: m,
            day: d,
            day_first: false,
        });
    }
    let (x, z) = (small_number(a, 2)?, small_number(b, 2)?);
    let y = parse_year(c)?;
    if sep == '.' {
        if !matches!(y, Year::Full(_)) {
            return None;
        }
        return is_valid_date(z, x).then_some(Date {
            year: Some(y),
            month: z,
            day: x,
            day_first: true,
        });
    }
    if is_valid_date(x, z) {
        Some(Date {
            year: Some(y),
            month: x,
            day: z,
            day_first: false,
        })
    } else if is_valid_date(z, x) {
        Some(Date {
            year: Some(y),
            month: z,
            day: x,
            day_first: true,
        })
    } else {
        None
    }
}

/// A clock reading "H:MM" or "H:MM:SS".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    pub hour: u32,
    pub minute: u32,
    pub second: Option<u32>,
}

/// Parses "3:30", "14:05", "09:30", "1:23:45", "25:30" at the start of `s`; returns the clock and the rest
/// ("pm", "", ...). Minutes and seconds must have exactly two digits; a first part over 24 is minutes
/// (a duration such as a race time).
pub fn parse_clock(s: &str) -> Option<(Clock, &str)> {
    let colon = s.find(':')?;
    let hour = small_number(&s[..colon], 2)?;
    let after = &s[colon + 1..];
    let minute = small_number(after.get(..2)?, 2).filter(|m| *m < 60)?;
    let mut rest = &after[2..];
    if rest.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut second = None;
    if let Some(r) = rest.strip_prefix(':') {
        second = Some(small_number(r.get(..2)?, 2).filter(|v| *v < 60)?);
        rest = &r[2..];
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
    }
    Some((
        Clock {
            hour,
            minute,
            second,
        },
        rest,
    ))
}

/// "am", "a.m.", "AM", "A.M" (with or without the final period) → "AM"; likewise "PM".
pub fn meridiem(s: &str) -> Option<&'static str> {
    let s = s.strip_suffix('.').unwrap_or(s);
    match s {
        "am" | "AM" | "a.m" | "A.M" | "Am" => Some("AM"),
        "pm" | "PM" | "p.m" | "P.M" | "Pm" => Some("PM"),
        _ => None,
    }
}

fn plural(n: u32, one: &str, many: &str) -> String {
    let unit = if n == 1 { one } else { many };
    format!("{} {unit}", cardinal_u64(u64::from(n)))
}

/// Spoken form of a clock reading. With seconds it is read as a duration ("one hour, twenty-three minutes
/// and forty-five seconds"), since that is what "1:23:45" usually is in prose.
pub fn clock_words(c: Clock, meridiem: Option<&str>) -> String {
    if let Some(s) = c.second {
        let mut parts = Vec::with_capacity(3);
        if c.hour > 0 {
            parts.push(plural(c.hour, "hour", "hours"));
        }
        if c.minute > 0 {
            parts.push(plural(c.minute, "minute", "minutes"));
        }
        if s > 0 || parts.is_empty() {
            parts.push(plural(s, "second", "seconds"));
        }
        let last = parts.pop().unwrap_or_default();
        return if parts.is_empty() {
            last
        } else {
            format!("{} and {last}", parts.join(", "))
        };
    }
    let hour = cardinal_u64(u64::from(c.hour));
    let mut out = match (c.minute, meridiem) {
        (0, None) if c.hour > 24 => format!("{hour} minutes"),
        (0, Some(_)) => hour,
        (0, None) if (1..=12).contains(&c.hour) => format!("{hour} o'clock"),
        (0, None) => format!("{hour} hundred"),
        (m @ 1..=9, _) => format!("{hour} oh {}", cardinal_u64(u64::from(m))),
        (m, _) => format!("{hour} {}", cardinal_u64(u64::from(m))),
    };
    if let Some(m) = meridiem {
        out.push(' ');
        out.push_str(m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_dates() {
        let cases = [
            ("2024-03-05", Some("March fifth, twenty twenty-four")),
            (
                "2024/12/31",
                Some("December thirty-first, twenty twenty-four"),
            ),
            ("3/5/2024", Some("March fifth, twenty twenty-four")),
            ("03-05-2024", Some("March fifth, twenty twenty-four")),
            (
                "12/25/1999",
                Some("December twenty-fifth, nineteen ninety-nine"),
            ),
            (
                "25/12/1999",
                Some("the twenty-fifth of December, nineteen ninety-nine"),
            ),
            ("3/5/24", Some("March fifth, twenty-four")),
            ("7/4/05", Some("July fourth, oh five")),
            ("5.3.2024", Some("the fifth of March, twenty twenty-four")),
            ("2000-02-29", Some("February twenty-ninth, two thousand")),
            ("2024-02-30", None),
            ("2024-13-01", None),
            ("13/13/2024", None),
            ("1.2.3", None),
            ("5.3.24", None),
            ("1-800-555", None),
            ("3/5", None),
            ("3/5/2024/1", None),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse_numeric_date(input).map(|d| d.words()).as_deref(),
                want,
                "date({input})"
            );
        }
    }

    #[test]
    fn clocks() {
        let cases = [
            ("3:30", None, "three thirty"),
            ("3:00", None, "three o'clock"),
            ("12:00", None, "twelve o'clock"),
            ("14:00", None, "fourteen hundred"),
            ("00:00", None, "zero hundred"),
            ("14:05", None, "fourteen oh five"),
            ("09:30", None, "nine thirty"),
            ("3:00", Some("PM"), "three PM"),
            ("3:30", Some("PM"), "three thirty PM"),
            ("11:59", Some("AM"), "eleven fifty-nine AM"),
            (
                "1:23:45",
                None,
                "one hour, twenty-three minutes and forty-five seconds",
            ),
            ("0:05:00", None, "five minutes"),
            ("0:00:00", None, "zero seconds"),
            ("2:00:01", None, "two hours and one second"),
            ("25:30", None, "twenty-five thirty"),
            ("45:00", None, "forty-five minutes"),
        ];
        for (input, mer, want) in cases {
            let (clock, rest) = parse_clock(input).expect(input);
            assert_eq!(rest, "");
            assert_eq!(clock_words(clock, mer), want, "clock({input})");
        }
        assert_eq!(parse_clock("9:30pm").map(|c| c.1), Some("pm"));
        for bad in [
            "3:2", "3:60", "3:300", "123:00", ":30", "3:", "3:3a", "1:00:6",
        ] {
            assert_eq!(parse_clock(bad), None, "{bad}");
        }
    }

    #[test]
    fn months_days_meridiems() {
        assert_eq!(month_from_name("March"), Some(3));
        assert_eq!(month_from_name("march"), None);
        assert_eq!(month_from_abbrev("Sept"), Some(9));
        assert_eq!(month_from_abbrev("May"), None);
        assert_eq!(day_of_month("5th"), Some(5));
        assert_eq!(day_of_month("21ST"), Some(21));
        assert_eq!(day_of_month("32"), None);
        assert_eq!(day_of_month("0"), None);
        assert_eq!(day_of_month("5x"), None);
        assert_eq!(meridiem("p.m."), Some("PM"));
        assert_eq!(meridiem("a.m"), Some("AM"));
        assert_eq!(meridiem("PM"), Some("PM"));
        assert_eq!(meridiem("pmx"), None);
    }
}
