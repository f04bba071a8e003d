package fs

import (
	"errors"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"
)

// alphaBetaFiles are all the files a view of alpha1 and beta1 shows.
var alphaBetaFiles = []string{
	"alpha/SKILL.md",
	"alpha/assets/empty.txt",
	"alpha/references/guide.md",
	"alpha/references/nested/SKILL.md",
	"alpha/scripts/helper",
	"alpha/scripts/run.sh",
	"beta/SKILL.md",
	"beta/notes.txt",
}

// alphaBetaDirs are all the directories of that view.
var alphaBetaDirs = []string{
	".", "alpha", "alpha/assets", "alpha/references", "alpha/references/nested", "alpha/scripts", "beta",
}

// walkAll lists every path of fsys, checking none is hidden.
func walkAll(tb testing.TB, fsys iofs.FS) (files, dirs []string) {
	tb.Helper()
	err := iofs.WalkDir(fsys, ".", func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), HiddenPrefix) {
			tb.Errorf("hidden entry %q is listed", p)
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("walk: %v", err)
	}
	return files, dirs
}

// TestServedTrees runs the io/fs conformance checker on a live mount and on
// the in-process view, then checks that they hold exactly the view: no
// hidden files, no skill of another view.
func TestServedTrees(t *testing.T) {
	st := newStore(t)
	view := View{st.beta1, st.alpha1}
	cases := []struct {
		name string
		fsys func(t *testing.T) iofs.FS
	}{
		{"mount", func(t *testing.T) iofs.FS {
			srv := mountTest(t, Options{})
			setSession(t, srv, "other", View{st.delta, st.gamma1})
			return os.DirFS(setSession(t, srv, "sess", view))
		}},
		{"mount with passthrough", func(t *testing.T) iofs.FS {
			srv := mountTest(t, Options{Passthrough: true})
			return os.DirFS(setSession(t, srv, "sess", view))
		}},
		{"viewfs", func(*testing.T) iofs.FS { return NewViewFS(view) }},
		{"server viewfs", func(t *testing.T) iofs.FS {
			srv := mountTest(t, Options{})
			setSession(t, srv, "sess", view)
			fsys, err := srv.ViewFS("sess")
			if err != nil {
				t.Fatal(err)
			}
			return fsys
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := tc.fsys(t)
			if err := fstest.TestFS(fsys, alphaBetaFiles...); err != nil {
				t.Fatal(err)
			}
			files, dirs := walkAll(t, fsys)
			if !slices.Equal(files, alphaBetaFiles) {
				t.Errorf("files = %q, want %q", files, alphaBetaFiles)
			}
			if !slices.Equal(dirs, alphaBetaDirs) {
				t.Errorf("dirs = %q, want %q", dirs, alphaBetaDirs)
			}
			for _, name := range []string{
				"alpha/.skillfs-meta.json", "alpha/references/.skillfs-partial", ".skillfs",
				"delta", "delta/SKILL.md", "gamma", "other",
			} {
				if _, err := iofs.Stat(fsys, name); !errors.Is(err, iofs.ErrNotExist) {
					t.Errorf("stat %q: err = %v, want not exist", name, err)
				}
				if f, err := fsys.Open(name); !errors.Is(err, iofs.ErrNotExist) {
					if err == nil {
						f.Close()
					}
					t.Errorf("open %q: err = %v, want not exist", name, err)
				}
			}
			data, err := iofs.ReadFile(fsys, "alpha/SKILL.md")
			if err != nil || string(data) != manifest("alpha", "alpha version one") {
				t.Errorf("read alpha/SKILL.md = %q, %v", data, err)
			}
		})
	}
}

// TestRootNotListable checks that the mount's root resolves session ids but
// refuses to list them.
func TestRootNotListable(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	setSession(t, srv, "s1", View{st.alpha1})
	setSession(t, srv, "s2", View{st.beta1})

	if _, err := os.ReadDir(srv.Mountpoint()); !errors.Is(err, syscall.EACCES) {
		t.Errorf("read root: err = %v, want EACCES", err)
	}
	fi, err := os.Stat(srv.Mountpoint())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode(), iofs.ModeDir|0o111; got != want {
		t.Errorf("root mode = %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(srv.Mountpoint(), "s3")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat unknown session: err = %v, want ENOENT", err)
	}
	for _, id := range []string{"s1", "s2"} {
		if fi, err := os.Stat(filepath.Join(srv.Mountpoint(), id)); err != nil || !fi.IsDir() {
			t.Errorf("stat session %q: %v, %v", id, fi, err)
		}
	}
	if got, want := srv.Sessions(), []string{"s1", "s2"}; !slices.Equal(got, want) {
		t.Errorf("sessions = %q, want %q", got, want)
	}
}

