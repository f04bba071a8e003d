package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// TestServeSmoke: the daemon starts, serves a session with the bundled
// skills, and SIGTERM leaves no mount behind and exits 0.
func TestServeSmoke(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	var s struct {
		ID       string   `json:"id"`
		Readable []string `json:"readable"`
		Path     string   `json:"path"`
	}
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "release-notes")
	if len(s.Readable) != 2 || s.Readable[0] != "release-notes" || s.Readable[1] != "commit-messages" {
		t.Fatalf("readable = %v, want [release-notes commit-messages]", s.Readable)
	}
	data, err := os.ReadFile(filepath.Join(s.Path, "release-notes", "SKILL.md"))
	if err != nil || len(data) == 0 {
		t.Fatalf("read SKILL.md through the mount: %v", err)
	}
	var a struct {
		Activated []struct {
			Slug  string `json:"slug"`
			Opens int    `json:"opens"`
		} `json:"activated"`
	}
	e.okJSON(&a, "session", "activations", s.ID)
	if len(a.Activated) != 1 || a.Activated[0].Slug != "release-notes" || a.Activated[0].Opens != 1 {
		t.Fatalf("activations = %+v, want release-notes once", a.Activated)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, d.logs())
	}
	if m := mountedUnder(t, e.home); len(m) != 0 {
		t.Fatalf("mounts left behind: %v", m)
	}
}
