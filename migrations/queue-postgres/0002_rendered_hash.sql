-- The content hash of what the successful attempt rendered: the worker hashes the inputs again
-- around its render (they may have changed since enqueue), and `talker batch` calls a spec up to
-- date only when this matches. Jobs that succeeded before this column existed have none, so
-- batch renders them once more (mostly from the cache).
ALTER TABLE jobs ADD COLUMN rendered_hash TEXT;
CREATE INDEX jobs_rendered ON jobs (rendered_hash) WHERE state = 'succeeded';
-- One live job per output (checked at enqueue and retry): two would overwrite each other.
CREATE INDEX jobs_live_output ON jobs (output) WHERE state IN ('queued', 'running');
