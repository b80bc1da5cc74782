//! Phrase/chunk cache on real SQLite files: round trips, counters, recovery, gc; and renders
//! that share a cache, find it damaged, or repeat themselves, through the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use talker::cache::{Cache, KeyBuilder};
use talker::tts::{Phone, Speech};

use crate::util::*;

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

/// Many phrases stored at once (encoded on several threads, written in one transaction) come
/// back as given; one that cannot be encoded (FLAC stops at 96 kHz) is left out with an error
/// that names why, after the others are stored.
#[test]
fn phrases_stored_together_come_back_and_an_unencodable_one_is_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    let all: Vec<(talker::cache::Key, Speech)> = (0..40)
        .map(|i| (key(&format!("p{i}")), speech(100 + 997 * i, i as i16)))
        .collect();
    let refs: Vec<_> = all.iter().map(|(k, s)| (*k, s)).collect();
    cache.put_phrases(&refs).unwrap();
    let keys: Vec<_> = all.iter().map(|(k, _)| *k).collect();
    let found = cache.get_phrases(&keys).unwrap();
    assert_eq!(found.len(), 40);
    for (k, s) in &all {
        assert_eq!(&found[k], s);
    }

    let mut too_fast = speech(500, 1);
    too_fast.sample_rate = 192_000;
    let ok = speech(700, 2);
    let err = cache
        .put_phrases(&[(key("fast"), &too_fast), (key("ok2"), &ok)])
        .unwrap_err();
    assert!(err.to_string().contains("96000"), "{err}");
    let found = cache.get_phrases(&[key("fast"), key("ok2")]).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[&key("ok2")], ok);
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
    let warnings = cache.take_warnings();
    assert!(
        warnings.len() == 1 && warnings[0].contains(&key("bad").hex()),
        "{warnings:?}"
    );
}

#[test]
fn chunk_whose_file_changed_is_dropped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    let k = KeyBuilder::new("chunk").str("n", "flip").finish();
    let path = cache.chunk_path(&k);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, vec![7u8; 5000]).unwrap();
    cache.put_chunk(&k, 1, 882, "{}").unwrap();
    assert!(cache.get_chunk(&k).unwrap().is_some());
    assert!(cache.take_warnings().is_empty());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[2500] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();
    assert!(cache.get_chunk(&k).unwrap().is_none());
    let warnings = cache.take_warnings();
    assert!(
        warnings.len() == 1 && warnings[0].contains(&path.display().to_string()),
        "{warnings:?}"
    );
    assert!(!path.exists(), "the damaged file is removed");
    assert_eq!(cache.stats().unwrap().chunks, 0);
}

#[test]
fn one_writer_per_chunk_key_and_a_stopped_waiter_gives_up() {
    let dir = tempfile::tempdir().unwrap();
    let a = Cache::open(dir.path()).unwrap();
    let b = Cache::open(dir.path()).unwrap();
    let k = KeyBuilder::new("chunk").str("n", "lock").finish();
    let no = AtomicBool::new(false);
    let held = a.lock_chunk(&k, &no).unwrap().expect("free lock");
    let stop = AtomicBool::new(true);
    assert!(
        b.lock_chunk(&k, &stop).unwrap().is_none(),
        "stopped while waiting"
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let lock = b.lock_chunk(&k, &no).unwrap();
            tx.send(Instant::now()).unwrap();
            drop(lock);
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(rx.try_recv().is_err(), "the second writer waits");
        let released = Instant::now();
        drop(held);
        let got = rx.recv().unwrap();
        assert!(got >= released);
    });
    let lock_file = a.chunk_path(&k).with_extension("lock");
    assert!(!lock_file.exists(), "lock files are removed after use");
}

#[test]
fn file_where_the_chunk_directory_should_be_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chunks"), b"not a directory").unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    assert!(dir.path().join("chunks").is_dir());
    let warnings = cache.take_warnings();
    assert!(
        warnings.len() == 1 && warnings[0].contains("is not a directory"),
        "{warnings:?}"
    );
    // The same one level down, where a chunk's own directory should be.
    let k = KeyBuilder::new("chunk").str("n", "sub").finish();
    let sub = cache.chunk_path(&k).parent().unwrap().to_path_buf();
    std::fs::write(&sub, b"x").unwrap();
    let lock = cache.lock_chunk(&k, &AtomicBool::new(false)).unwrap();
    assert!(lock.is_some() && sub.is_dir());
    assert_eq!(cache.take_warnings().len(), 1);
}

#[test]
fn damage_inside_the_database_is_found_at_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let cache = Cache::open(dir.path()).unwrap();
        for i in 0..20 {
            let mut s = speech(30_000, i);
            let mut x = 1u32 + i as u32;
            for v in &mut s.pcm {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                *v = (x >> 16) as i16;
            }
            cache.put_phrase(key(&i.to_string()), &s).unwrap();
        }
    }
    let db = dir.path().join("cache.sqlite");
    assert!(
        !dir.path().join("cache.sqlite-wal").exists(),
        "checkpointed on close"
    );
    scribble_middle(&db);
    let cache = Cache::open(dir.path()).unwrap();
    let warnings = cache.take_warnings();
    assert!(
        warnings.len() == 1 && warnings[0].contains("damaged"),
        "{warnings:?}"
    );
    assert_eq!(cache.stats().unwrap().phrases, 0, "a fresh database");
    cache.put_phrase(key("new"), &speech(100, 1)).unwrap();
    assert_eq!(cache.get_phrases(&[key("new")]).unwrap().len(), 1);
}

