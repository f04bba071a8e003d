package diff

// Test helpers shared with other packages' tests, copied here until a
// shared test-helper package serves them all.

import (
	"os"
	"path/filepath"
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
