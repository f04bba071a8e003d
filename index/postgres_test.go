package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"skillfs/index/pgtest"
	"skillfs/skills"
)

// signalWait bounds the wait for a signal that must come; it is a
// deadline for a failing test, not a measure.
const signalWait = 30 * time.Second

// withPassword is dsn with password pw in its user part.
func withPassword(t *testing.T, dsn, pw string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String()
}

// A URL's password is never shown: not by Path, not in an error. The test
// server trusts every connection, so any password opens it.
func TestPostgresPasswordIsNeverShown(t *testing.T) {
	const pw = "s3cret-pw"
	dsn := pgtest.Database(t)
	inParam := dsn + "&password=" + pw
	for _, target := range []string{withPassword(t, dsn, pw), inParam} {
		db := openBare(t, target)
		if strings.Contains(db.Path(), pw) || !strings.Contains(db.Path(), hidden) {
			t.Errorf("Path() = %q: want the password hidden", db.Path())
		}
		// Any other secret parameter is hidden too (not passed to a
		// server, which would refuse what it does not know).
		if shown := redactURL(target + "&sslpassword=key-pw"); strings.Contains(shown, "key-pw") {
			t.Errorf("redactURL shows sslpassword: %q", shown)
		}
		if db.Backend() != "postgres" {
			t.Errorf("Backend() = %q", db.Backend())
		}
	}
	gone := "postgres://skillfs:" + pw + "@127.0.0.1:" + strconv.Itoa(closedPort(t)) + "/x?sslmode=disable"
	for _, target := range []string{gone, "postgres://skillfs:" + pw + "@127.0.0.1:notaport/x", "postgres://skillfs:" + pw + "@[::1/x"} {
		db, err := Open(target)
		if err == nil {
			db.Close()
			t.Fatalf("Open(%q) succeeded", target)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("Open error shows the password: %v", err)
		}
	}
}

// closedPort is a loopback port nobody listens on: one the system just gave
// a listener, which is closed.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A server that cannot be reached is skills.ErrUnavailable: at Open, and
// for reads and writes once it has gone; the same handle works again when
// it is back. A database that does not exist is not "unavailable": it is
// a mistake to fix, not an outage to wait out.
func TestPostgresUnreachableIsUnavailable(t *testing.T) {
	ctx := context.Background()
	_, err := Open("postgres://skillfs@127.0.0.1:" + strconv.Itoa(closedPort(t)) + "/x?sslmode=disable&connect_timeout=2")
	wantErr(t, "Open of a closed port", err, skills.ErrUnavailable)
	_, err = Open(pgtest.Server(t).URL("no_such_database"))
	if err == nil || errors.Is(err, skills.ErrUnavailable) {
		t.Fatalf("Open of a missing database = %v, want an error other than unavailable", err)
	}
	_, err = Open("postgres://skillfs@127.0.0.1:notaport/x")
	wantErr(t, "Open of a bad URL", err, skills.ErrInvalid)

	db := postgresBackend.open(t)
	insertSkill(t, db, "a", "h1")
	s := pgtest.Server(t)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Start() }) // the next tests need it, whatever happens here
	_, err = db.Skill(ctx, "a")
	wantErr(t, "read with the server gone", err, skills.ErrUnavailable)
	wantErr(t, "write with the server gone", db.AddTool(ctx, "git"), skills.ErrUnavailable)
	_, err = db.SkillSet(ctx)
	wantErr(t, "SkillSet with the server gone", err, skills.ErrUnavailable)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Skill(ctx, "a"); err != nil {
		t.Fatalf("read with the server back: %v", err)
	}
	if err := db.AddTool(ctx, "git"); err != nil {
		t.Fatalf("write with the server back: %v", err)
	}
	// Connections that sat idle in the pool across a restart are closed
	// by the server: the first calls after it still succeed.
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := db.AddMCP(ctx, "github"); err != nil {
		t.Fatalf("first write after a restart: %v", err)
	}
	if _, err := db.Tools(ctx); err != nil {
		t.Fatalf("first read after a restart: %v", err)
	}
}

// Check finds a schema that misses a table, or lags behind the program.
func TestCheckFindsAMissingTable(t *testing.T) {
	ctx := context.Background()
	db := postgresBackend.open(t)
	if err := db.Check(ctx); err != nil {
		t.Fatalf("Check of a sound index: %v", err)
	}
	if _, err := db.w.Exec("DROP TABLE read_audit"); err != nil {
		t.Fatal(err)
	}
	err := db.Check(ctx)
	if !errors.Is(err, skills.ErrDamaged) || !strings.Contains(err.Error(), "read_audit") {
		t.Fatalf("Check without read_audit = %v, want ErrDamaged naming it", err)
	}
	if _, err := db.w.Exec("DELETE FROM schema_migrations"); err != nil {
		t.Fatal(err)
	}
	if err := db.Check(ctx); !errors.Is(err, skills.ErrDamaged) || !strings.Contains(err.Error(), "schema version") {
		t.Fatalf("Check without migrations = %v, want ErrDamaged saying the version", err)
	}
}

