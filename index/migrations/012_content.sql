-- 012_content: the content of published versions, for the hosts that share
-- this index. A version is named by its tree hash, so its content never
-- changes and any host can fetch it, check it against that name and serve
-- it. Files are stored as chunks of at most index.ChunkSize bytes named by
-- their SHA-256 (hex): no row is huge, a file is read and written a chunk at
-- a time, and a chunk that several files or versions hold is stored once.
--
-- content_versions has no foreign key to versions: a version's content is
-- stored before the row that names it, so that no host ever sees a version
-- whose content it cannot fetch. Content stays when its version goes;
-- chunks are never changed (their name is their bytes).

CREATE TABLE content_chunks (
    sum  TEXT    NOT NULL PRIMARY KEY CHECK (length(sum) = 64),
    size INTEGER NOT NULL CHECK (size > 0),
    data BLOB    NOT NULL CHECK (length(data) = size)
) STRICT;

-- meta is the version's metadata file (skills.MetaFileName) as published,
-- NULL when it had none.
CREATE TABLE content_versions (
    slug       TEXT    NOT NULL CHECK (slug <> ''),
    hash       TEXT    NOT NULL CHECK (hash <> ''),
    meta       BLOB,
    created_at INTEGER,
    PRIMARY KEY (slug, hash)
) STRICT;

-- Every directory and file of a version, seq in the bytewise order of
-- their paths (the order the tree hash takes them in, which a collation
-- need not keep). kind: d directory, f file, x executable file. mtime is
-- the time the version shows, unix nanoseconds (NULL: not recorded).
CREATE TABLE content_entries (
    slug  TEXT    NOT NULL,
    hash  TEXT    NOT NULL,
    seq   INTEGER NOT NULL CHECK (seq >= 0),
    path  TEXT    NOT NULL CHECK (path <> ''),
    kind  TEXT    NOT NULL CHECK (kind IN ('d', 'f', 'x')),
    size  INTEGER NOT NULL CHECK (size >= 0),
    mtime INTEGER,
    PRIMARY KEY (slug, hash, seq),
    UNIQUE (slug, hash, path),
    FOREIGN KEY (slug, hash) REFERENCES content_versions (slug, hash) ON DELETE CASCADE
) STRICT;

-- The chunks of each file, in order (part 0 first).
CREATE TABLE content_parts (
    slug TEXT    NOT NULL,
    hash TEXT    NOT NULL,
    seq  INTEGER NOT NULL,
    part INTEGER NOT NULL CHECK (part >= 0),
    sum  TEXT    NOT NULL REFERENCES content_chunks (sum),
    PRIMARY KEY (slug, hash, seq, part),
    FOREIGN KEY (slug, hash, seq) REFERENCES content_entries (slug, hash, seq) ON DELETE CASCADE
) STRICT;

CREATE INDEX content_parts_sum ON content_parts (sum);
