package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"skillfs/skills"
)

// SkillSet is the whole catalog as of one moment, held in memory: an
// immutable value that any number of goroutines may read. Its skills are
// shared with every other holder of the set and must not be modified.
type SkillSet struct {
	seq    int64 // the last change it includes (skill_changes.seq)
	bySlug map[string]*skills.Skill
	sorted []*skills.Skill // by slug
}

// Get returns the skill slug, or nil.
func (s *SkillSet) Get(slug string) *skills.Skill { return s.bySlug[slug] }

// All returns every skill sorted by slug. The slice is shared: read only.
func (s *SkillSet) All() []*skills.Skill { return s.sorted }

// Map returns the skills by slug. The map is shared: read only.
func (s *SkillSet) Map() map[string]*skills.Skill { return s.bySlug }

// Len is the number of skills.
func (s *SkillSet) Len() int { return len(s.sorted) }

// skillCache keeps the latest SkillSet of a DB. A request costs one small
// query when nothing changed, and reads only the changed rows otherwise.
type skillCache struct {
	mu  sync.Mutex // one refresh at a time
	set *SkillSet
}

// reloadAbove is the share of changed skills above which the whole table is
// read again rather than row by row.
const reloadAbove = 4

// SkillSet returns the catalog as committed when it is called, from memory:
// it asks the index which skills changed since the set it holds (a write
// from any process counts, through the skill_changes log) and reads only
// those.
func (db *DB) SkillSet(ctx context.Context) (*SkillSet, error) {
	c := &db.skills
	c.mu.Lock()
	defer c.mu.Unlock()
	var next *SkillSet
	err := db.read(ctx, func(tx *sql.Tx) error {
		var seq int64
		if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(seq), 0) FROM skill_changes").Scan(&seq); err != nil {
			return err
		}
		cur := c.set
		switch {
		case cur != nil && seq == cur.seq:
			next = cur
			return nil
		case cur == nil || seq < cur.seq:
			// First use, or an index that went back (replaced by a copy).
			all, err := queryAll(ctx, tx, scanSkill, "SELECT "+skillColumns+" FROM skills ORDER BY slug")
			if err != nil {
				return err
			}
			next = newSkillSet(seq, all)
			return nil
		}
		changed, err := queryAll(ctx, tx, scanString, "SELECT slug FROM skill_changes WHERE seq > ? ORDER BY seq", cur.seq)
		if err != nil {
			return err
		}
		if len(changed)*reloadAbove > cur.Len()+reloadAbove {
			all, err := queryAll(ctx, tx, scanSkill, "SELECT "+skillColumns+" FROM skills ORDER BY slug")
			if err != nil {
				return err
			}
			next = newSkillSet(seq, all)
			return nil
		}
		list, err := json.Marshal(changed)
		if err != nil {
			return err
		}
		rows, err := queryAll(ctx, tx, scanSkill, "SELECT "+skillColumns+" FROM skills WHERE slug IN (SELECT value FROM json_each(?))", string(list))
		if err != nil {
			return err
		}
		next = cur.apply(seq, changed, rows)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	c.set = next
	return next, nil
}

func newSkillSet(seq int64, sorted []*skills.Skill) *SkillSet {
	s := &SkillSet{seq: seq, bySlug: make(map[string]*skills.Skill, len(sorted)), sorted: sorted}
	for _, sk := range sorted {
		s.bySlug[sk.Slug] = sk
	}
	return s
}

// apply returns a new set: s with the changed slugs replaced by rows (a
// changed slug without a row was deleted).
func (s *SkillSet) apply(seq int64, changed []string, rows []*skills.Skill) *SkillSet {
	next := &SkillSet{seq: seq, bySlug: maps.Clone(s.bySlug)}
	for _, slug := range changed {
		delete(next.bySlug, slug)
	}
	for _, sk := range rows {
		next.bySlug[sk.Slug] = sk
	}
	gone := make(map[string]bool, len(changed))
	for _, slug := range changed {
		gone[slug] = true
	}
	next.sorted = make([]*skills.Skill, 0, len(next.bySlug))
	for _, sk := range s.sorted {
		if !gone[sk.Slug] {
			next.sorted = append(next.sorted, sk)
		}
	}
	for _, sk := range rows {
		i, _ := slices.BinarySearchFunc(next.sorted, sk.Slug, func(a *skills.Skill, slug string) int {
			return strings.Compare(a.Slug, slug)
		})
		next.sorted = slices.Insert(next.sorted, i, sk)
	}
	return next
}

func scanString(sc scanner) (string, error) {
	var s string
	err := sc.Scan(&s)
	return s, err
}
