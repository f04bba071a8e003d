-- 008_read_audit: which files of which skills each session read, when it
-- first did, and how many reads of each reached the filesystem daemon
-- (reads the kernel serves from its page cache never do). Counts arrive in
-- batches: reads += the batch, first_at = the earlier of the two.

CREATE TABLE read_audit (
    session  TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    slug     TEXT    NOT NULL CHECK (slug <> ''),
    path     TEXT    NOT NULL CHECK (path <> ''),
    first_at INTEGER NOT NULL,
    reads    INTEGER NOT NULL CHECK (reads >= 0),
    PRIMARY KEY (session, slug, path)
) STRICT, WITHOUT ROWID;
