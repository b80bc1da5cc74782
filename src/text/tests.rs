//! Table-driven tests of the public API: one table per category, sentence splitting, unicode and empty
//! input, and a seeded randomised no-panic test.

use super::{is_speakable, normalize, split_sentences};

fn check(category: &str, cases: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (input, want) in cases {
        let got = normalize(input);
        if got != *want {
            failures.push(format!("  {input:?}\n    want {want:?}\n    got  {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{category}: {} of {} failed\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn cardinals_and_decimals() {
    check(
        "cardinals",
        &[
            ("0", "zero"),
            ("7 cats", "seven cats"),
            ("42", "forty-two"),
            ("I have 105 apples.", "I have one hundred five apples."),
            (
                "1,234,567",
                "one million two hundred thirty-four thousand five hundred sixty-seven",
            ),
            ("-5", "minus five"),
            ("It was -12 outside", "It was minus twelve outside"),
            ("3.14", "three point one four"),
            ("0.5", "zero point five"),
            (".5", "point five"),
            ("-0.25", "minus zero point two five"),
            ("1,000,000,000,000,000", "one quadrillion"),
            ("1000000000000000", "one quadrillion"),
            ("2,500,000", "two million five hundred thousand"),
            ("10,000 people", "ten thousand people"),
            ("007", "zero zero seven"),
            ("1,5", "one, five"),
            (
                "12345678901234567890",
                "one two three four five six seven eight nine zero one two three four five six seven eight nine zero",
            ),
            (
                "He scored 12, 15 and 20.",
                "He scored twelve, fifteen and twenty.",
            ),
            ("version 1.2.3", "version one point two point three"),
            ("+5", "plus five"),
            ("100s of people", "hundreds of people"),
            ("1000s of miles", "thousands of miles"),
            ("10^6", "ten to the power of six"),
            ("A 50-50 chance", "A fifty-fifty chance"),
            ("He was 6'2\" tall.", "He was six foot two tall."),
            (
                "He left. 100 people stayed.",
                "He left. One hundred people stayed.",
            ),
            ("Really? $5! 3 left.", "Really? Five dollars! Three left."),
            ("approx. 5 people", "approximately five people"),
            ("1.5 million people", "one point five million people"),
        ],
    );
}

#[test]
fn ordinals() {
    check(
        "ordinals",
        &[
            ("1st", "first"),
            ("2nd place", "second place"),
            ("3rd", "third"),
            ("4th", "fourth"),
            ("11th", "eleventh"),
            ("12th", "twelfth"),
            ("13th", "thirteenth"),
            ("22nd", "twenty-second"),
            ("the 103rd time", "the one hundred third time"),
            ("the 21st-century city", "the twenty-first-century city"),
            ("100th", "one hundredth"),
            ("1000th", "one thousandth"),
        ],
    );
}

#[test]
fn money() {
    check(
        "money",
        &[
            ("$5", "five dollars"),
            ("$1", "one dollar"),
            ("$5.50", "five dollars and fifty cents"),
            ("$0.99", "ninety-nine cents"),
            ("$1.01", "one dollar and one cent"),
            ("$5.00", "five dollars"),
            ("$1,000", "one thousand dollars"),
            ("$1.5 million", "one point five million dollars"),
            ("$2 billion.", "two billion dollars."),
            ("$1.5M", "one point five million dollars"),
            ("$2bn", "two billion dollars"),
            ("$10k", "ten thousand dollars"),
            ("£3", "three pounds"),
            ("£3.50", "three pounds and fifty pence"),
            ("£0.01", "one penny"),
            ("€10", "ten euros"),
            ("€1", "one euro"),
            ("¥500", "five hundred yen"),
            ("5 USD", "five US dollars"),
            ("1 EUR", "one euro"),
            ("-$5", "minus five dollars"),
            ("$5-10", "five to ten dollars"),
            ("$5-$10", "five to ten dollars"),
            ("$5/hr", "five dollars per hour"),
            ("US$20", "twenty US dollars"),
            ("It costs $3.", "It costs three dollars."),
            ("50¢", "fifty cents"),
            ("$1999", "one thousand nine hundred ninety-nine dollars"),
        ],
    );
}

#[test]
fn percentages_and_units() {
    check(
        "percent/units",
        &[
            ("50%", "fifty percent"),
            ("3.5%", "three point five percent"),
            ("-2%", "minus two percent"),
            ("10-20%", "ten to twenty percent"),
            ("50 %", "fifty percent"),
            ("1%", "one percent"),
            ("5km", "five kilometers"),
            ("5 km", "five kilometers"),
            ("1 km", "one kilometer"),
            ("1.5 kg", "one point five kilograms"),
            ("10 cm", "ten centimeters"),
            ("3mm", "three millimeters"),
            ("100 m", "one hundred meters"),
            ("60 mph", "sixty miles per hour"),
            ("100 km/h", "one hundred kilometers per hour"),
            ("25°C", "twenty-five degrees Celsius"),
            ("-5 °C", "minus five degrees Celsius"),
            ("98.6°F", "ninety-eight point six degrees Fahrenheit"),
            ("90°", "ninety degrees"),
            ("16GB", "sixteen gigabytes"),
            ("512 MB", "five hundred twelve megabytes"),
            ("6ft", "six feet"),
            ("1 ft", "one foot"),
            ("12in", "twelve inches"),
            ("2x faster", "two times faster"),
            ("5 in the morning", "five in the morning"),
            ("50 m²", "fifty square meters"),
            ("3.5GHz", "three point five gigahertz"),
            ("5-10 km", "five to ten kilometers"),
            ("1500 km", "one thousand five hundred kilometers"),
            ("25℃", "twenty-five degrees Celsius"),
        ],
    );
}

#[test]
fn years() {
    check(
        "years",
        &[
            ("1999", "nineteen ninety-nine"),
            ("in 1999", "in nineteen ninety-nine"),
            ("in 2005", "in two thousand five"),
            ("in 2010", "in twenty ten"),
            ("since 2024", "since twenty twenty-four"),
            (
                "By 2030, things changed.",
                "By twenty thirty, things changed.",
            ),
            ("2024", "two thousand twenty-four"),
            ("2024 people", "two thousand twenty-four people"),
            ("1500 people", "fifteen hundred people"),
            ("in 1905", "in nineteen oh five"),
            ("in 1066", "in ten sixty-six"),
            ("1066 people", "one thousand sixty-six people"),
            ("the 1990s", "the nineteen nineties"),
            ("the 1900s", "the nineteen hundreds"),
            ("the 2000s", "the two thousands"),
            ("the 2010s", "the twenty tens"),
            ("the '90s", "the nineties"),
            ("the 90s", "the nineties"),
            ("the 1960's", "the nineteen sixties"),
            ("class of '99", "class of ninety-nine"),
            ("1990-1995", "nineteen ninety to nineteen ninety-five"),
            ("1990-95", "nineteen ninety to ninety-five"),
            ("2001–02", "two thousand one to oh two"),
            ("in 2010 and 2012", "in twenty ten and twenty twelve"),
            ("from 2015 to 2020", "from twenty fifteen to twenty twenty"),
            ("2020 AD", "twenty twenty AD"),
            ("500 BC", "five hundred BC"),
            ("44 B.C.", "forty-four BC."),
            ("c. 1500", "circa fifteen hundred"),
            ("A.D. 2010", "AD twenty ten"),
            ("1,999", "one thousand nine hundred ninety-nine"),
            ("March 2024", "March twenty twenty-four"),
            ("in 2100", "in two thousand one hundred"),
            (
                "a total of 2016 votes",
                "a total of two thousand sixteen votes",
            ),
            ("in mid-2010", "in mid-twenty ten"),
            ("mid-1990s", "mid-nineteen nineties"),
            ("the year 2020", "the year twenty twenty"),
        ],
    );
}

#[test]
fn dates() {
    check(
        "dates",
        &[
            ("2024-03-05", "March fifth, twenty twenty-four"),
            ("3/5/2024", "March fifth, twenty twenty-four"),
            ("12/25/1999", "December twenty-fifth, nineteen ninety-nine"),
            (
                "25/12/1999",
                "the twenty-fifth of December, nineteen ninety-nine",
            ),
            ("5.3.2024", "the fifth of March, twenty twenty-four"),
            ("March 5, 2024", "March fifth, twenty twenty-four"),
            ("March 5 2024", "March fifth, twenty twenty-four"),
            ("March 5th", "March fifth"),
            ("on March 5.", "on March fifth."),
            ("5 March 2024", "the fifth of March, twenty twenty-four"),
            ("on the 5th of March", "on the fifth of March"),
            ("5th March", "the fifth of March"),
            ("Mar. 5", "March fifth"),
            (
                "Jan. 5, 2024, was cold.",
                "January fifth, twenty twenty-four, was cold.",
            ),
            ("Sept. 11", "September eleventh"),
            ("Dec 25", "December twenty-fifth"),
            ("Tue., Mar. 5", "Tuesday, March fifth"),
            ("born in Jan. The next", "born in January. The next"),
            ("May 1", "May first"),
            ("you may 5", "you may five"),
            ("February 30", "February thirty"),
            ("3/5", "three fifths"),
            ("July 4, 1776", "July fourth, seventeen seventy-six"),
            ("1 January 2000", "the first of January, two thousand"),
        ],
    );
}

#[test]
fn times() {
    check(
        "times",
        &[
            ("3:30 pm", "three thirty PM"),
            ("3:30pm", "three thirty PM"),
            ("3:30 p.m.", "three thirty PM."),
            ("at 3:30 p.m. on", "at three thirty PM on"),
            ("9am", "nine AM"),
            ("9 a.m. sharp", "nine AM sharp"),
            ("9 AM", "nine AM"),
            ("11:59 PM", "eleven fifty-nine PM"),
            ("3:00", "three o'clock"),
            ("3:00 pm", "three PM"),
            ("14:05", "fourteen oh five"),
            ("14:00", "fourteen hundred"),
            ("09:30", "nine thirty"),
            ("12 noon", "twelve noon"),
            (
                "1:23:45",
                "one hour, twenty-three minutes and forty-five seconds",
            ),
            ("a 16:9 screen", "a sixteen to nine screen"),
            ("John 3:16", "John three sixteen"),
            (
                "read Psalm 23:4 aloud",
                "read Psalm twenty-three four aloud",
            ),
            ("the ratio was 3:1", "the ratio was three to one"),
            ("open 10am-12pm", "open ten AM to twelve PM"),
            ("John 3:16-18", "John three sixteen to eighteen"),
            ("1:100 scale", "one to one hundred scale"),
            ("ran it in 25:30", "ran it in twenty-five thirty"),
        ],
    );
}

#[test]
fn ranges_fractions_phones() {
    check(
        "ranges/fractions/phones",
        &[
            ("pages 3-5", "pages three to five"),
            ("pages 3–5", "pages three to five"),
            ("a 3-2 win", "a three to two win"),
            ("5 - 3", "five minus three"),
            ("1.5-2.5", "one point five to two point five"),
            ("100-1000", "one hundred to one thousand"),
            ("1/2", "one half"),
            ("3/4", "three quarters"),
            ("1/4", "one quarter"),
            ("2/3", "two thirds"),
            ("5/8 inch", "five eighths inch"),
            ("1/3", "one third"),
            ("3 1/2 cups", "three and a half cups"),
            ("2 3/4", "two and three quarters"),
            ("½", "one half"),
            ("3½", "three and a half"),
            ("24/7", "twenty-four seven"),
            ("9/11", "nine eleven"),
            ("10/10", "ten out of ten"),
            ("rated 4.5/5", "rated four point five out of five"),
            ("5/1", "five over one"),
            ("555-1234", "five five five, one two three four"),
            (
                "555-123-4567",
                "five five five, one two three, four five six seven",
            ),
            (
                "(555) 123-4567",
                "(five five five) one two three, four five six seven",
            ),
            (
                "1-800-555-1234",
                "one, eight zero zero, five five five, one two three four",
            ),
            (
                "555.123.4567",
                "five five five, one two three, four five six seven",
            ),
        ],
    );
}

#[test]
fn abbreviations() {
    check(
        "abbreviations",
        &[
            ("Dr. Smith", "Doctor Smith"),
            ("I went to see the Dr.", "I went to see the Doctor."),
            ("Mr. Jones and Mrs. Jones", "Mister Jones and Missus Jones"),
            ("Ms. Lee", "Miz Lee"),
            ("Prof. Xavier", "Professor Xavier"),
            ("Mr Smith", "Mister Smith"),
            ("Ms Jones", "Miz Jones"),
            ("St. Louis", "Saint Louis"),
            ("in St. Paul's Cathedral", "in Saint Paul's Cathedral"),
            ("Main St.", "Main Street."),
            ("on Main St. near", "on Main Street near"),
            ("5th St.", "fifth Street."),
            ("We live on Elm Dr. now", "We live on Elm Drive now"),
            ("Ask Dr. Who", "Ask Doctor Who"),
            (
                "Martin Luther King Jr. was",
                "Martin Luther King Junior was",
            ),
            ("John Smith Sr.", "John Smith Senior."),
            (
                "apples, pears, etc. and more",
                "apples, pears, et cetera and more",
            ),
            ("apples, etc.", "apples, et cetera."),
            ("apples etc. The end.", "apples et cetera. The end."),
            ("fruit, e.g. apples", "fruit, for example apples"),
            ("fruit (e.g., apples)", "fruit (for example, apples)"),
            ("that, i.e. this", "that, that is this"),
            ("Ali vs. Frazier", "Ali versus Frazier"),
            ("Ali vs Frazier", "Ali versus Frazier"),
            ("approx. 5 km", "approximately five kilometers"),
            ("No. 5", "number five"),
            ("no. 7", "number seven"),
            ("No. I won't.", "No. I won't."),
            ("see p. 12", "see page twelve"),
            ("pp. 3-5", "pages three to five"),
            ("Acme Inc. makes", "Acme Incorporated makes"),
            ("the U.S. economy", "the US economy"),
            ("the U.S. Army", "the US Army"),
            (
                "moved to the U.S. The next day",
                "moved to the US. The next day",
            ),
            ("moved to the U.S.", "moved to the US."),
            ("King Jr. Day", "King Junior Day"),
            ("Acme Inc. It grew.", "Acme Incorporated. It grew."),
            ("a Ph.D. student", "a PhD student"),
            ("Roe v. Wade", "Roe versus Wade"),
            ("Mt. Everest", "Mount Everest"),
            ("w/o sugar", "without sugar"),
            ("and/or", "and or"),
            ("Smith et al. found", "Smith et al found"),
        ],
    );
}

#[test]
fn roman_numerals() {
    check(
        "roman",
        &[
            ("Chapter IV", "Chapter four"),
            ("CHAPTER XII", "CHAPTER twelve"),
            ("Part II", "Part two"),
            ("Chapter I.", "Chapter one."),
            ("Book III", "Book three"),
            ("World War II", "World War two"),
            ("Super Bowl LVII", "Super Bowl fifty-seven"),
            ("Henry VIII", "Henry the Eighth"),
            ("Louis XIV", "Louis the Fourteenth"),
            ("Elizabeth II", "Elizabeth the Second"),
            ("Pope John Paul II", "Pope John Paul the Second"),
            ("King Harold II", "King Harold the Second"),
            ("Charles I of England", "Charles the First of England"),
            ("Elizabeth I.", "Elizabeth the First."),
            ("Henry I think so", "Henry I think so"),
            ("Rocky II", "Rocky two"),
            ("Act III, Scene ii", "Act three, Scene two"),
            ("see Vol. III", "see volume three"),
            ("see ch. xii", "see chapter twelve"),
            ("I went home", "I went home"),
            ("an IV drip", "an IV drip"),
            ("Malcolm X", "Malcolm X"),
            ("MIX", "MIX"),
        ],
    );
}

#[test]
fn symbols() {
    check(
        "symbols",
        &[
            ("Tom & Jerry", "Tom and Jerry"),
            ("R&D", "R and D"),
            ("C++", "C plus plus"),
            ("2 + 2 = 4", "two plus two equals four"),
            ("#1", "number one"),
            ("the #1 hit", "the number one hit"),
            ("mail jo@example.com", "mail jo at example dot com"),
            ("@home", "at home"),
            ("~5 min", "about five minutes"),
            ("§5", "section five"),
            ("*really*", "really"),
            ("_emphasis_", "emphasis"),
            ("Apple™", "Apple"),
            ("MP3", "MP three"),
            ("COVID-19", "COVID-nineteen"),
            ("a 5-year-old", "a five-year-old"),
            (
                "1920x1080",
                "one thousand nine hundred twenty by one thousand eighty",
            ),
            ("2x4", "two by four"),
            ("3D", "three D"),
            ("№ 5", "number five"),
        ],
    );
}

#[test]
fn typography() {
    check(
        "typography",
        &[
            ("\u{201C}Hello,\u{201D} she said.", "\"Hello,\" she said."),
            ("It\u{2019}s fine", "It's fine"),
            ("wait\u{2014}what", "wait, what"),
            ("wait \u{2014} what", "wait, what"),
            ("wait -- what", "wait, what"),
            ("wait - what", "wait, what"),
            ("Wait\u{2026}", "Wait..."),
            ("Wait \u{2026} what", "Wait... what"),
            ("a\u{00A0}b", "a b"),
            ("zero\u{200B}width", "zerowidth"),
            ("ＡＢＣ", "ABC"),
            ("ﬁne", "fine"),
            ("  lots   of\tspace  ", "lots of space"),
            ("line one\nline two", "line one\nline two"),
            ("para one.\n\n\n  para two.", "para one.\n\npara two."),
            ("caf\u{00E9} na\u{00EF}ve", "caf\u{00E9} na\u{00EF}ve"),
            ("e\u{0301}", "\u{00E9}"),
            ("great \u{1F600} news \u{2764}\u{FE0F}!", "great news!"),
        ],
    );
}

#[test]
fn ordinary_text_is_unchanged() {
    let text = "It was the best of times, it was the worst of times. \"Really?\" she asked; he nodded: yes!";
    assert_eq!(normalize(text), text);
    assert_eq!(
        normalize("I am here. May I go? March on!"),
        "I am here. May I go? March on!"
    );
}

#[test]
fn empty_and_whitespace() {
    assert_eq!(normalize(""), "");
    assert_eq!(normalize("   \n\t  "), "");
    assert!(split_sentences("", 100).is_empty());
    assert!(split_sentences(" \n\n ", 100).is_empty());
    assert!(!is_speakable(""));
    assert!(!is_speakable("  \n "));
    assert!(!is_speakable("... -- !?"));
    assert!(!is_speakable("\u{200B}\u{FEFF}"));
    assert!(is_speakable("&"));
    assert!(is_speakable("42"));
    assert!(is_speakable("hi"));
    assert!(is_speakable("\u{00E9}"));
}

#[test]
fn sentences_with_abbreviations() {
    let text = "Dr. Smith went to Washington. He left at 3 p.m. on Jan. 5. Then he slept!";
    assert_eq!(
        split_sentences(text, 200),
        [
            "Dr. Smith went to Washington.",
            "He left at 3 p.m. on Jan. 5.",
            "Then he slept!"
        ]
    );
    assert_eq!(
        split_sentences(&normalize(text), 200),
        [
            "Doctor Smith went to Washington.",
            "He left at three PM on January fifth.",
            "Then he slept!"
        ]
    );
    let cases: &[(&str, &[&str])] = &[
        ("Hi. Bye.", &["Hi.", "Bye."]),
        (
            "\"Stop!\" he said. \"Why?\"",
            &["\"Stop!\" he said.", "\"Why?\""],
        ),
        ("'Hi!' she said.", &["'Hi!' she said."]),
        (
            "(He left.) Then she came.",
            &["(He left.)", "Then she came."],
        ),
        (
            "J. R. R. Tolkien wrote it.",
            &["J. R. R. Tolkien wrote it."],
        ),
        (
            "Mr. and Mrs. Smith came. They sat.",
            &["Mr. and Mrs. Smith came.", "They sat."],
        ),
        ("It was e.g. fine. Yes.", &["It was e.g. fine.", "Yes."]),
        (
            "See No. 5 and St. Paul. Ok.",
            &["See No. 5 and St. Paul.", "Ok."],
        ),
        (
            "Wait... what? Yes... No.",
            &["Wait... what?", "Yes...", "No."],
        ),
        ("Really?! Yes.", &["Really?!", "Yes."]),
        (
            "Title line\n\nFirst para here.",
            &["Title line", "First para here."],
        ),
        (
            "wrapped\nline continues. Next.",
            &["wrapped line continues.", "Next."],
        ),
        ("Pi is 3.14. Yes.", &["Pi is 3.14.", "Yes."]),
        (
            "It cost $5. 6 people paid.",
            &["It cost $5.", "6 people paid."],
        ),
        ("Apples etc. Then pears.", &["Apples etc.", "Then pears."]),
        (
            "The U.S. Army came. The U.S. The end.",
            &["The U.S. Army came.", "The U.S.", "The end."],
        ),
        (
            "Made by Acme Inc. Its boss left.",
            &["Made by Acme Inc.", "Its boss left."],
        ),
        ("Sammy Davis Jr. Day", &["Sammy Davis Jr. Day"]),
        ("no terminal punctuation", &["no terminal punctuation"]),
    ];
    for (input, want) in cases {
        assert_eq!(split_sentences(input, 500), *want, "{input:?}");
    }
}

#[test]
fn long_sentences_split_at_clauses() {
    let s = "The rain fell all night; the river rose, and the town, which had seen floods before, waited.";
    let pieces = split_sentences(s, 40);
    assert_eq!(
        pieces,
        [
            "The rain fell all night;",
            "the river rose, and the town,",
            "which had seen floods before, waited."
        ]
    );
    let pieces = split_sentences("one two three four five six seven eight nine ten", 12);
    assert_eq!(
        pieces,
        [
            "one two",
            "three four",
            "five six",
            "seven eight",
            "nine ten"
        ]
    );
    let pieces = split_sentences("a supercalifragilisticexpialidocious word", 10);
    assert_eq!(pieces, ["a", "supercalifragilisticexpialidocious", "word"]);
    assert_eq!(split_sentences("alpha beta", 0), ["alpha", "beta"]);
    assert_eq!(
        split_sentences("He waited\u{2014}then left.", 12),
        ["He waited\u{2014}", "then left."]
    );
    assert_eq!(split_sentences("Short.", 3), ["Short."]);
}

/// A small deterministic generator (xorshift64*), so the randomised tests need no extra crate and
/// every failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const FRAGMENTS: &[&str] = &[
    "0", "1", "5", "9", "12", "1999", "2024", "1,234", ",", ".", "-", "--", "/", ":", "%", "$",
    "£", "€", "¥", "'", "\"", "(", ")", "st", "nd", "th", "s", "am", "p.m.", "km", "°C", "x", "#",
    "&", "+", "=", "@", " ", " ", " ", "\n", "\n\n", "Dr.", "St.", "Mr", "No.", "Jan.", "March",
    "May", "Chapter", "Henry", "IV", "I", "VIII", "U.S.", "e.g.", "etc.", "—", "–", "…", "½", "²",
    "\u{200B}", "\u{00A0}", "é", "ﬁ", "Ｂ", "😀", "\u{0301}", "\t", "\r", "?", "!", ";", "*", "_",
    "~", "§", "a", "word", "The", "\u{0000}", "٣", "Ⅷ",
];

fn random_text(rng: &mut Rng) -> String {
    let len = rng.below(40);
    (0..len)
        .map(|_| FRAGMENTS[rng.below(FRAGMENTS.len())])
        .collect()
}

#[test]
fn randomised_inputs_never_panic_and_keep_invariants() {
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    for _ in 0..20_000 {
        let text = random_text(&mut rng);
        let norm = normalize(&text);
        assert!(
            !norm.bytes().any(|b| b.is_ascii_digit()),
            "digit left in {norm:?} from {text:?}"
        );
        assert!(
            !norm.contains("  "),
            "double space in {norm:?} from {text:?}"
        );
        assert_eq!(norm.trim(), norm, "untrimmed {norm:?} from {text:?}");
        let max = 1 + rng.below(60);
        for piece in split_sentences(&norm, max) {
            assert!(!piece.is_empty());
            assert!(
                piece.chars().count() <= max || !piece.contains(' '),
                "piece {piece:?} longer than {max} from {text:?}"
            );
        }
        let words: Vec<&str> = norm.split_whitespace().collect();
        let joined = split_sentences(&norm, max).join(" ");
        assert_eq!(
            joined.split_whitespace().collect::<Vec<_>>(),
            words,
            "words lost from {norm:?}"
        );
        let _ = is_speakable(&text);
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0xDEAD_BEEF_0000_0042);
    for _ in 0..5_000 {
        let len = rng.below(64);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let text = String::from_utf8_lossy(&bytes);
        let norm = normalize(&text);
        assert!(!norm.bytes().any(|b| b.is_ascii_digit()));
        let _ = split_sentences(&text, rng.below(30));
    }
}
