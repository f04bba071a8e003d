package integration

import (
	"bufio"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readerSandbox is a bwrap sandbox whose agent reads a skill's SKILL.md in a
// loop and looks up a name the skill does not have, printing "ok" when both
// work (the lookup is answered "no such file") and "err" otherwise. The
// lookup always reaches the daemon; the read of SKILL.md may be served from
// the kernel's cache once it was read.
type readerSandbox struct {
	pid int // the process inside, whose mount namespace the bind lives in
	cmd *exec.Cmd

	mu     sync.Mutex
	lastOK time.Time
	errs   int
	oks    int
}

// startReaderSandbox starts the sandbox with an empty /home/gem/skills.
func startReaderSandbox(t *testing.T, slug string) *readerSandbox {
	t.Helper()
	dir := "/home/gem/skills/" + slug
	script := "while :; do if cat " + dir + "/SKILL.md >/dev/null 2>&1 && ls " + dir + "/absent 2>&1 | grep -q 'No such file'; " +
		"then echo ok; else echo err; fi; sleep 0.05; done"
	pid, cmd, out := startSandboxRunning(t, "/bin/sh", "-c", script)
	sb := &readerSandbox{pid: pid, cmd: cmd}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			sb.mu.Lock()
			if sc.Text() == "ok" {
				sb.oks++
				sb.lastOK = time.Now()
			} else {
				sb.errs++
			}
			sb.mu.Unlock()
		}
	}()
	return sb
}

// waitOK waits until the sandbox reads successfully after since, and
// returns how long that took.
func (sb *readerSandbox) waitOK(t *testing.T, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	deadline := since.Add(limit)
	for time.Now().Before(deadline) {
		sb.mu.Lock()
		last := sb.lastOK
		sb.mu.Unlock()
		if last.After(since) {
			return last.Sub(since)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("sandbox %d does not read again within %v of %v", sb.pid, limit, since.Format(time.StampMilli))
	return 0
}

// Live sandboxes reading in a loop survive a daemon crash: after kill -9 and
// a restart each reads again within seconds without being restarted, and no
// first activation reported before the crash is missing after it.
func TestCrashWithLiveSandboxes(t *testing.T) {
	const n = 4
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	slugs := []string{"commit-messages", "release-notes"}
	type live struct {
		id, slug string
		sb       *readerSandbox
		first    time.Time
	}
	var all []*live
	for i := range n {
		slug := slugs[i%len(slugs)]
		var s sessionJSON
		e.okJSON(&s, "session", "create", "--user", "alice", "--skills", slug)
		sb := startReaderSandbox(t, slug)
		e.ok("session", "mount", s.ID, "/home/gem/skills", "--pid", strconv.Itoa(sb.pid))
		all = append(all, &live{id: s.ID, slug: slug, sb: sb})
	}
	start := time.Now()
	for _, l := range all {
		l.sb.waitOK(t, start, 10*time.Second)
	}
	for _, l := range all {
		a := e.activationsOf(l.id)
		if len(a.Activated) != 1 || a.Activated[0].Slug != l.slug {
			t.Fatalf("session %s before the crash: %+v", l.id, a.Activated)
		}
		l.first = a.Activated[0].FirstAt
	}

	d.kill()
	crashed := time.Now()
	time.Sleep(300 * time.Millisecond) // the readers meet the dead mount
	for _, l := range all {
		l.sb.mu.Lock()
		dead := l.sb.lastOK.Before(crashed.Add(150 * time.Millisecond))
		l.sb.mu.Unlock()
		if !dead {
			t.Fatalf("sandbox %d still reads after the crash", l.sb.pid)
		}
	}
	d = e.serve()
	ready := time.Now()
	var worst time.Duration
	for _, l := range all {
		if took := l.sb.waitOK(t, ready, 10*time.Second); took > worst {
			worst = took
		}
		if err := syscall.Kill(l.sb.pid, 0); err != nil {
			t.Fatalf("sandbox %d did not survive: %v", l.sb.pid, err)
		}
	}
	t.Logf("crash with %d live sandboxes: all read again %v after the restart was ready (%v after the crash)",
		n, worst.Round(time.Millisecond), time.Since(crashed).Round(time.Millisecond))
	for _, l := range all {
		a := e.activationsOf(l.id)
		if len(a.Activated) != 1 || !a.Activated[0].FirstAt.Equal(l.first) || a.Activated[0].Opens < 1 {
			t.Fatalf("session %s after the crash: %+v, want the first activation of %v kept", l.id, a.Activated, l.first)
		}
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d\n%s", code, d.logs())
	}
}
