//! The job queue: job specs in, renders out, on SQLite (one host) or PostgreSQL (several hosts).
//!
//! Input: resolved [`Job`]s (see `spec.rs`) and worker calls. Output: job rows whose state moves
//! `queued → running → succeeded | failed | cancelled` (a retry or an expired lease goes back to
//! `queued`). Invariants, the same on both databases (one SQL text, see `store.rs`):
//! - a job is unique by content hash while `queued` or `running` (a partial unique index), and
//!   no two such jobs write one output (refused at enqueue and retry);
//! - a claim takes the best `queued` job (priority, then due time, then id) under a write lock
//!   (SQLite `BEGIN IMMEDIATE`, PostgreSQL `FOR UPDATE SKIP LOCKED`) and gets a fresh lease token;
//!   heartbeat, complete, fail and release only act while that token is still the job's, so a
//!   worker whose lease expired and was reclaimed can never mark the job done;
//! - lease times come from the database's clock (unix milliseconds), so hosts need not agree.
//!
//! sqlx's `Any` driver carries both databases behind one pool type; a private current-thread
//! tokio runtime keeps the API synchronous, as in the cache.

pub mod batch;
pub mod metrics;
mod postgres;
pub mod publish;
pub mod spec;
mod sqlite;
mod store;
pub mod worker;

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use sqlx::AnyPool;
use sqlx::migrate::Migrator;
use tokio::runtime::Runtime;

pub use spec::{Job, JobSpec, RenderEnv, SpecError};
pub use store::{Attempt, Cancelled, Claim, Counts, Enqueued, FailOutcome, JobRow};

/// Where the queue lives: `--queue`, `$TALKER_QUEUE`, else `queue.sqlite` in the cache directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueLocation {
    Sqlite(PathBuf),
    Postgres(String),
}

impl QueueLocation {
    /// A path, `sqlite://PATH` or `postgres://…` (`postgresql://` too).
    pub fn parse(s: &str) -> Result<QueueLocation, QueueError> {
        let s = s.trim();
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(QueueLocation::Postgres(s.to_owned()));
        }
        if let Some(path) = s
            .strip_prefix("sqlite://")
            .or_else(|| s.strip_prefix("sqlite:"))
        {
            if path.is_empty() {
                return Err(QueueError::BadLocation(s.to_owned()));
            }
            return Ok(QueueLocation::Sqlite(PathBuf::from(path)));
        }
        if s.is_empty() || s.contains("://") {
            return Err(QueueError::BadLocation(s.to_owned()));
        }
        Ok(QueueLocation::Sqlite(PathBuf::from(s)))
    }

    /// `$TALKER_QUEUE`, else `<cache_dir>/queue.sqlite`.
    pub fn default_for(cache_dir: &Path) -> Result<QueueLocation, QueueError> {
        match std::env::var("TALKER_QUEUE") {
            Ok(v) if !v.trim().is_empty() => QueueLocation::parse(&v),
            _ => Ok(QueueLocation::Sqlite(cache_dir.join("queue.sqlite"))),
        }
    }

    /// For messages: the file, or the URL without its password.
    pub fn display(&self) -> String {
        match self {
            QueueLocation::Sqlite(p) => p.display().to_string(),
            QueueLocation::Postgres(url) => match url::Url::parse(url) {
                Ok(mut u) => {
                    if u.password().is_some() {
                        let _ = u.set_password(Some("***"));
                    }
                    u.to_string()
                }
                Err(_) => "a postgres:// URL that does not parse".to_owned(),
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error(
        "{0:?} is not a queue location; give a file path, sqlite://PATH or postgres://USER@HOST/DB"
    )]
    BadLocation(String),
    // The causes are in the message (`error`, not `source`), so they are printed once.
    #[error("queue {location}: {error}")]
    Db {
        location: String,
        error: sqlx::Error,
    },
    #[error("queue {location}: migration failed: {error}")]
    Migrate {
        location: String,
        error: sqlx::migrate::MigrateError,
    },
    #[error("queue {location}: {message}")]
    Open { location: String, message: String },
    #[error(
        "queue {0}: the file is not a talker queue (a database of another program, or no database); choose another --queue path"
    )]
    Foreign(String),
    #[error("cannot start the queue's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("no job {0} in the queue (see talker status)")]
    NoSuchJob(i64),
    #[error("job {id} is {state}; only {allowed} jobs can be {action}")]
    WrongState {
        id: i64,
        state: String,
        allowed: &'static str,
        action: &'static str,
    },
    #[error("job {id} cannot be retried: job {other} renders the same content and is {state}")]
    Duplicate { id: i64, other: i64, state: String },
    #[error(
        "{output} is already the output of job {other} ({state}, from {spec}) with other content; wait until it ends, cancel it (talker cancel {other}), or give this spec another output"
    )]
    OutputTaken {
        output: String,
        other: i64,
        state: String,
        /// The spec file the other job came from.
        spec: String,
    },
    #[error(
        "queue {0} does not exist; check the path (talker enqueue, batch and worker create a queue)"
    )]
    Missing(String),
}

/// Wraps a database error with the queue's location (as shown in messages).
fn db_error(location: &str) -> impl Fn(sqlx::Error) -> QueueError + Copy + '_ {
    |error| QueueError::Db {
        location: location.to_owned(),
        error,
    }
}

