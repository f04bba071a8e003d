package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skillfs/skills"
	"skillfs/skills/source"
)

// TestRoundTrip takes a skill from a directory into the store, out as a ZIP,
// and back in: the tree hash, bytes, execute bits and mtimes all survive.
func TestRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "demo")
	writeTree(t, src,
		tfile{name: "SKILL.md", body: testManifest},
		tfile{name: "scripts/run.sh", body: "#!/bin/sh\necho ok\n", mode: 0o750},
		tfile{name: "scripts/helper.py", body: "print(1)\n", mode: 0o640},
		tfile{name: "assets/font.bin", body: string([]byte{0, 1, 2, 255, 254, 0, 0, 7})},
		tfile{name: "assets/empty/"},
		tfile{name: "references/a-b.md", body: "dash"},
		tfile{name: "references/a/b.md", body: "slash"},
	)
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
	orig, back := readTree(t, src), readTree(t, tree2)
	if len(orig) != len(back) {
		t.Fatalf("round trip has %d entries, want %d", len(back), len(orig))
	}
	for p, o := range orig {
		b := back[p]
		if b.body != o.body || b.mode.IsDir() != o.mode.IsDir() || b.mode&0o100 != o.mode&0o100 {
			t.Errorf("%s: %v %q, want %v %q", p, b.mode, b.body, o.mode, o.body)
		}
		if b.mtime != o.mtime {
			t.Errorf("%s: mtime %v, want %v", p, time.Unix(b.mtime, 0).UTC(), time.Unix(o.mtime, 0).UTC())
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
	assertOnly(t, filepath.Join(s.Root, ".staging"))
}

func TestWriteZipRefuses(t *testing.T) {
	cases := []struct {
		name    string
		prefix  string
		setup   func(tb testing.TB, dir string)
		wantErr error
	}{
		{name: "symlink in tree", setup: func(tb testing.TB, dir string) { symlink(tb, "SKILL.md", filepath.Join(dir, "l")) }, wantErr: skills.ErrSpecialFile},
		{name: "escaping prefix", prefix: "../x", setup: func(testing.TB, string) {}, wantErr: skills.ErrUnsafePath},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tfile{name: "SKILL.md", body: testManifest})
			tc.setup(t, dir)
			if err := WriteZip(discard{}, dir, tc.prefix); !errors.Is(err, tc.wantErr) {
				t.Fatalf("WriteZip error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
