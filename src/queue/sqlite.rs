//! Opening a SQLite queue file for sqlx's `Any` pool.
//!
//! Input: the file's path. Output: a migrated pool (schema in `migrations/queue-sqlite/`).
//! Invariants: WAL journal, a 30 s busy timeout and foreign keys on every connection; the file is
//! ours (`PRAGMA application_id` "TLKQ") or refused; first-time migration runs under an exclusive
//! lock on a `.lock` file beside it (`sqlite_file::claim`, shared with the cache).

use std::path::Path;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AnyPool, ConnectOptions, Executor};

use super::{Dialect, QueueError};
use crate::sqlite_file::{self, FirstUseError, Owner};

/// "TLKQ": tells our queue files from other SQLite files (and from the cache's "TLKC").
const APPLICATION_ID: i64 = 0x544C_4B51;

pub(super) const DIALECT: Dialect = Dialect {
    migrator: &crate::migrations::QUEUE_SQLITE,
    now: "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
    begin: "BEGIN IMMEDIATE",
    skip_locked: "",
    lock_output: None,
};

/// A file that exists but is no SQLite database would fail every pooled connection, and the pool
/// would retry until its acquire timeout (a minute); its first bytes tell at once.
fn is_sqlite_or_new(path: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    // `stat` first: opening a FIFO to read its header would block.
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => return Ok(false),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    }
    let mut head = Vec::with_capacity(16);
    std::fs::File::open(path)?.take(16).read_to_end(&mut head)?;
    Ok(head.is_empty() || head == b"SQLite format 3\0")
}

pub(super) async fn connect(path: &Path, shown: &str) -> Result<AnyPool, QueueError> {
    let open_err = |message: String| QueueError::Open {
        location: shown.to_owned(),
        message,
    };
    let db_err = super::db_error(shown);
    let path = std::path::absolute(path).map_err(|e| open_err(e.to_string()))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| open_err(format!("cannot create {}: {e}", dir.display())))?;
    }
    if !is_sqlite_or_new(&path)
        .map_err(|e| open_err(format!("cannot read {}: {e}", path.display())))?
    {
        return Err(QueueError::Foreign(shown.to_owned()));
    }
    let url = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .to_url_lossy();
    let opts = AnyConnectOptions::from_url(&url)
        .map_err(db_err)?
        .disable_statement_logging();
    let pool = AnyPoolOptions::new()
        .max_connections(4)
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute("PRAGMA busy_timeout = 30000").await?;
                conn.execute("PRAGMA synchronous = NORMAL").await?;
                conn.execute("PRAGMA foreign_keys = ON").await?;
                Ok(())
            })
        })
        .acquire_timeout(Duration::from_secs(60))
        .connect_with(opts)
        .await
        .map_err(db_err)?;

    let mut lock_path = path.clone().into_os_string();
    lock_path.push(".lock");
    let lock_path = std::path::PathBuf::from(lock_path);
    let held = std::fs::File::create(&lock_path)
        .and_then(|file| file.lock().map(|()| file))
        .map_err(|e| open_err(format!("cannot lock {}: {e}", lock_path.display())))?;
    let owner = Owner {
        application_id: APPLICATION_ID,
        when_new: &["PRAGMA journal_mode = WAL"],
        migrator: DIALECT.migrator,
    };
    if let Err(e) = sqlite_file::claim(&pool, &owner, held).await {
        pool.close().await;
        return Err(match e {
            FirstUseError::Foreign => QueueError::Foreign(shown.to_owned()),
            FirstUseError::Db(error) => db_err(error),
            FirstUseError::Migrate(error) => QueueError::Migrate {
                location: shown.to_owned(),
                error,
            },
        });
    }
    Ok(pool)
}
