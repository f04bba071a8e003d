package integration

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A container runtime's volume with slave propagation (docker
// `-v DIR:/skillfs:ro,rslave`, Kubernetes `mountPropagation: HostToContainer`)
// follows the daemon across a crash and restart, when the volume is a
// directory of the host's and the session is bound inside it (DIR/skills):
// the dead bind's removal and the new bind propagate into the container.
// This is the recipe cmd/skillfs/SESSIONS.md gives for containers that mount a volume
// instead of being bound with --pid.
func TestContainerVolumeFollowsRestart(t *testing.T) {
	unshare := requireCommand(t, "unshare")
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "release-notes")

	// The host side: a shared mount holding one directory per container,
	// as a systemd host's / is (made explicit here, whatever this host's is).
	host := filepath.Join(t.TempDir(), "containers")
	vol := filepath.Join(host, "c1")
	if err := os.MkdirAll(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(host, host, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(host, syscall.MNT_DETACH) })
	if err := syscall.Mount("", host, "", syscall.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}

	// The container: its own mount namespace whose mounts are slaves of the
	// host's, with the volume bound read-only at /skillfs (here ctr, a
	// directory of the test) before the session is bound.
	ctr := filepath.Join(t.TempDir(), "ctr")
	if err := os.MkdirAll(ctr, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, "--mount", "--propagation", "slave", "--", "sh", "-c",
		`mount --rbind "$1" "$2" && mount -o remount,bind,ro "$2" && mount --make-rslave "$2" && echo up && exec sleep 600`,
		"sh", vol, ctr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("container did not start: %q %v", line, err)
	}
	inside := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/root" + ctr + "/skills"

	// The bind made on the host after the container started shows inside.
	if err := os.Mkdir(filepath.Join(vol, "skills"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.ok("session", "mount", s.ID, filepath.Join(vol, "skills"))
	waitSkills := func(when string) {
		t.Helper()
		var names []string
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var ents []os.DirEntry
			ents, err = os.ReadDir(inside)
			names = names[:0]
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if err == nil && len(names) == 2 {
				break
			}
		}
		if err != nil || strings.Join(names, ",") != "commit-messages,release-notes" {
			t.Fatalf("%s the container sees %v, %v; want the session's two skills\n%s", when, names, err, d.logs())
		}
		if _, err := os.ReadFile(filepath.Join(inside, "release-notes", "SKILL.md")); err != nil {
			t.Fatalf("%s read in the container: %v", when, err)
		}
	}
	waitSkills("after the bind")

	d.kill()
	// (A name not looked up yet: the kernel may answer a listing it holds.)
	if _, err := os.Stat(filepath.Join(inside, "skill-authoring")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after the crash the container sees %v, want ENOTCONN", err)
	}
	d = e.serve()
	waitSkills("after the restart")

	// A clean stop removes the bind from the container's view too, and the
	// next start brings it back.
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM exit %d", code)
	}
	if names, err := os.ReadDir(inside); err != nil || len(names) != 0 {
		t.Fatalf("after SIGTERM the container sees %v, %v; want the empty directory", names, err)
	}
	d = e.serve()
	waitSkills("after a clean restart")
}

// The bwrap recipe of cmd/skillfs/SESSIONS.md, run as written (the data
// directory it names replaced by the test's): the sandbox lists the
// session's skills.
func TestBwrapRecipe(t *testing.T) {
	requireCommand(t, "bwrap")
	readme, err := os.ReadFile(filepath.Join("..", "cmd", "skillfs", "SESSIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	var recipe []string
	for _, line := range strings.Split(string(readme), "\n") {
		if len(recipe) == 0 && !strings.HasPrefix(line, "bwrap ") {
			continue
		}
		recipe = append(recipe, strings.TrimSuffix(line, "\\"))
		if !strings.HasSuffix(line, "\\") {
			break
		}
	}
	if len(recipe) == 0 {
		t.Fatal("no bwrap recipe in SESSIONS.md")
	}
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "release-notes")
	script := strings.ReplaceAll(strings.Join(recipe, " "), "/var/lib/skillfs", e.home)
	if !strings.Contains(script, e.home) {
		t.Fatalf("SESSIONS.md's recipe does not bind the session from the data directory: %s", script)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "id="+s.ID)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Join(strings.Fields(string(out)), ",") != "commit-messages,release-notes" {
		t.Fatalf("%s\n=> %v\n%s", script, err, out)
	}
}

// A sandbox that bound its session itself (bwrap --ro-bind of the session's
// subtree) keeps a dead mount after a daemon crash, which the restarted
// daemon knows nothing of; `session mount --pid` replaces it in place, and
// from then on the bind is recorded and comes back by itself.
func TestSelfBoundSandboxReattached(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "release-notes")
	pid, _, _ := startSandboxWith(t, []string{"--ro-bind", filepath.Join(d.mount, s.ID), "/home/gem/skills"}, "/bin/sleep", "600")
	inside := "/proc/" + strconv.Itoa(pid) + "/root/home/gem/skills"
	if _, err := os.ReadFile(filepath.Join(inside, "release-notes", "SKILL.md")); err != nil {
		t.Fatalf("read in the sandbox: %v", err)
	}

	d.kill()
	d = e.serve()
	if _, err := os.Stat(filepath.Join(inside, "commit-messages")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("a self-bound sandbox after a restart sees %v, want ENOTCONN (nobody re-attached it)", err)
	}
	e.ok("session", "mount", s.ID, "/home/gem/skills", "--pid", strconv.Itoa(pid))
	if _, err := os.ReadFile(filepath.Join(inside, "commit-messages", "SKILL.md")); err != nil {
		t.Fatalf("after session mount --pid: %v", err)
	}

	d.kill()
	d = e.serve()
	if _, err := os.ReadFile(filepath.Join(inside, "skill-authoring", "SKILL.md")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after a second crash: %v, want the re-attached view (skill-authoring not in it)", err)
	}
	if names, err := os.ReadDir(inside); err != nil || len(names) != 2 {
		t.Fatalf("after a second crash the sandbox reads %v, %v; want its two skills", names, err)
	}
}
