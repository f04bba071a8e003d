package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"skillfs/skills"
)

// metaDataDirID is the meta key of the data directory's identity.
const metaDataDirID = "data_directory_id"

// DataDirID returns the identity of the data directory this index belongs
// to, "" when it has none yet (an index made before identities existed, or
// a new one).
func (db *DB) DataDirID(ctx context.Context) (string, error) {
	var id string
	err := db.read(ctx, func(tx *txn) error {
		err := tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", metaDataDirID).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read data directory identity: %w", err)
	}
	return id, nil
}

// SetDataDirID records the identity of the data directory; an index that
// has one already keeps it (skills.ErrExists unless it is the same).
func (db *DB) SetDataDirID(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("record data directory identity: empty: %w", skills.ErrInvalid)
	}
	err := db.write(ctx, func(tx *txn) error {
		var old string
		err := tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", metaDataDirID).Scan(&old)
		switch {
		case err == nil && old == id:
			return nil
		case err == nil:
			return fmt.Errorf("the index belongs to data directory %s: %w", old, skills.ErrExists)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES (?, ?)", metaDataDirID, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("record data directory identity: %w", err)
	}
	return nil
}

// Rows counts what the index holds: skills, users, sessions. A repair uses
// it to tell an index that lost its content from one that never had any.
type Rows struct {
	Skills, Versions, Users, Sessions int
}

// Count returns the row counts of the main tables.
func (db *DB) Count(ctx context.Context) (Rows, error) {
	var r Rows
	err := db.read(ctx, func(tx *txn) error {
		return tx.QueryRowContext(ctx, `SELECT
			(SELECT COUNT(*) FROM skills), (SELECT COUNT(*) FROM versions),
			(SELECT COUNT(*) FROM users), (SELECT COUNT(*) FROM sessions)`).Scan(&r.Skills, &r.Versions, &r.Users, &r.Sessions)
	})
	if err != nil {
		return r, fmt.Errorf("count index rows: %w", err)
	}
	return r, nil
}

// Totals are the sizes the daemon's metrics report: skills, their stored
// versions and the bytes of those versions' files as recorded at install,
// and the current binds of open sessions.
type Totals struct {
	Skills, Versions, Binds int
	Bytes                   int64
}

// Totals reads the Totals in one query over the index, never the store.
func (db *DB) Totals(ctx context.Context) (Totals, error) {
	var t Totals
	err := db.read(ctx, func(tx *txn) error {
		return tx.QueryRowContext(ctx, `SELECT
			(SELECT COUNT(*) FROM skills), (SELECT COUNT(*) FROM versions),
			(SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM versions),
			(SELECT COUNT(*) FROM session_binds b JOIN sessions s ON s.id = b.session WHERE `+currentBind+`)`).
			Scan(&t.Skills, &t.Versions, &t.Bytes, &t.Binds)
	})
	if err != nil {
		return t, fmt.Errorf("read index totals: %w", err)
	}
	return t, nil
}

// Check checks the index: on SQLite, an integrity check over the whole
// file; on PostgreSQL, that the schema is there, whole and up to date. A
// damaged index is an error wrapping skills.ErrDamaged that quotes the first
// findings.
func (db *DB) Check(ctx context.Context) error {
	var problems []string
	err := db.read(ctx, func(tx *txn) error {
		var err error
		problems, err = db.d.problems(ctx, tx)
		return err
	})
	if err != nil {
		return fmt.Errorf("check index %q: %w", db.path, classify(err))
	}
	if len(problems) > 0 {
		return fmt.Errorf("check index %q: %q: %w", db.path, problems, skills.ErrDamaged)
	}
	return nil
}

// metaReadyAt is the meta key a readiness check writes.
const metaReadyAt = "ready_checked_at"

// CheckWritable commits a small write, durably, as every catalog change
// must: a read-only or full disk, a lock held elsewhere past the busy
// timeout, or a damaged file fails it.
func (db *DB) CheckWritable(ctx context.Context) error {
	at, err := encodeTime(db.now())
	if err != nil {
		return err
	}
	err = db.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2", metaReadyAt, fmt.Sprint(at))
		return err
	})
	if err != nil {
		return fmt.Errorf("write to the index: %w", classify(err))
	}
	return nil
}
