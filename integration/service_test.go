package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"skillfs/fs/fusetest"
)

// SIGHUP (a closed terminal, a log rotation) leaves the daemon serving: the
// mount still reads and the API still answers, and the log says the signal
// was ignored.
func TestSighupKeepsServing(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	var created struct{ ID, Path string }
	e.okJSON(&created, "session", "create", "--user", "operator", "--all")
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.logs(), "SIGHUP ignored") {
		if time.Now().After(deadline) {
			t.Fatalf("no word of the SIGHUP in the log:\n%s", d.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-d.done:
		t.Fatalf("serve exited on SIGHUP: %v\n%s", d.err, d.logs())
	default:
	}
	ents, err := os.ReadDir(created.Path)
	if err != nil || len(ents) == 0 {
		t.Fatalf("the session's mount after SIGHUP: %d entries, %v", len(ents), err)
	}
	if _, err := fetch(filepath.Join(created.Path, ents[0].Name(), "SKILL.md")); err != nil {
		t.Fatalf("read after SIGHUP: %v", err)
	}
	e.ok("session", "show", created.ID)
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d on SIGTERM after a SIGHUP", code)
	}
}

// A command that makes a new data directory says where, on stderr, once:
// a forgotten --home does not silently start an empty catalog.
func TestNewDataDirectoryIsAnnounced(t *testing.T) {
	e := newEnv(t)
	first := e.run("skill", "list")
	if first.code != 0 || !strings.Contains(first.stderr, "created a new data directory at "+e.home) {
		t.Fatalf("first command: exit %d, stderr %q; want the new data directory named", first.code, first.stderr)
	}
	again := e.run("skill", "list")
	if again.code != 0 || strings.Contains(again.stderr, "created") {
		t.Fatalf("second command: exit %d, stderr %q; want no announcement", again.code, again.stderr)
	}
	// serve says it in its log.
	fresh := newEnv(t)
	d := fresh.serve()
	if !strings.Contains(d.logs(), "created a new data directory") || !strings.Contains(d.logs(), fresh.home) {
		t.Fatalf("serve on a new data directory did not say so:\n%s", d.logs())
	}
}

// SIGINT during an import from a git server that never answers ends the
// command at once: git is killed with it, and nothing of the import is left
// in the data directory.
func TestInterruptedImportLeavesNothing(t *testing.T) {
	e := newEnv(t)
	e.ok("skill", "list") // make the data directory
	addr, connected := silentServer(t)
	cmd := e.command(context.Background(), "skill", "import", "git://"+addr+"/repo.git", "--all")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	// Wait until git is connected, then interrupt.
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatalf("git never connected\n%s", stderr.String())
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("import still running 15s after SIGINT\n%s", stderr.String())
	}
	if err == nil {
		t.Fatalf("interrupted import exited 0\n%s", stderr.String())
	}
	t.Logf("interrupted import ended %v after SIGINT: %v; stderr %q", time.Since(start).Round(time.Millisecond), err, stderr.String())
	// No git of ours is left: its process group was killed.
	out, _ := exec.Command("pgrep", "-f", addr).Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("processes still naming the server after the import ended: %s", s)
	}
	noLeftovers(t, e.home)
}

// noLeftovers fails the test if an import left anything in the data
// directory's work areas.
func noLeftovers(t *testing.T, home string) {
	t.Helper()
	for _, sub := range []string{"tmp", "store/.staging"} {
		ents, _ := os.ReadDir(filepath.Join(home, sub))
		if len(ents) != 0 {
			t.Errorf("%s holds %d entries after the import", sub, len(ents))
		}
	}
}

// silentServer listens on loopback, accepts and never says a word: a git
// server that hangs. connected is closed at the first connection.
func silentServer(t *testing.T) (addr string, connected <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if len(conns) == 0 {
				close(first)
			}
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), first
}

