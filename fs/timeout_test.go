package fs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/fs/fusetest"
)

// requireRequestTimeout skips a test that needs the kernel's FUSE request
// timeout (Linux 6.14 or later) where it is missing, except in CI.
func requireRequestTimeout(tb testing.TB) {
	tb.Helper()
	fusetest.Require(tb)
	_, err := os.Stat(filepath.Join(fuseSysctlDir, "default_request_timeout"))
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("FUSE request timeout tests must run in CI: %v", err)
	}
	tb.Skipf("the kernel has no FUSE request timeout: %v", err)
}

// hungSink never answers until released: a daemon stuck while the kernel
// waits for it.
type hungSink struct {
	entered chan struct{}
	release chan struct{}
}

func (s *hungSink) Opened(string, string) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return nil
}

// TestRequestTimeout mounts with a request timeout and hangs the daemon in
// an open: the kernel aborts the connection, so the opener gets an error
// instead of hanging, and the server sees its mount end although the hung
// call never returns.
func TestRequestTimeout(t *testing.T) {
	requireRequestTimeout(t)
	defPath := filepath.Join(fuseSysctlDir, "default_request_timeout")
	before, err := readSysctlLocked(defPath)
	if err != nil {
		t.Fatal(err)
	}
	limit, err := readSysctl(filepath.Join(fuseSysctlDir, "max_request_timeout"))
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	sink := &hungSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := mountTest(t, Options{Sink: sink, RequestTimeout: 15 * time.Second})
	t.Cleanup(func() { close(sink.release) })

	if after, err := readSysctlLocked(defPath); err != nil || after != before {
		t.Errorf("kernel default request timeout = %d, %v after mounting; want %d restored", after, err, before)
	}
	if want := effectiveTimeout(15, limit); srv.RequestTimeout() != want || want == 0 {
		t.Errorf("request timeout = %v, want %v", srv.RequestTimeout(), want)
	}

	dir := setSession(t, srv, "sess", View{st.alpha1})
	res := make(chan error, 1)
	go func() { _, err := os.ReadFile(filepath.Join(dir, "alpha", "SKILL.md")); res <- err }()
	select {
	case <-sink.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the read never reached the sink")
	}
	select {
	case err := <-res:
		if !errors.Is(err, syscall.ECONNABORTED) && !errors.Is(err, syscall.ENOTCONN) {
			t.Errorf("read while the daemon hangs: err = %v, want ECONNABORTED or ENOTCONN", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("read still hangs 45s after the daemon did")
	}
	select {
	case <-srv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server still serves 10s after the kernel aborted its connection")
	}
	// statfs always asks the daemon; stat may be answered from the cache.
	var fsst unix.Statfs_t
	if err := unix.Statfs(dir, &fsst); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("statfs the aborted mount: err = %v, want ENOTCONN", err)
	}
}

// TestRequestTimeoutZero checks that a mount without a timeout leaves the
// kernel's settings alone and reports what the kernel applies.
func TestRequestTimeoutZero(t *testing.T) {
	requireRequestTimeout(t)
	def, err := readSysctlLocked(filepath.Join(fuseSysctlDir, "default_request_timeout"))
	if err != nil {
		t.Fatal(err)
	}
	limit, err := readSysctl(filepath.Join(fuseSysctlDir, "max_request_timeout"))
	if err != nil {
		t.Fatal(err)
	}
	srv := mountTest(t, Options{})
	if got, want := srv.RequestTimeout(), effectiveTimeout(def, limit); got != want {
		t.Errorf("request timeout = %v, want the kernel's %v", got, want)
	}
	if after, _ := readSysctlLocked(filepath.Join(fuseSysctlDir, "default_request_timeout")); after != def {
		t.Errorf("kernel default request timeout changed from %d to %d", def, after)
	}
}

func TestEffectiveTimeout(t *testing.T) {
	cases := []struct {
		def, limit uint64
		want       time.Duration
	}{
		{0, 0, 0},
		{60, 0, time.Minute},
		{0, 120, 2 * time.Minute},
		{60, 30, 30 * time.Second},
		{30, 60, 30 * time.Second},
		{5, 0, 15 * time.Second},
		{0, 1, 15 * time.Second},
	}
	for _, tc := range cases {
		if got := effectiveTimeout(tc.def, tc.limit); got != tc.want {
			t.Errorf("effectiveTimeout(%d, %d) = %v, want %v", tc.def, tc.limit, got, tc.want)
		}
	}
}

// TestDoneWhenUnmountedOutside removes the mount behind the server's back:
// Done reports it, and Unmount afterwards still succeeds.
func TestDoneWhenUnmountedOutside(t *testing.T) {
	srv := mountTest(t, Options{})
	select {
	case <-srv.Done():
		t.Fatal("done while mounted")
	default:
	}
	if err := unix.Unmount(srv.Mountpoint(), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("still serving 10s after the mount was removed")
	}
	if err := srv.Unmount(); err != nil {
		t.Errorf("unmount after the mount was removed: %v", err)
	}
}

// keepRequestTimeout reads the kernel's default request timeout and puts it
// back when the test ends, whatever the test did to it.
func keepRequestTimeout(t *testing.T) (defPath string, before uint64) {
	t.Helper()
	requireRequestTimeout(t)
	defPath = filepath.Join(fuseSysctlDir, "default_request_timeout")
	before, err := readSysctlLocked(defPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := writeSysctlLocked(defPath, before); err != nil {
			t.Errorf("restore %s to %d: %v", defPath, before, err)
		}
	})
	return defPath, before
}

