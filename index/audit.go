package index

import (
	"context"
	"database/sql"
	"fmt"

	"skillfs/skills"
)

// upsertRead adds ?5 reads first made at ?4 to file ?3 of skill ?2 in
// session ?1, for sessions that exist.
const upsertRead = `INSERT INTO read_audit (session, slug, path, first_at, reads)
	SELECT CAST(?1 AS TEXT), CAST(?2 AS TEXT), CAST(?3 AS TEXT), CAST(?4 AS BIGINT), CAST(?5 AS BIGINT)
	WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1)
	ON CONFLICT (session, slug, path) DO UPDATE SET
		reads = read_audit.reads + excluded.reads,
		first_at = CASE WHEN excluded.first_at < read_audit.first_at THEN excluded.first_at ELSE read_audit.first_at END`

// AddReads adds a batch of the read audit in one transaction: reads +=
// Reads, first time = the earlier of the two. Reads of sessions that do not
// exist are dropped, so one stale session cannot lose the batch. An entry
// without session, slug or path, with a negative count or a zero time is
// skills.ErrInvalid and nothing is written.
func (db *DB) AddReads(ctx context.Context, reads []skills.FileRead) error {
	type row struct {
		r  skills.FileRead
		at int64
	}
	rows := make([]row, 0, len(reads))
	for _, r := range reads {
		if r.Session == "" || r.Slug == "" || r.Path == "" || r.Reads < 0 {
			return fmt.Errorf("add reads: entry %+v: %w", r, skills.ErrInvalid)
		}
		at, err := activationTime(r.FirstAt)
		if err != nil {
			return fmt.Errorf("add reads of %s/%s in session %q: %w", r.Slug, r.Path, r.Session, err)
		}
		rows = append(rows, row{r, at})
	}
	if len(rows) == 0 {
		return nil
	}
	err := db.write(ctx, func(tx *txn) error {
		stmt, err := tx.PrepareContext(ctx, upsertRead)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, x := range rows {
			if _, err := stmt.ExecContext(ctx, x.r.Session, x.r.Slug, x.r.Path, x.at, x.r.Reads); err != nil {
				return fmt.Errorf("%s/%s in session %q: %w", x.r.Slug, x.r.Path, x.r.Session, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add reads: %w", err)
	}
	return nil
}

// ReadAudit returns the files a session read, ordered by slug and path; an
// unknown session is skills.ErrNotFound (a closed one keeps its audit).
func (db *DB) ReadAudit(ctx context.Context, session string) ([]skills.FileRead, error) {
	list := []skills.FileRead{}
	err := db.read(ctx, func(tx *txn) error {
		if _, err := sessionClosed(ctx, tx, session); err != nil {
			return err
		}
		var err error
		list, err = queryAll(ctx, tx, func(sc scanner) (skills.FileRead, error) {
			r := skills.FileRead{Session: session}
			var first sql.NullInt64
			err := sc.Scan(&r.Slug, &r.Path, &first, &r.Reads)
			r.FirstAt = decodeTime(first)
			return r, err
		}, "SELECT slug, path, first_at, reads FROM read_audit WHERE session = ? ORDER BY slug, path", session)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read audit of session %q: %w", session, err)
	}
	return list, nil
}
