-- 009_open_sessions_user: the SQLite index's 018_open_sessions_user (see
-- there): the open sessions of a user, counted at every create.
CREATE INDEX sessions_open_user ON sessions (uid) WHERE closed_at IS NULL;
