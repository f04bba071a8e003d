package confine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// rootsOf opens dirs as the import roots.
func rootsOf(t testing.TB, dirs ...string) *ImportRoots {
	t.Helper()
	r, err := OpenImportRoots(dirs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOpenImportRoots: a root is an existing folder, never /proc, /sys or
// /dev or a folder in them, however it is spelled; the error names it.
func TestOpenImportRoots(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	skilltest.WriteDir(t, tmp, fstest.MapFS{
		"file":      skilltest.File("x"),
		"proc-link": skilltest.Symlink("/proc"),
		"sys-link":  skilltest.Symlink("/sys/kernel"),
	})
	for _, tc := range []struct {
		root string
		want error // nil: accepted
	}{
		{tmp, nil},
		{"/", nil},
		{filepath.Join(tmp, "missing"), skills.ErrNotFound},
		{file, skills.ErrInvalid},
		{"", skills.ErrInvalid},
		{"/proc", ErrKernelRoot},
		{"/proc/self", ErrKernelRoot},
		{"/proc/self/fd", ErrKernelRoot},
		{"/proc/self/cwd", ErrKernelRoot}, // a magic link to a folder elsewhere
		{"/proc/self/root/tmp", ErrKernelRoot},
		{"/sys", ErrKernelRoot},
		{"/sys/kernel", ErrKernelRoot},
		{"/dev", ErrKernelRoot},
		{"/dev/shm", ErrKernelRoot},
		{"/dev/pts", ErrKernelRoot},
		{filepath.Join(tmp, "proc-link"), ErrKernelRoot},
		{filepath.Join(tmp, "sys-link"), ErrKernelRoot},
	} {
		if tc.root == "/dev/shm" || tc.root == "/dev/pts" {
			if _, err := os.Stat(tc.root); err != nil {
				continue
			}
		}
		r, err := OpenImportRoots([]string{tmp, tc.root})
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("root %q: %v", tc.root, err)
		case tc.want == nil && len(r.Paths()) != 2:
			t.Errorf("root %q: roots %q", tc.root, r.Paths())
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("root %q: %v, want %v", tc.root, err, tc.want)
		case tc.want != nil && !strings.Contains(err.Error(), `"`+tc.root+`"`):
			t.Errorf("root %q: the error %q does not name it", tc.root, err)
		}
	}
	t.Chdir(tmp)
	if r, err := OpenImportRoots([]string{"."}); err != nil || r.Paths()[0] != tmp {
		t.Errorf("a relative root: %v, %v; want %s", r.Paths(), err, tmp)
	}
}

// TestImportRootsContain: what a path reaches, links followed, is inside a
// root or refused; a link in a root that leads out is out, also when what
// it leads to is missing; a missing path inside is inside (its read fails
// as it would); /proc, /sys and /dev are out even under "/".
func TestImportRootsContain(t *testing.T) {
	base := t.TempDir()
	root, out := filepath.Join(base, "root"), filepath.Join(base, "out")
	skilltest.WriteDir(t, out, skilltest.Skill("name: out\ndescription: OUTSIDE-SECRET", "body\n", nil))
	skilltest.WriteDir(t, root, fstest.MapFS{
		"skill/SKILL.md": skilltest.File(skilltest.Manifest("name: in\ndescription: inside", "body\n")),
		"rel":            skilltest.Symlink("skill"),
		"abs":            skilltest.Symlink(filepath.Join(root, "skill")),
		"out":            skilltest.Symlink(out),
		"outfile":        skilltest.Symlink(filepath.Join(out, "SKILL.md")),
		"dangling":       skilltest.Symlink(filepath.Join(out, "missing")),
		"up":             skilltest.Symlink("../out"),
		"etc":            skilltest.Symlink("/etc"),
		"self":           skilltest.Symlink("/proc/self"),
	})
	r := rootsOf(t, root)
	for p, in := range map[string]bool{
		root:                                  true,
		filepath.Join(root, "skill"):          true,
		filepath.Join(root, "skill/SKILL.md"): true,
		filepath.Join(root, "rel"):            true,
		filepath.Join(root, "abs/SKILL.md"):   true,
		filepath.Join(root, "missing"):        true,
		filepath.Join(root, "skill/no/such"):  true,
		filepath.Join(root, "out"):            false,
		filepath.Join(root, "out/SKILL.md"):   false,
		filepath.Join(root, "out/missing"):    false,
		filepath.Join(root, "outfile"):        false,
		filepath.Join(root, "dangling"):       false,
		filepath.Join(root, "up/SKILL.md"):    false,
		filepath.Join(root, "etc/shadow"):     false,
		filepath.Join(root, "etc/no-such"):    false,
		filepath.Join(root, "self/environ"):   false,
		out:                                   false,
		base:                                  false,
		"/":                                   false,
		"/etc/shadow":                         false,
		"/etc/no-such-file":                   false,
		"/no/such/folder":                     false,
		"/proc/self/environ":                  false,
	} {
		if err := r.Contains(p); (err == nil) != in {
			t.Errorf("Contains(%s) = %v, want inside: %v", p, err, in)
		}
	}
	// "/" as a root holds everything but the kernel's folders.
	all := rootsOf(t, "/")
	for p, in := range map[string]bool{
		"/etc/hostname":                true,
		out:                            true,
		"/no/such/folder":              true,
		"/proc/self/environ":           false,
		"/proc/self/root/etc/hostname": false, // /etc/hostname, through /proc
		"/proc/1":                      false,
		"/proc":                        false,
		"/sys/kernel":                  false,
		"/dev/null":                    false,
		"/dev/shm/x":                   false,
	} {
		if err := all.Contains(p); (err == nil) != in {
			t.Errorf("under /: Contains(%s) = %v, want inside: %v", p, err, in)
		}
	}
	// No roots: nothing is inside.
	for _, none := range []*ImportRoots{nil, rootsOf(t)} {
		if err := none.Contains(root); err == nil {
			t.Errorf("no roots: %s is inside", root)
		}
	}
	// A root swapped since the start for a link to another folder is not
	// taken for the root: the root is the folder configured, by device and
	// inode, wherever it went.
	if err := os.Rename(root, root+".old"); err != nil {
		t.Fatal(err)
	}
	skilltest.WriteDir(t, base, fstest.MapFS{"root": skilltest.Symlink(out)})
	if err := r.Contains(filepath.Join(root, "SKILL.md")); err == nil {
		t.Errorf("a root swapped for a link to %s still holds what the link reaches", out)
	}
	if err := r.Contains(filepath.Join(root+".old", "skill")); err != nil {
		t.Errorf("the root moved: %v", err)
	}
}
