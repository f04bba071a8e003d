package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skillfs/skills"
)

// encodeTree is the TreeHash encoding as documented, written out by hand for
// a list of entries already in bytewise path order.
func encodeTree(entries []tfile) string {
	h := sha256.New()
	h.Write([]byte("skillfs-tree-v1\x00"))
	num := func(n int) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(n))
		h.Write(b[:])
	}
	for _, e := range entries {
		if e.name[len(e.name)-1] == '/' {
			p := e.name[:len(e.name)-1]
			h.Write([]byte("d-"))
			num(len(p))
			h.Write([]byte(p))
			continue
		}
		if e.mode&0o100 != 0 {
			h.Write([]byte("fx"))
		} else {
			h.Write([]byte("f-"))
		}
		num(len(e.name))
		h.Write([]byte(e.name))
		num(len(e.body))
		sum := sha256.Sum256([]byte(e.body))
		h.Write(sum[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestTreeHashEncoding(t *testing.T) {
	// Listed in bytewise path order: "a-b" sorts between "a" and "a/b",
	// which a per-directory walk would not produce.
	tree := []tfile{
		{name: "SKILL.md", body: testManifest},
		{name: "a/"},
		{name: "a-b", body: "dash"},
		{name: "a/b", body: "slash"},
		{name: "a/empty/"},
		{name: "scripts/"},
		{name: "scripts/run.sh", body: "#!/bin/sh\n", mode: 0o755},
	}
	dir := t.TempDir()
	writeTree(t, dir, tree...)
	got, files, n, err := TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := encodeTree(tree); got != want {
		t.Errorf("TreeHash = %s, want %s", got, want)
	}
	if len(got) != 64 {
		t.Errorf("hash %q is not 64 hex digits", got)
	}
	wantBytes := int64(len(testManifest) + len("dash") + len("slash") + len("#!/bin/sh\n"))
	if files != 4 || n != wantBytes {
		t.Errorf("files %d bytes %d, want 4 %d", files, n, wantBytes)
	}
}

func TestTreeHashIdentity(t *testing.T) {
	base := []tfile{
		{name: "SKILL.md", body: testManifest},
		{name: "scripts/run.sh", body: "#!/bin/sh\n", mode: 0o755},
		{name: "x", body: ""},
		{name: "assets/"},
	}
	cases := []struct {
		name   string
		change func(tb testing.TB, dir string)
		same   bool
	}{
		{name: "untouched", change: func(testing.TB, string) {}, same: true},
		{name: "mtime", same: true, change: func(tb testing.TB, dir string) {
			old := time.Unix(1e9, 0)
			for _, p := range []string{"SKILL.md", "scripts", "assets"} {
				if err := os.Chtimes(filepath.Join(dir, p), old, old); err != nil {
					tb.Fatal(err)
				}
			}
		}},
		{name: "group and other bits", same: true, change: func(tb testing.TB, dir string) {
			chmod(tb, filepath.Join(dir, "SKILL.md"), 0o600)
			chmod(tb, filepath.Join(dir, "scripts/run.sh"), 0o700)
			chmod(tb, filepath.Join(dir, "assets"), 0o700)
		}},
		{name: "read-only as in the store", same: true, change: func(tb testing.TB, dir string) {
			chmod(tb, filepath.Join(dir, "SKILL.md"), 0o444)
			chmod(tb, filepath.Join(dir, "scripts/run.sh"), 0o555)
		}},
		{name: "execute bit added", change: func(tb testing.TB, dir string) {
			chmod(tb, filepath.Join(dir, "SKILL.md"), 0o744)
		}},
		{name: "execute bit dropped", change: func(tb testing.TB, dir string) {
			chmod(tb, filepath.Join(dir, "scripts/run.sh"), 0o644)
		}},
		{name: "content", change: func(tb testing.TB, dir string) {
			writeTree(tb, dir, tfile{name: "SKILL.md", body: testManifest + " "})
		}},
		{name: "renamed", change: func(tb testing.TB, dir string) {
			if err := os.Rename(filepath.Join(dir, "x"), filepath.Join(dir, "y")); err != nil {
				tb.Fatal(err)
			}
		}},
		{name: "empty dir added", change: func(tb testing.TB, dir string) {
			writeTree(tb, dir, tfile{name: "assets/more/"})
		}},
		{name: "empty file becomes empty dir", change: func(tb testing.TB, dir string) {
			if err := os.Remove(filepath.Join(dir, "x")); err != nil {
				tb.Fatal(err)
			}
			writeTree(tb, dir, tfile{name: "x/"})
		}},
		{name: "file moved into a dir", change: func(tb testing.TB, dir string) {
			if err := os.Rename(filepath.Join(dir, "x"), filepath.Join(dir, "assets", "x")); err != nil {
				tb.Fatal(err)
			}
		}},
	}
	ref := t.TempDir()
	writeTree(t, ref, base...)
	want, _, _, err := TreeHash(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, base...)
			tc.change(t, dir)
			got, _, _, err := TreeHash(dir)
			if err != nil {
				t.Fatal(err)
			}
			if (got == want) != tc.same {
				t.Errorf("hash %s vs %s: same=%v, want %v", got, want, got == want, tc.same)
			}
		})
	}
}

func chmod(tb testing.TB, p string, m os.FileMode) {
	tb.Helper()
	if err := os.Chmod(p, m); err != nil {
		tb.Fatal(err)
	}
}

func TestTreeHashRejectsSymlink(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, tfile{name: "SKILL.md", body: testManifest})
	symlink(t, "SKILL.md", filepath.Join(dir, "link"))
	_, _, _, err := TreeHash(dir)
	var se *skills.SpecialFileError
	if !errors.Is(err, skills.ErrSpecialFile) || !errors.As(err, &se) || se.Path != "link" {
		t.Fatalf("error %v, want a SpecialFileError for link", err)
	}
}