// waitSignal fails the test unless ch receives within signalWait.
func waitSignal(t *testing.T, ch <-chan struct{}, after string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(signalWait):
		t.Fatalf("no signal %s within %v", after, signalWait)
	}
}

// drain empties ch of a pending signal.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// Watch wakes a handle when another one (another host) changes a skill, a
// user, a registry or a session's pins; and again after the server came
// back, since notifications may have been lost meanwhile.
func TestWatchSeesChangesOfAnotherHandle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	target := postgresBackend.target(t)
	a, b := openAt(t, target), openAt(t, target)
	ch := a.Watch(ctx)
	waitSignal(t, ch, "when it started listening")
	s, _ := insertSkill(t, b, "pdf", "h1")
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"skill added", func() error { return nil }}, // the insert above
		{"skill shared", func() error {
			_, err := b.UpdateSkill(ctx, "pdf", func(s *skills.Skill) error { s.Share.Read.Kind = skills.ScopeGlobal; return nil })
			return err
		}},
		{"version added", func() error { return b.AddVersion(ctx, s, testVersion("pdf", "h2")) }},
		{"rolled back", func() error { return b.SetCurrentVersion(ctx, "pdf", "h1") }},
		{"user's department", func() error {
			return b.PutUser(ctx, skills.User{UID: "alice", Role: skills.RoleUser, Department: "ops"})
		}},
		{"tool registered", func() error { return b.AddTool(ctx, "git") }},
		{"session created", func() error { return b.CreateSession(ctx, testSession("s1", t0)) }},
		{"session's pins", func() error { return b.SetPins(ctx, "s1", []skills.Pin{{Slug: "pdf", Version: "h1"}}) }},
		{"session moved", func() error { return b.MoveSession(ctx, "s1", "", "h2") }},
		{"session closed", func() error { return b.CloseSession(ctx, "s1") }},
		{"skill deleted", func() error { _, err := b.DeleteSkill(ctx, "pdf"); return err }},
	} {
		if err := c.change(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		waitSignal(t, ch, "after "+c.name)
	}

	s2 := pgtest.Server(t)
	if err := s2.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Start() })
	drain(ch)
	if err := s2.Start(); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "when it listened again")
	if err := b.AddMCP(ctx, "github"); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, ch, "after a change once it listened again")
}

