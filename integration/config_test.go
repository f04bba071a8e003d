package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeConfigFile: the real daemon takes its settings from --config,
// a flag on the command line wins over the file, and a file with an
// unknown key stops serve with exit 2, naming the key and its line, before
// it creates a data directory.
func TestServeConfigFile(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	fromFile, fromFlag := filepath.Join(dir, "file-mnt"), filepath.Join(dir, "flag-mnt")
	config := filepath.Join(dir, "skillfs.yaml")
	text := "# the daemon's settings\nexamples: false\nmount-root: " + fromFile + "\nagent-path: /opt/agent-skills\n"
	if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	d := e.serve("--config", config, "--mount-root", fromFlag)
	if d.mount != fromFlag {
		t.Errorf("mount at %s, want %s from the command line over the file's %s", d.mount, fromFlag, fromFile)
	}
	var list []struct{ Slug string }
	e.okJSON(&list, "skill", "list")
	if len(list) != 0 {
		t.Errorf("examples: false in the file, yet the catalog holds %v", list)
	}
	src := filepath.Join(dir, "notes")
	writeSkill(t, src, "name: notes\ndescription: Notes for the configuration test.", nil)
	e.ok("skill", "import", src, "--share", "global")
	var created struct{ ID string }
	e.okJSON(&created, "session", "create", "--user", "operator", "--all")
	if prompt := e.ok("session", "prompt", created.ID); !strings.Contains(prompt, "/opt/agent-skills/notes/SKILL.md") {
		t.Errorf("the prompt does not use the file's agent-path:\n%s", prompt)
	}
	d.stop()

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("examples: false\nmount-roots: /x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := newEnv(t)
	r := other.runEnv([]string{"SKILLFS_CONFIG=" + bad}, "serve")
	if r.code != 2 || !strings.Contains(r.stderr, `line 2: unknown key "mount-roots"`) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("serve with an unknown key: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(other.home); !os.IsNotExist(err) {
		t.Errorf("serve with a bad file touched its data directory: %v", err)
	}
}
