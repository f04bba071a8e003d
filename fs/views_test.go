package fs

import (
	"bytes"
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/skills"
	"skillfs/skills/skilltest"
)

func ino(tb testing.TB, p string) uint64 {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		tb.Fatalf("lstat %q: %v", p, err)
	}
	return st.Ino
}

// TestInodesPerSession checks that two sessions sharing a version see
// different inode numbers, that numbers are stable, and that the version is
// walked once, at first use, for both.
func TestInodesPerSession(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	a := setSession(t, srv, "sess-a", View{st.alpha1, st.beta1})
	b := setSession(t, srv, "sess-b", View{st.alpha1})

	if n := srv.trees.len(); n != 0 {
		t.Fatalf("cached trees = %d before first use, want none (grants are made when reached)", n)
	}

	seen := make(map[uint64]string)
	for _, dir := range []string{a, b} {
		err := filepath.WalkDir(dir, func(p string, _ iofs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			n := ino(t, p)
			if prev, ok := seen[n]; ok {
				t.Errorf("inode %d of %q already used by %q", n, p, prev)
			}
			seen[n] = p
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	srv.trees.mu.Lock()
	ref := srv.trees.m[st.alpha1.Dir]
	srv.trees.mu.Unlock()
	if ref == nil || ref.t.Load() == nil {
		t.Fatal("version tree not walked after use")
	}
	if n := srv.trees.len(); n != 2 {
		t.Errorf("cached trees = %d, want 2 (alpha shared by both sessions, beta)", n)
	}
	if ino(t, a+"/alpha/SKILL.md") == ino(t, b+"/alpha/SKILL.md") {
		t.Error("the same file in two sessions has one inode number")
	}
	first := ino(t, a+"/alpha/references/guide.md")
	if again := ino(t, a+"/alpha/references/guide.md"); again != first {
		t.Errorf("inode changed from %d to %d between two stats", first, again)
	}

	srv.RemoveSession("sess-a")
	srv.RemoveSession("sess-b")
	if n := srv.trees.len(); n != 0 {
		t.Errorf("cached trees after removing every session = %d, want 0", n)
	}
}

// TestRefreshSwapsVersion moves a session to a new version of one skill:
// the new version shows at once despite long cache timeouts, an unchanged
// skill keeps its inodes, and a handle open on the old version keeps reading
// the old content.
func TestRefreshSwapsVersion(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{EntryTimeout: time.Hour, AttrTimeout: time.Hour})
	dir := setSession(t, srv, "sess", View{st.alpha1, st.beta1})

	h, err := os.Open(filepath.Join(dir, "alpha", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	v1 := manifest("alpha", "alpha version one")
	buf := make([]byte, len(v1))
	if _, err := h.ReadAt(buf, 0); err != nil || string(buf) != v1 {
		t.Fatalf("read v1: %q, %v", buf, err)
	}
	oldIno := ino(t, dir+"/alpha/SKILL.md")
	betaIno := ino(t, dir+"/beta/SKILL.md")
	if got := readDirNames(t, dir+"/alpha"); !slices.Equal(got, []string{"SKILL.md", "assets", "references", "scripts"}) {
		t.Fatalf("alpha v1 lists %q", got)
	}
	ino(t, dir+"/alpha/scripts/run.sh") // cache the dentry

	setSession(t, srv, "sess", View{st.beta1, st.alpha2})

	if data, err := os.ReadFile(dir + "/alpha/SKILL.md"); err != nil || string(data) != manifest("alpha", "alpha version two") {
		t.Errorf("SKILL.md after refresh = %q, %v; want version two", data, err)
	}
	if got := readDirNames(t, dir+"/alpha"); !slices.Equal(got, []string{"SKILL.md", "references"}) {
		t.Errorf("alpha after refresh lists %q", got)
	}
	if _, err := os.Stat(dir + "/alpha/scripts/run.sh"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("file of the old version after refresh: err = %v, want ENOENT", err)
	}
	if ino(t, dir+"/alpha/SKILL.md") == oldIno {
		t.Error("a new version kept the old inode number")
	}
	if ino(t, dir+"/beta/SKILL.md") != betaIno {
		t.Error("an unchanged skill changed inode number")
	}
	// Drop the handle's cached pages so the read reaches the daemon.
	if err := unix.Fadvise(int(h.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	clear(buf)
	if _, err := h.ReadAt(buf, 0); err != nil || string(buf) != v1 {
		t.Errorf("old handle after refresh read %q, %v; want version one", buf, err)
	}
}

// TestRevokeAfterRefresh checks that revoking a skill, or removing the
// session, also ends handles still open on versions a refresh replaced,
// pages cached by the kernel included.
func TestRevokeAfterRefresh(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	for _, end := range []struct {
		name string
		fn   func(id string)
	}{
		{"revoke", func(id string) { setSession(t, srv, id, View{st.beta1}) }},
		{"remove session", srv.RemoveSession},
	} {
		t.Run(end.name, func(t *testing.T) {
			dir := setSession(t, srv, end.name, View{st.alpha1, st.beta1})
			h, err := os.Open(dir + "/alpha/references/guide.md")
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			buf := make([]byte, 8)
			if _, err := h.ReadAt(buf, 0); err != nil {
				t.Fatal(err)
			}
			setSession(t, srv, end.name, View{st.alpha2, st.beta1})
			setSession(t, srv, end.name, View{st.alpha1, st.beta1}) // and back: a third version of the lease
			if _, err := h.ReadAt(buf, 0); err != nil {
				t.Fatalf("old version after two refreshes: %v", err)
			}
			end.fn(end.name)
			if _, err := h.ReadAt(buf, 0); !errors.Is(err, syscall.EACCES) {
				t.Errorf("old version after %s: err = %v, want EACCES", end.name, err)
			}
		})
	}
}

// TestRevocation removes a skill from a view: it vanishes from listing and
// lookup at once, open handles fail their next read, and another session
// sharing the version is unaffected.
func TestRevocation(t *testing.T) {
	st := newStore(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	alpha := Skill{Slug: "alpha", Version: "big", Dir: writeVersion(t, filepath.Join(st.root, "alpha", "big"), fstest.MapFS{
		"SKILL.md":                   skilltest.File(manifest("alpha", "big")),
		"assets/big.bin":             skilltest.File(string(big)),
		"references/never-opened.md": skilltest.File("x"),
	})}
	sink := &fakeSink{}
	srv := mountTest(t, Options{Sink: sink, EntryTimeout: time.Hour, AttrTimeout: time.Hour})
	dir := setSession(t, srv, "sess", View{alpha, st.beta1})
	other := setSession(t, srv, "other", View{alpha})

	open := func(p string) *os.File {
		t.Helper()
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	manifestH := open(dir + "/alpha/SKILL.md")
	if _, err := manifestH.Read(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	bigH := open(dir + "/alpha/assets/big.bin")
	if _, err := bigH.ReadAt(make([]byte, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	otherH := open(other + "/alpha/assets/big.bin")
	if _, err := otherH.ReadAt(make([]byte, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	dirH := open(dir + "/alpha")
	readDirNames(t, dir)

	setSession(t, srv, "sess", View{st.beta1})

	if got := readDirNames(t, dir); !slices.Equal(got, []string{"beta"}) {
		t.Errorf("session lists %q after revocation, want [beta]", got)
	}
	for _, p := range []string{"alpha", "alpha/SKILL.md", "alpha/assets/big.bin"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("stat %q after revocation: err = %v, want ENOENT", p, err)
		}
	}
	buf := make([]byte, 4096)
	if _, err := manifestH.ReadAt(buf, 0); !errors.Is(err, syscall.EACCES) {
		t.Errorf("read cached SKILL.md at 0 after revocation: err = %v, want EACCES", err)
	}
	if _, err := bigH.ReadAt(buf, 512<<10); !errors.Is(err, syscall.EACCES) {
		t.Errorf("read big file further on after revocation: err = %v, want EACCES", err)
	}
	if _, err := bigH.ReadAt(buf, 0); !errors.Is(err, syscall.EACCES) {
		t.Errorf("read cached start of big file after revocation: err = %v, want EACCES", err)
	}
	// Names below a directory still held open.
	fd := int(dirH.Fd())
	if _, err := unix.Openat(fd, "references/never-opened.md", unix.O_RDONLY, 0); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("open a new name below the revoked skill: err = %v, want ENOENT", err)
	}
	if _, err := unix.Openat(fd, "SKILL.md", unix.O_RDONLY, 0); !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.ENOENT) {
		t.Errorf("open SKILL.md below the revoked skill: err = %v, want EACCES or ENOENT", err)
	}
	if n := sink.count("sess", "alpha"); n != 1 {
		t.Errorf("activations of the revoked skill = %d, want 1", n)
	}

	// The other session shares the version and keeps it.
	got := make([]byte, len(big))
	if _, err := otherH.ReadAt(got, 0); err != nil || !bytes.Equal(got, big) {
		t.Errorf("other session's handle after revocation: %v", err)
	}

	// Granting the skill again serves it afresh; old handles stay dead.
	setSession(t, srv, "sess", View{st.beta1, alpha})
	if data, err := os.ReadFile(dir + "/alpha/SKILL.md"); err != nil || string(data) != manifest("alpha", "big") {
		t.Errorf("SKILL.md after granting again = %q, %v", data, err)
	}
	if _, err := bigH.ReadAt(buf, 0); !errors.Is(err, syscall.EACCES) {
		t.Errorf("revoked handle after granting again: err = %v, want EACCES", err)
	}
}

// TestRemoveSession checks that a removed session vanishes with its handles
// and leaves other sessions alone.
func TestRemoveSession(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "gone", View{st.alpha1})
	stay := setSession(t, srv, "stay", View{st.alpha1})
	h, err := os.Open(dir + "/alpha/references/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}

	srv.RemoveSession("gone")
	srv.RemoveSession("gone")
	srv.RemoveSession("never-existed")

	if _, err := os.Stat(dir); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat removed session: err = %v, want ENOENT", err)
	}
	if _, err := h.ReadAt(make([]byte, 10), 0); !errors.Is(err, syscall.EACCES) {
		t.Errorf("read handle of removed session: err = %v, want EACCES", err)
	}
	if got := srv.Sessions(); !slices.Equal(got, []string{"stay"}) {
		t.Errorf("sessions = %q, want [stay]", got)
	}
	if _, err := os.ReadFile(stay + "/alpha/references/guide.md"); err != nil {
		t.Errorf("read in the remaining session: %v", err)
	}
	setSession(t, srv, "gone", View{st.beta1})
	if got := readDirNames(t, dir); !slices.Equal(got, []string{"beta"}) {
		t.Errorf("re-created session lists %q, want [beta]", got)
	}
}

// TestViewChurn changes a view over and over while readers walk it, then
// checks the final view is served exactly.
func TestViewChurn(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "sess", View{st.alpha1, st.beta1})
	views := []View{{st.alpha1, st.beta1}, {st.beta1}, {st.alpha2, st.beta1}, {st.gamma1}, {}}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Any error is fine while the view moves; hangs and panics are not.
				os.ReadFile(dir + "/alpha/SKILL.md")
				os.ReadDir(dir)
				os.ReadDir(dir + "/alpha/references")
			}
		})
	}
	for i := range 300 {
		setSession(t, srv, "sess", views[i%len(views)])
	}
	close(stop)
	wg.Wait()

	setSession(t, srv, "sess", View{st.alpha2})
	if got := readDirNames(t, dir); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("final view lists %q, want [alpha]", got)
	}
	if data, err := os.ReadFile(dir + "/alpha/SKILL.md"); err != nil || !strings.Contains(string(data), "version two") {
		t.Errorf("final SKILL.md = %q, %v", data, err)
	}
	if _, err := os.Stat(dir + "/beta"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat skill outside the final view: err = %v, want ENOENT", err)
	}
}

// TestSetSessionInvalid checks that bad ids and views are refused and leave
// the session as it was.
func TestSetSessionInvalid(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "sess", View{st.alpha1})
	cases := []struct {
		name string
		id   string
		view View
		want error
	}{
		{"empty id", "", View{st.beta1}, skills.ErrInvalid},
		{"dot id", ".", View{st.beta1}, skills.ErrInvalid},
		{"dot-dot id", "..", View{st.beta1}, skills.ErrInvalid},
		{"id with slash", "a/b", View{st.beta1}, skills.ErrInvalid},
		{"id with NUL", "a\x00", View{st.beta1}, skills.ErrInvalid},
		{"duplicate slug", "sess", View{st.beta1, st.beta1}, skills.ErrInvalid},
		{"slug with slash", "sess", View{{Slug: "a/b", Dir: st.beta1.Dir}}, skills.ErrInvalid},
		{"dot-dot slug", "sess", View{{Slug: "..", Dir: st.beta1.Dir}}, skills.ErrInvalid},
		{"hidden slug", "sess", View{{Slug: ".skillfs-x", Dir: st.beta1.Dir}}, skills.ErrInvalid},
		{"no directory", "sess", View{{Slug: "beta"}}, skills.ErrInvalid},
		{"missing directory", "sess", View{{Slug: "beta", Dir: filepath.Join(st.root, "nope")}}, skills.ErrNotFound},
		{"directory is a file", "sess", View{{Slug: "beta", Dir: filepath.Join(st.beta1.Dir, "SKILL.md")}}, skills.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := srv.SetSession(tc.id, tc.view); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if got := readDirNames(t, dir); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("session lists %q after refused changes, want [alpha]", got)
	}
	if got := srv.Sessions(); !slices.Equal(got, []string{"sess"}) {
		t.Errorf("sessions = %q after refused changes", got)
	}
}

// TestSessionListingFollowsTheView: the kernel caches directory listings
// (it opens directories without asking the daemon), so a session's listing
// must be dropped whenever its skills change: added, revoked, or moved to
// another version (whose inode number differs).
func TestSessionListingFollowsTheView(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "sess", View{st.alpha1})
	inoOf := func(name string) uint64 {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() == name {
				info, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				return info.Sys().(*syscall.Stat_t).Ino
			}
		}
		return 0
	}
	for range 3 { // listed, and cached
		if got := readDirNames(t, dir); !slices.Equal(got, []string{"alpha"}) {
			t.Fatalf("listing %q", got)
		}
	}
	setSession(t, srv, "sess", View{st.alpha1, st.beta1})
	if got := readDirNames(t, dir); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("listing after adding beta: %q", got)
	}
	before := inoOf("alpha")
	setSession(t, srv, "sess", View{st.alpha2, st.beta1})
	if after := inoOf("alpha"); after == before || after == 0 {
		t.Errorf("alpha's inode in the listing after a new version: %d, before %d", after, before)
	}
	setSession(t, srv, "sess", View{st.beta1})
	if got := readDirNames(t, dir); !slices.Equal(got, []string{"beta"}) {
		t.Errorf("listing after revoking alpha: %q", got)
	}
}

