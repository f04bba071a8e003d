package bind

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// agentUID is the sandboxed user of these tests, otherUID another user in
// the same sandbox.
const agentUID, otherUID = 1000, 1001

// socketSandbox is a bubblewrap sandbox with its own mount namespace whose
// process (pid) runs as agentUID, with the host folder home (agentUID's,
// 0755) bound in at /home/gem.
type socketSandbox struct {
	pid  int
	home string // on the host
}

func startSocketSandbox(t *testing.T) *socketSandbox {
	t.Helper()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Fatalf("these tests need bubblewrap (bwrap): %v", err)
	}
	home := t.TempDir()
	if err := os.Chown(home, agentUID, agentUID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bwrap, "--unshare-ipc", "--unshare-net", "--unshare-uts", "--die-with-parent",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
		"--tmpfs", "/home", "--bind", home, "/home/gem", "--info-fd", "3",
		"--", "setpriv", "--reuid", strconv.Itoa(agentUID), "--regid", strconv.Itoa(agentUID), "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--", "sleep", "600")
	cmd.ExtraFiles = []*os.File{w}
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
	// bwrap reports the pid before the sandbox is in place and the
	// process has dropped to its user.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := credsOf(info.ChildPID)
		if err == nil && c.uid == agentUID {
			if fi, err := os.Stat(filepath.Join("/proc", strconv.Itoa(info.ChildPID), "root/home/gem")); err == nil && fi.IsDir() {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %d: not running as %d with /home/gem after 10s", info.ChildPID, agentUID)
		}
	}
	// Its process outlives bwrap: having changed its user, it lost the
	// signal --die-with-parent asked for.
	t.Cleanup(func() { unix.Kill(info.ChildPID, unix.SIGKILL) })
	return &socketSandbox{pid: info.ChildPID, home: home}
}

// as runs argv in the sandbox's mount namespace as uid.
func (sb *socketSandbox) as(uid int, argv ...string) (string, error) {
	id := strconv.Itoa(uid)
	args := append([]string{"--mount=/proc/" + strconv.Itoa(sb.pid) + "/ns/mnt", "--", "setpriv", "--reuid", id, "--regid", id,
		"--clear-groups", "--"}, argv...)
	out, err := exec.Command("nsenter", args...).CombinedOutput()
	return string(out), err
}

// testBinder is a Binder of a data directory of the test's, its mount
// root on a filesystem of its own (/proc: nothing of the test is there).
func testBinder(t *testing.T) Binder {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return Binder{Home: home, MountRoot: "/proc"}
}

// TestSocketFenced: no socket is made in the data directory or the
// daemon's mount.
func TestSocketFenced(t *testing.T) {
	m := testBinder(t)
	for _, path := range []string{filepath.Join(m.Home, "api.sock"), "/proc/api.sock"} {
		if l, _, err := m.Listen(0, "", path, ""); !errors.Is(err, skills.ErrInvalid) {
			if l != nil {
				l.Close()
			}
			t.Errorf("a socket at %s: %v, want ErrInvalid", path, err)
		}
	}
	if names, _ := os.ReadDir(m.Home); len(names) != 0 {
		t.Fatalf("made in the data directory: %v", names)
	}
}

