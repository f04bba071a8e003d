package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"skillfs/index/pgtest"
	"skillfs/skills"
)

// t0 is a fixed instant with nanoseconds, to check that times round-trip
// exactly.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)

// backend is a backend of the index the tests run against.
type backend struct {
	name string
	// target returns where a new, empty index can be opened: a file in a
	// new temporary directory, or a new database (see pgtest.Database).
	target func(t testing.TB) string
}

// open opens a new, empty index, with sessionUsers registered, and closes
// it when the test ends.
func (b backend) open(t testing.TB) *DB {
	t.Helper()
	return openAt(t, b.target(t))
}

// The backends. Tests that run on one of them only say why.
var (
	sqliteBackend = backend{"sqlite", func(t testing.TB) string {
		return filepath.Join(t.TempDir(), "index.db")
	}}
	postgresBackend = backend{"postgres", pgtest.Database}
	backends        = []backend{sqliteBackend, postgresBackend}
)

// forEachBackend runs test once per backend, as a subtest named after it.
func forEachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b) })
	}
}

// benchEachBackend runs bench once per backend, as a sub-benchmark named
// after it.
func benchEachBackend(b *testing.B, bench func(b *testing.B, be backend)) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) { bench(b, be) })
	}
}

// sessionUsers are the users the tests' sessions belong to: openAt
// registers them, since CreateSession refuses a user that does not exist.
var sessionUsers = []string{"alice", "bob", "eve", "root"}

// openAt opens the index at path, with sessionUsers registered, and closes
// it when the test ends.
func openAt(t testing.TB, path string) *DB {
	t.Helper()
	db := openBare(t, path)
	addSessionUsers(t, db)
	return db
}

// addSessionUsers registers sessionUsers in db.
func addSessionUsers(t testing.TB, db *DB) {
	t.Helper()
	for _, uid := range sessionUsers {
		if err := db.PutUser(context.Background(), skills.User{UID: uid, Role: skills.RoleUser}); err != nil {
			t.Fatal(err)
		}
	}
}

// openBare opens the index at path as it is and closes it when the test
// ends.
func openBare(t testing.TB, path string) *DB {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func testSkill(slug string) *skills.Skill {
	return &skills.Skill{
		Slug:        slug,
		Name:        "Skill " + slug,
		Description: "Does " + slug + " things.",
		SourceType:  skills.SourceUpload,
		Source:      "uploads/" + slug + ".zip",
		Share: skills.Share{
			Read:   skills.Scope{Kind: skills.ScopeDepartment, IDs: []string{"eng", "ops"}},
			Manage: skills.Scope{Kind: skills.ScopeUser, IDs: []string{"alice"}},
		},
		Enabled:           true,
		SkillDependencies: []string{"base"},
		ToolDependencies:  []string{"git", "jq"},
		MCPDependencies:   []string{"github"},
		Creator:           "alice",
		CreatedAt:         t0,
		UpdatedAt:         t0,
	}
}

func testVersion(slug, hash string) *skills.Version {
	return &skills.Version{
		Slug:        slug,
		Hash:        hash,
		Path:        "store/skills/" + slug + "/" + hash,
		SourceType:  skills.SourceRemote,
		Source:      "https://example.com/" + slug + ".git",
		Ref:         "main",
		Commit:      "0123456789abcdef",
		Installer:   "alice",
		InstalledAt: t0,
		Files:       3,
		Bytes:       1234,
	}
}

// insertSkill inserts testSkill(slug) with one version of hash and returns
// both.
func insertSkill(t testing.TB, db *DB, slug, hash string) (*skills.Skill, *skills.Version) {
	t.Helper()
	s, v := testSkill(slug), testVersion(slug, hash)
	if err := db.InsertSkill(context.Background(), s, v); err != nil {
		t.Fatalf("InsertSkill(%q): %v", slug, err)
	}
	s.Version = hash
	return s, v
}

// wantErr fails the test unless err wraps target.
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

// mustEqual fails the test if got and want differ.
func mustEqual(t testing.TB, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// SQLite makes the file Open is given (PostgreSQL's database must exist).
func TestOpenCreatesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "index.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	insertSkill(t, openAt(t, path), "kept", "h1")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("index file: %v", err)
	}
}

func TestMigrationsAreIdempotent(t *testing.T) { forEachBackend(t, testMigrationsAreIdempotent) }

