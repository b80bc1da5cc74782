//! The phrase and chunk cache: SQLite through sqlx, files beside it. The only user of SQLite for caching.
//!
//! Layout of the cache directory (`--cache DIR`, `$TALKER_CACHE`, else `~/.cache/talker`):
//! `cache.sqlite` (schema in `migrations/cache/`) and `chunks/xx/<key>.mkv`.
//!
//! Several processes may share one cache: WAL journal, a busy timeout, and `BEGIN IMMEDIATE` for
//! multi-statement writes (a deferred transaction that upgrades to a write gets SQLITE_BUSY at once
//! and ignores the timeout). A corrupt or foreign database file is moved aside with a warning and a
//! fresh one is built: a cache is never worth failing a render for.

pub mod key;
pub mod pcm_codec;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::sqlite::{
    SqliteAutoVacuum, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{Row, migrate::Migrator};
use tokio::runtime::Runtime;

pub use key::{Key, KeyBuilder};

use crate::tts::{Phone, Speech};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/cache");

/// `PRAGMA application_id` of our database files ("TLKC"), to tell them from foreign SQLite files.
const APPLICATION_ID: i64 = 0x544C_4B43;
const SET_APPLICATION_ID: &str = "PRAGMA application_id = 1414286147";
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
    #[error("cache database {0} belongs to another program")]
    Foreign(PathBuf),
    #[error("cannot start the cache's runtime: {0}")]
    Runtime(std::io::Error),
}

impl CacheError {
    /// A damaged or foreign file that rebuilding fixes (as opposed to, say, a read-only disk).
    fn is_recoverable(&self) -> bool {
        match self {
            CacheError::Foreign(_) | CacheError::Migrate { .. } => true,
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
}

pub struct Cache {
    rt: Runtime,
    pool: SqlitePool,
    dir: PathBuf,
    db_path: PathBuf,
}

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
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(CacheError::Runtime)?;
        let db_path = dir.join(DB_FILE);
        let pool = match rt.block_on(connect(&db_path)) {
            Ok(pool) => pool,
            Err(e) if e.is_recoverable() => {
                let aside = move_aside(&db_path)?;
                tracing::warn!(
                    "{e}; moved it to {} and started a new cache",
                    aside.display()
                );
                rt.block_on(connect(&db_path))?
            }
            Err(e) => return Err(e),
        };
        Ok(Cache {
            rt,
            pool,
            dir: dir.to_path_buf(),
            db_path,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn db_err(&self) -> impl Fn(sqlx::Error) -> CacheError + '_ {
        |source| CacheError::Db {
            path: self.db_path.clone(),
            source,
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
                    "SELECT sample_rate, samples, pcm_flac, phones FROM phrases WHERE key = ?",
                )
                .bind(&key.0[..])
                .fetch_optional(&self.pool)
                .await
                .map_err(self.db_err())?;
                let Some(row) = row else { continue };
                match decode_phrase(row.get(0), row.get(1), row.get(2), row.get(3)) {
                    Some(speech) => {
                        found.insert(*key, speech);
                    }
                    None => damaged.push(*key),
                }
            }
            let hits = found.len() as i64;
            let misses = keys.len() as i64 - hits;
            let mut tx = self
                .pool
                .begin_with("BEGIN IMMEDIATE")
                .await
                .map_err(self.db_err())?;
            for key in &damaged {
                sqlx::query("DELETE FROM phrases WHERE key = ?")
                    .bind(&key.0[..])
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
            if !damaged.is_empty() {
                tracing::warn!("dropped {} damaged phrase(s) from the cache", damaged.len());
            }
            Ok(found)
        })
    }

    /// Stores a phrase; a concurrent writer of the same key wins harmlessly.
    pub fn put_phrase(&self, key: Key, speech: &Speech) -> Result<(), CacheError> {
        let flac =
            pcm_codec::encode(&speech.pcm, speech.sample_rate).map_err(|e| CacheError::Db {
                path: self.db_path.clone(),
                source: sqlx::Error::Encode(Box::new(e)),
            })?;
        let phones: Vec<(&str, u64, u64)> = speech
            .phones
            .iter()
            .map(|p| (p.symbol.as_str(), p.start, p.end))
            .collect();
        let phones = serde_json::to_string(&phones).expect("phones serialise");
        let bytes = (flac.len() + phones.len() + 64) as i64;
        let t = now();
        self.rt.block_on(
            sqlx::query(
                "INSERT INTO phrases (key, sample_rate, samples, pcm_flac, phones, bytes, created_at, used_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
            )
            .bind(&key.0[..])
            .bind(i64::from(speech.sample_rate))
            .bind(speech.pcm.len() as i64)
            .bind(flac)
            .bind(phones)
            .bind(bytes)
            .bind(t)
            .bind(t)
            .execute(&self.pool),
        )
        .map_err(self.db_err())?;
        Ok(())
    }

