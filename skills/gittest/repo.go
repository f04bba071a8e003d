package gittest

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// FixtureEnv isolates the git commands that build a fixture from the
// machine's configuration (no system or global config, no prompt) and
// makes their commits reproducible: a fixed author, committer and date.
var FixtureEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_TERMINAL_PROMPT=0",
	"GIT_AUTHOR_NAME=Fixture", "GIT_AUTHOR_EMAIL=fixture@example.com", "GIT_AUTHOR_DATE=2024-01-02T03:04:05Z",
	"GIT_COMMITTER_NAME=Fixture", "GIT_COMMITTER_EMAIL=fixture@example.com", "GIT_COMMITTER_DATE=2024-01-02T03:04:05Z",
}

// Require returns the path of the git binary. Without one it skips the
// test, except in CI (CI=true), where it fails it.
func Require(tb testing.TB) string {
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

// Git runs git with args in dir, with env added to the test process's
// environment (FixtureEnv for a fixture), and returns its output, trimmed.
// A failing command fails the test, showing the output.
func Git(tb testing.TB, dir string, env []string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// LogCommands puts a git in front of PATH, for the rest of the test, that
// records every command line it runs, one a line, before running the real
// git; it returns a function reading the lines back.
func LogCommands(t *testing.T) func() []string {
	t.Helper()
	gitBin := Require(t)
	root := t.TempDir()
	logPath := filepath.Join(root, "commands")
	wrapper := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + logPath + "'\nexec '" + gitBin + "' \"$@\"\n"
	bin := filepath.Join(root, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(wrapper), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(bin, "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() []string {
		b, err := os.ReadFile(logPath)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
}

// RanSubcommand reports whether one of the logged command lines holds the
// word sub (a subcommand such as "clone").
func RanSubcommand(lines []string, sub string) bool {
	for _, l := range lines {
		for _, f := range strings.Fields(l) {
			if f == sub {
				return true
			}
		}
	}
	return false
}
