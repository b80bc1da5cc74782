//! Abbreviation tables shared by the normaliser and the sentence splitter.
//!
//! Input: a token core as written, without its final period ("Dr", "e.g", "Jan"). Output: the spoken
//! expansion and how the abbreviation behaves at a period. Invariants: lookups are case-sensitive where case
//! tells meanings apart ("No" before a number, "St" vs "st"), and pure (static tables, no allocation).

/// How an abbreviation's period relates to sentence ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Never ends a sentence: titles before a name ("Dr. Smith") and connectives ("e.g.", "vs."); the
    /// period is dropped when expanded.
    Inner,
    /// Comes before a number ("No. 5", "p. 12"): expanded only when a number follows.
    BeforeNumber,
    /// Follows a name ("Jr.", "Inc.", "Ph.D.", initialisms like "U.S."): usually mid-sentence even before a
    /// capital ("U.S. Army", "King Jr. Day"), so its period ends a sentence only before a word that commonly
    /// starts one ([`is_sentence_starter`]).
    Suffix,
    /// Anything else ("etc.", "Jan."): its period may also end the sentence, so it is kept when the next
    /// word is capitalised.
    Word,
}

/// Abbreviations written with a final period. "Dr" and "St" are handled by [`dr_or_st`], months by the date
/// code, weekdays by [`weekday`].
pub fn dotted(core: &str) -> Option<(&'static str, Kind)> {
    use Kind::{BeforeNumber, Inner, Suffix, Word};
    Some(match core {
        "Mr" | "MR" => ("Mister", Inner),
        "Mrs" | "MRS" => ("Missus", Inner),
        "Ms" | "MS" => ("Miz", Inner),
        "Mx" => ("Mix", Inner),
        "Prof" => ("Professor", Inner),
        "Rev" => ("Reverend", Inner),
        "Hon" => ("Honorable", Inner),
        "Gen" => ("General", Inner),
        "Col" => ("Colonel", Inner),
        "Capt" => ("Captain", Inner),
        "Lt" => ("Lieutenant", Inner),
        "Sgt" => ("Sergeant", Inner),
        "Cpl" => ("Corporal", Inner),
        "Maj" => ("Major", Inner),
        "Adm" => ("Admiral", Inner),
        "Cmdr" => ("Commander", Inner),
        "Gov" => ("Governor", Inner),
        "Sen" => ("Senator", Inner),
        "Rep" => ("Representative", Inner),
        "Pres" => ("President", Inner),
        "Supt" => ("Superintendent", Inner),
        "Fr" => ("Father", Inner),
        "Mt" => ("Mount", Inner),
        "Ft" => ("Fort", Inner),
        "Mme" => ("Madame", Inner),
        "Jr" => ("Junior", Suffix),
        "Sr" => ("Senior", Suffix),
        "Inc" => ("Incorporated", Suffix),
        "Ltd" => ("Limited", Suffix),
        "Co" => ("Company", Suffix),
        "Corp" => ("Corporation", Suffix),
        "Bros" => ("Brothers", Suffix),
        "Esq" => ("Esquire", Suffix),
        "etc" => ("et cetera", Word),
        "vs" | "v" => ("versus", Inner),
        "approx" => ("approximately", Word),
        "dept" | "Dept" => ("department", Word),
        "govt" | "Govt" => ("government", Word),
        "Ave" => ("Avenue", Word),
        "Blvd" => ("Boulevard", Word),
        "Rd" => ("Road", Word),
        "Ln" => ("Lane", Word),
        "Hwy" => ("Highway", Word),
        "Sq" => ("Square", Word),
        "e.g" | "E.g" => ("for example", Inner),
        "i.e" | "I.e" => ("that is", Inner),
        "cf" => ("compare", Inner),
        "viz" => ("namely", Inner),
        "al" => ("al", Word),
        "a.m" | "A.M" => ("AM", Word),
        "p.m" | "P.M" => ("PM", Word),
        "Ph.D" => ("PhD", Suffix),
        "No" | "no" => ("number", BeforeNumber),
        "Nos" | "nos" => ("numbers", BeforeNumber),
        "p" => ("page", BeforeNumber),
        "pp" => ("pages", BeforeNumber),
        "vol" | "Vol" => ("volume", BeforeNumber),
        "ch" | "Ch" => ("chapter", BeforeNumber),
        "fig" | "Fig" => ("figure", BeforeNumber),
        "sec" | "Sec" => ("section", BeforeNumber),
        "para" => ("paragraph", BeforeNumber),
        "ext" => ("extension", BeforeNumber),
        "est" | "Est" => ("established", BeforeNumber),
        "c" | "ca" => ("circa", BeforeNumber),
        _ => return None,
    })
}

