-- 001_init: the index on PostgreSQL, as the SQLite index stands after its
-- migrations 001-010 (index/migrations): the same tables, columns, keys and
-- checks, written natively. Later changes to the schema are a migration in
-- each set.
--
-- Times are BIGINT unix nanoseconds in UTC; NULL stands for the zero time.
-- Lists, share configs and payloads are JSON text, checked to be JSON of
-- the right kind. Text that is ordered or compared as a key is COLLATE "C":
-- byte order, as SQLite and the program order it, whatever the database's
-- own collation. Numbers SQLite gives by AUTOINCREMENT come from identity
-- sequences, which never give a number twice either (a transaction rolled
-- back leaves a gap).

CREATE TABLE skills (
    slug            TEXT    COLLATE "C" NOT NULL PRIMARY KEY CHECK (slug <> ''),
    name            TEXT    NOT NULL,
    description     TEXT    NOT NULL,
    source_type     TEXT    NOT NULL CHECK (source_type IN ('builtin', 'upload', 'remote')),
    source          TEXT    NOT NULL,
    share           TEXT    NOT NULL CHECK (CAST(share AS json) IS NOT NULL),
    enabled         BOOLEAN NOT NULL,
    skill_deps      TEXT    NOT NULL DEFAULT '[]' CHECK (json_typeof(CAST(skill_deps AS json)) = 'array'),
    tool_deps       TEXT    NOT NULL DEFAULT '[]' CHECK (json_typeof(CAST(tool_deps AS json)) = 'array'),
    mcp_deps        TEXT    NOT NULL DEFAULT '[]' CHECK (json_typeof(CAST(mcp_deps AS json)) = 'array'),
    current_version TEXT    COLLATE "C" NOT NULL,
    creator         TEXT    NOT NULL,
    created_at      BIGINT,
    updated_at      BIGINT,
    plugin          TEXT    NOT NULL DEFAULT ''
);

CREATE TABLE versions (
    seq          BIGINT  GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME versions_seq) PRIMARY KEY,
    slug         TEXT    COLLATE "C" NOT NULL REFERENCES skills (slug) ON DELETE CASCADE,
    hash         TEXT    COLLATE "C" NOT NULL CHECK (hash <> ''),
    path         TEXT    NOT NULL,
    source_type  TEXT    NOT NULL CHECK (source_type IN ('builtin', 'upload', 'remote')),
    source       TEXT    NOT NULL,
    ref          TEXT    NOT NULL DEFAULT '',
    commit_id    TEXT    NOT NULL DEFAULT '',
    installer    TEXT    NOT NULL,
    installed_at BIGINT,
    previous     TEXT    NOT NULL DEFAULT '',
    files        BIGINT  NOT NULL CHECK (files >= 0),
    bytes        BIGINT  NOT NULL CHECK (bytes >= 0),
    worktree     TEXT    NOT NULL DEFAULT '' CHECK (worktree IN ('', 'clean', 'modified')),
    UNIQUE (slug, hash)
);

-- The current version must be one of the skill's own versions. Deferred,
-- because a new skill and its first version are inserted one after the
-- other in the same transaction.
ALTER TABLE skills ADD FOREIGN KEY (slug, current_version) REFERENCES versions (slug, hash)
    DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE users (
    uid        TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (uid <> ''),
    role       TEXT NOT NULL CHECK (role IN ('superadmin', 'admin', 'user')),
    department TEXT NOT NULL DEFAULT ''
);

CREATE TABLE tools (
    name TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (name <> '')
);

CREATE TABLE mcp_servers (
    name TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (name <> '')
);

-- Sessions are closed, never deleted, so their pins and activations stay
-- queryable. uid has no foreign key: deleting a user keeps the history.
-- pins is the readable set in closure order, a JSON list of
-- [slug, version].
CREATE TABLE sessions (
    id         TEXT    COLLATE "C" NOT NULL PRIMARY KEY CHECK (id <> ''),
    uid        TEXT    COLLATE "C" NOT NULL,
    all_skills BOOLEAN NOT NULL,
    requested  TEXT    NOT NULL DEFAULT '[]' CHECK (json_typeof(CAST(requested AS json)) = 'array'),
    preload    TEXT    NOT NULL DEFAULT '[]' CHECK (json_typeof(CAST(preload AS json)) = 'array'),
    created_at BIGINT,
    closed_at  BIGINT,
    pins       TEXT    NOT NULL DEFAULT '[]'
);

