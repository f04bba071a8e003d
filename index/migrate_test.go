package index

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/skills"
)

// openRaw opens a bare writer pool on a new index of backend b, without
// migrations, and returns it with the backend's dialect.
func openRaw(t testing.TB, b backend) (*sql.DB, *dialect) {
	t.Helper()
	target := b.target(t)
	var p *sql.DB
	d := sqliteDialect
	if isPostgresURL(target) {
		var err error
		if p, err = sql.Open("pgx", target); err != nil {
			t.Fatal(err)
		}
		d = postgresDialect
	} else {
		var err error
		if p, err = openPool(target, writerParams, 1); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { p.Close() })
	return p, d
}

// tables lists the tables of the index p, sorted.
func tables(t testing.TB, p *sql.DB, d *dialect) []string {
	t.Helper()
	query := "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
	if d.pg {
		query = `SELECT table_name COLLATE "C" FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`
	}
	return names(t, p, query)
}

// names runs a query of one text column on p and returns its values.
func names(t testing.TB, p *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := p.Query(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseMigrationName(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       int // 0: must be rejected
	}{
		{"padded", "001_init.sql", 1},
		{"large", "120_add_index.sql", 120},
		{"unpadded", "7_x.sql", 7},
		{"zero version", "000_init.sql", 0},
		{"no underscore", "001init.sql", 0},
		{"no digits", "_init.sql", 0},
		{"letters", "01a_init.sql", 0},
		{"sign", "+1_init.sql", 0},
		{"wrong suffix", "001_init.txt", 0},
		{"no name", "001_.sql", 0},
		{"overflow", "99999999999999999999999_x.sql", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMigrationName(tc.file)
			if tc.want == 0 {
				if err == nil {
					t.Fatalf("parseMigrationName(%q) = %d, want error", tc.file, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseMigrationName(%q) = %d, %v; want %d", tc.file, got, err, tc.want)
			}
		})
	}
}

func FuzzParseMigrationName(f *testing.F) {
	for _, s := range []string{"001_init.sql", "7_x.sql", "000_a.sql", "_x.sql", "1_.sql", "١_x.sql", "-1_x.sql", "1_x.sql.sql"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, file string) {
		v, err := parseMigrationName(file)
		if err != nil {
			return
		}
		digits, rest, _ := strings.Cut(file, "_")
		if v <= 0 || strconv.Itoa(v) != strings.TrimLeft(digits, "0") || !strings.HasSuffix(rest, ".sql") {
			t.Fatalf("parseMigrationName(%q) = %d", file, v)
		}
	})
}

func TestEmbeddedMigrations(t *testing.T) {
	for _, d := range []*dialect{sqliteDialect, postgresDialect} {
		t.Run(d.name, func(t *testing.T) {
			ms, err := loadMigrations(d.migrations)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 0 {
				t.Fatal("no migrations embedded")
			}
			for i, m := range ms {
				if m.version != i+1 {
					t.Errorf("migration %q has version %d, want %d: versions must be 1, 2, 3, ...", m.file, m.version, i+1)
				}
			}
		})
	}
}

func TestMigrationsRunInVersionOrder(t *testing.T) {
	forEachBackend(t, testMigrationsRunInVersionOrder)
}

func testMigrationsRunInVersionOrder(t *testing.T, b backend) {
	// 10 sorts before 9 as text; each step needs the one before it.
	fsys := fstest.MapFS{
		"10_c.sql": {Data: []byte("ALTER TABLE t ADD COLUMN c TEXT;")},
		"9_b.sql":  {Data: []byte("ALTER TABLE t ADD COLUMN b TEXT;")},
		"1_a.sql":  {Data: []byte("CREATE TABLE t (a TEXT);")},
		"README":   {Data: []byte("not a migration")},
	}
	db, d := openRaw(t, b)
	ctx := context.Background()
	for range 2 {
		if err := migrate(ctx, db, d, fsys); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.Query("SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []string
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, strconv.Itoa(v))
	}
	if got := strings.Join(versions, ","); got != "1,9,10" {
		t.Fatalf("recorded versions %s, want 1,9,10", got)
	}
	if _, err := db.Exec("INSERT INTO t (a, b, c) VALUES ('1', '2', '3')"); err != nil {
		t.Fatal(err)
	}
}

func TestMigrationLoadErrors(t *testing.T) { forEachBackend(t, testMigrationLoadErrors) }

func testMigrationLoadErrors(t *testing.T, b backend) {
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
	}{
		{"duplicate version", fstest.MapFS{"1_a.sql": {}, "01_b.sql": {}}},
		{"bad name", fstest.MapFS{"1_a.sql": {}, "latest.sql": {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := loadMigrations(tc.fsys); err == nil {
				t.Fatal("loadMigrations accepted the set")
			}
			db, d := openRaw(t, b)
			if err := migrate(context.Background(), db, d, tc.fsys); err == nil {
				t.Fatal("migrate accepted the set")
			}
		})
	}
}

func TestFailedMigrationLeavesNothing(t *testing.T) {
	forEachBackend(t, testFailedMigrationLeavesNothing)
}

func testFailedMigrationLeavesNothing(t *testing.T, b backend) {
	fsys := fstest.MapFS{
		"1_a.sql": {Data: []byte("CREATE TABLE a (x TEXT);")},
		// The second statement fails after the first one ran.
		"2_b.sql": {Data: []byte("CREATE TABLE b (x TEXT); INSERT INTO no_such_table VALUES (1);")},
	}
	db, d := openRaw(t, b)
	ctx := context.Background()
	if err := migrate(ctx, db, d, fsys); err == nil {
		t.Fatal("migrate succeeded with a broken migration")
	}
	mustEqual(t, "tables after failed migration", tables(t, db, d), []string{"a", "schema_migrations"})
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM schema_migrations WHERE version = 2").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("failed migration was recorded")
	}
	// Fixed, it applies on the next run and 1 is not run again (it would
	// fail: table a exists).
	fsys["2_b.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE b (x TEXT);")}
	if err := migrate(ctx, db, d, fsys); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "tables after fix", tables(t, db, d), []string{"a", "b", "schema_migrations"})
}