/// Abbreviations also common without a period (British style "Mr Smith", "England vs France").
/// Inner ones (titles) are only expanded before a capitalised word.
pub fn undotted(core: &str) -> Option<(&'static str, Kind)> {
    match core {
        "Mr" | "Mrs" | "Ms" | "Mx" => dotted(core),
        "vs" => Some(("versus", Kind::Word)),
        "etc" => Some(("et cetera", Kind::Word)),
        "w/" => Some(("with", Kind::Word)),
        "w/o" => Some(("without", Kind::Word)),
        "and/or" => Some(("and or", Kind::Word)),
        _ => None,
    }
}

/// Weekday abbreviations; expanded only inside dates ("Tue., Mar. 5"), since "Sun." or "Wed." at the
/// end of a sentence are more often words.
pub fn weekday(core: &str) -> Option<&'static str> {
    Some(match core {
        "Mon" => "Monday",
        "Tue" | "Tues" => "Tuesday",
        "Wed" => "Wednesday",
        "Thu" | "Thur" | "Thurs" => "Thursday",
        "Fri" => "Friday",
        "Sat" => "Saturday",
        "Sun" => "Sunday",
        _ => return None,
    })
}

/// Which reading "Dr." / "St." get: `prev_is_name` means the word before is a capitalised word that does not
/// start the sentence, or a number ("Main St.", "5th St.", "Elm Dr."); `next_is_name` means the next word is
/// capitalised ("St. Louis", "Dr. Smith"). Returns `None` for other cores.
pub fn dr_or_st(
    core: &str,
    prev_is_name: bool,
    next_is_name: bool,
) -> Option<(&'static str, Kind)> {
    let place = prev_is_name && !next_is_name;
    match core {
        "St" | "ST" if prev_is_name || !next_is_name => Some(("Street", Kind::Word)),
        "St" | "ST" => Some(("Saint", Kind::Inner)),
        "Dr" | "DR" if place => Some(("Drive", Kind::Word)),
        "Dr" | "DR" => Some(("Doctor", Kind::Inner)),
        _ => None,
    }
}

/// Words that commonly start a sentence, used to tell "U.S. Army" (no break) from "the U.S. The" (break).
pub fn is_sentence_starter(word: &str) -> bool {
    let word = word.trim_start_matches(['"', '\'', '(', '[']);
    let word = word.trim_end_matches(|c: char| !c.is_alphanumeric());
    matches!(
        word,
        "A" | "An"
            | "The"
            | "I"
            | "He"
            | "She"
            | "It"
            | "We"
            | "You"
            | "They"
            | "His"
            | "Her"
            | "Its"
            | "Our"
            | "Their"
            | "My"
            | "Your"
            | "This"
            | "That"
            | "These"
            | "Those"
            | "There"
            | "Here"
            | "But"
            | "And"
            | "Or"
            | "So"
            | "Yet"
            | "Then"
            | "Now"
            | "Still"
            | "In"
            | "On"
            | "At"
            | "After"
            | "Before"
            | "When"
            | "While"
            | "If"
            | "As"
            | "What"
            | "Why"
            | "How"
            | "Who"
            | "Where"
            | "Some"
            | "Many"
            | "Most"
            | "All"
            | "No"
            | "Yes"
    )
}