/// Brings the schema up to the dialect's latest migration.
async fn migrate(pool: &AnyPool, dialect: &Dialect, location: &str) -> Result<(), QueueError> {
    dialect
        .migrator
        .run(pool)
        .await
        .map_err(|error| QueueError::Migrate {
            location: location.to_owned(),
            error,
        })
}

impl QueueError {
    /// Mistakes in what the user asked for (exit 2), as opposed to database trouble (exit 1).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            QueueError::BadLocation(_)
                | QueueError::NoSuchJob(_)
                | QueueError::WrongState { .. }
                | QueueError::Duplicate { .. }
                | QueueError::OutputTaken { .. }
                | QueueError::Missing(_)
                | QueueError::Foreign(_)
        )
    }
}

/// What differs between the two databases; everything else is shared.
#[derive(Debug, Clone, Copy)]
struct Dialect {
    /// The schema, one directory per database (`migrations/queue-sqlite/`,
    /// `migrations/queue-postgres/`): the same versions, tables and meaning, each in its
    /// database's types. Two files, not one template, because sqlx keeps a checksum of every
    /// applied migration's text and refuses a queue whose applied text changed.
    migrator: &'static LazyLock<Migrator>,
    /// Unix milliseconds from the database's clock.
    now: &'static str,
    /// Starts a transaction that takes the write lock at once (SQLite would otherwise fail an
    /// upgrade with SQLITE_BUSY without waiting).
    begin: &'static str,
    /// Appended to the claim's choice of row: skip rows another worker is claiming.
    skip_locked: &'static str,
    /// Serialises the transactions that give one output a live job (`$1`: a 64-bit key of the
    /// output path), so two concurrent enqueues cannot both find the output free. `None` where
    /// `begin` already takes the database's one write lock (SQLite).
    lock_output: Option<&'static str>,
}

pub struct Queue {
    rt: Runtime,
    pool: AnyPool,
    dialect: Dialect,
    location: String,
}

impl Queue {
    /// Opens (creating and migrating when needed) the queue at `location`.
    pub fn open(location: &QueueLocation) -> Result<Queue, QueueError> {
        sqlx::any::install_default_drivers();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(QueueError::Runtime)?;
        let shown = location.display();
        let (pool, dialect) = match location {
            QueueLocation::Sqlite(path) => {
                (rt.block_on(sqlite::connect(path, &shown))?, sqlite::DIALECT)
            }
            QueueLocation::Postgres(url) => (
                rt.block_on(postgres::connect(url, &shown))?,
                postgres::DIALECT,
            ),
        };
        Ok(Queue {
            rt,
            pool,
            dialect,
            location: shown,
        })
    }

    /// Opens a queue that must exist already: reading or changing jobs (`status`, `cancel`,
    /// `retry`) never creates a queue file, so a mistyped path is named instead of made.
    pub fn open_existing(location: &QueueLocation) -> Result<Queue, QueueError> {
        if let QueueLocation::Sqlite(path) = location
            && std::fs::symlink_metadata(path).is_err()
        {
            return Err(QueueError::Missing(location.display()));
        }
        Queue::open(location)
    }

    /// The queue's location for messages (passwords hidden).
    pub fn location(&self) -> &str {
        &self.location
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.rt.block_on(self.pool.close());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A migration's statements with comments and layout dropped and PostgreSQL's types read as
    /// SQLite's, so the two schemas can be compared.
    fn shape(sql: &str) -> String {
        let text: Vec<&str> = sql
            .lines()
            .map(|l| l.split("--").next().unwrap_or_default())
            .collect();
        text.join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace("BIGSERIAL PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT")
            .replace("BIGINT", "INTEGER")
    }

    #[test]
    fn both_databases_have_the_same_migrations() {
        let (lite, pg) = (sqlite::DIALECT.migrator, postgres::DIALECT.migrator);
        let list = |m: &Migrator| {
            m.iter()
                .map(|m| (m.version, m.description.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(list(lite), list(pg));
        for (a, b) in lite.iter().zip(pg.iter()) {
            assert_eq!(
                shape(a.sql.as_str()),
                shape(b.sql.as_str()),
                "{}",
                a.version
            );
        }
    }

    /// sqlx refuses a queue whose applied migration's text has changed since: a released
    /// migration is never edited (a change is a new migration).
    #[test]
    fn released_migrations_are_unchanged() {
        let hex = |m: &Migrator| {
            m.iter()
                .map(|m| m.checksum.iter().map(|b| format!("{b:02x}")).collect())
                .collect::<Vec<String>>()
        };
        assert_eq!(
            hex(sqlite::DIALECT.migrator)[0],
            "2e31c4e5ee0ad4f9ab8bd67d7d64aad4b82b698d97bf360b0df6d7b84f57ff617a3c3d6547f3d9efdce353e77a72cbe6"
        );
        assert_eq!(
            hex(postgres::DIALECT.migrator)[0],
            "a37adb57e6196f0675b3352201fff8f57d011ed1e9ca683285610cb554bff39b2a652cfb4b2f05d0c09785fbb64b3a04"
        );
    }
}
