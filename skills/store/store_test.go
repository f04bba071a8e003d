package store

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"skillfs/skills"
	"skillfs/skills/skilltest"
	"skillfs/skills/source"
)

// stageInto stages a fresh tree into the store's staging area and returns
// the staged directory and its hash.
func stageInto(tb testing.TB, s *Store, tree fstest.MapFS) (string, string) {
	tb.Helper()
	src := tb.TempDir()
	skilltest.WriteDir(tb, src, tree)
	st, err := s.NewStaging()
	if err != nil {
		tb.Fatal(err)
	}
	// Stage straight into the fresh staging directory, so Publish
	// consumes all of it.
	dst := st
	if _, err := source.StageDir(src, dst, skills.DefaultLimits()); err != nil {
		tb.Fatal(err)
	}
	h, _, _, err := TreeHash(dst)
	if err != nil {
		tb.Fatal(err)
	}
	return dst, h
}

// openTestStore opens a store in a temporary directory and removes every
// published version at the end: they are read-only, so the temporary
// directory could not be cleaned up otherwise without root.
func openTestStore(tb testing.TB) *Store {
	tb.Helper()
	s, err := Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		vs, err := s.Versions()
		if err != nil {
			tb.Error(err)
			return
		}
		for slug, hashes := range vs {
			for _, h := range hashes {
				if err := s.RemoveVersion(slug, h); err != nil {
					tb.Error(err)
				}
			}
		}
	})
	return s
}

var demoTree = fstest.MapFS{
	"SKILL.md":       skilltest.File(skilltest.DemoManifest),
	"scripts/run.sh": skilltest.Executable("#!/bin/sh\n"),
	"assets/empty":   skilltest.Dir(),
}

func TestOpenStoreSweepsStaging(t *testing.T) {
	root := t.TempDir()
	skilltest.WriteDir(t, root, fstest.MapFS{
		".staging/stage-1/tree/SKILL.md": skilltest.File("half"),
		".staging/stage-2":               skilltest.Dir(),
	})
	// A crash in the middle of publishing can leave read-only leftovers.
	chmod(t, filepath.Join(root, ".staging/stage-1/tree"), 0o555)
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	skilltest.AssertOnly(t, filepath.Join(root, ".staging"))
	skilltest.AssertOnly(t, filepath.Join(root, "skills"))
	if s.Root != root {
		t.Errorf("Root %q, want %q", s.Root, root)
	}
}

