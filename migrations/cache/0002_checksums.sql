-- A sha256 with every entry, checked on reuse: phrases over their stored fields, chunks over the
-- file's bytes. Rows written before this have none and are made again on first use.
ALTER TABLE phrases ADD COLUMN sha256 BLOB;
ALTER TABLE chunks ADD COLUMN sha256 BLOB;
