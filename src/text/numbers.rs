//! Numbers → English words, US style.
//!
//! Input: ASCII digit strings (never parsed into machine integers where that could overflow) or small `u32`s.
//! Output: lower-case words separated by single spaces, tens joined by a hyphen ("forty-two"), no "and"
//! ("one hundred five"), no leading/trailing space.
//! Invariants: every function returns a non-empty string of letters, spaces and hyphens; none panics.

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];

const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// Whether `word` (lower case) is a cardinal from one to ninety spelt out ("twelve", "forty").
pub fn is_cardinal_word(word: &str) -> bool {
    ONES[1..].contains(&word) || TENS[2..].contains(&word)
}

/// Short-scale names for each group of three digits; index 0 is the units group.
const SCALES: [&str; 12] = [
    "",
    "thousand",
    "million",
    "billion",
    "trillion",
    "quadrillion",
    "quintillion",
    "sextillion",
    "septillion",
    "octillion",
    "nonillion",
    "decillion",
];

/// Longest integer (in significant digits) read as a cardinal; longer ones are read digit by digit, since
/// nobody says "undecillion" aloud and such strings are identifiers.
const MAX_CARDINAL_DIGITS: usize = SCALES.len() * 3;

fn push_word(out: &mut String, word: &str) {
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str(word);
}

/// Appends the words for 1..=999 (nothing for 0).
fn push_below_thousand(out: &mut String, n: u32) {
    let hundreds = n / 100;
    let rest = n % 100;
    if hundreds > 0 {
        push_word(out, ONES[hundreds as usize]);
        push_word(out, "hundred");
    }
    if rest >= 20 {
        push_word(out, TENS[(rest / 10) as usize]);
        if !rest.is_multiple_of(10) {
            out.push('-');
            out.push_str(ONES[(rest % 10) as usize]);
        }
    } else if rest > 0 {
        push_word(out, ONES[rest as usize]);
    }
}

/// The digit's name ("zero".."nine"); `None` for a non-digit.
fn digit_word(d: char) -> Option<&'static str> {
    d.to_digit(10).map(|v| ONES[v as usize])
}

/// Reads each ASCII digit on its own: "0071" → "zero zero seven one". Non-digits are skipped.
pub fn digits_one_by_one(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() * 6);
    for w in digits.chars().filter_map(digit_word) {
        push_word(&mut out, w);
    }
    if out.is_empty() {
        out.push_str("zero");
    }
    out
}

/// Cardinal of an ASCII digit string (leading zeros ignored): "1234567" → "one million two hundred
/// thirty-four thousand five hundred sixty-seven". More than [`MAX_CARDINAL_DIGITS`] significant digits are
/// read one by one.
pub fn cardinal(digits: &str) -> String {
    let sig = digits.trim_start_matches('0');
    if sig.is_empty() {
        return "zero".to_owned();
    }
    if sig.len() > MAX_CARDINAL_DIGITS || !sig.bytes().all(|b| b.is_ascii_digit()) {
        return digits_one_by_one(sig);
    }
    let bytes = sig.as_bytes();
    let groups = bytes.len().div_ceil(3);
    let first_len = bytes.len() - (groups - 1) * 3;
    let mut out = String::with_capacity(sig.len() * 8);
    let mut start = 0;
    for g in (0..groups).rev() {
        let len = if start == 0 { first_len } else { 3 };
        let value = bytes[start..start + len]
            .iter()
            .fold(0u32, |acc, b| acc * 10 + u32::from(b - b'0'));
        start += len;
        if value > 0 {
            push_below_thousand(&mut out, value);
            if g > 0 {
                push_word(&mut out, SCALES[g]);
            }
        }
    }
    out
}

/// Cardinal of a machine integer.
pub fn cardinal_u64(n: u64) -> String {
    cardinal(&n.to_string())
}

/// Turns the last word of cardinal words into its ordinal: "twenty-one" → "twenty-first".
fn ordinalize(words: &str) -> String {
    let cut = words.rfind([' ', '-']).map_or(0, |i| i + 1);
    let (head, last) = words.split_at(cut);
    let tail = match last {
        "one" => "first".to_owned(),
        "two" => "second".to_owned(),
        "three" => "third".to_owned(),
        "five" => "fifth".to_owned(),
        "eight" => "eighth".to_owned(),
        "nine" => "ninth".to_owned(),
        "twelve" => "twelfth".to_owned(),
        w if w.ends_with('y') => format!("{}ieth", &w[..w.len() - 1]),
        w => format!("{w}th"),
    };
    format!("{head}{tail}")
}

/// Ordinal of an ASCII digit string: "103" → "one hundred third".
pub fn ordinal(digits: &str) -> String {
    ordinalize(&cardinal(digits))
}

/// Ordinal of a machine integer.
pub fn ordinal_u32(n: u32) -> String {
    ordinal(&n.to_string())
}

/// Plural of number words, for decades and fraction denominators: "ninety" → "nineties", "six" → "sixes",
/// "hundred" → "hundreds", "third" → "thirds", "half" → "halves".
pub fn pluralize(words: &str) -> String {
    if let Some(stem) = words.strip_suffix("half") {
        format!("{stem}halves")
    } else if let Some(stem) = words.strip_suffix('y') {
        format!("{stem}ies")
    } else if words.ends_with('x') {
        format!("{words}es")
    } else {
        format!("{words}s")
    }
}

/// A decimal number from its integer and fractional digit strings: ("3", "14") → "three point one four";
/// an empty integer part (".5") reads "point five". The fraction is read digit by digit, as people do.
pub fn decimal(int_digits: &str, frac_digits: &str) -> String {
    let mut out = if int_digits.is_empty() {
        String::new()
    } else {
        cardinal(int_digits)
    };
    push_word(&mut out, "point");
    for w in frac_digits.chars().filter_map(digit_word) {
        push_word(&mut out, w);
    }
    out
}

