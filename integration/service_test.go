package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGHUP (a closed terminal, a log rotation) leaves the daemon serving: the
// mount still reads and the API still answers, and the log says the signal
// was ignored.
func TestSighupKeepsServing(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	var created struct{ ID, Path string }
	e.okJSON(&created, "session", "create", "--user", "operator", "--all")
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.logs(), "SIGHUP ignored") {
		if time.Now().After(deadline) {
			t.Fatalf("no word of the SIGHUP in the log:\n%s", d.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-d.done:
		t.Fatalf("serve exited on SIGHUP: %v\n%s", d.err, d.logs())
	default:
	}
	ents, err := os.ReadDir(created.Path)
	if err != nil || len(ents) == 0 {
		t.Fatalf("the session's mount after SIGHUP: %d entries, %v", len(ents), err)
	}
	if _, err := fetch(filepath.Join(created.Path, ents[0].Name(), "SKILL.md")); err != nil {
		t.Fatalf("read after SIGHUP: %v", err)
	}
	e.ok("session", "show", created.ID)
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d on SIGTERM after a SIGHUP", code)
	}
}

// A command that makes a new data directory says where, on stderr, once:
// a forgotten --home does not silently start an empty catalog.
func TestNewDataDirectoryIsAnnounced(t *testing.T) {
	e := newEnv(t)
	first := e.run("skill", "list")
	if first.code != 0 || !strings.Contains(first.stderr, "created a new data directory at "+e.home) {
		t.Fatalf("first command: exit %d, stderr %q; want the new data directory named", first.code, first.stderr)
	}
	again := e.run("skill", "list")
	if again.code != 0 || strings.Contains(again.stderr, "created") {
		t.Fatalf("second command: exit %d, stderr %q; want no announcement", again.code, again.stderr)
	}
}
