package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/server"
	"skillfs/index"
	"skillfs/skills"
)

// The daemon's credentials (server.Credentials): a token is 32 random
// bytes in base64url behind a prefix saying what it is (api.…Prefix); the
// index keeps its SHA-256 only, and every request that carries one looks
// it up there, so a revocation, an expiry, a close or a move is effective
// at the next request; an event stream asks again by the hash (Recheck),
// and each change made here tells the streams of the credential changed
// (server.API.TokenChanged, SessionChanged). No token is ever logged: what
// is logged of one is its session or its name.

// tokenBytes is how many random bytes a token holds.
const tokenBytes = 32

// newToken is a new token behind prefix.
func newToken(prefix string) string {
	b := make([]byte, tokenBytes)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// tokenHash is how the index keeps token: its SHA-256, in hex.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// withToken gives info, a session just made, its token (answered this
// once). A session whose token cannot be stored is closed again, as one
// that cannot be served: no one could reach it but the operator.
func (d *Daemon) withToken(ctx context.Context, info *api.SessionInfo) (*api.SessionInfo, error) {
	tok, err := d.setSessionToken(ctx, info.ID)
	if err != nil {
		d.fs.RemoveSession(info.ID)
		if cerr := d.db.CloseSession(ctx, info.ID); cerr != nil {
			d.log.Error("close a session whose token could not be stored", "session", info.ID, "err", cerr)
		}
		return nil, fmt.Errorf("session token: %w", err)
	}
	info.Token = tok
	return info, nil
}

// setSessionToken makes a new token for open session id, served here; the
// one it had no longer works.
func (d *Daemon) setSessionToken(ctx context.Context, id string) (string, error) {
	tok := newToken(api.SessionTokenPrefix)
	if err := d.db.SetSessionToken(ctx, id, d.host, tokenHash(tok), time.Now().UTC()); err != nil {
		return "", err
	}
	return tok, nil
}

// RotateSessionToken gives open session id, served here, a new token: the
// old one no longer works. A session another host serves is rotated there.
func (d *Daemon) RotateSessionToken(ctx context.Context, id string) (*api.SessionToken, error) {
	tok, err := d.setSessionToken(ctx, id)
	if err != nil {
		return nil, err
	}
	d.http.SessionChanged(id)
	d.log.Info("session token rotated", "session", id)
	return &api.SessionToken{Session: id, Token: tok}, nil
}

// Credential is the principal token proves (server.Credentials).
func (d *Daemon) Credential(ctx context.Context, token string) (server.Principal, error) {
	switch {
	case strings.HasPrefix(token, api.SessionTokenPrefix):
		return d.credential(ctx, true, tokenHash(token))
	case strings.HasPrefix(token, api.PlatformTokenPrefix):
		return d.credential(ctx, false, tokenHash(token))
	}
	return server.Principal{}, skills.ErrNotFound
}

// Recheck says whether the token of p.Hash still proves p
// (server.Credentials).
func (d *Daemon) Recheck(ctx context.Context, p server.Principal) error {
	now, err := d.credential(ctx, p.Role == server.RoleSession, string(p.Hash))
	if err != nil {
		return err
	}
	if now.Role != p.Role || now.Session != p.Session || now.Token != p.Token {
		return fmt.Errorf("the token proves another principal now: %w", skills.ErrNotFound)
	}
	return nil
}

// credential is the principal the token of hash proves: a session's
// token, or a platform token.
func (d *Daemon) credential(ctx context.Context, session bool, hash string) (server.Principal, error) {
	if session {
		id, err := d.db.TokenSession(ctx, hash)
		if err != nil {
			return server.Principal{}, err
		}
		return server.Principal{Role: server.RoleSession, Session: id, Hash: server.TokenHash(hash)}, nil
	}
	t, err := d.db.APITokenByHash(ctx, hash, d.now())
	if err != nil {
		return server.Principal{}, err
	}
	role, err := tokenRole(t.Role)
	if err != nil {
		return server.Principal{}, err
	}
	return server.Principal{Role: role, Token: t.Name, Hash: server.TokenHash(hash)}, nil
}

// now is the time tokens are judged by.
func (d *Daemon) now() time.Time {
	if d.opts.now != nil {
		return d.opts.now()
	}
	return time.Now()
}

// tokenRole is the role a platform token's role name gives.
func tokenRole(name string) (server.Role, error) {
	switch name {
	case api.RoleOperator:
		return server.RoleOperator, nil
	case api.RoleReader:
		return server.RoleReader, nil
	}
	return server.RoleNone, fmt.Errorf("token role %q: want %s or %s: %w", name, api.RoleOperator, api.RoleReader, skills.ErrInvalid)
}

// MaxTokenName is how long a platform token's name may be.
const MaxTokenName = 64

// checkTokenName refuses a name that is not 1 to MaxTokenName letters,
// digits, '.', '_' and '-', beginning with a letter or digit: a name is
// shown, logged and put in a URL path.
func checkTokenName(name string) error {
	if name == "" || len(name) > MaxTokenName {
		return fmt.Errorf("token name %q: want 1 to %d characters: %w", name, MaxTokenName, skills.ErrInvalid)
	}
	for i, c := range name {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("token name %q: want letters, digits, '.', '_' and '-', beginning with a letter or digit: %w", name, skills.ErrInvalid)
		}
	}
	return nil
}

