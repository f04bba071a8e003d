package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"skillfs/skills"
)

// OpenDelta is a batch of later opens of one skill in one session, counted
// in memory and flushed with AddOpens.
type OpenDelta struct {
	Session, Slug string
	Opens         int64     // opens since the last flush
	LastAt        time.Time // time of the latest of them
}

// upsertActivation adds ?4 opens at time ?3 to (session ?1, slug ?2). A new
// row takes the next seq of its session, so seq orders a session's
// activations by first activation. Rows are only made for sessions that
// exist. The casts type the parameters for PostgreSQL, which does not take
// them from the columns of an INSERT … SELECT.
const upsertActivation = `INSERT INTO activations (session, slug, first_at, last_at, opens, seq)
	SELECT CAST(?1 AS TEXT), CAST(?2 AS TEXT), CAST(?3 AS BIGINT), CAST(?3 AS BIGINT), CAST(?4 AS BIGINT),
		COALESCE((SELECT MAX(seq) FROM activations WHERE session = ?1), 0) + 1
	WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1)
	ON CONFLICT (session, slug) DO UPDATE SET
		opens = activations.opens + excluded.opens,
		last_at = CASE WHEN excluded.last_at > activations.last_at THEN excluded.last_at ELSE activations.last_at END`

// activationTime encodes the time of an open, which must be set.
func activationTime(at time.Time) (int64, error) {
	if at.IsZero() {
		return 0, fmt.Errorf("zero time: %w", skills.ErrInvalid)
	}
	n, err := encodeTime(at)
	if err != nil {
		return 0, err
	}
	return n.(int64), nil
}

// RecordActivation counts one open of slug's SKILL.md in session at time
// at, durably: when it returns nil the open is on disk. The first open
// creates the row (first is true) and fixes its first time; later ones add
// to the count and move the last time forward. An unknown session is
// skills.ErrNotFound. The events given are stored with the first open, in
// its transaction (their ids set), and not at all with a later one. A
// closed session is skills.ErrNotFound too: it records nothing more.
func (db *DB) RecordActivation(ctx context.Context, session, slug string, at time.Time, evs ...*skills.Event) (first bool, err error) {
	wrap := func(err error) error {
		return fmt.Errorf("record activation of skill %q in session %q: %w", slug, session, err)
	}
	if slug == "" {
		return false, wrap(fmt.Errorf("empty slug: %w", skills.ErrInvalid))
	}
	n, err := activationTime(at)
	if err != nil {
		return false, wrap(err)
	}
	err = db.writeEvents(ctx, evs, func(tx *txn) error {
		switch closed, err := sessionClosed(ctx, tx, session); {
		case err != nil:
			return err
		case closed:
			// An open racing the session's close: the close revokes the
			// view, and nothing may follow its closed event.
			return fmt.Errorf("session is closed: %w", skills.ErrNotFound)
		}
		var known bool
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM activations WHERE session = ? AND slug = ?)",
			session, slug).Scan(&known); err != nil {
			return err
		}
		first = !known
		if _, err := tx.ExecContext(ctx, upsertActivation, session, slug, n, 1); err != nil || !first {
			return err
		}
		return insertEvents(ctx, tx, evs)
	})
	if err != nil {
		return false, wrap(err)
	}
	return first, nil
}

// AddOpens adds batched opens in one transaction: opens += Opens, last time
// = the later of the two. A delta for a skill without a row creates it, with
// LastAt as its first time; deltas of sessions that do not exist are
// dropped, so one stale session cannot lose the whole batch. Deltas of zero
// opens are skipped; a negative count or a zero time is skills.ErrInvalid and
// nothing is written.
func (db *DB) AddOpens(ctx context.Context, deltas []OpenDelta) error {
	rows, err := checkDeltas(deltas)
	if err != nil || len(rows) == 0 {
		return err
	}
	err = db.write(ctx, func(tx *txn) error { return addOpens(ctx, tx, rows) })
	if err != nil {
		return fmt.Errorf("add opens: %w", err)
	}
	return nil
}

