package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/fs/fusetest"
	"skillfs/skills"
)

// isMounted reports whether something is mounted at path.
func isMounted(tb testing.TB, path string) bool {
	tb.Helper()
	at, err := mountsAt(path)
	if err != nil {
		tb.Fatal(err)
	}
	return len(at) > 0
}

// waitDone fails the test if wait does not return within d.
func waitDone(tb testing.TB, d time.Duration, wait func()) {
	tb.Helper()
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		tb.Fatalf("still serving after %v", d)
	}
}

func TestUnmountIdle(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "sess", View{st.alpha1})
	if _, err := os.ReadFile(dir + "/alpha/SKILL.md"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Unmount(); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	if isMounted(t, srv.Mountpoint()) {
		t.Error("still mounted after unmount")
	}
	waitDone(t, 5*time.Second, srv.Wait)
	if err := srv.Unmount(); err != nil {
		t.Errorf("second unmount: %v", err)
	}
}

// TestUnmountBusy unmounts while a file is open: the mount point is freed at
// once and serving ends when the file is closed.
func TestUnmountBusy(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "sess", View{st.alpha1})
	h, err := os.Open(dir + "/alpha/references/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Unmount(); err != nil {
		t.Fatalf("unmount while busy: %v", err)
	}
	if isMounted(t, srv.Mountpoint()) {
		t.Error("still mounted after lazy unmount")
	}
	if err := unix.Unlinkat(unix.AT_FDCWD, srv.Mountpoint(), unix.AT_REMOVEDIR); err != nil {
		t.Errorf("remove mount point after lazy unmount: %v", err)
	}
	buf := make([]byte, 64)
	if n, err := h.ReadAt(buf, 0); err != nil && n == 0 {
		t.Errorf("open file after lazy unmount: %v", err)
	}
	h.Close()
	waitDone(t, 5*time.Second, srv.Wait)
}

// staleMount leaves a FUSE mount whose server is gone at dir, as a crashed
// daemon would.
func staleMount(tb testing.TB, dir string) {
	tb.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	data := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := unix.Mount(testFsName, dir, "fuse.skillfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		tb.Fatalf("mount: %v", err)
	}
	unix.Close(fd)
	tb.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if _, err := os.Stat(dir); !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
		tb.Fatalf("stat stale mount: err = %v, want not connected", err)
	}
}

func TestClearStale(t *testing.T) {
	fusetest.Require(t)
	cases := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		want    error
		mounted bool // after ClearStale
	}{
		{"plain directory", func(*testing.T, string) {}, nil, false},
		{"missing path", func(t *testing.T, dir string) { os.Remove(dir) }, nil, false},
		{"stale mount", func(t *testing.T, dir string) { staleMount(t, dir) }, nil, false},
		{"two stale mounts", func(t *testing.T, dir string) { staleMount(t, dir); staleMount(t, dir) }, nil, false},
		{"live mount", func(t *testing.T, dir string) {
			srv, err := Mount(dir, Options{FsName: testFsName})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Unmount() })
		}, skills.ErrExists, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "mnt")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			err := ClearStale(dir)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if got := isMounted(t, dir); got != tc.mounted {
				t.Errorf("mounted = %v after clearing, want %v", got, tc.mounted)
			}
			if tc.name == "stale mount" {
				if _, err := os.ReadDir(dir); err != nil {
					t.Errorf("read cleared mount point: %v", err)
				}
				// A new mount can take its place.
				srv, err := Mount(dir, Options{FsName: testFsName})
				if err != nil {
					t.Fatalf("mount over cleared mount point: %v", err)
				}
				if err := srv.Unmount(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestParseMountinfo(t *testing.T) {
	in := strings.Join([]string{
		`22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw`,
		`36 22 0:40 / /run/skill\040fs/mnt rw,nosuid master:7 propagate_from:2 - fuse.skillfs skillfs rw,user_id=0`,
		`37 22 0:41 /sub /back\134slash\011tab rw - tmpfs none rw`,
		`too short`,
		`38 22 0:42 / /no-separator rw shared:3 ext4 /dev/sdb rw`,
		`39 22 0:43 / /odd\777escape\04 rw - tmpfs tmp\040fs rw`,
		``,
	}, "\n")
	got, err := parseMountinfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []mountEntry{
		{"/", "ext4", "/dev/sda1", "8:1"},
		{"/run/skill fs/mnt", "fuse.skillfs", "skillfs", "0:40"},
		{"/back\\slash\ttab", "tmpfs", "none", "0:41"},
		{`/odd\777escape\04`, "tmpfs", "tmp fs", "0:43"},
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %d entries %q, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw", "/mnt/a b")
	f.Add(`36 22 0:40 / /run/skill\040fs rw - fuse.skillfs skillfs rw`, `back\slash`)
	f.Add("1 2 3 4 5 6 - 7 8 9\n\n- - - - - - - - - -", "\t\n\\040")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, data, mountpoint string) {
		// Any input parses without panicking, into entries of the right shape.
		entries, err := parseMountinfo(strings.NewReader(data))
		if err != nil {
			return
		}
		if len(entries) > strings.Count(data, "\n")+1 {
			t.Fatalf("%d entries from %d lines", len(entries), strings.Count(data, "\n")+1)
		}
		// Whatever the kernel escapes comes back intact.
		if len(mountpoint) > 64<<10 {
			return
		}
		line := fmt.Sprintf("36 35 98:0 / %s rw,noatime master:1 - fuse.skillfs skillfs rw", escapeMountinfo(mountpoint))
		got, err := parseMountinfo(strings.NewReader(line))
		if err != nil || len(got) != 1 || got[0].Mountpoint != mountpoint {
			t.Fatalf("round trip of %q: %+v, %v", mountpoint, got, err)
		}
	})
}
