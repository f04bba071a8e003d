-- Binds may live in another process's mount namespace (a sandbox): record
-- the process and the namespace's identity next to the target.
CREATE TABLE session_binds (
    session TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    target  TEXT    NOT NULL CHECK (target <> ''),
    pid     INTEGER NOT NULL DEFAULT 0 CHECK (pid >= 0),
    ns      TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (session, pid, target)
) STRICT;

INSERT INTO session_binds (session, target) SELECT session, target FROM session_mounts;
DROP TABLE session_mounts;
