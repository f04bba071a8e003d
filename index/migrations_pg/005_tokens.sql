-- 005_tokens: the SQLite index's 014_tokens (see there): session tokens
-- and named platform tokens, each kept as the SHA-256 (hex) of its text.
-- No trigger tells the hosts of a change: a credential changes no view.
CREATE TABLE session_tokens (
    session    TEXT   COLLATE "C" NOT NULL PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    hash       TEXT   COLLATE "C" NOT NULL UNIQUE CHECK (length(hash) = 64),
    host       TEXT   COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE api_tokens (
    name       TEXT   COLLATE "C" NOT NULL PRIMARY KEY CHECK (name <> ''),
    role       TEXT   COLLATE "C" NOT NULL CHECK (role IN ('operator', 'reader')),
    hash       TEXT   COLLATE "C" NOT NULL UNIQUE CHECK (length(hash) = 64),
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT
);