// --timeout bounds reading a git source: a server that never answers fails
// the import soon after, saying so, and leaves nothing behind.
func TestImportTimeout(t *testing.T) {
	e := newEnv(t)
	e.ok("skill", "list")
	addr, _ := silentServer(t)
	start := time.Now()
	r := e.run("skill", "import", "git://"+addr+"/repo.git", "--all", "--timeout", "1s")
	took := time.Since(start)
	if r.code == 0 || !strings.Contains(r.stderr, "1s") {
		t.Fatalf("import from a silent server with --timeout 1s: exit %d, %q; want a failure naming the timeout", r.code, r.stderr)
	}
	if took > 15*time.Second {
		t.Errorf("the import took %v with --timeout 1s", took)
	}
	t.Logf("gave up after %v: %s", took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
	noLeftovers(t, e.home)
}

// The daemon is ready while its mount, index and store work; when its
// mount is detached it is not left answering: it exits with the reason.
func TestReadyUntilTheMountIsLost(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	api := newAPIClient(e.home)
	var ready struct {
		Ready  bool `json:"ready"`
		Checks []struct {
			Name string `json:"name"`
			OK   bool   `json:"ok"`
		} `json:"checks"`
	}
	if code := api.do(t, "GET", "/v1/ready", "", nil, &ready); code != 200 || !ready.Ready || len(ready.Checks) != 3 {
		t.Fatalf("ready: %d %+v", code, ready)
	}
	if err := syscall.Unmount(d.mount, syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("daemon still running 15s after its mount was detached\n%s", d.logs())
	}
	if d.err == nil || !strings.Contains(d.logs(), "lost") {
		t.Fatalf("daemon ended with %v after losing its mount; want an error saying so\n%s", d.err, d.logs())
	}
}

// serve refuses to start without what it needs, before the data directory
// exists: as an ordinary user, and where /dev/fuse is not the FUSE device.
func TestServePreflight(t *testing.T) {
	fusetest.Require(t)
	unshare := requireCommand(t, "unshare")
	for _, tc := range []struct {
		name string
		cmd  func(home string) *exec.Cmd
		says string
	}{
		{"not root", func(home string) *exec.Cmd {
			// A copy of the binary the user may run; home's parent is
			// root's, so only a start that tries to make it could.
			c := exec.Command(worldBinary(t), "--home", home, "serve")
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			return c
		}, "serve must run as root (it runs as uid 65534)"},
		{"no FUSE device", func(home string) *exec.Cmd {
			// A mount namespace of its own where /dev/fuse is /dev/null.
			return exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c",
				`mount --bind /dev/null /dev/fuse && exec "$0" --home "$1" serve`, binary, home)
		}, "/dev/fuse is not it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			var stderr bytes.Buffer
			c := tc.cmd(home)
			c.Stderr = &stderr
			err := c.Run()
			if err == nil {
				t.Fatal("serve started")
			}
			t.Logf("%v: %s", err, stderr.String())
			if !strings.Contains(stderr.String(), tc.says) {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.says)
			}
			if _, err := os.Stat(home); !os.IsNotExist(err) {
				t.Errorf("the data directory was made: %v", err)
			}
		})
	}
}

// worldBinary returns a copy of the binary that any user may run.
func worldBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "skillfs-bin-") // its parents are open to all, unlike t.TempDir's
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "skillfs")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// --log-format json makes every log line one JSON object; a format other
// than text or json is a bad command line.
func TestJSONLogs(t *testing.T) {
	e := newEnv(t)
	d := e.serve("--log-format", "json")
	e.ok("session", "create", "--user", "operator", "--all")
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	lines := strings.Split(strings.TrimSpace(d.logs()), "\n")
	if len(lines) < 3 {
		t.Fatalf("only %d log lines:\n%s", len(lines), d.logs())
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["msg"] == nil || rec["level"] == nil {
			t.Fatalf("not a JSON log line: %q (%v)", l, err)
		}
	}
	if r := e.run("--log-format", "xml", "skill", "list"); r.code != 2 || !strings.Contains(r.stderr, "text or json") {
		t.Fatalf("--log-format xml: exit %d, %q; want 2 naming the formats", r.code, r.stderr)
	}
}