func testMigrationsAreIdempotent(t *testing.T, b backend) {
	ctx := context.Background()
	target := b.target(t)
	db, err := Open(target)
	if err != nil {
		t.Fatal(err)
	}
	if db.Path() != target || db.Backend() != b.name {
		t.Errorf("Path() = %q, Backend() = %q; want %q, %q", db.Path(), db.Backend(), target, b.name)
	}
	insertSkill(t, db, "kept", "h1")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(db.d.migrations)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		db := openBare(t, target)
		var n, maxV int
		if err := db.r.QueryRow("SELECT COUNT(*), MAX(version) FROM schema_migrations").Scan(&n, &maxV); err != nil {
			t.Fatal(err)
		}
		if n != len(ms) || maxV != ms[len(ms)-1].version {
			t.Fatalf("reopen %d: %d migrations recorded up to %d, want %d up to %d", i, n, maxV, len(ms), ms[len(ms)-1].version)
		}
		if _, err := db.Skill(ctx, "kept"); err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
	}
}

func TestOpenPathsNeedingEscapes(t *testing.T) {
	for _, name := range []string{"plain", "with space", "q?mark", "hash#tag", "per%25cent", "colon:x", "ünï"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "index.db")
			db := openAt(t, path)
			insertSkill(t, db, "s", "h")
			// The file must be where we asked, not at a name cut at '?' or '#'.
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("index not at %q: %v", path, err)
			}
			entries, err := os.ReadDir(filepath.Dir(dir))
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Fatalf("stray files next to %q: %v", dir, entries)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such", "dir", "index.db")
	notDB := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(notDB, []byte(strings.Repeat("not a database\n", 512)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
	}{
		{"missing directory", missing},
		{"not a database", notDB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(tc.path)
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q) succeeded", tc.path)
			}
			if !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("error %q does not name the path %q", err, tc.path)
			}
		})
	}
	_, err := Open("")
	wantErr(t, "Open empty path", err, skills.ErrInvalid)
}

func TestOpenRejectsNewerSchema(t *testing.T) { forEachBackend(t, testOpenRejectsNewerSchema) }

func testOpenRejectsNewerSchema(t *testing.T, b backend) {
	target := b.target(t)
	db, err := Open(target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.w.Exec("INSERT INTO schema_migrations (version, file, applied_at) VALUES (9999, '9999_future.sql', 0)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(target)
	if err == nil {
		db.Close()
		t.Fatal("Open accepted a schema newer than the program")
	}
	var sve *SchemaVersionError
	if !errors.As(err, &sve) || sve.Found != 9999 || sve.Known < 1 {
		t.Fatalf("Open error = %v, want a SchemaVersionError for 9999", err)
	}
}

// TestConcurrentOpenOfANewIndex opens one new index from several handles
// at once, as daemons starting together would: all succeed and each
// migration is applied once.
func TestConcurrentOpenOfANewIndex(t *testing.T) { forEachBackend(t, testConcurrentOpenOfANewIndex) }

func testConcurrentOpenOfANewIndex(t *testing.T, b backend) {
	target := b.target(t)
	const n = 6
	errs := make(chan error, n)
	dbs := make(chan *DB, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			db, err := Open(target)
			if err != nil {
				errs <- err
				return
			}
			dbs <- db
		})
	}
	wg.Wait()
	close(errs)
	close(dbs)
	for db := range dbs {
		t.Cleanup(func() { db.Close() })
	}
	for err := range errs {
		t.Fatal(err)
	}
	db := openAt(t, target)
	ms, err := loadMigrations(db.d.migrations)
	if err != nil {
		t.Fatal(err)
	}
	var count, distinct int
	if err := db.r.QueryRow("SELECT COUNT(*), COUNT(DISTINCT file) FROM schema_migrations").Scan(&count, &distinct); err != nil {
		t.Fatal(err)
	}
	if count != len(ms) || distinct != len(ms) {
		t.Fatalf("%d migration rows (%d distinct), want %d", count, distinct, len(ms))
	}
}

// Connection settings are SQLite's pragmas.
func TestConnectionPragmas(t *testing.T) {
	db := sqliteBackend.open(t)
	for _, tc := range []struct {
		name, pragma string
		want         string
	}{
		{"journal mode", "journal_mode", "wal"},
		{"foreign keys", "foreign_keys", "1"},
		{"synchronous FULL", "synchronous", "2"},
		{"busy timeout", "busy_timeout", "10000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			if err := db.w.QueryRow("PRAGMA " + tc.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("writer PRAGMA %s = %s, want %s", tc.pragma, got, tc.want)
			}
		})
	}
	var fk string
	if err := db.r.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != "1" {
		t.Fatalf("reader foreign_keys = %q, %v", fk, err)
	}
}

// Readers are query-only: a write through one fails instead of taking the
// write lock behind the writer's back.
func TestReadersCannotWrite(t *testing.T) { forEachBackend(t, testReadersCannotWrite) }

