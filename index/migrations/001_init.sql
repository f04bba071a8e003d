-- 001_init: the catalog, its users and registries, sessions and activations.
--
-- Times are INTEGER unix nanoseconds in UTC; NULL stands for the zero time.
-- Lists and share configs are JSON text. Tables are STRICT so a wrong type is
-- an error rather than a silent conversion.

CREATE TABLE skills (
    slug            TEXT    NOT NULL PRIMARY KEY CHECK (slug <> ''),
    name            TEXT    NOT NULL,
    description     TEXT    NOT NULL,
    source_type     TEXT    NOT NULL CHECK (source_type IN ('builtin', 'upload', 'remote')),
    source          TEXT    NOT NULL,
    share           TEXT    NOT NULL CHECK (json_valid(share)),
    enabled         INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    skill_deps      TEXT    NOT NULL DEFAULT '[]' CHECK (json_type(skill_deps) = 'array'),
    tool_deps       TEXT    NOT NULL DEFAULT '[]' CHECK (json_type(tool_deps) = 'array'),
    mcp_deps        TEXT    NOT NULL DEFAULT '[]' CHECK (json_type(mcp_deps) = 'array'),
    current_version TEXT    NOT NULL,
    creator         TEXT    NOT NULL,
    created_at      INTEGER,
    updated_at      INTEGER,
    -- The current version must be one of the skill's own versions. Deferred,
    -- because a new skill and its first version are inserted one after the
    -- other in the same transaction.
    FOREIGN KEY (slug, current_version) REFERENCES versions (slug, hash)
        DEFERRABLE INITIALLY DEFERRED
) STRICT;

CREATE TABLE versions (
    seq          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    slug         TEXT    NOT NULL REFERENCES skills (slug) ON DELETE CASCADE,
    hash         TEXT    NOT NULL CHECK (hash <> ''),
    path         TEXT    NOT NULL,
    source_type  TEXT    NOT NULL CHECK (source_type IN ('builtin', 'upload', 'remote')),
    source       TEXT    NOT NULL,
    ref          TEXT    NOT NULL DEFAULT '',
    commit_id    TEXT    NOT NULL DEFAULT '',
    installer    TEXT    NOT NULL,
    installed_at INTEGER,
    previous     TEXT    NOT NULL DEFAULT '',
    files        INTEGER NOT NULL CHECK (files >= 0),
    bytes        INTEGER NOT NULL CHECK (bytes >= 0),
    UNIQUE (slug, hash)
) STRICT;

CREATE TABLE users (
    uid        TEXT NOT NULL PRIMARY KEY CHECK (uid <> ''),
    role       TEXT NOT NULL CHECK (role IN ('superadmin', 'admin', 'user')),
    department TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE tools (
    name TEXT NOT NULL PRIMARY KEY CHECK (name <> '')
) STRICT;

CREATE TABLE mcp_servers (
    name TEXT NOT NULL PRIMARY KEY CHECK (name <> '')
) STRICT;

-- Sessions are closed, never deleted, so their pins and activations stay
-- queryable. uid has no foreign key: deleting a user keeps the history.
CREATE TABLE sessions (
    id         TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
    uid        TEXT    NOT NULL,
    all_skills INTEGER NOT NULL CHECK (all_skills IN (0, 1)),
    requested  TEXT    NOT NULL DEFAULT '[]' CHECK (json_type(requested) = 'array'),
    preload    TEXT    NOT NULL DEFAULT '[]' CHECK (json_type(preload) = 'array'),
    created_at INTEGER,
    closed_at  INTEGER
) STRICT;

CREATE INDEX sessions_open ON sessions (created_at, id) WHERE closed_at IS NULL;

-- The readable set of a session in closure order. slug has no foreign key to
-- skills: DeleteSkill removes the rows itself, and a pin must not stop a
-- skill from being deleted.
CREATE TABLE session_pins (
    session  TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position INTEGER NOT NULL CHECK (position >= 0),
    slug     TEXT    NOT NULL CHECK (slug <> ''),
    version  TEXT    NOT NULL,
    PRIMARY KEY (session, position),
    UNIQUE (session, slug)
) STRICT;

CREATE INDEX session_pins_slug ON session_pins (slug);

-- Targets a session is bound at, so a restarted daemon can re-attach them.
CREATE TABLE session_mounts (
    session TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    target  TEXT NOT NULL CHECK (target <> ''),
    PRIMARY KEY (session, target)
) STRICT;

-- Activation history. slug has no foreign key to skills: deleting a skill
-- keeps the record that a session used it.
CREATE TABLE activations (
    session  TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    slug     TEXT    NOT NULL CHECK (slug <> ''),
    first_at INTEGER NOT NULL,
    last_at  INTEGER NOT NULL,
    opens    INTEGER NOT NULL CHECK (opens >= 0),
    seq      INTEGER NOT NULL,
    PRIMARY KEY (session, slug),
    UNIQUE (session, seq)
) STRICT;
