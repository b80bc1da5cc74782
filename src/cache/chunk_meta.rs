//! What a chunk row says about its file: its length and sentence spans, stored as JSON in the
//! row's `meta`, and when a cached chunk may be reused.

use serde::{Deserialize, Serialize};

use super::{Cache, ChunkEntry, Key};

/// A chunk ready for the output: its length and sentence spans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkDone {
    pub frames: u64,
    pub samples: u64,
    /// Sample span of each sentence inside the chunk.
    pub spans: Vec<(u64, u64)>,
}

impl ChunkDone {
    /// The row's `meta` text.
    pub fn meta(&self) -> String {
        serde_json::to_string(self).expect("chunk meta serialises")
    }

    /// The entry's description when it still matches a chunk of `sentences` sentences.
    pub fn of_entry(entry: &ChunkEntry, sentences: usize) -> Option<ChunkDone> {
        serde_json::from_str::<ChunkDone>(&entry.meta)
            .ok()
            .filter(|d| {
                d.spans.len() == sentences && d.samples == entry.samples && d.frames == entry.frames
            })
    }
}

/// A cached chunk that still matches this render, or `None` to render it again (a lookup that
/// fails only costs the work). The cache has checked the file against its sha256, and the key
/// covers every encoder setting, so only the row's own description is checked here.
pub fn reuse_chunk(cache: &Cache, key: &Key, sentences: usize) -> Option<ChunkDone> {
    ChunkDone::of_entry(&cache.get_chunk(key).ok()??, sentences)
}

/// A chunk file under its final name with no row: a render was killed between the rename and
/// the row. Files are renamed only when complete and fsynced, and the key covers every input, so
/// the file is adopted (its row written) when a full packet scan agrees with this chunk's audio:
/// frames, samples and rates; anything else is rendered again over it. Call it holding the
/// chunk's lock.
#[cfg(feature = "render")]
pub fn adopt_rowless(
    cache: &Cache,
    key: &Key,
    done: &ChunkDone,
    fps: u32,
    sample_rate: u32,
) -> bool {
    let path = cache.chunk_path(key);
    if !path.exists() {
        return false;
    }
    let fits = crate::media::probe_chunk(&path).is_ok_and(|info| {
        info.frames == done.frames
            && info.samples == done.samples
            && info.fps == fps
            && info.sample_rate == sample_rate
    });
    fits && cache
        .put_chunk(key, done.frames, done.samples, &done.meta())
        .is_ok()
}
