//! Content keys: sha256 over length-prefixed fields, so no two different inputs share a key.

use sha2::{Digest, Sha256};

/// Bumped whenever stored phrases or chunks would differ for the same inputs.
const CACHE_FORMAT: u32 = 1;

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(pub [u8; 32]);

impl Key {
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({})", &self.hex()[..12])
    }
}

/// Builds a key; every field is tagged and length-prefixed.
pub struct KeyBuilder(Sha256);

impl KeyBuilder {
    /// Starts a key of one kind ("phrase", "chunk"), bound to the format and the code version.
    pub fn new(kind: &str) -> KeyBuilder {
        let mut b = KeyBuilder(Sha256::new());
        b = b
            .str("kind", kind)
            .u64("format", u64::from(CACHE_FORMAT))
            .str("code", env!("CARGO_PKG_VERSION"));
        b
    }

    pub fn bytes(mut self, tag: &str, value: &[u8]) -> KeyBuilder {
        for part in [tag.as_bytes(), value] {
            self.0.update((part.len() as u64).to_le_bytes());
            self.0.update(part);
        }
        self
    }

    pub fn str(self, tag: &str, value: &str) -> KeyBuilder {
        self.bytes(tag, value.as_bytes())
    }

    pub fn u64(self, tag: &str, value: u64) -> KeyBuilder {
        self.bytes(tag, &value.to_le_bytes())
    }

    pub fn i64s(self, tag: &str, values: &[i64]) -> KeyBuilder {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.bytes(tag, &bytes)
    }

    pub fn finish(self) -> Key {
        Key(self.0.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_do_not_run_together() {
        let a = KeyBuilder::new("t").str("a", "bc").str("d", "").finish();
        let b = KeyBuilder::new("t").str("a", "b").str("d", "c").finish();
        assert_ne!(a, b);
    }

    #[test]
    fn kind_and_tags_matter() {
        assert_ne!(KeyBuilder::new("x").finish(), KeyBuilder::new("y").finish());
        assert_ne!(
            KeyBuilder::new("x").u64("a", 1).finish(),
            KeyBuilder::new("x").u64("b", 1).finish()
        );
        assert_eq!(
            KeyBuilder::new("x").u64("a", 1).finish(),
            KeyBuilder::new("x").u64("a", 1).finish()
        );
    }

    #[test]
    fn hex_is_64_chars() {
        assert_eq!(KeyBuilder::new("x").finish().hex().len(), 64);
    }
}
