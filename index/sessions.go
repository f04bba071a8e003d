package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"skillfs/skills"
)

// errClosed is returned, wrapped in skills.ErrInvalid, when a closed session
// is asked to change.
var errClosed = fmt.Errorf("session is closed: %w", skills.ErrInvalid)

// checkPins validates a readable set: every slug named once, as the closure
// produces it.
func checkPins(pins []skills.Pin) error {
	seen := make(map[string]bool, len(pins))
	for _, p := range pins {
		if p.Slug == "" {
			return fmt.Errorf("pin with empty slug: %w", skills.ErrInvalid)
		}
		if seen[p.Slug] {
			return fmt.Errorf("skill %q pinned twice: %w", p.Slug, skills.ErrInvalid)
		}
		seen[p.Slug] = true
	}
	return nil
}

// encodePins is the stored form of a readable set: a JSON list of
// [slug, version] in closure order.
func encodePins(pins []skills.Pin) (string, error) {
	b := make([]byte, 0, len(pins)*96+2)
	b = append(b, '[')
	for i, p := range pins {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendJSONString(b, p.Slug)
		b = append(b, ',')
		b = appendJSONString(b, p.Version)
		b = append(b, ']')
	}
	return string(append(b, ']')), nil
}

// appendJSONString appends s as a JSON string: as it is when it needs no
// escaping (slugs and hashes never do), else as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func decodePins(stored string) ([]skills.Pin, error) {
	var list [][2]string
	if err := json.Unmarshal([]byte(stored), &list); err != nil {
		return nil, fmt.Errorf("decode pins: %w: %w", err, skills.ErrInvalid)
	}
	pins := make([]skills.Pin, len(list))
	for i, p := range list {
		pins[i] = skills.Pin{Slug: p[0], Version: p[1]}
	}
	return pins, nil
}

// sessionClosed reports whether session id is closed; an unknown id is
// skills.ErrNotFound.
func sessionClosed(ctx context.Context, tx *txn, id string) (bool, error) {
	var closed bool
	err := tx.QueryRowContext(ctx, "SELECT closed_at IS NOT NULL FROM sessions WHERE id = ?", id).Scan(&closed)
	if errors.Is(err, sql.ErrNoRows) {
		return false, skills.ErrNotFound
	}
	return closed, err
}

// CreateSession stores a new session with its pins, served by host s.Host.
// An id already used is an error wrapping skills.ErrExists; a user s.UID
// that does not exist (or no longer: deleted since the caller looked it up)
// is one wrapping skills.ErrNotFound, checked in the transaction that
// stores the session (see DeleteUser).
func (db *DB) CreateSession(ctx context.Context, s *skills.Session) error {
	return db.CreateSessionCapped(ctx, s, SessionCaps{})
}

// CreateSessionCapped is CreateSession within caps, counted in the
// transaction that stores the session (see checkCaps): a session over one
// is refused with a *CapError.
func (db *DB) CreateSessionCapped(ctx context.Context, s *skills.Session, caps SessionCaps) error {
	if s == nil || s.ID == "" {
		return fmt.Errorf("create session: no id: %w", skills.ErrInvalid)
	}
	wrap := func(err error) error { return fmt.Errorf("create session %q: %w", s.ID, err) }
	if err := checkPins(s.Pins); err != nil {
		return wrap(err)
	}
	requested, preload, err := encodeRequest(s)
	if err != nil {
		return wrap(err)
	}
	created, err := encodeTime(s.CreatedAt)
	if err != nil {
		return wrap(fmt.Errorf("created at: %w", err))
	}
	closed, err := encodeTime(s.ClosedAt)
	if err != nil {
		return wrap(fmt.Errorf("closed at: %w", err))
	}
	pins, err := encodePins(s.Pins)
	if err != nil {
		return wrap(err)
	}
	labels, err := encodeLabels(s.Labels)
	if err != nil {
		return wrap(err)
	}
	if err := checkKey(s); err != nil {
		return wrap(err)
	}
	err = db.write(ctx, func(tx *txn) error {
		var user int
		err := tx.QueryRowContext(ctx, "SELECT count(*) FROM users WHERE uid = ?", s.UID).Scan(&user)
		if err != nil {
			return err
		}
		if user == 0 {
			return fmt.Errorf("user %q: %w", s.UID, skills.ErrNotFound)
		}
		if err := checkParent(ctx, tx, s); err != nil {
			return err
		}
		if s.Key != "" && s.ClosedAt.IsZero() {
			if id, err := openByKey(ctx, tx, s.UID, s.Parent, s.Key); err != nil {
				return err
			} else if id != "" {
				return &KeyTakenError{Key: s.Key, Session: id}
			}
		}
		if err := checkCaps(ctx, tx, s, caps); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO sessions (id, uid, all_skills, requested, preload, created_at, closed_at, pins, host,
			client_key, labels, parent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			s.ID, s.UID, s.All, requested, preload, created, closed, pins, s.Host, s.Key, labels, s.Parent)
		switch {
		case s.Key != "" && isKeyViolation(err):
			// Writes take turns, so the look above sees every key: this
			// is the schema's guard against a write that did not.
			return &KeyTakenError{Key: s.Key}
		case isUniqueViolation(err):
			return skills.ErrExists
		}
		return err
	})
	if err != nil {
		return wrap(err)
	}
	return nil
}