/// "U.S", "B.C", "a.k.a": single letters joined by periods (the core of "U.S.").
pub fn is_initialism(core: &str) -> bool {
    let mut letters = 0;
    for part in core.split('.') {
        let mut chars = part.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_alphabetic() => letters += 1,
            _ => return false,
        }
    }
    letters >= 2
}

/// True if a period after `word` (the text between the previous space and the period) cannot end a
/// sentence, whatever follows: titles, "e.g."-style abbreviations and single-letter initials ("J. R. R.").
/// `next_is_digit` allows the before-a-number ones ("No. 5", "Jan. 5").
pub fn period_is_internal(word: &str, next_is_digit: bool) -> bool {
    let word = word.trim_start_matches(['"', '\'', '(', '[']);
    if matches!(word, "Dr" | "St") {
        return true;
    }
    let mut chars = word.chars();
    if let (Some(c), None) = (chars.next(), chars.next())
        && c.is_uppercase()
    {
        return true;
    }
    match dotted(word) {
        Some((_, Kind::Inner)) => true,
        Some((_, Kind::BeforeNumber)) => next_is_digit,
        _ => next_is_digit && crate::text::dates_times::month_from_abbrev(word).is_some(),
    }
}

/// True if `word` (without its final period) is a [`Kind::Suffix`] abbreviation or an initialism.
pub fn is_suffix(word: &str) -> bool {
    let word = word.trim_start_matches(['"', '\'', '(', '[']);
    is_initialism(word) || matches!(dotted(word), Some((_, Kind::Suffix)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saint_or_street() {
        assert_eq!(dr_or_st("St", false, true).map(|e| e.0), Some("Saint"));
        assert_eq!(dr_or_st("St", true, false).map(|e| e.0), Some("Street"));
        assert_eq!(dr_or_st("St", true, true).map(|e| e.0), Some("Street"));
        assert_eq!(dr_or_st("St", false, false).map(|e| e.0), Some("Street"));
        assert_eq!(dr_or_st("Dr", false, true).map(|e| e.0), Some("Doctor"));
        assert_eq!(dr_or_st("Dr", true, false).map(|e| e.0), Some("Drive"));
        assert_eq!(dr_or_st("Dr", true, true).map(|e| e.0), Some("Doctor"));
        assert_eq!(dr_or_st("Dr", false, false).map(|e| e.0), Some("Doctor"));
        assert_eq!(dr_or_st("Mr", false, true), None);
    }

    #[test]
    fn suffixes_and_starters() {
        assert!(is_suffix("U.S"));
        assert!(is_suffix("Jr"));
        assert!(is_suffix("(Inc"));
        assert!(!is_suffix("etc"));
        assert!(!is_suffix("home"));
        assert!(is_sentence_starter("The"));
        assert!(is_sentence_starter("\"He"));
        assert!(!is_sentence_starter("Army"));
        assert!(!is_sentence_starter("the"));
        assert!(is_initialism("U.S"));
        assert!(is_initialism("a.k.a"));
        assert!(!is_initialism("e"));
        assert!(!is_initialism("Ph.D"));
        assert!(!is_initialism("U..S"));
    }

    #[test]
    fn internal_periods() {
        for (word, digit, want) in [
            ("Dr", false, true),
            ("Mrs", false, true),
            ("J", false, true),
            ("(e.g", false, true),
            ("No", true, true),
            ("No", false, false),
            ("Jan", true, true),
            ("Jan", false, false),
            ("etc", false, false),
            ("Inc", false, false),
            ("home", false, false),
            ("a", false, false),
        ] {
            assert_eq!(period_is_internal(word, digit), want, "{word}");
        }
    }
}