/// A year the way it is spoken: 1999 → "nineteen ninety-nine", 1900 → "nineteen hundred", 1905 → "nineteen
/// oh five", 2000..=2009 → "two thousand (five)", 2010 → "twenty ten", 2024 → "twenty twenty-four".
/// Years below 1000 or above 9999 are read as cardinals ("four seventy-six" would confuse more than help).
pub fn year(n: u32) -> String {
    if !(1000..=9999).contains(&n) || (n % 1000 < 10 && (n / 100).is_multiple_of(10)) {
        return cardinal_u64(u64::from(n));
    }
    let (high, low) = (n / 100, n % 100);
    let mut out = cardinal_u64(u64::from(high));
    match low {
        0 => push_word(&mut out, "hundred"),
        1..=9 => {
            push_word(&mut out, "oh");
            push_word(&mut out, ONES[low as usize]);
        }
        _ => push_below_thousand(&mut out, low),
    }
    out
}

/// A two-digit year ("'99", "3/5/05"): "ninety-nine", "oh five", "twenty".
pub fn short_year(n: u32) -> String {
    match n {
        0 => "oh oh".to_owned(),
        1..=9 => format!("oh {}", ONES[n as usize]),
        _ => cardinal_u64(u64::from(n % 100)),
    }
}

/// The denominator of a fraction: 2 → "half"/"halves", 4 → "quarter(s)", else the ordinal ("third(s)").
pub fn denominator(digits: &str, plural: bool) -> String {
    let singular = match digits.trim_start_matches('0') {
        "2" => "half".to_owned(),
        "4" => "quarter".to_owned(),
        d => ordinal(d),
    };
    if plural {
        pluralize(&singular)
    } else {
        singular
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cardinals() {
        let cases = [
            ("0", "zero"),
            ("000", "zero"),
            ("7", "seven"),
            ("13", "thirteen"),
            ("20", "twenty"),
            ("42", "forty-two"),
            ("100", "one hundred"),
            ("105", "one hundred five"),
            ("999", "nine hundred ninety-nine"),
            ("1000", "one thousand"),
            ("1001", "one thousand one"),
            ("10000", "ten thousand"),
            ("100000", "one hundred thousand"),
            ("1000000", "one million"),
            ("1000001", "one million one"),
            (
                "1234567",
                "one million two hundred thirty-four thousand five hundred sixty-seven",
            ),
            ("1000000000", "one billion"),
            ("1000000000000", "one trillion"),
            ("1000000000000000", "one quadrillion"),
            ("2500000000000000", "two quadrillion five hundred trillion"),
            ("1000000000000000000", "one quintillion"),
            ("007", "seven"),
        ];
        for (input, want) in cases {
            assert_eq!(cardinal(input), want, "cardinal({input})");
        }
    }

    #[test]
    fn huge_numbers_fall_back_to_digits() {
        let long = "1".repeat(MAX_CARDINAL_DIGITS + 1);
        let words = cardinal(&long);
        assert_eq!(words.split(' ').count(), MAX_CARDINAL_DIGITS + 1);
        assert!(
            cardinal(&"9".repeat(MAX_CARDINAL_DIGITS))
                .starts_with("nine hundred ninety-nine decillion")
        );
    }

    #[test]
    fn ordinals() {
        let cases = [
            ("1", "first"),
            ("2", "second"),
            ("3", "third"),
            ("4", "fourth"),
            ("5", "fifth"),
            ("8", "eighth"),
            ("9", "ninth"),
            ("11", "eleventh"),
            ("12", "twelfth"),
            ("20", "twentieth"),
            ("21", "twenty-first"),
            ("22", "twenty-second"),
            ("100", "one hundredth"),
            ("103", "one hundred third"),
            ("1000", "one thousandth"),
            ("1000000", "one millionth"),
        ];
        for (input, want) in cases {
            assert_eq!(ordinal(input), want, "ordinal({input})");
        }
    }

    #[test]
    fn years() {
        let cases = [
            (1066, "ten sixty-six"),
            (1100, "eleven hundred"),
            (1500, "fifteen hundred"),
            (1776, "seventeen seventy-six"),
            (1900, "nineteen hundred"),
            (1905, "nineteen oh five"),
            (1999, "nineteen ninety-nine"),
            (2000, "two thousand"),
            (2005, "two thousand five"),
            (2010, "twenty ten"),
            (2024, "twenty twenty-four"),
            (2100, "twenty-one hundred"),
            (476, "four hundred seventy-six"),
            (10000, "ten thousand"),
        ];
        for (input, want) in cases {
            assert_eq!(year(input), want, "year({input})");
        }
    }

    #[test]
    fn decimals_plurals_fractions() {
        assert_eq!(decimal("3", "14"), "three point one four");
        assert_eq!(decimal("0", "05"), "zero point zero five");
        assert_eq!(decimal("", "5"), "point five");
        assert_eq!(pluralize("ninety"), "nineties");
        assert_eq!(pluralize("twenty-six"), "twenty-sixes");
        assert_eq!(pluralize("nineteen hundred"), "nineteen hundreds");
        assert_eq!(denominator("2", false), "half");
        assert_eq!(denominator("2", true), "halves");
        assert_eq!(denominator("4", true), "quarters");
        assert_eq!(denominator("3", true), "thirds");
        assert_eq!(denominator("100", false), "one hundredth");
        assert_eq!(short_year(5), "oh five");
        assert_eq!(short_year(99), "ninety-nine");
        assert_eq!(
            digits_one_by_one("5550123"),
            "five five five zero one two three"
        );
    }
}
