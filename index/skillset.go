package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"skillfs/skills"
)

// SkillSet is the whole catalog as of one moment, held in memory: an
// immutable value that any number of goroutines may read. Its skills are
// shared with every other holder of the set and must not be modified.
//
// A set is a base (a map and a sorted list) with the changes since laid
// over it, so that following one install costs a copy of the changes, not
// of the catalog; the changes are folded into a new base once they grow
// past a share of it.
type SkillSet struct {
	seq  int64                    // the last change it includes (skill_changes.seq)
	last string                   // the slug that change was logged for
	base *skillBase               // shared with earlier and later sets
	over map[string]*skills.Skill // changed since base: nil for deleted
	n    int                      // number of skills

	allOnce sync.Once
	all     []*skills.Skill
}

type skillBase struct {
	bySlug map[string]*skills.Skill
	sorted []*skills.Skill // by slug
}

// Get returns the skill slug, or nil.
func (s *SkillSet) Get(slug string) *skills.Skill {
	if sk, ok := s.over[slug]; ok {
		return sk
	}
	return s.base.bySlug[slug]
}

// All returns every skill sorted by slug. The slice is shared: read only.
func (s *SkillSet) All() []*skills.Skill {
	s.allOnce.Do(func() {
		if len(s.over) == 0 {
			s.all = s.base.sorted
			return
		}
		s.all = s.merged()
	})
	return s.all
}

// merged lists base and changes together, sorted by slug.
func (s *SkillSet) merged() []*skills.Skill {
	added := make([]*skills.Skill, 0, len(s.over))
	for _, sk := range s.over {
		if sk != nil {
			added = append(added, sk)
		}
	}
	slices.SortFunc(added, func(a, b *skills.Skill) int { return strings.Compare(a.Slug, b.Slug) })
	out := make([]*skills.Skill, 0, s.n)
	i := 0
	for _, sk := range s.base.sorted {
		for i < len(added) && added[i].Slug < sk.Slug {
			out = append(out, added[i])
			i++
		}
		if _, changed := s.over[sk.Slug]; !changed {
			out = append(out, sk)
		}
	}
	return append(out, added[i:]...)
}

// Len is the number of skills.
func (s *SkillSet) Len() int { return s.n }

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
	err := db.read(ctx, func(tx *txn) error {
		var seq int64
		var last string // the slug logged at seq
		err := tx.QueryRowContext(ctx, "SELECT seq, slug FROM skill_changes ORDER BY seq DESC LIMIT 1").Scan(&seq, &last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		reload := func() error {
			all, err := queryAll(ctx, tx, scanSkill, "SELECT "+skillColumns+" FROM skills ORDER BY slug")
			if err == nil {
				next = newSkillSet(seq, last, all)
			}
			return err
		}
		cur := c.set
		switch {
		case cur != nil && seq == cur.seq && last == cur.last:
			next = cur
			return nil
		case cur == nil || seq <= cur.seq:
			// First use, or an index that went back (a copy restored).
			return reload()
		}
		changed, err := queryAll(ctx, tx, scanString, "SELECT slug FROM skill_changes WHERE seq > ? ORDER BY seq", cur.seq)
		if err != nil {
			return err
		}
		// The log must go on from what the set saw: its last entry is
		// still there, or was logged again since. Otherwise the index was
		// replaced by a copy whose numbers merely passed ours.
		if cur.seq > 0 && !slices.Contains(changed, cur.last) {
			var at string
			err := tx.QueryRowContext(ctx, "SELECT slug FROM skill_changes WHERE seq = ?", cur.seq).Scan(&at)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if at != cur.last {
				return reload()
			}
		}
		if len(changed)*reloadAbove > cur.Len()+reloadAbove {
			return reload()
		}
		list, err := json.Marshal(changed)
		if err != nil {
			return err
		}
		rows, err := queryAll(ctx, tx, scanSkill, "SELECT "+skillColumns+" FROM skills WHERE slug IN (SELECT value FROM "+db.d.textList+")", string(list))
		if err != nil {
			return err
		}
		next = cur.apply(seq, last, changed, rows)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	c.set = next
	return next, nil
}

func newSkillSet(seq int64, last string, sorted []*skills.Skill) *SkillSet {
	b := &skillBase{bySlug: make(map[string]*skills.Skill, len(sorted)), sorted: sorted}
	for _, sk := range sorted {
		b.bySlug[sk.Slug] = sk
	}
	return &SkillSet{seq: seq, last: last, base: b, n: len(sorted)}
}

// foldAbove is how many changes a set carries over its base (at least; a
// sixteenth of the base for large catalogs) before they are folded in. A
// variable for tests.
var foldAbove = 64

// apply returns a new set: s with the changed slugs replaced by rows (a
// changed slug without a row was deleted).
func (s *SkillSet) apply(seq int64, last string, changed []string, rows []*skills.Skill) *SkillSet {
	over := make(map[string]*skills.Skill, len(s.over)+len(changed))
	for k, sk := range s.over {
		over[k] = sk
	}
	for _, slug := range changed {
		over[slug] = nil
	}
	for _, sk := range rows {
		over[sk.Slug] = sk
	}
	next := &SkillSet{seq: seq, last: last, base: s.base, over: over}
	next.n = len(s.base.sorted)
	for slug, sk := range over {
		_, inBase := s.base.bySlug[slug]
		switch {
		case sk != nil && !inBase:
			next.n++
		case sk == nil && inBase:
			next.n--
		}
	}
	if len(over) > max(foldAbove, len(s.base.sorted)/16) {
		return newSkillSet(seq, last, next.merged())
	}
	return next
}

func scanString(sc scanner) (string, error) {
	var s string
	err := sc.Scan(&s)
	return s, err
}
