//! English text normalisation for text-to-speech, and sentence splitting.
//!
//! Input: script text as the author wrote it. Output: the words a narrator would say ([`normalize`]) and
//! pieces short enough for one synthesis call ([`split_sentences`]). Pure functions, no I/O, no global
//! state; nothing here panics on any input (a seeded randomised test and a cargo-fuzz target check that).
//!
//! espeak-ng can read digits itself, but it reads "1500 people" as "one thousand five hundred", "$5.50" as
//! "dollar five point five zero", "Henry VIII" as "Henry roman eight" and "'90s" as "ninety z", so every
//! ASCII digit is expanded here: the output of [`normalize`] never contains one.
//!
//! # Reading rules and the decisions behind them
//! - **Cardinals**: US style without "and" ("one hundred five"); grouping commas must be valid
//!   ("1,234,567"); up to 36 digits (decillions), longer ones and plain integers over 18 digits without
//!   commas are identifiers and are read digit by digit, as are integers with a leading zero ("007").
//!   Decimals read their fraction digit by digit ("three point one four"). Negative: "minus".
//!   "1,5" is not a European decimal here: a comma not followed by exactly three digits separates a list
//!   ("one, five").
//! - **Years**: a four-digit number with no sign, comma or decimals reads as a year ("nineteen ninety-nine",
//!   "nineteen oh five", "fifteen hundred", "two thousand five", "twenty ten", "twenty twenty-four") when it
//!   is 1000–2099 and the words around it say so: after a month, after *in, since, by, until, till, from,
//!   before, after, during, circa, c., ca., year, early, late, mid, summer, winter, spring, autumn, through,
//!   AD, A.D.* (not "of" or "around": "a total of 2016 votes"), before *AD/BC/BCE/CE*, after "mid-"/"pre-"/
//!   "post-"/"early-"/"late-" in a compound, in a date, a decade ("1990s") or a year range
//!   ("1990-1995", "1990-95"), and after *and/or/to/through/until/till* when the number two words back was a
//!   year ("in 2010 and 2012"). Without such context, 1100–1999 still read year-style ("fifteen hundred
//!   people" is how people say it) and 2000–2099 read as cardinals ("two thousand twenty-four"), which is
//!   correct for a count and an acceptable way to say a year. After a currency sign or before a unit a
//!   number is always a cardinal.
//! - **Ordinals** "1st", "22nd", "103rd" (any of st/nd/rd/th accepted). **Decades** "1990s", "1900s",
//!   "'90s", "1960's". **Two-digit years** "'99" → "ninety-nine", "'05" → "oh five".
//! - **Money**: `$ £ € ¥ ₹ ₩ ₽ US$ C$ A$` before the amount; "$5.50" → "five dollars and fifty cents",
//!   "$0.99" → "ninety-nine cents", "$1.5 million"/"$1.5M"/"$2bn"/"$10k" → "one point five million
//!   dollars", "$5-10" → "five to ten dollars", "$5/hr" → "five dollars per hour"; ISO codes after the
//!   amount ("5 USD" → "five US dollars"); "50¢".
//! - **Percent** "50%", "3.5%", "10-20%", "50 %". **Units** after a number, glued or spaced ("5km",
//!   "5 km", "1 kg" singular, "°C", "°F", "mph", "km/h", "GB", "m²", ...); "in" and "x" only when glued
//!   ("5in", "2x"), since they are words too.
//! - **Dates**: numeric dates default to US order because the default voice is en_US: "3/5/2024" → "March
//!   fifth, twenty twenty-four"; when the first number cannot be a month ("25/12/2024") they are read day
//!   first ("the twenty-fifth of December, ..."). ISO "2024-03-05", "3-5-2024", European dotted "5.3.2024"
//!   (day first, four-digit year only so that "1.2.3" stays a version number). Month names: "March 5,
//!   2024", "Mar. 5", "March 5th"; day first: "5 March 2024" → "the fifth of March, twenty twenty-four".
//!   Full month names must be capitalised ("may", "march" are verbs). Two-part "3/5" is a fraction, not a
//!   date.
//! - **Times**: "3:30 pm", "9am", "9 a.m." → "three thirty PM" (upper-case "AM"/"PM", which espeak spells
//!   out), "3:00" → "three o'clock", "14:00" → "fourteen hundred", "14:05" → "fourteen oh five";
//!   "1:23:45" is read as a duration, "25:30" (over 24) as minutes and seconds. "noon"/"midnight" are words
//!   already and left alone. "3:2" and "1:100" (not two-digit minutes) are ratios ("three to two"), except
//!   after a capitalised word that does not start the sentence, where they are chapter and verse ("Psalm
//!   23:4" → "twenty-three four"; "John 3:16" reads as a clock, "three sixteen", which is also right).
//! - **Ranges**: "pages 3-5" → "three to five", "10am-12pm", "3rd-4th"; "50-50" → "fifty-fifty"; a spaced
//!   hyphen between numbers ("5 - 3") is "minus"; an en dash between numbers is a range. Other hyphen
//!   compounds are read part by part ("5-year-old", "COVID-19", "21st-century").
//! - **Phone numbers** "555-1234", "555-123-4567", "(555) 123-4567", "1-800-555-1234", "555.123.4567":
//!   digit by digit in groups. "NNN-NNNN" where both parts end in 0 is a range ("100-1000").
//! - **Fractions** "1/2" → "one half", "3/4" → "three quarters", "3 1/2" → "three and a half", "½";
//!   "24/7", "9/11" and "50/50" as people say them; "10/10" → "ten out of ten", "4.5/5" → "four point five
//!   out of five". "100s"/"1000s" → "hundreds"/"thousands". Heights "6'2\"" → "six foot two".
//! - **Abbreviations**: titles (Dr. Mr. Mrs. Ms. Prof. Rev. Gen. Capt. ...) drop their period; "St." is
//!   "Saint" before a capitalised word unless a capitalised word or a number precedes it ("Main St.",
//!   "5th St." → "Street"); "Dr." is "Drive" after a capitalised word or number when no name follows, else
//!   "Doctor"; "vs. e.g. i.e. cf." likewise never end a sentence. Name suffixes (Jr. Sr. Inc. Ltd. Co.
//!   Ph.D.) and initialisms ("U.S." → "US") keep their period only before a word that commonly starts a
//!   sentence ("The", "He", "But", ...), so "U.S. Army" and "King Jr. Day" run on while "the U.S. The next
//!   day" breaks. Others (etc. approx. Ave. Jan.–Dec. a.m./p.m. ...) keep their period when the next word
//!   is capitalised. Every title and name keeps its period at the end of a paragraph.
//!   "No./p./pp./vol./ch./c." expand only before a number (or a Roman numeral after "vol."/"ch.").
//!   Weekday abbreviations expand only inside dates ("Tue., Mar. 5"), since "Sun." is usually the sun.
//!   British undotted "Mr Smith", "Ms Jones" too.
//! - **Roman numerals** (canonical upper case only): cardinal after counting words ("Chapter IV", "Part II",
//!   "World War II", "Super Bowl LVII"); "the Eighth" after regnal names ("Henry VIII", "Pope Leo XIII",
//!   "King Harold II"), but a lone "I" there only before punctuation or "of" ("Charles I of England"), since
//!   "Henry I think" is a pronoun; multi-letter I/V/X numerals after any other capitalised word are
//!   cardinals ("Rocky II"). Lower-case numerals only after counting words ("Scene ii"). Elsewhere left
//!   alone.
//! - **Symbols**: "&" → "and", "+" → "plus", "=" → "equals", "@" → "at" (emails: "at ... dot ..."), "#1"
//!   → "number one", "§5", "~5" → "about five", "×"; emphasis "*" and "_" around words are dropped; "™"
//!   and "®" are dropped.
//! - **Typography**: NFKC (fullwidth, ligatures, "℃", non-breaking spaces), curly quotes → straight, em
//!   dashes and "--" → a comma pause (Piper's phoneme set has "," but no dash), "…" → "...", zero-width,
//!   bidi and soft-hyphen characters removed; emoji and dingbats are dropped (espeak would say "grinning
//!   face", "heart suit"); Arabic-Indic and Devanagari digits are read like ASCII ones. A blank line is a
//!   paragraph break; a single line break is kept but read as a space (hard-wrapped prose).
//! - **Sentence starts**: an expansion that opens a sentence after `.`/`!`/`?` is capitalised ("He left.
//!   100 people stayed." → "... One hundred people stayed."), so the splitter still sees the start.
//!
//! # Sentence splitting
//! [`split_sentences`] ends a sentence at `.`, `!`, `?` or `…` (plus closing quotes/brackets) when the next
//! word does not start in lower case, except after titles, "e.g."-like abbreviations, single-letter initials
//! ("J. R. R. Tolkien"), before a number "No."/"Jan."-like ones, and name suffixes or initialisms unless a
//! common sentence starter follows (the same rules as above); a blank line always ends one. Pieces
//! longer than `max_chars` are cut after `;`, `:` or `—`, then after `,`, then at a space (a stronger mark
//! wins only if the piece before it is at least a third of the limit), never inside a word. `max_chars == 0`
//! puts every word in its own piece.
//!
//! # Known limits
//! "plan B. Then" is not split (initial rule), nor is "he moved to the U.S. Congress met" (suffix rule);
//! "1999 people" is read "nineteen ninety-nine people"; model numbers like "737-800" read as ranges;
//! "10.30" (British time) reads as a decimal.

