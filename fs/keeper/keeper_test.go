package keeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	skfs "skillfs/fs"
	"skillfs/fs/fusetest"
	"skillfs/skills/skilltest"
)

var fsName = fusetest.FsName("skillfs-keepertest")

func TestMain(m *testing.M) {
	fusetest.Main(m, func() ([]string, error) { return skfs.MountsOf(fsName) })
}

// startKeeper serves a holder on a socket of a fresh folder until the test
// ends (or stop is called); it returns the socket's path and the log.
func startKeeper(t *testing.T, path string) (stop func(), log *skilltest.SyncBuffer) {
	t.Helper()
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	log = &skilltest.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, slog.New(slog.NewTextHandler(log, nil))) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop, log
}

func socketPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "keeper.sock")
}

// fuseConn mounts a FUSE connection nobody serves (nothing may touch its
// folder) and returns its descriptor; the test's end unmounts it.
func fuseConn(t *testing.T) *os.File {
	t.Helper()
	fusetest.Require(t)
	dir := t.TempDir()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := unix.Mount(fsName, dir, "fuse.keepertest", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_RDONLY, opts); err != nil {
		unix.Close(fd)
		t.Fatalf("mount: %v", err)
	}
	f := os.NewFile(uintptr(fd), "/dev/fuse")
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		f.Close()
	})
	return f
}

// sameFile reports whether a and b are one open file (kcmp KCMP_FILE).
func sameFile(t *testing.T, a, b *os.File) bool {
	t.Helper()
	const kcmpFile = 0
	pid := uintptr(os.Getpid())
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, pid, pid, kcmpFile, a.Fd(), b.Fd(), 0)
	if errno != 0 {
		t.Fatalf("kcmp: %v", errno)
	}
	return r == 0
}

func TestListenMode(t *testing.T) {
	path := socketPath(t)
	startKeeper(t, path)
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket of mode 0600", fi.Mode())
	}
}

// A socket a dead keeper left is replaced; one a keeper listens on, or a
// file that is no socket, is refused.
func TestListenStale(t *testing.T) {
	path := socketPath(t)
	stop, _ := startKeeper(t, path)
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "a keeper listens on it already") {
		t.Fatalf("second Listen on a live socket: %v", err)
	}
	stop()
	// A crash leaves the file: make one as a killed keeper would.
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err == nil {
		l.SetUnlinkOnClose(false)
		l.Close()
	} else {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("no socket left to replace: %v", err)
	}
	startKeeper(t, path)
	if err := Dial(path).Ping(); err != nil {
		t.Fatalf("the keeper on the replaced socket: %v", err)
	}

	file := filepath.Join(t.TempDir(), "not-a-socket")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen on a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Fatal("Listen changed a file that is not a socket")
	}
}

