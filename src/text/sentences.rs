//! Sentence splitting, then length splitting at clause punctuation.
//!
//! Input: text (normalised or raw) and a maximum piece length in characters. Output: trimmed, non-empty
//! pieces in reading order, each with its words joined by single spaces and its own punctuation kept (the
//! phonemiser uses the final `.`, `?`, `!` or `,` for intonation). Invariants: no piece is longer than
//! `max_chars` characters unless it is a single word that is longer by itself; words are never cut;
//! concatenating the pieces' words gives back the input's words in order.

use super::abbreviations::{is_sentence_starter, is_suffix, period_is_internal};

/// Closing marks that may follow a sentence's final punctuation.
fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | ')' | ']' | '}' | '»' | '\u{201D}' | '\u{2019}'
    )
}

fn starts_lowercase(word: &str) -> bool {
    word.trim_start_matches(|c: char| !c.is_alphanumeric())
        .starts_with(char::is_lowercase)
}

/// Whether a sentence ends after `word`, given the next word.
fn ends_sentence(word: &str, next: &str) -> bool {
    let core = word.trim_end_matches(is_closer);
    let Some(last) = core.chars().last() else {
        return false;
    };
    if starts_lowercase(next) {
        return false;
    }
    match last {
        '!' | '?' | '…' => true,
        '.' => {
            if core.ends_with("..") {
                return true;
            }
            let before = &core[..core.len() - 1];
            if is_suffix(before) {
                return is_sentence_starter(next);
            }
            let next_is_digit = next.starts_with(|c: char| c.is_ascii_digit());
            !period_is_internal(before, next_is_digit)
        }
        _ => false,
    }
}

/// Splits `text` into sentences at `.`/`!`/`?`/`…` followed by a word that does not start in lower case
/// (abbreviations and initials excepted), and at blank lines. A single line break is a space.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        let next_start = after.len() - after.trim_start().len();
        let paragraph = after[..next_start].matches('\n').count() >= 2;
        rest = &after[next_start..];
        let next = rest.split(char::is_whitespace).next().unwrap_or("");
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(word);
        if rest.is_empty() || paragraph || ends_sentence(word, next) {
            out.push(std::mem::take(&mut current));
        }
    }
    out
}

/// A place where a long sentence may be split.
#[derive(Clone, Copy)]
struct Cut {
    /// Byte index where the left piece ends.
    end: usize,
    /// Characters before `end`.
    end_chars: usize,
    /// Byte index where the right piece starts.
    next: usize,
    /// Characters before `next`.
    next_chars: usize,
    /// 3 after `;` `:` `—`, 2 after `,`, 1 at any other space.
    rank: u8,
}

fn cuts(s: &str) -> Vec<Cut> {
    let mut cuts = Vec::new();
    let mut prev: Option<char> = None;
    let mut chars = 0;
    let mut iter = s.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if c == ' ' {
            let rank = match prev {
                Some(';' | ':' | '—') => 3,
                Some(',') => 2,
                _ => 1,
            };
            cuts.push(Cut {
                end: i,
                end_chars: chars,
                next: i + 1,
                next_chars: chars + 1,
                rank,
            });
        } else if c == '—' && iter.peek().is_some_and(|(_, n)| *n != ' ') {
            cuts.push(Cut {
                end: i + c.len_utf8(),
                end_chars: chars + 1,
                next: i + c.len_utf8(),
                next_chars: chars + 1,
                rank: 3,
            });
        }
        prev = Some(c);
        chars += 1;
    }
    cuts
}

/// Splits one sentence (words joined by single spaces) into pieces of at most `max` characters, preferring
/// clause punctuation, then commas, then any space; a cut is only taken at a stronger mark if the piece
/// before it is at least a third of `max`, so pieces don't come out tiny.
fn split_long(s: &str, max: usize, out: &mut Vec<String>) {
    let total = s.chars().count();
    if total <= max {
        out.push(s.to_owned());
        return;
    }
    let cuts = cuts(s);
    let (mut start, mut start_chars) = (0usize, 0usize);
    let mut k = 0;
    while total - start_chars > max {
        while k < cuts.len() && cuts[k].end <= start {
            k += 1;
        }
        let fitting = cuts[k..]
            .iter()
            .take_while(|c| c.end_chars - start_chars <= max)
            .filter(|c| c.end > start);
        let effective_rank = |c: &Cut| {
            if c.end_chars - start_chars >= max / 3 {
                c.rank
            } else {
                1
            }
        };
        let best = fitting
            .max_by_key(|c| (effective_rank(c), c.end_chars))
            .copied();
        let chosen = best.or_else(|| cuts[k..].iter().find(|c| c.end > start).copied());
        let Some(cut) = chosen else {
            break;
        };
        out.push(s[start..cut.end].to_owned());
        start = cut.next;
        start_chars = cut.next_chars;
    }
    if start < s.len() {
        out.push(s[start..].to_owned());
    }
}

/// See [`crate::text::split_sentences`].
pub fn split(text: &str, max_chars: usize) -> Vec<String> {
    let mut out = Vec::new();
    for sentence in sentences(text) {
        split_long(&sentence, max_chars, &mut out);
    }
    out.retain(|p| !p.is_empty());
    out
}
