package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// agentSandbox is an agentBox (startAgentBox) driven by argv and a uid:
// pid is its init, running as agentUID without capabilities, whose mount
// namespace binds go into; home is the host's path of the agent's home
// /home/gem (through the init's root).
type agentSandbox struct {
	t    *testing.T
	pid  int
	home string
}

func startAgentSandbox(t *testing.T) *agentSandbox {
	t.Helper()
	requireCommand(t, "curl")
	b := startAgentBox(t)
	return &agentSandbox{t: t, pid: b.pid, home: b.host(boxHome)}
}

// run runs argv inside the sandbox (all its namespaces) as uid, without
// capabilities.
func (sb *agentSandbox) run(uid string, argv ...string) result {
	sb.t.Helper()
	return resultOf(sb.t, sb.command(uid, argv...))
}

// command is argv to run inside the sandbox as uid (see run).
func (sb *agentSandbox) command(uid string, argv ...string) *exec.Cmd {
	args := append([]string{"-t", strconv.Itoa(sb.pid), "-m", "-p", "-n", "-i", "-u", "--",
		"setpriv", "--reuid", uid, "--regid", uid, "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"}, argv...)
	return exec.Command("nsenter", args...)
}

// curl asks the session's API socket for path, inside the sandbox as uid.
func (sb *agentSandbox) curl(uid, path string) result {
	sb.t.Helper()
	return sb.run(uid, "curl", "-sS", "--fail-with-body", "--unix-socket", "/home/gem/.skillfs.sock", "http://skillfs"+path)
}

// TestSandboxAPISocket: `session mount --api-socket` puts the session's API
// socket into a running sandbox beside its view. The agent's user reaches
// the session's prompt through it with curl, another user of the sandbox
// cannot connect, the host has nothing at that path, and the daemon logs
// each connection's peer. It works again after the daemon is killed and
// restarted, and goes with unmount, close and a clean stop.
func TestSandboxAPISocket(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "release-notes")
	sb := startAgentSandbox(t)
	pid := strconv.Itoa(sb.pid)
	const sock = "/home/gem/.skillfs.sock"
	hostSide := filepath.Join(sb.home, ".skillfs.sock")
	prompt := "/v1/sessions/" + s.ID + "/prompt"
	works := func(when string) {
		t.Helper()
		r := sb.curl(agentUID, prompt)
		if r.code != 0 || !strings.Contains(r.stdout, "release-notes") {
			t.Fatalf("%s: the prompt through the socket: exit %d\n%s%s", when, r.code, r.stdout, r.stderr)
		}
		if r := sb.run(agentUID, "cat", "/home/gem/skills/release-notes/SKILL.md"); r.code != 0 {
			t.Fatalf("%s: the view: exit %d %s", when, r.code, r.stderr)
		}
	}
	gone := func(when string) {
		t.Helper()
		if r := sb.run(agentUID, "test", "-e", sock); r.code == 0 {
			t.Fatalf("%s: the socket is still there in the sandbox", when)
		}
		if r := sb.curl(agentUID, prompt); r.code == 0 {
			t.Fatalf("%s: the socket still answers: %s", when, r.stdout)
		}
	}

	var m struct {
		APISocket string `json:"api_socket"`
	}
	e.okJSON(&m, "session", "mount", s.ID, "/home/gem/skills", "--pid", pid, "--api-socket", sock)
	if m.APISocket != sock {
		t.Fatalf("mounted with the api socket %q, want %q", m.APISocket, sock)
	}
	works("bound")
	if r := sb.run(agentUID, "stat", "-c", "%F %a %u", sock); r.code != 0 || r.stdout != "socket 600 "+agentUID+"\n" {
		t.Fatalf("the socket in the sandbox: %q %s", r.stdout, r.stderr)
	}
	// Another user of the sandbox sees the socket, may not write to it,
	// and so cannot connect (curl says only that it could not).
	if r := sb.run("1001", "sh", "-c", "test -S "+sock+" && ! test -w "+sock); r.code != 0 {
		t.Fatalf("another user of the sandbox may write to the socket: exit %d %s", r.code, r.stderr)
	}
	if r := sb.curl("1001", prompt); r.code != 7 {
		t.Fatalf("another user of the sandbox: exit %d, want 7 (could not connect)\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the host has a file at %s: %v", sock, err)
	}
	if !strings.Contains(d.logs(), "sandbox socket connection") || !strings.Contains(d.logs(), "peer_uid="+agentUID) {
		t.Fatalf("no log of the connection's peer:\n%s", d.logs())
	}
	var show struct {
		Binds []struct {
			Target    string `json:"target"`
			APISocket string `json:"api_socket"`
		} `json:"binds"`
	}
	e.okJSON(&show, "session", "show", s.ID)
	if len(show.Binds) != 1 || show.Binds[0].APISocket != sock {
		t.Fatalf("the session shows its binds as %+v", show.Binds)
	}
	// A second bind with a socket at the same path is refused whole (its
	// view not bound), and the first socket is left.
	if err := os.Mkdir(filepath.Join(sb.home, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := e.run("session", "mount", s.ID, "/home/gem/other", "--pid", pid, "--api-socket", sock)
	if r.code == 0 || !strings.Contains(r.stderr, sock) {
		t.Fatalf("a second socket at the same path: exit %d\n%s", r.code, r.stderr)
	}
	if r := sb.run(agentUID, "ls", "-A", "/home/gem/other"); r.code != 0 || r.stdout != "" {
		t.Fatalf("the refused bind's view: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	os.Remove(filepath.Join(sb.home, "other"))
	works("after a refused bind")

	// Killed: the socket file stays, nothing answers. Restarted: it works
	// again, the file left replaced.
	d.kill()
	if _, err := os.Lstat(hostSide); err != nil {
		t.Fatalf("the crash removed the socket file: %v", err)
	}
	if r := sb.curl(agentUID, prompt); r.code == 0 {
		t.Fatalf("the socket answers with the daemon killed: %s", r.stdout)
	}
	d = e.serve()
	works("restarted")

	e.ok("session", "unmount", s.ID, "/home/gem/skills", "--pid", pid)
	gone("unmounted")
	if names, _ := os.ReadDir(sb.home); len(names) != 2 || names[0].Name() != "skills" || names[1].Name() != "workspace" {
		t.Fatalf("the sandbox's home after unmount: %v, want its skills and workspace alone", names)
	}

	e.ok("session", "mount", s.ID, "/home/gem/skills", "--pid", pid, "--api-socket", sock)
	works("bound again")
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM exit %d", code)
	}
	gone("stopped")
	d = e.serve()
	works("started again")
	e.ok("session", "close", s.ID)
	gone("closed")
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM exit %d", code)
	}
	if m := mountedUnder(t, e.home); len(m) != 0 {
		t.Fatalf("mounts left: %v", m)
	}
}
