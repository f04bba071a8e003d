package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"skillfs/skills"
)

// KeyTakenError is CreateSession's answer for a session whose client key
// names an open session of the same user and parent: Session is that
// session's id ("" when the schema's unique index caught it, not the look
// before). It wraps skills.ErrExists.
type KeyTakenError struct {
	Key     string
	Session string
}

func (e *KeyTakenError) Error() string {
	if e.Session == "" {
		return fmt.Sprintf("session key %q names an open session", e.Key)
	}
	return fmt.Sprintf("session key %q names open session %s", e.Key, e.Session)
}

// Unwrap makes the error skills.ErrExists.
func (e *KeyTakenError) Unwrap() error { return skills.ErrExists }

// isKeyViolation reports whether err is a violation of the unique index of
// open sessions' keys (sessions_open_key), on either backend.
func isKeyViolation(err error) bool {
	return isUniqueViolation(err) && (strings.Contains(err.Error(), "sessions_open_key") || strings.Contains(err.Error(), "sessions.client_key"))
}

// encodeLabels is the stored form of a session's labels: a JSON object.
func encodeLabels(labels map[string]string) (string, error) {
	if err := skills.CheckLabels(labels); err != nil {
		return "", err
	}
	if len(labels) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(labels)
	return string(b), err
}

func decodeLabels(stored string) (map[string]string, error) {
	if stored == "{}" || stored == "" {
		return nil, nil
	}
	var labels map[string]string
	if err := json.Unmarshal([]byte(stored), &labels); err != nil {
		return nil, fmt.Errorf("decode labels: %w: %w", err, skills.ErrDamaged)
	}
	return labels, nil
}

// checkKey checks session s's client key, if it has one.
func checkKey(s *skills.Session) error {
	if s.Key == "" {
		return nil
	}
	return skills.CheckSessionKey(s.Key)
}

// checkParent checks, in the transaction that stores session s, what the
// index knows of its parent: open, of the same user, no child itself. A
// top-level session passes.
func checkParent(ctx context.Context, tx *txn, s *skills.Session) error {
	if s.Parent == "" {
		return nil
	}
	var uid, grand string
	var closed bool
	err := tx.QueryRowContext(ctx, "SELECT uid, parent, closed_at IS NOT NULL FROM sessions WHERE id = ?", s.Parent).Scan(&uid, &grand, &closed)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("parent session %q: %w", s.Parent, skills.ErrNotFound)
	case err != nil:
		return err
	case closed:
		return fmt.Errorf("parent session %q is closed: %w", s.Parent, skills.ErrNotFound)
	case uid != s.UID:
		return fmt.Errorf("parent session %q is of another user than %q: %w", s.Parent, s.UID, skills.ErrInvalid)
	case grand != "":
		return fmt.Errorf("parent session %q is a sub-agent session, which may not have sub-agents: %w", s.Parent, skills.ErrPermission)
	}
	return nil
}

// openByKey is the id of the open session of user uid and parent with
// client key key, "" when there is none.
func openByKey(ctx context.Context, tx *txn, uid, parent, key string) (string, error) {
	var id string
	err := tx.QueryRowContext(ctx, "SELECT id FROM sessions WHERE uid = ? AND parent = ? AND client_key = ? AND closed_at IS NULL",
		uid, parent, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// SessionByKey returns the open session of user uid and parent ("" for a
// top-level session) with client key key, or an error wrapping
// skills.ErrNotFound.
func (db *DB) SessionByKey(ctx context.Context, uid, parent, key string) (*skills.Session, error) {
	list, err := db.FindOpenSessions(ctx, SessionFilter{User: uid, Key: key, Parent: parent, TopLevel: parent == ""}, "", 1)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("no open session of %q with key %q: %w", uid, key, skills.ErrNotFound)
	}
	return list[0], nil
}

// OpenChildren returns the open sub-agent sessions of session parent,
// oldest first.
func (db *DB) OpenChildren(ctx context.Context, parent string) ([]*skills.Session, error) {
	if parent == "" {
		return nil, fmt.Errorf("children of no session: %w", skills.ErrInvalid)
	}
	return db.FindOpenSessions(ctx, SessionFilter{Parent: parent}, "", -1)
}
