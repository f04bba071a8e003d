package index

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"skillfs/skills"
)

// hashOf is the hash a token is kept under.
func hashOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TestSessionTokens: a session's token works while its session is open and
// served by the host that made it; rotating kills the old one; closing or
// moving the session kills it; a token is kept only as its hash.
func TestSessionTokens(t *testing.T) { forEachBackend(t, testSessionTokens) }

func testSessionTokens(t *testing.T, be backend) {
	db := be.open(t)
	ctx := context.Background()
	for _, id := range []string{"s1", "s2", "s3"} {
		if err := db.CreateSession(ctx, hostSession(id, "ha")); err != nil {
			t.Fatal(err)
		}
	}
	works := func(token, want string) {
		t.Helper()
		got, err := db.TokenSession(ctx, hashOf(token))
		if want == "" {
			if !errors.Is(err, skills.ErrNotFound) {
				t.Errorf("token %s: session %q, %v; want not found", token, got, err)
			}
			return
		}
		if err != nil || got != want {
			t.Errorf("token %s: session %q, %v; want %s", token, got, err, want)
		}
	}
	for id, tok := range map[string]string{"s1": "one", "s2": "two", "s3": "three"} {
		if err := db.SetSessionToken(ctx, id, "ha", hashOf(tok), t0); err != nil {
			t.Fatal(err)
		}
	}
	works("one", "s1")
	works("two", "s2")
	works("nothing", "")

	// Refused: another host, an unknown session, a closed one, no hash.
	if err := db.SetSessionToken(ctx, "s1", "hb", hashOf("x"), t0); !errors.Is(err, skills.ErrElsewhere) {
		t.Errorf("a token made by a host that does not serve the session: %v", err)
	}
	if err := db.SetSessionToken(ctx, "nope", "ha", hashOf("x"), t0); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("a token of an unknown session: %v", err)
	}
	if err := db.SetSessionToken(ctx, "s1", "ha", "one", t0); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("a token given in clear: %v", err)
	}
	works("one", "s1")
	var clear int
	if err := db.r.QueryRowContext(ctx, "SELECT count(*) FROM session_tokens WHERE hash IN ('one', 'two', 'three')").Scan(&clear); err != nil || clear != 0 {
		t.Errorf("tokens kept in clear: %d (%v)", clear, err)
	}

	// Rotating replaces.
	if err := db.SetSessionToken(ctx, "s1", "ha", hashOf("one-again"), t0); err != nil {
		t.Fatal(err)
	}
	works("one", "")
	works("one-again", "s1")

	// Closing and moving kill.
	if err := db.CloseSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	works("one-again", "")
	if err := db.SetSessionToken(ctx, "s1", "ha", hashOf("late"), t0); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("a token for a closed session: %v", err)
	}
	if err := db.MoveSession(ctx, "s2", "ha", "hb"); err != nil {
		t.Fatal(err)
	}
	works("two", "")
	works("three", "s3")
	// A token whose host no longer serves its session is dead even if its
	// row were left (a move made by an older program).
	if _, err := db.w.ExecContext(ctx, db.d.rebind("INSERT INTO session_tokens (session, hash, host, created_at) VALUES (?, ?, ?, ?)"),
		"s2", hashOf("stale"), "ha", t0.UnixNano()); err != nil {
		t.Fatal(err)
	}
	works("stale", "")
	var left int
	if err := db.r.QueryRowContext(ctx, db.d.rebind("SELECT count(*) FROM session_tokens WHERE session = ?"), "s1").Scan(&left); err != nil || left != 0 {
		t.Errorf("a closed session's token row stays: %d (%v)", left, err)
	}
}

// TestAPITokens: a platform token works until it expires or is revoked, at
// its next use; its name is taken while it works and free after; the list
// holds every token, never a token's text.
func TestAPITokens(t *testing.T) { forEachBackend(t, testAPITokens) }

func testAPITokens(t *testing.T, be backend) {
	db := be.open(t)
	ctx := context.Background()
	add := func(name, role, token string, expires time.Time) error {
		return db.AddAPIToken(ctx, APIToken{Name: name, Role: role, Hash: hashOf(token), CreatedAt: t0, ExpiresAt: expires})
	}
	if err := add("dash", "reader", "r1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := add("ci", "operator", "o1", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := add("dash", "operator", "r2", time.Time{}); !errors.Is(err, skills.ErrExists) {
		t.Errorf("a second token named dash: %v", err)
	}
	if err := add("bad", "admin", "b", time.Time{}); err == nil {
		t.Error("a token of role admin was stored")
	}
	if err := add("", "reader", "e", time.Time{}); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("a token without a name: %v", err)
	}
	got, err := db.APITokenByHash(ctx, hashOf("r1"), t0)
	if err != nil || got.Name != "dash" || got.Role != "reader" {
		t.Errorf("the reader token: %+v %v", got, err)
	}
	if got, err := db.APITokenByHash(ctx, hashOf("o1"), t0.Add(time.Hour-time.Nanosecond)); err != nil || got.Name != "ci" {
		t.Errorf("the operator token before it expires: %+v %v", got, err)
	}
	if _, err := db.APITokenByHash(ctx, hashOf("o1"), t0.Add(time.Hour)); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("an expired token: %v", err)
	}
	if _, err := db.APITokenByHash(ctx, hashOf("r2"), t0); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("an unknown token: %v", err)
	}
	if err := db.RevokeAPIToken(ctx, "dash", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeAPIToken(ctx, "dash", t0.Add(2*time.Minute)); err != nil {
		t.Errorf("revoke twice: %v", err)
	}
	if err := db.RevokeAPIToken(ctx, "nope", t0); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("revoke an unknown token: %v", err)
	}
	if _, err := db.APITokenByHash(ctx, hashOf("r1"), t0); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("a revoked token: %v", err)
	}
	list, err := db.APITokens(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "ci" || list[1].Name != "dash" ||
		!list[1].RevokedAt.Equal(t0.Add(time.Minute)) || !list[0].ExpiresAt.Equal(t0.Add(time.Hour)) || !list[1].ExpiresAt.IsZero() {
		t.Errorf("list: %+v %v", list, err)
	}
	// A revoked token's name is free again; the new token works, the old not.
	if err := add("dash", "operator", "r3", time.Time{}); err != nil {
		t.Fatalf("reuse the name of a revoked token: %v", err)
	}
	if got, err := db.APITokenByHash(ctx, hashOf("r3"), t0); err != nil || got.Role != "operator" {
		t.Errorf("the new dash: %+v %v", got, err)
	}
	if _, err := db.APITokenByHash(ctx, hashOf("r1"), t0); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("the old dash: %v", err)
	}
}
