package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"skillfs/fs/bind/sandboxtest"
	"skillfs/skills"
)

const sandboxUID, sandboxGID = 1000, 1000

// workspace makes a host folder for a sandbox's /workspace, owned by the
// sandbox's uid, and parents the sandbox may walk through.
func workspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	ws := filepath.Join(dir, "ws")
	mustMkdir(t, ws)
	return ws
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, sandboxUID, sandboxGID); err != nil {
		t.Fatal(err)
	}
}

// write writes a file the sandbox's uid owns.
func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	mustMkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
	if err := os.Chown(p, sandboxUID, sandboxGID); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	os.Lchown(p, sandboxUID, sandboxGID)
}

func start(t *testing.T, ws string, binds ...string) *sandboxtest.Box {
	t.Helper()
	b, err := sandboxtest.Sandboxed(ws, sandboxUID, sandboxGID, binds...)
	if err != nil {
		t.Fatalf("start a sandbox (bwrap): %v", err)
	}
	t.Cleanup(b.Stop)
	return b
}

func read(t *testing.T, b *sandboxtest.Box, p string) (*Copy, error) {
	t.Helper()
	return readLim(t, b, p, skills.Limits{})
}

func readLim(t *testing.T, b *sandboxtest.Box, p string, lim skills.Limits) (*Copy, error) {
	t.Helper()
	return Read(context.Background(), Request{PID: b.PID, NS: b.NS, Path: p, Dst: t.TempDir(), Limits: lim})
}

const manifest = "---\nname: demo\ndescription: A demo skill.\n---\nBody.\n"

