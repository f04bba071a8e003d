package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// scaleSessions is how many sessions TestSessionScale opens: 10,000, or
// SKILLFS_SCALE_SESSIONS.
func scaleSessions(t *testing.T) int {
	if v := os.Getenv("SKILLFS_SCALE_SESSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("SKILLFS_SCALE_SESSIONS=%q", v)
		}
		return n
	}
	return 10000
}

// What a daemon serving TestSessionScale's sessions may hold at its peak:
// memory grows with the sessions (ten thousand take about half of this),
// threads must not.
const (
	scaleMaxRSSMB   = 100
	scaleMaxThreads = 20
)

// TestSessionScale: many open sessions of five skills each in one daemon.
// Its memory and threads stay bounded, a restart brings every session back
// readable, and the session list pages through all of them once (its order
// is TestSessionListPages's). Durations are logged, not asserted.
func TestSessionScale(t *testing.T) {
	n := scaleSessions(t)
	e := newEnv(t)
	// A user's open sessions are capped: SKILLFS_SCALE_SESSIONS may ask
	// for more than the default lets three users open.
	d := e.serve("--max-user-sessions", strconv.Itoa(n))
	src := t.TempDir()
	var slugs []string
	for i := range 10 {
		slug := fmt.Sprintf("scale-%d", i)
		writeSkill(t, filepath.Join(src, slug), "name: "+slug+"\ndescription: skill "+strconv.Itoa(i),
			map[string]string{"references/notes.md": "notes of " + slug, "scripts/run.sh": "#!/bin/sh\necho " + slug})
		slugs = append(slugs, slug)
	}
	e.ok("skill", "import", src, "--all", "--share", "global")
	users := []string{"alice", "bob", "carol"}
	for _, u := range users {
		e.ok("user", "add", u)
	}
	api := newTimingClient(e.home) // times the daemon, not the contract check
	// Five skills each, in a window sliding over the catalog.
	skillsOf := func(i int) []string {
		out := make([]string, 5)
		for j := range out {
			out[j] = slugs[(i+j)%len(slugs)]
		}
		return out
	}

	peak := watchPeak(t, d)
	start := time.Now()
	ids := make([]string, n)
	paths := make([]string, n)
	var wg sync.WaitGroup
	var failed sync.Once
	const workers = 8
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				var s sessionJSON
				code := api.do(t, "POST", "/v1/sessions", "", map[string]any{"user": users[i%len(users)], "skills": skillsOf(i)}, &s)
				if code != http.StatusOK || len(s.Readable) != 5 {
					failed.Do(func() { t.Errorf("create session %d: %d %+v", i, code, s) })
					return
				}
				ids[i], paths[i] = s.ID, s.Path
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	created := time.Since(start)

	// A few sessions are read through the mount, as agents would.
	readSome := func(when string) {
		t.Helper()
		for _, i := range []int{0, n / 3, n / 2, n - 1} {
			for _, slug := range skillsOf(i) {
				if b, err := os.ReadFile(filepath.Join(paths[i], slug, "SKILL.md")); err != nil || len(b) == 0 {
					t.Fatalf("%s: read %s/SKILL.md of session %d: %v", when, slug, i, err)
				}
			}
		}
	}
	readSome("after creation")
	first := peak()
	t.Logf("scale: %d sessions created in %v (%.0f/s) over %d connections; daemon at its peak: %d MiB resident, %d threads, %d descriptors",
		n, created.Round(time.Millisecond), float64(n)/created.Seconds(), workers, first.rssKB>>10, first.threads, first.fds)

	// A restart brings every session back before the daemon says it is
	// ready.
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d\n%s", code, d.logs())
	}
	start = time.Now()
	d = e.serve()
	ready := time.Since(start)
	peak = watchPeak(t, d) // resident memory: since the start, restore included
	readSome("after the restart")
	readable := time.Since(start)
	var health struct {
		Sessions int `json:"sessions"`
	}
	api.get(t, "/v1/health", &health)
	if health.Sessions != n {
		t.Fatalf("after the restart the daemon serves %d sessions, want %d", health.Sessions, n)
	}

	// The list pages through every session once.
	start = time.Now()
	var listed []string
	pages := 0
	for next := "/v1/sessions?limit=1000"; next != ""; pages++ {
		if pages > n {
			t.Fatalf("the list does not end after %d pages", pages)
		}
		var page []sessionJSON
		next = api.page(t, next, &page)
		if len(page) > 1000 {
			t.Fatalf("a page of %d sessions, asked for 1000 at most", len(page))
		}
		listed = append(listed, sessionIDs(page)...)
	}
	listing := time.Since(start)
	second := peak()
	t.Logf("scale: restart with %d sessions: ready in %v, sample sessions read %v after the start; %d sessions listed in %d pages in %v; "+
		"daemon at its peak: %d MiB resident, %d threads, %d descriptors",
		n, ready.Round(time.Millisecond), readable.Round(time.Millisecond), len(listed), pages, listing.Round(time.Millisecond),
		second.rssKB>>10, second.threads, second.fds)
	got, exp := slices.Clone(listed), slices.Clone(ids)
	slices.Sort(got)
	slices.Sort(exp)
	if !slices.Equal(got, exp) {
		t.Errorf("the list holds %d sessions (%d distinct), not the %d created", len(listed), len(slices.Compact(got)), n)
	}

	if os.Getenv("SKILLFS_TEST_RACE") == "1" {
		return // the race detector's own memory and threads are not the daemon's
	}
	for what, s := range map[string]procStats{"while the sessions were created": first, "after the restart": second} {
		if s.rssKB>>10 >= scaleMaxRSSMB || s.threads >= scaleMaxThreads {
			t.Errorf("%d sessions, %s: the daemon held %d MiB and %d threads, want under %d MiB and %d threads",
				n, what, s.rssKB>>10, s.threads, scaleMaxRSSMB, scaleMaxThreads)
		}
	}
}

// watchPeak samples the daemon's descriptors and threads every 50 ms until
// the returned function is called, which returns the highest of each, and
// the highest resident size the daemon has had since it started.
func watchPeak(t *testing.T, d *daemon) func() procStats {
	t.Helper()
	pid := d.cmd.Process.Pid
	var peak procStats
	sample := func() {
		s, err := sampleProc(pid)
		if err != nil {
			return // exiting
		}
		peak.fds = max(peak.fds, s.fds)
		peak.threads = max(peak.threads, s.threads)
		peak.rssKB = max(peak.rssKB, s.peakRSSKB)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(stop); <-done }) })
	return func() procStats {
		once.Do(func() { close(stop); <-done })
		sample()
		return peak
	}
}
