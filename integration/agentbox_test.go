package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// agentBox is a sandbox as an agent platform runs one, for the end-to-end
// suite: bubblewrap with its own mount, pid, network, IPC and UTS
// namespaces, /usr (with /bin and /lib as its links) and /etc read-only, a
// tmpfs /home with the agent's home /home/gem owned by the agent's
// uid, a workspace folder of the test's bound read-write at
// /home/gem/workspace, an empty /home/gem/skills for a session's view, and
// a sleeping init process running as the unprivileged agentUID without
// capabilities. Commands run inside with nsenter into the init's
// namespaces and root, dropped to the same uid (run); the daemon binds a
// session into the init's mount namespace (`session mount ID TARGET --pid
// box.pid`), and reads what an install names there as the init does.
type agentBox struct {
	t testing.TB
	// pid is the init: the process running as the agent, whose mount
	// namespace binds go into.
	pid int
	// workspace is the host's path of /home/gem/workspace.
	workspace string
	nsenter   string
	bwrap     *exec.Cmd
}

// The agent's paths inside every agentBox.
const (
	boxHome      = "/home/gem"
	boxSkills    = boxHome + "/skills"
	boxWorkspace = boxHome + "/workspace"
	// boxClient is where the Python client is, read-only.
	boxClient = "/opt/skillfs/skillfs_client.py"
)

// clientScript is the Python client in the source tree.
const clientScript = "../scripts/skillfs_client.py"

// startAgentBox starts an agentBox; opts are more bwrap options, after the
// box's own (--ro-bind SRC DEST to put more in). It is killed, with every
// process inside, when the test ends. Under CI=true a missing bwrap,
// nsenter or setpriv fails the test.
func startAgentBox(t *testing.T, opts ...string) *agentBox {
	t.Helper()
	requireCommand(t, "bwrap")
	nsenter := requireCommand(t, "nsenter")
	requireCommand(t, "setpriv")
	client, err := filepath.Abs(clientScript)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(agentUID)
	if err := os.Chown(ws, uid, uid); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--ro-bind", "/etc", "/etc",
		"--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
		"--tmpfs", "/home", "--dir", boxSkills, "--bind", ws, boxWorkspace,
		"--perms", "0755", "--dir", filepath.Dir(boxClient), "--ro-bind", client, boxClient,
		"--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--chdir", boxHome,
	}
	args = append(append(append(args, opts...), "--"), dropToAgent...)
	reaper, cmd, _ := startBwrap(t, append(args, "/bin/sleep", "infinity")...)
	b := &agentBox{t: t, workspace: ws, nsenter: nsenter, bwrap: cmd}
	// bwrap's first process is its reaper, pid 1 inside, running as root
	// (so the box dies with bwrap); the agent's init is the reaper's child
	// once it runs sleep as agentUID.
	b.pid = waitAgentInit(t, reaper)
	// The home is the agent's, as a platform's image has it.
	if err := os.Chown(b.host(boxHome), uid, uid); err != nil {
		t.Fatal(err)
	}
	return b
}

// dropToAgent runs a command as agentUID, its group alone, without
// capabilities and unable to gain any.
var dropToAgent = []string{"setpriv", "--reuid", agentUID, "--regid", agentUID, "--clear-groups",
	"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}

// waitAgentInit waits for the child of bwrap's reaper reaper to run sleep
// as agentUID, and returns its pid.
func waitAgentInit(t testing.TB, reaper int) int {
	t.Helper()
	children := "/proc/" + strconv.Itoa(reaper) + "/task/" + strconv.Itoa(reaper) + "/children"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		data, err := os.ReadFile(children)
		if err != nil {
			continue
		}
		f := strings.Fields(string(data))
		if len(f) != 1 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		comm, _ := os.ReadFile("/proc/" + f[0] + "/comm")
		if string(comm) == "sleep\n" && procUID(pid) == agentUID {
			return pid
		}
	}
	t.Fatalf("the sandbox's init did not start within 10s")
	return 0
}

// procUID is the real uid of process pid, "" when it cannot be read.
func procUID(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}

// host is the host's path of path inside the box: through the init's root.
func (b *agentBox) host(path string) string {
	return "/proc/" + strconv.Itoa(b.pid) + "/root" + path
}

// nsPID is the init's pid as the box sees it (in its pid namespace).
func (b *agentBox) nsPID() string {
	b.t.Helper()
	data, err := os.ReadFile("/proc/" + b.pidArg() + "/status")
	if err != nil {
		b.t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			if f := strings.Fields(rest); len(f) > 1 {
				return f[len(f)-1]
			}
		}
	}
	b.t.Fatalf("the box's init %d is in no pid namespace of its own", b.pid)
	return ""
}

// pidArg is the init's pid as a command-line argument.
func (b *agentBox) pidArg() string { return strconv.Itoa(b.pid) }