func TestReadFolder(t *testing.T) {
	ws := workspace(t)
	sk := filepath.Join(ws, "demo")
	write(t, filepath.Join(sk, "SKILL.md"), manifest, 0o644)
	write(t, filepath.Join(sk, "ref", "notes.md"), "notes", 0o600) // the sandbox's own, 0600: readable to it
	write(t, filepath.Join(sk, "run.sh"), "#!/bin/sh\n", 0o755)
	symlink(t, "ref/notes.md", filepath.Join(sk, "rel-link"))
	symlink(t, "/workspace/demo/ref/notes.md", filepath.Join(sk, "abs-link"))
	symlink(t, "/etc/shadow", filepath.Join(sk, "shadow"))
	mustMkdir(t, filepath.Join(sk, ".git", "objects"))
	b := start(t, ws)

	c, err := read(t, b, "/workspace/demo")
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != KindFolder || c.Name != "demo" || c.Files != 3 {
		t.Fatalf("copy = %+v", c)
	}
	got, err := os.ReadFile(filepath.Join(c.Path, "ref", "notes.md"))
	if err != nil || string(got) != "notes" {
		t.Fatalf("notes = %q, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(c.Path, "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Fatalf("run.sh = %v, %v: want its execute bit kept", fi, err)
	}
	for link, want := range map[string]string{"rel-link": "ref/notes.md", "abs-link": "ref/notes.md", "shadow": "/etc/shadow"} {
		if got, err := os.Readlink(filepath.Join(c.Path, link)); err != nil || got != want {
			t.Errorf("link %s = %q, %v; want %q (copied as a link, for the import to judge)", link, got, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(c.Path, ".git")); !os.IsNotExist(err) {
		t.Errorf(".git was copied: %v", err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], ".git") {
		t.Errorf("warnings = %q", c.Warnings)
	}
	if os.Geteuid() != 0 {
		t.Fatal("the daemon's credentials changed")
	}
}

func TestReadFiles(t *testing.T) {
	ws := workspace(t)
	write(t, filepath.Join(ws, "one", "SKILL.md"), manifest, 0o644)
	write(t, filepath.Join(ws, "demo.zip"), "PK\x03\x04 not really", 0o644)
	write(t, filepath.Join(ws, "notes.txt"), "x", 0o644)
	b := start(t, ws)
	c, err := read(t, b, "/workspace/one/SKILL.md")
	if err != nil || c.Kind != KindManifest || filepath.Base(c.Path) != "SKILL.md" {
		t.Fatalf("SKILL.md: %+v, %v", c, err)
	}
	if got, _ := os.ReadFile(c.Path); string(got) != manifest {
		t.Fatalf("SKILL.md copy = %q", got)
	}
	c, err = read(t, b, "/workspace/demo.zip")
	if err != nil || c.Kind != KindZip || c.Name != "demo.zip" {
		t.Fatalf("zip: %+v, %v", c, err)
	}
	if _, err := read(t, b, "/workspace/notes.txt"); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("a text file: %v, want ErrInvalid", err)
	}
}

// TestReadRefused: what the sandbox cannot read, cannot see, or is no
// regular file or directory is refused, each with a clear error, and the
// destination left with nothing.
func TestReadRefused(t *testing.T) {
	ws := workspace(t)
	hostOnly := filepath.Join(filepath.Dir(ws), "host-only")
	write(t, filepath.Join(hostOnly, "SKILL.md"), manifest, 0o644)

	write(t, filepath.Join(ws, "rootonly", "SKILL.md"), manifest, 0o644)
	secret := filepath.Join(ws, "rootonly", "secret")
	write(t, secret, "root's", 0o600)
	os.Chown(secret, 0, 0)

	write(t, filepath.Join(ws, "group", "SKILL.md"), manifest, 0o644)
	gfile := filepath.Join(ws, "group", "g")
	write(t, gfile, "group's", 0o640)
	os.Chown(gfile, 0, 2000) // a group the sandbox is not in

	write(t, filepath.Join(ws, "closed", "SKILL.md"), manifest, 0o644)
	os.Chown(filepath.Join(ws, "closed"), 0, 0)
	os.Chmod(filepath.Join(ws, "closed"), 0o700)

	write(t, filepath.Join(ws, "fifo", "SKILL.md"), manifest, 0o644)
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo", "pipe"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "SKILL.md"), 0o666); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "sparse", "SKILL.md"), manifest, 0o644)
	for _, p := range []string{filepath.Join(ws, "sparse", "big.bin"), filepath.Join(ws, "big.zip")} {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(2 << 30); err != nil { // 2 GiB, sparse
			t.Fatal(err)
		}
		f.Close()
		os.Chown(p, sandboxUID, sandboxGID)
	}
	symlink(t, "/etc/shadow", filepath.Join(ws, "shadow.zip"))
	symlink(t, "../../../../host-only", filepath.Join(ws, "up"))

	b := start(t, ws)
	for _, tc := range []struct {
		path string
		want error
		says string
	}{
		{"demo", skills.ErrInvalid, "absolute"},
		{"/workspace/rootonly", skills.ErrPermission, "/workspace/rootonly/secret"},
		{"/workspace/group", skills.ErrPermission, "/workspace/group/g"},
		{"/workspace/closed", skills.ErrPermission, "/workspace/closed"},
		{"/workspace/closed/SKILL.md", skills.ErrPermission, "/workspace/closed/SKILL.md"},
		{"/workspace/fifo", skills.ErrSpecialFile, "fifo"},
		{"/workspace/SKILL.md", skills.ErrSpecialFile, "fifo"},
		{"/workspace/sparse", skills.ErrLimit, "file-bytes"},
		{"/workspace/big.zip", skills.ErrLimit, "total-bytes"},
		{hostOnly, skills.ErrNotFound, "does not exist in the sandbox"},
		{"/etc/shadow", skills.ErrNotFound, "does not exist"},
		{"/workspace/shadow.zip", skills.ErrNotFound, "does not exist"},
		{"/workspace/up", skills.ErrNotFound, "does not exist"},
		{"/workspace/../../../" + strings.TrimPrefix(hostOnly, "/"), skills.ErrNotFound, "does not exist"},
		{"/proc/self/root" + hostOnly, skills.ErrNotFound, ""},
		{"/proc/1/root/workspace/rootonly", skills.ErrUnsafePath, "link"},
		{"/proc/1/cwd", skills.ErrUnsafePath, "link"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			dst := t.TempDir()
			c, err := Read(context.Background(), Request{PID: b.PID, NS: b.NS, Path: tc.path, Dst: dst})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Read(%q) = %+v, %v; want %v saying %q", tc.path, c, err, tc.want, tc.says)
			}
			if tc.want == skills.ErrLimit {
				// Refused on the size it declares, not after reading it.
				var n int64
				filepath.Walk(dst, func(_ string, fi os.FileInfo, _ error) error {
					if fi != nil && fi.Mode().IsRegular() {
						n += fi.Size()
					}
					return nil
				})
				if n > 1<<20 {
					t.Fatalf("%d bytes copied before the limit", n)
				}
			}
		})
	}
}

