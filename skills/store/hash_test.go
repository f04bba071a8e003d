package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// encodeTree is the TreeHash encoding as documented, written out by hand
// for a tree, its entries taken in bytewise path order.
func encodeTree(tree fstest.MapFS) string {
	h := sha256.New()
	h.Write([]byte("skillfs-tree-v1\x00"))
	num := func(n int) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(n))
		h.Write(b[:])
	}
	for _, name := range slices.Sorted(maps.Keys(tree)) {
		e := tree[name]
		if e.Mode.IsDir() {
			h.Write([]byte("d-"))
			num(len(name))
			h.Write([]byte(name))
			continue
		}
		if e.Mode&0o100 != 0 {
			h.Write([]byte("fx"))
		} else {
			h.Write([]byte("f-"))
		}
		num(len(name))
		h.Write([]byte(name))
		num(len(e.Data))
		sum := sha256.Sum256(e.Data)
		h.Write(sum[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestTreeHashEncoding(t *testing.T) {
	// In bytewise path order "a-b" sorts between "a" and "a/b", which a
	// per-directory walk would not produce.
	tree := fstest.MapFS{
		"SKILL.md":       skilltest.File(skilltest.DemoManifest),
		"a":              skilltest.Dir(),
		"a-b":            skilltest.File("dash"),
		"a/b":            skilltest.File("slash"),
		"a/empty":        skilltest.Dir(),
		"scripts":        skilltest.Dir(),
		"scripts/run.sh": skilltest.Executable("#!/bin/sh\n"),
	}
	dir := t.TempDir()
	skilltest.WriteDir(t, dir, tree)
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
	wantBytes := int64(len(skilltest.DemoManifest) + len("dash") + len("slash") + len("#!/bin/sh\n"))
	if files != 4 || n != wantBytes {
		t.Errorf("files %d bytes %d, want 4 %d", files, n, wantBytes)
	}
}

func TestTreeHashIdentity(t *testing.T) {
	base := fstest.MapFS{
		"SKILL.md":       skilltest.File(skilltest.DemoManifest),
		"scripts/run.sh": skilltest.Executable("#!/bin/sh\n"),
		"x":              skilltest.File(""),
		"assets":         skilltest.Dir(),
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
			skilltest.WriteDir(tb, dir, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest + " ")})
		}},
		{name: "renamed", change: func(tb testing.TB, dir string) {
			if err := os.Rename(filepath.Join(dir, "x"), filepath.Join(dir, "y")); err != nil {
				tb.Fatal(err)
			}
		}},
		{name: "empty dir added", change: func(tb testing.TB, dir string) {
			skilltest.WriteDir(tb, dir, fstest.MapFS{"assets/more": skilltest.Dir()})
		}},
		{name: "empty file becomes empty dir", change: func(tb testing.TB, dir string) {
			if err := os.Remove(filepath.Join(dir, "x")); err != nil {
				tb.Fatal(err)
			}
			skilltest.WriteDir(tb, dir, fstest.MapFS{"x": skilltest.Dir()})
		}},
		{name: "file moved into a dir", change: func(tb testing.TB, dir string) {
			if err := os.Rename(filepath.Join(dir, "x"), filepath.Join(dir, "assets", "x")); err != nil {
				tb.Fatal(err)
			}
		}},
	}
	ref := t.TempDir()
	skilltest.WriteDir(t, ref, base)
	want, _, _, err := TreeHash(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			skilltest.WriteDir(t, dir, base)
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
	skilltest.WriteDir(t, dir, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest)})
	skilltest.WriteDir(t, dir, fstest.MapFS{"link": skilltest.Symlink("SKILL.md")})
	_, _, _, err := TreeHash(dir)
	var se *skills.SpecialFileError
	if !errors.Is(err, skills.ErrSpecialFile) || !errors.As(err, &se) || se.Path != "link" {
		t.Fatalf("error %v, want a SpecialFileError for link", err)
	}
}
