-- 014_tokens: the API's credentials besides the socket and the listener's
-- own token. Each is kept as the SHA-256 (hex) of its text, never the text:
-- the index, its backups and its logs cannot give a credential away.
--
-- A session has at most one token (rotating replaces it). It works while
-- its session is open and served by the host that made it: a session
-- closed or moved to another host leaves its token dead, and the close or
-- move deletes it in the same transaction.
CREATE TABLE session_tokens (
    session    TEXT    NOT NULL PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    hash       TEXT    NOT NULL UNIQUE CHECK (length(hash) = 64),
    host       TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

-- Named platform tokens, each with a role: operator (everything) or
-- reader (sessions, activations, events, the catalog's listing). One works
-- until it expires (expires_at, unix nanoseconds; NULL: never) or is
-- revoked (revoked_at); its row stays, listed, until its name is given to
-- a new token.
CREATE TABLE api_tokens (
    name       TEXT    NOT NULL PRIMARY KEY CHECK (name <> ''),
    role       TEXT    NOT NULL CHECK (role IN ('operator', 'reader')),
    hash       TEXT    NOT NULL UNIQUE CHECK (length(hash) = 64),
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
) STRICT;