    /// Where a chunk with this key is stored (the file may not exist yet).
    pub fn chunk_path(&self, key: &Key) -> PathBuf {
        let hex = key.hex();
        self.dir
            .join("chunks")
            .join(&hex[..2])
            .join(format!("{hex}.mkv"))
    }

    /// A finished chunk, if its row and its file both exist.
    pub fn get_chunk(&self, key: &Key) -> Result<Option<ChunkEntry>, CacheError> {
        self.rt.block_on(async {
            let row = sqlx::query("SELECT frames, samples, meta FROM chunks WHERE key = ?")
                .bind(&key.0[..])
                .fetch_optional(&self.pool)
                .await
                .map_err(self.db_err())?;
            let path = self.chunk_path(key);
            let entry = row.filter(|_| path.is_file()).map(|row| ChunkEntry {
                path,
                frames: row.get::<i64, _>(0) as u64,
                samples: row.get::<i64, _>(1) as u64,
                meta: row.get(2),
            });
            let mut tx = self
                .pool
                .begin_with("BEGIN IMMEDIATE")
                .await
                .map_err(self.db_err())?;
            if entry.is_some() {
                sqlx::query("UPDATE chunks SET used_at = ? WHERE key = ?")
                    .bind(now())
                    .bind(&key.0[..])
                    .execute(&mut *tx)
                    .await
                    .map_err(self.db_err())?;
                bump(&mut tx, "chunk_hits", 1)
                    .await
                    .map_err(self.db_err())?;
            } else {
                sqlx::query("DELETE FROM chunks WHERE key = ?")
                    .bind(&key.0[..])
                    .execute(&mut *tx)
                    .await
                    .map_err(self.db_err())?;
                bump(&mut tx, "chunk_misses", 1)
                    .await
                    .map_err(self.db_err())?;
            }
            tx.commit().await.map_err(self.db_err())?;
            Ok(entry)
        })
    }

    /// Records a chunk at [`Cache::chunk_path`]. Called before the file is written (so a file that
    /// exists always has its row, even after a kill between the two) and again after, to record
    /// its size; a row whose file never appeared is dropped by [`Cache::get_chunk`].
    pub fn put_chunk(
        &self,
        key: &Key,
        frames: u64,
        samples: u64,
        meta: &str,
    ) -> Result<(), CacheError> {
        let path = self.chunk_path(key);
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
                    "INSERT INTO chunks (key, file, frames, samples, meta, bytes, created_at, used_at)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT (key) DO UPDATE SET used_at = excluded.used_at, bytes = excluded.bytes",
                )
                .bind(&key.0[..])
                .bind(rel)
                .bind(frames as i64)
                .bind(samples as i64)
                .bind(meta)
                .bind(bytes as i64)
                .bind(t)
                .bind(t)
                .execute(&self.pool),
            )
            .map_err(self.db_err())?;
        Ok(())
    }

    /// Forgets a chunk whose file turned out unusable.
    pub fn drop_chunk(&self, key: &Key) -> Result<(), CacheError> {
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

    /// Removes least-recently-used entries until phrases + chunks take at most `max_bytes`.
    pub fn gc(&self, max_bytes: u64) -> Result<GcReport, CacheError> {
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
            let mut tx = self
                .pool
                .begin_with("BEGIN IMMEDIATE")
                .await
                .map_err(self.db_err())?;
            let mut files = Vec::new();
            for (_, is_chunk, key, bytes) in entries {
                if total <= max_bytes {
                    break;
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
        .auto_vacuum(SqliteAutoVacuum::Incremental)
        .busy_timeout(Duration::from_secs(30));
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(opts)
        .await
        .map_err(err)?;
    let app_id: i64 = sqlx::query_scalar("PRAGMA application_id")
        .fetch_one(&pool)
        .await
        .map_err(err)?;
    if app_id != APPLICATION_ID {
        let tables: i64 = sqlx::query_scalar("SELECT count(*) FROM sqlite_master")
            .fetch_one(&pool)
            .await
            .map_err(err)?;
        if tables > 0 {
            pool.close().await;
            return Err(CacheError::Foreign(path.to_path_buf()));
        }
    }
    if let Err(source) = MIGRATOR.run(&pool).await {
        pool.close().await;
        return Err(CacheError::Migrate {
            path: path.to_path_buf(),
            source,
        });
    }
    if app_id != APPLICATION_ID {
        sqlx::query(SET_APPLICATION_ID)
            .execute(&pool)
            .await
            .map_err(err)?;
    }
    Ok(pool)
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
