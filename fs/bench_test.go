package fs

import (
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
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
		"references/doc.txt": {data: "doc\n"},
	})
	srv := mountTest(b, opts)
	return filepath.Join(setSession(b, srv, "sess", View{{Slug: "bench", Version: "v1", Dir: dir}}), "bench"), dir
}

func benchSmall(b *testing.B, dir string) {
	p := filepath.Join(dir, "SKILL.md")
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

// BenchmarkReadMount reads through the mount: open+read+close of SKILL.md
// (each open goes to the daemon and records an activation in a sink), and a
// 16 MiB sequential read: with the kernel's page cache (content is
// immutable), with every byte served by the daemon, and with passthrough.
func BenchmarkReadMount(b *testing.B) {
	sink := &fakeSink{}
	mount, _ := benchTree(b, Options{Sink: sink})
	b.Run("SKILL.md", func(b *testing.B) { benchSmall(b, mount) })
	b.Run("16MiB", func(b *testing.B) { benchLargeRead(b, mount, false) })
	b.Run("16MiB-uncached", func(b *testing.B) { benchLargeRead(b, mount, true) })
	pass, _ := benchTree(b, Options{Sink: sink, Passthrough: true})
	b.Run("16MiB-passthrough", func(b *testing.B) { benchLargeRead(b, pass, false) })
}

// BenchmarkReadNative reads the same files straight from the store.
func BenchmarkReadNative(b *testing.B) {
	_, native := benchTree(b, Options{})
	b.Run("SKILL.md", func(b *testing.B) { benchSmall(b, native) })
	b.Run("16MiB", func(b *testing.B) { benchLargeRead(b, native, false) })
}
