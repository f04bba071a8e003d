package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrivateDirChecked: a state directory that is a symbolic link, not a
// directory, or writable by others is refused, saying why; a missing one
// is made 0700.
func TestPrivateDirChecked(t *testing.T) {
	root := t.TempDir()
	made := filepath.Join(root, "a", "state")
	if err := checkPrivateDir(made); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(made); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("made %v, %v; want mode 0700", fi.Mode(), err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(made, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{link: "symbolic link", file: "not a directory", open: "written by others"} {
		if err := checkPrivateDir(dir); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %v, want an error naming it and %q", dir, err, want)
		}
	}
}

// TestWriteDurablyNoFollow: a symbolic link planted at the temporary name
// is removed, not written through.
func TestWriteDurablyNoFollow(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, stateName)
	if err := os.Symlink(victim, path+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := writeDurably(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("%s: %v %v, want a regular file", path, fi, err)
	}
	// The journal's rewrite too.
	jpath := filepath.Join(dir, journalName)
	if err := os.Symlink(victim, jpath+".tmp"); err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(jpath, journalState{}, func() uint64 { return 1 }, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.close()
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the journal wrote through the link: %q", b)
	}
}