// encodeRequest is the stored form of what session s asked for.
func encodeRequest(s *skills.Session) (requested, preload string, err error) {
	if requested, err = encodeList("requested skills", s.Requested); err != nil {
		return "", "", err
	}
	preload, err = encodeList("preloaded skills", s.Preload)
	return requested, preload, err
}

const sessionColumns = "id, uid, all_skills, requested, preload, created_at, closed_at, pins, host, client_key, labels, parent"

func scanSession(sc scanner) (*skills.Session, error) {
	var (
		s                  skills.Session
		requested, preload string
		pins, labels       string
		created, closed    sql.NullInt64
	)
	if err := sc.Scan(&s.ID, &s.UID, &s.All, &requested, &preload, &created, &closed, &pins, &s.Host, &s.Key, &labels, &s.Parent); err != nil {
		return nil, err
	}
	var err error
	if s.Labels, err = decodeLabels(labels); err != nil {
		return nil, err
	}
	if s.Requested, err = decodeList("requested skills", requested); err != nil {
		return nil, err
	}
	if s.Preload, err = decodeList("preloaded skills", preload); err != nil {
		return nil, err
	}
	s.CreatedAt = decodeTime(created)
	s.ClosedAt = decodeTime(closed)
	if s.Pins, err = decodePins(pins); err != nil {
		return nil, err
	}
	return &s, nil
}

