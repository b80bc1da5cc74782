-- Job queue for talker enqueue/batch/worker (PostgreSQL). Same columns and meaning as
-- migrations/queue-sqlite; times are unix milliseconds from the database's clock.
CREATE TABLE jobs (
    id               BIGSERIAL PRIMARY KEY,              -- a sequence: ids are never reused
    content_hash     TEXT    NOT NULL,                   -- sha256, see src/queue/spec.rs
    spec             TEXT    NOT NULL,                   -- the resolved job (JSON)
    source           TEXT    NOT NULL,                   -- the spec file it came from
    output           TEXT    NOT NULL,                   -- absolute output path, for status
    priority         BIGINT  NOT NULL DEFAULT 0,         -- higher runs first
    state            TEXT    NOT NULL
                     CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    attempts         BIGINT  NOT NULL DEFAULT 0,         -- attempts started (released ones excluded)
    max_attempts     BIGINT  NOT NULL CHECK (max_attempts >= 1),
    run_at           BIGINT  NOT NULL,                   -- not claimed before (retry backoff)
    lease_token      TEXT,                               -- the current claim; NULL unless running
    lease_owner      TEXT,                               -- host:pid of the worker holding it
    lease_expires_at BIGINT,
    reclaims         BIGINT  NOT NULL DEFAULT 0,         -- expired leases taken back
    last_error       TEXT,
    result           TEXT,                               -- the render report (JSON) on success
    created_at       BIGINT  NOT NULL,
    started_at       BIGINT,
    finished_at      BIGINT
);
-- One live job per content: enqueueing the same content while queued or running returns it.
CREATE UNIQUE INDEX jobs_live_content ON jobs (content_hash) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_claim_order ON jobs (priority DESC, run_at, id) WHERE state = 'queued';
CREATE INDEX jobs_leases ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_content ON jobs (content_hash, state);

-- Every claim, for `talker status ID` and to prove that no job was rendered to completion twice.
CREATE TABLE attempts (
    lease_token TEXT    PRIMARY KEY,
    job_id      BIGINT  NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt     BIGINT  NOT NULL,
    worker      TEXT    NOT NULL,
    started_at  BIGINT  NOT NULL,
    rendered_at BIGINT,                                  -- the render returned a finished video
    finished_at BIGINT,
    outcome     TEXT CHECK (outcome IN ('succeeded', 'retry', 'failed', 'released', 'expired', 'cancelled', 'lost')),
    error       TEXT
);
CREATE INDEX attempts_job ON attempts (job_id);
