//! The phrase and chunk cache: SQLite through sqlx, files beside it. The only user of SQLite for caching.
//!
//! Layout of the cache directory (`--cache DIR`, `$TALKER_CACHE`, else `~/.cache/talker`):
//! `cache.sqlite` (schema in `migrations/cache/`), `chunks/xx/<key>.mkv`, and `holds/`: what
//! running renders use, which `gc` leaves alone ([`Cache::hold`]).
//!
//! Several processes may share one cache: WAL journal, a busy timeout, and `BEGIN IMMEDIATE` for
//! multi-statement writes (a deferred transaction that upgrades to a write gets SQLITE_BUSY at once
//! and ignores the timeout). A chunk is written by one process at a time ([`Cache::lock_chunk`]),
//! under a temp name renamed when complete, and its row (with the file's sha256) is inserted only
//! after that, so a reader that finds a row finds the whole file. Every phrase and chunk carries a
//! sha256 that is checked on reuse; a mismatch drops the entry with a warning and it is made again.
//!
//! A damaged (`PRAGMA quick_check` at open), corrupt or foreign database file is moved aside with a
//! warning and a fresh one is built, and so is a file where `chunks/` should be: a cache is never
//! worth failing a render for. A database a newer talker migrated is never moved aside: it is
//! refused ([`CacheError::Newer`]), and a render then uses a temporary cache. Warnings are collected for the caller ([`Cache::take_warnings`]).

mod chunk_meta;
pub mod key;
mod location;
pub mod pcm_codec;

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use sqlx::Row;
use sqlx::migrate::MigrateError;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::runtime::Runtime;

pub use chunk_meta::{ChunkDone, ChunkLookup, look_up_chunks};
#[cfg(feature = "render")]
pub use chunk_meta::{adopt_rowless, chunk_refs};
pub use key::{Key, KeyBuilder};
pub use location::{CacheLocation, TempDir, open_cache, report_warnings};

use crate::sqlite_file::{self, FirstUseError, Owner};
use crate::tts::{Phone, Speech};
use pcm_codec::CodecError;

/// `PRAGMA application_id` of our database files ("TLKC"), to tell them from foreign SQLite files.
const APPLICATION_ID: i64 = 0x544C_4B43;
const DB_FILE: &str = "cache.sqlite";

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cache directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cache database {path}: {source}")]
    Db { path: PathBuf, source: sqlx::Error },
    #[error("cache database {path}: migration failed: {source}")]
    Migrate {
        path: PathBuf,
        source: sqlx::migrate::MigrateError,
    },
    #[error(
        "cache database {path} was written by a newer talker (schema version {found}; this talker knows versions up to {known}); it is left as it is: upgrade talker, or give another --cache"
    )]
    Newer {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("cache database {0} belongs to another program")]
    Foreign(PathBuf),
    #[error("cache database {path} is damaged ({detail})")]
    Damaged { path: PathBuf, detail: String },
    #[error("cache chunk lock {path}: {source}")]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the cache's runtime: {0}")]
    Runtime(std::io::Error),
    #[error(
        "cache database {0} is locked by another process's write; wait until it is done, then run this again"
    )]
    Locked(PathBuf),
}

impl CacheError {
    /// A damaged or foreign file that rebuilding fixes (as opposed to, say, a read-only disk).
    fn is_recoverable(&self) -> bool {
        match self {
            CacheError::Foreign(_) | CacheError::Damaged { .. } | CacheError::Migrate { .. } => {
                true
            }
            CacheError::Db {
                source: sqlx::Error::Database(e),
                ..
            } => {
                let code = e.code().and_then(|c| c.parse::<i64>().ok()).unwrap_or(0) & 0xff;
                // SQLITE_CORRUPT, SQLITE_NOTADB
                code == 11 || code == 26
            }
            _ => false,
        }
    }
}

/// Counts for `talker cache stats`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    pub phrases: u64,
    pub phrase_bytes: u64,
    pub chunks: u64,
    pub chunk_bytes: u64,
    pub phrase_hits: u64,
    pub phrase_misses: u64,
    pub chunk_hits: u64,
    pub chunk_misses: u64,
}

impl Stats {
    pub fn phrase_hit_ratio(&self) -> f64 {
        ratio(self.phrase_hits, self.phrase_misses)
    }
    pub fn chunk_hit_ratio(&self) -> f64 {
        ratio(self.chunk_hits, self.chunk_misses)
    }
}