/// Overwrites 16 KiB in the middle of a file with pseudo-random bytes.
fn scribble_middle(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    assert!(bytes.len() > 64 * 1024, "{} bytes", bytes.len());
    let mid = bytes.len() / 2;
    let mut x: u32 = 0x9e37_79b9;
    for b in &mut bytes[mid..mid + 16 * 1024] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    std::fs::write(path, bytes).unwrap();
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

const PORTRAIT: &str = "examples/portrait.png";
/// Small and quick, but with a face large enough to animate.
const SMALL: [&str; 6] = ["--framing", "head", "--size", "128x128", "--fps", "10"];

/// A render into `out` with the cache `cache`; returns its exit code and stderr.
/// `talker render --json` of `script` on one thread at the small size, with `cache`.
fn render_cached(cache: &Path, script: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_talker"))
        .env_remove("RUST_LOG")
        .args(["render", "--json", "--threads", "1", "--cache"])
        .arg(cache)
        .arg("-o")
        .arg(out)
        .arg(script)
        .arg(repo(PORTRAIT))
        .args(SMALL)
        .args(extra)
        .output()
        .unwrap()
}

fn render_with_cache(cache: &Path, script: &Path, out: &Path, extra: &[&str]) -> (i32, String) {
    let o = render_cached(cache, script, out, extra);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The example script with its first sentence made unique by `n`.
fn example_variant(dir: &Path, n: usize) -> PathBuf {
    let text = std::fs::read_to_string(repo("examples/script.json")).unwrap();
    assert!(text.contains("welcome."));
    write_script(
        dir,
        &format!("talk{n}.json"),
        &text.replace("welcome.", &format!("welcome {n}.")),
    )
}

/// The subtitle track as text.
fn subtitles(path: &Path) -> String {
    let o = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-map", "0:s", "-f", "srt", "-"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Decodes every packet; any decoder complaint is an error.
fn decodes_cleanly(path: &Path) -> bool {
    let o = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-f", "null", "-"])
        .output()
        .unwrap();
    o.status.success() && o.stderr.is_empty()
}

#[test]
fn six_concurrent_renders_sharing_chunks_and_a_cache_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let scripts: Vec<PathBuf> = (1..=6).map(|n| example_variant(dir.path(), n)).collect();
    for round in 0..3 {
        // A fresh cache each round, so the shared chunks are written while the others read.
        let cache = dir.path().join(format!("cache{round}"));
        let children: Vec<_> = scripts
            .iter()
            .enumerate()
            .map(|(i, script)| {
                let out = dir.path().join(format!("r{round}-{i}.mp4"));
                let child = Command::new(env!("CARGO_BIN_EXE_talker"))
                    .env_remove("RUST_LOG")
                    .args(["render", "--quiet", "--threads", "1", "--cache"])
                    .arg(&cache)
                    .arg("-o")
                    .arg(&out)
                    .arg(script)
                    .arg(repo(PORTRAIT))
                    .args(SMALL)
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                (out, child)
            })
            .collect();
        for (i, (out, child)) in children.into_iter().enumerate() {
            let o = child.wait_with_output().unwrap();
            assert!(
                o.status.success(),
                "round {round}, render {i}: {:?}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(decodes_cleanly(&out), "round {round}, render {i}");
            let subs = subtitles(&out);
            assert!(
                subs.contains(&format!("welcome {}.", i + 1)),
                "round {round}, render {i} has another render's start:\n{subs}"
            );
            let p = probe(&out);
            let durations: Vec<f64> = p["streams"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["codec_type"] != "subtitle")
                .map(|s| s["duration"].as_str().unwrap().parse().unwrap())
                .collect();
            assert!(
                (durations[0] - durations[1]).abs() < 0.1,
                "round {round}, render {i}: {durations:?}"
            );
        }
        let leftovers: Vec<String> = files_under(&cache)
            .into_iter()
            .filter(|f| f.contains("partial") || f.ends_with(".lock"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

fn chunk_files(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = files_under(cache)
        .into_iter()
        .filter(|f| f.starts_with("chunks/") && f.ends_with(".mkv") && !f.contains("/."))
        .map(|f| cache.join(f))
        .collect();
    v.sort();
    v
}

const TWO_SEGMENTS: &str =
    r#"{"segments":[{"text":"Hello, and welcome."},{"text":"Thank you for watching. Goodbye!"}]}"#;

#[test]
fn flipped_bits_in_a_cached_chunk_and_its_phrases_are_caught_and_rendered_again() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "s.json", TWO_SEGMENTS);
    let cache = dir.path().join("cache");
    let (clean, dirty) = (dir.path().join("clean.mp4"), dir.path().join("dirty.mp4"));
    let (code, err) = render_with_cache(&cache, &script, &clean, &["--deterministic"]);
    assert_eq!(code, 0, "{err}");

    let chunks = chunk_files(&cache);
    assert_eq!(chunks.len(), 2, "{chunks:?}");
    let mut bytes = std::fs::read(&chunks[1]).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x04;
    std::fs::write(&chunks[1], bytes).unwrap();
    // One bit of every phrase's stored FLAC, on disk, past its header (the MD5 in it makes
    // the first 42 bytes unique, so they locate it).
    let db = cache.join("cache.sqlite");
    let o = Command::new("sqlite3")
        .arg(&db)
        .arg("PRAGMA wal_checkpoint(TRUNCATE); SELECT hex(substr(pcm_flac, 1, 42)) FROM phrases;")
        .output()
        .expect("the sqlite3 CLI is needed for this test");
    let heads: Vec<Vec<u8>> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.len() == 84)
        .map(|l| {
            (0..42)
                .map(|i| u8::from_str_radix(&l[2 * i..2 * i + 2], 16).unwrap())
                .collect()
        })
        .collect();
    assert!(heads.len() >= 2, "{}", String::from_utf8_lossy(&o.stdout));
    let mut file = std::fs::read(&db).unwrap();
    for head in &heads {
        let at = file
            .windows(head.len())
            .position(|w| w == &head[..])
            .expect("phrase found in the file");
        file[at + 100] ^= 0x01;
    }
    std::fs::write(&db, file).unwrap();

    let (code, err) = render_with_cache(&cache, &script, &dirty, &["--deterministic"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "cached chunk {} failed its checksum",
            chunks[1].display()
        )),
        "{err}"
    );
    assert!(
        err.contains("cached phrase") && err.contains("failed its checksum"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&clean).unwrap(),
        std::fs::read(&dirty).unwrap(),
        "the output equals a clean render"
    );
}

#[test]
fn random_bytes_inside_the_cache_database_are_found_and_the_cache_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let script = example_variant(dir.path(), 0);
    let cache = dir.path().join("cache");
    let out = dir.path().join("out.mp4");
    let (code, err) = render_with_cache(&cache, &script, &out, &[]);
    assert_eq!(code, 0, "{err}");
    scribble_middle(&cache.join("cache.sqlite"));
    let (code, err) = render_with_cache(&cache, &script, &out, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("damaged") && err.contains("moved it to"),
        "{err}"
    );
    assert!(decodes_cleanly(&out));
    assert!(
        listing(&cache).iter().any(|f| f.contains(".broken-")),
        "{:?}",
        listing(&cache)
    );
    // Repaired once, not on every run: the third render finds everything cached.
    let o = render_cached(&cache, &script, &out, &[]);
    assert_success(&o);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["chunks_reused"], report["chunks"], "{report}");
}

#[test]
fn a_file_where_chunks_should_be_is_moved_aside_and_the_render_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "s.json", TWO_SEGMENTS);
    let cache = dir.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::write(cache.join("chunks"), b"in the way").unwrap();
    let out = dir.path().join("out.mp4");
    let (code, err) = render_with_cache(&cache, &script, &out, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("is not a directory; moved it to"), "{err}");
    assert!(decodes_cleanly(&out));
    assert_eq!(chunk_files(&cache).len(), 2);
}

