package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/fs/bind"
	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// TestSandboxLookupErrors: only a process that is gone (ENOENT, ESRCH) makes
// rebind forget a sandbox's bind and detach treat it as gone; any other
// error looking its namespace up (descriptors exhausted at a restart, say)
// keeps the record for the next start and is reported by detach.
func TestSandboxLookupErrors(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, All: true})
	if err != nil {
		t.Fatal(err)
	}
	b := skills.Bind{Target: "/nonexistent/box/skills", PID: os.Getpid(), NS: "mnt:[1]"}
	readLink, openFile := bind.ReadNamespaceLink, bind.OpenNamespaceFile
	t.Cleanup(func() { bind.ReadNamespaceLink, bind.OpenNamespaceFile = readLink, openFile })
	inject := func(errno unix.Errno) {
		bind.ReadNamespaceLink = func(p string) (string, error) {
			return "", &os.PathError{Op: "readlink", Path: p, Err: errno}
		}
		bind.OpenNamespaceFile = func(string) (int, error) { return -1, errno }
	}
	recorded := func() bool {
		t.Helper()
		binds, err := d.db.Binds(ctx, info.ID)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(binds, b)
	}

	for _, errno := range []unix.Errno{unix.EMFILE, unix.ENFILE, unix.ENOMEM, unix.EACCES} {
		t.Run(errno.Error(), func(t *testing.T) {
			if err := d.db.AddBind(ctx, info.ID, d.host, b); err != nil {
				t.Fatal(err)
			}
			inject(errno)
			if _, err := bind.NamespaceOf(b.PID); errors.Is(err, skills.ErrNotFound) || !errors.Is(err, errno) {
				t.Errorf("classified as %v", err)
			}
			d.rebind(ctx)
			if !recorded() {
				t.Errorf("rebind forgot a live sandbox's bind on %v", errno)
			}
			if err := d.detach(info.ID, b); !errors.Is(err, errno) {
				t.Errorf("detach: %v, want %v", err, errno)
			}
		})
	}
	for _, errno := range []unix.Errno{unix.ENOENT, unix.ESRCH} {
		t.Run(errno.Error(), func(t *testing.T) {
			if err := d.db.AddBind(ctx, info.ID, d.host, b); err != nil {
				t.Fatal(err)
			}
			inject(errno)
			if _, err := bind.NamespaceOf(b.PID); !errors.Is(err, skills.ErrNotFound) {
				t.Errorf("classified as %v", err)
			}
			if err := d.detach(info.ID, b); err != nil {
				t.Errorf("detach of a gone sandbox's bind: %v", err)
			}
			d.rebind(ctx)
			if recorded() {
				t.Errorf("rebind kept a gone sandbox's bind")
			}
		})
	}
}

// hungFS is a FUSE filesystem that stops answering: in its root, "hang" is
// a directory whose lookup blocks until released, and "dir" one answered at
// once whose entries' lookups block until released (holding dir's lock
// meanwhile, as the kernel does for a lookup in progress).
type hungFS struct {
	mnt     string
	entered chan struct{} // gets a value each time a lookup blocks
	release func()
}

type hungNode struct {
	fusefs.Inode
	fs   *hungFS
	gate chan struct{}
	root bool
}

var _ = (fusefs.NodeLookuper)((*hungNode)(nil))
var _ = (fusefs.NodeGetattrer)((*hungNode)(nil))

func (n *hungNode) Getattr(_ context.Context, _ fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o755
	return 0
}

func (n *hungNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	dir := func() (*fusefs.Inode, syscall.Errno) {
		out.Mode = syscall.S_IFDIR | 0o755
		return n.NewInode(ctx, &hungNode{fs: n.fs, gate: n.gate}, fusefs.StableAttr{Mode: syscall.S_IFDIR}), 0
	}
	if n.root && name == "dir" {
		return dir()
	}
	if n.root && name != "hang" {
		return nil, syscall.ENOENT
	}
	select {
	case n.fs.entered <- struct{}{}:
	default:
	}
	<-n.gate
	if n.root {
		return dir() // released: "hang" is an ordinary directory
	}
	return nil, syscall.ENOENT
}

// mountHung mounts a fresh hungFS; it is released and unmounted when the
// test ends.
func mountHung(t *testing.T) *hungFS {
	t.Helper()
	return mountHungFor(t, false)
}

// mountHungFor is mountHung, for every user with allowOther (as a sandbox's
// uid reads it).
func mountHungFor(t *testing.T, allowOther bool) *hungFS {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	h := &hungFS{mnt: filepath.Join(t.TempDir(), "hung"), entered: make(chan struct{}, 16)}
	h.release = func() { once.Do(func() { close(gate) }) }
	if err := os.Mkdir(h.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	timeout := time.Hour
	srv, err := fusefs.Mount(h.mnt, &hungNode{fs: h, gate: gate, root: true}, &fusefs.Options{
		MountOptions: fuse.MountOptions{FsName: "skillfs-hung-test", DirectMount: true, AllowOther: allowOther},
		EntryTimeout: &timeout, AttrTimeout: &timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.release()
		if err := srv.Unmount(); err != nil {
			unix.Unmount(h.mnt, unix.MNT_DETACH)
		}
	})
	return h
}

// waitEntered waits until a lookup blocks in h.
func (h *hungFS) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reached the hung filesystem")
	}
}

