-- 006_session_keys: the SQLite index's 015_session_keys (see there): a
-- session's client key (unique among the open sessions of one user and
-- parent), its labels, its parent, and the parent of an event's session.
ALTER TABLE sessions ADD COLUMN client_key TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN labels TEXT NOT NULL DEFAULT '{}' CHECK (json_typeof(CAST(labels AS json)) = 'object');
ALTER TABLE sessions ADD COLUMN parent TEXT COLLATE "C" NOT NULL DEFAULT '';

CREATE UNIQUE INDEX sessions_open_key ON sessions (uid, parent, client_key) WHERE closed_at IS NULL AND client_key <> '';
CREATE INDEX sessions_open_children ON sessions (parent) WHERE closed_at IS NULL AND parent <> '';

ALTER TABLE events ADD COLUMN parent TEXT COLLATE "C" NOT NULL DEFAULT '';
