package source

// Test helpers shared with other packages' tests, copied here until a
// shared test-helper package serves them all.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/skills/git"
)

// Copied from git_test.go.
func writeTestFile(tb testing.TB, path string, data []byte, mode os.FileMode) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		tb.Fatal(err)
	}
}

// Copied from the git package's tests.
// requireGit skips without a git binary, except in CI where it fails.
func requireGit(tb testing.TB) string {
	tb.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("git is required when CI=true: %v", err)
		}
		tb.Skipf("git not installed: %v", err)
	}
	return p
}

// testGit runs git in dir for a fixture and returns its trimmed output.
func testGit(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fixtureGitEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// logGitCommands puts a git in front of PATH that records every command
// line it runs, one a line, and returns a function reading them back.
func logGitCommands(t *testing.T) func() []string {
	t.Helper()
	gitBin := requireGit(t)
	root := t.TempDir()
	logPath := filepath.Join(root, "commands")
	wrapper := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + logPath + "'\nexec '" + gitBin + "' \"$@\"\n"
	writeTestFile(t, filepath.Join(root, "bin", "git"), []byte(wrapper), 0o755)
	t.Setenv("PATH", filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() []string {
		b, err := os.ReadFile(logPath)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
}

// ranSubcommand reports whether one of the logged git command lines ran sub.
func ranSubcommand(lines []string, sub string) bool {
	for _, l := range lines {
		for _, f := range strings.Fields(l) {
			if f == sub {
				return true
			}
		}
	}
	return false
}

// fixtureGitEnv isolates the git commands that build fixtures from the
// machine's configuration and makes their commits reproducible.
var fixtureGitEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_AUTHOR_NAME=Fixture", "GIT_AUTHOR_EMAIL=fixture@example.com", "GIT_AUTHOR_DATE=2024-01-02T03:04:05Z",
	"GIT_COMMITTER_NAME=Fixture", "GIT_COMMITTER_EMAIL=fixture@example.com", "GIT_COMMITTER_DATE=2024-01-02T03:04:05Z",
}

// readLocalRepo reads src from its objects, checking that it was (git
// archive ran, no clone), and returns the tree and the commit.
func readLocalRepo(t *testing.T, src git.Source) (dir, commit string) {
	t.Helper()
	commands := logGitCommands(t)
	dir = filepath.Join(t.TempDir(), "tree")
	commit, err := git.Clone(context.Background(), src, dir, git.CloneOptions{})
	if err != nil {
		t.Fatalf("CloneGit(%v): %v", src, err)
	}
	if !ranSubcommand(commands(), "archive") || ranSubcommand(commands(), "clone") || ranSubcommand(commands(), "fetch") {
		t.Fatalf("%v was not read from its objects:\n%s", src, strings.Join(commands(), "\n"))
	}
	return dir, commit
}

func wantFile(t *testing.T, p, want string) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil || string(got) != want {
		t.Errorf("%s = %q, %v; want %q", filepath.Base(p), got, err, want)
	}
}
