package integration

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// agentUID is the unprivileged user sandboxed agents run as.
const agentUID = "1000"

// sandbox runs a shell script the way an agent platform runs an agent: in a
// bubblewrap sandbox whose root is the host's, read-only, with a session's
// subtree bound read-only at /home/gem/skills, as an unprivileged user
// without capabilities (bwrap runs as root and setpriv drops to agentUID,
// so the FUSE daemon sees a real non-root caller).
type sandbox struct {
	t       testing.TB
	session string // the session's subtree in the daemon's mount
	hideTmp bool   // cover the host's /tmp, which holds the test's data directory
}

// command builds the bwrap command line running script.
func (sb sandbox) command(script string) *exec.Cmd {
	args := []string{
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
	}
	if sb.hideTmp {
		args = append(args, "--tmpfs", "/tmp")
	}
	args = append(args,
		"--tmpfs", "/home",
		"--perms", "0755", "--dir", "/home/gem",
		"--ro-bind", sb.session, "/home/gem/skills",
		"--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
		"--die-with-parent",
		"--chdir", "/",
		"--",
		"setpriv", "--reuid", agentUID, "--regid", agentUID, "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all",
		"--", "/bin/sh", "-c", script,
	)
	return exec.Command("bwrap", args...)
}

// run runs script in the sandbox and waits for it.
func (sb sandbox) run(script string) result {
	sb.t.Helper()
	r := resultOf(sb.t, sb.command(script))
	if strings.HasPrefix(r.stderr, "bwrap:") {
		sb.t.Fatalf("bwrap could not set up the sandbox: %s", r.stderr)
	}
	return r
}

