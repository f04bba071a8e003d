package store

// Test helpers shared with other packages' tests, copied here until a
// shared test-helper package serves them all.

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Copied from stage_test.go.
// tfile is one entry of a test tree: a name ending in "/" is a directory.
// A zero mode means 0644 for files and 0755 for directories.
type tfile struct {
	name string
	body string
	mode os.FileMode
}

// Copied from stage_test.go.
// writeTree creates the entries under root, parents as needed.
func writeTree(tb testing.TB, root string, files ...tfile) {
	tb.Helper()
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(f.name, "/")))
		if strings.HasSuffix(f.name, "/") {
			mode := f.mode
			if mode == 0 {
				mode = 0o755
			}
			if err := os.MkdirAll(p, 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		mode := f.mode
		if mode == 0 {
			mode = 0o644
		}
		if err := os.WriteFile(p, []byte(f.body), mode); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			tb.Fatal(err)
		}
	}
}

// Copied from stage_test.go.
// treeEntryInfo is what a test compares between two trees.
type treeEntryInfo struct {
	mode  os.FileMode
	body  string
	mtime int64 // Unix seconds
}

// Copied from stage_test.go.
// readTree lists every entry under root by slash path, without following
// symlinks.
func readTree(tb testing.TB, root string) map[string]treeEntryInfo {
	tb.Helper()
	out := map[string]treeEntryInfo{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		e := treeEntryInfo{mode: fi.Mode(), mtime: fi.ModTime().Unix()}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.body = string(b)
		}
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Copied from stage_test.go.
// assertAbsent fails unless p does not exist.
func assertAbsent(tb testing.TB, p string) {
	tb.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		tb.Fatalf("%s was left behind (lstat: %v)", p, err)
	}
}

// Copied from stage_test.go.
// assertOnly fails unless dir holds exactly the given names.
func assertOnly(tb testing.TB, dir string, names ...string) {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	sort.Strings(names)
	if !slices.Equal(got, names) {
		tb.Fatalf("%s holds %q, want %q", dir, got, names)
	}
}

// Copied from stage_test.go.
const testManifest = "---\nname: demo\ndescription: A demo skill.\n---\nUse it.\n"

// Copied from stage_test.go.
func symlink(tb testing.TB, target, p string) {
	tb.Helper()
	if err := os.Symlink(target, p); err != nil {
		tb.Fatal(err)
	}
}
