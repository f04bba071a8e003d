package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"skillfs/skills"
	"skillfs/skills/store"
)

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

const skillColumns = `slug, name, description, source_type, source, share, enabled,
	skill_deps, tool_deps, mcp_deps, current_version, creator, created_at, updated_at, plugin`

func scanSkill(sc scanner) (*skills.Skill, error) {
	var (
		s                 skills.Skill
		share, sd, td, md string
		created, updated  sql.NullInt64
	)
	if err := sc.Scan(&s.Slug, &s.Name, &s.Description, &s.SourceType, &s.Source, &share, &s.Enabled,
		&sd, &td, &md, &s.Version, &s.Creator, &created, &updated, &s.Plugin); err != nil {
		return nil, err
	}
	var err error
	if s.Share, err = decodeShare(share); err != nil {
		return nil, err
	}
	if s.SkillDependencies, err = decodeList("skill dependencies", sd); err != nil {
		return nil, err
	}
	if s.ToolDependencies, err = decodeList("tool dependencies", td); err != nil {
		return nil, err
	}
	if s.MCPDependencies, err = decodeList("MCP dependencies", md); err != nil {
		return nil, err
	}
	s.CreatedAt = decodeTime(created)
	s.UpdatedAt = decodeTime(updated)
	return &s, nil
}

// skillFields are the encoded columns of a skill that callers may change.
type skillFields struct {
	share, skillDeps, toolDeps, mcpDeps string
	created, updated                    any
}

func encodeSkill(s *skills.Skill) (skillFields, error) {
	var f skillFields
	var err error
	if s.Slug == "" {
		return f, fmt.Errorf("empty slug: %w", skills.ErrInvalid)
	}
	if !validSourceType(s.SourceType) {
		return f, fmt.Errorf("source type %q: %w", s.SourceType, skills.ErrInvalid)
	}
	if f.share, err = encodeShare(s.Share); err != nil {
		return f, err
	}
	if f.skillDeps, err = encodeList("skill dependencies", s.SkillDependencies); err != nil {
		return f, err
	}
	if f.toolDeps, err = encodeList("tool dependencies", s.ToolDependencies); err != nil {
		return f, err
	}
	if f.mcpDeps, err = encodeList("MCP dependencies", s.MCPDependencies); err != nil {
		return f, err
	}
	if f.created, err = encodeTime(s.CreatedAt); err != nil {
		return f, fmt.Errorf("created at: %w", err)
	}
	if f.updated, err = encodeTime(s.UpdatedAt); err != nil {
		return f, fmt.Errorf("updated at: %w", err)
	}
	return f, nil
}

// checkVersion validates v as a version of slug.
func checkVersion(slug string, v *skills.Version) error {
	switch {
	case v == nil:
		return fmt.Errorf("no version: %w", skills.ErrInvalid)
	case v.Slug != "" && v.Slug != slug:
		return fmt.Errorf("version belongs to %q: %w", v.Slug, skills.ErrInvalid)
	case v.Hash == "":
		return fmt.Errorf("version without hash: %w", skills.ErrInvalid)
	case !validSourceType(v.SourceType):
		return fmt.Errorf("version source type %q: %w", v.SourceType, skills.ErrInvalid)
	case v.Files < 0 || v.Bytes < 0:
		return fmt.Errorf("version with %d files, %d bytes: %w", v.Files, v.Bytes, skills.ErrInvalid)
	}
	return nil
}

// insertVersion stores v for slug unless (slug, v.Hash) is already stored.
func insertVersion(ctx context.Context, tx *txn, slug string, v *skills.Version) error {
	at, err := encodeTime(v.InstalledAt)
	if err != nil {
		return fmt.Errorf("installed at: %w", err)
	}
	// The path is derived, and relative: an absolute one would tie the
	// index to one spelling of the data directory.
	_, err = tx.ExecContext(ctx, `INSERT INTO versions
		(slug, hash, path, source_type, source, ref, commit_id, installer, installed_at, previous, files, bytes, worktree)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (slug, hash) DO NOTHING`,
		slug, v.Hash, store.VersionRelPath(slug, v.Hash), v.SourceType, v.Source, v.Ref, v.Commit, v.Installer, at, v.Previous, v.Files, v.Bytes, v.Worktree)
	return err
}

const versionColumns = `slug, hash, path, source_type, source, ref, commit_id, installer, installed_at, previous, files, bytes, worktree`

func scanVersion(sc scanner) (*skills.Version, error) {
	var v skills.Version
	var at sql.NullInt64
	if err := sc.Scan(&v.Slug, &v.Hash, &v.Path, &v.SourceType, &v.Source, &v.Ref, &v.Commit,
		&v.Installer, &at, &v.Previous, &v.Files, &v.Bytes, &v.Worktree); err != nil {
		return nil, err
	}
	v.InstalledAt = decodeTime(at)
	return &v, nil
}

