-- 002_hosts: the daemons that serve the catalog (hosts), which host serves
-- each session, which host made each bind, and a change counter for users.
-- The PostgreSQL form of migrations/011_hosts.sql.
--
-- A host is a data directory serving sessions, named by its store's
-- identity. It registers when it starts and heartbeats while it runs; one
-- whose heartbeat is stale is gone, and its sessions may be moved. Its
-- heartbeats tell no one (no trigger): they change nothing a view depends on.

CREATE TABLE hosts (
    id         TEXT   COLLATE "C" NOT NULL PRIMARY KEY CHECK (id <> ''),
    name       TEXT   COLLATE "C" NOT NULL,
    api        TEXT   NOT NULL DEFAULT '',  -- the TCP address its API listens on ('' for none)
    mount      TEXT   NOT NULL DEFAULT '',  -- where its sessions' views are
    started_at BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL
);

-- Sessions made before hosts were recorded belong to the data directory
-- whose index this is ('' when it has no identity: the first daemon to
-- start takes them).
ALTER TABLE sessions ADD COLUMN host TEXT COLLATE "C" NOT NULL DEFAULT '';
UPDATE sessions SET host = coalesce((SELECT value FROM meta WHERE key = 'data_directory_id'), '');

CREATE INDEX sessions_host_open ON sessions (host, created_at NULLS FIRST, id) WHERE closed_at IS NULL;

-- A session moved to another host changes what both hosts serve: they are
-- told, as of a session given other pins or closed.
DROP TRIGGER sessions_changed ON sessions;
CREATE TRIGGER sessions_changed AFTER UPDATE ON sessions FOR EACH ROW
    WHEN (OLD.pins IS DISTINCT FROM NEW.pins OR OLD.closed_at IS DISTINCT FROM NEW.closed_at OR OLD.host IS DISTINCT FROM NEW.host)
    EXECUTE FUNCTION table_changed();

-- Binds live in the mount namespaces of one machine: each row names the
-- host that made it. A bind is current while its session is open and
-- served by that host; otherwise (the session closed elsewhere, or moved)
-- it is that host's to remove.
ALTER TABLE session_binds ADD COLUMN host TEXT COLLATE "C" NOT NULL DEFAULT '';
UPDATE session_binds SET host = s.host FROM sessions s WHERE s.id = session_binds.session;
ALTER TABLE session_binds DROP CONSTRAINT session_binds_pkey;
ALTER TABLE session_binds ADD PRIMARY KEY (session, host, pid, target);

CREATE INDEX session_binds_host ON session_binds (host);

-- Counters bumped in the transaction of a change, so that a daemon can
-- tell with one small query whether something its views depend on changed
-- (skills have their own log, skill_changes).
CREATE TABLE change_counters (
    name TEXT   COLLATE "C" NOT NULL PRIMARY KEY CHECK (name <> ''),
    n    BIGINT NOT NULL
);

INSERT INTO change_counters (name, n) VALUES ('users', 0);
