package gittest

import (
	"os/exec"
	"testing"
)

// TestGitAndLogCommands: a fixture's commits are reproducible under
// FixtureEnv, and the logging git sees every command a test runs.
func TestGitAndLogCommands(t *testing.T) {
	Require(t)
	commands := LogCommands(t)
	hashes := make([]string, 2)
	for i := range hashes {
		dir := t.TempDir()
		Git(t, dir, FixtureEnv, "init", "--quiet", "--initial-branch=main")
		Git(t, dir, FixtureEnv, "commit", "--quiet", "--allow-empty", "-m", "one")
		hashes[i] = Git(t, dir, FixtureEnv, "rev-parse", "HEAD")
	}
	if hashes[0] != hashes[1] || len(hashes[0]) != 40 {
		t.Errorf("commits %q and %q, want one reproducible hash", hashes[0], hashes[1])
	}
	if p, err := exec.LookPath("git"); err != nil || p == "" {
		t.Fatalf("git not found through the logger: %v", err)
	}
	lines := commands()
	if len(lines) != 6 || !RanSubcommand(lines, "rev-parse") || RanSubcommand(lines, "clone") {
		t.Errorf("logged %q", lines)
	}
}