// TestRequestTimeoutRecoversAfterCrash: a daemon killed while its timeout
// was the kernel's default left the default and its record behind; the
// next Mount puts the previous default back if the kernel still holds the
// recorded value, and leaves a value someone set since alone.
func TestRequestTimeoutRecoversAfterCrash(t *testing.T) {
	defPath, before := keepRequestTimeout(t)
	limit, err := readSysctl(filepath.Join(fuseSysctlDir, "max_request_timeout"))
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := before+37, before+38
	cases := []struct {
		name      string
		left      uint64 // the kernel's default at the start
		wantAfter uint64
	}{
		{"still ours", ours, before},
		{"changed since", theirs, theirs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			record := filepath.Join(t.TempDir(), "fuse-timeout.restore")
			if err := writeTimeoutRecord(record, before, ours); err != nil {
				t.Fatal(err)
			}
			if err := writeSysctlLocked(defPath, tc.left); err != nil {
				t.Fatal(err)
			}
			srv := mountTest(t, Options{RequestTimeoutRecord: record})
			if got, err := readSysctlLocked(defPath); err != nil || got != tc.wantAfter {
				t.Errorf("kernel default = %d, %v; want %d", got, err, tc.wantAfter)
			}
			if want := effectiveTimeout(tc.wantAfter, limit); srv.RequestTimeout() != want {
				t.Errorf("request timeout of the new mount = %v, want %v", srv.RequestTimeout(), want)
			}
			if _, err := os.Stat(record); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("record left behind: %v", err)
			}
		})
	}
}

// TestRequestTimeoutRecord: while our timeout is the kernel's default, the
// record holds the previous value and ours; afterwards the previous value is
// back and the record gone, unless someone changed the default meanwhile:
// their value then stays.
func TestRequestTimeoutRecord(t *testing.T) {
	defPath, before := keepRequestTimeout(t)
	ours := before + 23
	log := slog.New(slog.DiscardHandler)
	for _, changed := range []bool{false, true} {
		t.Run(fmt.Sprintf("changed meanwhile %v", changed), func(t *testing.T) {
			record := filepath.Join(t.TempDir(), "fuse-timeout.restore")
			theirs := before + 24
			_, err := withRequestTimeout(time.Duration(ours)*time.Second, record, log, func() error {
				if got, err := readSysctl(defPath); err != nil || got != ours {
					t.Errorf("kernel default while mounting = %d, %v; want %d", got, err, ours)
				}
				prev, o, err := readTimeoutRecord(record)
				if err != nil || prev != before || o != ours {
					t.Errorf("record while mounting = %d %d, %v; want %d %d", prev, o, err, before, ours)
				}
				if changed {
					return writeSysctl(defPath, theirs)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := before
			if changed {
				want = theirs
			}
			if got, err := readSysctlLocked(defPath); err != nil || got != want {
				t.Errorf("kernel default after = %d, %v; want %d", got, err, want)
			}
			if _, err := os.Stat(record); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("record left behind: %v", err)
			}
		})
	}
}

// readSysctlLocked reads a FUSE sysctl holding the host-wide lock that
// mounting processes hold while their timeout is the kernel's default, so
// the value read is nobody's temporary one (other test packages start
// daemons meanwhile).
func readSysctlLocked(path string) (uint64, error) {
	defer lockSysctl(slog.New(slog.DiscardHandler))()
	return readSysctl(path)
}

// writeSysctlLocked writes a FUSE sysctl holding that lock.
func writeSysctlLocked(path string, v uint64) error {
	defer lockSysctl(slog.New(slog.DiscardHandler))()
	return writeSysctl(path, v)
}
