-- 010_version_diffstats: the diffstat of a version against the version
-- before it (against), computed once, when the versions are first listed,
-- instead of on every listing. Versions are immutable, so a row never goes
-- stale; it goes with either version. stat is skills.DiffStat as JSON.

CREATE TABLE version_diffstats (
    slug    TEXT NOT NULL,
    hash    TEXT NOT NULL,
    against TEXT NOT NULL,
    stat    TEXT NOT NULL CHECK (json_type(stat) = 'object'),
    PRIMARY KEY (slug, hash, against),
    FOREIGN KEY (slug, hash) REFERENCES versions (slug, hash) ON DELETE CASCADE,
    FOREIGN KEY (slug, against) REFERENCES versions (slug, hash) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

CREATE INDEX version_diffstats_against ON version_diffstats (slug, against);