-- In the order sessions are listed: NULL (no creation time) first, as
-- SQLite sorts it.
CREATE INDEX sessions_open ON sessions (created_at NULLS FIRST, id) WHERE closed_at IS NULL;

-- Binds may live in another process's mount namespace (a sandbox): the
-- process and the namespace's identity are recorded next to the target.
CREATE TABLE session_binds (
    session TEXT   COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    target  TEXT   COLLATE "C" NOT NULL CHECK (target <> ''),
    pid     BIGINT NOT NULL DEFAULT 0 CHECK (pid >= 0),
    ns      TEXT   NOT NULL DEFAULT '',
    PRIMARY KEY (session, pid, target)
);

-- Activation history. slug has no foreign key to skills: deleting a skill
-- keeps the record that a session used it.
CREATE TABLE activations (
    session  TEXT   COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    slug     TEXT   COLLATE "C" NOT NULL CHECK (slug <> ''),
    first_at BIGINT NOT NULL,
    last_at  BIGINT NOT NULL,
    opens    BIGINT NOT NULL CHECK (opens >= 0),
    seq      BIGINT NOT NULL,
    PRIMARY KEY (session, slug),
    UNIQUE (session, seq)
);

CREATE TABLE meta (
    key   TEXT COLLATE "C" NOT NULL PRIMARY KEY CHECK (key <> ''),
    value TEXT NOT NULL
);

CREATE TABLE applied_spills (
    id         TEXT   COLLATE "C" NOT NULL PRIMARY KEY CHECK (id <> ''),
    applied_at BIGINT NOT NULL
);

-- Which skills changed, so a process can keep the catalog in memory and
-- re-read only the rows another writer (any host) changed since it last
-- looked. Each slug keeps its latest change only: seq grows with every
-- insert, update or delete of its row, and a deleted skill's entry stays
-- behind as the note that it is gone. Writes take turns (the index's write
-- lock), so seq grows in the order of commits.
CREATE TABLE skill_changes (
    seq  BIGINT GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME skill_changes_seq) PRIMARY KEY,
    slug TEXT   COLLATE "C" NOT NULL UNIQUE
);

-- skill_changed logs a change of a skills row and tells the hosts
-- listening on skillfs_changes (notifications are sent at commit, and once
-- per transaction however many rows changed).
CREATE FUNCTION skill_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO skill_changes (slug) VALUES (OLD.slug) ON CONFLICT (slug) DO UPDATE SET seq = DEFAULT;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO skill_changes (slug) VALUES (NEW.slug) ON CONFLICT (slug) DO UPDATE SET seq = DEFAULT;
    END IF;
    PERFORM pg_notify('skillfs_changes', 'skills');
    RETURN NULL;
END
$$;

CREATE TRIGGER skills_changed_insert AFTER INSERT ON skills FOR EACH ROW EXECUTE FUNCTION skill_changed();
CREATE TRIGGER skills_changed_update AFTER UPDATE ON skills FOR EACH ROW EXECUTE FUNCTION skill_changed();
CREATE TRIGGER skills_changed_delete AFTER DELETE ON skills FOR EACH ROW EXECUTE FUNCTION skill_changed();

-- table_changed tells the hosts listening on skillfs_changes that the
-- table it fired on changed: users and registries, which decide what a
-- session may read, and sessions, whose readable sets a host serves.
CREATE FUNCTION table_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('skillfs_changes', TG_TABLE_NAME);
    RETURN NULL;
END
$$;