// ApplySpill adds the opens of a batch a daemon kept in its activation
// journal — opens it could not store when they happened, because the index
// could not be reached or could not take them — exactly once: the batch's id
// is recorded in the same transaction, and a batch applied before is skipped
// (applied is false). Deltas are checked as by AddOpens.
//
// An event given for a delta's (session, slug) makes that delta a first
// open at its LastAt, with the event to store if it is the session's first
// of the skill: the event is stored (its id set) only when the delta creates
// the row, and a first open whose row already has LastAt as its first time
// is skipped, since it is the one a write whose answer was lost stored. A
// first open in a closed session creates nothing: nothing may follow its
// closed event.
func (db *DB) ApplySpill(ctx context.Context, id string, deltas []OpenDelta, evs ...*skills.Event) (applied bool, err error) {
	if id == "" {
		return false, fmt.Errorf("apply spill: empty id: %w", skills.ErrInvalid)
	}
	rows, err := checkDeltas(deltas)
	if err != nil {
		return false, err
	}
	err = db.writeEvents(ctx, evs, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO applied_spills (id, applied_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING",
			id, db.now().UnixNano())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // applied before: nothing to add
		}
		applied = true
		var plain []deltaRow
		var stored []*skills.Event
		for _, r := range rows {
			first := eventsOf(evs, r.d.Session, r.d.Slug)
			if len(first) == 0 {
				plain = append(plain, r)
				continue
			}
			created, err := addFirstOpen(ctx, tx, r)
			if err != nil {
				return err
			}
			if created {
				stored = append(stored, first...)
			}
		}
		if len(plain) > 0 {
			if err := addOpens(ctx, tx, plain); err != nil {
				return err
			}
		}
		return insertEvents(ctx, tx, stored)
	})
	if err != nil {
		return false, fmt.Errorf("apply spill %s: %w", id, err)
	}
	return applied, nil
}

// eventsOf returns the events of evs about slug in session.
func eventsOf(evs []*skills.Event, session, slug string) []*skills.Event {
	var out []*skills.Event
	for _, e := range evs {
		if e.Session == session && e.Slug == slug {
			out = append(out, e)
		}
	}
	return out
}

// addFirstOpen adds a first open kept in a journal (see ApplySpill) and
// reports whether it created the row.
func addFirstOpen(ctx context.Context, tx *txn, r deltaRow) (created bool, err error) {
	var firstAt int64
	err = tx.QueryRowContext(ctx, "SELECT first_at FROM activations WHERE session = ? AND slug = ?",
		r.d.Session, r.d.Slug).Scan(&firstAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		closed, err := sessionClosed(ctx, tx, r.d.Session)
		if errors.Is(err, skills.ErrNotFound) || closed {
			return false, nil // as AddOpens: a session that is gone takes nothing
		}
		if err != nil {
			return false, err
		}
		created = true
	case err != nil:
		return false, err
	case firstAt == r.at:
		return false, nil // stored already, by the write whose answer was lost
	}
	_, err = tx.ExecContext(ctx, upsertActivation, r.d.Session, r.d.Slug, r.at, r.d.Opens)
	return created, err
}

// deltaRow is a checked delta with its encoded time.
type deltaRow struct {
	d  OpenDelta
	at int64
}

// checkDeltas validates deltas and drops those of zero opens.
func checkDeltas(deltas []OpenDelta) ([]deltaRow, error) {
	rows := make([]deltaRow, 0, len(deltas))
	for _, d := range deltas {
		if d.Opens < 0 || d.Session == "" || d.Slug == "" {
			return nil, fmt.Errorf("add opens: delta %+v: %w", d, skills.ErrInvalid)
		}
		if d.Opens == 0 {
			continue
		}
		at, err := activationTime(d.LastAt)
		if err != nil {
			return nil, fmt.Errorf("add opens of skill %q in session %q: %w", d.Slug, d.Session, err)
		}
		rows = append(rows, deltaRow{d, at})
	}
	return rows, nil
}

// addOpens writes checked deltas inside a write transaction.
func addOpens(ctx context.Context, tx *txn, rows []deltaRow) error {
	stmt, err := tx.PrepareContext(ctx, upsertActivation)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, r := range rows {
		if _, err := stmt.ExecContext(ctx, r.d.Session, r.d.Slug, r.at, r.d.Opens); err != nil {
			return fmt.Errorf("skill %q in session %q: %w", r.d.Slug, r.d.Session, err)
		}
	}
	return nil
}

// Activations returns the activations of session in order of first
// activation; an unknown session is skills.ErrNotFound.
func (db *DB) Activations(ctx context.Context, session string) ([]skills.Activation, error) {
	list := []skills.Activation{}
	err := db.read(ctx, func(tx *txn) error {
		if _, err := sessionClosed(ctx, tx, session); err != nil {
			return err
		}
		var err error
		list, err = queryAll(ctx, tx, func(sc scanner) (skills.Activation, error) {
			a := skills.Activation{Session: session}
			var first, last sql.NullInt64
			err := sc.Scan(&a.Slug, &first, &last, &a.Opens)
			a.FirstAt, a.LastAt = decodeTime(first), decodeTime(last)
			return a, err
		}, "SELECT slug, first_at, last_at, opens FROM activations WHERE session = ? ORDER BY seq", session)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list activations of session %q: %w", session, err)
	}
	return list, nil
}

// PruneApplied forgets the ids of the batches applied before before and
// returns how many it forgot. A batch is found again only when a daemon
// stopped between delivering its journal and clearing it, and delivers it
// at its next start, so the ids are needed for as long as a host may stay
// stopped.
func (db *DB) PruneApplied(ctx context.Context, before time.Time) (int64, error) {
	n, err := db.writeCount(ctx, "DELETE FROM applied_spills WHERE applied_at < ?", before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("prune applied batches: %w", err)
	}
	return n, nil
}
