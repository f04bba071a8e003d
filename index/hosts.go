package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"skillfs/skills"
)

// RegisterHost records host h as started (or started again): its name,
// API address and mount, its start time and a first heartbeat. Its
// sessions are not touched.
func (db *DB) RegisterHost(ctx context.Context, h skills.Host) error {
	if h.ID == "" {
		return fmt.Errorf("register host: empty id: %w", skills.ErrInvalid)
	}
	wrap := func(err error) error { return fmt.Errorf("register host %q: %w", h.ID, err) }
	started, err := activationTime(h.StartedAt)
	if err != nil {
		return wrap(fmt.Errorf("started at: %w", err))
	}
	seen, err := activationTime(h.LastSeen)
	if err != nil {
		return wrap(fmt.Errorf("last seen: %w", err))
	}
	err = db.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO hosts (id, name, api, mount, started_at, last_seen) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET name = excluded.name, api = excluded.api, mount = excluded.mount,
				started_at = excluded.started_at, last_seen = excluded.last_seen`,
			h.ID, h.Name, h.API, h.Mount, started, seen)
		return err
	})
	if err != nil {
		return wrap(err)
	}
	return nil
}

// Heartbeat records that host id was alive at time at. A host that is not
// registered is skills.ErrNotFound (register it again).
func (db *DB) Heartbeat(ctx context.Context, id string, at time.Time) error {
	return db.updateAt(ctx, fmt.Sprintf("heartbeat of host %q", id), at, "UPDATE hosts SET last_seen = ? WHERE id = ?", id)
}

// updateAt runs query, whose first parameter is time at and the rest args,
// on one row; none is skills.ErrNotFound. Its errors say what (the change).
func (db *DB) updateAt(ctx context.Context, what string, at time.Time, query string, args ...any) error {
	n, err := activationTime(at)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	err = db.write(ctx, func(tx *txn) error {
		return execOne(ctx, tx, skills.ErrNotFound, query, append([]any{n}, args...)...)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

const hostColumns = `h.id, h.name, h.api, h.mount, h.started_at, h.last_seen,
	(SELECT count(*) FROM sessions s WHERE s.host = h.id AND s.closed_at IS NULL)`

func scanHost(sc scanner) (skills.Host, error) {
	var h skills.Host
	var started, seen sql.NullInt64
	err := sc.Scan(&h.ID, &h.Name, &h.API, &h.Mount, &started, &seen, &h.Sessions)
	h.StartedAt, h.LastSeen = decodeTime(started), decodeTime(seen)
	return h, err
}

// Hosts returns every registered host, by name then id, each with the
// number of open sessions it serves.
func (db *DB) Hosts(ctx context.Context) ([]skills.Host, error) {
	return readAll(ctx, db, "list hosts", scanHost, "SELECT "+hostColumns+" FROM hosts h ORDER BY h.name, h.id")
}

// Host returns the registered host id with the number of open sessions it
// serves, or an error wrapping skills.ErrNotFound.
func (db *DB) Host(ctx context.Context, id string) (skills.Host, error) {
	var h skills.Host
	err := db.read(ctx, func(tx *txn) (err error) {
		h, err = scanHost(tx.QueryRowContext(ctx, "SELECT "+hostColumns+" FROM hosts h WHERE h.id = ?", id))
		if errors.Is(err, sql.ErrNoRows) {
			return skills.ErrNotFound
		}
		return err
	})
	if err != nil {
		return skills.Host{}, fmt.Errorf("get host %q: %w", id, err)
	}
	return h, nil
}

// sessionHost returns the host serving session id; an unknown id is
// skills.ErrNotFound.
func sessionHost(ctx context.Context, tx *txn, id string) (string, error) {
	var host string
	err := tx.QueryRowContext(ctx, "SELECT host FROM sessions WHERE id = ?", id).Scan(&host)
	if errors.Is(err, sql.ErrNoRows) {
		return "", skills.ErrNotFound
	}
	return host, err
}

// AdoptSessions makes host the server of the open sessions that have none
// (made before hosts were recorded, in an index shared before that) and
// returns how many it took.
func (db *DB) AdoptSessions(ctx context.Context, host string) (int64, error) {
	if host == "" {
		return 0, fmt.Errorf("adopt sessions: empty host: %w", skills.ErrInvalid)
	}
	n, err := db.writeCount(ctx, "UPDATE sessions SET host = ? WHERE host = '' AND closed_at IS NULL", host)
	if err != nil {
		return 0, fmt.Errorf("adopt sessions of no host: %w", err)
	}
	return n, nil
}

// MoveSession makes host `to` the one serving open session id, only if
// host `from` serves it now: of two hosts taking over the same session at once,
// one does and the other gets an error wrapping skills.ErrElsewhere. Its
// pins, requests and activations stay; the binds from made stay from's to
// detach (StaleBinds); its token dies (SetSessionToken). The events given
// are stored in the same transaction (their ids set). An unknown session is
// skills.ErrNotFound, a closed one skills.ErrInvalid.
func (db *DB) MoveSession(ctx context.Context, id, from, to string, evs ...*skills.Event) error {
	if to == "" {
		return fmt.Errorf("move session %q: empty host: %w", id, skills.ErrInvalid)
	}
	err := db.writeEvents(ctx, evs, func(tx *txn) error {
		if closed, err := sessionClosed(ctx, tx, id); err != nil {
			return err
		} else if closed {
			return errClosed
		}
		res, err := tx.ExecContext(ctx, "UPDATE sessions SET host = ? WHERE id = ? AND host = ? AND closed_at IS NULL", to, id, from)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			now, err := sessionHost(ctx, tx, id)
			if err != nil {
				return err
			}
			return fmt.Errorf("host %q serves it now, not %q: %w", now, from, skills.ErrElsewhere)
		}
		if err := dropSessionToken(ctx, tx, id); err != nil {
			return err
		}
		return insertEvents(ctx, tx, evs)
	})
	if err != nil {
		return fmt.Errorf("move session %q to host %q: %w", id, to, err)
	}
	return nil
}

// counterUsers is the change counter PutUser and DeleteUser bump.
const counterUsers = "users"

// bumpCounter adds one to change counter name in transaction tx.
func bumpCounter(ctx context.Context, tx *txn, name string) error {
	return execOne(ctx, tx, fmt.Errorf("no change counter %q", name), "UPDATE change_counters SET n = n + 1 WHERE name = ?", name)
}

// Marks say, in one small query, whether what a host's views depend on
// (beside the skills, which SkillSet follows) changed since a host last
// looked: Users grows with every change of a user (added, changed,
// deleted), and Served is how many open sessions the host serves in the
// index, which only that host raises (creating a session, taking one
// over): fewer than it serves means some were closed or moved elsewhere.
type Marks struct {
	Users  int64
	Served int
}

// Marks reads the Marks of host.
func (db *DB) Marks(ctx context.Context, host string) (Marks, error) {
	var m Marks
	err := db.read(ctx, func(tx *txn) error {
		return tx.QueryRowContext(ctx, `SELECT (SELECT n FROM change_counters WHERE name = ?),
			(SELECT count(*) FROM sessions WHERE host = ? AND closed_at IS NULL)`, counterUsers, host).Scan(&m.Users, &m.Served)
	})
	if err != nil {
		return Marks{}, fmt.Errorf("read change marks: %w", err)
	}
	return m, nil
}

// Clock is the index's time: on PostgreSQL the server's, so hosts whose
// own clocks disagree still agree on when a heartbeat was recorded and on
// how long ago that was; on SQLite, whose hosts share one machine, this
// process's.
func (db *DB) Clock(ctx context.Context) (time.Time, error) {
	if db.d.name != "postgres" {
		return db.now().UTC(), nil
	}
	var micros int64
	err := db.read(ctx, func(tx *txn) error {
		return tx.QueryRowContext(ctx, "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)").Scan(&micros)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the index's clock: %w", err)
	}
	return time.UnixMicro(micros).UTC(), nil
}
