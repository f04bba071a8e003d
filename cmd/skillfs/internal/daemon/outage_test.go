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
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/activation"
	"skillfs/cmd/skillfs/internal/activation/activationtest"
	"skillfs/index"
	"skillfs/skills"
)

// The recorder's own outage tests are in package activation; these are
// those of the whole daemon.

// outage makes the index unreachable for a while: here through the
// recorder's view of it; against PostgreSQL, by stopping the server.
type outage interface {
	begin(t testing.TB)
	end(t testing.TB)
}

type flakyOutage struct{ f *activationtest.Flaky }

func (o flakyOutage) begin(testing.TB) { o.f.Down.Store(true) }
func (o flakyOutage) end(testing.TB)   { o.f.Down.Store(false) }

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
	var f *activationtest.Flaky
	d := newTestDaemonOn(t, func(db *index.DB) activation.Index { f = &activationtest.Flaky{DB: db}; return f }, true)
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
		if err := d.db.AddTool(ctx, fmt.Sprintf("tool-%d", i)); err != nil {
			t.Fatal(err)
		}
		install(t, d, fmt.Sprintf("name: %s\ndescription: d\ntool_dependencies: [tool-%d]", slugs[i], i), skills.ScopeGlobal)
	}
	d.rec.Flush(ctx) // reads the catalog with the skills in it
	sessions := make([]string, nSessions)
	for i := range sessions {
		info, err := d.CreateSession(ctx, api.CreateRequest{User: "operator", Skills: slugs})
		if err != nil {
			t.Fatal(err)
		}
		sessions[i] = info.ID
	}
	want := map[activationtest.Key]int64{}
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
		want[activationtest.Key{Session: session, Slug: slug}]++
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
	go func() { defer close(flushed); d.flushActivations(flushCtx, 10*time.Millisecond) }()

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
	d.rec.(*activation.Recorder).RetryNow()
	if err := d.rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := d.rec.JournalRecords(); n != 0 {
		t.Fatalf("%d records left in the journal", n)
	}

	db := d.db
	events := activationtest.ActivatedEvents(t, db)
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
			k := activationtest.Key{Session: s, Slug: slug}
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
	var f *activationtest.Flaky
	d := newTestDaemonOn(t, func(db *index.DB) activation.Index { f = &activationtest.Flaky{DB: db}; return f }, false)
	ctx := context.Background()
	install(t, d, "name: pub\ndescription: for everyone", skills.ScopeGlobal)
	info, err := d.CreateSession(ctx, api.CreateRequest{User: "operator", Skills: []string{"pub"}})
	if err != nil {
		t.Fatal(err)
	}
	f.Down.Store(true)
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
	var f *activationtest.Flaky
	d := newTestDaemonOn(b, func(db *index.DB) activation.Index { f = &activationtest.Flaky{DB: db}; return f }, false)
	ctx := context.Background()
	install(b, d, "name: x\ndescription: read me", skills.ScopeGlobal)
	f.Down.Store(true)
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
	if d.rec.JournalRecords() < b.N {
		b.Fatalf("%d records in the journal after %d first reads", d.rec.JournalRecords(), b.N)
	}
	b.ReportMetric(float64(manifest.Microseconds())/float64(b.N), "first-SKILL.md-µs")
}
