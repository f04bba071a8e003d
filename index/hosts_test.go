package index

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"skillfs/skills"
)

// hostSession is testSession served by host.
func hostSession(id, host string) *skills.Session {
	s := testSession(id, t0)
	s.Host = host
	return s
}

// TestHosts: a host registers, heartbeats and is listed with the open
// sessions it serves; registering again is a restart (new start time, same
// row); an unknown host is not found.
func TestHosts(t *testing.T) { forEachBackend(t, testHosts) }

func testHosts(t *testing.T, be backend) {
	db := be.open(t)
	ctx := context.Background()
	a := skills.Host{ID: "ha", Name: "alpha", API: "127.0.0.1:7000", Mount: "/srv/a/mnt", StartedAt: t0, LastSeen: t0}
	b := skills.Host{ID: "hb", Name: "beta", Mount: "/srv/b/mnt", StartedAt: t0, LastSeen: t0}
	for _, h := range []skills.Host{b, a} {
		if err := db.RegisterHost(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*skills.Session{hostSession("s1", "ha"), hostSession("s2", "ha"), hostSession("s3", "hb"), hostSession("gone", "ha")} {
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CloseSession(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(3 * time.Second)
	if err := db.Heartbeat(ctx, "hb", later); err != nil {
		t.Fatal(err)
	}
	list, err := db.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.Sessions = 2
	b.Sessions, b.LastSeen = 1, later
	mustEqual(t, "hosts", list, []skills.Host{a, b})

	// A restart: the same row with its new start and settings.
	a2 := skills.Host{ID: "ha", Name: "alpha-2", Mount: "/srv/a/mnt2", StartedAt: later, LastSeen: later}
	if err := db.RegisterHost(ctx, a2); err != nil {
		t.Fatal(err)
	}
	got, err := db.Host(ctx, "ha")
	if err != nil {
		t.Fatal(err)
	}
	a2.Sessions = 2
	mustEqual(t, "host after a restart", got, a2)

	_, err = db.Host(ctx, "nope")
	wantErr(t, "Host unknown", err, skills.ErrNotFound)
	wantErr(t, "Heartbeat unknown", db.Heartbeat(ctx, "nope", later), skills.ErrNotFound)
	wantErr(t, "RegisterHost without id", db.RegisterHost(ctx, skills.Host{Name: "x", StartedAt: t0, LastSeen: t0}), skills.ErrInvalid)
	wantErr(t, "RegisterHost without start", db.RegisterHost(ctx, skills.Host{ID: "x", LastSeen: t0}), skills.ErrInvalid)
	if list, err := db.Hosts(ctx); err != nil || len(list) != 2 {
		t.Fatalf("a refused registration changed the hosts: %v, %v", list, err)
	}
}

// TestOpenSessionsOfAHost: the host filter lists the open sessions one host
// serves, in the same order and with the same cursor as the whole list.
func TestOpenSessionsOfAHost(t *testing.T) { forEachBackend(t, testOpenSessionsOfAHost) }

func testOpenSessionsOfAHost(t *testing.T, be backend) {
	db := be.open(t)
	ctx := context.Background()
	ids := []string{"a1", "b1", "a2", "b2", "a3"}
	for i, id := range ids {
		s := hostSession(id, "h"+id[:1])
		s.CreatedAt = t0.Add(time.Duration(i) * time.Second)
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	idsOf := func(list []*skills.Session) []string {
		out := []string{}
		for _, s := range list {
			out = append(out, s.ID)
		}
		return out
	}
	page, err := db.OpenSessionsPage(ctx, "ha", "", -1)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "sessions of ha", idsOf(page), []string{"a1", "a2", "a3"})
	if page[0].Host != "ha" {
		t.Fatalf("session a1 is served by %q, want ha", page[0].Host)
	}
	// A cursor of another host's session still places the page.
	page, err = db.OpenSessionsPage(ctx, "ha", "b1", 1)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "sessions of ha after b1", idsOf(page), []string{"a2"})
	page, err = db.OpenSessionsPage(ctx, "", "b1", -1)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "every session after b1", idsOf(page), []string{"a2", "b2", "a3"})
	page, err = db.OpenSessionsPage(ctx, "hz", "", -1)
	if err != nil || len(page) != 0 {
		t.Fatalf("sessions of a host serving none: %v, %v", idsOf(page), err)
	}
}

// TestBindsAreTheirHosts: a bind is current while the host that made it
// serves its session; once the session is closed (anywhere) or moved, the
// bind is that host's stale bind to detach and forget, and no one else's.
func TestBindsAreTheirHosts(t *testing.T) { forEachBackend(t, testBindsAreTheirHosts) }

func testBindsAreTheirHosts(t *testing.T, be backend) {
	db := be.open(t)
	ctx := context.Background()
	for _, s := range []*skills.Session{hostSession("s1", "ha"), hostSession("s2", "ha"), hostSession("s3", "hb")} {
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(id, host, target string) {
		t.Helper()
		if err := db.AddBind(ctx, id, host, skills.Bind{Target: target}); err != nil {
			t.Fatal(err)
		}
	}
	bind("s1", "ha", "/a1")
	bind("s2", "ha", "/a2")
	bind("s3", "hb", "/b3")
	wantErr(t, "a bind by a host not serving the session", db.AddBind(ctx, "s1", "hb", skills.Bind{Target: "/x"}), skills.ErrElsewhere)

	of := func(host string) map[string][]skills.Bind {
		t.Helper()
		m, err := db.OpenBinds(ctx, host, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	stale := func(host string) map[string][]skills.Bind {
		t.Helper()
		m, err := db.StaleBinds(ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	mustEqual(t, "binds of ha", of("ha"), map[string][]skills.Bind{"s1": {{Target: "/a1"}}, "s2": {{Target: "/a2"}}})
	mustEqual(t, "binds of every host", len(of("")), 3)
	mustEqual(t, "stale binds of ha", stale("ha"), map[string][]skills.Bind{})

	// s1 is closed by someone else, s2 moved to hb.
	if err := db.CloseSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := db.MoveSession(ctx, "s2", "ha", "hb"); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "binds of ha after", of("ha"), map[string][]skills.Bind{})
	mustEqual(t, "binds of hb after", of("hb"), map[string][]skills.Bind{"s3": {{Target: "/b3"}}})
	if binds, err := db.Binds(ctx, "s2"); err != nil || len(binds) != 0 {
		t.Fatalf("a moved session keeps its old host's binds: %v, %v", binds, err)
	}
	mustEqual(t, "stale binds of ha after", stale("ha"), map[string][]skills.Bind{"s1": {{Target: "/a1"}}, "s2": {{Target: "/a2"}}})
	mustEqual(t, "stale binds of hb", stale("hb"), map[string][]skills.Bind{})
	wantErr(t, "removing the old host's bind through the session", db.RemoveBind(ctx, "s2", skills.Bind{Target: "/a2"}), skills.ErrNotFound)

	// The new host binds the moved session where the old one had it.
	bind("s2", "hb", "/a2")
	mustEqual(t, "binds of s2 on hb", of("hb")["s2"], []skills.Bind{{Target: "/a2"}})
	for _, id := range []string{"s1", "s2"} {
		if err := db.ForgetBinds(ctx, id, "ha"); err != nil {
			t.Fatal(err)
		}
	}
	mustEqual(t, "stale binds of ha, forgotten", stale("ha"), map[string][]skills.Bind{})
	mustEqual(t, "binds of s2 on hb, after ha forgot its own", of("hb")["s2"], []skills.Bind{{Target: "/a2"}})
}

// TestMoveSession: a move takes an open session over from the host that
// serves it, with its pins and activations, and stores its events with it;
// one from a host that no longer serves it, of a closed or unknown
// session, changes nothing.
func TestMoveSession(t *testing.T) { forEachBackend(t, testMoveSession) }

func testMoveSession(t *testing.T, be backend) {
	db := be.open(t)
	ctx := context.Background()
	if err := db.CreateSession(ctx, hostSession("s1", "ha")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordActivation(ctx, "s1", "pdf", t0); err != nil {
		t.Fatal(err)
	}
	ev := &skills.Event{Type: "moved", Session: "s1", At: t0}
	if err := db.MoveSession(ctx, "s1", "ha", "hb", ev); err != nil {
		t.Fatal(err)
	}
	if ev.ID == 0 {
		t.Fatal("the move's event got no id")
	}
	got, err := db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := hostSession("s1", "hb")
	mustEqual(t, "moved session", got, want)
	acts, err := db.Activations(ctx, "s1")
	if err != nil || len(acts) != 1 || acts[0].Slug != "pdf" || acts[0].Opens != 1 {
		t.Fatalf("activations after the move: %+v, %v", acts, err)
	}
	if first, err := db.RecordActivation(ctx, "s1", "pdf", t0.Add(time.Second)); err != nil || first {
		t.Fatalf("an open after the move is a first activation (%v, %v)", first, err)
	}

	again := &skills.Event{Type: "moved", Session: "s1", At: t0}
	wantErr(t, "a move from the host it left", db.MoveSession(ctx, "s1", "ha", "hc", again), skills.ErrElsewhere)
	if again.ID != 0 {
		t.Fatal("a refused move stored its event")
	}
	wantErr(t, "a move of an unknown session", db.MoveSession(ctx, "nope", "ha", "hb"), skills.ErrNotFound)
	wantErr(t, "a move to no host", db.MoveSession(ctx, "s1", "hb", ""), skills.ErrInvalid)
	if err := db.CloseSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a move of a closed session", db.MoveSession(ctx, "s1", "hb", "hc"), skills.ErrInvalid)
	if got, err := db.Session(ctx, "s1"); err != nil || got.Host != "hb" {
		t.Fatalf("refused moves changed the host: %+v, %v", got, err)
	}
	page, err := db.Events(ctx, "s1", 0, 10)
	if err != nil || len(page.Events) != 1 || page.Events[0].Type != "moved" {
		t.Fatalf("events of s1: %+v, %v", page, err)
	}
}

// TestMoveSessionRace: hosts in two processes' worth of connections take
// over the same session at once; exactly one does, and the session ends up
// served by it.
func TestMoveSessionRace(t *testing.T) { forEachBackend(t, testMoveSessionRace) }

func testMoveSessionRace(t *testing.T, be backend) {
	path := be.target(t)
	db1 := openAt(t, path)
	db2 := openBare(t, path)
	ctx := context.Background()
	for round := range 20 {
		id := "s" + string(rune('a'+round))
		if err := db1.CreateSession(ctx, hostSession(id, "gone")); err != nil {
			t.Fatal(err)
		}
		movers := []string{"h1", "h2", "h3", "h4"}
		errs := make([]error, len(movers))
		var wg sync.WaitGroup
		for i, to := range movers {
			db := db1
			if i%2 == 1 {
				db = db2
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = db.MoveSession(ctx, id, "gone", to, &skills.Event{Type: "moved", Session: id, At: t0})
			}()
		}
		wg.Wait()
		winner := ""
		for i, err := range errs {
			switch {
			case err == nil && winner != "":
				t.Fatalf("round %d: both %s and %s took the session over", round, winner, movers[i])
			case err == nil:
				winner = movers[i]
			case !errors.Is(err, skills.ErrElsewhere):
				t.Fatalf("round %d: mover %s: %v, want a conflict", round, movers[i], err)
			}
		}
		s, err := db2.Session(ctx, id)
		if err != nil || winner == "" || s.Host != winner {
			t.Fatalf("round %d: winner %q, session served by %+v (%v)", round, winner, s, err)
		}
		page, err := db1.Events(ctx, id, 0, 10)
		if err != nil || len(page.Events) != 1 {
			t.Fatalf("round %d: %d moved events stored, want 1 (%v)", round, len(page.Events), err)
		}
	}
}

// TestMarks: the users' mark moves with every user change that commits
// (and with no other), and Served counts the open sessions of the host.
func TestMarks(t *testing.T) { forEachBackend(t, testMarks) }

func testMarks(t *testing.T, be backend) {
	db := be.open(t)
	ctx := context.Background()
	marks := func() Marks {
		t.Helper()
		m, err := db.Marks(ctx, "ha")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m0 := marks()
	// step runs a change that must commit (ok) or be refused, and checks
	// whether it moved the users' mark.
	step := func(what string, fn func() error, ok, moves bool) {
		t.Helper()
		before := marks()
		if err := fn(); (err == nil) != ok {
			t.Fatalf("%s: err = %v, want success %v", what, err, ok)
		}
		after := marks()
		if moved := after.Users != before.Users; moved != moves {
			t.Fatalf("%s: users' mark %d → %d (moved %v, want %v)", what, before.Users, after.Users, moved, moves)
		}
	}
	step("add a user", func() error { return db.PutUser(ctx, skills.User{UID: "carol", Role: skills.RoleUser}) }, true, true)
	step("change a department", func() error {
		return db.PutUser(ctx, skills.User{UID: "carol", Role: skills.RoleUser, Department: "eng"})
	}, true, true)
	step("a refused put", func() error { return db.PutUser(ctx, skills.User{UID: "carol", Role: "king"}) }, false, false)
	step("delete a user", func() error { return deleteUser(ctx, db, "carol") }, true, true)
	step("delete a user that does not exist", func() error { return deleteUser(ctx, db, "carol") }, false, false)
	if err := db.CreateSession(ctx, hostSession("s1", "ha")); err != nil {
		t.Fatal(err)
	}
	step("delete a user with an open session", func() error { return deleteUser(ctx, db, "alice") }, false, false)
	step("a skill change", func() error { return db.InsertSkill(ctx, testSkill("x"), testVersion("x", "h1")) }, true, false)

	for _, s := range []*skills.Session{hostSession("s2", "ha"), hostSession("s3", "hb")} {
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if m := marks(); m.Served != 2 || m0.Served != 0 {
		t.Fatalf("served: %d before any session, %d with two of three: want 0 and 2", m0.Served, m.Served)
	}
	if err := db.MoveSession(ctx, "s2", "ha", "hb"); err != nil {
		t.Fatal(err)
	}
	if err := db.CloseSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if m := marks(); m.Served != 0 {
		t.Fatalf("served after a move away and a close: %d, want 0", m.Served)
	}
}

// TestAdoptSessions: the open sessions of no host go to the first host that
// adopts them; closed ones and other hosts' stay as they are.
func TestAdoptSessions(t *testing.T) { forEachBackend(t, testAdoptSessions) }

func testAdoptSessions(t *testing.T, be backend) {
	db := be.open(t)
	ctx := context.Background()
	for _, s := range []*skills.Session{hostSession("old1", ""), hostSession("old2", ""), hostSession("closed", ""), hostSession("b1", "hb")} {
		if err := db.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CloseSession(ctx, "closed"); err != nil {
		t.Fatal(err)
	}
	if n, err := db.AdoptSessions(ctx, "ha"); err != nil || n != 2 {
		t.Fatalf("adopted %d (%v), want 2", n, err)
	}
	if n, err := db.AdoptSessions(ctx, "hc"); err != nil || n != 0 {
		t.Fatalf("a second host adopted %d (%v), want 0", n, err)
	}
	for id, want := range map[string]string{"old1": "ha", "old2": "ha", "closed": "", "b1": "hb"} {
		if s, err := db.Session(ctx, id); err != nil || s.Host != want {
			t.Fatalf("session %s served by %+v (%v), want %q", id, s, err, want)
		}
	}
	_, err := db.AdoptSessions(ctx, "")
	wantErr(t, "adopt for no host", err, skills.ErrInvalid)
}

// TestSessionsTakeTheirDataDirectorysHost: migration 011 gives the
// sessions and binds of an index from before hosts the identity of the
// data directory the index belongs to. (SQLite only: a PostgreSQL index is
// new with this program's schema.)
func TestSessionsTakeTheirDataDirectorysHost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	raw, err := openPool(path, writerParams, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := migrate(ctx, raw, sqliteDialect, upTo(t, 10)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO meta (key, value) VALUES ('data_directory_id', 'dd1')",
		"INSERT INTO users (uid, role) VALUES ('u', 'user')",
		"INSERT INTO sessions (id, uid, all_skills) VALUES ('s1', 'u', 0)",
		"INSERT INTO session_binds (session, target, pid, ns) VALUES ('s1', '/t', 0, ''), ('s1', '/u', 7, 'mnt:[9]')",
	} {
		if _, err := raw.Exec(q); err != nil {
			raw.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	db := openBare(t, path)
	s, err := db.Session(ctx, "s1")
	if err != nil || s.Host != "dd1" {
		t.Fatalf("session after migrating: %+v, %v; want host dd1", s, err)
	}
	binds, err := db.OpenBinds(ctx, "dd1", nil)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "binds after migrating", binds, map[string][]skills.Bind{"s1": {{Target: "/t"}, {Target: "/u", PID: 7, NS: "mnt:[9]"}}})
	if m, err := db.Marks(ctx, "dd1"); err != nil || m.Served != 1 {
		t.Fatalf("marks after migrating: %+v, %v", m, err)
	}
}

// Clock is the index's time: the server's on PostgreSQL, which on this
// machine agrees with the process's clock (the test allows for a slow
// machine), and it does not run backwards.
func TestClock(t *testing.T) { forEachBackend(t, testClock) }

func testClock(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	before := time.Now()
	first, err := db.Clock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := db.Clock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := first.Sub(before); d < -time.Minute || d > time.Minute {
		t.Errorf("Clock() = %s, %s from this machine's %s", first, d, before)
	}
	if second.Before(first) {
		t.Errorf("Clock() went back: %s, then %s", first, second)
	}
	if first.Location() != time.UTC {
		t.Errorf("Clock() is in %s, want UTC", first.Location())
	}
}

// A host's change to a session's pins or request is refused once another
// host has taken the session over, inside the write's own turn: a refresh
// or `session set` racing a (forced) move never writes pins the new host
// does not serve.
func TestSessionChangesOnlyByItsHost(t *testing.T) {
	forEachBackend(t, testSessionChangesOnlyByItsHost)
}

func testSessionChangesOnlyByItsHost(t *testing.T, be backend) {
	db := be.open(t)
	ctx := context.Background()
	s := hostSession("s1", "ha")
	if err := db.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := db.MoveSession(ctx, "s1", "ha", "hb"); err != nil {
		t.Fatal(err)
	}
	pins := []skills.Pin{{Slug: "late", Version: "v9"}}
	wantErr(t, "pins set by the host it left", db.SetPinsOn(ctx, "ha", "s1", pins), skills.ErrElsewhere)
	old := *s
	old.Pins = pins
	wantErr(t, "skills set by the host it left", db.SetSkills(ctx, &old), skills.ErrElsewhere)
	got, err := db.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "pins after refused changes", got.Pins, s.Pins)
	if err := db.SetPinsOn(ctx, "hb", "s1", pins); err != nil {
		t.Fatalf("pins set by the host serving it: %v", err)
	}
	if got, err = db.Session(ctx, "s1"); err != nil || len(got.Pins) != 1 || got.Pins[0].Slug != "late" {
		t.Fatalf("pins after the serving host's change: %+v, %v", got, err)
	}
}
