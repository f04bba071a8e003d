package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"skillfs/skills/skilltest"
)

// procStats is what the daemon holds at one moment.
type procStats struct {
	fds, threads int
	rssKB        int64
	peakRSSKB    int64 // the highest resident size since the process started
}

// sampleProc reads the descriptor count, threads and resident memory of a
// process.
func sampleProc(pid int) (procStats, error) {
	var s procStats
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return s, err
	}
	s.fds = len(ents)
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Threads:":
			s.threads, _ = strconv.Atoi(f[1])
		case "VmRSS:":
			s.rssKB, _ = strconv.ParseInt(f[1], 10, 64)
		case "VmHWM:":
			s.peakRSSKB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	return s, nil
}

// loadSeconds is how long the load test runs: 60 s, or SKILLFS_LOAD_SECONDS.
func loadSeconds(t *testing.T) time.Duration {
	if v := os.Getenv("SKILLFS_LOAD_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("SKILLFS_LOAD_SECONDS=%q", v)
		}
		return time.Duration(n) * time.Second
	}
	return 60 * time.Second
}

// Bounds the daemon must stay within under the load test.
const (
	loadMaxFDs     = 2048
	loadMaxThreads = 1024
	loadMaxRSSMB   = 1024
)

// 200 sessions, each with a reader in a tight loop, while a skill is
// reinstalled, disabled and enabled, and re-shared: no unexpected error,
// every session that read the skill activated (and never more reads counted
// than made), and the daemon's descriptors, threads and memory bounded.
func TestLoad(t *testing.T) {
	const sessions = 200
	dur := loadSeconds(t)
	e := newEnv(t)
	d := e.serve("--examples=false")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "stable"), "name: stable\ndescription: never changes", map[string]string{"references/guide.md": strings.Repeat("guide\n", 600)})
	churnSrc := filepath.Join(t.TempDir(), "churn")
	writeSkill(t, churnSrc, "name: churn\ndescription: reinstalled, disabled, re-shared", map[string]string{"v.txt": "0"})
	e.ok("skill", "import", filepath.Join(src, "stable"), "--share", "global")
	e.ok("skill", "import", churnSrc, "--share", "global")
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	api := newAPIClient(e.home)

	type reader struct {
		id, user string
		path     string
		reads    int64 // successful reads of stable/SKILL.md
	}
	readers := make([]*reader, sessions)
	for i := range readers {
		user := "alice"
		if i%2 == 1 {
			user = "bob"
		}
		var s sessionJSON
		e.okJSON(&s, "session", "create", "--user", user, "--skills", "stable,churn")
		readers[i] = &reader{id: s.ID, user: user, path: s.Path}
	}

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var unexpected atomic.Int64
	var churnFailures, churnReads atomic.Int64
	var firstErr atomic.Value
	report := func(what string, err error) {
		if unexpected.Add(1) == 1 {
			firstErr.Store(fmt.Sprintf("%s: %v", what, err))
		}
	}
	var wg sync.WaitGroup
	for _, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			manifest := filepath.Join(r.path, "stable", "SKILL.md")
			guide := filepath.Join(r.path, "stable", "references", "guide.md")
			churn := filepath.Join(r.path, "churn", "v.txt")
			for i := 0; ctx.Err() == nil; i++ {
				if _, err := os.ReadFile(manifest); err != nil {
					report("read stable/SKILL.md", err)
					continue
				}
				r.reads++
				if b, err := os.ReadFile(guide); err != nil || len(b) != 3600 {
					report("read stable/references/guide.md", err)
				}
				if i%4 == 0 {
					churnReads.Add(1)
					if _, err := os.ReadFile(churn); err != nil {
						// Revoked for a while: that is the point.
						if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EACCES) {
							report("read churn/v.txt", err)
						}
						churnFailures.Add(1)
					}
				}
			}
		}()
	}

	// The catalog changes under the readers.
	var changes atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			var err error
			switch i % 5 {
			case 0:
				skilltest.WriteFile(t, filepath.Join(churnSrc, "v.txt"), []byte(strconv.Itoa(i)), 0o644)
				if r := e.run("skill", "import", churnSrc); r.code != 0 {
					err = fmt.Errorf("reinstall: %s", r.stderr)
				}
			case 1:
				err = apiStatus(api.do(t, "POST", "/v1/skills/churn/disable", "", nil, nil))
			case 2:
				err = apiStatus(api.do(t, "POST", "/v1/skills/churn/enable", "", nil, nil))
			case 3:
				err = apiStatus(api.do(t, "PUT", "/v1/skills/churn/share", "", map[string]string{"read": "user:alice"}, nil))
			case 4:
				err = apiStatus(api.do(t, "PUT", "/v1/skills/churn/share", "", map[string]string{"read": "global"}, nil))
			}
			if err != nil {
				report("change the catalog", err)
			}
			// A tenth of the sessions take their next turn.
			for j := i % 10; j < sessions; j += 10 {
				if err := apiStatus(api.do(t, "POST", "/v1/sessions/"+readers[j].id+"/refresh", "", nil, nil)); err != nil {
					report("refresh", err)
				}
			}
			changes.Add(1)
			time.Sleep(200 * time.Millisecond)
		}
	}()

	var peak procStats
	pid := d.cmd.Process.Pid
	tick := time.NewTicker(time.Second)
	samples := 0
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			s, err := sampleProc(pid)
			if err != nil {
				t.Fatalf("sample the daemon: %v", err)
			}
			samples++
			peak.fds = max(peak.fds, s.fds)
			peak.threads = max(peak.threads, s.threads)
			peak.rssKB = max(peak.rssKB, s.rssKB)
		}
	}
	tick.Stop()
	wg.Wait()

	var total int64
	for _, r := range readers {
		total += r.reads
	}
	t.Logf("load: %d sessions for %v: %d reads of stable (%.0f/s), %d of churn (%d refused while revoked), %d catalog changes; "+
		"daemon peak: %d descriptors, %d threads, %d MiB resident (%d samples); unexpected errors: %d",
		sessions, dur, total, float64(total)/dur.Seconds(), churnReads.Load(), churnFailures.Load(), changes.Load(),
		peak.fds, peak.threads, peak.rssKB>>10, samples, unexpected.Load())
	if n := unexpected.Load(); n > 0 {
		t.Errorf("%d unexpected errors, the first: %v", n, firstErr.Load())
	}
	if peak.fds > loadMaxFDs || peak.threads > loadMaxThreads || peak.rssKB>>10 > loadMaxRSSMB {
		t.Errorf("daemon peak %d descriptors, %d threads, %d MiB: over the bounds %d, %d, %d MiB",
			peak.fds, peak.threads, peak.rssKB>>10, loadMaxFDs, loadMaxThreads, loadMaxRSSMB)
	}
	// Every session that read SKILL.md is activated; reads served from the
	// kernel's cache are not counted, so at most as many are as were made.
	for _, r := range readers {
		a := e.activationsOf(r.id)
		if got := int64(a.opens("stable")); r.reads > 0 && (got < 1 || got > r.reads) || r.reads == 0 && got > 0 {
			t.Errorf("session %s: %d reads of stable recorded, %d made", r.id, got, r.reads)
		}
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d after the load\n%s", code, d.logs())
	}
}

// apiStatus turns an API status into an error.
func apiStatus(code int) error {
	if code != 200 {
		return fmt.Errorf("status %d", code)
	}
	return nil
}
