package integration

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mountsOf lists the mount points in the mount namespace of process pid.
func mountsOf(t testing.TB, pid int) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out = append(out, f[4])
		}
	}
	return out
}

// startNamespace runs script as root in a new private mount namespace
// (unshare -m) until the test ends; the script prints "ready" when set up.
// It returns the pid of the process in that namespace.
func startNamespace(t *testing.T, script string) int {
	t.Helper()
	unshare := requireCommand(t, "unshare")
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "/bin/sh", "-c", script+"\necho ready\nexec sleep 600")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start unshare: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("the namespace was not set up: %q, %v\n%s", line, err, errb.String())
	}
	return cmd.Process.Pid
}

// TestBindTargetCannotReachDataDirectory: a bind target is checked where it
// resolves, in the namespace the bind is made in, by identity: symlinks into
// the data directory, another bind of it, the daemon's own namespace through
// --pid and the daemon's mount are all refused, and nothing is mounted.
func TestBindTargetCannotReachDataDirectory(t *testing.T) {
	e := newEnv(t)
	// The mount root outside the data directory, so that being inside the
	// mount is told apart from being inside the data directory.
	d := e.serve("--mount-root", filepath.Join(t.TempDir(), "mnt"))
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "commit-messages")
	daemonPID := strconv.Itoa(d.cmd.Process.Pid)

	tmp := t.TempDir()
	link := filepath.Join(tmp, "link-to-home")
	if err := os.Symlink(e.home, link); err != nil {
		t.Fatal(err)
	}
	// A sandbox whose own view reaches the data directory under other
	// names: a symlink that exists only there, a bind of the data
	// directory, a bind of the session's subtree, and a directory of the
	// data directory bound onto its own subdirectory (whose ".." is then
	// itself, as at the root).
	box := filepath.Join(tmp, "box")
	if err := os.Mkdir(box, 0o755); err != nil {
		t.Fatal(err)
	}
	pid := startNamespace(t, strings.Join([]string{
		"set -e",
		"mount -t tmpfs none " + box,
		"ln -s " + e.home + " " + box + "/link",
		"mkdir " + box + "/h " + box + "/sess " + box + "/ok",
		"mount --bind " + e.home + " " + box + "/h",
		"mount --bind " + s.Path + " " + box + "/sess",
		"mount --bind " + box + "/h/store " + box + "/h/store/skills",
	}, "\n"))
	sandboxPID := strconv.Itoa(pid)
	// Only the mounts where this test could have added some: others
	// running tests on the machine mount elsewhere meanwhile.
	hostMounts := func() []string { return append(mountedUnder(t, tmp), mountedUnder(t, e.home)...) }
	hostBefore := hostMounts()
	boxBefore := mountsOf(t, pid)

	cases := []struct {
		name string
		args []string
		says string
	}{
		{"symlink into the data directory", []string{link + "/store"}, "inside the data directory"},
		{"symlink, target to be created", []string{link + "/new/dir"}, "inside the data directory"},
		{"daemon's own pid, inside the data directory", []string{e.home + "/store", "--pid", daemonPID}, "inside the data directory"},
		{"daemon's own pid, through the symlink", []string{link + "/store", "--pid", daemonPID}, "inside the data directory"},
		{"inside the daemon's mount", []string{s.Path + "/commit-messages"}, "inside the daemon's own mount"},
		{"sandbox: symlink only it has", []string{box + "/link/store", "--pid", sandboxPID}, "inside the data directory"},
		{"sandbox: bind of the data directory", []string{box + "/h/store", "--pid", sandboxPID}, "inside the data directory"},
		{"sandbox: the bind itself", []string{box + "/h", "--pid", sandboxPID}, "inside the data directory"},
		{"sandbox: below a bind loop", []string{box + "/h/store/skills/skills", "--pid", sandboxPID}, "inside the data directory"},
		{"sandbox: bind of the session", []string{box + "/sess/commit-messages", "--pid", sandboxPID}, "inside the daemon's own mount"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run(append([]string{"session", "mount", s.ID}, tc.args...)...)
			if r.code != 5 || !strings.Contains(r.stderr, tc.says) || !strings.Contains(r.stderr, tc.args[0]) {
				t.Fatalf("exit %d, stderr %q; want 5 naming the target and saying %q", r.code, r.stderr, tc.says)
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(e.home, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused target was created in the data directory: %v", err)
	}
	if got := hostMounts(); !slices.Equal(got, hostBefore) {
		t.Errorf("mounts in the daemon's namespace changed:\nbefore %v\nafter  %v", hostBefore, got)
	}
	if got := mountsOf(t, pid); !slices.Equal(got, boxBefore) {
		t.Errorf("mounts in the sandbox changed:\nbefore %v\nafter  %v", boxBefore, got)
	}
	var shown sessionInfo
	e.okJSON(&shown, "session", "show", s.ID)
	if len(shown.Binds) != 0 {
		t.Errorf("refused binds were recorded: %v", shown.targets())
	}

	// The same checks let an ordinary target through, recorded resolved.
	e.ok("session", "mount", s.ID, box+"/ok", "--pid", sandboxPID)
	inside := "/proc/" + sandboxPID + "/root" + box + "/ok/commit-messages/SKILL.md"
	if _, err := os.ReadFile(inside); err != nil {
		t.Errorf("read through the sandbox's bind: %v", err)
	}
	outside := filepath.Join(t.TempDir(), "real")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	via := filepath.Join(tmp, "link-to-outside")
	if err := os.Symlink(outside, via); err != nil {
		t.Fatal(err)
	}
	e.ok("session", "mount", s.ID, via+"/skills")
	e.okJSON(&shown, "session", "show", s.ID)
	if want := []string{outside + "/skills", box + "/ok"}; !slices.Equal(shown.targets(), want) { // pid 0 first
		t.Errorf("recorded targets %v, want %v (resolved)", shown.targets(), want)
	}
	// Unmount takes the path as given or as recorded.
	e.ok("session", "unmount", s.ID, via+"/skills")
	e.ok("session", "unmount", s.ID, box+"/ok", "--pid", sandboxPID)
	if got := mountsOf(t, pid); !slices.Equal(got, boxBefore) {
		t.Errorf("mounts left in the sandbox after unmount: %v", got)
	}
}

// TestRebindLeavesLiveMountAlone: after a crash, a target where someone
// else mounted a live filesystem over the dead bind is not rebound, and
// neither the restart nor the next shutdown unmounts that filesystem.
func TestRebindLeavesLiveMountAlone(t *testing.T) {
	e := newEnv(t)
	detachMountsAtCleanup(t, filepath.Dir(e.home))
	d := e.serve()
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "commit-messages")
	dir := t.TempDir()
	detachMountsAtCleanup(t, dir)
	target := filepath.Join(dir, "skills")
	e.ok("session", "mount", s.ID, target)
	d.kill()

	if err := unix.Mount("none", target, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(target, "theirs")
	if err := os.WriteFile(marker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	d = e.serve()
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the restart replaced the live mount at the target: %v", err)
	}
	waitLog(t, d, "session not rebound")
	var shown sessionInfo
	e.okJSON(&shown, "session", "show", s.ID)
	if !slices.Equal(shown.targets(), []string{target}) {
		t.Errorf("recorded binds %v, want the target kept for a later start", shown.targets())
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d\n%s", code, d.logs())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the shutdown unmounted the live mount at the target: %v", err)
	}
}