func TestPublish(t *testing.T) {
	s := openTestStore(t)
	staged, h := stageInto(t, s, demoTree)
	dir, created, err := s.Publish(staged, "demo", h, nil)
	if err != nil || !created {
		t.Fatalf("Publish = %q, %v, %v", dir, created, err)
	}
	if dir != s.VersionPath("demo", h) {
		t.Errorf("published at %q, VersionPath says %q", dir, s.VersionPath("demo", h))
	}
	skilltest.AssertAbsent(t, staged)
	got := skilltest.ReadDir(t, dir)
	want := map[string]os.FileMode{
		"SKILL.md":       0o444,
		"scripts":        os.ModeDir | 0o555,
		"scripts/run.sh": 0o555,
		"assets":         os.ModeDir | 0o555,
		"assets/empty":   os.ModeDir | 0o555,
	}
	for p, m := range want {
		if got[p].Mode != m {
			t.Errorf("%s mode %v, want %v", p, got[p].Mode, m)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode() != os.ModeDir|0o555 {
		t.Errorf("version dir: %v %v", fi.Mode(), err)
	}
	if h2, _, _, err := TreeHash(dir); err != nil || h2 != h {
		t.Errorf("published tree hashes to %s (%v), want %s", h2, err, h)
	}

	// The same content again, from another source, is no new version.
	again, h2 := stageInto(t, s, demoTree)
	if h2 != h {
		t.Fatalf("same content hashed to %s and %s", h, h2)
	}
	dir2, created, err := s.Publish(again, "demo", h2, nil)
	if err != nil || created || dir2 != dir {
		t.Fatalf("second Publish = %q, %v, %v", dir2, created, err)
	}
	skilltest.AssertAbsent(t, again)

	// Different content is a second version beside the first.
	bigger := maps.Clone(demoTree)
	bigger["new.md"] = skilltest.File("n")
	other, h3 := stageInto(t, s, bigger)
	if _, created, err := s.Publish(other, "demo", h3, nil); err != nil || !created {
		t.Fatalf("third Publish: %v %v", created, err)
	}
	vs, err := s.Versions()
	if err != nil {
		t.Fatal(err)
	}
	wantHashes := []string{h, h3}
	slices.Sort(wantHashes)
	if len(vs) != 1 || !slices.Equal(vs["demo"], wantHashes) {
		t.Errorf("Versions = %v, want demo: %v", vs, wantHashes)
	}

	if err := s.RemoveVersion("demo", h); err != nil {
		t.Fatal(err)
	}
	skilltest.AssertAbsent(t, dir)
	if err := s.RemoveVersion("demo", h); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("removing twice: %v, want ErrNotFound", err)
	}
	if err := s.RemoveVersion("demo", h3); err != nil {
		t.Fatal(err)
	}
	skilltest.AssertAbsent(t, filepath.Join(s.Root, "skills", "demo"))
	if vs, err := s.Versions(); err != nil || len(vs) != 0 {
		t.Errorf("Versions after removal = %v, %v", vs, err)
	}
	skilltest.AssertOnly(t, filepath.Join(s.Root, ".staging"))
}

func TestPublishRefuses(t *testing.T) {
	s := openTestStore(t)
	cases := []struct {
		name    string
		slug    string
		hash    func(real string) string
		outside bool
		wantErr error
	}{
		{name: "empty slug", slug: "", wantErr: skills.ErrUnsafePath},
		{name: "slug with slash", slug: "a/b", wantErr: skills.ErrUnsafePath},
		{name: "slug parent", slug: "..", wantErr: skills.ErrUnsafePath},
		{name: "slug with parent inside", slug: "a..b", wantErr: skills.ErrUnsafePath},
		{name: "slug with backslash", slug: `a\b`, wantErr: skills.ErrUnsafePath},
		{name: "hidden slug", slug: ".staging", wantErr: skills.ErrUnsafePath},
		{name: "empty hash", slug: "demo", hash: func(string) string { return "" }, wantErr: skills.ErrUnsafePath},
		{name: "hash with slash", slug: "demo", hash: func(string) string { return "../../x" }, wantErr: skills.ErrUnsafePath},
		{name: "hash of other content", slug: "demo", hash: func(string) string { return "0000000000000000000000000000000000000000000000000000000000000000" }, wantErr: skills.ErrInvalid},
		{name: "staged outside the staging area", slug: "demo", outside: true, wantErr: skills.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			staged, h := stageInto(t, s, demoTree)
			if tc.outside {
				staged = t.TempDir()
				skilltest.WriteDir(t, staged, demoTree)
			}
			if tc.hash != nil {
				h = tc.hash(h)
			}
			_, _, err := s.Publish(staged, tc.slug, h, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Publish error %v, want %v", err, tc.wantErr)
			}
			if errors.Is(err, skills.ErrUnsafePath) && s.VersionPath(tc.slug, h) != "" {
				t.Errorf("VersionPath accepted %q %q", tc.slug, h)
			}
			if tc.outside {
				if _, err := os.Stat(filepath.Join(staged, "SKILL.md")); err != nil {
					t.Errorf("a tree outside the store was touched: %v", err)
				}
			}
			if err := s.Sweep(); err != nil {
				t.Fatal(err)
			}
			if vs, err := s.Versions(); err != nil || len(vs) != 0 {
				t.Errorf("Versions = %v, %v", vs, err)
			}
		})
	}
}

