//! Reading input JSON (scripts, lexicons, job specs) strictly, and the error every input file
//! reports: the file, the place in it (a JSON path such as `segments[3].text`, or a line and
//! column) and what to do. Scripts and lexicons both stand on it, so neither imports the other
//! for its errors.

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A script that cannot be used, with where and how to fix it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptError {
    pub file: PathBuf,
    /// JSON path of the offending value, or `line:column` for syntax errors.
    pub at: String,
    pub message: String,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.at, self.message)
        }
    }
}

impl std::error::Error for ScriptError {}

/// JSON text (a UTF-8 byte order mark allowed) as a value, refusing an object that gives a key
/// twice: serde_json would keep the last silently, so the first value would vanish. Errors name
/// `file`, and the key's JSON path (`segments[0].text`) or the line and column of a syntax error.
/// Lexicon files use it too.
pub(crate) fn parse_json(text: &str, file: &Path) -> Result<Value, ScriptError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let duplicate = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = Strict {
        at: String::new(),
        duplicate: &duplicate,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    parsed.map_err(|e| match duplicate.into_inner() {
        Some(at) => ScriptError {
            file: file.to_path_buf(),
            at,
            message: format!(
                "is given twice (the second at line {}, column {}); JSON keeps only one of them, so remove or rename the other",
                e.line(),
                e.column()
            ),
        },
        None => ScriptError {
            file: file.to_path_buf(),
            at: format!("line {}, column {}", e.line(), e.column()),
            message: format!("invalid JSON: {e}"),
        },
    })
}

/// Builds a [`Value`] like its own `Deserialize` does, stopping at a repeated key; `at` is the
/// JSON path of the value being read, `duplicate` receives the repeated key's path.
struct Strict<'a> {
    at: String,
    duplicate: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict {
            at: format!("{}[{}]", self.at, items.len()),
            duplicate: self.duplicate,
        })? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut obj = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let at = join(&self.at, &key);
            if obj.contains_key(&key) {
                *self.duplicate.borrow_mut() = Some(at);
                return Err(serde::de::Error::custom("duplicate key"));
            }
            let v = map.next_value_seed(Strict {
                at,
                duplicate: self.duplicate,
            })?;
            obj.insert(key, v);
        }
        Ok(Value::Object(obj))
    }
}

/// `at.key`, or `key` at the top.
pub(crate) fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    }
}

/// How a JSON value reads in an error message ("a string", "an array"); job specs use it too.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The allowed key closest to a misspelt one, if any is close; job specs use it too.
pub(crate) fn did_you_mean<'a>(key: &str, allowed: &[&'a str]) -> Option<&'a str> {
    let lower = key.to_lowercase();
    allowed
        .iter()
        .map(|a| (strsim::jaro_winkler(&lower, a), *a))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, a)| a)
}
