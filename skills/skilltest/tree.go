// Package skilltest builds the skill trees and archives that tests feed to
// skillfs (tests only, standard library only): a tree is described once, as
// an fstest.MapFS of slash paths, and written to a folder (WriteDir) or
// packed into a ZIP (Zip, ZipFS); hostile archives get the knobs they need
// (names and modes written verbatim, raw headers that lie about sizes,
// patched and rebuilt central directories); Manifest and Skill make a
// SKILL.md with frontmatter, DemoManifest is the one most tests stage;
// AssertAbsent and AssertOnly check what a refused operation left on disk.
//
// In a tree, a file's zero permission bits mean 0644, a directory's
// (Mode has fs.ModeDir) 0755; a symlink (fs.ModeSymlink) holds its target
// in Data. Parents need no entries of their own: an entry is needed only
// for an empty directory or a directory with a mode of its own.
package skilltest

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// File is a regular file holding data, mode 0644.
func File(data string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(data)} }

// Executable is a regular file holding data, mode 0755.
func Executable(data string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(data), Mode: 0o755}
}

// Dir is a directory, mode 0755: an entry a tree needs only for a directory
// that holds nothing.
func Dir() *fstest.MapFile { return &fstest.MapFile{Mode: fs.ModeDir | 0o755} }

// Symlink is a symbolic link to target, written as given.
func Symlink(target string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
}

// Files is a tree of regular files, name → content: 0755 for a name
// ending in ".sh", 0644 for the others.
func Files(files map[string]string) fstest.MapFS {
	tree := make(fstest.MapFS, len(files))
	for name, data := range files {
		f := File(data)
		if strings.HasSuffix(name, ".sh") {
			f.Mode = 0o755
		}
		tree[name] = f
	}
	return tree
}

// Manifest is a SKILL.md: "---\n" + frontmatter + "\n---\n" + body, the
// frontmatter's lines without their last newline, the body verbatim.
func Manifest(frontmatter, body string) string {
	return "---\n" + frontmatter + "\n---\n" + body
}

// Skill is a skill's tree: a SKILL.md of Manifest(frontmatter, body) and
// Files(files); a SKILL.md among files is kept instead.
func Skill(frontmatter, body string, files map[string]string) fstest.MapFS {
	tree := Files(files)
	if _, ok := tree["SKILL.md"]; !ok {
		tree["SKILL.md"] = File(Manifest(frontmatter, body))
	}
	return tree
}

// WriteDir writes tree below dir, creating dir as needed, and returns dir.
// Every entry gets exactly its mode, whatever the umask, and so does a
// parent the tree gives no entry of its own (0755); a directory's mode and
// a modification time are set after everything below them is written, so
// a read-only directory can be filled. Existing entries are overwritten,
// the others left alone.
func WriteDir(tb testing.TB, dir string, tree fstest.MapFS) string {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	full := withParents(tb, tree)
	names := slices.Sorted(maps.Keys(full))
	for _, name := range names {
		writeEntry(tb, filepath.Join(dir, filepath.FromSlash(name)), full[name])
	}
	// Deepest first: a directory's mode and time come after its children.
	for _, name := range slices.Backward(names) {
		f, p := full[name], filepath.Join(dir, filepath.FromSlash(name))
		if f.Mode.IsDir() {
			if err := os.Chmod(p, permOf(f)); err != nil {
				tb.Fatal(err)
			}
		}
		if !f.ModTime.IsZero() && f.Mode&fs.ModeSymlink == 0 {
			if err := os.Chtimes(p, f.ModTime, f.ModTime); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return dir
}

// withParents is tree with a directory entry (Dir) for every parent it
// names none for. It refuses a name that is no path inside a tree.
func withParents(tb testing.TB, tree fstest.MapFS) fstest.MapFS {
	tb.Helper()
	full := maps.Clone(tree)
	for name := range tree {
		if !fs.ValidPath(name) || name == "." {
			tb.Fatalf("skilltest: %q is no path inside a tree", name)
		}
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			if f, ok := full[p]; ok {
				if !f.Mode.IsDir() {
					tb.Fatalf("skilltest: %q is below %q, which is no directory", name, p)
				}
				continue
			}
			full[p] = Dir()
		}
	}
	return full
}

// writeEntry writes one entry of a tree at p; a directory's mode waits.
func writeEntry(tb testing.TB, p string, f *fstest.MapFile) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	switch {
	case f.Mode.IsDir():
		if err := os.MkdirAll(p, 0o755); err != nil {
			tb.Fatal(err)
		}
	case f.Mode&fs.ModeSymlink != 0:
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			tb.Fatal(err)
		}
		if err := os.Symlink(string(f.Data), p); err != nil {
			tb.Fatal(err)
		}
	case f.Mode.IsRegular():
		WriteFile(tb, p, f.Data, permOf(f))
	default:
		tb.Fatalf("skilltest: %s: a tree holds files, directories and symlinks, not %v", p, f.Mode.Type())
	}
}

// permOf is an entry's mode without its type, the default for zero bits.
func permOf(f *fstest.MapFile) fs.FileMode {
	m := f.Mode &^ fs.ModeType
	switch {
	case m != 0:
		return m
	case f.Mode.IsDir():
		return 0o755
	}
	return 0o644
}

// WriteFile writes data to the file p with exactly mode (the umask cannot
// narrow it), creating its parent directories (0755 less the umask).
func WriteFile(tb testing.TB, p string, data []byte, mode fs.FileMode) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		tb.Fatal(err)
	}
}

// ReadDir reads the tree below dir without following symlinks: every file
// with its data, mode and modification time, every directory (with its
// mode and time) and every symlink with its target. It is WriteDir's
// inverse, for comparing what was written with what came back.
func ReadDir(tb testing.TB, dir string) fstest.MapFS {
	tb.Helper()
	tree := fstest.MapFS{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		f := &fstest.MapFile{Mode: info.Mode(), ModTime: info.ModTime()}
		switch {
		case info.Mode().IsRegular():
			f.Data, err = os.ReadFile(p)
		case info.Mode()&fs.ModeSymlink != 0:
			var target string
			target, err = os.Readlink(p)
			f.Data, f.ModTime = []byte(target), time.Time{}
		}
		tree[filepath.ToSlash(rel)] = f
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return tree
}
