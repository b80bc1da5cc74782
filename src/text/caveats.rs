//! What a voice will not read as the author meant, found before any synthesis so the render can
//! warn: letters of a writing system the voice's language does not use (espeak-ng names each one:
//! "arabic letter alef"). Markup is `markup.rs`'s.

/// The writing system of a letter, by Unicode block; `None` for anything that is not a letter.
fn writing_system(c: char) -> Option<&'static str> {
    if !c.is_alphabetic() {
        return None;
    }
    Some(match u32::from(c) {
        0x0000..=0x024F | 0x1E00..=0x1EFF | 0x2C60..=0x2C7F | 0xA720..=0xA7FF | 0xFF21..=0xFF5A => {
            "Latin"
        }
        0x0250..=0x02FF | 0x1D00..=0x1DBF => "phonetic",
        0x0370..=0x03FF | 0x1F00..=0x1FFF => "Greek",
        0x0400..=0x052F | 0x1C80..=0x1C8F | 0x2DE0..=0x2DFF | 0xA640..=0xA69F => "Cyrillic",
        0x0530..=0x058F => "Armenian",
        0x0590..=0x05FF | 0xFB1D..=0xFB4F => "Hebrew",
        0x0600..=0x06FF | 0x0750..=0x077F | 0x08A0..=0x08FF | 0xFB50..=0xFDFF | 0xFE70..=0xFEFF => {
            "Arabic"
        }
        0x0900..=0x097F => "Devanagari",
        0x0E00..=0x0E7F => "Thai",
        0x10A0..=0x10FF => "Georgian",
        0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF => "Hangul",
        0x3040..=0x30FF => "Kana",
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF => "Han",
        _ => "another",
    })
}

/// The writing systems an espeak-ng language (`en-us`, `ru`, `cmn`) is written in besides the
/// Latin alphabet, which every voice reads (names, loanwords) and which is all most use.
fn native_systems(language: &str) -> &'static [&'static str] {
    let base = language.split(['-', '_']).next().unwrap_or(language);
    match base.to_ascii_lowercase().as_str() {
        "ru" | "uk" | "bg" | "be" | "mk" | "sr" | "kk" | "ky" | "tt" | "ba" | "cv" | "mn" => {
            &["Cyrillic"]
        }
        "el" | "grc" => &["Greek"],
        "hy" | "hyw" => &["Armenian"],
        "he" => &["Hebrew"],
        "ar" | "fa" | "ur" | "ps" | "sd" | "ug" => &["Arabic"],
        "hi" | "ne" | "mr" | "sa" | "kok" => &["Devanagari"],
        "th" => &["Thai"],
        "ka" => &["Georgian"],
        "ko" => &["Hangul", "Han"],
        "ja" => &["Kana", "Han"],
        "zh" | "cmn" | "yue" | "hak" => &["Han"],
        _ => &[],
    }
}

/// The first writing system in `text` that a voice speaking `language` does not read.
pub fn foreign_letters(text: &str, language: &str) -> Option<&'static str> {
    let native = native_systems(language);
    text.chars()
        .filter_map(writing_system)
        .find(|s| *s != "Latin" && *s != "phonetic" && !native.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_outside_the_voice_language_are_named() {
        assert_eq!(foreign_letters("Hello שלום", "en-us"), Some("Hebrew"));
        assert_eq!(foreign_letters("مرحبا", "en-us"), Some("Arabic"));
        assert_eq!(foreign_letters("Café, naïve, Ærø, 42%", "en-us"), None);
        assert_eq!(foreign_letters("Привет, Bob", "ru"), None);
        assert_eq!(foreign_letters("Привет", "de"), Some("Cyrillic"));
        assert_eq!(foreign_letters("東京へ", "ja"), None);
        assert_eq!(foreign_letters("東京", "en-gb"), Some("Han"));
    }
}
