package index

import (
	"context"
	"fmt"

	"skillfs/skills"
)

// SessionCaps bound the open sessions a new one joins: a field zero or
// less bounds nothing.
type SessionCaps struct {
	// Children is how many open sub-agent sessions a session may have.
	Children int
	// PerUser is how many open sessions (sub-agent sessions included) a
	// user may have.
	PerUser int
}

// CapError is a session refused because it would pass one of its caps. It
// wraps skills.ErrLimit.
type CapError struct {
	Cap  string // "children" (Of names the parent) or "per user" (Of names the user)
	Of   string
	Open int // the open sessions counted, without the one refused
	Max  int
}

func (e *CapError) Error() string {
	if e.Cap == CapChildren {
		return fmt.Sprintf("session %s has %d open sub-agent sessions, the most it may have is %d", e.Of, e.Open, e.Max)
	}
	return fmt.Sprintf("user %q has %d open sessions, the most it may have is %d", e.Of, e.Open, e.Max)
}

// Unwrap makes the error skills.ErrLimit.
func (e *CapError) Unwrap() error { return skills.ErrLimit }

// The caps of CapError.
const (
	CapChildren = "children"
	CapPerUser  = "per user"
)

// CheckSessionCaps says whether open session s, not yet stored, would pass
// caps now: nil, a *CapError, or the error of reading the index. A caller
// looks before it makes what a session needs, so a refused create costs
// little; CreateSessionCapped decides.
func (db *DB) CheckSessionCaps(ctx context.Context, s *skills.Session, caps SessionCaps) error {
	return db.read(ctx, func(tx *txn) error { return checkCaps(ctx, tx, s, caps) })
}

// checkCaps counts, in the transaction that stores open session s, the
// open sessions it would join against caps. Writes take turns (on
// PostgreSQL with an advisory lock, SQLite has one writer), so two
// sessions created at once, even on two hosts, are never both let past a
// cap. A session stored closed passes.
func checkCaps(ctx context.Context, tx *txn, s *skills.Session, caps SessionCaps) error {
	if !s.ClosedAt.IsZero() {
		return nil
	}
	for _, c := range []struct {
		name, of string
		max      int
		query    string
	}{
		{CapChildren, s.Parent, caps.Children, "SELECT count(*) FROM sessions WHERE parent = ? AND parent <> '' AND closed_at IS NULL"},
		{CapPerUser, s.UID, caps.PerUser, "SELECT count(*) FROM sessions WHERE uid = ? AND closed_at IS NULL"},
	} {
		if c.max <= 0 || c.of == "" {
			continue
		}
		var open int
		if err := tx.QueryRowContext(ctx, c.query, c.of).Scan(&open); err != nil {
			return err
		}
		if open >= c.max {
			return &CapError{Cap: c.name, Of: c.of, Open: open, Max: c.max}
		}
	}
	return nil
}
