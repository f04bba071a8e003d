package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/events"
	"skillfs/index"
	"skillfs/skills"
)

// flakyIndex is the index as the recorder sees it, made unreachable by the
// test: while down, every call fails as one to a shared index that cannot
// be reached does; with lose set, a write is stored and its answer lost.
type flakyIndex struct {
	*index.DB
	down, lose atomic.Bool
}

func (f *flakyIndex) fail(op string) error {
	if f.down.Load() {
		return fmt.Errorf("%s: connect to the index: connection refused: %w", op, skills.ErrUnavailable)
	}
	return nil
}

// lost is the answer of a write stored while lose is set.
func (f *flakyIndex) lost(op string, err error) error {
	if err == nil && f.lose.Load() {
		return fmt.Errorf("%s: commit: connection reset: %w", op, skills.ErrUnavailable)
	}
	return err
}

func (f *flakyIndex) Skill(ctx context.Context, slug string) (*skills.Skill, error) {
	if err := f.fail("get skill"); err != nil {
		return nil, err
	}
	return f.DB.Skill(ctx, slug)
}

func (f *flakyIndex) SkillSet(ctx context.Context) (*index.SkillSet, error) {
	if err := f.fail("read catalog"); err != nil {
		return nil, err
	}
	return f.DB.SkillSet(ctx)
}

func (f *flakyIndex) RecordActivation(ctx context.Context, session, slug string, at time.Time, evs ...*skills.Event) (bool, error) {
	if err := f.fail("record activation"); err != nil {
		return false, err
	}
	first, err := f.DB.RecordActivation(ctx, session, slug, at, evs...)
	return first, f.lost("record activation", err)
}

func (f *flakyIndex) ApplySpill(ctx context.Context, id string, deltas []index.OpenDelta, evs ...*skills.Event) (bool, error) {
	if err := f.fail("apply spill"); err != nil {
		return false, err
	}
	applied, err := f.DB.ApplySpill(ctx, id, deltas, evs...)
	return applied, f.lost("apply spill", err)
}

func (f *flakyIndex) Activations(ctx context.Context, session string) ([]skills.Activation, error) {
	if err := f.fail("list activations"); err != nil {
		return nil, err
	}
	return f.DB.Activations(ctx, session)
}

// flakyRecorder is a recorder on db, seen through a flakyIndex, with a
// journal at path.
func flakyRecorder(t testing.TB, db *index.DB, path string) (*recorder, *flakyIndex, *journal) {
	t.Helper()
	f := &flakyIndex{DB: db}
	j, _, _, _, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.close() })
	r := newRecorder(f, events.NewHub(db), discard)
	r.useJournal(context.Background(), j)
	return r, f, j
}

// retryNow has the next flush deliver the journal without waiting for the
// backoff of the failures before.
func (r *recorder) retryNow() {
	r.flushMu.Lock()
	r.retryAt = time.Time{}
	r.flushMu.Unlock()
}

