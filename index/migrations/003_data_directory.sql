-- 003_data_directory: the index names content by slug and hash only, so a
-- data directory can be moved, copied or reached through a symlink; it
-- records the identity of the data directory it belongs to; and it remembers
-- which activation spill files it has applied, so each is counted once.

-- Paths were absolute; they become relative to the data directory.
UPDATE versions SET path = 'store/skills/' || slug || '/' || hash;

CREATE TABLE meta (
    key   TEXT NOT NULL PRIMARY KEY CHECK (key <> ''),
    value TEXT NOT NULL
) STRICT;

CREATE TABLE applied_spills (
    id         TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
    applied_at INTEGER NOT NULL
) STRICT;
