package index

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"skillfs/skills"
)

// RecordInstall stores the record of an install a session asked for and
// sets its id.
func (db *DB) RecordInstall(ctx context.Context, in *skills.Install) error {
	at, err := activationTime(in.At)
	if err != nil {
		return fmt.Errorf("record install: %w", err)
	}
	if in.User == "" || in.Session == "" || in.Outcome == "" {
		return fmt.Errorf("record install: user, session and outcome are needed: %w", skills.ErrInvalid)
	}
	err = db.write(ctx, func(tx *txn) error {
		return tx.QueryRowContext(ctx, `INSERT INTO installs (at, uid, session, kind, source, slug, version, outcome, error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			at, in.User, in.Session, in.Kind, in.Source, in.Slug, in.Version, in.Outcome, in.Error).Scan(&in.ID)
	})
	if err != nil {
		return fmt.Errorf("record install for session %q: %w", in.Session, err)
	}
	return nil
}

func scanInstall(sc scanner) (skills.Install, error) {
	var in skills.Install
	var at sql.NullInt64
	err := sc.Scan(&in.ID, &at, &in.User, &in.Session, &in.Kind, &in.Source, &in.Slug, &in.Version, &in.Outcome, &in.Error)
	in.At = decodeTime(at)
	return in, err
}

const installColumns = "id, at, uid, session, kind, source, slug, version, outcome, error"

// Installs are the install records of session id, oldest first.
func (db *DB) Installs(ctx context.Context, session string) ([]skills.Install, error) {
	return readAll(ctx, db, "list installs", scanInstall,
		"SELECT "+installColumns+" FROM installs WHERE session = ? ORDER BY id", session)
}

// InstallTimes are the times of the installs user uid asked for since the
// time given, oldest first, whatever their outcome but those refused for a
// quota (code): a client told to wait does not lengthen its wait by asking.
func (db *DB) InstallTimes(ctx context.Context, uid string, since time.Time, quotaCode string) ([]time.Time, error) {
	at, err := activationTime(since)
	if err != nil {
		return nil, fmt.Errorf("count installs: %w", err)
	}
	return readAll(ctx, db, "count the installs of "+uid, func(sc scanner) (time.Time, error) {
		var n sql.NullInt64
		err := sc.Scan(&n)
		return decodeTime(n), err
	}, "SELECT at FROM installs WHERE uid = ? AND at >= ? AND outcome <> ? ORDER BY at, id", uid, at, quotaCode)
}

// Usage is what a user's skills hold in the catalog.
type Usage struct {
	Skills int   // skills the user created
	Bytes  int64 // the bytes of every version of them
}

// UserUsage is what the skills user uid created hold.
func (db *DB) UserUsage(ctx context.Context, uid string) (Usage, error) {
	var u Usage
	err := db.read(ctx, func(tx *txn) error {
		return tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM skills WHERE creator = ?),
			COALESCE((SELECT sum(v.bytes) FROM versions v JOIN skills s ON s.slug = v.slug WHERE s.creator = ?), 0)`,
			uid, uid).Scan(&u.Skills, &u.Bytes)
	})
	if err != nil {
		return Usage{}, fmt.Errorf("what the skills of %q hold: %w", uid, err)
	}
	return u, nil
}