// TestNamesOutsideView checks that no path trick reaches a name outside a
// session's view, and that another session is reachable only by its id.
func TestNamesOutsideView(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	a := setSession(t, srv, "sess-a", View{st.alpha1, st.beta1})
	b := setSession(t, srv, "sess-b", View{st.delta, st.gamma1})

	if got, want := readDirNames(t, a), []string{"alpha", "beta"}; !slices.Equal(got, want) {
		t.Errorf("session a lists %q, want %q", got, want)
	}
	if got, want := readDirNames(t, b), []string{"delta", "gamma"}; !slices.Equal(got, want) {
		t.Errorf("session b lists %q, want %q", got, want)
	}

	cases := []struct {
		name string
		path string
		want syscall.Errno
	}{
		{"skill of another session", a + "/delta", syscall.ENOENT},
		{"file of another session's skill", a + "/delta/secret.txt", syscall.ENOENT},
		{"dot-dot into another skill", a + "/alpha/../delta/secret.txt", syscall.ENOENT},
		{"deep dot-dot", a + "/alpha/references/../../delta/secret.txt", syscall.ENOENT},
		{"percent-encoded dot-dot", a + "/%2e%2e/sess-b/delta/secret.txt", syscall.ENOENT},
		{"encoded slash", a + "/alpha/..%2fdelta", syscall.ENOENT},
		{"hidden file in version", a + "/alpha/.skillfs-meta.json", syscall.ENOENT},
		{"hidden file deeper", a + "/alpha/references/.skillfs-partial", syscall.ENOENT},
		{"hidden name in session", a + "/.skillfs", syscall.ENOENT},
		{"unknown session", srv.Mountpoint() + "/sess-c/alpha/SKILL.md", syscall.ENOENT},
		{"prefix of a session id", srv.Mountpoint() + "/sess-/alpha/SKILL.md", syscall.ENOENT},
		{"file as directory", a + "/alpha/SKILL.md/x", syscall.ENOTDIR},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := os.ReadFile(tc.path)
			if !errors.Is(err, tc.want) {
				t.Errorf("read %q: err = %v, want %v", tc.path, err, tc.want)
			}
			if _, err := os.Lstat(tc.path); !errors.Is(err, tc.want) {
				t.Errorf("lstat %q: err = %v, want %v", tc.path, err, tc.want)
			}
		})
	}

	// A session id is a capability: whoever knows it can read that session.
	for _, p := range []string{a + "/../sess-b/delta/secret.txt", a + "/alpha/../../sess-b/delta/secret.txt"} {
		if data, err := os.ReadFile(p); err != nil || string(data) != "only for sessions granted delta\n" {
			t.Errorf("read %q = %q, %v; want the other session's file", p, data, err)
		}
	}
}

// TestModesAndAttrs checks modes, sizes, times and owners against the store.
func TestModesAndAttrs(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{UID: 1234, GID: 5678})
	dir := setSession(t, srv, "sess", View{st.alpha1})

	err := filepath.WalkDir(st.alpha1.Dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(st.alpha1.Dir, p)
		if strings.HasPrefix(d.Name(), HiddenPrefix) {
			return nil
		}
		want, err := os.Lstat(p)
		if err != nil {
			return err
		}
		got, err := os.Lstat(filepath.Join(dir, "alpha", rel))
		if err != nil {
			t.Errorf("lstat %q through the mount: %v", rel, err)
			return nil
		}
		wantMode := iofs.FileMode(0o444)
		switch {
		case want.IsDir():
			wantMode = iofs.ModeDir | 0o555
		case want.Mode()&0o111 != 0:
			wantMode = 0o555
		}
		if got.Mode() != wantMode {
			t.Errorf("%q: mode %v, want %v (stored %v)", rel, got.Mode(), wantMode, want.Mode())
		}
		if !want.IsDir() && got.Size() != want.Size() {
			t.Errorf("%q: size %d, want %d", rel, got.Size(), want.Size())
		}
		if !got.ModTime().Equal(want.ModTime()) {
			t.Errorf("%q: mtime %v, want %v", rel, got.ModTime(), want.ModTime())
		}
		sys := got.Sys().(*syscall.Stat_t)
		if sys.Uid != 1234 || sys.Gid != 5678 {
			t.Errorf("%q: owner %d:%d, want 1234:5678", rel, sys.Uid, sys.Gid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var sess unix.Stat_t
	if err := unix.Stat(dir, &sess); err != nil {
		t.Fatal(err)
	}
	if sess.Mode != unix.S_IFDIR|0o555 || sess.Uid != 1234 || sess.Gid != 5678 {
		t.Errorf("session dir: mode %o owner %d:%d", sess.Mode, sess.Uid, sess.Gid)
	}
	if time.Since(time.Unix(sess.Mtim.Unix())) > time.Minute {
		t.Errorf("session dir mtime %v is not its creation time", time.Unix(sess.Mtim.Unix()))
	}
}

// runFromMount executes a file of the mount. The exec goes through a shell
// that lives elsewhere: a process cannot fork-exec a binary served by its own
// FUSE server without risking a deadlock in the Go runtime, and through the
// shell the kernel still checks the file's execute bits.
func runFromMount(path string, args ...string) *exec.Cmd {
	return exec.Command("/bin/sh", append([]string{"-c", `exec "$0" "$@"`, path}, args...)...)
}

// TestExecScript runs a stored script through the mount.
func TestExecScript(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "sess", View{st.alpha1})
	out, err := runFromMount(filepath.Join(dir, "alpha", "scripts", "run.sh"), "hello").CombinedOutput()
	if err != nil || string(out) != "alpha-ran hello\n" {
		t.Errorf("run script: %q, %v", out, err)
	}
	// A file without execute bits in the store cannot be executed: the shell
	// reports the kernel's EACCES as exit status 126.
	err = runFromMount(filepath.Join(dir, "alpha", "references", "guide.md")).Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 126 {
		t.Errorf("exec non-executable file: err = %v, want exit status 126", err)
	}
}