// mountedAt tells whether something is mounted at path in this namespace.
func mountedAt(t *testing.T, path string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// TestBindOnHungFilesystem: a bind target on a filesystem that never
// answers costs Bind, Unbind and Close an error within bind.Timeout, not
// the daemon's lock: another session change waiting for the lock goes
// through. Work that completes once the filesystem answers again leaves no
// bind behind: a target opened late is not bound, and an attach that
// completes late is undone.
func TestBindOnHungFilesystem(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	var logs skilltest.SyncBuffer
	d.log = slog.New(slog.NewTextHandler(&logs, nil))
	prev := bind.Timeout
	bind.Timeout = 500 * time.Millisecond
	t.Cleanup(func() { bind.Timeout = prev })
	// The sessions are made first: should an operation keep the lock, no
	// later step may wait for it unbounded.
	var ids []string
	for range 4 {
		info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, All: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	// bounded runs op, which must fail with the timeout; meanwhile another
	// session change, queued behind it for the lock once op is blocked
	// (reached returns), must complete too.
	bounded := func(t *testing.T, h *hungFS, reached func(), op func() error) {
		t.Helper()
		start := time.Now()
		res := make(chan error, 1)
		go func() { res <- op() }()
		reached()
		other := make(chan error, 1)
		go func() {
			_, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, All: true})
			other <- err
		}()
		select {
		case err := <-res:
			if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), h.mnt) {
				t.Errorf("err = %v, want a timeout naming the target", err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v with a timeout of %v", took, bind.Timeout)
			}
		case <-time.After(10 * time.Second):
			h.release()
			t.Fatal("still blocked 10s after the target stopped answering")
		}
		select {
		case err := <-other:
			if err != nil {
				t.Errorf("the session change waiting for the lock: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a session change still waits for the lock 10s later")
		}
	}
	// nothingLeft checks, once the filesystem answered again, that no bind
	// was left at target or recorded for session id.
	nothingLeft := func(t *testing.T, id, target string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for mountedAt(t, target) {
			if time.Now().After(deadline) {
				t.Fatalf("a bind nobody recorded is left at %s", target)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // let late work finish
		if mountedAt(t, target) {
			t.Fatalf("a bind nobody recorded appeared at %s", target)
		}
		binds, err := d.db.Binds(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(binds) != 0 {
			t.Fatalf("binds recorded: %v", binds)
		}
	}

	for i, pid := range []int{0, os.Getpid()} {
		name := "daemon's namespace"
		if pid != 0 {
			name = "joined namespace"
		}
		t.Run("open blocks, "+name, func(t *testing.T) {
			h := mountHung(t)
			id := ids[i]
			target := filepath.Join(h.mnt, "hang")
			bounded(t, h, func() { h.waitEntered(t) }, func() error { _, err := d.Bind(ctx, id, skills.Bind{Target: target, PID: pid}); return err })
			h.release()
			nothingLeft(t, id, target)
		})
	}

	t.Run("attach blocks, then completes", func(t *testing.T) {
		h := mountHung(t)
		id := ids[2]
		target := filepath.Join(h.mnt, "dir")
		// A lookup in dir that never ends holds dir's lock: move_mount
		// onto dir waits for it.
		stat := make(chan error, 1)
		go func() { _, err := os.Stat(filepath.Join(target, "x")); stat <- err }()
		h.waitEntered(t)
		// move_mount waits in the kernel, where the filesystem sees nothing.
		wait := func() { time.Sleep(bind.Timeout / 2) }
		bounded(t, h, wait, func() error { _, err := d.Bind(ctx, id, skills.Bind{Target: target}); return err })
		h.release()
		<-stat
		nothingLeft(t, id, target)
		if !strings.Contains(logs.String(), "bind completed after its caller gave up") {
			t.Errorf("the late attach was not what was undone:\n%s", logs.String())
		}
	})

	t.Run("unmount and close", func(t *testing.T) {
		h := mountHung(t)
		id := ids[3]
		target := filepath.Join(h.mnt, "hang")
		if err := d.db.AddBind(ctx, id, d.host, skills.Bind{Target: target}); err != nil {
			t.Fatal(err)
		}
		bounded(t, h, func() { h.waitEntered(t) }, func() error { return d.Unbind(ctx, id, target, 0) })
		res := make(chan error, 1)
		go func() { res <- d.CloseSession(ctx, id) }()
		select {
		case err := <-res:
			if err != nil {
				t.Errorf("close: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("close still blocked 10s later")
		}
		if _, err := d.Session(ctx, id); err == nil {
			t.Errorf("session still open after close")
		}
	})
}