// skillfs status shows the daemon at a glance, in text and JSON, with the
// last error it logged; without a daemon it exits 7.
func TestStatus(t *testing.T) {
	e := newEnv(t)
	if r := e.run("status"); r.code != 7 {
		t.Fatalf("status without a daemon: exit %d, %q; want 7", r.code, r.stderr)
	}
	d := e.serve()
	out := e.ok("status")
	for _, want := range []string{"data directory  " + e.home, "mount           " + d.mount, "ready           yes", "sessions        0 open, 0 binds", "last error      none"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// An error the daemon logs shows up: a session pinning a version
	// whose content went missing from the store (before any session made
	// the daemon see it there).
	ownIndexOnly(t, "a version missing from a host's store is fetched again from the shared index, no error")
	var list []struct {
		Slug string `json:"slug"`
	}
	e.okJSON(&list, "skill", "list")
	if len(list) == 0 {
		t.Fatal("no bundled skills")
	}
	var detail struct {
		Path string `json:"path"`
	}
	e.okJSON(&detail, "skill", "show", list[0].Slug)
	if err := os.Rename(detail.Path, detail.Path+".away"); err != nil {
		t.Fatal(err)
	}
	r := e.run("session", "create", "--user", "operator", "--skills", list[0].Slug)
	os.Rename(detail.Path+".away", detail.Path)
	if r.code != 0 {
		t.Fatalf("session create: exit %d, %q", r.code, r.stderr)
	}
	var st struct {
		Skills    int `json:"skills"`
		Readiness struct {
			Ready bool `json:"ready"`
		} `json:"readiness"`
		LastError *struct {
			Message string `json:"message"`
		} `json:"last_error"`
	}
	e.okJSON(&st, "status")
	if st.Skills == 0 || !st.Readiness.Ready || st.LastError == nil || !strings.Contains(st.LastError.Message, "missing") {
		t.Errorf("status --json after a logged error: %+v (last error %+v)", st, st.LastError)
	}
}

// Under a service manager (Type=notify) the daemon says READY=1 once it
// serves and STOPPING=1 when it begins to shut down.
// serviceManager listens as a service manager does for what daemons
// started from now on in t tell it ($NOTIFY_SOCKET), and returns a function
// that reads the next datagram, or "" when none comes within wait.
func serviceManager(t *testing.T) func(wait time.Duration) string {
	sock := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", sock)
	return func(wait time.Duration) string {
		c.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
}

func TestServiceManagerNotify(t *testing.T) {
	e := newEnv(t)
	next := serviceManager(t)
	d := e.serve()
	read := func() string {
		got := next(10 * time.Second)
		if got == "" {
			t.Fatalf("no word from the daemon\n%s", d.logs())
		}
		return got
	}
	if got := read(); !strings.HasPrefix(got, "READY=1\n") || !strings.Contains(got, "STATUS=serving "+d.mount) {
		t.Fatalf("first notification %q, want READY=1 with a status", got)
	}
	// By then the mount answers as skillfs and the API serves.
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.mount, &st); err != nil || st.Type != 0x65735546 {
		t.Fatalf("at READY=1 the mount is not the skill filesystem: type %#x, %v", st.Type, err)
	}
	var ready struct {
		Ready bool `json:"ready"`
	}
	if code := newAPIClient(e.home).do(t, "GET", "/v1/ready", "", nil, &ready); code != 200 || !ready.Ready {
		t.Fatalf("at READY=1 /v1/ready answers %d %+v", code, ready)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "STOPPING=1" {
		t.Fatalf("second notification %q, want STOPPING=1", got)
	}
	<-d.done
}

// With a watchdog (WATCHDOG_USEC) the daemon pings the service manager while
// its mount answers at its path, and stops once it does not, so systemd
// restarts it. (A mount detached while something holds it open stays
// connected, so the daemon does not exit on its own: only the watchdog sees.)
func TestServiceManagerWatchdog(t *testing.T) {
	e := newEnv(t)
	read := serviceManager(t)
	t.Setenv("WATCHDOG_USEC", "200000")
	d := e.serve()
	if got := read(10 * time.Second); !strings.HasPrefix(got, "READY=1\n") {
		t.Fatalf("first notification %q, want READY=1\n%s", got, d.logs())
	}
	for i := 0; i < 3; i++ {
		if got := read(10 * time.Second); got != "WATCHDOG=1" {
			t.Fatalf("notification %d after READY %q, want WATCHDOG=1\n%s", i, got, d.logs())
		}
	}
	held, err := os.Open(d.mount)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Unmount(d.mount, syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	// Pings already on their way may still arrive; then they stop.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := read(time.Second)
		if got == "" {
			break
		}
		if got == "STOPPING=1" {
			t.Fatalf("the daemon stopped on its own after its mount was detached:\n%s", d.logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon kept sending %q after its mount was detached\n%s", got, d.logs())
		}
	}
	if !strings.Contains(d.logs(), "watchdog withheld") {
		t.Errorf("no log line says why the watchdog stopped:\n%s", d.logs())
	}
}

// The unit file in scripts/ is one systemd accepts (systemd-analyze verify,
// with ExecStart pointed at the binary under test), and it asks for what
// the daemon does: Type=notify with a watchdog.
func TestUnitFile(t *testing.T) {
	analyze := requireCommand(t, "systemd-analyze")
	unit, err := os.ReadFile(filepath.Join("..", "scripts", "skillfs.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nType=notify\n", "\nWatchdogSec=", "\nExecStart=/usr/local/bin/skillfs "} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit file lacks %q", strings.TrimSpace(want))
		}
	}
	// The keeper's unit, whose socket the daemon's names.
	keeper, err := os.ReadFile(filepath.Join("..", "scripts", "skillfs-keeper.service"))
	if err != nil {
		t.Fatal(err)
	}
	const socket = "/run/skillfs-keeper.sock"
	for _, want := range []string{"\nType=notify\n", "\nExecStart=/usr/local/bin/skillfs keeper --socket " + socket + "\n"} {
		if !strings.Contains(string(keeper), want) {
			t.Errorf("the keeper's unit file lacks %q", strings.TrimSpace(want))
		}
	}
	for _, want := range []string{"--keeper " + socket + "\n", "\nWants=skillfs-keeper.service\n", "\nAfter=skillfs-keeper.service\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit file lacks %q", strings.TrimSpace(want))
		}
	}
	dir := t.TempDir()
	var paths []string
	for name, text := range map[string][]byte{"skillfs.service": unit, "skillfs-keeper.service": keeper} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(text), "/usr/local/bin/skillfs", binary)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
