package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"skillfs/skills"
)

// metaEventsPruned is the meta key of the highest event id pruning removed:
// a client that saw an older id may have missed events.
const metaEventsPruned = "events_pruned_through"

// EventPage is a page of the event log and where the log stands.
type EventPage struct {
	Events []skills.Event
	// Pruned is the highest id retention removed (0: none): events at or
	// below it are gone.
	Pruned int64
	// Last is the highest id ever given to an event (0: none yet).
	Last int64
}

// checkEvent validates an event before it is stored and returns its encoded
// time and payload.
func checkEvent(e *skills.Event) (int64, string, error) {
	if e.Type == "" {
		return 0, "", fmt.Errorf("event without a type: %w", skills.ErrInvalid)
	}
	at, err := activationTime(e.At)
	if err != nil {
		return 0, "", fmt.Errorf("event %s: %w", e.Type, err)
	}
	payload := "{}"
	if len(e.Payload) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(e.Payload, &obj); err != nil || obj == nil {
			return 0, "", fmt.Errorf("event %s: payload is not a JSON object: %w", e.Type, skills.ErrInvalid)
		}
		payload = string(e.Payload)
	}
	return at, payload, nil
}

// insertEvents stores evs inside a write transaction and sets their ids.
func insertEvents(ctx context.Context, tx *txn, evs []*skills.Event) error {
	for _, e := range evs {
		at, payload, err := checkEvent(e)
		if err != nil {
			return err
		}
		// The parent of a sub-agent session's event is its session's.
		if err := tx.QueryRowContext(ctx, `INSERT INTO events (at, type, session, slug, payload, parent)
			VALUES (?1, ?2, ?3, ?4, ?5, COALESCE((SELECT parent FROM sessions WHERE id = ?3), '')) RETURNING id, parent`,
			at, string(e.Type), e.Session, e.Slug, payload).Scan(&e.ID, &e.Parent); err != nil {
			return fmt.Errorf("store event %s: %w", e.Type, err)
		}
	}
	return nil
}

// writeEvents is write for a change that stores evs with it: their ids are
// set when it returns nil, and zero otherwise (nothing was stored).
func (db *DB) writeEvents(ctx context.Context, evs []*skills.Event, fn func(tx *txn) error) error {
	err := db.write(ctx, fn)
	if err != nil {
		for _, e := range evs {
			e.ID = 0
		}
	}
	return err
}

// AddEvents stores events that report no change of the index (a skill a
// session can no longer read, say), in one transaction, and sets their ids.
func (db *DB) AddEvents(ctx context.Context, evs ...*skills.Event) error {
	err := db.writeEvents(ctx, evs, func(tx *txn) error { return insertEvents(ctx, tx, evs) })
	if err != nil {
		return fmt.Errorf("add events: %w", err)
	}
	return nil
}

// Events returns at most limit events with ids above after, oldest first,
// of session and its sub-agent sessions (every session's when it is ""), with the state of the log in
// the same snapshot: an after below Pruned may have missed events.
func (db *DB) Events(ctx context.Context, session string, after int64, limit int) (*EventPage, error) {
	if after < 0 || limit <= 0 {
		return nil, fmt.Errorf("list events after %d, limit %d: %w", after, limit, skills.ErrInvalid)
	}
	page := &EventPage{}
	err := db.read(ctx, func(tx *txn) error {
		var err error
		if page.Pruned, page.Last, err = eventBounds(ctx, tx); err != nil {
			return err
		}
		page.Events, err = queryAll(ctx, tx, func(sc scanner) (skills.Event, error) {
			var e skills.Event
			var at sql.NullInt64
			var payload string
			err := sc.Scan(&e.ID, &at, &e.Type, &e.Session, &e.Parent, &e.Slug, &payload)
			e.At = decodeTime(at)
			if payload != "{}" {
				e.Payload = []byte(payload)
			}
			return e, err
		}, `SELECT id, at, type, session, parent, slug, payload FROM events
			WHERE id > ?1 AND (CAST(?2 AS TEXT) = '' OR session = ?2 OR parent = ?2) ORDER BY id LIMIT ?3`, after, session, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list events after %d: %w", after, err)
	}
	return page, nil
}

// LastEventID returns the highest id ever given to an event, 0 when none.
func (db *DB) LastEventID(ctx context.Context) (int64, error) {
	var last int64
	err := db.read(ctx, func(tx *txn) error {
		var err error
		_, last, err = eventBounds(ctx, tx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("read the last event id: %w", err)
	}
	return last, nil
}

// eventBounds reads the highest pruned id and the highest id given. Only
// pruning removes events, and it records the highest id it removed, so the
// highest id given is the newest event's or, with none left, that one: read
// in the transaction's snapshot, unlike a sequence's counter, which counts
// ids of transactions not yet committed.
func eventBounds(ctx context.Context, tx *txn) (pruned, last int64, err error) {
	var v string
	err = tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", metaEventsPruned).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return 0, 0, err
	default:
		if pruned, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("meta %s %q: %w", metaEventsPruned, v, skills.ErrDamaged)
		}
	}
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM events").Scan(&last); err != nil {
		return 0, 0, err
	}
	return pruned, max(last, pruned), nil
}

// PruneEvents removes the events older than before and, of the rest, all
// but the newest keep; it returns how many it removed. The log remembers
// the highest id removed (EventPage.Pruned).
func (db *DB) PruneEvents(ctx context.Context, before time.Time, keep int64) (int64, error) {
	if keep < 0 {
		return 0, fmt.Errorf("prune events: keep %d: %w", keep, skills.ErrInvalid)
	}
	cut, err := activationTime(before)
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	var removed int64
	err = db.write(ctx, func(tx *txn) error {
		pruned, last, err := eventBounds(ctx, tx)
		if err != nil {
			return err
		}
		// Ids follow time but for clock steps: the oldest event not older
		// than before starts what is kept.
		var firstKept sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT id FROM events WHERE at >= ? ORDER BY id LIMIT 1", cut).Scan(&firstKept); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		through := last // everything is older than before
		if firstKept.Valid {
			through = firstKept.Int64 - 1
		}
		through = max(through, last-keep)
		if through <= pruned {
			return nil
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM events WHERE id <= ?", through)
		if err != nil {
			return err
		}
		if removed, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2",
			metaEventsPruned, strconv.FormatInt(through, 10))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	return removed, nil
}

// RestartEventIDsAfter makes every id the log gives from now on higher than
// after, and counts the ids up to after as pruned. An index rebuilt from the
// store has lost its log: with after above any id the old one gave, a client
// resuming from such an id is told to resync, and no id it holds is given
// again to another event.
func (db *DB) RestartEventIDsAfter(ctx context.Context, after int64) error {
	err := db.write(ctx, func(tx *txn) error {
		for _, stmt := range db.d.restartEvents {
			if _, err := tx.ExecContext(ctx, stmt, after); err != nil {
				return err
			}
		}
		pruned, _, err := eventBounds(ctx, tx)
		if err != nil || pruned >= after {
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2",
			metaEventsPruned, strconv.FormatInt(after, 10))
		return err
	})
	if err != nil {
		return fmt.Errorf("restart event ids after %d: %w", after, err)
	}
	return nil
}