func TestSchemaHasForeignKeysIntact(t *testing.T) { forEachBackend(t, testSchemaHasForeignKeysIntact) }

func testSchemaHasForeignKeysIntact(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	insertSkill(t, db, "a", "h1")
	if b.name == "sqlite" { // PostgreSQL checks every key as it commits
		rows, err := db.r.QueryContext(ctx, "PRAGMA foreign_key_check")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		if rows.Next() {
			t.Fatal("foreign key violations in a fresh index")
		}
	}
	// The current version must be one of the skill's versions.
	_, err := db.w.ExecContext(ctx, "UPDATE skills SET current_version = 'nope' WHERE slug = 'a'")
	if err == nil {
		t.Fatal("current_version accepted a hash with no version row")
	}
}

// upTo is the embedded migrations up to and including version n.
func upTo(t testing.TB, n int) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	ms, err := loadMigrations(sqliteDialect.migrations)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version <= n {
			out[m.file] = &fstest.MapFile{Data: []byte(m.sql)}
		}
	}
	return out
}

// TestPinsMoveIntoTheirSession: migration 006 carries every session's pins,
// in closure order, from the old per-pin rows into the session's row, and
// migration 005 counts the skills already there as changed once. SQLite
// only: PostgreSQL's schema starts where SQLite's 010 ends.
func TestPinsMoveIntoTheirSession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	raw, err := openPool(path, writerParams, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := migrate(ctx, raw, sqliteDialect, upTo(t, 4)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"PRAGMA foreign_keys = off", // a skill row without its version row
		`INSERT INTO skills (slug, name, description, source_type, source, share, enabled, skill_deps, tool_deps, mcp_deps, current_version, creator)
			VALUES ('b', 'b', 'd', 'upload', 's', '{"read":{"kind":"global"},"manage":{"kind":"user"}}', 1, '[]', '[]', '[]', 'hb', 'op')`,
		"INSERT INTO sessions (id, uid, all_skills) VALUES ('s1', 'u', 0), ('s2', 'u', 1)",
		"INSERT INTO session_pins (session, position, slug, version) VALUES ('s1', 1, 'a', 'ha'), ('s1', 0, 'b', 'hb'), ('s1', 2, 'c', 'hc')",
	} {
		if _, err := raw.Exec(q); err != nil {
			raw.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	db := openAt(t, path)
	s1, err := db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "pins of s1", s1.Pins, []skills.Pin{{Slug: "b", Version: "hb"}, {Slug: "a", Version: "ha"}, {Slug: "c", Version: "hc"}})
	s2, err := db.Session(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "pins of s2", s2.Pins, []skills.Pin{})
	set, err := db.SkillSet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if set.Get("b") == nil || set.Len() != 1 {
		t.Fatalf("catalog after migrating: %d skills, b = %v", set.Len(), set.Get("b"))
	}
}