// skillExists reports whether slug is in the catalog.
func skillExists(ctx context.Context, tx *txn, slug string) (bool, error) {
	var ok bool
	err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM skills WHERE slug = ?)", slug).Scan(&ok)
	return ok, err
}

// insertSkillRow inserts the row of a new skill whose current version is
// current; a taken slug is skills.ErrExists.
func insertSkillRow(ctx context.Context, tx *txn, s *skills.Skill, f skillFields, current string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO skills (`+skillColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.Slug, s.Name, s.Description, s.SourceType, s.Source, f.share, s.Enabled,
		f.skillDeps, f.toolDeps, f.mcpDeps, current, s.Creator, f.created, f.updated, s.Plugin)
	if isUniqueViolation(err) {
		return fmt.Errorf("%w: %w", skills.ErrExists, err)
	}
	return err
}

// InsertSkill adds a new skill with its first version, which becomes the
// current one whatever s.Version says. A taken slug, also when another
// process wins a race for it, is an error wrapping skills.ErrExists.
func (db *DB) InsertSkill(ctx context.Context, s *skills.Skill, v *skills.Version) error {
	if s == nil {
		return fmt.Errorf("insert skill: no skill: %w", skills.ErrInvalid)
	}
	f, err := encodeSkill(s)
	if err == nil {
		err = checkVersion(s.Slug, v)
	}
	if err != nil {
		return fmt.Errorf("insert skill %q: %w", s.Slug, err)
	}
	err = db.write(ctx, func(tx *txn) error {
		// BEGIN IMMEDIATE holds the write lock, so this check cannot go stale
		// before the insert; the constraint below is the backstop.
		if ok, err := skillExists(ctx, tx, s.Slug); err != nil {
			return err
		} else if ok {
			return skills.ErrExists
		}
		if err := insertSkillRow(ctx, tx, s, f, v.Hash); err != nil {
			return err
		}
		return insertVersion(ctx, tx, s.Slug, v)
	})
	if err != nil {
		return fmt.Errorf("insert skill %q: %w", s.Slug, err)
	}
	return nil
}

// AddVersion stores v as a version of s.Slug (once: a hash already stored
// is not duplicated) and makes it current. It also stores s's name,
// description, source type, source, dependencies and UpdatedAt, which come
// from the new version's manifest and provenance. Share, enabled, creator and
// CreatedAt are left alone. A missing slug is an error wrapping
// skills.ErrNotFound.
func (db *DB) AddVersion(ctx context.Context, s *skills.Skill, v *skills.Version) error {
	if s == nil {
		return fmt.Errorf("add version: no skill: %w", skills.ErrInvalid)
	}
	f, err := encodeSkill(s)
	if err == nil {
		err = checkVersion(s.Slug, v)
	}
	if err != nil {
		return fmt.Errorf("add version to skill %q: %w", s.Slug, err)
	}
	err = db.write(ctx, func(tx *txn) error {
		if ok, err := skillExists(ctx, tx, s.Slug); err != nil {
			return err
		} else if !ok {
			return skills.ErrNotFound
		}
		if err := insertVersion(ctx, tx, s.Slug, v); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE skills SET name = ?, description = ?, source_type = ?, source = ?,
			skill_deps = ?, tool_deps = ?, mcp_deps = ?, current_version = ?, updated_at = ?, plugin = ?
			WHERE slug = ?`,
			s.Name, s.Description, s.SourceType, s.Source, f.skillDeps, f.toolDeps, f.mcpDeps, v.Hash, f.updated, s.Plugin, s.Slug)
		return err
	})
	if err != nil {
		return fmt.Errorf("add version %s to skill %q: %w", v.Hash, s.Slug, err)
	}
	return nil
}

// Skill returns the catalog entry of slug, or an error wrapping
// skills.ErrNotFound.
func (db *DB) Skill(ctx context.Context, slug string) (*skills.Skill, error) {
	var s *skills.Skill
	err := db.read(ctx, func(tx *txn) error {
		var err error
		s, err = getSkill(ctx, tx, slug)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get skill %q: %w", slug, err)
	}
	return s, nil
}

func getSkill(ctx context.Context, tx *txn, slug string) (*skills.Skill, error) {
	s, err := scanSkill(tx.QueryRowContext(ctx, "SELECT "+skillColumns+" FROM skills WHERE slug = ?", slug))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, skills.ErrNotFound
	}
	return s, err
}

