package integration

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"skillfs/index/pgtest"
)

// hostJSON is one element of `skillfs hosts --json`.
type hostJSON struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Mount    string    `json:"mount"`
	LastSeen time.Time `json:"last_seen"`
	Sessions int       `json:"sessions"`
	Alive    bool      `json:"alive"`
	Self     bool      `json:"self"`
}

// hostSession is the JSON of `session show --json` with the serving host,
// and of `session move --json`.
type hostSession struct {
	sessionInfo
	Host    string `json:"host"`
	From    string `json:"from"`
	Dropped []struct {
		Target string `json:"target"`
	} `json:"dropped_binds"`
	Note string `json:"note"`
}

// newFleet is two data directories, two hosts of one catalog: their index
// is one SQLite file, or one PostgreSQL database when the suite runs on
// PostgreSQL.
func newFleet(t testing.TB) (a, b *env) {
	t.Helper()
	shared := filepath.Join(t.TempDir(), "fleet.db")
	if onPostgres() {
		shared = pgtest.Database(t)
	}
	host := func() *env { return &env{t: t, home: filepath.Join(t.TempDir(), "home"), index: shared} }
	return host(), host()
}

// hostsOf lists the hosts as e's daemon sees them, by name.
func (e *env) hostsOf() map[string]hostJSON {
	e.t.Helper()
	var list []hostJSON
	e.okJSON(&list, "hosts")
	out := map[string]hostJSON{}
	for _, h := range list {
		out[h.Name] = h
	}
	return out
}

