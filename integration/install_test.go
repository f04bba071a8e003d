package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"skillfs/fs/bind/sandboxtest"
	"skillfs/skills/skilltest"
)

// TestSessionInstallFromSandbox: through the binary, a session bound into a
// sandbox (an unprivileged uid) installs a skill from its workspace with
// `session install --path`, private to its user, and reads it through its
// bind once refreshed; what the sandbox may not read or cannot see is
// refused with the exit code of its kind, the catalog unchanged; the
// installs past the hourly quota serve was given are refused.
func TestSessionInstallFromSandbox(t *testing.T) {
	requireCommand(t, "bwrap")
	requireCommand(t, "setpriv")
	e := newEnv(t)
	e.serve("--installs-per-hour", "5") // four refused below, one installed, then no more
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")

	parent := t.TempDir()
	os.Chmod(parent, 0o755)
	ws := filepath.Join(parent, "ws")
	skilltest.WriteDir(t, filepath.Join(ws, "mine"), skilltest.Skill("name: mine\ndescription: from the workspace", "body\n",
		map[string]string{"notes.md": "workspace notes"}))
	os.Symlink("/etc/shadow", filepath.Join(ws, "mine", "shadow"))
	filepath.Walk(ws, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, 1000, 1000)
		}
		return nil
	})
	os.WriteFile(filepath.Join(ws, "mine", "secret"), []byte("root's"), 0o600) // root's, 0600
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe.zip"), 0o666); err != nil {
		t.Fatal(err)
	}
	box, err := sandboxtest.Sandboxed(ws, 1000, 1000, "--dir", "/home/gem/skills")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(box.Stop)
	s := e.newSession("alice", "--skills", "")
	e.ok("session", "mount", s.ID, "/home/gem/skills", "--pid", fmt.Sprint(box.PID))

	before := e.ok("skill", "list", "--json")
	for _, tc := range []struct {
		path string
		code int
		says string
	}{
		{"/workspace/mine", 4, "/workspace/mine/secret"},
		{"/etc/shadow", 3, "does not exist in the sandbox"},
		{ws, 3, "does not exist in the sandbox"},
		{"/workspace/pipe.zip", 5, "fifo"},
	} {
		r := e.run("session", "install", s.ID, "--path", tc.path)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("install %s: exit %d, %q; want %d saying %q", tc.path, r.code, r.stderr, tc.code, tc.says)
		}
	}
	if after := e.ok("skill", "list", "--json"); after != before {
		t.Fatalf("refused installs changed the catalog:\n%s\n%s", before, after)
	}

	os.Remove(filepath.Join(ws, "mine", "secret"))
	var out struct {
		Slug     string   `json:"slug"`
		Joined   bool     `json:"joined"`
		Warnings []string `json:"warnings"`
	}
	e.okJSON(&out, "session", "install", s.ID, "--path", "/workspace/mine", "--now")
	if out.Slug != "mine" || !out.Joined || !strings.Contains(strings.Join(out.Warnings, " "), "shadow") {
		t.Fatalf("install = %+v", out)
	}
	got, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(box.PID), "root", "home", "gem", "skills", "mine", "notes.md"))
	if err != nil || string(got) != "workspace notes" {
		t.Fatalf("read in the sandbox: %q, %v", got, err)
	}
	if list := e.ok("--as", "bob", "skill", "list", "--json"); strings.Contains(list, `"mine"`) {
		t.Fatalf("bob sees alice's install: %s", list)
	}
	r := e.run("session", "install", s.ID, "--path", "/workspace/mine")
	if r.code != 5 || !strings.Contains(r.stderr, "installs per hour") {
		t.Fatalf("the install past the hourly quota: exit %d, %q", r.code, r.stderr)
	}
}
