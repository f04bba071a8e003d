package index

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"skillfs/skills"
)

// An index written before migration 003 held absolute paths; after it,
// every path is relative to the data directory. SQLite only: PostgreSQL's
// schema starts where SQLite's 010 ends.
func TestMigration003MakesPathsRelative(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "index.db")
	raw, err := openPool(path, writerParams, 1)
	if err != nil {
		t.Fatal(err)
	}
	old := fstest.MapFS{}
	for _, name := range []string{"001_init.sql", "002_bind_namespaces.sql"} {
		b, err := os.ReadFile(filepath.Join("migrations", name))
		if err != nil {
			t.Fatal(err)
		}
		old[name] = &fstest.MapFile{Data: b}
	}
	if err := migrate(ctx, raw, sqliteDialect, old); err != nil {
		t.Fatal(err)
	}
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO skills (slug, name, description, source_type, source, share, enabled, current_version, creator)
		VALUES ('a', 'A', 'd', 'upload', 's', '{}', 1, 'h1', 'alice')`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO versions (slug, hash, path, source_type, source, installer, files, bytes)
		VALUES ('a', 'h1', '/var/lib/old/home/store/skills/a/h1', 'upload', 's', 'alice', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db := openAt(t, path)
	v, err := db.Version(ctx, "a", "h1")
	if err != nil {
		t.Fatal(err)
	}
	if v.Path != "store/skills/a/h1" {
		t.Errorf("path after migration = %q", v.Path)
	}
}

func TestDataDirID(t *testing.T) { forEachBackend(t, testDataDirID) }

func testDataDirID(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	if id, err := db.DataDirID(ctx); err != nil || id != "" {
		t.Fatalf("DataDirID of a new index = %q, %v", id, err)
	}
	if err := db.SetDataDirID(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if err := db.SetDataDirID(ctx, "one"); err != nil {
		t.Fatalf("setting the same identity again: %v", err)
	}
	wantErr(t, "another identity", db.SetDataDirID(ctx, "two"), skills.ErrExists)
	if id, err := db.DataDirID(ctx); err != nil || id != "one" {
		t.Fatalf("DataDirID = %q, %v", id, err)
	}
}

// A spill is counted once, however often it is applied: a daemon that stops
// after applying it but before clearing the file applies it again at the
// next start.
func TestApplySpillExactlyOnce(t *testing.T) { forEachBackend(t, testApplySpillExactlyOnce) }

func testApplySpillExactlyOnce(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	insertSkill(t, db, "a", "h1")
	if err := db.CreateSession(ctx, &skills.Session{ID: "s1", UID: "alice", Pins: []skills.Pin{{Slug: "a", Version: "h1"}}, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordActivation(ctx, "s1", "a", t0); err != nil {
		t.Fatal(err)
	}
	deltas := []OpenDelta{{Session: "s1", Slug: "a", Opens: 20, LastAt: t0.Add(1e9)}, {Session: "gone", Slug: "a", Opens: 3, LastAt: t0}}
	for i, want := range []bool{true, false, false} {
		applied, err := db.ApplySpill(ctx, "spill-1", deltas)
		if err != nil || applied != want {
			t.Fatalf("ApplySpill #%d = %v, %v; want %v", i+1, applied, err, want)
		}
	}
	acts, err := db.Activations(ctx, "s1")
	if err != nil || len(acts) != 1 || acts[0].Opens != 21 || !acts[0].LastAt.Equal(t0.Add(1e9)) {
		t.Fatalf("activations after the spill = %+v, %v", acts, err)
	}
	if applied, err := db.ApplySpill(ctx, "spill-2", deltas[:1]); err != nil || !applied {
		t.Fatalf("a second spill = %v, %v", applied, err)
	}
	if acts, _ := db.Activations(ctx, "s1"); acts[0].Opens != 41 {
		t.Fatalf("opens after two spills = %d, want 41", acts[0].Opens)
	}
	_, err = db.ApplySpill(ctx, "", deltas)
	wantErr(t, "empty id", err, skills.ErrInvalid)
	_, err = db.ApplySpill(ctx, "spill-3", []OpenDelta{{Session: "s1", Slug: "a", Opens: -1, LastAt: t0}})
	wantErr(t, "negative opens", err, skills.ErrInvalid)
}

// A file that is not a database, or whose pages were overwritten, is
// reported as a damaged data directory, never opened as an empty index.
// SQLite only: it is about the file (TestCheckFindsAMissingTable is
// PostgreSQL's).
func TestDamagedIndexIsErrDamaged(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte("this is not a database, not even close to one; it is text"), 0o600); err != nil {
		t.Fatal(err)
	}
	if db, err := Open(garbage); !errors.Is(err, skills.ErrDamaged) {
		if db != nil {
			db.Close()
		}
		t.Fatalf("Open(garbage) = %v, want ErrDamaged", err)
	}

	good := filepath.Join(dir, "index.db")
	db, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		insertSkill(t, db, "s"+string(rune('a'+i%26))+string(rune('a'+i/26)), "h")
	}
	if err := db.Check(context.Background()); err != nil {
		t.Fatalf("Check of a sound index: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Overwrite every page after the first with noise.
	fi, err := os.Stat(good)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(good, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, fi.Size()-4096)
	for i := range noise {
		noise[i] = byte(i*7 + 3)
	}
	if _, err := f.WriteAt(noise, 4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	db, err = Open(good)
	if err == nil {
		err = db.Check(context.Background())
		db.Close()
	}
	if !errors.Is(err, skills.ErrDamaged) {
		t.Fatalf("Open+Check of an overwritten index = %v, want ErrDamaged", err)
	}
}

func TestCountAndRestoreSkill(t *testing.T) { forEachBackend(t, testCountAndRestoreSkill) }

func testCountAndRestoreSkill(t *testing.T, b backend) {
	ctx := context.Background()
	db := openBare(t, b.target(t))
	if n, err := db.Count(ctx); err != nil || n != (Rows{}) {
		t.Fatalf("Count of a new index = %+v, %v", n, err)
	}
	s := testSkill("r")
	v1, v2 := testVersion("r", "h1"), testVersion("r", "h2")
	v2.Previous = "h1"
	s.Version = "h1"
	if err := db.RestoreSkill(ctx, s, []*skills.Version{v1, v2}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Skill(ctx, "r")
	if err != nil || got.Version != "h1" {
		t.Fatalf("restored skill = %+v, %v", got, err)
	}
	vs, err := db.Versions(ctx, "r")
	if err != nil || len(vs) != 2 || vs[0].Hash != "h2" {
		t.Fatalf("restored versions = %+v, %v", vs, err)
	}
	wantErr(t, "restore again", db.RestoreSkill(ctx, s, []*skills.Version{v1}), skills.ErrExists)
	s2 := testSkill("q")
	s2.Version = "zz"
	wantErr(t, "current not among versions", db.RestoreSkill(ctx, s2, []*skills.Version{testVersion("q", "h1")}), skills.ErrInvalid)
	if err := db.SetCurrentVersion(ctx, "r", "h2"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "unknown version", db.SetCurrentVersion(ctx, "r", "nope"), skills.ErrNotFound)
	if n, _ := db.Count(ctx); n.Skills != 1 || n.Versions != 2 {
		t.Fatalf("Count = %+v", n)
	}
}

// A skill's plugin and a version's working-tree state round-trip, and a
// new version may change the plugin.
func TestPluginAndWorktree(t *testing.T) { forEachBackend(t, testPluginAndWorktree) }

func testPluginAndWorktree(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	s := testSkill("setup")
	s.Plugin = "deploy"
	v := testVersion("setup", "h1")
	v.Worktree = skills.WorktreeModified
	if err := db.InsertSkill(ctx, s, v); err != nil {
		t.Fatal(err)
	}
	got, err := db.Skill(ctx, "setup")
	if err != nil || got.Plugin != "deploy" {
		t.Fatalf("skill = %+v, %v", got, err)
	}
	gv, err := db.Version(ctx, "setup", "h1")
	if err != nil || gv.Worktree != skills.WorktreeModified {
		t.Fatalf("version = %+v, %v", gv, err)
	}
	bad := testVersion("setup", "h2")
	bad.Worktree = "dirty"
	if err := db.AddVersion(ctx, s, bad); err == nil {
		t.Fatal("a version with an unknown working-tree state was stored")
	}
}

// Totals counts skills, versions and their bytes, and only the binds of
// open sessions.
func TestTotals(t *testing.T) { forEachBackend(t, testTotals) }

func testTotals(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	if got, err := db.Totals(ctx); err != nil || got != (Totals{}) {
		t.Fatalf("Totals of a new index = %+v, %v", got, err)
	}
	a1, a2, b1 := testVersion("a", "h1"), testVersion("a", "h2"), testVersion("b", "h1")
	a2.Bytes, b1.Bytes = 10, 0
	a := testSkill("a")
	a.Version = "h1"
	if err := db.RestoreSkill(ctx, a, []*skills.Version{a1, a2}); err != nil {
		t.Fatal(err)
	}
	if err := db.InsertSkill(ctx, testSkill("b"), b1); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"open", "closed"} {
		if err := db.CreateSession(ctx, testSession(id, t0)); err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{"/x", "/y"} {
			if err := db.AddBind(ctx, id, "", skills.Bind{Target: target}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.CloseSession(ctx, "closed"); err != nil {
		t.Fatal(err)
	}
	want := Totals{Skills: 2, Versions: 3, Bytes: 1234 + 10, Binds: 2}
	if got, err := db.Totals(ctx); err != nil || got != want {
		t.Fatalf("Totals = %+v, %v; want %+v", got, err, want)
	}
}
