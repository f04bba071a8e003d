-- 016_installs: every install of a skill a session asked for (its agent's
-- install_skill), whatever came of it: when, for which user and session,
-- from what (a path in the sandbox, a git source, an upload), what it
-- became and its outcome ("ok" or the error's code). Kept when the session
-- or the user goes: it is the history the per-user rate counts in.
CREATE TABLE installs (
    id      INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    uid     TEXT    NOT NULL CHECK (uid <> ''),
    session TEXT    NOT NULL CHECK (session <> ''),
    kind    TEXT    NOT NULL CHECK (kind IN ('path', 'git', 'upload')),
    source  TEXT    NOT NULL,
    slug    TEXT    NOT NULL DEFAULT '',
    version TEXT    NOT NULL DEFAULT '',
    outcome TEXT    NOT NULL CHECK (outcome <> ''),
    error   TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX installs_user ON installs (uid, at);
CREATE INDEX installs_session ON installs (session, id);
