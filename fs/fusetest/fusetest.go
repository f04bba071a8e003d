// Package fusetest holds what tests that mount FUSE filesystems share
// (tests only): whether this machine can mount, whether the tests left a
// mount behind, and the file handles of a FUSE mount (open_by_handle_at).
package fusetest

import (
	"fmt"
	"os"
	"testing"
)

// Require skips a test that mounts FUSE when this machine cannot (not
// root, no /dev/fuse), or fails it under CI=true, where every test must run.
func Require(tb testing.TB) {
	tb.Helper()
	reason := ""
	if os.Geteuid() != 0 {
		reason = "mounting FUSE needs root"
	} else if _, err := os.Stat("/dev/fuse"); err != nil {
		reason = fmt.Sprintf("no FUSE device: %v", err)
	}
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("FUSE tests must run in CI: %s", reason)
	}
	tb.Skip(reason)
}

// FsName is the source name the mounts of this test process carry: prefix
// and the process id, so that Main finds the mounts this process left
// behind and never those of tests running beside it (another package,
// another checkout).
func FsName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, os.Getpid()) }

// Main runs the tests of m and fails them when mounted (fs.MountsOf of the
// FsName the tests mount with, which every bind of their mounts shows too)
// lists mounts left behind: a bind whose cleanup did not run, a mount a
// failed test did not undo. It takes the lister rather than calling fs, so
// that the tests of package fs can use it too.
func Main(m *testing.M, mounted func() ([]string, error)) {
	code := m.Run()
	left, err := mounted()
	if err != nil {
		fmt.Fprintln(os.Stderr, "look for mounts left behind:", err)
		code = 1
	}
	if len(left) > 0 {
		fmt.Fprintf(os.Stderr, "tests left mounts behind: %v\n", left)
		code = 1
	}
	os.Exit(code)
}
