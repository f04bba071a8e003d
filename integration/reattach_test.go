package integration

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startSandbox runs a bwrap sandbox with its own mount namespace and an
// empty /home/gem/skills, and returns the pid of the process inside.
func startSandbox(t *testing.T) int {
	t.Helper()
	pid, _, _ := startSandboxWith(t, nil, "/bin/sleep", "600")
	return pid
}

// startSandboxRunning runs command in such a sandbox and returns the pid of
// the process inside, the bwrap command and the command's standard output.
// The sandbox is killed when the test ends.
func startSandboxRunning(t *testing.T, command ...string) (int, *exec.Cmd, io.Reader) {
	t.Helper()
	return startSandboxWith(t, nil, command...)
}

// startSandboxWith is startSandboxRunning with more bwrap options (after
// the sandbox's own, so they may bind over /home/gem/skills).
func startSandboxWith(t *testing.T, opts []string, command ...string) (int, *exec.Cmd, io.Reader) {
	t.Helper()
	args := []string{"--unshare-all", "--die-with-parent",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
		"--tmpfs", "/home", "--dir", "/home/gem/skills"}
	pid, cmd, out := startBwrap(t, append(append(append(args, opts...), "--"), command...)...)
	// bwrap reports the pid before the sandbox's mounts are all in place.
	inside := "/proc/" + strconv.Itoa(pid) + "/root/home/gem/skills"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if fi, err := os.Stat(inside); err == nil && fi.IsDir() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %d: no /home/gem/skills after 10s", pid)
		}
	}
	return pid, cmd, out
}

// startBwrap starts bwrap with args (its options, "--" and the command)
// and returns the pid of the sandbox's first process as bwrap reports it,
// the bwrap command and the command's standard output. bwrap is killed
// when the test ends.
func startBwrap(t *testing.T, args ...string) (int, *exec.Cmd, io.Reader) {
	t.Helper()
	bwrap := requireCommand(t, "bwrap")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bwrap, append([]string{"--info-fd", "3"}, args...)...)
	cmd.ExtraFiles = []*os.File{w}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start bwrap: %v", err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(r).Decode(&info); err != nil || info.ChildPID == 0 {
		t.Fatalf("read sandbox info: %v", err)
	}
	r.Close()
	return info.ChildPID, cmd, out
}

// TestSandboxBindSurvivesDaemonCrash: a session bound inside a running
// sandbox's mount namespace comes back after the daemon is killed and
// restarted, without restarting the sandbox.
func TestSandboxBindSurvivesDaemonCrash(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "release-notes")
	pid := startSandbox(t)
	inside := "/proc/" + strconv.Itoa(pid) + "/root/home/gem/skills"

	e.ok("session", "mount", s.ID, "/home/gem/skills", "--pid", strconv.Itoa(pid))
	if _, err := os.ReadFile(filepath.Join(inside, "release-notes", "SKILL.md")); err != nil {
		t.Fatalf("read inside the sandbox: %v", err)
	}
	if err := os.WriteFile(filepath.Join(inside, "release-notes", "x"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write inside the sandbox: %v, want EROFS", err)
	}
	// Not visible in the daemon's own namespace.
	if m := mountedUnder(t, "/home/gem/skills"); len(m) != 0 {
		t.Fatalf("the sandbox bind leaked into the host: %v", m)
	}

	d.kill()
	if _, err := os.ReadDir(inside); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after the crash the sandbox sees %v, want ENOTCONN", err)
	}
	d = e.serve()
	names, err := os.ReadDir(inside)
	if err != nil || len(names) != 2 {
		t.Fatalf("after restart the sandbox reads %v, %v; want its two skills", names, err)
	}
	if _, err := os.ReadFile(filepath.Join(inside, "commit-messages", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	var a struct {
		Activated []struct {
			Slug string `json:"slug"`
		} `json:"activated"`
	}
	e.okJSON(&a, "session", "activations", s.ID)
	if len(a.Activated) != 2 {
		t.Fatalf("activations across the crash: %+v", a.Activated)
	}

	e.ok("session", "unmount", s.ID, "/home/gem/skills", "--pid", strconv.Itoa(pid))
	if names, _ := os.ReadDir(inside); len(names) != 0 {
		t.Fatalf("after unmount the sandbox still sees %v", names)
	}
	e.ok("session", "mount", s.ID, "/home/gem/skills", "--pid", strconv.Itoa(pid))
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM exit %d", code)
	}
	// A clean stop released the sandbox's bind too.
	if names, err := os.ReadDir(inside); err != nil || len(names) != 0 {
		t.Fatalf("after SIGTERM the sandbox sees %v, %v; want its empty directory", names, err)
	}
	if m := mountedUnder(t, e.home); len(m) != 0 {
		t.Fatalf("mounts left: %v", m)
	}
}

// TestBindOfEndedSandboxIsForgotten: a restart drops the binds of sandboxes
// that are gone instead of failing on them.
func TestBindOfEndedSandboxIsForgotten(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "commit-messages")
	pid := startSandbox(t)
	e.ok("session", "mount", s.ID, "/home/gem/skills", "--pid", strconv.Itoa(pid))
	d.kill()
	syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sandbox did not end")
		}
		time.Sleep(20 * time.Millisecond)
	}
	d = e.serve()
	out := e.ok("session", "show", s.ID, "--json")
	if strings.Contains(out, "/home/gem/skills") {
		t.Fatalf("the ended sandbox's bind is still recorded:\n%s", out)
	}
	if !strings.Contains(d.logs(), "sandbox gone") {
		t.Fatalf("no log line about the forgotten bind:\n%s", d.logs())
	}
}
