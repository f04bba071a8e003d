package index

import (
	"context"
	"encoding/json"
	"fmt"

	"skillfs/skills"
	"skillfs/skills/diff"
)

// DiffStatKey names a stored diffstat: version Hash of a skill against
// version Against.
type DiffStatKey struct{ Hash, Against string }

// DiffStats returns the stored diffstats of slug's versions.
func (db *DB) DiffStats(ctx context.Context, slug string) (map[DiffStatKey]diff.Stat, error) {
	out := map[DiffStatKey]diff.Stat{}
	err := db.read(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, "SELECT hash, against, stat FROM version_diffstats WHERE slug = ?", slug)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k DiffStatKey
			var stat string
			if err := rows.Scan(&k.Hash, &k.Against, &stat); err != nil {
				return err
			}
			var st diff.Stat
			if err := json.Unmarshal([]byte(stat), &st); err != nil {
				continue // unreadable: computed again
			}
			out[k] = st
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("diffstats of skill %q: %w", slug, err)
	}
	return out, nil
}

// PutDiffStat stores the diffstat of version k.Hash of slug against
// k.Against. Both versions must be stored (skills.ErrNotFound otherwise,
// as when one was removed meanwhile); a stat already stored is kept.
func (db *DB) PutDiffStat(ctx context.Context, slug string, k DiffStatKey, st diff.Stat) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	err = db.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO version_diffstats (slug, hash, against, stat)
			SELECT CAST(?1 AS TEXT), CAST(?2 AS TEXT), CAST(?3 AS TEXT), CAST(?4 AS TEXT) WHERE
				(SELECT COUNT(*) FROM versions WHERE slug = ?1 AND hash IN (?2, ?3)) = 2
			ON CONFLICT (slug, hash, against) DO NOTHING`, slug, k.Hash, k.Against, string(data))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			var ok bool
			if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM version_diffstats WHERE slug = ? AND hash = ? AND against = ?)",
				slug, k.Hash, k.Against).Scan(&ok); err != nil {
				return err
			}
			if !ok {
				return skills.ErrNotFound
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store the diffstat of version %s of skill %q against %s: %w", k.Hash, slug, k.Against, err)
	}
	return nil
}
