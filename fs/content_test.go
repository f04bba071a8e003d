package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	skillstore "skillfs/skills/store"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/fs/readbench"
	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// hashVerifier is a Content that checks a version directory the way the
// daemon's catalog does: by hashing it (skillstore.TreeHash) against the hash
// the version is named by. It records the checks it made and the damage it
// found.
type hashVerifier struct {
	mu       sync.Mutex
	want     map[string]string // version directory → its tree hash
	verified map[string]time.Time
	checks   int
	damaged  []string
}

func (v *hashVerifier) Verified(dir string) time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.verified[dir]
}

func (v *hashVerifier) Verify(dir string, changed time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verified[dir].After(changed) {
		return nil
	}
	at := skillstore.ChangeClock()
	v.checks++
	got, _, _, err := skillstore.TreeHash(dir)
	if err == nil && got == v.want[dir] {
		v.verified[dir] = at
		return nil
	}
	v.damaged = append(v.damaged, dir)
	return fmt.Errorf("%s hashes to %s (%v): %w", dir, got, err, skills.ErrDamaged)
}

func (v *hashVerifier) counts() (checks, damaged int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.checks, len(v.damaged)
}

// dropIdle closes the server's idle descriptors, so the next read of a
// file opens it again.
func dropIdle(srv *Server) {
	srv.fds.mu.Lock()
	defer srv.fds.mu.Unlock()
	for srv.fds.nidle > 0 {
		srv.fds.drop(srv.fds.lru.prev)
	}
}

// A backing file whose ctime is later than its version's verification is
// served only if the version verifies again: a change that leaves the
// content alone (a new link) costs one hash and is served, one that changes
// the bytes (even keeping the size) fails with EIO, never a byte of it, and
// the version's other descriptors are dropped; once a good copy is back at
// the same place, reads succeed with the right bytes. Files that did not
// change are served without hashing again.
func TestChangedBackingFileRefused(t *testing.T) {
	files := fstest.MapFS{
		"SKILL.md":  skilltest.File(manifest("ct", "ctime")),
		"a.txt":     skilltest.File("first file\n"),
		"b.txt":     skilltest.File("second file\n"),
		"sub/c.txt": skilltest.File("third file\n"),
	}
	root := t.TempDir()
	dir := writeVersion(t, filepath.Join(root, "ct", "v1"), files)
	hash, _, _, err := skillstore.TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	v := &hashVerifier{want: map[string]string{dir: hash}, verified: map[string]time.Time{}}
	srv := mountTest(t, Options{Content: v})
	mnt := setSession(t, srv, "sess", View{{Slug: "ct", Version: hash, Dir: dir}})
	read := func(rel, want string) {
		t.Helper()
		data, err := readbench.ReadCold(filepath.Join(mnt, "ct", rel))
		if err != nil || string(data) != want {
			t.Fatalf("read %s = %q, %v; want %q", rel, data, err, want)
		}
	}
	wantCounts := func(what string, checks, damaged int) {
		t.Helper()
		if c, d := v.counts(); c != checks || d != damaged {
			t.Fatalf("%s: %d checks, %d found damaged; want %d and %d", what, c, d, checks, damaged)
		}
	}

	// The kernel's clock is coarse: a change made a tick before a check
	// begins may have a later ctime. Past it, a check covers the files.
	nextTick()
	read("a.txt", "first file\n")
	wantCounts("first open of the version", 1, 0)
	nextTick()
	read("SKILL.md", string(files["SKILL.md"].Data))
	dropIdle(srv)
	read("a.txt", "first file\n")
	wantCounts("opens of files unchanged since", 1, 0)

	// A hard link changes a's ctime, not its bytes.
	if err := os.Link(filepath.Join(dir, "a.txt"), filepath.Join(root, "a-link")); err != nil {
		t.Fatal(err)
	}
	dropIdle(srv)
	read("a.txt", "first file\n")
	wantCounts("open after a new link", 2, 0)

	// b's bytes change in place, its size kept; SKILL.md's descriptor is
	// in the cache.
	read("SKILL.md", string(files["SKILL.md"].Data))
	bp := filepath.Join(dir, "b.txt")
	if err := os.Chmod(bp, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bp, []byte("SECOND FILE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := readbench.ReadCold(filepath.Join(mnt, "ct", "b.txt"))
	if !errors.Is(err, syscall.EIO) || len(data) != 0 {
		t.Fatalf("read of a changed file = %q, %v; want no bytes and EIO", data, err)
	}
	if _, d := v.counts(); d == 0 {
		t.Fatal("the changed file was refused, but its version was not checked")
	}
	if n := backingFds(t, dir); n != 0 {
		t.Errorf("%d descriptors on the damaged version are kept", n)
	}

	// The damaged copy goes (as to the quarantine) and a good one is put
	// in its place (as fetched again).
	if err := os.Rename(dir, filepath.Join(root, "quarantined")); err != nil {
		t.Fatal(err)
	}
	writeVersion(t, dir, files)
	read("b.txt", "second file\n")
	read("SKILL.md", string(files["SKILL.md"].Data))
	read("sub/c.txt", "third file\n")
}

// nextTick waits until the clock the kernel stamps changes with is past
// the precise time of the call, so that every change made before is older
// than a check begun after.
func nextTick() {
	for now := time.Now(); !skillstore.ChangeClock().After(now); {
		time.Sleep(time.Millisecond)
	}
}

// Without a Content, files are served as the store holds them: a changed
// file of the same size is read as it now is.
func TestUncheckedBackingFileServed(t *testing.T) {
	dir := writeVersion(t, filepath.Join(t.TempDir(), "u", "v1"), fstest.MapFS{
		"SKILL.md": skilltest.File(manifest("u", "unchecked")),
		"a.txt":    skilltest.File("old\n"),
	})
	srv := mountTest(t, Options{})
	mnt := setSession(t, srv, "sess", View{{Slug: "u", Version: "v1", Dir: dir}})
	p := filepath.Join(dir, "a.txt")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := readbench.ReadCold(filepath.Join(mnt, "u", "a.txt")); err != nil || string(data) != "new\n" {
		t.Fatalf("read = %q, %v", data, err)
	}
}
