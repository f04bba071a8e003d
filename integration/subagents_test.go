package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// keyedSession is what session create and list answer of keys, labels and
// parents.
type keyedSession struct {
	sessionInfo
	Key      string            `json:"key"`
	Labels   map[string]string `json:"labels"`
	Parent   string            `json:"parent"`
	Existing bool              `json:"existing"`
}

// TestSessionKeysAndSubAgents through the binary: a create with an open
// session's key answers that session; list finds it by key and label; a
// sub-agent reads only its subset through the mount and closes with its
// parent, whose key is then free; bad flags change nothing.
func TestSessionKeysAndSubAgents(t *testing.T) {
	e, _ := fixtureSession(t)
	var first, again keyedSession
	e.okJSON(&first, "session", "create", "--user", "alice", "--skills", "alpha,beta", "--key", "thread-1", "--label", "team=x")
	e.okJSON(&again, "session", "create", "--user", "alice", "--skills", "alpha", "--key", "thread-1")
	if first.Existing || !again.Existing || again.ID != first.ID || first.Key != "thread-1" || first.Labels["team"] != "x" {
		t.Fatalf("the create and its retry: %+v, %+v", first, again)
	}
	var found []keyedSession
	e.okJSON(&found, "session", "list", "--user", "alice", "--key", "thread-1")
	if len(found) != 1 || found[0].ID != first.ID {
		t.Errorf("list by key: %+v", found)
	}
	e.okJSON(&found, "session", "list", "--label", "team=x")
	if len(found) != 1 || found[0].ID != first.ID {
		t.Errorf("list by label: %+v", found)
	}
	for _, args := range [][]string{
		{"session", "create", "--user", "alice", "--key", "has space"},
		{"session", "create", "--user", "alice", "--label", "novalue"},
		{"session", "list", "--label", "-bad=x"},
		{"session", "create", "--parent", first.ID, "--skills", "gamma"},
	} {
		if r := e.run(args...); r.code == 0 {
			t.Errorf("%v succeeded: %s", args, r.stdout)
		}
	}

	var child keyedSession
	e.okJSON(&child, "session", "create", "--parent", first.ID, "--skills", "alpha")
	if child.Parent != first.ID || child.User != "alice" || !slices.Equal(child.Readable, []string{"alpha"}) {
		t.Fatalf("child %+v", child)
	}
	if _, err := os.ReadFile(filepath.Join(child.Path, "alpha", "SKILL.md")); err != nil {
		t.Errorf("the child reads alpha: %v", err)
	}
	if _, err := os.Stat(filepath.Join(child.Path, "beta")); errnoOf(err) != syscall.ENOENT {
		t.Errorf("the child sees beta: %v", err)
	}
	if r := e.run("session", "create", "--parent", child.ID); r.code == 0 || !strings.Contains(r.stderr, "may not open sub-agent sessions") {
		t.Errorf("a grandchild: %d %s", r.code, r.stderr)
	}
	if a := e.activationsOf(child.ID); a.opens("alpha") != 1 {
		t.Errorf("the child's activations: %+v", a)
	}
	e.ok("session", "close", first.ID)
	if r := e.run("session", "show", child.ID); r.code == 0 {
		t.Errorf("the child after its parent closed: %s", r.stdout)
	}
	var fresh keyedSession
	e.okJSON(&fresh, "session", "create", "--user", "alice", "--skills", "alpha", "--key", "thread-1")
	if fresh.Existing || fresh.ID == first.ID {
		t.Errorf("a create with a closed session's key: %+v", fresh)
	}
}
