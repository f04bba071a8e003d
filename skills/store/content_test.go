package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// chunkStore is a content-addressed chunk store in memory, as a shared
// index keeps one.
type chunkStore map[string][]byte

// put splits data into chunks of size n and returns their sums.
func (cs chunkStore) put(data []byte, n int) []string {
	var sums []string
	for len(data) > 0 {
		c := data[:min(n, len(data))]
		data = data[len(c):]
		s := sha256.Sum256(c)
		sum := hex.EncodeToString(s[:])
		cs[sum] = bytes.Clone(c)
		sums = append(sums, sum)
	}
	return sums
}

func (cs chunkStore) get(sum string) ([]byte, error) {
	if c, ok := cs[sum]; ok {
		return c, nil
	}
	return nil, skills.ErrNotFound
}

// manifestOf reads a tree with ReadContent, as an upload does, and lists
// it as a shared index would, its bytes in cs.
func manifestOf(t *testing.T, dir string, cs chunkStore, chunk int) []ContentEntry {
	t.Helper()
	files, err := ReadContent(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]ContentEntry, len(files))
	for i, f := range files {
		out[i] = ContentEntry{Path: f.Path, Dir: f.Dir, Exec: f.Exec, MTime: f.MTime}
		if f.Dir {
			continue
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[i].Size = int64(len(data))
		out[i].Chunks = cs.put(data, chunk)
	}
	return out
}

