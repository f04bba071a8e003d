package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/skills"
	"skillfs/skills/skilltest"
	"skillfs/skills/source"
)

// TestRoundTrip takes a skill from a directory into the store, out as a ZIP,
// and back in: the tree hash, bytes, execute bits and mtimes all survive.
func TestRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "demo")
	skilltest.WriteDir(t, src, fstest.MapFS{
		"SKILL.md":          skilltest.File(skilltest.DemoManifest),
		"scripts/run.sh":    {Data: []byte("#!/bin/sh\necho ok\n"), Mode: 0o750},
		"scripts/helper.py": {Data: []byte("print(1)\n"), Mode: 0o640},
		"assets/font.bin":   skilltest.File(string([]byte{0, 1, 2, 255, 254, 0, 0, 7})),
		"assets/empty":      skilltest.Dir(),
		"references/a-b.md": skilltest.File("dash"),
		"references/a/b.md": skilltest.File("slash"),
	})
	old := time.Date(2019, 6, 7, 8, 9, 10, 0, time.UTC)
	for _, p := range []string{"SKILL.md", "scripts/run.sh", "assets/empty", "references"} {
		if err := os.Chtimes(filepath.Join(src, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	s := openTestStore(t)
	st1, err := s.NewStaging()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := source.StageDir(src, filepath.Join(st1, "tree"), skills.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	h1, files, n, err := TreeHash(filepath.Join(st1, "tree"))
	if err != nil {
		t.Fatal(err)
	}
	dir, created, err := s.Publish(filepath.Join(st1, "tree"), "demo", h1, nil)
	if err != nil || !created {
		t.Fatalf("Publish: %v %v", created, err)
	}

	zp := filepath.Join(t.TempDir(), "demo.zip")
	f, err := os.Create(zp)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteZip(f, dir, "demo"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := s.NewStaging()
	if err != nil {
		t.Fatal(err)
	}
	unpacked := filepath.Join(st2, "unpacked")
	if _, err := source.ExtractZip(zp, unpacked, skills.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	cands, _, err := source.Discover(unpacked, 0)
	if err != nil || len(cands) != 1 || cands[0].Rel != "." && cands[0].Rel != "demo" {
		t.Fatalf("Discover = %+v, %v", cands, err)
	}
	tree2 := filepath.Join(st2, "tree")
	res, err := source.StageDir(cands[0].Dir, tree2, skills.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	h2, files2, n2, err := TreeHash(tree2)
	if err != nil {
		t.Fatal(err)
	}
	if h2 != h1 || files2 != files || n2 != n || res.Files != files || res.Bytes != n {
		t.Fatalf("round trip: hash %s/%d/%d (staged %d/%d), want %s/%d/%d", h2, files2, n2, res.Files, res.Bytes, h1, files, n)
	}
	orig, back := skilltest.ReadDir(t, src), skilltest.ReadDir(t, tree2)
	if len(orig) != len(back) {
		t.Fatalf("round trip has %d entries, want %d", len(back), len(orig))
	}
	for p, o := range orig {
		b := back[p]
		if string(b.Data) != string(o.Data) || b.Mode.IsDir() != o.Mode.IsDir() || b.Mode&0o100 != o.Mode&0o100 {
			t.Errorf("%s: %v %q, want %v %q", p, b.Mode, string(b.Data), o.Mode, string(o.Data))
		}
		if b.ModTime.Unix() != o.ModTime.Unix() {
			t.Errorf("%s: mtime %v, want %v", p, b.ModTime.UTC(), o.ModTime.UTC())
		}
	}
	if _, created, err := s.Publish(tree2, "demo", h2, nil); err != nil || created {
		t.Fatalf("re-publishing the round trip: created=%v %v", created, err)
	}
	if err := os.RemoveAll(st1); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(st2); err != nil {
		t.Fatal(err)
	}
	skilltest.AssertOnly(t, filepath.Join(s.Root, ".staging"))
}

func TestWriteZipRefuses(t *testing.T) {
	cases := []struct {
		name    string
		prefix  string
		setup   func(tb testing.TB, dir string)
		wantErr error
	}{
		{name: "symlink in tree", setup: func(tb testing.TB, dir string) {
			skilltest.WriteDir(tb, dir, fstest.MapFS{"l": skilltest.Symlink("SKILL.md")})
		}, wantErr: skills.ErrSpecialFile},
		{name: "escaping prefix", prefix: "../x", setup: func(testing.TB, string) {}, wantErr: skills.ErrUnsafePath},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			skilltest.WriteDir(t, dir, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest)})
			tc.setup(t, dir)
			if err := WriteZip(discard{}, dir, tc.prefix); !errors.Is(err, tc.wantErr) {
				t.Fatalf("WriteZip error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
