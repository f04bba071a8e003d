-- 007_installs: the SQLite index's 016_installs (see there): every install
-- of a skill a session asked for, whatever came of it.
CREATE TABLE installs (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      BIGINT NOT NULL,
    uid     TEXT   COLLATE "C" NOT NULL CHECK (uid <> ''),
    session TEXT   COLLATE "C" NOT NULL CHECK (session <> ''),
    kind    TEXT   NOT NULL CHECK (kind IN ('path', 'git', 'upload')),
    source  TEXT   NOT NULL,
    slug    TEXT   NOT NULL DEFAULT '',
    version TEXT   NOT NULL DEFAULT '',
    outcome TEXT   NOT NULL CHECK (outcome <> ''),
    error   TEXT   NOT NULL DEFAULT ''
);

CREATE INDEX installs_user ON installs (uid, at);
CREATE INDEX installs_session ON installs (session, id);