// activatedEvents counts the activated events of the log by session and
// skill.
func activatedEvents(t testing.TB, db *index.DB) map[actKey]int {
	t.Helper()
	page, err := db.Events(context.Background(), "", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	out := map[actKey]int{}
	for _, e := range page.Events {
		if e.Type == "activated" {
			out[actKey{e.Session, e.Slug}]++
		}
	}
	return out
}

func open(t testing.TB, r *recorder, session, slug string, n int) {
	t.Helper()
	for range n {
		if err := r.Opened(session, slug); err != nil {
			t.Fatalf("open of %s in %s: %v", slug, session, err)
		}
	}
}

// While the index cannot be reached, opens succeed: a first activation is
// journaled before the open returns, later ones are journaled at the next
// flush, queries fail as unavailable, and no event is published. Once it
// is back, everything is delivered: exact counts, the first time of the
// first open, one activated event published with that time.
func TestOutageFirstActivationsAreJournaled(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	r, f, j := flakyRecorder(t, db, filepath.Join(t.TempDir(), JournalName))
	sub := r.events.Subscribe("s1")
	defer r.events.Unsubscribe(sub)

	open(t, r, "s1", "a", 1)
	f.down.Store(true)
	open(t, r, "s1", "a", 3)
	before := time.Now()
	open(t, r, "s1", "b", 1)
	after := time.Now()
	open(t, r, "s1", "b", 2)
	if _, err := r.activations(ctx, "s1"); !errors.Is(err, skills.ErrUnavailable) {
		t.Fatalf("activations during the outage: %v, want ErrUnavailable", err)
	}
	if err := r.flush(ctx); err != nil {
		t.Fatalf("flush during the outage = %v, want the opens journaled", err)
	}
	if n := j.pending(); n != 2 {
		t.Fatalf("%d records in the journal, want the first activation of b and one batch", n)
	}
	published := func() []api.Event {
		evs, _, _ := sub.Take()
		return evs
	}
	if evs := published(); len(evs) != 1 || evs[0].Slug != "a" {
		t.Fatalf("published before the index is back: %+v; want a's activation only", evs)
	}

	f.down.Store(false)
	r.retryNow()
	if err := r.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := j.pending(); n != 0 || r.down.Load() {
		t.Fatalf("%d records left in the journal, down %v", n, r.down.Load())
	}
	acts, err := db.Activations(ctx, "s1")
	if err != nil || len(acts) != 2 || acts[0].Opens != 4 || acts[1].Opens != 3 {
		t.Fatalf("activations after the outage = %+v, %v; want a:4 b:3", acts, err)
	}
	if b := acts[1].FirstAt; b.Before(before) || b.After(after) {
		t.Fatalf("b first activated at %v, outside its first open (%v to %v)", b, before, after)
	}
	evs := published()
	if len(evs) != 1 || evs[0].Slug != "b" || !evs[0].At.Equal(acts[1].FirstAt) {
		t.Fatalf("published when the index came back: %+v; want b's activation at %v", evs, acts[1].FirstAt)
	}
	if got := activatedEvents(t, db); got[actKey{"s1", "a"}] != 1 || got[actKey{"s1", "b"}] != 1 {
		t.Fatalf("activated events = %v, want one each", got)
	}
}

// A daemon that stops during an outage without a clean shutdown leaves its
// journal, which the next start delivers; one that stops after delivering
// it but before clearing the file finds it again and counts nothing twice.
func TestJournalReplayedAfterACrash(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	path := filepath.Join(t.TempDir(), JournalName)
	r, f, j := flakyRecorder(t, db, path)
	f.down.Store(true)
	open(t, r, "s1", "a", 5)
	open(t, r, "s1", "b", 1)
	if err := r.flush(ctx); err != nil {
		t.Fatal(err)
	}
	open(t, r, "s1", "a", 2) // in memory only: lost with the crash, as pending opens are
	j.close()                // the crash: no close, no flush
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	want := func(when string) {
		t.Helper()
		acts, err := db.Activations(ctx, "s1")
		if err != nil || len(acts) != 2 || acts[0].Opens != 5 || acts[1].Opens != 1 {
			t.Fatalf("%s: activations = %+v, %v; want a:5 b:1", when, acts, err)
		}
		if got := activatedEvents(t, db); len(got) != 2 || got[actKey{"s1", "a"}] != 1 || got[actKey{"s1", "b"}] != 1 {
			t.Fatalf("%s: activated events = %v, want one each", when, got)
		}
	}
	_, _, j2 := flakyRecorder(t, db, path) // the next start, with the index back
	if j2.pending() != 0 {
		t.Fatalf("the next start left %d records", j2.pending())
	}
	want("after the restart")
	j2.close()
	// Delivered, but the crash came before the file was cleared.
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	r3, _, j3 := flakyRecorder(t, db, path)
	if j3.pending() != 0 {
		t.Fatalf("the records found again were left: %d", j3.pending())
	}
	want("after the same journal was found again")
	// The journal's first activations count as seen: a later open is not
	// a first one.
	open(t, r3, "s1", "b", 1)
	if err := r3.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if acts, _ := db.Activations(ctx, "s1"); acts[1].Opens != 2 {
		t.Fatalf("b after one more open = %d, want 2", acts[1].Opens)
	}
}

// A write that was stored but whose answer was lost (the connection broke
// after the commit) is journaled, and the journal's copy is skipped: a
// first activation by its time, a batch by its id.
func TestLostAnswersAreNotCountedTwice(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	r, f, j := flakyRecorder(t, db, filepath.Join(t.TempDir(), JournalName))
	f.lose.Store(true)
	open(t, r, "s1", "a", 1)
	f.lose.Store(false)
	if j.pending() != 1 || !r.down.Load() {
		t.Fatalf("the first activation whose answer was lost: %d records, down %v", j.pending(), r.down.Load())
	}
	r.retryNow()
	if err := r.flush(ctx); err != nil {
		t.Fatal(err)
	}
	open(t, r, "s1", "a", 2)
	f.lose.Store(true)
	if err := r.flush(ctx); err != nil {
		t.Fatalf("flush whose answer was lost = %v, want it journaled", err)
	}
	f.lose.Store(false)
	r.retryNow()
	if err := r.flush(ctx); err != nil {
		t.Fatal(err)
	}
	acts, err := db.Activations(ctx, "s1")
	if err != nil || len(acts) != 1 || acts[0].Opens != 3 || j.pending() != 0 {
		t.Fatalf("activations = %+v, %v, %d records left; want a:3", acts, err, j.pending())
	}
	if got := activatedEvents(t, db); got[actKey{"s1", "a"}] != 1 {
		t.Fatalf("activated events = %v, want one", got)
	}
}

// outage makes the index unreachable for a while: here through the
// recorder's view of it; against PostgreSQL, by stopping the server.
type outage interface {
	begin(t testing.TB)
	end(t testing.TB)
}

type flakyOutage struct{ f *flakyIndex }

func (o flakyOutage) begin(testing.TB) { o.f.down.Store(true) }
func (o flakyOutage) end(testing.TB)   { o.f.down.Store(false) }

// TestOutageEndToEnd: agents in many sessions read the SKILL.md of many
// skills through the real mount, concurrently, before, during and after a
// window in which every call of the recorder to the index fails. Every
// read succeeds with the file's bytes; during the window activation queries
// fail as unavailable; once the index is back the stored counts are
// exactly the opens made, each (session, skill) has exactly one activated
// event, and a skill first opened in the window carries the tools it adds,
// looked up in the catalog read before.
//
// Against PostgreSQL, run testOutage on a daemon whose catalog is on the
// server (with fs.Options.Opens) and an outage that stops and starts it.
func TestOutageEndToEnd(t *testing.T) {
	var f *flakyIndex
	d := newTestDaemonOn(t, func(db *index.DB) activationIndex { f = &flakyIndex{DB: db}; return f }, true)
	testOutage(t, d, flakyOutage{f})
}

// testOutage is TestOutageEndToEnd on d, whose mount reports every open,
// through out.
func testOutage(t *testing.T, d *Daemon, out outage) {
	ctx := context.Background()
	const nSkills, nSessions = 6, 8
	slugs := make([]string, nSkills)
	for i := range slugs {
		slugs[i] = fmt.Sprintf("skill-%d", i)
		if err := d.cat.DB().AddTool(ctx, fmt.Sprintf("tool-%d", i)); err != nil {
			t.Fatal(err)
		}
		install(t, d, fmt.Sprintf("name: %s\ndescription: d\ntool_dependencies: [tool-%d]", slugs[i], i), skills.ScopeGlobal)
	}
	d.rec.flush(ctx) // reads the catalog with the skills in it
	sessions := make([]string, nSessions)
	for i := range sessions {
		info, err := d.CreateSession(ctx, api.CreateRequest{User: "operator", Skills: slugs})
		if err != nil {
			t.Fatal(err)
		}
		sessions[i] = info.ID
	}
	want := map[actKey]int64{}
	var wantMu sync.Mutex
	read := func(session, slug string) error {
		b, err := os.ReadFile(filepath.Join(d.mountRoot, session, slug, "SKILL.md"))
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte("name: "+slug+"\n")) {
			return fmt.Errorf("%s/%s/SKILL.md holds %q", session, slug, b)
		}
		wantMu.Lock()
		want[actKey{session, slug}]++
		wantMu.Unlock()
		return nil
	}
	// reads has every session read skills concurrently: skill j, 1+(i+j+round)%3
	// times, for the skills pick chooses.
	reads := func(round int, pick func(i, j int) bool) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, nSessions*nSkills)
		for i, s := range sessions {
			for j, slug := range slugs {
				if !pick(i, j) {
					continue
				}
				wg.Go(func() {
					for range 1 + (i+j+round)%3 {
						if err := read(s, slug); err != nil {
							errs <- err
							return
						}
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	flushCtx, stopFlush := context.WithCancel(ctx)
	flushed := make(chan struct{})
	go func() { defer close(flushed); d.rec.run(flushCtx, 10*time.Millisecond) }()

	reads(0, func(i, j int) bool { return j < nSkills/2 }) // the index is there
	out.begin(t)
	reads(1, func(i, j int) bool { return (i+j)%2 == 0 }) // first opens and later ones
	if _, err := d.Activations(ctx, sessions[0]); !errors.Is(err, skills.ErrUnavailable) {
		t.Errorf("activations during the outage: %v, want ErrUnavailable", err)
	}
	reads(2, func(i, j int) bool { return true })
	out.end(t)
	reads(3, func(i, j int) bool { return j%3 == 0 }) // the index back
	stopFlush()
	<-flushed
	d.rec.retryNow()
	if err := d.rec.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := d.rec.journal.pending(); n != 0 {
		t.Fatalf("%d records left in the journal", n)
	}

	db := d.cat.DB()
	events := activatedEvents(t, db)
	page, err := db.Events(ctx, "", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		acts, err := db.Activations(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, a := range acts {
			got[a.Slug] = a.Opens
		}
		for _, slug := range slugs {
			k := actKey{s, slug}
			if got[slug] != want[k] {
				t.Errorf("%s in %s: %d opens stored, %d made", slug, s, got[slug], want[k])
			}
			if n := events[k]; n != 1 {
				t.Errorf("%s in %s: %d activated events, want 1", slug, s, n)
			}
		}
		answer, err := d.Activations(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if tools := slices.Sorted(slices.Values(answer.Tools)); len(answer.Activated) != nSkills || !slices.Equal(tools, toolsOf(slugs)) {
			t.Errorf("the API answers %d activated skills and tools %v for %s", len(answer.Activated), answer.Tools, s)
		}
	}
	for _, e := range page.Events {
		if e.Type == "activated" && !strings.Contains(string(e.Payload), "tool-"+strings.TrimPrefix(e.Slug, "skill-")) {
			t.Errorf("the activated event of %s in %s names %s", e.Slug, e.Session, e.Payload)
		}
	}
}

// toolsOf is the tools the test's skills add, sorted.
func toolsOf(slugs []string) []string {
	out := make([]string, len(slugs))
	for i := range slugs {
		out[i] = fmt.Sprintf("tool-%d", i)
	}
	slices.Sort(out)
	return out
}

// While the index cannot be reached, a query that needs it answers 503
// "unavailable" saying so, and the views already served keep serving.
func TestUnreachableIndexAnswersUnavailable(t *testing.T) {
	var f *flakyIndex
	d := newTestDaemonOn(t, func(db *index.DB) activationIndex { f = &flakyIndex{DB: db}; return f }, false)
	ctx := context.Background()
	install(t, d, "name: pub\ndescription: for everyone", skills.ScopeGlobal)
	info, err := d.CreateSession(ctx, api.CreateRequest{User: "operator", Skills: []string{"pub"}})
	if err != nil {
		t.Fatal(err)
	}
	f.down.Store(true)
	code, _, got := apitest.NewChecked(t, d.http.Handler("")).Send("GET", "/v1/sessions/"+info.ID+"/activations", nil, nil)
	if code != 503 || apitest.ErrorCode(got) != "unavailable" || !bytes.Contains(got, []byte(`"error": "`+skills.UnavailableSays+": ")) {
		t.Fatalf("activations while the index cannot be reached: %d %s", code, got)
	}
	if b, err := os.ReadFile(filepath.Join(d.mountRoot, info.ID, "pub", "SKILL.md")); err != nil || !bytes.Contains(b, []byte("name: pub")) {
		t.Fatalf("a served view while the index cannot be reached: %q, %v", b, err)
	}
}

// BenchmarkFirstActivationDuringOutage is the first read of a SKILL.md in
// a new session while the index cannot be reached: the activation goes to
// the journal (one write and fdatasync) instead of the index. Compare
// first-SKILL.md-µs with BenchmarkFirstActivation's.
func BenchmarkFirstActivationDuringOutage(b *testing.B) {
	var f *flakyIndex
	d := newTestDaemonOn(b, func(db *index.DB) activationIndex { f = &flakyIndex{DB: db}; return f }, false)
	ctx := context.Background()
	install(b, d, "name: x\ndescription: read me", skills.ScopeGlobal)
	f.down.Store(true)
	buf := make([]byte, 64<<10)
	var manifest time.Duration
	for b.Loop() {
		info, err := d.CreateSession(ctx, api.CreateRequest{User: "operator", Skills: []string{"x"}})
		if err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(d.mountRoot, info.ID, "x", "SKILL.md")
		if _, err := os.Stat(p); err != nil { // lookups outside the timing
			b.Fatal(err)
		}
		start := time.Now()
		fh, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fh.Read(buf); err != nil {
			b.Fatal(err)
		}
		fh.Close()
		manifest += time.Since(start)
	}
	if d.rec.journal.pending() < b.N {
		b.Fatalf("%d records in the journal after %d first reads", d.rec.journal.pending(), b.N)
	}
	b.ReportMetric(float64(manifest.Microseconds())/float64(b.N), "first-SKILL.md-µs")
}
