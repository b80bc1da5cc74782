//! Whitespace tokens with their surrounding punctuation split off.
//!
//! Input: cleaned text (see `typography`). Output: one [`Token`] per whitespace-separated chunk, in order,
//! borrowing from the input. Invariants: `lead + core + trail` is exactly the chunk; `lead` holds only
//! opening quotes/brackets/emphasis marks, `trail` only closing punctuation; a core never starts or ends with
//! whitespace; concatenating every token's text and gap reproduces the input's words with whitespace runs
//! collapsed to [`Gap`]s.

/// The whitespace after a token, reduced to what matters for speech and sentence splitting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gap {
    /// Spaces or tabs.
    Space,
    /// One line break (hard-wrapped prose: read as a space, kept so the text keeps its shape).
    Line,
    /// A blank line: a paragraph break, always a sentence boundary.
    Paragraph,
    /// End of text.
    End,
}

impl Gap {
    pub fn as_str(self) -> &'static str {
        match self {
            Gap::Space => " ",
            Gap::Line => "\n",
            Gap::Paragraph => "\n\n",
            Gap::End => "",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    pub lead: &'a str,
    pub core: &'a str,
    pub trail: &'a str,
    pub gap: Gap,
}

impl Token<'_> {
    /// True if the token's first letter (after opening quotes) is upper case.
    pub fn is_capitalized(&self) -> bool {
        self.core.chars().next().is_some_and(char::is_uppercase)
    }

    /// The core followed directly by a period, as abbreviations are written ("Dr." → core "Dr").
    pub fn has_period(&self) -> bool {
        self.trail.starts_with('.')
    }
}

fn is_lead(c: char) -> bool {
    matches!(c, '"' | '\'' | '(' | '[' | '{' | '¿' | '¡' | '*' | '_')
}

fn is_trail(c: char) -> bool {
    matches!(
        c,
        '.' | ',' | ';' | ':' | '!' | '?' | '"' | '\'' | ')' | ']' | '}' | '*' | '_'
    )
}

/// Splits one chunk into lead, core and trail. An apostrophe before a digit stays in the core ("'90s").
fn split_chunk(chunk: &str) -> (&str, &str, &str) {
    let mut lead_end = 0;
    for (i, c) in chunk.char_indices() {
        let next_is_digit = chunk[i + c.len_utf8()..].starts_with(|d: char| d.is_ascii_digit());
        if is_lead(c) && !(c == '\'' && next_is_digit) {
            lead_end = i + c.len_utf8();
        } else {
            break;
        }
    }
    let rest = &chunk[lead_end..];
    let core_len = rest.trim_end_matches(is_trail).len();
    (&chunk[..lead_end], &rest[..core_len], &rest[core_len..])
}

/// Tokenises `text`.
pub fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::with_capacity(text.len() / 5 + 1);
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (chunk, after) = rest.split_at(end);
        let next_start = after.len() - after.trim_start().len();
        let newlines = after[..next_start].matches('\n').count();
        let gap = if next_start == after.len() {
            Gap::End
        } else if newlines >= 2 {
            Gap::Paragraph
        } else if newlines == 1 {
            Gap::Line
        } else {
            Gap::Space
        };
        let (lead, core, trail) = split_chunk(chunk);
        tokens.push(Token {
            lead,
            core,
            trail,
            gap,
        });
        rest = &after[next_start..];
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(text: &str) -> Vec<(&str, &str, &str, Gap)> {
        tokenize(text)
            .into_iter()
            .map(|t| (t.lead, t.core, t.trail, t.gap))
            .collect()
    }

    #[test]
    fn splits_punctuation_and_gaps() {
        assert_eq!(
            parts("  (\"Dr. Smith,\" he said...)\n\nEnd"),
            vec![
                ("(\"", "Dr", ".", Gap::Space),
                ("", "Smith", ",\"", Gap::Space),
                ("", "he", "", Gap::Space),
                ("", "said", "...)", Gap::Paragraph),
                ("", "End", "", Gap::End),
            ]
        );
        assert_eq!(
            parts("'90s 3.5. a\nb"),
            vec![
                ("", "'90s", "", Gap::Space),
                ("", "3.5", ".", Gap::Space),
                ("", "a", "", Gap::Line),
                ("", "b", "", Gap::End),
            ]
        );
        assert_eq!(
            parts("... \"'"),
            vec![("", "", "...", Gap::Space), ("\"'", "", "", Gap::End)]
        );
        assert!(tokenize(" \n\t ").is_empty());
    }
}