func TestPublishRace(t *testing.T) {
	s := openTestStore(t)
	const n = 8
	staged := make([]string, n)
	var h string
	for i := range staged {
		staged[i], h = stageInto(t, s, demoTree)
	}
	var wg sync.WaitGroup
	created := make([]bool, n)
	errs := make([]error, n)
	for i := range staged {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, created[i], errs[i] = s.Publish(staged[i], "demo", h, nil)
		}()
	}
	wg.Wait()
	wins := 0
	for i := range staged {
		if errs[i] != nil {
			t.Errorf("publish %d: %v", i, errs[i])
		}
		if created[i] {
			wins++
		}
		skilltest.AssertAbsent(t, staged[i])
	}
	if wins != 1 {
		t.Errorf("%d publishes created the version, want 1", wins)
	}
	if got, _, _, err := TreeHash(s.VersionPath("demo", h)); err != nil || got != h {
		t.Errorf("published version hashes to %s, %v", got, err)
	}
}

// TestStoreNames: a slug or hash that could leave its folder or name a
// hidden one has no version path.
func TestStoreNames(t *testing.T) {
	s := &Store{Root: "/store"}
	for _, bad := range []string{"", ".", "..", ".hidden", "a/b", `a\b`, "a\x00b", "a..b", "a.."} {
		if p := s.VersionPath(bad, "h"); p != "" {
			t.Errorf("slug %q: path %q, want none", bad, p)
		}
		if p := s.VersionPath("s", bad); p != "" {
			t.Errorf("hash %q: path %q, want none", bad, p)
		}
	}
	for _, good := range []string{"a", "pdf-tools", "a.b", "v1.2", "x_y"} {
		if p, want := s.VersionPath(good, "h1"), "/store/skills/"+good+"/h1"; p != want {
			t.Errorf("slug %q: path %q, want %q", good, p, want)
		}
	}
}

// Replace swaps a good copy in for a damaged one in one exchange: the
// version's directory is never missing, holds the good bytes after, and the
// damaged copy is in the quarantine with its reason, not deleted.
func TestReplaceDamagedCopy(t *testing.T) {
	s := openTestStore(t)
	tree := fstest.MapFS{"SKILL.md": skilltest.File("---\nname: demo\ndescription: d\n---\n"), "notes.md": skilltest.File("good")}
	staged, h := stageInto(t, s, tree)
	dir, _, err := s.Publish(staged, "demo", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(dir, "notes.md")
	if err := os.Chmod(notes, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notes, []byte("BAD!"), 0o644); err != nil {
		t.Fatal(err)
	}
	good, h2 := stageInto(t, s, tree)
	if h2 != h {
		t.Fatalf("the same tree hashed to %s and %s", h, h2)
	}
	got, q, err := s.Replace(good, "demo", h, nil, "damaged in a test")
	if err != nil || got != dir || q == "" {
		t.Fatalf("Replace = %q, %q, %v; want %q and a quarantine path", got, q, err, dir)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "good" {
		t.Errorf("notes.md after the replace: %q, %v", b, err)
	}
	if h3, _, _, err := TreeHash(dir); err != nil || h3 != h {
		t.Errorf("the version hashes to %s after the replace (%v), want %s", h3, err, h)
	}
	if b, err := os.ReadFile(filepath.Join(s.Root, strings.TrimPrefix(q, "store/"), "notes.md")); err != nil || string(b) != "BAD!" {
		t.Errorf("the damaged copy in the quarantine: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(s.Root, strings.TrimPrefix(q, "store/")+".reason")); err != nil || !strings.Contains(string(b), "damaged in a test") {
		t.Errorf("the quarantine's reason: %q, %v", b, err)
	}
	skilltest.AssertAbsent(t, good)
	// A tree that does not hash to the version replaces nothing.
	wrong, _ := stageInto(t, s, fstest.MapFS{"SKILL.md": skilltest.File("---\nname: demo\ndescription: other\n---\n")})
	if _, _, err := s.Replace(wrong, "demo", h, nil, "x"); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("Replace with a tree of another hash: %v, want ErrInvalid", err)
	}
	if b, _ := os.ReadFile(notes); string(b) != "good" {
		t.Errorf("a refused replace changed the version: %q", b)
	}
}