// resultOf runs cmd with its output captured; a command that cannot be
// run at all fails the test.
func resultOf(t testing.TB, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s: %v", cmd.Path, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// TestSandbox: an unprivileged process in a bubblewrap sandbox reads its
// session's skills at /home/gem/skills, runs their scripts, activates them
// by reading SKILL.md, cannot write, and cannot reach any other session.
func TestSandbox(t *testing.T) {
	requireCommand(t, "bwrap")
	requireCommand(t, "setpriv")
	e := newEnv(t)
	// Make the directories above the data directory traversable, as
	// /var/lib is: only the modes skillfs chooses may then stand between
	// the sandbox's user and the daemon's mount.
	for dir := filepath.Dir(e.home); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := e.serve()
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	s := e.newSession("alice", "--skills", "release-notes")
	other := e.newSession("bob", "--skills", "skill-authoring")
	sb := sandbox{t: t, session: s.Path, hideTmp: true}

	t.Run("runs as an unprivileged user", func(t *testing.T) {
		r := sb.run("id -u; id -g; grep CapEff /proc/self/status")
		if r.code != 0 || !strings.HasPrefix(r.stdout, agentUID+"\n"+agentUID+"\n") || !strings.Contains(r.stdout, "0000000000000000") {
			t.Fatalf("sandbox identity: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("lists the skills", func(t *testing.T) {
		r := sb.run("ls /home/gem/skills")
		if r.code != 0 || r.stdout != "commit-messages\nrelease-notes\n" {
			t.Fatalf("ls /home/gem/skills: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		r = sb.run("ls /home/gem/skills/commit-messages/scripts")
		if r.code != 0 || r.stdout != "check-commit-msg.sh\n" {
			t.Fatalf("ls a skill's scripts: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if a := e.activationsOf(s.ID); len(a.Activated) != 0 {
			t.Fatalf("listing activated %v", a.slugs())
		}
	})

	t.Run("reads SKILL.md and activates", func(t *testing.T) {
		want, err := os.ReadFile(filepath.Join(d.mount, s.ID, "release-notes", "assets", "template.md"))
		if err != nil {
			t.Fatal(err)
		}
		r := sb.run("cat /home/gem/skills/release-notes/assets/template.md")
		if r.code != 0 || r.stdout != string(want) {
			t.Fatalf("cat an asset: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if a := e.activationsOf(s.ID); len(a.Activated) != 0 {
			t.Fatalf("reading an asset activated %v", a.slugs())
		}
		r = sb.run("cat /home/gem/skills/release-notes/SKILL.md")
		if r.code != 0 || !strings.Contains(r.stdout, "description:") {
			t.Fatalf("cat SKILL.md: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		a := e.activationsOf(s.ID)
		if len(a.Activated) != 1 || a.opens("release-notes") != 1 {
			t.Fatalf("activations after the sandbox read SKILL.md = %+v, want release-notes once", a.Activated)
		}
	})

	t.Run("runs a script by its execute bit", func(t *testing.T) {
		r := sb.run(`/home/gem/skills/commit-messages/scripts/check-commit-msg.sh "feat: x"`)
		if r.code != 0 || r.stdout != "ok\n" {
			t.Fatalf("check-commit-msg.sh: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		r = sb.run(`/home/gem/skills/commit-messages/scripts/check-commit-msg.sh "not conventional."`)
		if r.code != 1 {
			t.Fatalf("check-commit-msg.sh on a bad message: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	})

	writes := []struct{ name, script string }{
		{"overwrite SKILL.md", "echo x > /home/gem/skills/release-notes/SKILL.md"},
		{"append to a script", "echo x >> /home/gem/skills/commit-messages/scripts/check-commit-msg.sh"},
		{"create a file", "echo x > /home/gem/skills/release-notes/new.md"},
		{"create a skill", "mkdir /home/gem/skills/mine"},
		{"remove SKILL.md", "rm -f /home/gem/skills/release-notes/SKILL.md"},
		{"rename a skill", "mv /home/gem/skills/release-notes /home/gem/skills/renamed"},
		{"chmod a script", "chmod 777 /home/gem/skills/commit-messages/scripts/check-commit-msg.sh"},
		{"touch", "touch /home/gem/skills/release-notes/SKILL.md"},
	}
	for _, w := range writes {
		t.Run("cannot write/"+w.name, func(t *testing.T) {
			r := sb.run(w.script)
			if r.code == 0 {
				t.Fatalf("%q succeeded in the sandbox", w.script)
			}
			if !strings.Contains(r.stderr, "Read-only file system") {
				t.Errorf("%q failed with %q, want a read-only file system error", w.script, r.stderr)
			}
		})
	}
	if r := sb.run("ls /home/gem/skills; cat /home/gem/skills/release-notes/SKILL.md"); r.code != 0 ||
		!strings.HasPrefix(r.stdout, "commit-messages\nrelease-notes\n---") {
		t.Fatalf("the session changed after the write attempts: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	t.Run("cannot reach other sessions", func(t *testing.T) {
		r := sb.run("ls -A /home/gem/skills/..")
		if r.code != 0 || r.stdout != "skills\n" {
			t.Errorf("ls /home/gem/skills/..: exit %d, stdout %q, stderr %q; want only skills", r.code, r.stdout, r.stderr)
		}
		for _, p := range []string{
			"/home/gem/skills/../" + other.ID,
			"/home/gem/skills/../../" + other.ID + "/skill-authoring/SKILL.md",
			"/home/gem/skills/release-notes/../../" + other.ID + "/skill-authoring/SKILL.md",
			"/home/gem/skills/skill-authoring/SKILL.md",
			d.mount,
			filepath.Join(d.mount, other.ID, "skill-authoring", "SKILL.md"),
		} {
			if r := sb.run("cat '" + p + "' || ls '" + p + "'"); r.code == 0 {
				t.Errorf("%s is reachable in the sandbox: %q", p, r.stdout)
			}
		}
		if r := sb.run("cat /proc/self/mountinfo"); strings.Contains(r.stdout, other.ID) {
			t.Errorf("the sandbox's mount table names another session:\n%s", r.stdout)
		}
	})

	// With the host's /tmp visible, the daemon's mount is on a path the
	// sandbox can name; it must still not be able to read through it, even
	// knowing another session's id.
	t.Run("the daemon's mount is closed to the sandbox user", func(t *testing.T) {
		open := sandbox{t: t, session: s.Path}
		if r := open.run("ls '" + d.mount + "'"); r.code == 0 {
			t.Errorf("the sandbox user lists the mount root: %q", r.stdout)
		}
		p := filepath.Join(d.mount, other.ID, "skill-authoring", "SKILL.md")
		if r := open.run("cat '" + p + "'"); r.code == 0 {
			t.Errorf("the sandbox user reads another session by its id at %s", p)
		}
		if a := e.activationsOf(other.ID); len(a.Activated) != 0 {
			t.Errorf("the other session got activations from the sandbox: %v", a.slugs())
		}
	})
}

// TestShutdownWithSandboxRunning: SIGTERM stops the daemon promptly even
// while a sandbox that bound a session's subtree is still running; the
// sandbox cannot hold the daemon hostage.
func TestShutdownWithSandboxRunning(t *testing.T) {
	requireCommand(t, "bwrap")
	requireCommand(t, "setpriv")
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "commit-messages")
	sb := sandbox{t: t, session: s.Path, hideTmp: true}
	cmd := sb.command("cat /home/gem/skills/commit-messages/SKILL.md >/dev/null && echo started && exec sleep 60")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the sandbox: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stopSandbox := func() {
		cmd.Process.Kill()
		<-exited
	}
	t.Cleanup(stopSandbox)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "started\n" {
		t.Fatalf("the sandbox did not start: %q, %v", line, err)
	}

	const grace = 5 * time.Second
	start := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		t.Logf("the daemon exited %v after SIGTERM with a sandbox running", time.Since(start).Round(time.Millisecond))
	case <-time.After(grace):
		t.Errorf("the daemon did not exit within %v of SIGTERM while a sandbox held a bind of its session", grace)
		stopSandbox()
		select {
		case <-d.done:
			t.Logf("it exited %v after SIGTERM, once the sandbox was gone", time.Since(start).Round(time.Millisecond))
		case <-time.After(20 * time.Second):
			d.kill()
			t.Fatalf("the daemon did not exit even after the sandbox ended\n%s", d.logs())
		}
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0\n%s", code, d.logs())
	}
	if m := mountedUnder(t, e.home); len(m) != 0 {
		t.Errorf("mounts left under the home: %v", m)
	}
}