// sampleTree writes a tree with everything a version may hold: nested and
// empty directories, an executable, an empty file, names that sort around
// '/', and the store's metadata file (which is no content).
func sampleTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"SKILL.md":          "---\nname: x\n---\nbody\n",
		"a/b.txt":           strings.Repeat("0123456789", 100),
		"a-b":               "sorts before a/",
		"scripts/run.sh":    "#!/bin/sh\necho hi\n",
		"empty.txt":         "",
		"deep/er/than.txt":  "x",
		skills.MetaFileName: "{}",
	}
	tree := skilltest.Files(files)
	tree["empty-dir"] = skilltest.Dir()
	skilltest.WriteDir(t, dir, tree)
	old := time.Date(2024, 1, 2, 3, 4, 5, 600, time.UTC)
	for _, p := range []string{"a/b.txt", "a", "empty-dir", "scripts/run.sh"} {
		if err := os.Chtimes(filepath.Join(dir, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A tree listed for upload and written back from its chunks is the same
// tree: the same hash, modes and times, and the metadata file left out.
func TestContentRoundTrip(t *testing.T) {
	src := sampleTree(t)
	want, _, _, err := TreeHash(src)
	if err != nil {
		t.Fatal(err)
	}
	cs := chunkStore{}
	entries := manifestOf(t, src, cs, 7)
	for _, e := range entries {
		if e.Path == skills.MetaFileName {
			t.Fatalf("the metadata file is listed as content")
		}
	}
	dst := t.TempDir()
	got, err := WriteContent(dst, entries, cs.get)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("written tree hashes to %s, the source to %s", got, want)
	}
	if again, _, _, err := TreeHash(dst); err != nil || again != want {
		t.Fatalf("TreeHash of the written tree = %s, %v; want %s", again, err, want)
	}
	for _, rel := range []string{"a/b.txt", "a", "empty-dir", "scripts/run.sh", "empty.txt"} {
		a, err := os.Stat(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.Stat(filepath.Join(dst, rel))
		if err != nil {
			t.Fatal(err)
		}
		if !a.ModTime().Equal(b.ModTime()) || a.Mode() != b.Mode() {
			t.Errorf("%s: written %v %v, source %v %v", rel, b.Mode(), b.ModTime(), a.Mode(), a.ModTime())
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, skills.MetaFileName)); err == nil {
		t.Error("the metadata file was written as content")
	}
}

// A chunk whose bytes do not match its name, a missing one, or a listing
// that does not add up fails the write as damage.
func TestWriteContentRefusesDamage(t *testing.T) {
	src := sampleTree(t)
	cases := map[string]func(entries []ContentEntry, cs chunkStore) error{
		"flipped byte": func(entries []ContentEntry, cs chunkStore) error {
			for _, e := range entries {
				if e.Path == "a/b.txt" {
					cs[e.Chunks[1]][0] ^= 1
				}
			}
			return skills.ErrDamaged
		},
		"short file": func(entries []ContentEntry, cs chunkStore) error {
			for i := range entries {
				if entries[i].Path == "a/b.txt" {
					entries[i].Size++
				}
			}
			return skills.ErrDamaged
		},
		"long file": func(entries []ContentEntry, cs chunkStore) error {
			for i := range entries {
				if entries[i].Path == "a/b.txt" {
					entries[i].Size--
				}
			}
			return skills.ErrDamaged
		},
		"missing chunk": func(entries []ContentEntry, cs chunkStore) error {
			for _, e := range entries {
				if e.Path == "SKILL.md" {
					delete(cs, e.Chunks[0])
				}
			}
			return skills.ErrNotFound
		},
		"out of order": func(entries []ContentEntry, cs chunkStore) error {
			entries[0], entries[1] = entries[1], entries[0]
			return skills.ErrDamaged
		},
		"escaping path": func(entries []ContentEntry, cs chunkStore) error {
			entries[0].Path = "../escaped"
			return skills.ErrDamaged
		},
		"reserved name": func(entries []ContentEntry, cs chunkStore) error {
			entries[len(entries)-1].Path = "zz/" + skills.MetaFileName
			return skills.ErrDamaged
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			cs := chunkStore{}
			entries := manifestOf(t, src, cs, 64)
			want := damage(entries, cs)
			parent := t.TempDir()
			dst := filepath.Join(parent, "dst")
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := WriteContent(dst, entries, cs.get); !errors.Is(err, want) {
				t.Fatalf("WriteContent = %v, want %v", err, want)
			}
			if ents, _ := os.ReadDir(parent); len(ents) != 1 {
				t.Fatalf("something was written beside the destination: %v", ents)
			}
		})
	}
}

// The checker lets through exactly the listings TreeHash could have made.
func TestContentChecker(t *testing.T) {
	good := [][2]string{{"a", "d"}, {"a-b", "f"}, {"a/b", "f"}, {"a/c", "d"}, {"a/c/d", "f"}, {"b", "f"}}
	var c ContentChecker
	for _, e := range good {
		if err := c.Next(e[0], e[1] == "d"); err != nil {
			t.Fatalf("Next(%q) = %v", e[0], err)
		}
	}
	bad := map[string][]string{
		"not clean":           {"a//b"},
		"dot":                 {"./a"},
		"absolute":            {"/a"},
		"parent":              {"../a"},
		"empty":               {""},
		"reserved":            {".skillfs-x"},
		"repeated":            {"a", "a"},
		"unordered":           {"b", "a"},
		"directory not given": {"a/b"},
		"file as directory":   {"a", "a/b"}, // a is listed as a file
	}
	for name, paths := range bad {
		var c ContentChecker
		var err error
		for _, p := range paths {
			if err = c.Next(p, false); err != nil {
				break
			}
		}
		if err == nil {
			t.Errorf("%s: %q let through", name, paths)
		}
	}
}

// VersionOf inverts VersionPath and nothing else.
func TestVersionOf(t *testing.T) {
	s := &Store{Root: "/data/store"}
	if slug, hash, ok := s.VersionOf(s.VersionPath("pdf", "abc")); !ok || slug != "pdf" || hash != "abc" {
		t.Errorf("VersionOf(VersionPath) = %q %q %v", slug, hash, ok)
	}
	for _, p := range []string{"/data/store/skills/pdf", "/data/store/skills/pdf/abc/x", "/other/skills/pdf/abc",
		"/data/store/skills/../abc", "/data/store/skills/pdf/.hidden"} {
		if _, _, ok := s.VersionOf(p); ok {
			t.Errorf("VersionOf(%q) is a version", p)
		}
	}
}

// FuzzWriteContent writes listings made from arbitrary text: whatever it
// says, nothing is written outside the destination, and a listing written
// without error is the tree whose hash WriteContent returned.
//
// Each line of listing is "d PATH" or "f PATH X N", a file of the next N
// bytes of data (executable when X is "x") in chunks of 3 bytes; a line
// "c" flips a byte of the last chunk stored.
func FuzzWriteContent(f *testing.F) {
	f.Add("d a\nf a/b - 4\nf c x 0\n", []byte("abcd"))
	f.Add("f ../x - 1\n", []byte("z"))
	f.Add("d a\nd a/b\nf a/b/c - 5\nc\n", []byte("hello"))
	f.Add("f b - 1\nf a - 1\n", []byte("xy"))
	f.Fuzz(func(t *testing.T, listing string, data []byte) {
		cs := chunkStore{}
		var entries []ContentEntry
		var last string
		for line := range strings.SplitSeq(listing, "\n") {
			fields := strings.Fields(line)
			switch {
			case len(fields) == 1 && fields[0] == "c" && last != "":
				cs[last][0] ^= 0x80
			case len(fields) == 2 && fields[0] == "d":
				entries = append(entries, ContentEntry{Path: fields[1], Dir: true})
			case len(fields) == 4 && fields[0] == "f":
				n := 0
				for _, r := range fields[3] {
					if r < '0' || r > '9' || n > 1<<16 {
						break
					}
					n = n*10 + int(r-'0')
				}
				n = min(n, len(data))
				e := ContentEntry{Path: fields[1], Exec: fields[2] == "x", Size: int64(n), Chunks: cs.put(data[:n], 3)}
				data = data[n:]
				if len(e.Chunks) > 0 {
					last = e.Chunks[len(e.Chunks)-1]
				}
				entries = append(entries, e)
			}
		}
		parent := t.TempDir()
		dst := filepath.Join(parent, "dst")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := WriteContent(dst, entries, cs.get)
		if ents, _ := os.ReadDir(parent); len(ents) != 1 {
			t.Fatalf("%q: something was written beside the destination: %v", listing, ents)
		}
		if err != nil {
			return
		}
		want, _, _, err := TreeHash(dst)
		if err != nil || want != got {
			t.Fatalf("%q: WriteContent says %s, the tree written hashes to %s (%v)", listing, got, want, err)
		}
	})
}

// A listing is checked against the host's limits before any of it is
// fetched: too many entries or files, a file or a total too large, or a
// path too deep is ErrLimit naming the limit; a listing within them passes.
func TestContentManifestLimits(t *testing.T) {
	lim := skills.Limits{MaxTotalBytes: 100, MaxFiles: 2, MaxEntries: 3, MaxDepth: 2, MaxFileBytes: 60}
	file := func(p string, n int64) ContentEntry { return ContentEntry{Path: p, Size: n} }
	dir := func(p string) ContentEntry { return ContentEntry{Path: p, Dir: true} }
	for _, tc := range []struct {
		name    string
		entries []ContentEntry
		limit   string // "" for none
	}{
		{"within", []ContentEntry{file("SKILL.md", 10), dir("a"), file("a/x", 60)}, ""},
		{"one file too large", []ContentEntry{file("SKILL.md", 61)}, skills.LimitFileBytes},
		{"too many bytes", []ContentEntry{file("SKILL.md", 60), file("b", 41)}, skills.LimitTotalBytes},
		{"too many files", []ContentEntry{file("SKILL.md", 1), file("b", 1), file("c", 1)}, skills.LimitFiles},
		{"too many entries", []ContentEntry{file("SKILL.md", 1), dir("a"), dir("b"), dir("c")}, skills.LimitEntries},
		{"too deep", []ContentEntry{file("SKILL.md", 1), file("a/b/c", 1)}, skills.LimitDepth},
	} {
		m := &ContentManifest{Slug: "s", Hash: "h", Entries: tc.entries}
		err := m.CheckLimits(lim)
		var le *skills.LimitError
		switch {
		case tc.limit == "" && err != nil:
			t.Errorf("%s: %v, want none", tc.name, err)
		case tc.limit != "" && (!errors.As(err, &le) || le.Limit != tc.limit || !errors.Is(err, skills.ErrLimit)):
			t.Errorf("%s: %v, want the %s limit", tc.name, err, tc.limit)
		}
	}
}
