package fs

import (
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"skillfs/fs/readbench"
	"skillfs/skills"
)

// readCold reads a file with its cached pages dropped first, so that the read
// reaches the daemon.
func readCold(t testing.TB, p string) {
	t.Helper()
	if _, err := readbench.ReadCold(p); err != nil {
		t.Fatal(err)
	}
}

// auditKey names an entry of the audit for comparison.
func auditKey(r skills.FileRead) string { return r.Session + " " + r.Slug + "/" + r.Path }

// TestReadAudit: every read that reaches the daemon is counted for its
// session, skill and file, with the time of the first; taking the reads
// starts the counts anew; a warm re-read, served from the page cache, is
// not seen.
func TestReadAudit(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{Sink: &fakeSink{}, AuditReads: true})
	one := setSession(t, srv, "one", View{st.alpha1, st.beta1})
	two := setSession(t, srv, "two", View{st.beta1})
	before := time.Now()
	for range 3 {
		readCold(t, filepath.Join(one, "alpha", "references", "guide.md"))
	}
	readCold(t, filepath.Join(one, "alpha", "SKILL.md"))
	readCold(t, filepath.Join(two, "beta", "notes.txt"))
	readCold(t, filepath.Join(two, "beta", "notes.txt"))
	if _, err := os.ReadFile(filepath.Join(two, "beta", "notes.txt")); err != nil { // warm: the page cache answers
		t.Fatal(err)
	}
	after := time.Now()

	got := map[string]int64{}
	for _, r := range srv.TakeReads() {
		got[auditKey(r)] += r.Reads
		if r.FirstAt.Before(before) || r.FirstAt.After(after) {
			t.Errorf("%s: first read at %v, not between %v and %v", auditKey(r), r.FirstAt, before, after)
		}
	}
	want := map[string]int64{"one alpha/references/guide.md": 3, "one alpha/SKILL.md": 1, "two beta/notes.txt": 2}
	if !maps.Equal(got, want) {
		t.Fatalf("reads %v, want %v", got, want)
	}
	if again := srv.TakeReads(); len(again) != 0 {
		t.Fatalf("taken twice: %+v", again)
	}
	readCold(t, filepath.Join(one, "beta", "SKILL.md"))
	if next := srv.TakeReads(); len(next) != 1 || auditKey(next[0]) != "one beta/SKILL.md" || next[0].Reads != 1 {
		t.Fatalf("the next batch %+v, want one read of beta/SKILL.md", next)
	}
}

// TestReadAuditLosesNothingWhileTaken: reads that race with TakeReads are
// each counted once, in one batch or the next: as many as the READ requests
// served. (A read the page cache answered after all, its pages not dropped
// by the kernel at once, reaches nobody and is not counted.)
func TestReadAuditLosesNothingWhileTaken(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{Sink: &fakeSink{}, AuditReads: true})
	dir := setSession(t, srv, "s", View{st.alpha1})
	files := []string{"SKILL.md", "references/guide.md", "scripts/run.sh"}
	const per = 60
	start := time.Now()
	reads := srv.Requests()[ReqRead]
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				readCold(t, filepath.Join(dir, "alpha", filepath.FromSlash(f)))
			}
		}()
	}
	got := map[string]int64{}
	take := func() {
		for _, r := range srv.TakeReads() {
			if r.FirstAt.Before(start) || r.FirstAt.After(time.Now()) {
				t.Errorf("%s: a batch whose first time %v is not when it was read", auditKey(r), r.FirstAt)
			}
			got[r.Path] += r.Reads
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(time.Millisecond):
		}
		take()
	}
	take()
	served := int64(srv.Requests()[ReqRead] - reads)
	var counted int64
	for _, f := range files {
		if got[f] < 1 || got[f] > per {
			t.Errorf("%s: %d reads counted, want 1 to %d", f, got[f], per)
		}
		counted += got[f]
	}
	if counted != served {
		t.Errorf("reads counted %v, %d in all; %d READ requests served", got, counted, served)
	}
	if len(got) != len(files) {
		t.Errorf("reads counted of %v, want %q only", got, files)
	}
}

// TestNoAuditWithoutTheOption: a mount that does not audit keeps nothing.
func TestNoAuditWithoutTheOption(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{Sink: &fakeSink{}})
	dir := setSession(t, srv, "s", View{st.alpha1})
	readCold(t, filepath.Join(dir, "alpha", "references", "guide.md"))
	if got := srv.TakeReads(); len(got) != 0 {
		t.Fatalf("reads kept without AuditReads: %+v", got)
	}
}
