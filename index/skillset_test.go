package index

import (
	"database/sql"
	"slices"

	"context"
	"fmt"
	"github.com/mattn/go-sqlite3"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"skillfs/skills"
)

// fullRead is the catalog read straight from the table, as SkillSet must
// see it.
func fullRead(t *testing.T, db *DB) []*skills.Skill {
	t.Helper()
	all, err := readAll(context.Background(), db, "list skills", scanSkill, "SELECT "+skillColumns+" FROM skills ORDER BY slug")
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// TestSkillSetFollowsWritesOfAnotherHandle: a handle's in-memory catalog
// stays equal to the table while another handle (another process, as far as
// SQLite is concerned) inserts, updates, adds versions, sets the current
// version, deletes and restores skills in random order; and a set handed out
// earlier never changes.
func TestSkillSetFollowsWritesOfAnotherHandle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, fold := range []int{64, 3} {
			t.Run(fmt.Sprintf("fold-above-%d", fold), func(t *testing.T) {
				defer func(old int) { foldAbove = old }(foldAbove)
				foldAbove = fold
				skillSetFollows(t, b)
			})
		}
	})
}

func skillSetFollows(t *testing.T, b backend) {
	target := b.target(t)
	w, r := openAt(t, target), openAt(t, target)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[string]int{} // slug → versions
	var held []*SkillSet
	var heldWant [][]*skills.Skill
	for step := range 400 {
		slug := fmt.Sprintf("s%02d", rng.IntN(40))
		var err error
		switch n, ok := live[slug]; {
		case !ok:
			s, v := testSkill(slug), testVersion(slug, "h0")
			err = w.InsertSkill(ctx, s, v)
			live[slug] = 1
		case rng.IntN(5) == 0:
			_, err = w.DeleteSkill(ctx, slug)
			delete(live, slug)
		case rng.IntN(3) == 0:
			s := testSkill(slug)
			s.Description = fmt.Sprintf("step %d", step)
			v := testVersion(slug, fmt.Sprintf("h%d", n))
			err = w.AddVersion(ctx, s, v)
			live[slug] = n + 1
		case rng.IntN(2) == 0 && n > 1:
			err = w.SetCurrentVersion(ctx, slug, "h0")
		default:
			_, err = w.UpdateSkill(ctx, slug, func(s *skills.Skill) error {
				s.Enabled = !s.Enabled
				s.Name = fmt.Sprintf("name %d", step)
				return nil
			})
		}
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, slug, err)
		}
		if rng.IntN(4) != 0 { // sometimes several writes land between reads
			continue
		}
		set, err := r.SkillSet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := fullRead(t, w)
		mustEqual(t, fmt.Sprintf("step %d: set", step), set.All(), want)
		for _, s := range want {
			mustEqual(t, "Get("+s.Slug+")", set.Get(s.Slug), s)
		}
		if set.Len() != len(set.All()) {
			t.Fatalf("step %d: Len %d, All %d", step, set.Len(), len(set.All()))
		}
		held, heldWant = append(held, set), append(heldWant, want)
	}
	for i, set := range held {
		mustEqual(t, fmt.Sprintf("set %d, later", i), set.All(), heldWant[i])
	}
}

// TestSkillSetUnchangedIsShared: with no write in between, the same set is
// handed out again.
func TestSkillSetUnchangedIsShared(t *testing.T) { forEachBackend(t, testSkillSetUnchangedIsShared) }

func testSkillSetUnchangedIsShared(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	insertSkill(t, db, "a", "h1")
	s1, err := db.SkillSet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := db.SkillSet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 {
		t.Fatal("a second SkillSet without a write in between read the index again")
	}
	insertSkill(t, db, "b", "h1")
	s3, err := db.SkillSet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s3 == s1 || s3.Len() != 2 || s1.Len() != 1 {
		t.Fatalf("after an insert: new set %d skills, old set %d", s3.Len(), s1.Len())
	}
}

// TestSkillsReturnsCopies: a caller changing what Skills returned changes
// neither the index's in-memory catalog nor what the next caller gets.
func TestSkillsReturnsCopies(t *testing.T) { forEachBackend(t, testSkillsReturnsCopies) }