// answerOnce answers the first connection on l with body, as HTTP.
func answerOnce(l net.Listener, body string) {
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		bufio.NewReader(c).ReadString('\n')
		c.Write([]byte("HTTP/1.0 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body))
	}()
}

// TestSocketInSandbox: the socket is made where the sandbox sees the path,
// as its user, 0600; that user connects through it, another user of the
// sandbox cannot, and the host has nothing at that path. Removing it
// removes that very file.
func TestSocketInSandbox(t *testing.T) {
	sb := startSocketSandbox(t)
	ns, err := NamespaceOf(sb.pid)
	if err != nil {
		t.Fatal(err)
	}
	m := testBinder(t)
	l, s, err := m.Listen(sb.pid, ns, "/home/gem/.skillfs.sock", "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if s.Path != "/home/gem/.skillfs.sock" || s.ID == "" {
		t.Fatalf("made %+v", s)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(sb.home, ".skillfs.sock"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Mode&0o7777 != 0o600 || st.Uid != agentUID || st.Gid != agentUID {
		t.Fatalf("socket mode %o owner %d:%d, want a socket 0600 of %d", st.Mode, st.Uid, st.Gid, agentUID)
	}
	if socketID(&st) != s.ID {
		t.Fatalf("socket id %s, made %s", socketID(&st), s.ID)
	}
	if _, err := os.Lstat("/home/gem/.skillfs.sock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the host has a file at the sandbox's path: %v", err)
	}

	answerOnce(l, "hello")
	if out, err := sb.as(agentUID, "curl", "-sS", "--unix-socket", "/home/gem/.skillfs.sock", "http://x/"); err != nil || out != "hello" {
		t.Fatalf("the sandbox's user through the socket: %q, %v", out, err)
	}
	if out, err := sb.as(otherUID, "curl", "-sS", "--unix-socket", "/home/gem/.skillfs.sock", "http://x/"); err == nil {
		t.Fatalf("another user of the sandbox connected: %q", out)
	} else if !strings.Contains(out, "ermission denied") && !strings.Contains(out, "Couldn't connect") {
		t.Fatalf("another user: %q, %v", out, err)
	}

	// Made again over the one left, only when it is that very socket.
	if _, _, err := m.Listen(sb.pid, ns, "/home/gem/.skillfs.sock", ""); !errors.Is(err, skills.ErrExists) {
		t.Fatalf("a second socket over the first: %v, want ErrExists", err)
	}
	if _, _, err := m.Listen(sb.pid, ns, "/home/gem/.skillfs.sock", "1:1"); !errors.Is(err, skills.ErrExists) {
		t.Fatalf("replacing a socket by another's id: %v, want ErrExists", err)
	}
	l.Close()
	l2, s2, err := m.Listen(sb.pid, ns, "/home/gem/.skillfs.sock", s.ID)
	if err != nil {
		t.Fatalf("replacing the socket made: %v", err)
	}
	defer l2.Close()
	answerOnce(l2, "again")
	if out, err := sb.as(agentUID, "curl", "-sS", "--unix-socket", "/home/gem/.skillfs.sock", "http://x/"); err != nil || out != "again" {
		t.Fatalf("through the replacement: %q, %v", out, err)
	}
	if err := m.RemoveSocket(sb.pid, ns, s2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(sb.home, ".skillfs.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after removal: %v", err)
	}
	if err := m.RemoveSocket(sb.pid, ns, s2); err != nil {
		t.Fatalf("removing again: %v", err)
	}
	// A file the sandbox put in the socket's place stays.
	if out, err := sb.as(agentUID, "sh", "-c", "echo mine > /home/gem/.skillfs.sock"); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if err := m.RemoveSocket(sb.pid, ns, s2); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(sb.home, ".skillfs.sock")); err != nil || string(b) != "mine\n" {
		t.Fatalf("the file in the socket's place: %q, %v", b, err)
	}
	if _, _, err := m.Listen(sb.pid, "mnt:[1]", "/home/gem/.skillfs.sock", ""); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("in a namespace the process is not in: %v, want ErrNotFound", err)
	}
}