fn ratio(hits: u64, misses: u64) -> f64 {
    if hits + misses == 0 {
        0.0
    } else {
        hits as f64 / (hits + misses) as f64
    }
}

/// A finished chunk found in the cache.
#[derive(Debug, Clone)]
pub struct ChunkEntry {
    pub path: PathBuf,
    pub frames: u64,
    pub samples: u64,
    pub meta: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct GcReport {
    pub removed_phrases: u64,
    pub removed_chunks: u64,
    pub bytes_after: u64,
    /// Entries that would have gone but a running render holds ([`Cache::hold`]).
    pub kept_in_use: u64,
}

pub struct Cache {
    rt: Runtime,
    pool: SqlitePool,
    dir: PathBuf,
    db_path: PathBuf,
    /// Damage found and repaired, for the caller to show (see [`Cache::take_warnings`]).
    warnings: Mutex<Vec<String>>,
    /// Another process holds the database's write lock: reuse what is there, write nothing
    /// (each write would otherwise wait out the busy timeout).
    read_only: AtomicBool,
}

impl Drop for Cache {
    /// Closes every connection before returning (sqlx would otherwise close them on its worker
    /// threads later), so the WAL is checkpointed and other programs see a settled file.
    fn drop(&mut self) {
        self.rt.block_on(self.pool.close());
    }
}

/// The right to write one chunk: held by one render at a time, across processes (`flock` on
/// `chunks/xx/<key>.lock`). Dropping it removes the lock file, then releases the lock.
pub struct ChunkLock {
    path: PathBuf,
    _file: File,
}

impl Drop for ChunkLock {
    fn drop(&mut self) {
        // Removed while still held: a waiter that locks the removed file notices and retries.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The phrases and chunks one live render uses, which [`Cache::gc`] leaves alone: a file
/// `holds/<pid>-<nanos>-<n>.keys` (one hex key a line) that the render keeps locked for its life.
/// Dropping it removes the file, then releases the lock; a holder that died leaves a file
/// nobody locks, which the next gc removes.
pub struct Hold {
    path: PathBuf,
    _file: File,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Where the holds live. The directory itself is the lock that orders registering a hold
/// against a gc (a lock file would be one more file left in the cache).
const HOLDS_DIR: &str = "holds";

/// How long a render waits between tries for a chunk that another render is writing.
const LOCK_POLL: Duration = Duration::from_millis(20);

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Cache {
    /// Opens (or creates) the cache in `dir`, rebuilding a damaged database file.
    pub fn open(dir: &Path) -> Result<Cache, CacheError> {
        std::fs::create_dir_all(dir).map_err(|source| CacheError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut warnings = Vec::new();
        ensure_dir(&dir.join("chunks"), &mut warnings)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(CacheError::Runtime)?;
        let db_path = dir.join(DB_FILE);
        let pool = match rt.block_on(connect(&db_path)) {
            Ok(pool) => pool,
            Err(e) if e.is_recoverable() => {
                // One repair at a time, and only of the file found damaged: a render that lost
                // the race finds the fresh database the winner built.
                let _repair = lock_file(&dir.join(".repair.lock"))?;
                match rt.block_on(connect(&db_path)) {
                    Ok(pool) => pool,
                    Err(e) if e.is_recoverable() => {
                        let aside = move_aside(&db_path)?;
                        warnings.push(format!(
                            "{e}; moved it to {} and started a new cache",
                            aside.display()
                        ));
                        rt.block_on(connect(&db_path))?
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        let cache = Cache {
            rt,
            pool,
            dir: dir.to_path_buf(),
            db_path,
            warnings: Mutex::new(warnings),
            read_only: AtomicBool::new(false),
        };
        if !cache.rt.block_on(can_write(&cache.pool)) {
            cache.become_read_only();
        }
        Ok(cache)
    }

    /// From now on reads only, with one warning saying why.
    fn become_read_only(&self) {
        if !self.read_only.swap(true, Ordering::Relaxed) {
            self.warn(format!(
                "cache database {} is locked by another process's write; this render reuses what the cache holds and adds nothing to it",
                self.db_path.display()
            ));
        }
    }

    /// Whether this cache only reads (see [`Cache::open`]): another process held its write lock.
    pub fn read_only(&self) -> bool {
        self.read_only.load(Ordering::Relaxed)
    }

    /// Warnings about damage found (and repaired) since the last call.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .warnings
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn warn(&self, message: String) {
        self.warnings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(message);
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Wraps a database error; one that says the database stayed locked past the busy timeout
    /// makes the cache read-only.
    /// A write transaction that takes SQLite's write lock at once, so two writers never deadlock
    /// upgrading a read.
    async fn write_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, CacheError> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(self.db_err())
    }

    fn db_err(&self) -> impl Fn(sqlx::Error) -> CacheError + '_ {
        |source| {
            if is_busy(&source) {
                self.become_read_only();
            }
            CacheError::Db {
                path: self.db_path.clone(),
                source,
            }
        }
    }

    /// Looks up phrases; damaged entries are dropped and count as misses.
    pub fn get_phrases(&self, keys: &[Key]) -> Result<HashMap<Key, Speech>, CacheError> {
        self.rt.block_on(async {
            let mut found = HashMap::new();
            let mut damaged = Vec::new();
            for key in keys {
                if found.contains_key(key) {
                    continue;
                }
                let row = sqlx::query(
                    "SELECT sample_rate, samples, pcm_flac, phones, sha256 FROM phrases WHERE key = ?",
                )
                .bind(&key.0[..])
                .fetch_optional(&self.pool)
                .await
                .map_err(self.db_err())?;
                let Some(row) = row else { continue };
                let (rate, samples, flac, phones): (i64, i64, Vec<u8>, String) =
                    (row.get(0), row.get(1), row.get(2), row.get(3));
                let stored: Option<Vec<u8>> = row.get(4);
                let sum = phrase_sum(rate, samples, &flac, &phones);
                if stored.as_deref() != Some(&sum[..]) {
                    if stored.is_some() {
                        self.warn(format!(
                            "cached phrase {} failed its checksum; synthesising it again",
                            key.hex()
                        ));
                    }
                    damaged.push((*key, stored));
                    continue;
                }
                match decode_phrase(rate, samples, flac, phones) {
                    Some(speech) => {
                        found.insert(*key, speech);
                    }
                    None => {
                        self.warn(format!(
                            "cached phrase {} does not decode; synthesising it again",
                            key.hex()
                        ));
                        damaged.push((*key, stored));
                    }
                }
            }
            if self.read_only() {
                return Ok(found);
            }
            let hits = found.len() as i64;
            let misses = keys.len() as i64 - hits;
            let mut tx = self.write_tx().await?;
            for (key, stored) in &damaged {
                // Only the row that was read: another render may have replaced it meanwhile.
                sqlx::query("DELETE FROM phrases WHERE key = ? AND sha256 IS ?")
                    .bind(&key.0[..])
                    .bind(stored.as_deref())
                    .execute(&mut *tx)
                    .await
                    .map_err(self.db_err())?;
            }
            let t = now();
            for key in found.keys() {
                sqlx::query("UPDATE phrases SET used_at = ? WHERE key = ?")
                    .bind(t)
                    .bind(&key.0[..])
                    .execute(&mut *tx)
                    .await
                    .map_err(self.db_err())?;
            }
            bump(&mut tx, "phrase_hits", hits)
                .await
                .map_err(self.db_err())?;
            bump(&mut tx, "phrase_misses", misses)
                .await
                .map_err(self.db_err())?;
            tx.commit().await.map_err(self.db_err())?;
            Ok(found)
        })
    }

    /// Stores a phrase; a concurrent writer of the same key wins harmlessly.
    pub fn put_phrase(&self, key: Key, speech: &Speech) -> Result<(), CacheError> {
        self.put_phrases(&[(key, speech)])
    }

    /// Stores phrases, their FLAC encoded on up to as many threads as there are cores (the
    /// encode is most of the cost: about 350x real time on one core, so a 60-minute book's
    /// speech took 7 s on the render's speech thread alone), then written in one transaction.
    /// A phrase that cannot be encoded is left out and its error returned once the others are
    /// stored; a concurrent writer of the same key wins harmlessly.
    pub fn put_phrases(&self, items: &[(Key, &Speech)]) -> Result<(), CacheError> {
        if self.read_only() || items.is_empty() {
            return Ok(());
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(items.len());
        let per = items.len().div_ceil(threads);
        let encoded: Vec<Result<StoredPhrase, CodecError>> = std::thread::scope(|scope| {
            let workers: Vec<_> = items
                .chunks(per)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|(_, sp)| StoredPhrase::encode(sp))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("a FLAC encoder thread panicked"))
                .collect()
        });
        let mut unencoded = None;
        let mut rows = Vec::new();
        for ((key, _), e) in items.iter().zip(encoded) {
            match e {
                Ok(row) => rows.push((*key, row)),
                Err(e) => unencoded = Some(e),
            }
        }
        self.insert_phrases(&rows)?;
        match unencoded {
            Some(e) => Err(CacheError::Db {
                path: self.db_path.clone(),
                source: sqlx::Error::Encode(Box::new(e)),
            }),
            None => Ok(()),
        }
    }

    fn insert_phrases(&self, rows: &[(Key, StoredPhrase)]) -> Result<(), CacheError> {
        if rows.is_empty() {
            return Ok(());
        }
        let t = now();
        self.rt.block_on(async {
            let mut tx = self.write_tx().await?;
            for (key, row) in rows {
                sqlx::query(
                    "INSERT INTO phrases (key, sample_rate, samples, pcm_flac, phones, bytes, created_at, used_at, sha256)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                )
                .bind(&key.0[..])
                .bind(row.rate)
                .bind(row.samples)
                .bind(&row.flac[..])
                .bind(&row.phones)
                .bind(row.bytes)
                .bind(t)
                .bind(t)
                .bind(&row.sum[..])
                .execute(&mut *tx)
                .await
                .map_err(self.db_err())?;
            }
            tx.commit().await.map_err(self.db_err())
        })
    }

    /// Where a chunk with this key is stored (the file may not exist yet).
    pub fn chunk_path(&self, key: &Key) -> PathBuf {
        let hex = key.hex();
        self.dir
            .join("chunks")
            .join(&hex[..2])
            .join(format!("{hex}.mkv"))
    }

    /// A finished chunk whose file still has the sha256 recorded with it; counted as a hit or a
    /// miss. A damaged file is dropped with a warning, so the caller renders it again.
    pub fn get_chunk(&self, key: &Key) -> Result<Option<ChunkEntry>, CacheError> {
        let entry = self.find_chunk(key)?;
        if self.read_only() {
            return Ok(entry);
        }
        self.rt.block_on(async {
            let mut tx = self.write_tx().await?;
            if entry.is_some() {
                sqlx::query("UPDATE chunks SET used_at = ? WHERE key = ?")
                    .bind(now())
                    .bind(&key.0[..])
                    .execute(&mut *tx)
                    .await
                    .map_err(self.db_err())?;
            }
            let counter = if entry.is_some() {
                "chunk_hits"
            } else {
                "chunk_misses"
            };
            bump(&mut tx, counter, 1).await.map_err(self.db_err())?;
            tx.commit().await.map_err(self.db_err())?;
            Ok(entry)
        })
    }

    /// [`Cache::get_chunk`] without counting: for the second look a writer takes under the lock.
    pub fn find_chunk(&self, key: &Key) -> Result<Option<ChunkEntry>, CacheError> {
        let row = self
            .rt
            .block_on(
                sqlx::query("SELECT frames, samples, meta, sha256 FROM chunks WHERE key = ?")
                    .bind(&key.0[..])
                    .fetch_optional(&self.pool),
            )
            .map_err(self.db_err())?;
        let Some(row) = row else { return Ok(None) };
        let path = self.chunk_path(key);
        let stored: Option<Vec<u8>> = row.get(3);
        let verdict = match &stored {
            // Written before checksums existed: unverifiable, so made again.
            None => Err(None),
            Some(sum) => match file_sha256(&path) {
                Ok(found) if found[..] == sum[..] => Ok(()),
                Ok(_) => Err(Some(format!(
                    "cached chunk {} failed its checksum; rendering it again",
                    path.display()
                ))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(None),
                Err(e) => Err(Some(format!(
                    "cached chunk {} is unreadable ({e}); rendering it again",
                    path.display()
                ))),
            },
        };
        match verdict {
            Ok(()) => Ok(Some(ChunkEntry {
                path,
                frames: row.get::<i64, _>(0) as u64,
                samples: row.get::<i64, _>(1) as u64,
                meta: row.get(2),
            })),
            Err(warning) => {
                if let Some(w) = warning {
                    self.warn(w);
                }
                self.forget_chunk(key, stored.as_deref())?;
                Ok(None)
            }
        }
    }

    /// Drops the row of `key` if it still holds `sum` (another render may have just replaced
    /// it), and then its file: a reader never trusts a file without checking it against its row.
    fn forget_chunk(&self, key: &Key, sum: Option<&[u8]>) -> Result<(), CacheError> {
        if self.read_only() {
            return Ok(());
        }
        let deleted = self
            .rt
            .block_on(
                sqlx::query("DELETE FROM chunks WHERE key = ? AND sha256 IS ?")
                    .bind(&key.0[..])
                    .bind(sum)
                    .execute(&self.pool),
            )
            .map_err(self.db_err())?;
        if deleted.rows_affected() > 0 {
            let _ = std::fs::remove_file(self.chunk_path(key));
        }
        Ok(())
    }

    /// Waits for the right to write chunk `key` (another render may be writing it; look it up
    /// again once this returns). `None` when `stop` was set while waiting.
    pub fn lock_chunk(
        &self,
        key: &Key,
        stop: &AtomicBool,
    ) -> Result<Option<ChunkLock>, CacheError> {
        let file = self.chunk_path(key);
        let dir = file.parent().expect("chunk paths have a parent");
        let mut warnings = Vec::new();
        let made = ensure_dir(dir, &mut warnings);
        for w in warnings {
            self.warn(w);
        }
        made?;
        let path = file.with_extension("lock");
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if let Some(lock) = try_lock_file(&path)? {
                return Ok(Some(lock));
            }
            std::thread::sleep(LOCK_POLL);
        }
    }

    /// Records the chunk now complete at [`Cache::chunk_path`] (call it holding the chunk's
    /// lock, after the file was renamed into place), with its size and sha256.
    pub fn put_chunk(
        &self,
        key: &Key,
        frames: u64,
        samples: u64,
        meta: &str,
    ) -> Result<(), CacheError> {
        if self.read_only() {
            return Ok(());
        }
        let path = self.chunk_path(key);
        let sum = file_sha256(&path).map_err(|source| CacheError::Dir {
            path: path.clone(),
            source,
        })?;
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        let rel = path
            .strip_prefix(&self.dir)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        let t = now();
        self.rt
            .block_on(
                sqlx::query(
                    "INSERT INTO chunks (key, file, frames, samples, meta, bytes, created_at, used_at, sha256)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (key) DO UPDATE SET file = excluded.file, frames = excluded.frames,
                       samples = excluded.samples, meta = excluded.meta, bytes = excluded.bytes,
                       used_at = excluded.used_at, sha256 = excluded.sha256",
                )
                .bind(&key.0[..])
                .bind(rel)
                .bind(frames as i64)
                .bind(samples as i64)
                .bind(meta)
                .bind(bytes as i64)
                .bind(t)
                .bind(t)
                .bind(&sum[..])
                .execute(&self.pool),
            )
            .map_err(self.db_err())?;
        Ok(())
    }

    /// Forgets a chunk whose entry turned out unusable (call it holding the chunk's lock).
    pub fn drop_chunk(&self, key: &Key) -> Result<(), CacheError> {
        if self.read_only() {
            return Ok(());
        }
        let _ = std::fs::remove_file(self.chunk_path(key));
        self.rt
            .block_on(
                sqlx::query("DELETE FROM chunks WHERE key = ?")
                    .bind(&key.0[..])
                    .execute(&self.pool),
            )
            .map_err(self.db_err())?;
        Ok(())
    }

    pub fn stats(&self) -> Result<Stats, CacheError> {
        self.rt.block_on(async {
            let mut s = Stats::default();
            let (n, b): (i64, i64) =
                sqlx::query_as("SELECT count(*), coalesce(sum(bytes), 0) FROM phrases")
                    .fetch_one(&self.pool)
                    .await
                    .map_err(self.db_err())?;
            (s.phrases, s.phrase_bytes) = (n as u64, b as u64);
            let (n, b): (i64, i64) =
                sqlx::query_as("SELECT count(*), coalesce(sum(bytes), 0) FROM chunks")
                    .fetch_one(&self.pool)
                    .await
                    .map_err(self.db_err())?;
            (s.chunks, s.chunk_bytes) = (n as u64, b as u64);
            let rows: Vec<(String, i64)> = sqlx::query_as("SELECT name, value FROM counters")
                .fetch_all(&self.pool)
                .await
                .map_err(self.db_err())?;
            for (name, value) in rows {
                let v = value.max(0) as u64;
                match name.as_str() {
                    "phrase_hits" => s.phrase_hits = v,
                    "phrase_misses" => s.phrase_misses = v,
                    "chunk_hits" => s.chunk_hits = v,
                    "chunk_misses" => s.chunk_misses = v,
                    _ => {}
                }
            }
            Ok(s)
        })
    }

    /// Registers `keys` (phrases and chunks) as used by this render until the [`Hold`] drops.
    /// Call it before looking anything up: registering waits for a running gc (a shared lock
    /// on `holds/`, which gc takes exclusively), so a gc either sees these keys or has
    /// finished before the render decides what to reuse.
    pub fn hold(&self, keys: impl IntoIterator<Item = Key>) -> Result<Hold, CacheError> {
        let dir = self.dir.join(HOLDS_DIR);
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CacheError::Dir { path, source }
        };
        let mut warnings = Vec::new();
        let made = ensure_dir(&dir, &mut warnings);
        for w in warnings {
            self.warn(w);
        }
        made?;
        let gc_lock = File::open(&dir).map_err(io_err(&dir))?;
        gc_lock.lock_shared().map_err(io_err(&dir))?;
        // Unique among the renders of one process too (a worker runs several at once).
        static HOLDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let n = HOLDS.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{}-{nanos}-{n}.keys", std::process::id()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err(&path))?;
        file.lock().map_err(io_err(&path))?;
        let hold = Hold {
            path: path.clone(),
            _file: file,
        };
        let mut text = String::new();
        for key in keys {
            text.push_str(&key.hex());
            text.push('\n');
        }
        std::io::Write::write_all(&mut &hold._file, text.as_bytes()).map_err(io_err(&path))?;
        drop(gc_lock);
        Ok(hold)
    }

    /// The keys live renders hold; stale hold files (their render died) are removed. Call it
    /// holding the lock on `holds/` exclusively.
    fn held_keys(&self) -> Result<std::collections::HashSet<String>, CacheError> {
        let dir = self.dir.join(HOLDS_DIR);
        let mut held = std::collections::HashSet::new();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(held);
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "keys") {
                continue;
            }
            let Ok(file) = File::open(&path) else {
                continue;
            };
            match file.try_lock_shared() {
                // Nobody holds it: its render is gone.
                Ok(()) => {
                    let _ = std::fs::remove_file(&path);
                }
                Err(TryLockError::WouldBlock) => {
                    let text =
                        std::fs::read_to_string(&path).map_err(|source| CacheError::Dir {
                            path: path.clone(),
                            source,
                        })?;
                    held.extend(text.lines().map(str::to_owned));
                }
                Err(TryLockError::Error(source)) => return Err(CacheError::Lock { path, source }),
            }
        }
        Ok(held)
    }

    /// Removes least-recently-used entries until phrases + chunks take at most `max_bytes`,
    /// except those a running render holds ([`Cache::hold`]).
    pub fn gc(&self, max_bytes: u64) -> Result<GcReport, CacheError> {
        if self.read_only() {
            return Err(CacheError::Locked(self.db_path.clone()));
        }
        let dir = self.dir.join(HOLDS_DIR);
        let mut warnings = Vec::new();
        let made = ensure_dir(&dir, &mut warnings);
        for w in warnings {
            self.warn(w);
        }
        made?;
        let gc_lock = File::open(&dir).map_err(|source| CacheError::Lock {
            path: dir.clone(),
            source,
        })?;
        gc_lock.lock().map_err(|source| CacheError::Lock {
            path: dir.clone(),
            source,
        })?;
        let held = self.held_keys()?;
        self.rt.block_on(async {
            let mut entries: Vec<(i64, bool, Vec<u8>, i64)> = Vec::new();
            for (select, is_chunk) in [
                ("SELECT used_at, key, bytes FROM phrases", false),
                ("SELECT used_at, key, bytes FROM chunks", true),
            ] {
                let rows: Vec<(i64, Vec<u8>, i64)> = sqlx::query_as(select)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(self.db_err())?;
                entries.extend(rows.into_iter().map(|(t, k, b)| (t, is_chunk, k, b)));
            }
            entries.sort();
            let mut total: u64 = entries.iter().map(|e| e.3.max(0) as u64).sum();
            let mut report = GcReport::default();
            let mut tx = self.write_tx().await?;
            let mut files = Vec::new();
            for (_, is_chunk, key, bytes) in entries {
                if total <= max_bytes {
                    break;
                }
                let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
                if held.contains(&hex) {
                    report.kept_in_use += 1;
                    continue;
                }
                let delete = if is_chunk {
                    "DELETE FROM chunks WHERE key = ?"
                } else {
                    "DELETE FROM phrases WHERE key = ?"
                };
                sqlx::query(delete)
                    .bind(&key[..])
                    .execute(&mut *tx)
                    .await
                    .map_err(self.db_err())?;
                total -= bytes.max(0) as u64;
                if is_chunk {
                    report.removed_chunks += 1;
                    let mut k = [0u8; 32];
                    k.copy_from_slice(&key[..32.min(key.len())]);
                    files.push(self.chunk_path(&Key(k)));
                } else {
                    report.removed_phrases += 1;
                }
            }
            tx.commit().await.map_err(self.db_err())?;
            for f in files {
                let _ = std::fs::remove_file(f);
            }
            sqlx::query("PRAGMA incremental_vacuum")
                .execute(&self.pool)
                .await
                .map_err(self.db_err())?;
            report.bytes_after = total;
            Ok(report)
        })
    }
}

async fn bump(tx: &mut sqlx::SqliteConnection, name: &str, by: i64) -> Result<(), sqlx::Error> {
    if by != 0 {
        sqlx::query("UPDATE counters SET value = value + ? WHERE name = ?")
            .bind(by)
            .bind(name)
            .execute(tx)
            .await?;
    }
    Ok(())
}

fn decode_phrase(sample_rate: i64, samples: i64, flac: Vec<u8>, phones: String) -> Option<Speech> {
    let pcm = pcm_codec::decode(&flac, usize::try_from(samples).ok()?).ok()?;
    let phones: Vec<(String, u64, u64)> = serde_json::from_str(&phones).ok()?;
    let phones: Vec<Phone> = phones
        .into_iter()
        .map(|(symbol, start, end)| Phone { symbol, start, end })
        .collect();
    let consistent = phones.last().is_none_or(|p| p.end == pcm.len() as u64);
    consistent.then_some(Speech {
        sample_rate: sample_rate as u32,
        pcm,
        phones,
    })
}

/// sha256 over a phrase's stored fields, each length-prefixed.
/// A phrase as its row stores it.
struct StoredPhrase {
    rate: i64,
    samples: i64,
    flac: Vec<u8>,
    phones: String,
    bytes: i64,
    sum: [u8; 32],
}

impl StoredPhrase {
    fn encode(speech: &Speech) -> Result<StoredPhrase, CodecError> {
        let flac = pcm_codec::encode(&speech.pcm, speech.sample_rate)?;
        let phones: Vec<(&str, u64, u64)> = speech
            .phones
            .iter()
            .map(|p| (p.symbol.as_str(), p.start, p.end))
            .collect();
        let phones = serde_json::to_string(&phones).expect("phones serialise");
        let (rate, samples) = (i64::from(speech.sample_rate), speech.pcm.len() as i64);
        Ok(StoredPhrase {
            bytes: (flac.len() + phones.len() + 96) as i64,
            sum: phrase_sum(rate, samples, &flac, &phones),
            rate,
            samples,
            flac,
            phones,
        })
    }
}

fn phrase_sum(sample_rate: i64, samples: i64, flac: &[u8], phones: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [
        &sample_rate.to_le_bytes()[..],
        &samples.to_le_bytes()[..],
        flac,
        phones.as_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.finalize().into()
}

/// sha256 of a file's bytes, read in 1 MiB blocks.
///
/// sha256 because `sha2` already makes every cache key here (no new crate) and uses the CPU's
/// SHA instructions where present (about 2 GB/s), far above what a chunk costs to read.
pub fn file_sha256(path: &Path) -> std::io::Result<[u8; 32]> {
    let mut file = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(h.finalize().into()),
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Makes `path` a directory; anything else found there is moved aside (with a warning) rather
/// than making every render fail.
fn ensure_dir(path: &Path, warnings: &mut Vec<String>) -> Result<(), CacheError> {
    let dir_err = |source| CacheError::Dir {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let aside =
                path.with_file_name(format!("{name}.broken-{}-{}", now(), std::process::id()));
            match std::fs::rename(path, &aside) {
                Ok(()) => warnings.push(format!(
                    "{} is not a directory; moved it to {} and started an empty one",
                    path.display(),
                    aside.display()
                )),
                // Another render moved it first.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(dir_err(e)),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(dir_err(e)),
    }
    std::fs::create_dir_all(path).map_err(dir_err)
}

/// Takes the lock of `path` if free. The lock file is created if missing; a lock won on a file
/// that its last holder removed meanwhile locks nothing, so that case is a miss too.
fn try_lock_file(path: &Path) -> Result<Option<ChunkLock>, CacheError> {
    let lock_err = |source| CacheError::Lock {
        path: path.to_path_buf(),
        source,
    };
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(lock_err)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(None),
        Err(TryLockError::Error(e)) => return Err(lock_err(e)),
    }
    let held = file.metadata().map_err(lock_err)?;
    let current = std::fs::metadata(path).ok();
    let same = current.is_some_and(|m| (m.dev(), m.ino()) == (held.dev(), held.ino()));
    Ok(same.then(|| ChunkLock {
        path: path.to_path_buf(),
        _file: file,
    }))
}

/// Waits for the lock of `path` (for short, rare sections such as a database repair).
fn lock_file(path: &Path) -> Result<ChunkLock, CacheError> {
    loop {
        if let Some(lock) = try_lock_file(path)? {
            return Ok(lock);
        }
        std::thread::sleep(LOCK_POLL);
    }
}

async fn connect(path: &Path) -> Result<SqlitePool, CacheError> {
    let err = |source| CacheError::Db {
        path: path.to_path_buf(),
        source,
    };
    let opts = SqliteConnectOptions::from_str("sqlite://")
        .map_err(err)?
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(30));
    // First opens race: one connection's `VACUUM` or WAL switch on the new file can answer
    // another's `journal_mode` pragma with SQLITE_BUSY at once, past the busy timeout. Connect
    // and check under the first-use lock, so only one open at a time touches a new file.
    let held = lock_file(&path.with_file_name(".init.lock"))?;
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(opts)
        .await
        .map_err(err)?;
    // Damage inside the file (not only in its header) shows here; reads of the damaged pages
    // would otherwise fail or miss on every run. Its cost grows with the file: about 1 s per GB.
    let check: Vec<String> = sqlx::query_scalar("PRAGMA quick_check(5)")
        .fetch_all(&pool)
        .await
        .map_err(err)?;
    if check.first().map(String::as_str) != Some("ok") {
        pool.close().await;
        return Err(CacheError::Damaged {
            path: path.to_path_buf(),
            detail: check.join("; "),
        });
    }
    let owner = Owner {
        application_id: APPLICATION_ID,
        // As a per-connection pragma `auto_vacuum` needs the write lock, so every open would wait
        // for (and time out behind) another process's write: set once, on the new file.
        when_new: &["PRAGMA auto_vacuum = INCREMENTAL", "VACUUM"],
        migrator: &crate::migrations::CACHE,
    };
    match sqlite_file::claim(&pool, &owner, held).await {
        Ok(()) => Ok(pool),
        Err(e) => {
            // A version this talker does not know was applied by a newer one: its cache is not
            // ours to rebuild (an older binary must not discard it, or its chunks).
            let found = match &e {
                FirstUseError::Migrate(MigrateError::VersionMissing(_)) => {
                    sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
                        .fetch_one(&pool)
                        .await
                        .map_err(err)?
                }
                _ => None,
            };
            pool.close().await;
            Err(match (e, found) {
                (FirstUseError::Foreign, _) => CacheError::Foreign(path.to_path_buf()),
                (_, Some(found)) => CacheError::Newer {
                    path: path.to_path_buf(),
                    found,
                    known: crate::migrations::CACHE
                        .iter()
                        .map(|m| m.version)
                        .max()
                        .unwrap_or_default(),
                },
                (FirstUseError::Migrate(source), None) => CacheError::Migrate {
                    path: path.to_path_buf(),
                    source,
                },
                (FirstUseError::Db(source), None) => err(source),
            })
        }
    }
}

/// SQLITE_BUSY (or a locked table): another connection holds the lock past the busy timeout.
fn is_busy(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(e) = e else {
        return false;
    };
    let code = e.code().and_then(|c| c.parse::<i64>().ok()).unwrap_or(0) & 0xff;
    code == 5 || code == 6
}

/// Whether the write lock can be had within a moment (another process may hold it for long: a
/// shell's open transaction, a stuck program). Asked once at open.
async fn can_write(pool: &SqlitePool) -> bool {
    let Ok(mut conn) = pool.acquire().await else {
        return false;
    };
    let short = sqlx::query("PRAGMA busy_timeout = 2000")
        .execute(&mut *conn)
        .await;
    let began = short.is_ok()
        && sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut *conn)
            .await
            .is_ok();
    if began {
        let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
    }
    let _ = sqlx::query("PRAGMA busy_timeout = 30000")
        .execute(&mut *conn)
        .await;
    began
}

/// Renames a damaged database (and its WAL files) out of the way; returns the new name.
fn move_aside(db: &Path) -> Result<PathBuf, CacheError> {
    let aside = db.with_extension(format!("sqlite.broken-{}", now()));
    std::fs::rename(db, &aside).map_err(|source| CacheError::Dir {
        path: db.to_path_buf(),
        source,
    })?;
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", db.display()));
        let _ = std::fs::remove_file(side);
    }
    Ok(aside)
}