func testSkillsReturnsCopies(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	insertSkill(t, db, "a", "h1")
	got, err := db.Skills(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got[0].Name = "changed"
	again, err := db.Skills(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Name == "changed" {
		t.Fatal("a change to a returned skill leaked into the catalog")
	}
}

// TestSkillSetSeesARestoredCopy: an index replaced in place by an older
// copy of itself (the backup API, as `sqlite3 .restore` does) whose change
// numbers then pass the ones a handle saw is read again in full, not
// patched with the newest changes only. SQLite only: it replaces the file.
func TestSkillSetSeesARestoredCopy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "index.db")
	w, r := openAt(t, path), openAt(t, path)
	ctx := context.Background()
	insertSkill(t, w, "a", "h1")
	insertSkill(t, w, "b", "h1")
	backup := filepath.Join(dir, "backup.db")
	if _, err := w.w.ExecContext(ctx, "VACUUM INTO ?", backup); err != nil {
		t.Fatal(err)
	}
	if _, err := w.DeleteSkill(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	insertSkill(t, w, "c", "h1")
	if set, err := r.SkillSet(ctx); err != nil || !slices.Equal(slugsOf(set), []string{"a", "c"}) {
		t.Fatalf("before the restore: %v, %v", slugsOf(set), err)
	}
	restore(t, w, backup)
	insertSkill(t, w, "d", "h1")
	insertSkill(t, w, "e", "h1")
	for range 2 { // the same number of changes, then more
		set, err := r.SkillSet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "after the restore", set.All(), fullRead(t, w))
		insertSkill(t, w, fmt.Sprintf("f%d", set.Len()), "h1")
	}
}

func slugsOf(set *SkillSet) []string {
	var out []string
	for _, s := range set.All() {
		out = append(out, s.Slug)
	}
	return out
}

// restore copies the database at from over db's, in place.
func restore(t *testing.T, db *DB, from string) {
	t.Helper()
	src, err := sql.Open("sqlite3", from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	sc, err := src.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	dc, err := db.w.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	err = dc.Raw(func(d any) error {
		return sc.Raw(func(s any) error {
			bk, err := d.(*sqlite3.SQLiteConn).Backup("main", s.(*sqlite3.SQLiteConn), "main")
			if err != nil {
				return err
			}
			if _, err := bk.Step(-1); err != nil {
				bk.Finish()
				return err
			}
			return bk.Finish()
		})
	})
	if err != nil {
		t.Fatalf("restore %s: %v", from, err)
	}
}

// TestChangeTriggersExist: the triggers that keep skill_changes are in the
// schema (a migration that rebuilds the skills table must make them again).
func TestChangeTriggersExist(t *testing.T) { forEachBackend(t, testChangeTriggersExist) }

func testChangeTriggersExist(t *testing.T, b backend) {
	db := b.open(t)
	query := "SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'skills' ORDER BY name"
	if db.d.pg {
		query = `SELECT tgname COLLATE "C" FROM pg_trigger WHERE tgrelid = 'skills'::regclass AND NOT tgisinternal ORDER BY 1`
	}
	mustEqual(t, "triggers on skills", names(t, db.r, query), []string{"skills_changed_delete", "skills_changed_insert", "skills_changed_update"})
}

// BenchmarkSkillSet is what a request pays for the catalog when nothing
// changed since the last one: one small query of the change log, in a
// catalog of 1,000 skills.
func BenchmarkSkillSet(b *testing.B) { benchEachBackend(b, benchSkillSet) }

func benchSkillSet(b *testing.B, be backend) {
	db := be.open(b)
	ctx := context.Background()
	for i := range 1000 {
		insertSkill(b, db, fmt.Sprintf("skill-%04d", i), "h1")
	}
	for b.Loop() {
		set, err := db.SkillSet(ctx)
		if err != nil || set.Len() != 1000 {
			b.Fatalf("%d skills, %v", set.Len(), err)
		}
	}
}
