package integration

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/fs/fusetest"
)

// tmpfsHome puts the env's data directory on a small tmpfs of its own, so
// the test can fill it; unmounted at the end.
func tmpfsHome(t *testing.T, e *env, size string) {
	t.Helper()
	fusetest.Require(t)
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", e.home, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Fatalf("mount a tmpfs data directory: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(e.home, 0); err != nil {
			unix.Unmount(e.home, unix.MNT_DETACH)
		}
	})
}

// fill writes a file until the filesystem at dir is full and returns a
// function that frees the space again.
func fill(t *testing.T, dir string) func() {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			break
		}
	}
	// Whatever partial blocks remain.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
	f.Close()
	return func() {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// A full disk during an import, a first activation and the shutdown: each
// gives a clear error or is kept, nothing is half-written, and nothing is
// lost once the space returns.
func TestDiskFull(t *testing.T) {
	ownIndexOnly(t, "the full disk is the one of the data directory's own index")
	e := newEnv(t)
	tmpfsHome(t, e, "24m")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "notes"), "name: notes\ndescription: read often", nil)
	writeSkill(t, filepath.Join(src, "later"), "name: later\ndescription: first read on a full disk", nil)
	big := filepath.Join(t.TempDir(), "big")
	writeSkill(t, big, "name: big\ndescription: too big for what is left", map[string]string{"asset.txt": strings.Repeat("x", 4<<20)})

	d := e.serve("--examples=false")
	e.ok("skill", "import", src, "--all", "--share", "global")
	s := e.newSession("operator", "--all")
	manifest := filepath.Join(s.Path, "notes", "SKILL.md")
	if _, err := os.ReadFile(manifest); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, e)
	free := fill(t, e.home)

	// An import: a clear error, nothing half-written.
	r := e.run("skill", "import", big)
	if r.code == 0 || !strings.Contains(r.stderr, "no space left") || strings.Contains(r.stderr, e.home) {
		t.Fatalf("import on a full disk: exit %d, %s (want the reason, and no path inside the data directory)", r.code, r.stderr)
	}
	if after := snapshot(t, e); after != before {
		t.Fatalf("a failed import on a full disk changed the catalog or the store:\n%s\n%s", before, after)
	}
	checkNoLeftovers(t, e)

	// A first activation: either it is recorded or the read fails; an
	// agent never gets SKILL.md without the activation being durable.
	_, openErr := os.ReadFile(filepath.Join(s.Path, "later", "SKILL.md"))
	act := e.activationsOf(s.ID)
	if recorded := act.opens("later") > 0; recorded == (openErr != nil) {
		t.Fatalf("first open on a full disk: open error %v, recorded %v", openErr, recorded)
	}
	t.Logf("first activation on a full disk: open error %v", openErr)

	// Later reads that reach skillfs are counted in memory while flushes
	// fail ...
	for range 20 {
		if _, err := fetch(manifest); err != nil {
			t.Fatalf("a later read on a full disk: %v", err)
		}
	}
	time.Sleep(1200 * time.Millisecond) // a flush or two
	if n := e.activationsOf(s.ID).opens("notes"); n != 21 {
		t.Fatalf("opens while the disk is full = %d, want 21", n)
	}
	// ... and kept through a shutdown that cannot store them.
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d on a full disk\n%s", code, d.logs())
	}
	logs := d.logs()
	if !strings.Contains(logs, "opens are kept in memory") {
		t.Fatalf("no flush failed while the disk was full; the test proves nothing:\n%s", logs)
	}
	spilled := strings.Contains(logs, "kept in the journal")
	t.Logf("shutdown on a full disk: journaled %v", spilled)

	// Space returns: everything is there, counted once.
	free()
	for round := range 2 {
		d = e.serve("--examples=false")
		a := e.activationsOf(s.ID)
		if a.opens("notes") != 21 {
			t.Fatalf("restart %d: notes opened %d times, want 21\n%s", round+1, a.opens("notes"), d.logs())
		}
		if spilled && round == 0 && !strings.Contains(d.logs(), "kept in the journal delivered") {
			t.Errorf("the journal was not reported delivered:\n%s", d.logs())
		}
		d.stop()
	}
	d = e.serve("--examples=false")
	defer d.stop()
	if _, err := os.ReadFile(filepath.Join(s.Path, "later", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if a := e.activationsOf(s.ID); !slices.Contains(a.slugs(), "later") {
		t.Fatalf("first activation once space returned: %+v", a.Activated)
	}
	e.ok("skill", "import", big)
}