// TestSkillsNotYetReached: a skill of a session that nothing has looked at
// yet holds no grant, is revoked, restored and swapped like any other, and
// a view changing while readers race it leaves no tree behind once the
// sessions are gone.
func TestSkillsNotYetReached(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "s", View{st.alpha1, st.beta1, st.gamma1})
	if _, err := os.ReadFile(filepath.Join(dir, "alpha", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if n := srv.trees.len(); n != 1 {
		t.Fatalf("trees after reading alpha only: %d, want 1", n)
	}
	// beta, never reached, is revoked; gamma stays; alpha moves on.
	if err := srv.SetSession("s", View{st.alpha2, st.gamma1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "beta")); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("stat of a revoked skill never reached: %v, want ENOENT", err)
	}
	if got := listNames(t, dir); !slices.Equal(got, []string{"alpha", "gamma"}) {
		t.Fatalf("listing %q, want [alpha gamma]", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "alpha", "SKILL.md")); err != nil || !strings.Contains(string(b), "alpha version two") {
		t.Fatalf("alpha after the swap: %q, %v", b, err)
	}
	if err := srv.SetSession("s", View{st.alpha2, st.beta1, st.gamma1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(dir, "beta", "SKILL.md")); err != nil {
		t.Fatalf("beta granted again: %v", err)
	}

	// Readers race view changes; afterwards nothing is held.
	views := []View{{st.alpha1, st.beta1}, {st.beta1, st.gamma1}, {st.alpha2}, {st.alpha1, st.beta1, st.gamma1}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				slug := []string{"alpha", "beta", "gamma"}[(r+i)%3]
				os.ReadFile(filepath.Join(dir, slug, "SKILL.md"))
				os.ReadDir(dir)
			}
		}()
	}
	for i := range 200 {
		if err := srv.SetSession("s", views[i%len(views)]); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	srv.RemoveSession("s")
	if n := srv.trees.len(); n != 0 {
		t.Fatalf("trees held after the session is gone: %d, want 0", n)
	}
}

