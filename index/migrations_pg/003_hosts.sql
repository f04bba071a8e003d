-- 003_hosts: the daemons that serve the catalog (hosts), which host serves
-- each session, which host made each bind, and a change counter for users.
-- The PostgreSQL form of migrations/011_hosts.sql: times are BIGINT unix
-- nanoseconds, ids TEXT.
--
-- A host is a data directory serving sessions, named by its store's
-- identity. It registers when it starts and heartbeats while it runs; one
-- whose heartbeat is stale is gone, and its sessions may be moved.

CREATE TABLE hosts (
    id         TEXT   NOT NULL PRIMARY KEY CHECK (id <> ''),
    name       TEXT   NOT NULL,
    api        TEXT   NOT NULL DEFAULT '',  -- the TCP address its API listens on ('' for none)
    mount      TEXT   NOT NULL DEFAULT '',  -- where its sessions' views are
    started_at BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL
);

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
ALTER TABLE session_binds ADD COLUMN host TEXT NOT NULL DEFAULT '';
UPDATE session_binds SET host = s.host FROM sessions s WHERE s.id = session_binds.session;
ALTER TABLE session_binds DROP CONSTRAINT session_binds_pkey;
ALTER TABLE session_binds ADD PRIMARY KEY (session, host, pid, target);

CREATE INDEX session_binds_host ON session_binds (host);

-- Counters bumped in the transaction of a change, so that a daemon can
-- tell with one small query whether something its views depend on changed
-- (skills have their own log, skill_changes).
CREATE TABLE change_counters (
    name TEXT   NOT NULL PRIMARY KEY CHECK (name <> ''),
    n    BIGINT NOT NULL
);

INSERT INTO change_counters (name, n) VALUES ('users', 0);
