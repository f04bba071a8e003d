package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// targetTree is a data directory and an outside directory, with symlinks
// to both, below a fresh temporary directory.
type targetTree struct {
	root, home, outside string
	fence               *fence
	procFD              int
}

func newTargetTree(t *testing.T) *targetTree {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tt := &targetTree{root: root, home: filepath.Join(root, "home"), outside: filepath.Join(root, "outside")}
	for _, dir := range []string{filepath.Join(tt.home, "store"), tt.outside} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"to-home": tt.home, "to-outside": tt.outside, "dangling": filepath.Join(tt.home, "new")} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(tt.home, &st); err != nil {
		t.Fatal(err)
	}
	tt.fence = &fence{home: idOf(&st), fuseDev: ^uint64(0)}
	tt.procFD, err = unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(tt.procFD) })
	return tt
}

// TestOpenTargetResolvesAndCreates: a target reached through a symlink is
// resolved, its missing directories made, and the descriptor is the
// directory named by the resolved path.
func TestOpenTargetResolvesAndCreates(t *testing.T) {
	tt := newTargetTree(t)
	tg, err := openTarget(filepath.Join(tt.root, "to-outside", "box", "skills"), true, tt.fence, tt.procFD)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tg.fd)
	want := filepath.Join(tt.outside, "box", "skills")
	if tg.path != want {
		t.Fatalf("resolved %q, want %q", tg.path, want)
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(tg.fd, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(want, &b); err != nil || idOf(&a) != idOf(&b) {
		t.Fatalf("the descriptor is not %s: %v", want, err)
	}
}

// TestOpenTargetFence: targets in the data directory, however reached, and
// in the daemon's mount are refused, and nothing is created for them.
func TestOpenTargetFence(t *testing.T) {
	tt := newTargetTree(t)
	cases := []struct {
		name, target string
		want         error
	}{
		{"the data directory", tt.home, skills.ErrInvalid},
		{"inside it", filepath.Join(tt.home, "store"), skills.ErrInvalid},
		{"through a symlink", filepath.Join(tt.root, "to-home", "store"), skills.ErrInvalid},
		{"to be created through a symlink", filepath.Join(tt.root, "to-home", "new", "dir"), skills.ErrInvalid},
		{"through a dangling symlink", filepath.Join(tt.root, "dangling", "dir"), skills.ErrInvalid},
		{"the root", "/", skills.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg, err := openTarget(tc.target, true, tt.fence, tt.procFD)
			if err == nil {
				unix.Close(tg.fd)
				t.Fatalf("%s opened as %q", tc.target, tg.path)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.target) {
				t.Fatalf("%v; want %v naming the target", err, tc.want)
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(tt.home, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused target left %s behind: %v", filepath.Join(tt.home, "new"), err)
	}

	// Everything on the mount's device is inside the mount.
	var st unix.Stat_t
	if err := unix.Stat(tt.outside, &st); err != nil {
		t.Fatal(err)
	}
	inMount := &fence{home: tt.fence.home, fuseDev: uint64(st.Dev)}
	_, err := openTarget(filepath.Join(tt.outside, "x"), true, inMount, tt.procFD)
	if !errors.Is(err, skills.ErrInvalid) || !strings.Contains(err.Error(), "daemon's own mount") {
		t.Fatalf("a target on the mount's device: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(tt.outside, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused target was created: %v", err)
	}
}

// TestOpenTargetWithoutCreate: a missing target is not made.
func TestOpenTargetWithoutCreate(t *testing.T) {
	tt := newTargetTree(t)
	_, err := openTarget(filepath.Join(tt.outside, "missing"), false, tt.fence, tt.procFD)
	if !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("missing target without create: %v, want ErrNotFound", err)
	}
	if _, err := os.Lstat(filepath.Join(tt.outside, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the target was created: %v", err)
	}
}
