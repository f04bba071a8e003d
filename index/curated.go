package index

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"skillfs/skills"
	"skillfs/skills/git"
)

// AddCuratedSource registers src as curated together with the skills its
// first refresh found, in one transaction; a registered source is an error
// wrapping skills.ErrExists.
func (db *DB) AddCuratedSource(ctx context.Context, src skills.CuratedSource, list []skills.CuratedSkill) error {
	if src.Source == "" || src.AddedBy == "" {
		return fmt.Errorf("add curated source: empty source or user: %w", skills.ErrInvalid)
	}
	if err := git.ParseSpec(src.Source).RefuseCredentials("curated source"); err != nil {
		return err // every user lists them
	}
	added, err := encodeTime(src.AddedAt)
	if err != nil {
		return fmt.Errorf("add curated source %q: %w", src.Source, err)
	}
	err = db.write(ctx, func(tx *txn) error {
		if err := execOne(ctx, tx, skills.ErrExists, `INSERT INTO curated_sources (source, ref, added_by, added_at)
			VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, src.Source, src.Ref, src.AddedBy, added); err != nil {
			return err
		}
		return putCuratedSkills(ctx, tx, src.Source, src.Commit, src.RefreshedAt, list)
	})
	if err != nil {
		return fmt.Errorf("add curated source %q: %w", src.Source, err)
	}
	return nil
}

// RefreshCuratedSource replaces what the curated source offers with list,
// read at commit; a source that is not registered is an error wrapping
// skills.ErrNotFound.
func (db *DB) RefreshCuratedSource(ctx context.Context, source, commit string, at time.Time, list []skills.CuratedSkill) error {
	err := db.write(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM curated_skills WHERE source = ?", source); err != nil {
			return err
		}
		return putCuratedSkills(ctx, tx, source, commit, at, list)
	})
	if err != nil {
		return fmt.Errorf("refresh curated source %q: %w", source, err)
	}
	return nil
}

// putCuratedSkills records what a refresh of source found and clears its
// error; the source must be registered.
func putCuratedSkills(ctx context.Context, tx *txn, source, commit string, at time.Time, list []skills.CuratedSkill) error {
	when, err := encodeTime(at)
	if err != nil || when == nil {
		return fmt.Errorf("refresh time %v: %w", at, skills.ErrInvalid)
	}
	if err := execOne(ctx, tx, skills.ErrNotFound, "UPDATE curated_sources SET commit_seen = ?, refreshed_at = ?, error = '' WHERE source = ?",
		commit, when, source); err != nil {
		return err
	}
	for _, s := range list {
		if _, err := tx.ExecContext(ctx, `INSERT INTO curated_skills (source, path, slug, name, description, origin, commit_seen, refreshed_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, source, s.Path, s.Slug, s.Name, s.Description, s.Origin, commit, when); err != nil {
			return err
		}
	}
	return nil
}

// SetCuratedError records why the last refresh of a curated source
// failed; what it offered before stays.
func (db *DB) SetCuratedError(ctx context.Context, source, problem string) error {
	err := db.write(ctx, func(tx *txn) error {
		return execOne(ctx, tx, skills.ErrNotFound, "UPDATE curated_sources SET error = ? WHERE source = ?", problem, source)
	})
	if err != nil {
		return fmt.Errorf("record refresh of curated source %q: %w", source, err)
	}
	return nil
}

// RemoveCuratedSource unregisters a curated source and what it offers, or
// returns an error wrapping skills.ErrNotFound. Skills installed from it
// stay.
func (db *DB) RemoveCuratedSource(ctx context.Context, source string) error {
	if err := db.deleteName(ctx, "curated_sources", "source", source); err != nil {
		return fmt.Errorf("remove curated source %q: %w", source, err)
	}
	return nil
}

// CuratedSources returns the curated sources, sorted, each with the number
// of skills it offers.
func (db *DB) CuratedSources(ctx context.Context) ([]skills.CuratedSource, error) {
	var out []skills.CuratedSource
	err := db.read(ctx, func(tx *txn) (err error) {
		out, err = queryAll(ctx, tx, func(sc scanner) (s skills.CuratedSource, err error) {
			var added, refreshed sql.NullInt64
			err = sc.Scan(&s.Source, &s.Ref, &s.AddedBy, &added, &s.Commit, &refreshed, &s.Error, &s.Skills)
			s.AddedAt, s.RefreshedAt = decodeTime(added), decodeTime(refreshed)
			return s, err
		}, `SELECT source, ref, added_by, added_at, commit_seen, refreshed_at, error,
			(SELECT COUNT(*) FROM curated_skills k WHERE k.source = s.source)
			FROM curated_sources s ORDER BY source`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list curated sources: %w", err)
	}
	return out, nil
}

// CuratedSkills returns every skill the curated sources offer, sorted by
// slug, then source and path.
func (db *DB) CuratedSkills(ctx context.Context) ([]skills.CuratedSkill, error) {
	var out []skills.CuratedSkill
	err := db.read(ctx, func(tx *txn) (err error) {
		out, err = queryAll(ctx, tx, func(sc scanner) (s skills.CuratedSkill, err error) {
			var at sql.NullInt64
			err = sc.Scan(&s.Source, &s.Ref, &s.Path, &s.Slug, &s.Name, &s.Description, &s.Origin, &s.Commit, &at)
			s.RefreshedAt = decodeTime(at)
			return s, err
		}, `SELECT k.source, s.ref, k.path, k.slug, k.name, k.description, k.origin, k.commit_seen, k.refreshed_at
			FROM curated_skills k JOIN curated_sources s ON s.source = k.source ORDER BY k.slug, k.source, k.path`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list curated skills: %w", err)
	}
	return out, nil
}