CREATE TRIGGER users_changed AFTER INSERT OR UPDATE OR DELETE ON users FOR EACH STATEMENT EXECUTE FUNCTION table_changed();
CREATE TRIGGER tools_changed AFTER INSERT OR UPDATE OR DELETE ON tools FOR EACH STATEMENT EXECUTE FUNCTION table_changed();
CREATE TRIGGER mcp_servers_changed AFTER INSERT OR UPDATE OR DELETE ON mcp_servers FOR EACH STATEMENT EXECUTE FUNCTION table_changed();
CREATE TRIGGER sessions_created AFTER INSERT ON sessions FOR EACH ROW EXECUTE FUNCTION table_changed();
CREATE TRIGGER sessions_changed AFTER UPDATE ON sessions FOR EACH ROW
    WHEN (OLD.pins IS DISTINCT FROM NEW.pins OR OLD.closed_at IS DISTINCT FROM NEW.closed_at)
    EXECUTE FUNCTION table_changed();

-- The log the event streams replay from: every event a daemon publishes is
-- written here first, in the transaction of the change it reports where
-- there is one. Ids come from a sequence and writes take turns, so ids grow
-- in the order of commits on every host; a client that saw id N asks for
-- what follows it. payload is a JSON object of the fields of the event's
-- type.
CREATE TABLE events (
    id      BIGINT GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME events_id_seq) PRIMARY KEY,
    at      BIGINT NOT NULL,
    type    TEXT   NOT NULL CHECK (type <> ''),
    session TEXT   COLLATE "C" NOT NULL,
    slug    TEXT   NOT NULL DEFAULT '',
    payload TEXT   NOT NULL DEFAULT '{}' CHECK (json_typeof(CAST(payload AS json)) = 'object')
);

-- Which files of which skills each session read, when it first did, and
-- how many reads of each reached the filesystem daemon.
CREATE TABLE read_audit (
    session  TEXT   COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    slug     TEXT   COLLATE "C" NOT NULL CHECK (slug <> ''),
    path     TEXT   COLLATE "C" NOT NULL CHECK (path <> ''),
    first_at BIGINT NOT NULL,
    reads    BIGINT NOT NULL CHECK (reads >= 0),
    PRIMARY KEY (session, slug, path)
);

-- Sources an operator registered as curated, and the skills each held when
-- last refreshed.
CREATE TABLE curated_sources (
    source       TEXT   COLLATE "C" NOT NULL PRIMARY KEY CHECK (source <> ''),
    ref          TEXT   NOT NULL DEFAULT '',
    added_by     TEXT   NOT NULL,
    added_at     BIGINT NOT NULL,
    commit_seen  TEXT   NOT NULL DEFAULT '',  -- the commit the last refresh read ('' for a plain folder or archive)
    refreshed_at BIGINT,                      -- the last refresh that succeeded
    error        TEXT   NOT NULL DEFAULT ''   -- why the last refresh failed ('' when it did not)
);

CREATE TABLE curated_skills (
    source       TEXT   COLLATE "C" NOT NULL REFERENCES curated_sources (source) ON DELETE CASCADE,
    path         TEXT   COLLATE "C" NOT NULL,             -- its folder in the source, '.' for the root
    slug         TEXT   COLLATE "C" NOT NULL CHECK (slug <> ''),
    name         TEXT   NOT NULL,
    description  TEXT   NOT NULL,
    origin       TEXT   NOT NULL,             -- the provenance an install records: installed = a skill with this source
    commit_seen  TEXT   NOT NULL DEFAULT '',
    refreshed_at BIGINT NOT NULL,
    PRIMARY KEY (source, path)
);

CREATE INDEX curated_skills_slug ON curated_skills (slug);

-- The diffstat of a version against the version before it, computed once.
-- stat is skills.DiffStat as JSON.
CREATE TABLE version_diffstats (
    slug    TEXT COLLATE "C" NOT NULL,
    hash    TEXT COLLATE "C" NOT NULL,
    against TEXT COLLATE "C" NOT NULL,
    stat    TEXT NOT NULL CHECK (json_typeof(CAST(stat AS json)) = 'object'),
    PRIMARY KEY (slug, hash, against),
    FOREIGN KEY (slug, hash) REFERENCES versions (slug, hash) ON DELETE CASCADE,
    FOREIGN KEY (slug, against) REFERENCES versions (slug, hash) ON DELETE CASCADE
);

CREATE INDEX version_diffstats_against ON version_diffstats (slug, against);
