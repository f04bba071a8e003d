-- 011_hosts: the daemons that serve the catalog (hosts), which host serves
-- each session, which host made each bind, and a change counter for users.
--
-- A host is a data directory serving sessions, named by its store's
-- identity. It registers when it starts and heartbeats while it runs; one
-- whose heartbeat is stale is gone, and its sessions may be moved.

CREATE TABLE hosts (
    id         TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
    name       TEXT    NOT NULL,
    api        TEXT    NOT NULL DEFAULT '',  -- the TCP address its API listens on ('' for none)
    mount      TEXT    NOT NULL DEFAULT '',  -- where its sessions' views are
    started_at INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
) STRICT;

-- Sessions made before hosts were recorded belong to the data directory
-- whose index this is ('' when it has no identity: the first daemon to
-- start takes them).
ALTER TABLE sessions ADD COLUMN host TEXT NOT NULL DEFAULT '';
UPDATE sessions SET host = coalesce((SELECT value FROM meta WHERE key = 'data_directory_id'), '');

CREATE INDEX sessions_host_open ON sessions (host, created_at, id) WHERE closed_at IS NULL;

-- Binds live in the mount namespaces of one machine: each row names the
-- host that made it. A bind is current while its session is open and
-- served by that host; otherwise (the session closed elsewhere, or moved)
-- it is that host's to remove.
CREATE TABLE session_binds_new (
    session TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    target  TEXT    NOT NULL CHECK (target <> ''),
    pid     INTEGER NOT NULL DEFAULT 0 CHECK (pid >= 0),
    ns      TEXT    NOT NULL DEFAULT '',
    host    TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (session, host, pid, target)
) STRICT;

INSERT INTO session_binds_new (session, target, pid, ns, host)
    SELECT b.session, b.target, b.pid, b.ns, s.host FROM session_binds b JOIN sessions s ON s.id = b.session;
DROP TABLE session_binds;
ALTER TABLE session_binds_new RENAME TO session_binds;

CREATE INDEX session_binds_host ON session_binds (host);

-- Counters bumped in the transaction of a change, so that a daemon can
-- tell with one small query whether something its views depend on changed
-- (skills have their own log, skill_changes).
CREATE TABLE change_counters (
    name TEXT    NOT NULL PRIMARY KEY CHECK (name <> ''),
    n    INTEGER NOT NULL
) STRICT;

INSERT INTO change_counters (name, n) VALUES ('users', 0);
