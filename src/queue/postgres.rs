//! Opening a PostgreSQL queue (several hosts sharing one queue) for sqlx's `Any` pool.
//!
//! Input: a `postgres://` URL. Output: a migrated pool (schema in `migrations/queue-postgres/`).
//! Invariants: sqlx's migrator holds a PostgreSQL advisory lock while it migrates, so workers that
//! start together on an empty database do not race; it runs only when the schema is behind, so a
//! worker role without CREATE rights works on a migrated database; claims skip locked rows.

use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, ConnectOptions, Connection};

use super::{Dialect, QueueError};

pub(super) const DIALECT: Dialect = Dialect {
    migrator: &crate::migrations::QUEUE_POSTGRES,
    now: "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    begin: "BEGIN",
    skip_locked: "FOR UPDATE SKIP LOCKED",
    // Held until the transaction ends; other outputs' enqueues are not held up.
    lock_output: Some("SELECT pg_advisory_xact_lock($1)"),
};

pub(super) async fn connect(url: &str, shown: &str) -> Result<AnyPool, QueueError> {
    let db_err = super::db_error(shown);
    let opts: AnyConnectOptions = url.parse().map_err(db_err)?;
    let opts = opts.disable_statement_logging();
    // One plain connection first: the pool would retry a refused or failed login until its
    // acquire timeout and then report only "timed out".
    opts.connect()
        .await
        .map_err(db_err)?
        .close()
        .await
        .map_err(db_err)?;
    let pool = AnyPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(opts)
        .await
        .map_err(db_err)?;
    // Workers may run as roles that can use the tables but not create any (sqlx's migrator always
    // issues CREATE TABLE IF NOT EXISTS); so migrate only when the schema is behind.
    let latest = DIALECT
        .migrator
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0);
    let applied: Option<i64> =
        sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(&pool)
            .await
            .unwrap_or(None);
    if applied.is_some_and(|v| v >= latest) {
        return Ok(pool);
    }
    super::migrate(&pool, &DIALECT, shown).await?;
    Ok(pool)
}