// Watch stops with its context and with Close; on SQLite nothing signals.
func TestWatchEnds(t *testing.T) {
	db := sqliteBackend.open(t)
	ch := db.Watch(context.Background())
	if err := db.PutUser(context.Background(), skills.User{UID: "x", Role: skills.RoleUser}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("a SQLite index signalled a change")
	default:
	}

	target := postgresBackend.target(t)
	pg := openAt(t, target)
	ctx, cancel := context.WithCancel(context.Background())
	ch = pg.Watch(ctx)
	waitSignal(t, ch, "when it started listening")
	listeners := func() int {
		var n int
		if err := pg.r.QueryRow("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := listeners(); n != 1 {
		t.Fatalf("%d listening connections, want 1", n)
	}
	cancel()
	deadline := time.Now().Add(signalWait)
	for listeners() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher still listens after its context ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Event ids grow in the order events are committed, also when two handles
// (two hosts) add events at once: a reader that follows the log by the
// last id it saw sees every event once.
func TestEventIDsFollowCommits(t *testing.T) { forEachBackend(t, testEventIDsFollowCommits) }

func testEventIDsFollowCommits(t *testing.T, b backend) {
	ctx := context.Background()
	target := b.target(t)
	writers := []*DB{openAt(t, target), openAt(t, target)}
	reader := openAt(t, target)
	const each = 100
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(writers))
	for w, db := range writers {
		for g := range 2 {
			wg.Go(func() {
				for i := range each {
					e := &skills.Event{Type: "refreshed", Session: fmt.Sprintf("w%d-%d-%d", w, g, i), At: t0}
					if err := db.AddEvents(ctx, e); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[string]bool{}
	var after int64
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		p, err := reader.Events(ctx, "", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Events {
			if seen[e.Session] || e.ID <= after {
				t.Fatalf("event %d (%s) seen twice or out of order", e.ID, e.Session)
			}
			seen[e.Session] = true
			after = e.ID
		}
		if finished && len(p.Events) == 0 {
			break
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if want := len(writers) * 2 * each; len(seen) != want {
		t.Fatalf("the reader saw %d events, want %d: following by id missed some", len(seen), want)
	}
}

// Keys sort in byte order, as the program sorts them, whatever the
// database's collation (the test databases' is ICU's root collation, which
// puts "a" before "B").
func TestKeysSortInByteOrder(t *testing.T) { forEachBackend(t, testKeysSortInByteOrder) }

func testKeysSortInByteOrder(t *testing.T, b backend) {
	ctx := context.Background()
	db := b.open(t)
	keys := []string{"b", "B", "a", "_z", "Z", "ä", "a-b", "a_b", "a.b", "10", "9"}
	for _, k := range keys {
		insertSkill(t, db, k, "h")
		if err := db.AddTool(ctx, k); err != nil {
			t.Fatal(err)
		}
		s := testSession(k, t0)
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	list, err := db.Skills(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var slugs []string
	for _, s := range list {
		slugs = append(slugs, s.Slug)
	}
	mustEqual(t, "skills", slugs, want)
	tools, err := db.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "tools", tools, want)
	ids, err := db.OpenSessionIDs(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "sessions", ids, want)
	// Pages follow the same order as the whole list.
	var paged []string
	for after := ""; ; {
		page, err := db.OpenSessionsPage(ctx, "", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page {
			paged = append(paged, s.ID)
		}
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].ID
	}
	mustEqual(t, "sessions by page", paged, want)
}

// column is a column of a table as both schemas describe it.
type column struct {
	Name    string
	NotNull bool
}

// TestSchemasMatch: PostgreSQL's schema has the tables, columns (in
// order, with their NOT NULL) and indexes that SQLite's has after all its
// migrations.
func TestSchemasMatch(t *testing.T) {
	lite, pg := sqliteBackend.open(t), postgresBackend.open(t)
	describe := func(db *DB) (map[string][]column, []string) {
		cols := map[string][]column{}
		for _, table := range schemaTables {
			query := "SELECT name, \"notnull\" OR pk > 0 FROM pragma_table_info(?) ORDER BY cid"
			if db.d.pg {
				query = "SELECT column_name, is_nullable = 'NO' FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position"
			}
			rows, err := db.r.Query(query, table)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var c column
				if err := rows.Scan(&c.Name, &c.NotNull); err != nil {
					t.Fatal(err)
				}
				cols[table] = append(cols[table], c)
			}
			rows.Close()
		}
		// Indexes made by CREATE INDEX, not those of keys.
		query := "SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL ORDER BY name"
		if db.d.pg {
			query = `SELECT i.indexname COLLATE "C" FROM pg_indexes i WHERE i.schemaname = current_schema() AND NOT EXISTS
				(SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname) ORDER BY 1`
		}
		indexes := names(t, db.r, query)
		return cols, indexes
	}
	liteCols, liteIdx := describe(lite)
	pgCols, pgIdx := describe(pg)
	for _, table := range schemaTables {
		if len(liteCols[table]) == 0 {
			t.Errorf("SQLite has no table %s", table)
		}
		mustEqual(t, "columns of "+table, pgCols[table], liteCols[table])
	}
	mustEqual(t, "indexes", pgIdx, liteIdx)
	mustEqual(t, "tables of SQLite", tables(t, lite.r, lite.d), schemaTables)
	mustEqual(t, "tables of PostgreSQL", tables(t, pg.r, pg.d), schemaTables)
}

// A write waits for its turn for as long as lock_timeout says (by default
// as long as a SQLite writer waits for the file), then fails without
// changing anything; it is a busy index, not an unreachable one.
func TestPostgresWriteWaitsForItsTurn(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t)
	db := openBare(t, dsn)
	var waits string
	if err := db.w.QueryRow("SHOW lock_timeout").Scan(&waits); err != nil || waits != "10s" {
		t.Fatalf("writer lock_timeout = %q, %v; want 10s", waits, err)
	}
	impatient := openBare(t, dsn+"&lock_timeout=200ms")
	// Another host in the middle of a write.
	other, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(postgresDialect.lockWrite); err != nil {
		t.Fatal(err)
	}
	err = impatient.AddTool(ctx, "git")
	if err == nil || errors.Is(err, skills.ErrUnavailable) || !strings.Contains(err.Error(), "lock timeout") {
		t.Fatalf("a write while another holds the turn = %v, want a lock timeout", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := impatient.AddTool(ctx, "git"); err != nil {
		t.Fatalf("a write after the other's: %v", err)
	}
}

// Text PostgreSQL cannot store, which SQLite takes, is refused as invalid
// and changes nothing.
func TestPostgresRefusesTextItCannotStore(t *testing.T) {
	ctx := context.Background()
	db := postgresBackend.open(t)
	for name, text := range map[string]string{"NUL": "a\x00b", "invalid UTF-8": "a\xffb"} {
		s, v := testSkill("odd"), testVersion("odd", "h1")
		s.Description = text
		wantErr(t, name, db.InsertSkill(ctx, s, v), skills.ErrInvalid)
		if _, err := db.Skill(ctx, "odd"); !errors.Is(err, skills.ErrNotFound) {
			t.Fatalf("%s: a refused insert left a skill: %v", name, err)
		}
	}
}
