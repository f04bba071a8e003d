package skilltest

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"
)

// DemoManifest is the SKILL.md of the demo skill most tests stage:
// Manifest("name: demo\ndescription: A demo skill.", "Use it.\n").
const DemoManifest = "---\nname: demo\ndescription: A demo skill.\n---\nUse it.\n"

// AssertAbsent fails the test unless nothing exists at p (a dangling
// symlink exists): what a refused operation must leave behind.
func AssertAbsent(tb testing.TB, p string) {
	tb.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		tb.Fatalf("%s was left behind (lstat: %v)", p, err)
	}
}

// AssertOnly fails the test unless dir holds exactly the entries names, in
// any order.
func AssertOnly(tb testing.TB, dir string, names ...string) {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		tb.Fatalf("%s holds %q, want %q", dir, got, want)
	}
}
