package integration

import (
	"crypto/rand"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	benchBigSize   = 16 << 20 // the large asset
	benchTreeFiles = 200      // files of the walked skill, SKILL.md included
)

// benchRoots are the same skill directories seen through a live session
// mount and directly in the content store.
type benchRoots struct {
	mount, native map[string]string // slug → directory
}

// setupBench serves a session holding a skill with a 16 MiB asset and a
// skill of about 200 files, and finds their store directories.
func setupBench(b *testing.B) benchRoots {
	b.Helper()
	e := newEnv(b)
	e.serve()
	src := filepath.Join(b.TempDir(), "src")
	big := make([]byte, benchBigSize)
	if _, err := rand.Read(big); err != nil {
		b.Fatal(err)
	}
	writeSkill(b, filepath.Join(src, "skills", "bench-big"), "name: bench-big\ndescription: A skill with a large asset.", nil)
	if err := os.MkdirAll(filepath.Join(src, "skills", "bench-big", "assets"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "skills", "bench-big", "assets", "big.bin"), big, 0o644); err != nil {
		b.Fatal(err)
	}
	files := map[string]string{}
	for i := range benchTreeFiles - 1 {
		files[fmt.Sprintf("references/d%d/e%d/f%03d.md", i%10, i%3, i)] = fmt.Sprintf("file %d\n", i)
	}
	writeSkill(b, filepath.Join(src, "skills", "bench-tree"), "name: bench-tree\ndescription: A skill with many small files.", files)
	e.ok("skill", "import", src, "--all", "--share", "global")
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "bench-big,bench-tree")
	r := benchRoots{mount: map[string]string{}, native: map[string]string{}}
	for _, slug := range []string{"bench-big", "bench-tree"} {
		var show struct {
			Path string `json:"path"`
		}
		e.okJSON(&show, "skill", "show", slug)
		r.native[slug] = show.Path
		r.mount[slug] = filepath.Join(s.Path, slug)
	}
	return r
}

// BenchmarkRead compares reads through a session mount with the same files
// read directly from the content store, in the same run.
func BenchmarkRead(b *testing.B) {
	roots := setupBench(b)
	sides := []struct {
		name  string
		roots map[string]string
	}{{"mount", roots.mount}, {"native", roots.native}}

	// Open, read and close of a small file: of SKILL.md, whose every open
	// through the mount is also counted as an activation, and of another
	// file, which is not.
	small := []struct{ name, rel string }{
		{"small-file", "SKILL.md"},
		{"small-file-no-activation", "references/d0/e0/f000.md"},
	}
	for _, sf := range small {
		for _, side := range sides {
			b.Run(sf.name+"/"+side.name, func(b *testing.B) {
				p := filepath.Join(side.roots["bench-tree"], filepath.FromSlash(sf.rel))
				want, err := os.ReadFile(p)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(want)))
				for b.Loop() {
					data, err := os.ReadFile(p)
					if err != nil || len(data) != len(want) {
						b.Fatalf("read %s: %v, %d bytes", p, err, len(data))
					}
				}
			})
		}
	}
	for _, side := range sides {
		b.Run("large-file-warm/"+side.name, func(b *testing.B) {
			p := filepath.Join(side.roots["bench-big"], "assets", "big.bin")
			buf := make([]byte, 1<<20)
			readAll := func() {
				f, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				n := 0
				for {
					m, err := f.Read(buf)
					n += m
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatalf("read %s: %v", p, err)
					}
				}
				if n != benchBigSize {
					b.Fatalf("read %d bytes of %s, want %d", n, p, benchBigSize)
				}
			}
			readAll() // warm the caches
			b.SetBytes(benchBigSize)
			b.ResetTimer()
			for b.Loop() {
				readAll()
			}
		})
	}
	for _, side := range sides {
		b.Run("walk-200-files/"+side.name, func(b *testing.B) {
			root := side.roots["bench-tree"]
			walk := func() {
				n := 0
				err := filepath.WalkDir(root, func(_ string, d iofs.DirEntry, err error) error {
					if err != nil {
						return err
					}
					if strings.HasPrefix(d.Name(), ".skillfs") {
						return nil // the store's metadata, which the mount does not show
					}
					if _, err := d.Info(); err != nil {
						return err
					}
					if !d.IsDir() {
						n++
					}
					return nil
				})
				if err != nil || n != benchTreeFiles {
					b.Fatalf("walk %s: %v, %d files, want %d", root, err, n, benchTreeFiles)
				}
			}
			walk()
			b.ResetTimer()
			for b.Loop() {
				walk()
			}
		})
	}
}