// Skills returns the whole catalog sorted by slug, as copies the caller may
// change (the lists inside them are shared: replace them, never write into
// them). Readers that change nothing use SkillSet.
func (db *DB) Skills(ctx context.Context) ([]*skills.Skill, error) {
	set, err := db.SkillSet(ctx)
	if err != nil {
		return nil, fmt.Errorf("list skills: %w", err)
	}
	out := make([]*skills.Skill, set.Len())
	for i, s := range set.All() {
		c := *s
		out[i] = &c
	}
	return out, nil
}

// UpdateSkill reads slug, lets fn change it and stores the result, all in
// one immediate transaction, so concurrent updates (from any process) never
// lose each other's changes. It stores the share config, enabled, the
// dependency lists, name and description; other fields fn changes are
// ignored. UpdatedAt becomes the current time. An error from fn aborts the
// update and is returned as is. fn runs while the write lock is held: it
// must be quick and must not write through db.
func (db *DB) UpdateSkill(ctx context.Context, slug string, fn func(*skills.Skill) error) (*skills.Skill, error) {
	var out *skills.Skill
	var fnErr error
	err := db.write(ctx, func(tx *txn) error {
		s, err := getSkill(ctx, tx, slug)
		if err != nil {
			return err
		}
		if fnErr = fn(s); fnErr != nil {
			return fnErr
		}
		s.Slug = slug
		s.UpdatedAt = db.now()
		f, err := encodeSkill(s)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE skills SET name = ?, description = ?, share = ?, enabled = ?,
			skill_deps = ?, tool_deps = ?, mcp_deps = ?, updated_at = ?
			WHERE slug = ?`,
			s.Name, s.Description, f.share, s.Enabled, f.skillDeps, f.toolDeps, f.mcpDeps, f.updated, slug); err != nil {
			return err
		}
		out, err = getSkill(ctx, tx, slug)
		return err
	})
	if fnErr != nil {
		return nil, fnErr
	}
	if err != nil {
		return nil, fmt.Errorf("update skill %q: %w", slug, err)
	}
	return out, nil
}

// DeleteSkill removes slug and all its versions, and returns the removed
// versions (newest first) so the caller can remove their content.
// Activations of the skill stay as history, and so do sessions' pins of it:
// the host serving each open session finds the skill gone when it next
// looks at the catalog, takes it from the view and records the revocation
// (a pin dropped here would leave nothing for another host to notice).
func (db *DB) DeleteSkill(ctx context.Context, slug string) ([]*skills.Version, error) {
	var vs []*skills.Version
	err := db.write(ctx, func(tx *txn) error {
		if ok, err := skillExists(ctx, tx, slug); err != nil {
			return err
		} else if !ok {
			return skills.ErrNotFound
		}
		var err error
		if vs, err = listVersions(ctx, tx, slug); err != nil {
			return err
		}
		// Versions go by ON DELETE CASCADE.
		_, err = tx.ExecContext(ctx, "DELETE FROM skills WHERE slug = ?", slug)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete skill %q: %w", slug, err)
	}
	return vs, nil
}

func listVersions(ctx context.Context, tx *txn, slug string) ([]*skills.Version, error) {
	return queryAll(ctx, tx, scanVersion, "SELECT "+versionColumns+" FROM versions WHERE slug = ? ORDER BY seq DESC", slug)
}

// Versions returns the versions of slug, newest first, or an error wrapping
// skills.ErrNotFound if there is no such skill.
func (db *DB) Versions(ctx context.Context, slug string) ([]*skills.Version, error) {
	var vs []*skills.Version
	err := db.read(ctx, func(tx *txn) error {
		if ok, err := skillExists(ctx, tx, slug); err != nil {
			return err
		} else if !ok {
			return skills.ErrNotFound
		}
		var err error
		vs, err = listVersions(ctx, tx, slug)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list versions of skill %q: %w", slug, err)
	}
	return vs, nil
}

// Version returns one version of slug, or an error wrapping
// skills.ErrNotFound.
func (db *DB) Version(ctx context.Context, slug, hash string) (*skills.Version, error) {
	var v *skills.Version
	err := db.read(ctx, func(tx *txn) error {
		var err error
		v, err = scanVersion(tx.QueryRowContext(ctx, "SELECT "+versionColumns+" FROM versions WHERE slug = ? AND hash = ?", slug, hash))
		if errors.Is(err, sql.ErrNoRows) {
			return skills.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get version %s of skill %q: %w", hash, slug, err)
	}
	return v, nil
}

// AllVersions returns every version of every skill, by slug and then newest
// first, so the content store can be compared with the index.
func (db *DB) AllVersions(ctx context.Context) ([]*skills.Version, error) {
	return readAll(ctx, db, "list versions", scanVersion, "SELECT "+versionColumns+" FROM versions ORDER BY slug, seq DESC")
}

// RestoreSkill adds a skill with several versions at once, as rebuilt from
// the content store by a repair: versions in the order given (oldest
// first), s.Version the current one, which must be among them. A taken
// slug is skills.ErrExists.
func (db *DB) RestoreSkill(ctx context.Context, s *skills.Skill, vs []*skills.Version) error {
	if s == nil || len(vs) == 0 {
		return fmt.Errorf("restore skill: no skill or no version: %w", skills.ErrInvalid)
	}
	f, err := encodeSkill(s)
	if err != nil {
		return fmt.Errorf("restore skill %q: %w", s.Slug, err)
	}
	found := false
	for _, v := range vs {
		if err := checkVersion(s.Slug, v); err != nil {
			return fmt.Errorf("restore skill %q: %w", s.Slug, err)
		}
		found = found || v.Hash == s.Version
	}
	if !found {
		return fmt.Errorf("restore skill %q: current version %s is not among its versions: %w", s.Slug, s.Version, skills.ErrInvalid)
	}
	err = db.write(ctx, func(tx *txn) error {
		if ok, err := skillExists(ctx, tx, s.Slug); err != nil {
			return err
		} else if ok {
			return skills.ErrExists
		}
		if err := insertSkillRow(ctx, tx, s, f, s.Version); err != nil {
			return err
		}
		for _, v := range vs {
			if err := insertVersion(ctx, tx, s.Slug, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore skill %q: %w", s.Slug, err)
	}
	return nil
}

// SetCurrentVersion makes hash, which must be a stored version of slug, its
// current one.
func (db *DB) SetCurrentVersion(ctx context.Context, slug, hash string) error {
	err := db.write(ctx, func(tx *txn) error {
		var ok bool
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM versions WHERE slug = ? AND hash = ?)", slug, hash).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return skills.ErrNotFound
		}
		_, err := tx.ExecContext(ctx, "UPDATE skills SET current_version = ?, updated_at = ? WHERE slug = ?",
			hash, db.now().UnixNano(), slug)
		return err
	})
	if err != nil {
		return fmt.Errorf("set current version of skill %q to %s: %w", slug, hash, err)
	}
	return nil
}

// ForgetVersion removes the row of a version whose content is gone for
// good, so the index explains the store again; the current version of a
// skill cannot be forgotten (skills.ErrInvalid), an unknown one is
// skills.ErrNotFound. Sessions that pinned it keep their pin, which the
// daemon no longer serves.
func (db *DB) ForgetVersion(ctx context.Context, slug, hash string) error {
	err := db.write(ctx, func(tx *txn) error {
		var current string
		err := tx.QueryRowContext(ctx, "SELECT current_version FROM skills WHERE slug = ?", slug).Scan(&current)
		if errors.Is(err, sql.ErrNoRows) {
			return skills.ErrNotFound
		}
		if err != nil {
			return err
		}
		if current == hash {
			return fmt.Errorf("it is the current version: %w", skills.ErrInvalid)
		}
		return execOne(ctx, tx, skills.ErrNotFound, "DELETE FROM versions WHERE slug = ? AND hash = ?", slug, hash)
	})
	if err != nil {
		return fmt.Errorf("forget version %s of skill %q: %w", hash, slug, err)
	}
	return nil
}

// ResolveVersion returns the version of slug whose hash is, or begins
// with, prefix (lowercase hex, see skills.CleanVersion). No such version
// is an error wrapping skills.ErrNotFound (also when there is no such
// skill); a prefix several versions share is skills.ErrAmbiguousVersion,
// naming them.
func (db *DB) ResolveVersion(ctx context.Context, slug, prefix string) (*skills.Version, error) {
	var vs []*skills.Version
	err := db.read(ctx, func(tx *txn) error {
		var err error
		// The prefix is hex only: no LIKE wildcard can be in it.
		vs, err = queryAll(ctx, tx, scanVersion, "SELECT "+versionColumns+
			" FROM versions WHERE slug = ? AND (hash = ? OR hash LIKE ?) ORDER BY seq DESC LIMIT 4", slug, prefix, prefix+"%")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("version %s of skill %q: %w", prefix, slug, err)
	}
	for _, v := range vs {
		if v.Hash == prefix {
			return v, nil
		}
	}
	switch len(vs) {
	case 0:
		return nil, fmt.Errorf("skill %q has no version %s (see `skillfs skill versions %s`): %w", slug, prefix, slug, skills.ErrNotFound)
	case 1:
		return vs[0], nil
	}
	hashes := make([]string, len(vs))
	for i, v := range vs {
		hashes[i] = v.Hash[:min(len(v.Hash), len(prefix)+4)] + "…"
	}
	more := ""
	if len(vs) > 3 {
		hashes, more = hashes[:3], " and more"
	}
	return nil, fmt.Errorf("version %s of skill %q matches %s%s: give more digits: %w", prefix, slug, strings.Join(hashes, ", "), more, skills.ErrAmbiguousVersion)
}