func TestPutTakeDrop(t *testing.T) {
	path := socketPath(t)
	_, log := startKeeper(t, path)
	conn := fuseConn(t)
	c := Dial(path)

	if f, err := c.Take("fuse:/nothing"); err != nil || f != nil {
		t.Fatalf("take of a name never put: %v, %v", f, err)
	}
	if err := c.Put("fuse:/mnt/a b", conn); err != nil {
		t.Fatal(err)
	}
	kept, err := c.Kept()
	if err != nil || !slices.Equal(kept, []string{"fuse:/mnt/a b"}) {
		t.Fatalf("kept %q, %v", kept, err)
	}
	// Another client (a daemon started again) takes the same connection.
	other := Dial(path)
	f, err := other.Take("fuse:/mnt/a b")
	if err != nil || f == nil {
		t.Fatalf("take: %v, %v", f, err)
	}
	if !sameFile(t, f, conn) {
		t.Fatal("the descriptor taken is not the connection put")
	}
	f.Close()
	// Taking does not remove: the keeper keeps its own.
	if f, err := other.Take("fuse:/mnt/a b"); err != nil || f == nil {
		t.Fatalf("second take: %v, %v", f, err)
	} else {
		f.Close()
	}
	if err := other.Drop("fuse:/mnt/a b"); err != nil {
		t.Fatal(err)
	}
	if err := other.Drop("fuse:/mnt/a b"); err != nil {
		t.Fatalf("a drop of what is not kept: %v", err)
	}
	if kept, err := c.Kept(); err != nil || len(kept) != 0 {
		t.Fatalf("kept after the drop: %q, %v", kept, err)
	}
	for _, want := range []string{`connection kept" name="fuse:/mnt/a b"`, "connection handed back", "dropped"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

// Only a live FUSE connection is kept, whatever the peer says it is.
func TestPutRefusesOtherDescriptors(t *testing.T) {
	path := socketPath(t)
	startKeeper(t, path)
	fusetest.Require(t)
	c := Dial(path)
	null, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	reg, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	unmounted, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unmounted.Close()
	for _, tc := range []struct {
		f    *os.File
		want string
	}{
		{null, "not the FUSE device"},
		{reg, "not the FUSE device"},
		{unmounted, "has ended, or was never mounted"},
	} {
		err := c.Put("fuse:/x", tc.f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("put of %s: %v, want %q", tc.f.Name(), err, tc.want)
		}
	}
	if kept, err := c.Kept(); err != nil || len(kept) != 0 {
		t.Fatalf("kept %q, %v", kept, err)
	}
}

// A connection that ends (its mount is gone) is dropped: nobody could take
// it back.
func TestEndedConnectionDropped(t *testing.T) {
	path := socketPath(t)
	_, log := startKeeper(t, path)
	fusetest.Require(t)
	dir := t.TempDir()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(fsName, dir, "fuse.keepertest", unix.MS_RDONLY, fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "/dev/fuse")
	c := Dial(path)
	if err := c.Put("fuse:"+dir, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if kept, err := c.Kept(); err != nil || len(kept) != 0 {
		t.Fatalf("kept after the unmount: %q, %v", kept, err)
	}
	if got, err := c.Take("fuse:" + dir); err != nil || got != nil {
		t.Fatalf("take after the unmount: %v, %v", got, err)
	}
	if !strings.Contains(log.String(), "connection ended: dropped") {
		t.Errorf("the log does not say the connection was dropped:\n%s", log)
	}
}

func TestMaxKept(t *testing.T) {
	path := socketPath(t)
	startKeeper(t, path)
	conn := fuseConn(t)
	c := Dial(path)
	for i := range MaxKept {
		if err := c.Put(fmt.Sprintf("fuse:/m/%d", i), conn); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	err := c.Put("fuse:/m/one-more", conn)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("keeps %d descriptors already", MaxKept)) {
		t.Fatalf("put beyond the bound: %v", err)
	}
	// Replacing one is no new one.
	if err := c.Put("fuse:/m/0", conn); err != nil {
		t.Fatalf("replace: %v", err)
	}
	kept, err := c.Kept()
	if err != nil || len(kept) != MaxKept {
		t.Fatalf("kept %d, %v", len(kept), err)
	}
}

// rawExchange sends one packet (with fds) and reads the reply packet.
func rawExchange(t *testing.T, path string, pkt []byte, fds ...int) (reply, *net.UnixConn) {
	t.Helper()
	nc, err := net.Dial("unixpacket", path)
	if err != nil {
		t.Fatal(err)
	}
	c := nc.(*net.UnixConn)
	t.Cleanup(func() { c.Close() })
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix(pkt, rights, nil); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, maxReply)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseReply(buf[:n], 0)
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// A malformed request is answered with what is wrong, and the connection
// closed; descriptors that came with it are not kept.
func TestMalformed(t *testing.T) {
	path := socketPath(t)
	startKeeper(t, path)
	conn := fuseConn(t)
	for _, tc := range []struct {
		name string
		pkt  []byte
		fds  []int
		want string
	}{
		{"short", []byte{1}, nil, "a request has at least 3"},
		{"version", []byte{2, 'L', 0}, nil, "version 2"},
		{"op", []byte{1, 'X', 1, 'a'}, nil, "unknown operation"},
		{"length", []byte{1, 'T', 5, 'a'}, nil, "says 5 bytes, 1 follow"},
		{"control", []byte{1, 'T', 2, 'a', '\n'}, nil, "control character"},
		{"utf8", []byte{1, 'T', 1, 0xff}, nil, "not UTF-8"},
		{"put without fd", []byte{1, 'P', 1, 'a'}, nil, "a put carries one descriptor, this one 0"},
		{"put with two", []byte{1, 'P', 1, 'a'}, []int{int(conn.Fd()), int(conn.Fd())}, "a put carries one descriptor, this one 2"},
		{"take with fd", []byte{1, 'T', 1, 'a'}, []int{int(conn.Fd())}, "carries no descriptor"},
		{"too long", append([]byte{1, 'T', 255}, bytes.Repeat([]byte{'a'}, 300)...), nil, "more than 258 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c := rawExchange(t, path, tc.pkt, tc.fds...)
			if r.status != stError || !strings.Contains(string(r.payload), tc.want) {
				t.Fatalf("reply %q %q, want an error saying %q", r.status, r.payload, tc.want)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.Read(make([]byte, 16)); n != 0 || (err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && err.Error() != "EOF") {
				t.Fatalf("after a malformed request: read %d, %v; want the end of the connection", n, err)
			} else if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the connection stayed open after a malformed request")
			}
		})
	}
	if kept, err := Dial(path).Kept(); err != nil || len(kept) != 0 {
		t.Fatalf("kept %q, %v", kept, err)
	}
}

// A peer that is neither root nor the keeper's user is refused.
func TestPeerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another user")
	}
	path := socketPath(t)
	_, log := startKeeper(t, path)
	// Only the peer check stands in the way.
	for _, p := range []string{filepath.Dir(filepath.Dir(path)), filepath.Dir(path)} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		// This thread alone becomes uid 65534 and is never used again.
		runtime.LockOSThread()
		if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, 65534, 65534, 65534); errno != 0 {
			res <- errno
			return
		}
		res <- Dial(path).Ping()
	}()
	err := <-res
	if err == nil || !strings.Contains(err.Error(), "runs as uid 65534") {
		t.Fatalf("ping as uid 65534: %v", err)
	}
	if !strings.Contains(log.String(), "connection refused") {
		t.Errorf("the log does not say the peer was refused:\n%s", log)
	}
}

