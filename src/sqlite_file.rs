//! First use of a SQLite file that talker owns: the phrase and chunk cache, and the job queue.
//!
//! Both stamp their files with a `PRAGMA application_id`, refuse a foreign file rather than add
//! tables to it, and migrate under an exclusive lock (each owner's own kind of lock file), so that
//! processes starting at once on a new file neither race to create the tables nor take a
//! half-made file (tables, no stamp yet) for a foreign one. The stamp is set last, after the
//! migrations: a file cut off by a crash before it is still "new" and is finished by the next
//! open. One helper, so the two files cannot drift apart in these rules.

use sqlx::migrate::{Migrate, MigrateError, Migrator};
use sqlx::{AssertSqlSafe, Database, Decode, Executor, IntoArguments, Pool, Type};

/// Why a file could not be made ready; each owner wraps it in its own error type.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FirstUseError {
    /// The file holds tables but not our application id: somebody else's database.
    #[error("not talker's database")]
    Foreign,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    #[error(transparent)]
    Migrate(#[from] MigrateError),
}

/// What a file's owner asks of its first use.
pub(crate) struct Owner<'a> {
    /// The id that marks the file as this owner's.
    pub application_id: i64,
    /// Run once, on one connection, when the file is new (before the migrations): settings
    /// that need the write lock or a rewrite, such as `auto_vacuum` or the journal mode.
    pub when_new: &'a [&'static str],
    pub migrator: &'a Migrator,
}

/// Checks that the file behind `pool` is the owner's (or new), brings its schema up to date and
/// stamps a new file. The caller holds its exclusive lock on a file beside the database (never
/// the database itself, whose own locks SQLite uses) across the call: `held` is that guard.
pub(crate) async fn claim<DB, L>(
    pool: &Pool<DB>,
    owner: &Owner<'_>,
    held: L,
) -> Result<(), FirstUseError>
where
    DB: Database,
    DB::Connection: Migrate,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'c> &'c Pool<DB>: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: Type<DB> + for<'r> Decode<'r, DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    let mut conn = pool.acquire().await?;
    let found: i64 = sqlx::query_scalar("PRAGMA application_id")
        .fetch_one(&mut *conn)
        .await?;
    let new = found != owner.application_id;
    if new {
        let tables: i64 = sqlx::query_scalar("SELECT count(*) FROM sqlite_master")
            .fetch_one(&mut *conn)
            .await?;
        if tables > 0 {
            return Err(FirstUseError::Foreign);
        }
        for statement in owner.when_new {
            sqlx::query(*statement).execute(&mut *conn).await?;
        }
    }
    drop(conn);
    owner.migrator.run(pool).await?;
    if new {
        // A pragma takes no bound parameters; the id is our own constant.
        let stamp = format!("PRAGMA application_id = {}", owner.application_id);
        sqlx::query(AssertSqlSafe(stamp)).execute(pool).await?;
    }
    drop(held);
    Ok(())
}
