package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
)

// newFleet is two hosts, a and b, each a data directory with its own mount,
// sharing one SQLite index, with alice (of department eng) as a user.
func newFleet(t *testing.T) (a, b *Daemon) {
	t.Helper()
	shared := filepath.Join(t.TempDir(), "fleet.db")
	a, b = newTestHost(t, shared), newTestHost(t, shared)
	if a.host == b.host {
		t.Fatalf("two hosts share the id %s", a.host)
	}
	if err := a.cat.PutUser(context.Background(), "", skills.User{UID: "alice", Role: skills.RoleUser, Department: "eng"}, true); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// share copies the content of every version installed on from into to's
// store, as a host fills its cache from the fleet's content.
func share(t *testing.T, from, to *Daemon) {
	t.Helper()
	src := filepath.Join(from.cat.Home(), "store", "skills")
	dst := filepath.Join(to.cat.Home(), "store", "skills")
	if out, err := exec.Command("cp", "-a", "--no-clobber", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy the store: %v: %s", err, out)
	}
}

// served lists the skills the mount of d serves in session id, or nil when
// it does not serve the session.
func served(t *testing.T, d *Daemon, id string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(d.mountRoot, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// eventTypes lists the types of the events of session id in the log.
func eventTypes(t *testing.T, d *Daemon, id string) []string {
	t.Helper()
	page, err := d.db.Events(context.Background(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range page.Events {
		out = append(out, string(e.Type)+" "+e.Slug)
	}
	return out
}

// TestFleetSessionsAnsweredAnywhere: any host answers reads of a session
// another host serves, naming that host; changes to its view are refused
// there with the serving host named, until that host is gone, when the
// refusal says to move it.
func TestFleetSessionsAnsweredAnywhere(t *testing.T) {
	ctx := context.Background()
	a, b := newFleet(t)
	install(t, a, "name: x\ndescription: for everyone", skills.ScopeGlobal)
	info, err := a.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Host != a.host {
		t.Fatalf("session made on a is served by %q, want %q", info.Host, a.host)
	}
	if err := a.rec.Opened(info.ID, "x"); err != nil {
		t.Fatal(err)
	}

	shown, err := b.SessionInfo(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if shown.Host != a.host || shown.Path != info.Path || !slices.Equal(shown.Readable, []string{"x"}) {
		t.Fatalf("b shows %+v, want a's session as a made it (%+v)", shown, info)
	}
	list, err := b.Sessions(ctx, api.SessionQuery{Host: a.host}, "", -1)
	if err != nil || len(list) != 1 || list[0].ID != info.ID {
		t.Fatalf("b lists a's sessions as %+v (%v)", list, err)
	}
	if list, err := b.Sessions(ctx, api.SessionQuery{Host: b.host}, "", -1); err != nil || len(list) != 0 {
		t.Fatalf("b lists %+v (%v) as its own sessions, want none", list, err)
	}
	acts, err := b.Activations(ctx, info.ID)
	if err != nil || len(acts.Activated) != 1 || acts.Activated[0].Slug != "x" {
		t.Fatalf("b answers the activations %+v (%v)", acts, err)
	}

	target := filepath.Join(t.TempDir(), "box")
	changes := map[string]func() error{
		"close":   func() error { return b.CloseSession(ctx, info.ID) },
		"refresh": func() error { _, err := b.Refresh(ctx, info.ID); return err },
		"turn":    func() error { _, err := b.Turn(ctx, info.ID, api.TurnRequest{}); return err }, // a turn refreshes first
		"set":     func() error { _, err := b.SetSkills(ctx, info.ID, api.SetRequest{Skills: []string{}}); return err },
		"mount":   func() error { _, err := b.Bind(ctx, info.ID, skills.Bind{Target: target}); return err },
		"unmount": func() error { return b.Unbind(ctx, info.ID, target, 0) },
	}
	for what, change := range changes {
		err := change()
		if !errors.Is(err, skills.ErrElsewhere) || !strings.Contains(err.Error(), a.hostName) || strings.Contains(err.Error(), "move") {
			t.Errorf("%s on b: %v; want a conflict naming host %s", what, err, a.hostName)
		}
	}
	if got := served(t, a, info.ID); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("a serves %v after b's refusals, want x", got)
	}
	if served(t, b, info.ID) != nil {
		t.Fatal("b serves a's session")
	}

	// a goes silent: the refusal now says to move the session.
	if err := a.cat.DB().Heartbeat(ctx, a.host, time.Now().Add(-2*DefaultHostGrace)); err != nil {
		t.Fatal(err)
	}
	if err := b.CloseSession(ctx, info.ID); !errors.Is(err, skills.ErrElsewhere) || !strings.Contains(err.Error(), "session move "+info.ID) {
		t.Fatalf("close on b of a gone host's session: %v; want a conflict saying to move it", err)
	}
}

// TestFleetRevocationsReachEveryHost: a share change, a department change
// and a user's deletion made through one host empty the matching views of
// another as it catches up, with the same events a local change records.
func TestFleetRevocationsReachEveryHost(t *testing.T) {
	ctx := context.Background()
	a, b := newFleet(t)
	install(t, a, "name: dept\ndescription: for eng", "")
	install(t, a, "name: pub\ndescription: for everyone", skills.ScopeGlobal)
	if _, err := a.cat.Share(ctx, "", "dept", skills.Share{Read: skills.Scope{Kind: skills.ScopeDepartment, IDs: []string{"eng"}}}); err != nil {
		t.Fatal(err)
	}
	share(t, a, b)
	if err := b.catchUp(ctx); err != nil { // b's first look
		t.Fatal(err)
	}
	info, err := b.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"dept", "pub"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := served(t, b, info.ID); !slices.Equal(got, []string{"dept", "pub"}) {
		t.Fatalf("b serves %v, want dept and pub", got)
	}
	// Nothing changed: a look changes nothing.
	if err := b.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := eventTypes(t, b, info.ID); len(evs) != 0 {
		t.Fatalf("events after a look at nothing: %v", evs)
	}

	// alice leaves eng, on host a; b does not hear of it but by looking.
	if err := a.cat.PutUser(ctx, "", skills.User{UID: "alice", Role: skills.RoleUser, Department: "sales"}, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Reevaluate(ctx); err != nil { // what a's API does after a change
		t.Fatal(err)
	}
	if got := served(t, b, info.ID); !slices.Equal(got, []string{"dept", "pub"}) {
		t.Fatalf("b changed its view before looking: %v", got)
	}
	if err := b.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := served(t, b, info.ID); !slices.Equal(got, []string{"pub"}) {
		t.Fatalf("b serves %v after alice left eng, want pub alone", got)
	}
	if evs := eventTypes(t, b, info.ID); !slices.Equal(evs, []string{"revoked dept"}) {
		t.Fatalf("events: %v, want dept revoked once", evs)
	}

	// pub is unshared on a.
	if _, err := a.cat.Share(ctx, "", "pub", skills.Share{Read: skills.Scope{Kind: skills.ScopeUser, IDs: []string{catalog.Operator}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := served(t, b, info.ID); len(got) != 0 {
		t.Fatalf("b serves %v after pub was unshared, want nothing", got)
	}
	if evs := eventTypes(t, b, info.ID); !slices.Equal(evs, []string{"revoked dept", "revoked pub"}) {
		t.Fatalf("events: %v", evs)
	}

	// alice is deleted through a, her session closed with her: b drops
	// the view and the bind it made.
	target := bindTarget(t)
	if _, err := b.Bind(ctx, info.ID, skills.Bind{Target: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DeleteUser(ctx, "", "alice", "", false); !errors.Is(err, skills.ErrExists) {
		t.Fatalf("delete of a user with a session on another host, without force: %v", err)
	}
	del, err := a.DeleteUser(ctx, "", "alice", "", true)
	if err != nil || !slices.Equal(del.Closed, []string{info.ID}) {
		t.Fatalf("delete with force: %+v, %v", del, err)
	}
	if served(t, b, info.ID) == nil {
		t.Fatal("b dropped the view before looking")
	}
	if err := b.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if served(t, b, info.ID) != nil || b.fs.NumSessions() != 0 {
		t.Fatalf("b still serves the closed session (%d sessions)", b.fs.NumSessions())
	}
	if mounted, err := isMountPoint(target); err != nil || mounted {
		t.Fatalf("the bind of the closed session is still mounted (%v)", err)
	}
	if stale, err := b.cat.DB().StaleBinds(ctx, b.host); err != nil || len(stale) != 0 {
		t.Fatalf("b's stale binds after dropping them: %v, %v", stale, err)
	}
	if evs := eventTypes(t, b, info.ID); evs[len(evs)-1] != "closed " {
		t.Fatalf("events: %v, want the close last", evs)
	}
}

// TestFleetMove: a host takes over the session of a host that is gone,
// with its pinned versions (not the current ones) and its activations; a
// re-open there is no second first activation. While the old host is alive
// the move is refused unless forced; the old host, running again, drops the
// view and the binds it had.
func TestFleetMove(t *testing.T) {
	ctx := context.Background()
	a, b := newFleet(t)
	install(t, a, "name: x\ndescription: version one", skills.ScopeGlobal)
	install(t, a, "name: y\ndescription: for eng", "")
	if _, err := a.cat.Share(ctx, "", "y", skills.Share{Read: skills.Scope{Kind: skills.ScopeDepartment, IDs: []string{"eng"}}}); err != nil {
		t.Fatal(err)
	}
	info, err := a.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"x", "y"}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := a.Session(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.rec.Opened(info.ID, "x"); err != nil {
		t.Fatal(err)
	}
	first, err := a.Activations(ctx, info.ID)
	if err != nil || len(first.Activated) != 1 {
		t.Fatalf("activations on a: %+v (%v)", first, err)
	}
	target := bindTarget(t)
	sock := filepath.Join(filepath.Dir(target), "api.sock")
	bound, err := a.Bind(ctx, info.ID, skills.Bind{Target: target, APISocket: sock})
	if err != nil {
		t.Fatal(err)
	}
	// x gets a new version meanwhile: the moved session keeps its pin.
	if _, err := a.cat.Edit(ctx, "", "x", "SKILL.md", strings.NewReader("---\nname: x\ndescription: version two\n---\nbody\n")); err != nil {
		t.Fatal(err)
	}
	if x, err := a.cat.DB().Skill(ctx, "x"); err != nil || x.Version == before.Pins[0].Version {
		t.Fatalf("x has no new version (%v)", err)
	}
	share(t, a, b)
	activated := func() int {
		n := 0
		for _, e := range eventTypes(t, a, info.ID) {
			if strings.HasPrefix(e, "activated") {
				n++
			}
		}
		return n
	}
	if n := activated(); n != 1 {
		t.Fatalf("%d activated events before the move, want 1", n)
	}

	// a is alive: refused without force.
	if _, err := b.Move(ctx, info.ID, false); !errors.Is(err, skills.ErrElsewhere) || !strings.Contains(err.Error(), "alive") {
		t.Fatalf("move from a live host: %v; want a conflict saying it is alive", err)
	}
	if s, _ := b.Session(ctx, info.ID); s.Host != a.host || served(t, b, info.ID) != nil {
		t.Fatalf("a refused move changed something: served by %s, b serves %v", s.Host, served(t, b, info.ID))
	}
	if _, err := a.Move(ctx, info.ID, false); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("a moving its own session: %v", err)
	}

	// a goes silent; meanwhile alice leaves eng, which a cannot apply.
	if err := a.cat.DB().Heartbeat(ctx, a.host, time.Now().Add(-2*DefaultHostGrace)); err != nil {
		t.Fatal(err)
	}
	if err := a.cat.PutUser(ctx, "", skills.User{UID: "alice", Role: skills.RoleUser, Department: "sales"}, false); err != nil {
		t.Fatal(err)
	}
	m, err := b.Move(ctx, info.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if m.Host != b.host || m.From != a.host || !slices.Equal(m.Readable, []string{"x"}) ||
		!slices.Equal(m.Dropped, []skills.Bind{bound}) || !strings.Contains(m.Note, "bind the session again") {
		t.Fatalf("move answered %+v", m)
	}
	after, err := b.Session(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Host != b.host || !slices.Equal(after.Pins, before.Pins[:1]) {
		t.Fatalf("moved session: host %s, pins %v; want b with the pin %v", after.Host, after.Pins, before.Pins[:1])
	}
	acts, err := b.Activations(ctx, info.ID)
	if err != nil || len(acts.Activated) != 1 || acts.Activated[0].Opens != 1 {
		t.Fatalf("activations after the move: %+v (%v), want x opened once", acts, err)
	}
	if got := served(t, b, info.ID); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("b serves %v, want x", got)
	}
	// A re-open through b's mount counts an open, not a first activation.
	data, err := os.ReadFile(filepath.Join(b.mountRoot, info.ID, "x", "SKILL.md"))
	if err != nil || !strings.Contains(string(data), "version one") {
		t.Fatalf("b serves x as %q (%v), want the pinned version one", data, err)
	}
	if n := activated(); n != 1 {
		t.Fatalf("%d activated events after a re-open on b, want 1", n)
	}
	if err := b.rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	acts, err = b.Activations(ctx, info.ID)
	if err != nil || len(acts.Activated) != 1 || acts.Activated[0].Opens != 2 || !acts.Activated[0].FirstAt.Equal(first.Activated[0].FirstAt) {
		t.Fatalf("activations after a re-open on b: %+v (%v), want x opened twice, first as on a (%v)", acts, err, first.Activated[0].FirstAt)
	}
	if evs := eventTypes(t, b, info.ID); !slices.Contains(evs, "moved ") || evs[len(evs)-1] != "revoked y" {
		t.Fatalf("events: %v, want moved, then y revoked", evs)
	}

	// a runs again: it no longer serves the session, and its bind goes.
	if err := a.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if served(t, a, info.ID) != nil {
		t.Fatal("a still serves the moved session")
	}
	if mounted, err := isMountPoint(target); err != nil || mounted {
		t.Fatalf("a's bind of the moved session is still mounted (%v)", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) || a.sockets.count() != 0 {
		t.Fatalf("a's api socket of the moved session: %v, %d served", err, a.sockets.count())
	}
	if _, err := b.Move(ctx, info.ID, true); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("a second move to the same host: %v", err)
	}
	// Forced, a takes it back from b although b is alive.
	if _, err := a.Move(ctx, info.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := b.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if served(t, b, info.ID) != nil || !slices.Equal(served(t, a, info.ID), []string{"x"}) {
		t.Fatalf("after a forced move back: a serves %v, b %v", served(t, a, info.ID), served(t, b, info.ID))
	}
}

// bindTarget is a directory to bind a session at, unmounted at the end of
// the test should the test leave it mounted.
func bindTarget(t *testing.T) string {
	t.Helper()
	target := filepath.Join(t.TempDir(), "box")
	t.Cleanup(func() {
		for {
			if mounted, _ := isMountPoint(target); !mounted {
				return
			}
			if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", target, err)
				return
			}
		}
	})
	return target
}

// isMountPoint reports whether dir is a mount point in this namespace.
func isMountPoint(dir string) (bool, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true, nil
		}
	}
	return false, nil
}

// TestFollowWakesAndLooks: a host follows changes made elsewhere when the
// index wakes it (with the periodic look an hour away), and by its
// periodic look alone when nothing wakes it.
func TestFollowWakesAndLooks(t *testing.T) {
	ctx := context.Background()
	a, b := newFleet(t)
	install(t, a, "name: woken\ndescription: revoked, then the host is woken", skills.ScopeGlobal)
	install(t, a, "name: looked\ndescription: revoked, then the host looks by itself", skills.ScopeGlobal)
	share(t, a, b)
	info, err := b.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"woken", "looked"}})
	if err != nil {
		t.Fatal(err)
	}
	disable := func(slug string) {
		t.Helper()
		if _, err := a.cat.SetEnabled(ctx, "", slug, false); err != nil {
			t.Fatal(err)
		}
	}
	// until waits for b to serve want, failing after a minute (a guard
	// against a hang, not a measure).
	until := func(want []string) {
		t.Helper()
		for start := time.Now(); !slices.Equal(served(t, b, info.ID), want); time.Sleep(5 * time.Millisecond) {
			if time.Since(start) > time.Minute {
				t.Fatalf("b serves %v, want %v", served(t, b, info.ID), want)
			}
		}
	}

	wake := make(chan struct{}, 1)
	woken, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); b.follow(woken, time.Hour, wake) }()
	disable("woken")
	wake <- struct{}{}
	until([]string{"looked"})
	close(wake) // a closed wake no longer fires: the look waits for its hour
	stop()
	<-done

	if evs := eventTypes(t, b, info.ID); !slices.Equal(evs, []string{"revoked woken"}) {
		t.Fatalf("events after the wake: %v", evs)
	}
	looking, stop := context.WithCancel(ctx)
	done = make(chan struct{})
	go func() { defer close(done); b.follow(looking, 10*time.Millisecond, nil) }()
	disable("looked")
	until([]string{})
	stop()
	<-done
	if evs := eventTypes(t, b, info.ID); !slices.Equal(evs, []string{"revoked woken", "revoked looked"}) {
		t.Fatalf("events: %v", evs)
	}
}

// Every matchSessionsEvery a host compares the sessions it serves with those the
// index says it serves, not just their counts: a session closed elsewhere
// beside one the mount lacks (a close that failed half-way here) leave the
// counts equal, and both are set right.
func TestSettleComparesSessions(t *testing.T) {
	ctx := context.Background()
	a, _ := newFleet(t)
	install(t, a, "name: kept\ndescription: served throughout", skills.ScopeGlobal)
	var ids []string
	for range 2 {
		info, err := a.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"kept"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	if err := a.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	// Another host closes the second; the index also holds an open
	// session of this host that the mount does not serve.
	if err := a.cat.DB().CloseSession(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	first, err := a.cat.DB().Session(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	lost := &skills.Session{ID: newID(), UID: "alice", Requested: []string{"kept"}, Preload: []string{},
		Pins: first.Pins, CreatedAt: time.Now().UTC(), Host: a.host}
	if err := a.cat.DB().CreateSession(ctx, lost); err != nil {
		t.Fatal(err)
	}
	a.sessionsMatched = time.Now().Add(-2 * matchSessionsEvery)
	if err := a.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := served(t, a, ids[1]); got != nil {
		t.Errorf("the session closed elsewhere is still served: %v", got)
	}
	if got := served(t, a, lost.ID); !slices.Equal(got, []string{"kept"}) {
		t.Errorf("the session the mount lacked serves %v, want [kept]", got)
	}
	if got := served(t, a, ids[0]); !slices.Equal(got, []string{"kept"}) {
		t.Errorf("the untouched session serves %v, want [kept]", got)
	}
}
