-- 018_open_sessions_user: the open sessions of a user, counted at every
-- create against the cap of open sessions per user (see checkCaps) without
-- reading every open session's row.
CREATE INDEX sessions_open_user ON sessions (uid) WHERE closed_at IS NULL;
