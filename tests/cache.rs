//! Phrase/chunk cache on real SQLite files: round trips, counters, recovery, gc.

use talker::cache::{Cache, KeyBuilder};
use talker::tts::{Phone, Speech};

fn speech(n: usize, seed: i16) -> Speech {
    let pcm: Vec<i16> = (0..n)
        .map(|i| ((i as i16).wrapping_mul(31)).wrapping_add(seed))
        .collect();
    let phones = vec![
        Phone {
            symbol: "^".into(),
            start: 0,
            end: n as u64 / 2,
        },
        Phone {
            symbol: "a".into(),
            start: n as u64 / 2,
            end: n as u64,
        },
    ];
    Speech {
        sample_rate: 22050,
        pcm,
        phones,
    }
}

fn key(text: &str) -> talker::cache::Key {
    KeyBuilder::new("phrase").str("text", text).finish()
}

#[test]
fn phrase_round_trip_and_counters() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    let s = speech(5000, 3);
    cache.put_phrase(key("a"), &s).unwrap();
    let found = cache.get_phrases(&[key("a"), key("b")]).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[&key("a")], s);
    let stats = cache.stats().unwrap();
    assert_eq!(
        (stats.phrases, stats.phrase_hits, stats.phrase_misses),
        (1, 1, 1)
    );
    assert!(stats.phrase_bytes > 0);
    assert_eq!(stats.phrase_hit_ratio(), 0.5);
}

#[test]
fn reopening_keeps_entries_and_double_put_is_harmless() {
    let dir = tempfile::tempdir().unwrap();
    {
        let cache = Cache::open(dir.path()).unwrap();
        cache.put_phrase(key("x"), &speech(100, 1)).unwrap();
        cache.put_phrase(key("x"), &speech(100, 1)).unwrap();
    }
    let cache = Cache::open(dir.path()).unwrap();
    assert_eq!(cache.stats().unwrap().phrases, 1);
    assert_eq!(cache.get_phrases(&[key("x")]).unwrap().len(), 1);
}

#[test]
fn garbage_database_file_is_moved_aside_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cache.sqlite"), vec![0x5a; 8192]).unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    cache.put_phrase(key("ok"), &speech(10, 0)).unwrap();
    assert_eq!(cache.get_phrases(&[key("ok")]).unwrap().len(), 1);
    let aside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("broken"))
        .collect();
    assert_eq!(aside.len(), 1, "the damaged file is kept for inspection");
}

#[test]
fn foreign_sqlite_file_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cache.sqlite");
    let status = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);")
        .status();
    if status.is_err() {
        // No sqlite3 CLI: write a foreign database with a second cache handle's own driver instead.
        panic!("the sqlite3 CLI is needed for this test (apt-get install sqlite3)");
    }
    let cache = Cache::open(dir.path()).unwrap();
    assert_eq!(cache.stats().unwrap().phrases, 0);
    assert!(
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains("broken"))
    );
}

#[test]
fn damaged_row_counts_as_a_miss_and_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    cache.put_phrase(key("bad"), &speech(100, 0)).unwrap();
    drop(cache);
    let status = std::process::Command::new("sqlite3")
        .arg(dir.path().join("cache.sqlite"))
        .arg("UPDATE phrases SET pcm_flac = X'00010203';")
        .status()
        .unwrap();
    assert!(status.success());
    let cache = Cache::open(dir.path()).unwrap();
    assert!(cache.get_phrases(&[key("bad")]).unwrap().is_empty());
    assert_eq!(cache.stats().unwrap().phrases, 0);
}

#[test]
fn chunk_entries_need_their_file() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    let k = KeyBuilder::new("chunk").str("n", "1").finish();
    assert!(cache.get_chunk(&k).unwrap().is_none());
    let path = cache.chunk_path(&k);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"chunk bytes").unwrap();
    cache.put_chunk(&k, 25, 22050, "{}").unwrap();
    let e = cache.get_chunk(&k).unwrap().unwrap();
    assert_eq!(
        (e.frames, e.samples, e.path.clone()),
        (25, 22050, path.clone())
    );
    std::fs::remove_file(&path).unwrap();
    assert!(
        cache.get_chunk(&k).unwrap().is_none(),
        "a row without its file is a miss"
    );
    let s = cache.stats().unwrap();
    assert_eq!((s.chunks, s.chunk_hits, s.chunk_misses), (0, 1, 2));
}

#[test]
fn gc_removes_least_recently_used_first() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    for i in 0..6 {
        cache
            .put_phrase(key(&i.to_string()), &speech(20_000, i))
            .unwrap();
    }
    let before = cache.stats().unwrap();
    let report = cache.gc(before.phrase_bytes / 2).unwrap();
    let after = cache.stats().unwrap();
    assert!(report.removed_phrases >= 3, "{report:?}");
    assert!(after.phrase_bytes <= before.phrase_bytes / 2);
    assert_eq!(report.bytes_after, after.phrase_bytes + after.chunk_bytes);
    assert_eq!(cache.gc(0).unwrap().bytes_after, 0);
    assert_eq!(cache.stats().unwrap().phrases, 0);
}

#[test]
fn unwritable_directory_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    assert!(Cache::open(&file.join("sub")).is_err());
}
