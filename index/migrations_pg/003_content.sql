-- 003_content: the content of published versions, for the hosts that share
-- this index (the PostgreSQL form of the SQLite migration 012_content; see
-- there). A version is named by its tree hash, so its content never changes
-- and any host can fetch it, check it against that name and serve it. Files
-- are stored as chunks of at most index.ChunkSize bytes named by their
-- SHA-256 (hex): no row is huge, a file is read and written a chunk at a
-- time, and a chunk that several files or versions hold is stored once.
--
-- Chunks are bytea, not large objects: a chunk is written in the
-- transaction that stores its version's listing, so a version's content is
-- all there or not at all; pg_dump backs it up as any other column; deleting
-- a row frees its bytes (a large object outlives the row naming it unless
-- someone unlinks it); and chunking already bounds what one value holds
-- (1 MiB, far below bytea's limit), so large objects' streaming buys
-- nothing.
--
-- content_versions has no foreign key to versions: a version's content is
-- stored before the row that names it, so that no host ever sees a version
-- whose content it cannot fetch.

CREATE TABLE content_chunks (
    sum  TEXT   NOT NULL PRIMARY KEY CHECK (length(sum) = 64),
    size BIGINT NOT NULL CHECK (size > 0),
    data BYTEA  NOT NULL CHECK (octet_length(data) = size)
);

-- meta is the version's metadata file (skills.MetaFileName) as published,
-- NULL when it had none.
CREATE TABLE content_versions (
    slug       TEXT   NOT NULL CHECK (slug <> ''),
    hash       TEXT   NOT NULL CHECK (hash <> ''),
    meta       BYTEA,
    created_at BIGINT,
    PRIMARY KEY (slug, hash)
);

-- Every directory and file of a version, seq in the bytewise order of
-- their paths (the order the tree hash takes them in; a text collation
-- need not keep it, so rows are read by seq, never sorted by path). kind:
-- d directory, f file, x executable file. mtime is the time the version
-- shows, unix nanoseconds (NULL: not recorded).
CREATE TABLE content_entries (
    slug  TEXT    NOT NULL,
    hash  TEXT    NOT NULL,
    seq   INTEGER NOT NULL CHECK (seq >= 0),
    path  TEXT    NOT NULL CHECK (path <> ''),
    kind  TEXT    NOT NULL CHECK (kind IN ('d', 'f', 'x')),
    size  BIGINT  NOT NULL CHECK (size >= 0),
    mtime BIGINT,
    PRIMARY KEY (slug, hash, seq),
    UNIQUE (slug, hash, path),
    FOREIGN KEY (slug, hash) REFERENCES content_versions (slug, hash) ON DELETE CASCADE
);

-- The chunks of each file, in order (part 0 first).
CREATE TABLE content_parts (
    slug TEXT    NOT NULL,
    hash TEXT    NOT NULL,
    seq  INTEGER NOT NULL,
    part INTEGER NOT NULL CHECK (part >= 0),
    sum  TEXT    NOT NULL REFERENCES content_chunks (sum),
    PRIMARY KEY (slug, hash, seq, part),
    FOREIGN KEY (slug, hash, seq) REFERENCES content_entries (slug, hash, seq) ON DELETE CASCADE
);

CREATE INDEX content_parts_sum ON content_parts (sum);