#[test]
fn identical_chunks_are_rendered_once_per_render() {
    let dir = tempfile::tempdir().unwrap();
    let segments: Vec<String> = (0..30)
        .map(|_| r#"{"text":"Hello again."}"#.to_string())
        .collect();
    let script = write_script(
        dir.path(),
        "s.json",
        &format!(r#"{{"segments":[{}]}}"#, segments.join(",")),
    );
    let cache = dir.path().join("cache");
    let out = dir.path().join("out.mp4");
    let o = render_cached(&cache, &script, &out, &[]);
    assert_success(&o);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rendered = chunk_files(&cache).len() as u64;
    assert_eq!(report["chunks"], 30);
    assert!(
        rendered <= 3,
        "{rendered} distinct chunks for one repeated segment"
    );
    assert_eq!(
        report["chunks_reused"].as_u64().unwrap(),
        30 - rendered,
        "{report}"
    );
    assert_eq!(report["speech"]["synthesized"], 1, "{report}");
    assert_eq!(subtitles(&out).matches("Hello again.").count(), 30);
}

#[test]
fn caches_opened_at_once_on_a_fresh_directory_share_one_database() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let barrier = std::sync::Barrier::new(8);
        let warnings: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let (dir, barrier) = (dir.path(), &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        let cache = Cache::open(dir).unwrap();
                        cache
                            .put_phrase(key(&format!("{round}-{i}")), &speech(100, i))
                            .unwrap();
                        cache.take_warnings()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        assert!(warnings.is_empty(), "round {round}: {warnings:?}");
        let cache = Cache::open(dir.path()).unwrap();
        assert_eq!(cache.stats().unwrap().phrases, 8, "round {round}");
        assert!(
            !listing(dir.path()).iter().any(|f| f.contains("broken")),
            "{:?}",
            listing(dir.path())
        );
    }
}
