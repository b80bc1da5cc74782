-- Phrase cache: synthesised speech keyed by everything that changes it.
CREATE TABLE phrases (
    key         BLOB PRIMARY KEY,     -- sha256, see src/cache/key.rs
    sample_rate INTEGER NOT NULL,
    samples     INTEGER NOT NULL,
    pcm_flac    BLOB    NOT NULL,     -- 16-bit mono PCM, FLAC-compressed (lossless)
    phones      TEXT    NOT NULL,     -- JSON [[symbol, start, end], ...] in samples
    bytes       INTEGER NOT NULL,     -- stored size, for gc
    created_at  INTEGER NOT NULL,     -- unix seconds
    used_at     INTEGER NOT NULL      -- unix seconds, for least-recently-used gc
) WITHOUT ROWID;
CREATE INDEX phrases_used_at ON phrases (used_at);

-- Finished video chunks (one stretch of a segment), stored as files beside the database.
CREATE TABLE chunks (
    key        BLOB PRIMARY KEY,
    file       TEXT    NOT NULL,      -- relative to the cache directory
    frames     INTEGER NOT NULL,
    samples    INTEGER NOT NULL,
    meta       TEXT    NOT NULL,      -- JSON: sentence spans inside the chunk
    bytes      INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    used_at    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX chunks_used_at ON chunks (used_at);

-- Lifetime hit/miss counters for `talker cache stats`.
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO counters (name, value) VALUES ('phrase_hits', 0), ('phrase_misses', 0), ('chunk_hits', 0), ('chunk_misses', 0);