func testReadersCannotWrite(t *testing.T, b backend) {
	db := b.open(t)
	if _, err := db.r.Exec("INSERT INTO tools (name) VALUES ('sneaky')"); err == nil {
		t.Fatal("write through the read pool succeeded")
	}
	if tools, err := db.Tools(context.Background()); err != nil || len(tools) != 0 {
		t.Fatalf("tools after a write through the read pool: %v, %v", tools, err)
	}
}

func TestTimesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   time.Time
	}{
		{"zero", time.Time{}},
		{"utc nanos", t0},
		{"other zone", time.Date(2024, 12, 31, 23, 59, 59, 999999999, time.FixedZone("X", 5*3600+1800))},
		{"epoch", time.Unix(0, 0)},
		{"before epoch", time.Unix(-1234567890, 5)},
		{"with monotonic", time.Now()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := encodeTime(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var n sql.NullInt64
			if v != nil {
				n = sql.NullInt64{Int64: v.(int64), Valid: true}
			}
			got := decodeTime(n)
			if !got.Equal(tc.in) || got.IsZero() != tc.in.IsZero() {
				t.Fatalf("round trip of %v gave %v", tc.in, got)
			}
			if !got.IsZero() && got.Location() != time.UTC {
				t.Fatalf("decoded time in %v, want UTC", got.Location())
			}
		})
	}
	_, err := encodeTime(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	wantErr(t, "year 3000", err, skills.ErrInvalid)
}

func TestListsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"nil becomes empty", nil, []string{}},
		{"empty", []string{}, []string{}},
		{"values kept in order", []string{"b", "a", "b"}, []string{"b", "a", "b"}},
		{"quotes and unicode", []string{`"x"`, "ü\u2028", "<&>"}, []string{`"x"`, "ü\u2028", "<&>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, err := encodeList("list", tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeList("list", text)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("decoded nil, want empty list")
			}
			mustEqual(t, "list", got, tc.want)
		})
	}
	_, err := encodeList("list", []string{"ok", "bad\xff"})
	wantErr(t, "invalid UTF-8", err, skills.ErrInvalid)
}

// FuzzLists checks that every list either round-trips exactly or is
// refused as invalid, and that decoding arbitrary stored text never panics.
func FuzzLists(f *testing.F) {
	f.Add("git", "", "jq", `["a"]`)
	f.Add("a\x00b", "\u2028", `"`, "null")
	f.Add("bad\xff", "ok", "x", `[1,2]`)
	f.Add("", "", "", "")
	f.Add("ü", "\\", "<>", `["x",null]`)
	f.Fuzz(func(t *testing.T, a, b, c, stored string) {
		in := []string{a, b, c}
		text, err := encodeList("list", in)
		if err != nil {
			if !errors.Is(err, skills.ErrInvalid) {
				t.Fatalf("encode %q: %v", in, err)
			}
		} else {
			got, err := decodeList("list", text)
			if err != nil {
				t.Fatalf("decode %q: %v", text, err)
			}
			mustEqual(t, "round trip", got, in)
		}
		if l, err := decodeList("list", stored); err == nil && l == nil {
			t.Fatalf("decode %q gave nil", stored)
		}
	})
}

func TestErrorClassification(t *testing.T) { forEachBackend(t, testErrorClassification) }

func testErrorClassification(t *testing.T, b backend) {
	db := b.open(t)
	if _, err := db.w.Exec("INSERT INTO tools (name) VALUES ('git')"); err != nil {
		t.Fatal(err)
	}
	_, dup := db.w.Exec("INSERT INTO tools (name) VALUES ('git')")
	_, check := db.w.Exec("INSERT INTO tools (name) VALUES ('')")
	_, fk := db.w.Exec("INSERT INTO session_binds (session, target) VALUES ('nope', '/t')")
	for _, tc := range []struct {
		name       string
		err        error
		uniq, busy bool
	}{
		{"primary key", dup, true, false},
		{"check", check, false, false},
		{"foreign key", fk, false, false},
		{"nil", nil, false, false},
		{"wrapped primary key", fmt.Errorf("x: %w", dup), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name != "nil" && tc.err == nil {
				t.Fatal("statement did not fail")
			}
			if got := isUniqueViolation(tc.err); got != tc.uniq {
				t.Errorf("isUniqueViolation(%v) = %v", tc.err, got)
			}
			if got := isBusy(tc.err); got != tc.busy {
				t.Errorf("isBusy(%v) = %v", tc.err, got)
			}
			if got := classify(tc.err); errors.Is(got, skills.ErrUnavailable) || errors.Is(got, skills.ErrDamaged) {
				t.Errorf("classify(%v) = %v, want neither unavailable nor damaged", tc.err, got)
			}
		})
	}
}
