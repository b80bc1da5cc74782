//! The database schemas, embedded in the binary: the files under `migrations/`, as sqlx's
//! `Migrator`s.
//!
//! Built here rather than by sqlx's `migrate!` macro: that macro needs sqlx's `macros` feature,
//! which compiles sqlx and its drivers a second time for the compiler (about 2.5 CPU minutes of
//! every clean build and CI run). The result is the same: each migration's checksum is the
//! SHA-384 of its file and its description the file name's, so databases migrated by earlier
//! builds are recognised. The test below keeps each list equal to its directory.

use std::sync::LazyLock;

use sqlx::SqlStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// One migration file: its name, `<version>_<description>.sql`, and its text.
type File = (&'static str, &'static str);

/// A file under `migrations/<dir>/`, named once.
macro_rules! file {
    ($dir:literal, $name:literal) => {
        (
            $name,
            include_str!(concat!("../migrations/", $dir, "/", $name)),
        )
    };
}

/// Version and description of a migration file's name, as sqlx reads them: the number before the
/// first `_`, then the rest without `.sql`, `_` as spaces.
fn version_and_description(name: &str) -> Option<(i64, String)> {
    let (version, rest) = name.split_once('_')?;
    Some((
        version.parse().ok()?,
        rest.strip_suffix(".sql")?.replace('_', " "),
    ))
}

fn migrator(files: &[File]) -> Migrator {
    Migrator::with_migrations(
        files
            .iter()
            .map(|&(name, sql)| {
                let (version, description) = version_and_description(name)
                    .expect("migration files are named <version>_<description>.sql");
                Migration::new(
                    version,
                    description.into(),
                    MigrationType::Simple,
                    SqlStr::from_static(sql),
                    false,
                )
            })
            .collect(),
    )
}

const CACHE_FILES: &[File] = &[
    file!("cache", "0001_phrases_and_chunks.sql"),
    file!("cache", "0002_checksums.sql"),
];

#[cfg(feature = "render")]
const QUEUE_SQLITE_FILES: &[File] = &[
    file!("queue-sqlite", "0001_jobs_and_attempts.sql"),
    file!("queue-sqlite", "0002_rendered_hash.sql"),
];

#[cfg(feature = "render")]
const QUEUE_POSTGRES_FILES: &[File] = &[
    file!("queue-postgres", "0001_jobs_and_attempts.sql"),
    file!("queue-postgres", "0002_rendered_hash.sql"),
];

/// The phrase and chunk cache (`migrations/cache/`).
pub static CACHE: LazyLock<Migrator> = LazyLock::new(|| migrator(CACHE_FILES));
/// The SQLite job queue (`migrations/queue-sqlite/`).
#[cfg(feature = "render")]
pub static QUEUE_SQLITE: LazyLock<Migrator> = LazyLock::new(|| migrator(QUEUE_SQLITE_FILES));
/// The PostgreSQL job queue (`migrations/queue-postgres/`).
#[cfg(feature = "render")]
pub static QUEUE_POSTGRES: LazyLock<Migrator> = LazyLock::new(|| migrator(QUEUE_POSTGRES_FILES));

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha384};

    /// What sqlx's own directory scan makes of `migrations/<dir>`: version, description and
    /// checksum of every `<version>_<description>.sql`, in version order.
    fn scanned(dir: &str) -> Vec<(i64, String, Vec<u8>)> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("migrations")
            .join(dir);
        let mut found: Vec<_> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter_map(|name| {
                let (version, description) = version_and_description(&name)?;
                let text = std::fs::read(path.join(&name)).unwrap();
                Some((version, description, Sha384::digest(text).to_vec()))
            })
            .collect();
        found.sort();
        found
    }

    fn listed(m: &Migrator) -> Vec<(i64, String, Vec<u8>)> {
        m.iter()
            .map(|m| (m.version, m.description.to_string(), m.checksum.to_vec()))
            .collect()
    }

    fn simple(m: &Migrator) -> bool {
        m.iter()
            .all(|m| !m.no_tx && m.migration_type == MigrationType::Simple)
    }

    #[test]
    fn every_cache_migration_file_is_listed_as_sqlx_would_read_it() {
        assert_eq!(listed(&CACHE), scanned("cache"));
        assert!(simple(&CACHE));
    }

    #[cfg(feature = "render")]
    #[test]
    fn every_queue_migration_file_is_listed_as_sqlx_would_read_it() {
        assert_eq!(listed(&QUEUE_SQLITE), scanned("queue-sqlite"));
        assert_eq!(listed(&QUEUE_POSTGRES), scanned("queue-postgres"));
        assert!(simple(&QUEUE_SQLITE) && simple(&QUEUE_POSTGRES));
    }
}