// A keeper restarted while the daemon runs is given back what it lost.
func TestWatchGivesAgain(t *testing.T) {
	path := socketPath(t)
	stop, _ := startKeeper(t, path)
	conn := fuseConn(t)
	c := Dial(path)
	if err := c.Put("fuse:/w", conn); err != nil {
		t.Fatal(err)
	}
	if err := c.Holds(); err != nil {
		t.Fatalf("holds after the put: %v", err)
	}
	logs := &skilltest.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// What fs.Server.Rekeep does: Put the connection it serves again.
	go c.Watch(ctx, 50*time.Millisecond, slog.New(slog.NewTextHandler(logs, nil)), func() error { return c.Put("fuse:/w", conn) })
	stop() // the keeper's own copy is closed: ours keeps the connection
	if err := c.Holds(); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("holds with the keeper stopped: %v", err)
	}
	for !strings.Contains(logs.String(), "keeper unreachable") {
		time.Sleep(20 * time.Millisecond)
	}
	startKeeper(t, path)
	start := time.Now()
	for {
		kept, err := Dial(path).Kept()
		if err == nil && slices.Equal(kept, []string{"fuse:/w"}) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the restarted keeper was not given the connection: %q, %v\n%s", kept, err, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("given again %v after the restart", time.Since(start))
	if err := c.Holds(); err != nil {
		t.Fatalf("holds once given again: %v", err)
	}
	f, err := Dial(path).Take("fuse:/w")
	if err != nil || f == nil || !sameFile(t, f, conn) {
		t.Fatalf("take from the restarted keeper: %v, %v", f, err)
	}
	f.Close()
	if !strings.Contains(logs.String(), "given again") {
		t.Errorf("the log does not say the connection was given again:\n%s", logs)
	}
}

func TestNoKeeper(t *testing.T) {
	path := socketPath(t)
	err := Dial(path).Ping()
	if err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("ping without a keeper: %v", err)
	}
	if _, err := Dial(path).Take("fuse:/x"); err == nil {
		t.Fatal("a take without a keeper succeeded")
	}
}

// FuzzParseRequest: any packet is parsed or refused, never panics, and what
// parses encodes back to the same bytes.
func FuzzParseRequest(f *testing.F) {
	for _, s := range [][]byte{{1, 'L', 0}, {1, 'T', 3, 'a', 'b', 'c'}, {1, 'P', 1, 'x'}, {1, 'D', 2, 0xc3, 0xa9}, {2, 'L', 0}, {1}} {
		f.Add(s, 0)
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, b []byte, fds int) {
		r, err := parseRequest(b, fds)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("an error that does not say malformed: %v", err)
			}
			return
		}
		out, err := encodeRequest(r.op, r.name)
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("parsed %q from %q, encodes to %q (%v)", r.name, b, out, err)
		}
	})
}

// FuzzParseReply: likewise for replies.
func FuzzParseReply(f *testing.F) {
	f.Add(encodeReply(stDone, nil), 1)
	f.Add(encodeReply(stNone, nil), 0)
	f.Add(encodeReply(stList, []byte("fuse:/a\nfuse:/b\n")), 0)
	f.Add(encodeReply(stError, []byte("no")), 0)
	f.Add([]byte{1, 'L', 0, 2, 'a', 'b'}, 0)
	f.Fuzz(func(t *testing.T, b []byte, fds int) {
		r, err := parseReply(b, fds)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("an error that does not say malformed: %v", err)
			}
			return
		}
		if out := encodeReply(r.status, r.payload); !bytes.Equal(out, b) {
			t.Fatalf("parsed %q %q from %q, encodes to %q", r.status, r.payload, b, out)
		}
		if r.status == stList {
			names, _ := parseNames(r.payload)
			for _, n := range names {
				if checkName(n) != nil {
					t.Fatalf("a bad name %q in a list that parsed", n)
				}
			}
		}
	})
}