// TestReadNotTheSandbox: a process gone, or in another namespace than the
// sandbox's (a pid reused), is no sandbox to read in.
func TestReadNotTheSandbox(t *testing.T) {
	ws := workspace(t)
	write(t, filepath.Join(ws, "demo", "SKILL.md"), manifest, 0o644)
	b := start(t, ws)
	if _, err := Read(context.Background(), Request{PID: b.PID, NS: "mnt:[1]", Path: "/workspace/demo", Dst: t.TempDir()}); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("another namespace: %v", err)
	}
	if _, err := Read(context.Background(), Request{PID: 0, Path: "/workspace/demo", Dst: t.TempDir()}); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("pid 0: %v", err)
	}
	b.Stop()
	if _, err := Read(context.Background(), Request{PID: b.PID, Path: "/workspace/demo", Dst: t.TempDir()}); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("a process gone: %v", err)
	}
}

// TestReadLimits: the entries and total bytes of a folder count as it is
// read.
func TestReadLimits(t *testing.T) {
	ws := workspace(t)
	for i := range 5 {
		write(t, filepath.Join(ws, "many", fmt.Sprintf("f%d", i)), strings.Repeat("x", 100), 0o644)
	}
	b := start(t, ws)
	if _, err := readLim(t, b, "/workspace/many", skills.Limits{MaxFiles: 3}); !errors.Is(err, skills.ErrLimit) {
		t.Fatalf("files: %v", err)
	}
	if _, err := readLim(t, b, "/workspace/many", skills.Limits{MaxTotalBytes: 250}); !errors.Is(err, skills.ErrLimit) ||
		!strings.Contains(err.Error(), skills.LimitTotalBytes) {
		t.Fatalf("bytes: %v", err)
	}
	if c, err := readLim(t, b, "/workspace/many", skills.Limits{MaxTotalBytes: 500}); err != nil || c.Bytes != 500 {
		t.Fatalf("at the limit: %+v, %v", c, err)
	}
}

// TestReadHungFIFOInFolderNeverOpens: a FIFO is looked at, never opened
// (an open for reading would wait for a writer).
func TestReadCancelled(t *testing.T) {
	ws := workspace(t)
	write(t, filepath.Join(ws, "demo", "SKILL.md"), manifest, 0o644)
	b := start(t, ws)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dst := t.TempDir()
	if _, err := Read(ctx, Request{PID: b.PID, NS: b.NS, Path: "/workspace/demo", Dst: dst}); err == nil {
		// The read may have finished before it looked at ctx: then it is whole.
		if _, err := os.Stat(filepath.Join(dst, "tree", "SKILL.md")); err != nil {
			t.Fatalf("a read that succeeded copied nothing: %v", err)
		}
	} else if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestReadConcurrent: 50 sandboxes read at once, each its own.
func TestReadConcurrent(t *testing.T) {
	const n = 50
	boxes := make([]*sandboxtest.Box, n)
	for i := range n {
		ws := workspace(t)
		write(t, filepath.Join(ws, "demo", "SKILL.md"), fmt.Sprintf("---\nname: s%d\ndescription: d\n---\n", i), 0o644)
		boxes[i] = start(t, ws)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			dst := t.TempDir()
			c, err := Read(context.Background(), Request{PID: boxes[i].PID, NS: boxes[i].NS, Path: "/workspace/demo", Dst: dst})
			if err == nil {
				var got []byte
				got, err = os.ReadFile(filepath.Join(c.Path, "SKILL.md"))
				if err == nil && !strings.Contains(string(got), fmt.Sprintf("name: s%d\n", i)) {
					err = fmt.Errorf("sandbox %d read another's: %q", i, got)
				}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("sandbox %d: %v", i, err)
		}
	}
	// The daemon's own threads kept root's credentials.
	if err := os.WriteFile(filepath.Join(t.TempDir(), "x"), nil, 0o600); err != nil || os.Geteuid() != 0 {
		t.Fatalf("credentials of the process changed: %v", err)
	}
}

// TestReadKernelFilesystems: in a sandbox that shares the daemon's pid
// namespace, /proc/self is the daemon (the reading thread is the
// daemon's): a SKILL.md linked to /proc/self/maps, /proc/self/fd named as
// a folder, and a folder holding a mount of /sys or /proc are refused for
// the filesystem they are on, with nothing copied.
func TestReadKernelFilesystems(t *testing.T) {
	ws := workspace(t)
	mustMkdir(t, filepath.Join(ws, "maps"))
	symlink(t, "/proc/self/maps", filepath.Join(ws, "maps", "SKILL.md"))
	write(t, filepath.Join(ws, "withsys", "SKILL.md"), manifest, 0o644)
	mustMkdir(t, filepath.Join(ws, "withsys", "sys"))
	write(t, filepath.Join(ws, "withproc", "SKILL.md"), manifest, 0o644)
	mustMkdir(t, filepath.Join(ws, "withproc", "proc"))
	b, err := sandboxtest.SandboxedSharingPIDs(ws, sandboxUID, sandboxGID,
		"--ro-bind", "/sys", "/workspace/withsys/sys", "--proc", "/workspace/withproc/proc")
	if err != nil {
		t.Fatalf("start a sandbox (bwrap): %v", err)
	}
	t.Cleanup(b.Stop)
	// The premise: seen from the sandbox, /proc/self/maps is the daemon's.
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/root/proc/%d", b.PID, os.Getpid())); err != nil {
		t.Fatalf("the sandbox does not see the daemon's pid: %v", err)
	}
	for _, tc := range []struct{ path, says string }{
		{"/workspace/maps/SKILL.md", "on proc"},
		{"/proc/self/maps", "on proc"},
		{"/proc/self/fd", "on proc"},
		{"/proc/self", "on proc"},
		{"/workspace/withsys", "on sysfs"},
		{"/workspace/withproc", "on proc"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			dst := t.TempDir()
			c, err := Read(context.Background(), Request{PID: b.PID, NS: b.NS, Path: tc.path, Dst: dst})
			if !errors.Is(err, skills.ErrUnsafePath) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "kernel's") {
				t.Fatalf("Read(%q) = %+v, %v; want ErrUnsafePath saying %q", tc.path, c, err, tc.says)
			}
			// Nothing but the workspace's own SKILL.md, read before.
			filepath.Walk(dst, func(p string, fi os.FileInfo, _ error) error {
				if fi != nil && !fi.IsDir() && !(fi.Name() == "SKILL.md" && fi.Size() == int64(len(manifest))) {
					t.Errorf("copied from a kernel filesystem: %s", p)
				}
				return nil
			})
		})
	}
}