// waitFor polls cond every 10 ms until it holds, failing the test after
// limit (a guard against a hang, not a measure).
func waitFor(t testing.TB, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// gone reports whether path does not exist.
func gone(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}

// TestFleetOfTwoHosts: two daemons, each with its own data directory and
// mount, share one index. A session made on host a is shown by b's
// API with its host; b refuses to close it, naming a; a revocation made
// on b empties a's view within a few seconds; with a running, a move to b
// is refused unless forced; once a is stopped and its heartbeat is stale,
// `session move` on b serves the session there with the same pinned
// versions and its activations (a re-open counts an open, no second
// activation and no second activated event).
func TestFleetOfTwoHosts(t *testing.T) {
	a, b := newFleet(t)
	da := a.serve("--host-name", "alpha")
	src := filepath.Join(t.TempDir(), "src")
	writeSkill(t, filepath.Join(src, "keep"), "name: keep\ndescription: stays in the session", nil)
	writeSkill(t, filepath.Join(src, "pub"), "name: pub\ndescription: unshared on the other host", nil)
	a.ok("skill", "import", src, "--all", "--share", "global")
	a.ok("user", "add", "alice")
	b.serve("--host-name", "beta")

	hosts := b.hostsOf()
	alpha, beta := hosts["alpha"], hosts["beta"]
	if !alpha.Alive || !beta.Alive || !beta.Self || alpha.Self || alpha.ID == beta.ID {
		t.Fatalf("hosts as beta sees them: %+v", hosts)
	}

	s := a.newSession("alice", "--skills", "keep,pub")
	keep := filepath.Join(s.Path, "keep", "SKILL.md")
	if _, err := fetch(keep); err != nil { // the first activation
		t.Fatal(err)
	}
	// keep gets a new version: the session stays at the one it pinned.
	if r := a.runIn(strings.NewReader("---\nname: keep\ndescription: a newer version\n---\nnew\n"), "skill", "edit", "keep", "SKILL.md"); r.code != 0 {
		t.Fatalf("skill edit: exit %d: %s", r.code, r.stderr)
	}
	if data, err := fetch(keep); err != nil || strings.Contains(string(data), "newer") {
		t.Fatalf("the session reads %q (%v), want its pinned version", data, err)
	}

	var shown hostSession
	b.okJSON(&shown, "session", "show", s.ID)
	if shown.Host != alpha.ID || shown.Path != s.Path {
		t.Fatalf("b shows the session as %+v, want host %s at %s", shown, alpha.ID, s.Path)
	}
	if r := b.run("session", "close", s.ID); r.code != 6 || !strings.Contains(r.stderr, "alpha") {
		t.Fatalf("close on b: exit %d, %q; want 6 naming alpha", r.code, r.stderr)
	}
	if hosts := b.hostsOf(); hosts["alpha"].Sessions != 1 || hosts["beta"].Sessions != 0 {
		t.Fatalf("open sessions per host: %+v", hosts)
	}

	// A revocation made on b reaches a's view.
	b.ok("skill", "share", "pub", "--read", "user:operator")
	took := waitFor(t, "pub gone from a's view", 10*time.Second, func() bool { return gone(filepath.Join(s.Path, "pub")) })
	t.Logf("pub left a's view %s after b's share change returned", took)

	if r := b.run("session", "move", s.ID); r.code != 6 || !strings.Contains(r.stderr, "alive") {
		t.Fatalf("move while alpha runs: exit %d, %q; want 6 saying it is alive", r.code, r.stderr)
	}
	if code := da.stop(); code != 0 {
		t.Fatalf("alpha exited %d\n%s", code, da.logs())
	}
	// Read once alpha stored its last counts (later opens reach the index
	// in batches).
	before := b.activationsOf(s.ID)
	if slices.Compare(before.slugs(), []string{"keep"}) != 0 || before.Activated[0].Opens != 2 {
		t.Fatalf("activations before the move: %+v, want keep opened twice", before)
	}
	waitFor(t, "alpha seen as gone", 30*time.Second, func() bool { return !b.hostsOf()["alpha"].Alive })
	var moved hostSession
	b.okJSON(&moved, "session", "move", s.ID)
	if moved.Host != beta.ID || moved.From != alpha.ID || !strings.HasPrefix(moved.Path, beta.Mount+"/") ||
		!slices.Equal(moved.Readable, []string{"keep"}) {
		t.Fatalf("moved: %+v", moved)
	}
	if after := b.activationsOf(s.ID); !slices.Equal(after.Activated, before.Activated) {
		t.Fatalf("activations after the move: %+v, want %+v", after.Activated, before.Activated)
	}
	data, err := fetch(filepath.Join(moved.Path, "keep", "SKILL.md"))
	if err != nil || strings.Contains(string(data), "newer") {
		t.Fatalf("beta serves %q (%v), want the pinned version", data, err)
	}
	after := b.activationsOf(s.ID)
	if len(after.Activated) != 1 || after.Activated[0].FirstAt != before.Activated[0].FirstAt || after.Activated[0].Opens != before.Activated[0].Opens+1 {
		t.Fatalf("activations after a re-open on beta: %+v, want one more open of %+v", after.Activated, before.Activated)
	}
	c := newAPIClient(b.home)
	checkSeries(t, "beta's metrics", c.scrape(t), map[string]float64{
		`skillfs_skill_activations_total{skill="keep"}`: 0,
		`skillfs_skill_opens_total{skill="keep"}`:       1,
		`skillfs_sessions_open`:                         1,
	})
	// The whole history, replayed from the log once the session is closed
	// (which beta may do now).
	b.ok("session", "close", s.ID)
	var got []string
	st := openStream(t, c, "/v1/sessions/"+s.ID+"/events?after=0", "")
	for {
		e, ok := st.next(t)
		if !ok {
			break
		}
		got = append(got, e.describe())
	}
	want := []string{"activated keep", "revoked pub", "moved", "closed"}
	if !slices.Equal(got, want) {
		t.Fatalf("events of the session: %v, want %v", got, want)
	}
}

// TestFleetForcedMove: with both hosts running, a forced move takes the
// session over at once; the host that served it drops its view and its
// binds of it within a few seconds, and its event stream of the session
// tells the move.
func TestFleetForcedMove(t *testing.T) {
	a, b := newFleet(t)
	a.serve("--host-name", "alpha")
	a.ok("user", "add", "alice")
	b.serve("--host-name", "beta")
	s := a.newSession("alice", "--all")
	target := filepath.Join(t.TempDir(), "sandbox", "skills")
	a.ok("session", "mount", s.ID, target)
	if entries, err := os.ReadDir(target); err != nil || len(entries) == 0 {
		t.Fatalf("the bind shows %d entries (%v)", len(entries), err)
	}
	st := openStream(t, newAPIClient(a.home), "/v1/sessions/"+s.ID+"/events", "")
	var moved hostSession
	b.okJSON(&moved, "session", "move", s.ID, "--force")
	if len(moved.Dropped) != 1 || moved.Dropped[0].Target != target || !strings.Contains(moved.Note, "bind the session again") {
		t.Fatalf("moved: %+v, want the bind at %s dropped with a note", moved, target)
	}
	waitFor(t, "alpha drops the moved view", 10*time.Second, func() bool { return gone(s.Path) })
	// A loader following the session on alpha hears of the move.
	if e, ok := st.next(t); !ok || e.describe() != "moved" {
		t.Fatalf("alpha's stream of the session: %q (%v), want moved", e.describe(), ok)
	}
	waitFor(t, "alpha unmounts its bind", 10*time.Second, func() bool { return len(mountedUnder(t, target)) == 0 })
	if entries, err := os.ReadDir(filepath.Join(moved.Path)); err != nil || len(entries) == 0 {
		t.Fatalf("beta serves %d entries (%v)", len(entries), err)
	}
	b.ok("session", "mount", s.ID, target)
	var shown hostSession
	a.okJSON(&shown, "session", "show", s.ID)
	if shown.Host != moved.Host || len(shown.Binds) != 1 || shown.Path != moved.Path {
		t.Fatalf("alpha shows %+v after the move and a new bind on beta", shown)
	}
	b.ok("session", "unmount", s.ID, target)
}

// fleetRevokes is how many revocations BenchmarkFleetRevoke times.
const fleetRevokes = 50

// BenchmarkFleetRevoke times how long a revocation made on one host takes
// to reach a session's view on another: on a SQLite index (the default)
// through the periodic look alone, as SQLite sends no notifications; with
// SKILLFS_TEST_INDEX=postgres through PostgreSQL's. From the moment host a's API
// answers a share change that revokes a skill until the skill's directory
// is gone from the session's view in host b's mount, polled every
// millisecond, over fleetRevokes revocations made at random moments (each
// followed by a grant and a refresh on b). Run it once:
//
//	go test ./integration -run '^$' -bench BenchmarkFleetRevoke -benchtime 1x
func BenchmarkFleetRevoke(b *testing.B) {
	ea, eb := newFleet(b)
	ea.serve("--host-name", "alpha")
	src := filepath.Join(b.TempDir(), "src")
	writeSkill(b, filepath.Join(src, "pub"), "name: pub\ndescription: revoked and granted again", nil)
	ea.ok("skill", "import", src, "--all", "--share", "global")
	ea.ok("user", "add", "alice")
	eb.serve("--host-name", "beta")
	s := eb.newSession("alice", "--skills", "pub")
	ca, cb := newTimingClient(ea.home), newTimingClient(eb.home)
	pub := filepath.Join(s.Path, "pub")
	setShare := func(read string) {
		b.Helper()
		if code := ca.do(b, "PUT", "/v1/skills/pub/share", "", map[string]string{"read": read}, nil); code != 200 {
			b.Fatalf("share pub --read %s on alpha: %d", read, code)
		}
	}
	delays := make([]time.Duration, 0, fleetRevokes)
	for b.Loop() {
		delays = delays[:0]
		for range fleetRevokes {
			// Revocations come at any moment of beta's look interval
			// (1 s), not just after one of its looks.
			time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
			setShare("user:operator")
			start := time.Now()
			for !gone(pub) {
				if time.Since(start) > 30*time.Second {
					b.Fatal("pub still in beta's view 30 s after the revocation")
				}
				time.Sleep(time.Millisecond)
			}
			delays = append(delays, time.Since(start))
			setShare("global")
			if code := cb.do(b, "POST", "/v1/sessions/"+s.ID+"/refresh", "", nil, nil); code != 200 {
				b.Fatalf("refresh on beta: %d", code)
			}
			if gone(pub) {
				b.Fatal("pub not back in beta's view after the refresh")
			}
		}
	}
	slices.Sort(delays)
	median, worst := delays[len(delays)/2], delays[len(delays)-1]
	b.ReportMetric(float64(median)/float64(time.Millisecond), "median-ms")
	b.ReportMetric(float64(worst)/float64(time.Millisecond), "max-ms")
	b.Logf("revocation on alpha to gone from beta's view, %d revokes: median %s, max %s, min %s",
		len(delays), median, worst, delays[0])
}
