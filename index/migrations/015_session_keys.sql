-- 015_session_keys: what a tool loader finds a session by, and sub-agents.
--
-- client_key is the client's key of a session (a thread id), '' for none;
-- among the open sessions of one user and one parent ('' for top-level
-- sessions) a key names at most one: a retried create answers the open
-- session. Closing a session frees its key. labels is a JSON object of the
-- client's labels (string values). parent is the session a sub-agent
-- session belongs to ('' for a top-level session).
ALTER TABLE sessions ADD COLUMN client_key TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN labels TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(labels) AND json_type(labels) = 'object');
ALTER TABLE sessions ADD COLUMN parent TEXT NOT NULL DEFAULT '';

CREATE UNIQUE INDEX sessions_open_key ON sessions (uid, parent, client_key) WHERE closed_at IS NULL AND client_key <> '';
CREATE INDEX sessions_open_children ON sessions (parent) WHERE closed_at IS NULL AND parent <> '';

-- An event of a sub-agent session names its parent too, so the parent's
-- stream replays it (set when the event is stored).
ALTER TABLE events ADD COLUMN parent TEXT NOT NULL DEFAULT '';