mod abbreviations;
pub mod caveats;
mod dates_times;
pub mod markup;
mod normalize;
mod numbers;
mod quantities;
mod roman;
mod sentences;
mod tokens;
mod typography;
mod units;

#[cfg(test)]
mod tests;

pub use numbers::is_cardinal_word;

/// Expands what a TTS voice would misread into words: numbers, ordinals, money, percentages, years, dates,
/// times, ranges, fractions, phone numbers, abbreviations, units, symbols, Roman numerals after their cue
/// words and typography (see the module docs for each rule). Leaves ordinary words alone; never panics; the
/// result contains no ASCII digit.
pub fn normalize(text: &str) -> String {
    normalize::normalize(text)
}

/// Splits text into sentences, then splits any sentence longer than `max_chars` characters at clause
/// punctuation (`;` `:` `—`, then `,`, finally spaces), never inside a word. Keeps each sentence's terminal
/// punctuation (Piper's phonemiser uses it for intonation). Abbreviation-aware, so it also works on raw
/// text.
pub fn split_sentences(text: &str, max_chars: usize) -> Vec<String> {
    sentences::split(text, max_chars)
}

/// A heading's Roman numeral spoken as a number: "XIV" → "Fourteen", "XIV." → "Fourteen." (a
/// trailing period kept). `None` unless the whole text is one canonical numeral; `any_case` also
/// takes lower case ("xiv"), for numerals a book marks as such.
pub fn roman_heading(text: &str, any_case: bool) -> Option<String> {
    let period = if text.trim().ends_with('.') { "." } else { "" };
    let words = numbers::cardinal_u64(u64::from(roman_numeral(text, any_case)?));
    let mut chars = words.chars();
    let first = chars.next()?.to_uppercase();
    Some(format!("{first}{}{period}", chars.as_str()))
}

/// The value of a text that is one canonical Roman numeral, a trailing period allowed ("XIV." →
/// 14); upper case only unless `any_case`.
pub fn roman_numeral(text: &str, any_case: bool) -> Option<u32> {
    let text = text.trim();
    let core = text.strip_suffix('.').unwrap_or(text);
    let upper = core.to_ascii_uppercase();
    if !any_case && upper != core {
        return None;
    }
    roman::parse(&upper)
}

/// True if the text has anything a voice can say: a letter or digit after normalisation.
pub fn is_speakable(text: &str) -> bool {
    normalize(text).chars().any(char::is_alphanumeric)
}
