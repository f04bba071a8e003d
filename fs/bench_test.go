package fs

import (
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const benchLarge = 16 << 20

// benchTree returns the same files read through the mount and straight
// from the store.
func benchTree(b *testing.B, opts Options) (mount, native string) {
	b.Helper()
	data := make([]byte, benchLarge)
	rand.Read(data)
	dir := writeVersion(b, filepath.Join(b.TempDir(), "bench", "v1"), map[string]file{
		"SKILL.md":           {data: manifest("bench", "a skill to read over and over")},
		"assets/large.bin":   {data: string(data)},
		"references/4k.txt":  {data: strings.Repeat("0123456789abcde\n", 256)},
		"references/doc.txt": {data: "doc\n"},
	})
	srv := mountTest(b, opts)
	return filepath.Join(setSession(b, srv, "sess", View{{Slug: "bench", Version: "v1", Dir: dir}}), "bench"), dir
}

// benchSmall opens, reads and closes one small file over and over.
func benchSmall(b *testing.B, p string) {
	buf := make([]byte, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Read(buf); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// benchSmallParallel is benchSmall from GOMAXPROCS goroutines at once.
func benchSmallParallel(b *testing.B, p string) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 4096)
		for pb.Next() {
			f, err := os.Open(p)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := f.Read(buf); err != nil {
				b.Error(err)
			}
			f.Close()
		}
	})
}

func benchLargeRead(b *testing.B, dir string, uncached bool) {
	p := filepath.Join(dir, "assets", "large.bin")
	buf := make([]byte, 128<<10)
	b.SetBytes(benchLarge)
	b.ResetTimer()
	for b.Loop() {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if uncached {
			// Drop the mount's pages so every byte comes from the daemon.
			if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
				b.Fatal(err)
			}
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		if err != nil || n != benchLarge {
			b.Fatalf("read %d bytes: %v", n, err)
		}
		f.Close()
	}
}

// BenchmarkRead reads the same files through the mount and straight from
// the store, in one run: open+read+close of SKILL.md (each open through the
// mount records an activation in a sink) and of a 4 KiB file, serially and
// from parallel readers, and a 16 MiB sequential read: with the kernel's
// page cache (content is immutable), with every byte served by the daemon,
// and with passthrough.
func BenchmarkRead(b *testing.B) {
	sink := &fakeSink{}
	mount, native := benchTree(b, Options{Sink: sink})
	sides := []struct{ name, dir string }{{"mount", mount}, {"native", native}}
	for _, s := range sides {
		b.Run("SKILL.md/"+s.name, func(b *testing.B) { benchSmall(b, filepath.Join(s.dir, "SKILL.md")) })
	}
	for _, s := range sides {
		b.Run("4KiB/"+s.name, func(b *testing.B) { benchSmall(b, filepath.Join(s.dir, "references", "4k.txt")) })
	}
	for _, s := range sides {
		b.Run("4KiB-parallel/"+s.name, func(b *testing.B) {
			benchSmallParallel(b, filepath.Join(s.dir, "references", "4k.txt"))
		})
	}
	for _, s := range sides {
		b.Run("16MiB/"+s.name, func(b *testing.B) { benchLargeRead(b, s.dir, false) })
	}
	b.Run("16MiB-uncached/mount", func(b *testing.B) { benchLargeRead(b, mount, true) })
	pass, _ := benchTree(b, Options{Sink: sink, Passthrough: true})
	b.Run("16MiB/passthrough", func(b *testing.B) { benchLargeRead(b, pass, false) })
}
