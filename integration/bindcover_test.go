package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestBindTargetCannotCoverDataDirectory: a bind target that holds the data
// directory or the mount root (one of their parents, however reached) is
// refused in the namespace the bind is made in, since a bind there would
// hide the store, the socket and the sessions; nothing is mounted or
// recorded. In a sandbox whose namespace does not show the data directory
// at its path, the same directory is an ordinary target.
func TestBindTargetCannotCoverDataDirectory(t *testing.T) {
	e := newEnv(t)
	mntParent := filepath.Join(t.TempDir(), "mnt-parent")
	d := e.serve("--mount-root", filepath.Join(mntParent, "mnt"))
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "commit-messages")
	daemonPID := strconv.Itoa(d.cmd.Process.Pid)
	homeParent := filepath.Dir(e.home)

	tmp := t.TempDir()
	link := filepath.Join(tmp, "link-to-parent")
	if err := os.Symlink(homeParent, link); err != nil {
		t.Fatal(err)
	}
	// A sandbox that sees the host's tree, and one where a tmpfs hides the
	// data directory's parent.
	seeing := startNamespace(t, "true")
	hiding := startNamespace(t, "mount -t tmpfs none "+homeParent)
	hostMounts := func() []string {
		return append(append(mountedUnder(t, homeParent), mountedUnder(t, mntParent)...), mountedUnder(t, tmp)...)
	}
	hostBefore := hostMounts()
	seeingBefore := mountsOf(t, seeing)

	const home, mnt = "contains the data directory", "contains the daemon's mount root"
	cases := []struct {
		name string
		args []string
		says string
	}{
		{"parent of the data directory", []string{homeParent}, home},
		{"grandparent of the data directory", []string{filepath.Dir(homeParent)}, home},
		{"parent of the data directory through a symlink", []string{link}, home},
		{"parent of the data directory through dot-dot", []string{e.home + "/../"}, home},
		{"parent of the mount root", []string{mntParent}, mnt},
		{"daemon's own pid, parent of the data directory", []string{homeParent, "--pid", daemonPID}, home},
		{"sandbox: parent of the data directory", []string{homeParent, "--pid", strconv.Itoa(seeing)}, home},
		{"sandbox: parent of the mount root", []string{mntParent, "--pid", strconv.Itoa(seeing)}, mnt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run(append([]string{"session", "mount", s.ID}, tc.args...)...)
			if r.code != 5 || !strings.Contains(r.stderr, tc.says) || !strings.Contains(r.stderr, filepath.Clean(tc.args[0])) {
				t.Fatalf("exit %d, stderr %q; want 5 naming the target and saying %q", r.code, r.stderr, tc.says)
			}
		})
	}
	if got := hostMounts(); !slices.Equal(got, hostBefore) {
		t.Errorf("mounts in the daemon's namespace changed:\nbefore %v\nafter  %v", hostBefore, got)
	}
	if got := mountsOf(t, seeing); !slices.Equal(got, seeingBefore) {
		t.Errorf("mounts in the sandbox changed:\nbefore %v\nafter  %v", seeingBefore, got)
	}
	var shown sessionInfo
	e.okJSON(&shown, "session", "show", s.ID)
	if len(shown.Binds) != 0 {
		t.Errorf("refused binds were recorded: %v", shown.targets())
	}
	// The daemon still serves: the store, the socket and the mount are
	// where they were.
	if _, err := os.ReadFile(filepath.Join(s.Path, "commit-messages", "SKILL.md")); err != nil {
		t.Errorf("read through the daemon's mount: %v", err)
	}

	// Where the data directory's parent is another directory, it is an
	// ordinary target.
	hidingPID := strconv.Itoa(hiding)
	e.ok("session", "mount", s.ID, homeParent, "--pid", hidingPID)
	inside := "/proc/" + hidingPID + "/root" + homeParent + "/commit-messages/SKILL.md"
	if _, err := os.ReadFile(inside); err != nil {
		t.Errorf("read through the sandbox's bind: %v", err)
	}
	e.ok("session", "unmount", s.ID, homeParent, "--pid", hidingPID)
}