// TestReadRefusesCredentials: a process running as root is not read as
// unless the caller allows it; one whose uids or gids differ (a setuid
// program's) never is.
func TestReadRefusesCredentials(t *testing.T) {
	ws := workspace(t)
	write(t, filepath.Join(ws, "demo", "SKILL.md"), manifest, 0o644)
	root, err := sandboxtest.Sandboxed(ws, 0, 0)
	if err != nil {
		t.Fatalf("start a sandbox (bwrap): %v", err)
	}
	t.Cleanup(root.Stop)
	req := Request{PID: root.PID, NS: root.NS, Path: "/workspace/demo", Dst: t.TempDir()}
	if _, err := Read(context.Background(), req); !errors.Is(err, skills.ErrPermission) || !strings.Contains(err.Error(), "root") {
		t.Fatalf("read as root: %v, want ErrPermission naming root", err)
	}
	req.AllowRoot = true
	if c, err := Read(context.Background(), req); err != nil || c.Files != 1 {
		t.Fatalf("read as root, allowed: %+v, %v", c, err)
	}

	for _, ids := range [][]string{
		{"--ruid=1000", "--euid=2000", "--rgid=1000", "--egid=1000"},
		{"--ruid=1000", "--euid=1000", "--rgid=1000", "--egid=2000"},
	} {
		cmd := exec.Command("setpriv", append(ids, "--clear-groups", "sleep", "infinity")...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitExec(t, cmd.Process.Pid, "sleep")
		_, err := Read(context.Background(), Request{PID: cmd.Process.Pid, Path: ws, Dst: t.TempDir(), AllowRoot: true})
		if !errors.Is(err, skills.ErrPermission) || !strings.Contains(err.Error(), "setuid") {
			t.Fatalf("read as a process with %v: %v, want ErrPermission (ids that differ)", ids, err)
		}
	}
}

// waitExec waits until process pid runs prog.
func waitExec(t *testing.T, pid int, prog string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(b), prog+"\x00") {
			return
		}
	}
	t.Fatalf("process %d does not run %s", pid, prog)
}

// TestReadDone: Done is called once for every read, refused or not.
func TestReadDone(t *testing.T) {
	ws := workspace(t)
	write(t, filepath.Join(ws, "demo", "SKILL.md"), manifest, 0o644)
	b := start(t, ws)
	for _, p := range []string{"/workspace/demo", "/workspace/none", "relative"} {
		var calls atomic.Int32
		done := make(chan struct{}, 2)
		Read(context.Background(), Request{PID: b.PID, NS: b.NS, Path: p, Dst: t.TempDir(), Done: func() {
			calls.Add(1)
			done <- struct{}{}
		}})
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("read of %s: Done never called", p)
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("read of %s: Done called %d times", p, n)
		}
	}
}