// listNames lists a directory's names, sorted.
func listNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestHeldDirectoryListingsGo: a process holding a directory (a working
// directory, an open descriptor, a bind of it) lists it again from the
// daemon, not from the kernel's cache, once its skill is revoked or its
// session removed: it lists none of the names it could list before.
func TestHeldDirectoryListingsGo(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{EntryTimeout: time.Hour, AttrTimeout: time.Hour})
	dir := setSession(t, srv, "sess", View{st.alpha1, st.beta1})
	relist := func(f *os.File) ([]string, error) {
		t.Helper()
		if _, err := f.Seek(0, 0); err != nil {
			return nil, err
		}
		return f.Readdirnames(-1)
	}
	held := func(p string) *os.File {
		t.Helper()
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if names, err := f.Readdirnames(-1); err != nil || len(names) == 0 {
			t.Fatalf("list %s: %q, %v", p, names, err)
		}
		return f
	}
	refs := held(dir + "/alpha/references")
	setSession(t, srv, "sess", View{st.beta1})
	if names, err := relist(refs); err == nil || len(names) > 0 {
		t.Errorf("a held folder of a revoked skill lists %q, %v; want an error and no names", names, err)
	}
	sess := held(dir)
	srv.RemoveSession("sess")
	if names, err := relist(sess); err == nil || len(names) > 0 {
		t.Errorf("a held removed session lists %q, %v; want an error and no names", names, err)
	}
}
