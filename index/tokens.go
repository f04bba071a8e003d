package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"skillfs/skills"
)

// The API's credentials are kept by hash (the hex SHA-256 of a token's
// text, which the daemon computes): this package never sees a token.

// checkHash refuses what is not a hex SHA-256.
func checkHash(hash string) error {
	if len(hash) != 64 {
		return fmt.Errorf("token hash: want 64 hex digits, got %d characters: %w", len(hash), skills.ErrInvalid)
	}
	for _, c := range hash {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("token hash: want lowercase hex digits: %w", skills.ErrInvalid)
		}
	}
	return nil
}

// SetSessionToken makes hash the token of open session id, made by host,
// which must be the host serving it: the token it had before, if any, no
// longer works. An unknown session is skills.ErrNotFound, a closed one
// skills.ErrInvalid, one another host serves skills.ErrElsewhere.
func (db *DB) SetSessionToken(ctx context.Context, id, host, hash string, at time.Time) error {
	wrap := func(err error) error { return fmt.Errorf("set the token of session %q: %w", id, err) }
	if err := checkHash(hash); err != nil {
		return wrap(err)
	}
	n, err := activationTime(at)
	if err != nil {
		return wrap(err)
	}
	err = db.write(ctx, func(tx *txn) error {
		if err := servedBy(ctx, tx, id, host); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO session_tokens (session, hash, host, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (session) DO UPDATE SET hash = excluded.hash, host = excluded.host, created_at = excluded.created_at`,
			id, hash, host, n)
		return err
	})
	if err != nil {
		return wrap(err)
	}
	return nil
}

// TokenSession is the session whose token has hash: open and served by the
// host that made the token. Any other hash — unknown, replaced, of a
// session closed or moved — is skills.ErrNotFound.
func (db *DB) TokenSession(ctx context.Context, hash string) (string, error) {
	var id string
	err := db.read(ctx, func(tx *txn) error {
		err := tx.QueryRowContext(ctx, `SELECT t.session FROM session_tokens t JOIN sessions s ON s.id = t.session
			WHERE t.hash = ? AND s.closed_at IS NULL AND s.host = t.host`, hash).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return skills.ErrNotFound
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("session token: %w", err)
	}
	return id, nil
}

// dropSessionToken deletes the token of session id in tx: its session
// closes or moves.
func dropSessionToken(ctx context.Context, tx *txn, id string) error {
	_, err := tx.ExecContext(ctx, "DELETE FROM session_tokens WHERE session = ?", id)
	return err
}

// APIToken is a named platform token as the index keeps it.
type APIToken struct {
	Name      string
	Role      string // "operator" or "reader"
	Hash      string // the hex SHA-256 of the token
	CreatedAt time.Time
	ExpiresAt time.Time // zero: never
	RevokedAt time.Time // zero: not revoked
}

// Live says whether t works at time now: neither revoked nor expired.
func (t APIToken) Live(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

const apiTokenColumns = "name, role, hash, created_at, expires_at, revoked_at"

func scanAPIToken(sc scanner) (APIToken, error) {
	var t APIToken
	var created, expires, revoked sql.NullInt64
	err := sc.Scan(&t.Name, &t.Role, &t.Hash, &created, &expires, &revoked)
	t.CreatedAt, t.ExpiresAt, t.RevokedAt = decodeTime(created), decodeTime(expires), decodeTime(revoked)
	return t, err
}

// AddAPIToken stores platform token t, made at t.CreatedAt. A name whose
// token still works at that time is skills.ErrExists; one whose token was
// revoked or expired is given to t.
func (db *DB) AddAPIToken(ctx context.Context, t APIToken) error {
	wrap := func(err error) error { return fmt.Errorf("add token %q: %w", t.Name, err) }
	if t.Name == "" {
		return wrap(fmt.Errorf("empty name: %w", skills.ErrInvalid))
	}
	if err := checkHash(t.Hash); err != nil {
		return wrap(err)
	}
	created, err := activationTime(t.CreatedAt)
	if err != nil {
		return wrap(err)
	}
	expires, err := encodeTime(t.ExpiresAt)
	if err != nil {
		return wrap(err)
	}
	err = db.write(ctx, func(tx *txn) error {
		old, err := scanAPIToken(tx.QueryRowContext(ctx, "SELECT "+apiTokenColumns+" FROM api_tokens WHERE name = ?", t.Name))
		switch {
		case err == nil && old.Live(t.CreatedAt):
			return fmt.Errorf("a token of that name works until it is revoked or expires: %w", skills.ErrExists)
		case err == nil:
			if _, err := tx.ExecContext(ctx, "DELETE FROM api_tokens WHERE name = ?", t.Name); err != nil {
				return err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO api_tokens ("+apiTokenColumns+") VALUES (?, ?, ?, ?, ?, NULL)",
			t.Name, t.Role, t.Hash, created, expires)
		return err
	})
	if err != nil {
		return wrap(err)
	}
	return nil
}

// APITokenByHash is the platform token whose hash is hash, when it works at
// time now; any other is skills.ErrNotFound (so an expired or revoked token
// fails at its next use: nothing is cached).
func (db *DB) APITokenByHash(ctx context.Context, hash string, now time.Time) (APIToken, error) {
	var t APIToken
	err := db.read(ctx, func(tx *txn) (err error) {
		t, err = scanAPIToken(tx.QueryRowContext(ctx, "SELECT "+apiTokenColumns+" FROM api_tokens WHERE hash = ?", hash))
		if errors.Is(err, sql.ErrNoRows) || err == nil && !t.Live(now) {
			return skills.ErrNotFound
		}
		return err
	})
	if err != nil {
		return APIToken{}, fmt.Errorf("platform token: %w", err)
	}
	return t, nil
}

// APITokens are the platform tokens, working or not, by name.
func (db *DB) APITokens(ctx context.Context) ([]APIToken, error) {
	return readAll(ctx, db, "list tokens", scanAPIToken, "SELECT "+apiTokenColumns+" FROM api_tokens ORDER BY name")
}

// RevokeAPIToken revokes platform token name at time at: it fails from its
// next use. Revoking a revoked token keeps the first time and is no error;
// an unknown name is skills.ErrNotFound.
func (db *DB) RevokeAPIToken(ctx context.Context, name string, at time.Time) error {
	return db.updateAt(ctx, fmt.Sprintf("revoke token %q", name), at,
		"UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE name = ?", name)
}
