//! Roman numerals and the words that tell us a capitalised token is one.
//!
//! Input: a token core ("VIII") and the word before it ("Henry", "Chapter"). Output: the value (1..=3999) of
//! a numeral written in canonical upper-case form, and whether the context asks for a cardinal ("Chapter IV"
//! → four) or a regnal ordinal ("Henry VIII" → the Eighth). Invariants: only canonical numerals are
//! accepted ("IIII", "VX", "IC" are not numerals), so ordinary capitalised words are rarely mistaken.

/// Value of a canonical upper-case Roman numeral, 1..=3999.
pub fn parse(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 15 {
        return None;
    }
    let value_of = |c: u8| match c {
        b'I' => Some(1),
        b'V' => Some(5),
        b'X' => Some(10),
        b'L' => Some(50),
        b'C' => Some(100),
        b'D' => Some(500),
        b'M' => Some(1000),
        _ => None,
    };
    let values: Vec<i32> = s.bytes().map(value_of).collect::<Option<_>>()?;
    let mut total = 0i32;
    for (i, v) in values.iter().enumerate() {
        match values.get(i + 1) {
            Some(next) if next > v => total -= v,
            _ => total += v,
        }
    }
    let total = u32::try_from(total)
        .ok()
        .filter(|t| (1..=3999).contains(t))?;
    (to_roman(total) == s).then_some(total)
}

fn to_roman(mut n: u32) -> String {
    const TABLE: [(u32, &str); 13] = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ];
    let mut out = String::new();
    for (v, sym) in TABLE {
        while n >= v {
            out.push_str(sym);
            n -= v;
        }
    }
    out
}

/// Words after which a numeral counts things: "Chapter IV" → "Chapter four", "World War II".
pub fn is_counting_word(word: &str) -> bool {
    matches!(
        word.to_ascii_lowercase().as_str(),
        "chapter"
            | "part"
            | "book"
            | "volume"
            | "vol"
            | "ch"
            | "pt"
            | "act"
            | "scene"
            | "section"
            | "episode"
            | "appendix"
            | "phase"
            | "round"
            | "war"
            | "stage"
            | "level"
            | "article"
            | "canto"
            | "psalm"
            | "class"
            | "type"
            | "bowl"
            | "apollo"
            | "vatican"
            | "mark"
            | "lesson"
            | "unit"
            | "figure"
            | "table"
            | "step"
            | "grade"
            | "series"
    )
}

/// Given names that take regnal numbers ("Henry VIII" → "Henry the Eighth").
pub fn is_regnal_name(word: &str) -> bool {
    matches!(
        word,
        "Alexander"
            | "Alfonso"
            | "Amenhotep"
            | "Benedict"
            | "Boniface"
            | "Carl"
            | "Catherine"
            | "Charles"
            | "Christian"
            | "Clement"
            | "Constantine"
            | "Edward"
            | "Elizabeth"
            | "Ferdinand"
            | "Francis"
            | "Frederick"
            | "George"
            | "Gregory"
            | "Gustav"
            | "Gustavus"
            | "Haakon"
            | "Harald"
            | "Henri"
            | "Henry"
            | "Innocent"
            | "Ivan"
            | "James"
            | "John"
            | "Juan"
            | "Leo"
            | "Leopold"
            | "Louis"
            | "Ludwig"
            | "Mary"
            | "Napoleon"
            | "Nicholas"
            | "Olaf"
            | "Otto"
            | "Paul"
            | "Peter"
            | "Philip"
            | "Pius"
            | "Ptolemy"
            | "Ramesses"
            | "Richard"
            | "Robert"
            | "Sixtus"
            | "Stephen"
            | "Thutmose"
            | "Urban"
            | "Victor"
            | "Wilhelm"
            | "William"
    )
}

/// Titles before a regnal name ("King Harold II", "Pope Leo XIII").
pub fn is_royal_title(word: &str) -> bool {
    matches!(
        word,
        "King"
            | "Queen"
            | "Pope"
            | "Emperor"
            | "Empress"
            | "Tsar"
            | "Czar"
            | "Kaiser"
            | "Sultan"
            | "Pharaoh"
            | "Prince"
            | "Princess"
            | "Duke"
            | "Duchess"
            | "Earl"
            | "Count"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numerals() {
        for (s, want) in [
            ("I", Some(1)),
            ("IV", Some(4)),
            ("VIII", Some(8)),
            ("IX", Some(9)),
            ("XIV", Some(14)),
            ("XL", Some(40)),
            ("XCIX", Some(99)),
            ("MCMXCIX", Some(1999)),
            ("MMMCMXCIX", Some(3999)),
            ("IIII", None),
            ("VX", None),
            ("IC", None),
            ("IIV", None),
            ("MMMM", None),
            ("iv", None),
            ("", None),
            ("HELLO", None),
            ("XIVX", None),
        ] {
            assert_eq!(parse(s), want, "{s}");
        }
    }

    #[test]
    fn headings_speak_the_number() {
        use crate::text::roman_heading;
        assert_eq!(roman_heading("XIV", false).as_deref(), Some("Fourteen"));
        assert_eq!(roman_heading(" I. ", false).as_deref(), Some("One."));
        assert_eq!(roman_heading("xxi", true).as_deref(), Some("Twenty-one"));
        assert_eq!(roman_heading("xxi", false), None);
        assert_eq!(roman_heading("IIII", true), None);
        assert_eq!(roman_heading("Chapter I", true), None);
    }
}