// command is sh -c script run as the agent inside the box: in the init's
// namespaces, root and working directory, with the agent's environment
// only.
func (b *agentBox) command(script string) *exec.Cmd {
	args := []string{"--target", b.pidArg(), "--mount", "--pid", "--net", "--ipc", "--uts", "--cgroup",
		"--root", "--wd", "--"}
	args = append(args, dropToAgent...)
	args = append(args, "/bin/sh", "-c", script)
	cmd := exec.Command(b.nsenter, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + boxHome, "LANG=C.UTF-8"}
	return cmd
}

// run runs script as the agent inside the box and waits for it.
func (b *agentBox) run(script string) result {
	b.t.Helper()
	r := resultOf(b.t, b.command(script))
	if strings.HasPrefix(r.stderr, "nsenter:") || strings.HasPrefix(r.stderr, "setpriv:") {
		b.t.Fatalf("could not enter the sandbox: %s", r.stderr)
	}
	return r
}

// ok runs script and fails the test unless it exits 0; it returns the
// standard output.
func (b *agentBox) ok(script string) string {
	b.t.Helper()
	r := b.run(script)
	if r.code != 0 {
		b.t.Fatalf("in the sandbox: %s: exit %d\nstdout: %s\nstderr: %s", script, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// writeWorkspace writes a file into the box's workspace, as the agent
// would: owned by agentUID, of mode perm.
func (b *agentBox) writeWorkspace(rel, content string, perm os.FileMode) string {
	b.t.Helper()
	p := filepath.Join(b.workspace, rel)
	uid, _ := strconv.Atoi(agentUID)
	for dir := filepath.Dir(p); dir != b.workspace; dir = filepath.Dir(dir) {
		defer os.Chown(dir, uid, uid)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		b.t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		b.t.Fatal(err)
	}
	if err := os.Chown(p, uid, uid); err != nil {
		b.t.Fatal(err)
	}
	return boxWorkspace + "/" + rel
}

// TestAgentBox: the box is what the suite says it is: the agent runs as
// agentUID without capabilities in its own namespaces, sees /usr but not
// the host's other folders, writes its home and workspace (the host sees
// the workspace's files) and nothing else, and every process in it ends
// with the test.
func TestAgentBox(t *testing.T) {
	b := startAgentBox(t)
	if got := procUID(b.pid); got != agentUID {
		t.Fatalf("the init runs as uid %q, want %s", got, agentUID)
	}
	out := b.ok("id -u; id -g; id -G; grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status; pwd")
	want := agentUID + "\n" + agentUID + "\n" + agentUID + "\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n" + boxHome + "\n"
	if out != want {
		t.Errorf("the agent's identity:\n%s\nwant\n%s", out, want)
	}
	if out := b.ok("ls /"); out != "bin\ndev\netc\nhome\nlib\nlib64\nopt\nproc\ntmp\nusr\n" {
		t.Errorf("the box's root holds %q", out)
	}
	// Its own pid namespace: the init and this command's shell, nothing of the host.
	if out := b.ok("ls -d /proc/[0-9]* | wc -l"); strings.TrimSpace(out) == "" {
		t.Errorf("no processes listed")
	} else if n, _ := strconv.Atoi(strings.TrimSpace(out)); n > 6 {
		t.Errorf("the box sees %d processes: not its own pid namespace", n)
	}
	if out := b.ok("cat /proc/" + b.nsPID() + "/comm"); out != "sleep\n" || b.nsPID() == b.pidArg() {
		t.Errorf("the init as the box sees it, pid %s: %q", b.nsPID(), out)
	}
	if r := b.run("cat /proc/net/dev | grep -v lo: | tail -n +3"); strings.TrimSpace(r.stdout) != "" {
		t.Errorf("the box has network devices besides lo: %q", r.stdout)
	}
	b.ok("echo note > " + boxWorkspace + "/note.txt && echo x > " + boxHome + "/.profile && echo y > /tmp/y")
	if data, err := os.ReadFile(filepath.Join(b.workspace, "note.txt")); err != nil || string(data) != "note\n" {
		t.Errorf("the workspace's file on the host: %q, %v", data, err)
	}
	for _, script := range []string{"touch /usr/x", "touch /etc/x", "touch " + boxSkills + "/x", "touch /x", "cat /etc/shadow"} {
		if r := b.run(script); r.code == 0 {
			t.Errorf("%s succeeded in the box", script)
		}
	}
	if out := b.ok("python3 " + boxClient + " --help"); !strings.Contains(out, "skillfs") {
		t.Errorf("the client's help in the box: %q", out)
	}
	// Every process inside goes with the box.
	sh := b.command("exec sleep 600")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	b.bwrap.Process.Kill()
	b.bwrap.Wait()
	done := make(chan error, 1)
	go func() { done <- sh.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		sh.Process.Kill()
		t.Fatal("a process entered into the box outlived it")
	}
	for deadline := time.Now().Add(10 * time.Second); procUID(b.pid) != ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the box's init %d outlived it", b.pid)
		}
	}
}