// parseExpiry is when a token asked to expire at expires does, from now: a
// positive duration ("24h", "90m"), an RFC 3339 time after now, or ""
// for never (the zero time).
func parseExpiry(expires string, now time.Time) (time.Time, error) {
	if expires == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(expires); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("expires %q: want a positive duration: %w", expires, skills.ErrInvalid)
		}
		at := now.Add(d)
		if at.Before(now) { // overflowed
			return time.Time{}, fmt.Errorf("expires %q: too far ahead: %w", expires, skills.ErrInvalid)
		}
		return at.UTC(), nil
	}
	at, err := time.Parse(time.RFC3339, expires)
	if err != nil {
		return time.Time{}, fmt.Errorf("expires %q: want a duration (24h, 90m) or an RFC 3339 time: %w", expires, skills.ErrInvalid)
	}
	if !at.After(now) {
		return time.Time{}, fmt.Errorf("expires %q: that time has passed: %w", expires, skills.ErrInvalid)
	}
	return at.UTC(), nil
}

// CreateToken makes a named platform token of a role, answered this once.
func (d *Daemon) CreateToken(ctx context.Context, req api.TokenRequest) (*api.TokenCreated, error) {
	if err := checkTokenName(req.Name); err != nil {
		return nil, err
	}
	if _, err := tokenRole(req.Role); err != nil {
		return nil, err
	}
	now := d.now().UTC()
	expires, err := parseExpiry(req.Expires, now)
	if err != nil {
		return nil, err
	}
	tok := newToken(api.PlatformTokenPrefix)
	err = d.db.AddAPIToken(ctx, index.APIToken{Name: req.Name, Role: req.Role, Hash: tokenHash(tok), CreatedAt: now, ExpiresAt: expires})
	if err != nil {
		return nil, err
	}
	out := &api.TokenCreated{Name: req.Name, Role: req.Role, Token: tok, ExpiresAt: timeOrNil(expires)}
	d.log.Info("token created", "name", req.Name, "role", req.Role, "expires_at", out.ExpiresAt)
	return out, nil
}

// Tokens are the platform tokens, working or not, by name.
func (d *Daemon) Tokens(ctx context.Context) ([]api.TokenInfo, error) {
	list, err := d.db.APITokens(ctx)
	if err != nil {
		return nil, err
	}
	now := d.now()
	out := make([]api.TokenInfo, len(list))
	for i, t := range list {
		out[i] = api.TokenInfo{Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt, ExpiresAt: timeOrNil(t.ExpiresAt),
			Revoked: !t.RevokedAt.IsZero(), Expired: !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)}
	}
	return out, nil
}

// RevokeToken revokes platform token name: it fails from its next use.
func (d *Daemon) RevokeToken(ctx context.Context, name string) error {
	if err := d.db.RevokeAPIToken(ctx, name, time.Now().UTC()); err != nil {
		if errors.Is(err, skills.ErrNotFound) {
			return fmt.Errorf("token %q: %w", name, skills.ErrNotFound)
		}
		return err
	}
	d.http.TokenChanged(name)
	d.log.Info("token revoked", "name", name)
	return nil
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