// TestSocketRefusals: a missing folder, a file in the way, a folder the
// sandbox's user may not write to and a name too long are refused, and
// nothing is created or removed.
func TestSocketRefusals(t *testing.T) {
	sb := startSocketSandbox(t)
	ns, err := NamespaceOf(sb.pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sb.home, "notes"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(sb.home, "notes"), agentUID, agentUID)
	if err := os.Mkdir(filepath.Join(sb.home, "roots"), 0o755); err != nil { // root's
		t.Fatal(err)
	}
	if err := os.Symlink("/usr", filepath.Join(sb.home, "to-usr")); err != nil {
		t.Fatal(err)
	}
	other, err := net.Listen("unix", filepath.Join(sb.home, "other.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	before := listing(t, sb.home)
	for _, c := range []struct {
		name, path string
		want       error
	}{
		{"missing folder", "/home/gem/missing/api.sock", skills.ErrNotFound},
		{"a file", "/home/gem/notes", skills.ErrExists},
		{"a folder", "/home/gem/roots", skills.ErrExists},
		{"another's socket", "/home/gem/other.sock", skills.ErrExists},
		{"root's folder", "/home/gem/roots/api.sock", skills.ErrPermission},
		{"through a symlink to a read-only folder", "/home/gem/to-usr/api.sock", nil},
		{"not a folder", "/home/gem/notes/api.sock", skills.ErrInvalid},
		{"a name too long", "/home/gem/" + strings.Repeat("n", 108), skills.ErrInvalid},
		{"relative", "home/gem/api.sock", skills.ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _, err := testBinder(t).Listen(sb.pid, ns, c.path, "")
			if err == nil {
				l.Close()
				t.Fatalf("made %s", c.path)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.path) && !strings.Contains(err.Error(), filepath.Clean(c.path)) {
				t.Errorf("the error does not name the path: %v", err)
			}
		})
	}
	if after := listing(t, sb.home); after != before {
		t.Fatalf("the sandbox's folder changed:\n%s\nwant\n%s", after, before)
	}
	if b, err := os.ReadFile(filepath.Join(sb.home, "notes")); err != nil || string(b) != "mine" {
		t.Fatalf("the file in the way: %q, %v", b, err)
	}
	if entries, _ := os.ReadDir("/usr"); len(entries) == 0 {
		t.Fatal("no /usr")
	}
	if _, err := os.Lstat("/usr/api.sock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a socket was made in /usr: %v", err)
	}
}

// listing names the files below dir with their modes, one a line.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestSocketLongPath: a path longer than a socket address holds works, the
// socket being bound in its folder.
func TestSocketLongPath(t *testing.T) {
	dir := t.TempDir()
	for range 6 {
		dir = filepath.Join(dir, strings.Repeat("d", 40))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "api.sock")
	if len(path) <= 108 {
		t.Fatalf("path %q is not long", path)
	}
	m := testBinder(t)
	l, s, err := m.Listen(0, "", path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&0o7777 != 0o600 || st.Uid != 0 {
		t.Fatalf("socket mode %o owner %d, %v; want 0600 of root", st.Mode, st.Uid, err)
	}
	// In a folder shared with a group (root's, 02750, of another group)
	// the socket is its group's too; in any other setgid folder, 0600.
	for _, c := range []struct {
		name     string
		uid, gid int
		mode     uint32
		want     uint32
	}{
		{"shared: root's, 02750", 0, 4242, 0o2750, 0o660},
		{"setgid, 02775 (as /var/local)", 0, 4242, 0o2775, 0o600},
		{"setgid, 02770", 0, 4242, 0o2770, 0o600},
		{"setgid, 02750 of another owner", 1000, 4242, 0o2750, 0o600},
		{"setgid, 02750 of root's group", 0, 0, 0o2750, 0o600},
	} {
		shared := filepath.Join(t.TempDir(), "shared")
		if err := os.Mkdir(shared, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(shared, c.uid, c.gid); err != nil {
			t.Fatal(err)
		}
		if err := unix.Chmod(shared, c.mode); err != nil {
			t.Fatal(err)
		}
		gl, _, err := m.Listen(0, "", filepath.Join(shared, "api.sock"), "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err = unix.Lstat(filepath.Join(shared, "api.sock"), &st)
		gl.Close()
		if err != nil || st.Mode&0o7777 != c.want || st.Uid != 0 || int(st.Gid) != c.gid {
			t.Fatalf("socket in a folder %s: mode %o owner %d:%d, %v; want %o of root:%d", c.name, st.Mode&0o7777, st.Uid, st.Gid, err, c.want, c.gid)
		}
	}
	// The process's own umask is untouched.
	old := unix.Umask(0o022)
	unix.Umask(old)
	if old == 0o177 {
		t.Fatalf("the process's umask became %o", old)
	}
	answerOnce(l, "long")
	// A client too reaches it through a shorter name of its folder.
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	c, err := net.Dial("unix", "/proc/self/fd/"+strconv.Itoa(dfd)+"/api.sock")
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	b := make([]byte, 256)
	n, _ := c.Read(b)
	c.Close()
	if !strings.HasSuffix(string(b[:n]), "long") {
		t.Fatalf("answer %q", b[:n])
	}
	if err := m.RemoveSocket(0, "", s); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after removal: %v", err)
	}
}
