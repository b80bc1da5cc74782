//! What a chunk row says about its file: its length and sentence spans, stored as JSON in the
//! row's `meta`, and when a cached chunk may be reused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::{Cache, ChunkEntry, Key, report_warnings};
use crate::progress::Progress;

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
fn reuse_chunk(cache: &Cache, key: &Key, sentences: usize) -> Option<ChunkDone> {
    ChunkDone::of_entry(&cache.get_chunk(key).ok()??, sentences)
}

/// Which chunks of a render the cache already holds and which must be rendered.
#[derive(Debug)]
pub struct ChunkLookup {
    /// Per chunk: its description once reused or rendered.
    done: Vec<Option<ChunkDone>>,
    /// `(chunk, first)`: a chunk whose key came earlier in this render is that chunk again.
    repeats: Vec<(usize, usize)>,
    /// The chunks to render, in order: the first of each key that the cache lacks.
    pub todo: Vec<usize>,
}

impl ChunkLookup {
    /// Chunks not to render: found in the cache, or a repeat of an earlier one.
    pub fn reused(&self) -> usize {
        self.done.len() - self.todo.len()
    }

    /// Every chunk's description, given those of the chunks rendered (each of `todo`).
    pub fn complete(mut self, rendered: Vec<(usize, ChunkDone)>) -> Vec<ChunkDone> {
        for (i, d) in rendered {
            self.done[i] = Some(d);
        }
        for (i, first) in self.repeats {
            self.done[i] = self.done[first].clone();
        }
        self.done
            .into_iter()
            .map(|d| d.expect("every chunk reused or rendered"))
            .collect()
    }
}

/// Looks a render's chunks, `(key, sentences)` in order, up in the cache; a key repeated within
/// the render is rendered once. `None` once `cancel` is set (checked between chunks).
pub fn look_up_chunks<'a>(
    cache: &Cache,
    chunks: impl ExactSizeIterator<Item = (&'a Key, usize)>,
    progress: &dyn Progress,
    cancel: &AtomicBool,
) -> Option<ChunkLookup> {
    let mut lookup = ChunkLookup {
        done: vec![None; chunks.len()],
        repeats: Vec::new(),
        todo: Vec::new(),
    };
    let mut first_of: HashMap<Key, usize> = HashMap::new();
    for (i, (key, sentences)) in chunks.enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(&first) = first_of.get(key) {
            lookup.repeats.push((i, first));
            continue;
        }
        first_of.insert(*key, i);
        match reuse_chunk(cache, key, sentences) {
            Some(d) => lookup.done[i] = Some(d),
            None => lookup.todo.push(i),
        }
    }
    report_warnings(cache, progress);
    Some(lookup)
}

/// The chunks of a render as the muxer takes them: each file with the length it was found at.
#[cfg(feature = "render")]
pub fn chunk_refs<'a>(
    cache: &Cache,
    keys: impl Iterator<Item = &'a Key>,
    done: &[ChunkDone],
) -> Vec<crate::media::ChunkRef> {
    keys.zip(done)
        .map(|(key, d)| crate::media::ChunkRef {
            path: cache.chunk_path(key),
            expect: Some((d.frames, d.samples)),
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::KeyBuilder;
    use crate::progress::NoProgress;

    fn done(samples: u64) -> ChunkDone {
        ChunkDone {
            frames: samples / 50,
            samples,
            spans: vec![(0, samples)],
        }
    }

    #[test]
    fn lookup_reuses_what_matches_and_renders_a_repeated_key_once() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let key = |n| KeyBuilder::new("chunk").u64("n", n).finish();
        let (fresh, cached) = (key(1), key(2));
        let path = cache.chunk_path(&cached);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"a finished chunk").unwrap();
        cache.put_chunk(&cached, 2, 100, &done(100).meta()).unwrap();
        let stop = AtomicBool::new(false);

        let chunks = [(&fresh, 1), (&cached, 1), (&fresh, 1)];
        let lookup = look_up_chunks(&cache, chunks.into_iter(), &NoProgress, &stop).unwrap();
        assert_eq!((lookup.todo.clone(), lookup.reused()), (vec![0], 2));
        assert_eq!(
            lookup.complete(vec![(0, done(50))]),
            [done(50), done(100), done(50)]
        );

        // A row describing another sentence count is not this chunk.
        let lookup =
            look_up_chunks(&cache, [(&cached, 2)].into_iter(), &NoProgress, &stop).unwrap();
        assert_eq!(lookup.todo, [0]);

        stop.store(true, Ordering::Relaxed);
        let cancelled = look_up_chunks(&cache, [(&cached, 1)].into_iter(), &NoProgress, &stop);
        assert!(cancelled.is_none());
    }
}
