-- 009_curated: sources an operator registered as curated (the recommended
-- list), and the skills each held when last refreshed. Their content is not
-- kept: installing one reads its source again, as any import does.

CREATE TABLE curated_sources (
    source       TEXT    NOT NULL PRIMARY KEY CHECK (source <> ''),
    ref          TEXT    NOT NULL DEFAULT '',
    added_by     TEXT    NOT NULL,
    added_at     INTEGER NOT NULL,
    commit_seen  TEXT    NOT NULL DEFAULT '',  -- the commit the last refresh read ('' for a plain folder or archive)
    refreshed_at INTEGER,                      -- the last refresh that succeeded
    error        TEXT    NOT NULL DEFAULT ''   -- why the last refresh failed ('' when it did not)
) STRICT;

CREATE TABLE curated_skills (
    source       TEXT    NOT NULL REFERENCES curated_sources (source) ON DELETE CASCADE,
    path         TEXT    NOT NULL,             -- its folder in the source, '.' for the root
    slug         TEXT    NOT NULL CHECK (slug <> ''),
    name         TEXT    NOT NULL,
    description  TEXT    NOT NULL,
    origin       TEXT    NOT NULL,             -- the provenance an install records: installed = a skill with this source
    commit_seen  TEXT    NOT NULL DEFAULT '',
    refreshed_at INTEGER NOT NULL,
    PRIMARY KEY (source, path)
) STRICT;

CREATE INDEX curated_skills_slug ON curated_skills (slug);
