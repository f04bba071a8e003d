package bind

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"golang.org/x/sys/unix"

	"skillfs/skills"
	"skillfs/skills/skilltest"
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
	skilltest.WriteDir(t, root, fstest.MapFS{
		"home/store": skilltest.Dir(),
		"outside":    skilltest.Dir(),
		"to-home":    skilltest.Symlink(tt.home),
		"to-outside": skilltest.Symlink(tt.outside),
		"dangling":   skilltest.Symlink(filepath.Join(tt.home, "new")),
	})
	var st unix.Stat_t
	if err := unix.Stat(tt.home, &st); err != nil {
		t.Fatal(err)
	}
	tt.fence = &fence{home: idOf(&st), fuseDev: ^uint64(0), homePath: tt.home}
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

// TestOpenTargetCoversDataDirectory: a target that holds the data directory
// (one of its parents, however reached) is refused, since a bind there would
// hide it; a directory merely below such a parent, a sibling, or another
// bind of the parent is not. Where the data directory's path names another
// directory (a sandbox's namespace), nothing is refused for it.
func TestOpenTargetCoversDataDirectory(t *testing.T) {
	tt := newTargetTree(t)
	skilltest.WriteDir(t, tt.outside, fstest.MapFS{"up": skilltest.Symlink(tt.root)})
	for name, target := range map[string]string{
		"the parent":             tt.root,
		"a grandparent":          filepath.Dir(tt.root),
		"the parent via a link":  filepath.Join(tt.outside, "up"),
		"the parent via dot-dot": filepath.Join(tt.outside, ".."),
	} {
		t.Run(name, func(t *testing.T) {
			tg, err := openTarget(target, true, tt.fence, tt.procFD)
			if err == nil {
				unix.Close(tg.fd)
				t.Fatalf("%s opened as %q", target, tg.path)
			}
			if !errors.Is(err, skills.ErrInvalid) || !strings.Contains(err.Error(), "contains the data directory") ||
				!strings.Contains(err.Error(), target) {
				t.Fatalf("%v; want ErrInvalid naming the target and saying it contains the data directory", err)
			}
		})
	}

	ok := func(t *testing.T, f *fence, target string) {
		t.Helper()
		tg, err := openTarget(target, true, f, tt.procFD)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		unix.Close(tg.fd)
	}
	t.Run("a sibling", func(t *testing.T) { ok(t, tt.fence, tt.outside) })
	t.Run("to be created below the parent", func(t *testing.T) { ok(t, tt.fence, filepath.Join(tt.root, "new", "dir")) })
	t.Run("the data directory not at its path here", func(t *testing.T) {
		elsewhere := *tt.fence
		elsewhere.homePath = tt.outside // another directory by that name
		ok(t, &elsewhere, tt.root)
		elsewhere.homePath = filepath.Join(tt.root, "missing")
		ok(t, &elsewhere, tt.root)
	})
	t.Run("another bind of the parent", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("bind mounts need root")
		}
		b := filepath.Join(tt.outside, "b")
		if err := os.Mkdir(b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(tt.root, b, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(b, unix.MNT_DETACH) })
		ok(t, tt.fence, b)
		// What is below it is still the data directory.
		if _, err := openTarget(filepath.Join(b, "home"), false, tt.fence, tt.procFD); !errors.Is(err, skills.ErrInvalid) {
			t.Fatalf("the data directory through another bind of its parent: %v", err)
		}
	})
}