// Session returns the session id with its pins in closure order, or an
// error wrapping skills.ErrNotFound.
func (db *DB) Session(ctx context.Context, id string) (*skills.Session, error) {
	var s *skills.Session
	err := db.read(ctx, func(tx *txn) error {
		var err error
		s, err = scanSession(tx.QueryRowContext(ctx, "SELECT "+sessionColumns+" FROM sessions WHERE id = ?", id))
		if errors.Is(err, sql.ErrNoRows) {
			return skills.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get session %q: %w", id, err)
	}
	return s, nil
}

// OpenSessions returns the sessions not yet closed, oldest first, each with
// its pins.
func (db *DB) OpenSessions(ctx context.Context) ([]*skills.Session, error) {
	return db.OpenSessionsPage(ctx, "", "", -1)
}

// OpenSessionsPage returns at most limit open sessions (all of them when
// limit < 0) served by host (every host's when host is "") that come after
// session after in the order of OpenSessions (creation time, then id), each
// with its pins; after "" starts at the oldest. The cursor may name a
// session closed or moved since: the order does not depend on it. One that
// names no session is skills.ErrInvalid.
func (db *DB) OpenSessionsPage(ctx context.Context, host, after string, limit int) ([]*skills.Session, error) {
	return db.FindOpenSessions(ctx, SessionFilter{Host: host}, after, limit)
}

// SessionFilter narrows a list of open sessions: each field set must
// match (Labels: every label given, among others the session may carry).
type SessionFilter struct {
	Host   string
	User   string
	Key    string
	Parent string
	// TopLevel keeps the sessions without a parent only (Parent "").
	TopLevel bool
	Labels   map[string]string
}

// where is the condition of f on sessions, with its args.
func (f SessionFilter) where(d *dialect) (string, []any) {
	where, args := "", []any{}
	for _, c := range []struct{ col, v string }{{"host", f.Host}, {"uid", f.User}, {"client_key", f.Key}, {"parent", f.Parent}} {
		if c.v != "" {
			where, args = where+" AND "+c.col+" = ?", append(args, c.v)
		}
	}
	if f.TopLevel && f.Parent == "" {
		where += " AND parent = ''"
	}
	for _, k := range slices.Sorted(maps.Keys(f.Labels)) {
		where, args = where+" AND EXISTS (SELECT 1 FROM "+d.labelsOf+" WHERE key = ? AND value = ?)", append(args, k, f.Labels[k])
	}
	return where, args
}

// FindOpenSessions is OpenSessionsPage of the open sessions f matches.
func (db *DB) FindOpenSessions(ctx context.Context, f SessionFilter, after string, limit int) ([]*skills.Session, error) {
	list := []*skills.Session{}
	err := db.read(ctx, func(tx *txn) error {
		where, args := f.where(db.d)
		if after != "" {
			var created sql.NullInt64
			err := tx.QueryRowContext(ctx, "SELECT created_at FROM sessions WHERE id = ?", after).Scan(&created)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("no session %q to list after: %w", after, skills.ErrInvalid)
			}
			if err != nil {
				return err
			}
			// NULL sorts first; row values do not compare with it.
			if created.Valid {
				where, args = where+" AND (created_at > ? OR created_at = ? AND id > ?)", append(args, created.Int64, created.Int64, after)
			} else {
				where, args = where+" AND (created_at IS NOT NULL OR id > ?)", append(args, after)
			}
		}
		var err error
		order := " ORDER BY created_at NULLS FIRST, id"
		if limit >= 0 {
			order += " LIMIT ?"
			args = append(args, limit)
		}
		list, err = queryAll(ctx, tx, scanSession, "SELECT "+sessionColumns+" FROM sessions WHERE closed_at IS NULL"+where+order, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list open sessions: %w", err)
	}
	return list, nil
}

// OpenSessionIDs returns the ids of the open sessions of user uid, oldest
// first (the order of OpenSessions).
func (db *DB) OpenSessionIDs(ctx context.Context, uid string) ([]string, error) {
	var ids []string
	err := db.read(ctx, func(tx *txn) error {
		var err error
		ids, err = queryAll(ctx, tx, func(sc scanner) (string, error) {
			var id string
			return id, sc.Scan(&id)
		}, "SELECT id FROM sessions WHERE closed_at IS NULL AND uid = ? ORDER BY created_at NULLS FIRST, id", uid)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list open sessions of %q: %w", uid, err)
	}
	return ids, nil
}

// jsonIDs encodes ids as a JSON array, for dialect.textList: one parameter
// whatever their number.
func jsonIDs(ids []string) string {
	b, _ := json.Marshal(ids) // strings always encode
	return string(b)
}

// SetPins replaces the readable set of an open session, and stores the
// events given in the same transaction (their ids set). An unknown session
// is skills.ErrNotFound, a closed one skills.ErrInvalid.
func (db *DB) SetPins(ctx context.Context, id string, pins []skills.Pin, evs ...*skills.Event) error {
	return db.SetPinsOn(ctx, "", id, pins, evs...)
}

// SetPinsOn is SetPins by the host that serves the session: when another
// host serves it by the time the write takes its turn (a move), nothing is
// written and the error wraps skills.ErrElsewhere. An empty host is any.
func (db *DB) SetPinsOn(ctx context.Context, host, id string, pins []skills.Pin, evs ...*skills.Event) error {
	if err := db.updateSession(ctx, host, id, pins, "", nil, evs); err != nil {
		return fmt.Errorf("set pins of session %q: %w", id, err)
	}
	return nil
}

// SetSkills replaces what open session s.ID asked for — s.All, s.Requested
// and s.Preload — and its readable set s.Pins, and stores the events given
// in the same transaction (their ids set). Its user, creation time, binds
// and activations stay. An unknown session is skills.ErrNotFound, a closed
// one skills.ErrInvalid; with s.Host set, one another host serves by the
// time the write takes its turn (a move) is skills.ErrElsewhere.
func (db *DB) SetSkills(ctx context.Context, s *skills.Session, evs ...*skills.Event) error {
	if s == nil || s.ID == "" {
		return fmt.Errorf("set skills of a session: no id: %w", skills.ErrInvalid)
	}
	wrap := func(err error) error { return fmt.Errorf("set skills of session %q: %w", s.ID, err) }
	requested, preload, err := encodeRequest(s)
	if err != nil {
		return wrap(err)
	}
	err = db.updateSession(ctx, s.Host, s.ID, s.Pins, ", all_skills = ?, requested = ?, preload = ?",
		[]any{s.All, requested, preload}, evs)
	if err != nil {
		return wrap(err)
	}
	return nil
}

// updateSession sets the pins of open session id, and the columns of set
// (", col = ?, ..." with its args), and stores evs, in one transaction.
func (db *DB) updateSession(ctx context.Context, host, id string, pins []skills.Pin, set string, args []any, evs []*skills.Event) error {
	if err := checkPins(pins); err != nil {
		return err
	}
	stored, err := encodePins(pins)
	if err != nil {
		return err
	}
	return db.writeEvents(ctx, evs, func(tx *txn) error {
		if closed, err := sessionClosed(ctx, tx, id); err != nil {
			return err
		} else if closed {
			return errClosed
		}
		if host != "" {
			if now, err := sessionHost(ctx, tx, id); err != nil {
				return err
			} else if now != host {
				return fmt.Errorf("host %q serves it now, not %q: %w", now, host, skills.ErrElsewhere)
			}
		}
		args := append(append([]any{stored}, args...), id)
		if _, err := tx.ExecContext(ctx, "UPDATE sessions SET pins = ?"+set+" WHERE id = ?", args...); err != nil {
			return err
		}
		return insertEvents(ctx, tx, evs)
	})
}

// CloseSession marks the session closed now; its pins and activations stay.
// Its token goes with the close (SetSessionToken). Its binds are no longer
// current (Binds, OpenBinds), but their rows stay for the host that made
// them, which detaches them and then forgets them (StaleBinds, ForgetBinds): the close may be made elsewhere. Closing a
// closed session keeps the first close time and is not an error; an
// unknown one is skills.ErrNotFound. The events given are stored in the
// same transaction (their ids set) when this call closed the session, and
// not at all when it was closed before.
func (db *DB) CloseSession(ctx context.Context, id string, evs ...*skills.Event) error {
	at, err := encodeTime(db.now())
	if err != nil {
		return fmt.Errorf("close session %q: %w", id, err)
	}
	err = db.writeEvents(ctx, evs, func(tx *txn) error {
		closed, err := sessionClosed(ctx, tx, id)
		if err != nil || closed {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE sessions SET closed_at = ? WHERE id = ? AND closed_at IS NULL", at, id); err != nil {
			return err
		}
		if err := dropSessionToken(ctx, tx, id); err != nil {
			return err
		}
		return insertEvents(ctx, tx, evs)
	})
	if err != nil {
		return fmt.Errorf("close session %q: %w", id, err)
	}
	return nil
}

// servedBy refuses, in tx, a change by host to session id unless the
// session is open (else errClosed; an unknown one is skills.ErrNotFound)
// and host serves it (else skills.ErrElsewhere: it was moved since).
func servedBy(ctx context.Context, tx *txn, id, host string) error {
	if closed, err := sessionClosed(ctx, tx, id); err != nil {
		return err
	} else if closed {
		return errClosed
	}
	if serving, err := sessionHost(ctx, tx, id); err != nil {
		return err
	} else if serving != host {
		return fmt.Errorf("host %q serves it, not %q: %w", serving, host, skills.ErrElsewhere)
	}
	return nil
}

// AddBind records that host bound session id at b (idempotent: again, it
// updates the namespace and the API socket), so a restart can re-attach
// it. Only the host serving the session binds it: for
// another, the session's host is skills.ErrElsewhere (it was moved since).
func (db *DB) AddBind(ctx context.Context, id, host string, b skills.Bind) error {
	if b.Target == "" || b.PID < 0 {
		return fmt.Errorf("add bind of session %q: empty target or negative pid: %w", id, skills.ErrInvalid)
	}
	err := db.write(ctx, func(tx *txn) error {
		if err := servedBy(ctx, tx, id, host); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO session_binds (session, host, target, pid, ns, api_socket, api_socket_id)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (session, host, pid, target) DO UPDATE SET ns = excluded.ns, api_socket = excluded.api_socket,
			api_socket_id = excluded.api_socket_id`, id, host, b.Target, b.PID, b.NS, b.APISocket, b.SocketID)
		return err
	})
	if err != nil {
		return fmt.Errorf("add bind of session %q at %q: %w", id, b.Target, err)
	}
	return nil
}

// RemoveBind forgets a current bind of session id (matched by target and
// pid: one its serving host made); one not recorded is skills.ErrNotFound.
func (db *DB) RemoveBind(ctx context.Context, id string, b skills.Bind) error {
	err := db.write(ctx, func(tx *txn) error {
		return execOne(ctx, tx, skills.ErrNotFound, `DELETE FROM session_binds WHERE session = ? AND target = ? AND pid = ?
			AND host = (SELECT host FROM sessions WHERE id = ?)`, id, b.Target, b.PID, id)
	})
	if err != nil {
		return fmt.Errorf("remove bind of session %q at %q: %w", id, b.Target, err)
	}
	return nil
}

// currentBind is the condition on a bind b of session s that makes it
// current: the session is open and the bind is its serving host's.
const currentBind = "s.closed_at IS NULL AND b.host = s.host"

// Binds returns the current binds of session id (those its serving host
// made while it is open), by pid then target; an unknown session is
// skills.ErrNotFound.
func (db *DB) Binds(ctx context.Context, id string) ([]skills.Bind, error) {
	var binds []skills.Bind
	err := db.read(ctx, func(tx *txn) (err error) {
		if _, err := sessionClosed(ctx, tx, id); err != nil {
			return err
		}
		binds, err = queryAll(ctx, tx, func(sc scanner) (b skills.Bind, err error) {
			return b, sc.Scan(&b.Target, &b.PID, &b.NS, &b.APISocket, &b.SocketID)
		}, "SELECT b.target, b.pid, b.ns, b.api_socket, b.api_socket_id FROM session_binds b JOIN sessions s ON s.id = b.session WHERE b.session = ? AND "+
			currentBind+" ORDER BY b.pid, b.target", id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list binds of session %q: %w", id, err)
	}
	return binds, nil
}

// OpenBinds returns the current binds of open sessions by session id, each
// list by pid then target: those of every open session when ids is nil,
// else of the open sessions among ids; of the sessions host serves only,
// unless host is "". Sessions without binds are left out.
func (db *DB) OpenBinds(ctx context.Context, host string, ids []string) (map[string][]skills.Bind, error) {
	where, args := currentBind, []any{}
	if host != "" {
		where += " AND b.host = ?"
		args = append(args, host)
	}
	if ids != nil {
		where += " AND b.session IN (SELECT value FROM " + db.d.textList + ")"
		args = append(args, jsonIDs(ids))
	}
	out, err := db.bindsWhere(ctx, where, args...)
	if err != nil {
		return nil, fmt.Errorf("list binds of open sessions: %w", err)
	}
	return out, nil
}

// StaleBinds returns the binds host made of sessions it no longer serves
// (closed, or moved to another host), by session id, each list by pid then
// target: they are host's to detach and forget (ForgetBinds).
func (db *DB) StaleBinds(ctx context.Context, host string) (map[string][]skills.Bind, error) {
	out, err := db.bindsWhere(ctx, "b.host = ? AND NOT ("+currentBind+")", host)
	if err != nil {
		return nil, fmt.Errorf("list stale binds of host %q: %w", host, err)
	}
	return out, nil
}

// bindsWhere returns the binds b of sessions s that the condition where
// (with its args) holds for, by session id, each list by pid then target.
func (db *DB) bindsWhere(ctx context.Context, where string, args ...any) (map[string][]skills.Bind, error) {
	out := map[string][]skills.Bind{}
	err := db.read(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, `SELECT b.session, b.target, b.pid, b.ns, b.api_socket, b.api_socket_id FROM session_binds b JOIN sessions s ON s.id = b.session
			WHERE `+where+" ORDER BY b.session, b.pid, b.target", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var b skills.Bind
			if err := rows.Scan(&id, &b.Target, &b.PID, &b.NS, &b.APISocket, &b.SocketID); err != nil {
				return err
			}
			out[id] = append(out[id], b)
		}
		return rows.Err()
	})
	return out, err
}

// ForgetBinds forgets every bind host made of session id, once they are
// detached: a closed session's, or one moved away from host.
func (db *DB) ForgetBinds(ctx context.Context, id, host string) error {
	err := db.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM session_binds WHERE session = ? AND host = ?", id, host)
		return err
	})
	if err != nil {
		return fmt.Errorf("forget the binds of session %q on host %q: %w", id, host, err)
	}
	return nil
}
