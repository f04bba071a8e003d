package source

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// overlapZip builds an archive whose central directory lists n names that
// all point at one local entry holding size zero bytes: the overlapping-files
// bomb, where each entry looks modest and the sum does not.
func overlapZip(tb testing.TB, n int, size int) []byte {
	tb.Helper()
	plain := make([]byte, size)
	comp := skilltest.Deflate(plain)
	crc := crc32.ChecksumIEEE(plain)
	var buf bytes.Buffer
	le := func(v any) { _ = binary.Write(&buf, binary.LittleEndian, v) }
	name := "f"
	le(uint32(0x04034b50))
	le(uint16(20))
	le(uint16(0))
	le(uint16(8))
	le(uint32(0)) // time, date
	le(crc)
	le(uint32(len(comp)))
	le(uint32(size))
	le(uint16(len(name)))
	le(uint16(0))
	buf.WriteString(name)
	buf.Write(comp)
	cdStart := buf.Len()
	for i := 0; i < n; i++ {
		nm := "f" + strings.Repeat("0", 4-len(strconv.Itoa(i))) + strconv.Itoa(i)
		le(uint32(0x02014b50))
		le(uint16(3<<8 | 20))
		le(uint16(20))
		le(uint16(0))
		le(uint16(8))
		le(uint32(0))
		le(crc)
		le(uint32(len(comp)))
		le(uint32(size))
		le(uint16(len(nm)))
		le(uint16(0)) // extra
		le(uint16(0)) // comment
		le(uint16(0)) // disk
		le(uint16(0)) // internal attrs
		le(uint32(0o100644 << 16))
		le(uint32(0)) // local header offset: all the same
		buf.WriteString(nm)
	}
	cdLen := buf.Len() - cdStart
	le(uint32(0x06054b50))
	le(uint16(0))
	le(uint16(0))
	le(uint16(n))
	le(uint16(n))
	le(uint32(cdLen))
	le(uint32(cdStart))
	le(uint16(0))
	return buf.Bytes()
}

// lyingZip holds one entry whose header claims fewer bytes than its data
// inflates to.
func lyingZip(tb testing.TB, claimed uint64, real int) []byte {
	tb.Helper()
	plain := make([]byte, real)
	comp := skilltest.Deflate(plain)
	return skilltest.Zip(tb, skilltest.RawEntry("SKILL.md", zip.Deflate, comp, crc32.ChecksumIEEE(plain), uint64(len(comp)), claimed))
}

func TestExtractZip(t *testing.T) {
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	data := skilltest.Zip(t,
		skilltest.ZipEntry{Name: "./", Mode: os.ModeDir | 0o755},
		skilltest.ZipEntry{Name: "demo/", Mode: os.ModeDir | 0o700, Modified: old},
		skilltest.ZipEntry{Name: "demo/SKILL.md", Data: []byte(skilltest.DemoManifest), Modified: old},
		skilltest.ZipEntry{Name: "demo/scripts/run.sh", Data: []byte("#!/bin/sh\n"), Mode: 0o700, Modified: old},
		skilltest.ZipEntry{Name: "demo/scripts/data.bin", Data: []byte("\x00\x01"), Mode: 0o600, Store: true},
		skilltest.ZipEntry{Name: "demo/assets/empty/", Mode: os.ModeDir | 0o755},
		skilltest.ZipEntry{Name: "demo/./refs//a.md", Data: []byte("a")},
		skilltest.ZipEntry{Name: "demo/refs/A.md", Data: []byte("A"), UnixMode: 0o100744},
		skilltest.ZipEntry{Name: "demo/refs/typeless", Data: []byte("t"), UnixMode: 0o755},
	)
	base := t.TempDir()
	zp := filepath.Join(base, "a.zip")
	skilltest.WriteFile(t, zp, data, 0o644)
	dst := filepath.Join(base, "out")
	if _, err := ExtractZip(zp, dst, skills.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	got := skilltest.ReadDir(t, dst)
	want := fstest.MapFS{
		"demo":                  {Mode: os.ModeDir | 0o755, ModTime: old},
		"demo/SKILL.md":         {Mode: 0o644, Data: []byte(skilltest.DemoManifest), ModTime: old},
		"demo/scripts":          {Mode: os.ModeDir | 0o755},
		"demo/scripts/run.sh":   {Mode: 0o755, Data: []byte("#!/bin/sh\n"), ModTime: old},
		"demo/scripts/data.bin": {Mode: 0o644, Data: []byte("\x00\x01")},
		"demo/assets":           {Mode: os.ModeDir | 0o755},
		"demo/assets/empty":     {Mode: os.ModeDir | 0o755},
		"demo/refs":             {Mode: os.ModeDir | 0o755},
		"demo/refs/a.md":        {Mode: 0o644, Data: []byte("a")},
		"demo/refs/A.md":        {Mode: 0o755, Data: []byte("A")},
		"demo/refs/typeless":    {Mode: 0o755, Data: []byte("t")},
	}
	if len(got) != len(want) {
		t.Errorf("extracted %v, want %v", got, want)
	}
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s missing", p)
		case g.Mode != w.Mode || string(g.Data) != string(w.Data):
			t.Errorf("%s = %v %q, want %v %q", p, g.Mode, string(g.Data), w.Mode, string(w.Data))
		case !w.ModTime.IsZero() && g.ModTime.Unix() != w.ModTime.Unix():
			t.Errorf("%s mtime %v, want %v", p, g.ModTime.UTC(), old)
		}
	}
}

func TestExtractZipRejects(t *testing.T) {
	ok := skilltest.ZipEntry{Name: "SKILL.md", Data: []byte(skilltest.DemoManifest)}
	small := skills.Limits{MaxFiles: 3, MaxEntries: 5, MaxDepth: 3, MaxFileBytes: 1000, MaxTotalBytes: 1500}
	big := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	cases := []struct {
		name      string
		archive   func(tb testing.TB) []byte
		lim       skills.Limits
		wantErr   error
		wantLimit string
	}{
		{name: "parent", archive: entries(ok, skilltest.ZipEntry{Name: "../evil.txt", Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "parent inside", archive: entries(ok, skilltest.ZipEntry{Name: "a/../../evil.txt", Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "parent dir entry", archive: entries(ok, skilltest.ZipEntry{Name: "../", Mode: os.ModeDir | 0o755}), wantErr: skills.ErrUnsafePath},
		{name: "absolute", archive: entries(ok, skilltest.ZipEntry{Name: "/etc/cron.d/evil", Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "drive letter", archive: entries(ok, skilltest.ZipEntry{Name: "C:/evil.txt", Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "percent-encoded parent", archive: entries(ok, skilltest.ZipEntry{Name: "%2e%2e/evil.txt", Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "mixed-case encoded parent and slash", archive: entries(ok, skilltest.ZipEntry{Name: "%2E%2e%2Fevil.txt", Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "double-encoded parent", archive: entries(ok, skilltest.ZipEntry{Name: "a/%252e%252e/%252e%252e/evil", Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "backslash parent", archive: entries(ok, skilltest.ZipEntry{Name: `..\evil.txt`, Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "backslash separator", archive: entries(ok, skilltest.ZipEntry{Name: `scripts\run.sh`, Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "NUL in name", archive: entries(ok, skilltest.ZipEntry{Name: "a\x00.txt", Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "non-UTF-8 name", archive: entries(ok, skilltest.ZipEntry{Name: "caf\xe9.txt", Data: []byte("x")}), wantErr: skills.ErrUnsafePath},
		{name: "symlink dir entry", archive: entries(ok, skilltest.ZipEntry{Name: "up/", UnixMode: 0o120777}), wantErr: skills.ErrSpecialFile},
		{name: "fifo entry", archive: entries(ok, skilltest.ZipEntry{Name: "pipe", Mode: os.ModeNamedPipe | 0o644}), wantErr: skills.ErrSpecialFile},
		{name: "device entry", archive: entries(ok, skilltest.ZipEntry{Name: "null", Mode: os.ModeDevice | os.ModeCharDevice | 0o666}), wantErr: skills.ErrSpecialFile},
		{name: "duplicate file", archive: entries(ok, skilltest.ZipEntry{Name: "a.txt", Data: []byte("1")}, skilltest.ZipEntry{Name: "a.txt", Data: []byte("2")}), wantErr: skills.ErrUnsafePath},
		{name: "duplicate after cleaning", archive: entries(ok, skilltest.ZipEntry{Name: "a/b.txt", Data: []byte("1")}, skilltest.ZipEntry{Name: "./a//b.txt", Data: []byte("2")}), wantErr: skills.ErrUnsafePath},
		{name: "duplicate manifest", archive: entries(ok, ok), wantErr: skills.ErrUnsafePath},
		{name: "duplicate dir", archive: entries(ok, skilltest.ZipEntry{Name: "d/", Mode: os.ModeDir | 0o755}, skilltest.ZipEntry{Name: "d/", Mode: os.ModeDir | 0o755}), wantErr: skills.ErrUnsafePath},
		{name: "file then dir", archive: entries(ok, skilltest.ZipEntry{Name: "a", Data: []byte("1")}, skilltest.ZipEntry{Name: "a/", Mode: os.ModeDir | 0o755}), wantErr: skills.ErrUnsafePath},
		{name: "dir then file", archive: entries(ok, skilltest.ZipEntry{Name: "a/", Mode: os.ModeDir | 0o755}, skilltest.ZipEntry{Name: "a", Data: []byte("1")}), wantErr: skills.ErrUnsafePath},
		{name: "file then child", archive: entries(ok, skilltest.ZipEntry{Name: "a", Data: []byte("1")}, skilltest.ZipEntry{Name: "a/b", Data: []byte("2")}), wantErr: skills.ErrUnsafePath},
		{name: "child then file", archive: entries(ok, skilltest.ZipEntry{Name: "a/b", Data: []byte("2")}, skilltest.ZipEntry{Name: "a", Data: []byte("1")}), wantErr: skills.ErrUnsafePath},
		{name: "directory with data", archive: func(tb testing.TB) []byte { return lyingDirZip(tb) }, wantErr: zip.ErrFormat},
		{name: "too many files", lim: small, archive: entries(ok, skilltest.ZipEntry{Name: "a"}, skilltest.ZipEntry{Name: "b"}, skilltest.ZipEntry{Name: "c"}), wantErr: skills.ErrLimit, wantLimit: skills.LimitFiles},
		{name: "too many entries", lim: small, archive: entries(ok, skilltest.ZipEntry{Name: "a/b/c"}, skilltest.ZipEntry{Name: "d/e"}, skilltest.ZipEntry{Name: "f/"}), wantErr: skills.ErrLimit, wantLimit: skills.LimitEntries},
		{name: "too many archive entries", lim: small, archive: entries(ok, skilltest.ZipEntry{Name: "a/", Mode: os.ModeDir | 0o755}, skilltest.ZipEntry{Name: "b/", Mode: os.ModeDir | 0o755}, skilltest.ZipEntry{Name: "c/", Mode: os.ModeDir | 0o755}, skilltest.ZipEntry{Name: "d/", Mode: os.ModeDir | 0o755}, skilltest.ZipEntry{Name: "e/", Mode: os.ModeDir | 0o755}), wantErr: skills.ErrLimit, wantLimit: skills.LimitEntries},
		{name: "nesting too deep", lim: small, archive: entries(ok, skilltest.ZipEntry{Name: "a/b/c/d.txt"}), wantErr: skills.ErrLimit, wantLimit: skills.LimitDepth},
		{name: "deep dir entry", lim: small, archive: entries(ok, skilltest.ZipEntry{Name: "a/b/c/d/", Mode: os.ModeDir | 0o755}), wantErr: skills.ErrLimit, wantLimit: skills.LimitDepth},
		{name: "file over the size limit", lim: small, archive: entries(ok, skilltest.ZipEntry{Name: "big", Data: big(1001)}), wantErr: skills.ErrLimit, wantLimit: skills.LimitFileBytes},
		{name: "total over the limit", lim: small, archive: entries(skilltest.ZipEntry{Name: "SKILL.md", Data: big(800)}, skilltest.ZipEntry{Name: "b", Data: big(800)}), wantErr: skills.ErrLimit, wantLimit: skills.LimitTotalBytes},
		{name: "compression bomb entry", archive: func(tb testing.TB) []byte {
			return skilltest.Zip(tb, ok, skilltest.ZipEntry{Name: "zeros", Data: make([]byte, 8<<20)})
		}, wantErr: skills.ErrLimit, wantLimit: skills.LimitCompression},
		{name: "overlapping entries bomb", archive: func(tb testing.TB) []byte { return overlapZip(tb, 200, 1<<20) }, wantErr: skills.ErrLimit, wantLimit: skills.LimitCompression},
		{name: "overlapping entries over total", archive: func(tb testing.TB) []byte { return overlapZip(tb, 300, 1<<20) }, wantErr: skills.ErrLimit, wantLimit: skills.LimitTotalBytes},
		// Several entries sharing one stream are refused whatever the
		// sizes: here too small for any ratio or size limit.
		{name: "overlapping entries within the limits", archive: func(tb testing.TB) []byte { return overlapZip(tb, 3, 1<<10) }, wantErr: zip.ErrFormat},
		{name: "encrypted entry", archive: func(tb testing.TB) []byte {
			b := skilltest.Zip(tb, ok, skilltest.ZipEntry{Name: "secret.txt", Data: []byte("plain text, flagged encrypted")})
			b[bytes.LastIndex(b, []byte{'P', 'K', 1, 2})+8] |= 1
			return b
		}, wantErr: skills.ErrInvalid},
		{name: "directory end implying a negative offset", archive: func(tb testing.TB) []byte {
			b := skilltest.Zip(tb, ok)
			binary.LittleEndian.PutUint32(b[len(b)-22+16:], 1<<30)
			return b
		}, wantErr: zip.ErrFormat},
		{name: "header understates size", archive: func(tb testing.TB) []byte { return lyingZip(tb, 100, 4<<20) }, wantErr: zip.ErrFormat},
		{name: "truncated", archive: func(tb testing.TB) []byte {
			b := skilltest.Zip(tb, ok, skilltest.ZipEntry{Name: "scripts/run.sh", Data: big(5000)})
			return b[:len(b)/2]
		}, wantErr: zip.ErrFormat},
		{name: "truncated central directory", archive: func(tb testing.TB) []byte {
			b := skilltest.Zip(tb, ok, skilltest.ZipEntry{Name: "scripts/run.sh", Data: big(5000)})
			return b[:len(b)-10]
		}, wantErr: zip.ErrFormat},
		{name: "corrupt data", archive: func(tb testing.TB) []byte {
			b := skilltest.Zip(tb, skilltest.ZipEntry{Name: "SKILL.md", Data: []byte(skilltest.DemoManifest), Store: true})
			i := bytes.Index(b, []byte("A demo skill"))
			b[i] ^= 0xff
			return b
		}, wantErr: zip.ErrChecksum},
		{name: "corrupt central directory", archive: func(tb testing.TB) []byte {
			b := skilltest.Zip(tb, ok, skilltest.ZipEntry{Name: "b", Data: []byte("b")})
			i := bytes.LastIndex(b, []byte{'P', 'K', 1, 2})
			b[i+2] = 9
			return b
		}, wantErr: zip.ErrFormat},
		{name: "not an archive", archive: func(tb testing.TB) []byte { return []byte(skilltest.DemoManifest) }, wantErr: zip.ErrFormat},
		{name: "empty file", archive: func(tb testing.TB) []byte { return nil }, wantErr: zip.ErrFormat},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			zp := filepath.Join(base, "a.zip")
			skilltest.WriteFile(t, zp, tc.archive(t), 0o644)
			dst := filepath.Join(base, "out")
			_, err := ExtractZip(zp, dst, tc.lim)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ExtractZip error %v, want %v", err, tc.wantErr)
			}
			if got := limitOf(err); got != tc.wantLimit {
				t.Errorf("limit %q, want %q (%v)", got, tc.wantLimit, err)
			}
			skilltest.AssertAbsent(t, dst)
			skilltest.AssertOnly(t, base, "a.zip")
		})
	}
}

func entries(es ...skilltest.ZipEntry) func(testing.TB) []byte {
	return func(tb testing.TB) []byte { return skilltest.Zip(tb, es...) }
}

// lyingDirZip holds a directory entry whose header claims four bytes of
// data (archive/zip writes no data for a directory: the header lies).
func lyingDirZip(tb testing.TB) []byte {
	tb.Helper()
	h := &zip.FileHeader{Name: "d/", Method: zip.Store, CRC32: crc32.ChecksumIEEE([]byte("data")), CompressedSize64: 4, UncompressedSize64: 4}
	h.SetMode(os.ModeDir | 0o755)
	return skilltest.Zip(tb, skilltest.ZipEntry{Raw: h})
}

// TestExtractZipBomb streams a 1 GiB run of zeros into a ~1 MiB archive on
// disk and checks that it is refused before anything is decompressed, under
// the default limits and with the size limits raised so that only the
// compression ratio stands in the way.
func TestExtractZipBomb(t *testing.T) {
	base := t.TempDir()
	zp := filepath.Join(base, "a.zip")
	f, err := os.Create(zp)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestSpeed)
	})
	if w, err := zw.Create("SKILL.md"); err != nil {
		t.Fatal(err)
	} else {
		io.WriteString(w, skilltest.DemoManifest)
	}
	w, err := zw.Create("assets/zeros.bin")
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := 0; i < 1024; i++ {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(zp)
	t.Logf("bomb archive: %d bytes for 1 GiB", fi.Size())

	raised := skills.DefaultLimits()
	raised.MaxFileBytes = 2 << 30
	raised.MaxTotalBytes = 2 << 30
	cases := []struct {
		name      string
		lim       skills.Limits
		wantLimit string
	}{
		{name: "default limits", lim: skills.DefaultLimits(), wantLimit: skills.LimitFileBytes},
		{name: "only the ratio", lim: raised, wantLimit: skills.LimitCompression},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(base, "out")
			start := time.Now()
			_, err := ExtractZip(zp, dst, tc.lim)
			if got := limitOf(err); got != tc.wantLimit {
				t.Fatalf("limit %q, want %q (%v)", got, tc.wantLimit, err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v to refuse", d)
			}
			skilltest.AssertAbsent(t, dst)
			skilltest.AssertOnly(t, base, "a.zip")
		})
	}
}

func TestExtractZipNoManifest(t *testing.T) {
	base := t.TempDir()
	zp := filepath.Join(base, "a.zip")
	skilltest.WriteFile(t, zp, skilltest.Zip(t, skilltest.ZipEntry{Name: "demo/README.md", Data: []byte("no manifest")}), 0o644)
	dst := filepath.Join(base, "out")
	if _, err := ExtractZip(zp, dst, skills.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Discover(dst, 0); !errors.Is(err, skills.ErrNoManifest) {
		t.Errorf("Discover: %v, want ErrNoManifest", err)
	}
	stage := filepath.Join(base, "stage")
	if _, err := StageDir(filepath.Join(dst, "demo"), stage, skills.DefaultLimits()); !errors.Is(err, skills.ErrNoManifest) {
		t.Errorf("StageDir: %v, want ErrNoManifest", err)
	}
	skilltest.AssertAbsent(t, stage)
}

func TestExtractZipRefusesNonEmptyDestination(t *testing.T) {
	base := t.TempDir()
	zp := filepath.Join(base, "a.zip")
	skilltest.WriteFile(t, zp, skilltest.Zip(t, skilltest.ZipEntry{Name: "SKILL.md", Data: []byte(skilltest.DemoManifest)}), 0o644)
	dst := filepath.Join(base, "out")
	skilltest.WriteDir(t, dst, fstest.MapFS{"keep": skilltest.File("mine")})
	if _, err := ExtractZip(zp, dst, skills.DefaultLimits()); !errors.Is(err, skills.ErrExists) {
		t.Fatalf("error %v, want ErrExists", err)
	}
	skilltest.AssertOnly(t, dst, "keep")
}

// FuzzExtractZip feeds arbitrary bytes as an archive: ExtractZip must never
// panic, never write outside dst, never leave dst behind on error, and never
// exceed the limits on success. The only links it makes are relative ones
// that stay inside dst lexically, never in the place of a directory, and
// none was followed: nothing appeared outside dst.
func FuzzExtractZip(f *testing.F) {
	f.Add(skilltest.Zip(f, skilltest.ZipEntry{Name: "SKILL.md", Data: []byte(skilltest.DemoManifest)}, skilltest.ZipEntry{Name: "scripts/run.sh", Data: []byte("#!/bin/sh\n"), Mode: 0o755}))
	f.Add(skilltest.Zip(f, skilltest.ZipEntry{Name: "d/", Mode: os.ModeDir | 0o755}, skilltest.ZipEntry{Name: "d/SKILL.md", Data: []byte(skilltest.DemoManifest), Store: true}))
	f.Add(skilltest.Zip(f, skilltest.ZipEntry{Name: "../x", Data: []byte("x")}))
	f.Add(skilltest.Zip(f, skilltest.ZipEntry{Name: "%2e%2e/x", Data: []byte("x")}))
	f.Add(skilltest.Zip(f, skilltest.ZipEntry{Name: "l", Data: []byte("/etc"), Mode: os.ModeSymlink | 0o777}))
	f.Add(skilltest.Zip(f, skilltest.ZipEntry{Name: "d/l", Data: []byte("../x"), Mode: os.ModeSymlink | 0o777}, skilltest.ZipEntry{Name: "x/f", Data: []byte("f")}))
	f.Add(skilltest.Zip(f, skilltest.ZipEntry{Name: "d/l", Data: []byte("../../x"), Mode: os.ModeSymlink | 0o777}, skilltest.ZipEntry{Name: "d/l/f", Data: []byte("f")}))
	f.Add(skilltest.Zip(f, skilltest.ZipEntry{Name: "l", Data: []byte("."), Mode: os.ModeSymlink | 0o777}, skilltest.ZipEntry{Name: "m", Data: []byte("l/l/.."), Mode: os.ModeSymlink | 0o777}))
	f.Add(skilltest.Zip(f, skilltest.ZipEntry{Name: "a", Data: []byte("1")}, skilltest.ZipEntry{Name: "a/b", Data: []byte("2")}))
	f.Add(skilltest.Zip(f, skilltest.ZipEntry{Name: "a/b/c/d/e/f/g/h/i/j", Data: []byte("deep")}))
	f.Add(overlapZip(f, 4, 4096))
	f.Add(lyingZip(f, 10, 4096))
	f.Add(lyingDirZip(f))
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	lim := skills.Limits{MaxTotalBytes: 1 << 20, MaxFiles: 20, MaxEntries: 40, MaxDepth: 6, MaxFileBytes: 256 << 10, MaxCompression: 50}
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		zp := filepath.Join(base, "a.zip")
		skilltest.WriteFile(t, zp, data, 0o644)
		dst := filepath.Join(base, "out")
		_, err := ExtractZip(zp, dst, lim)
		if err != nil {
			skilltest.AssertAbsent(t, dst)
			skilltest.AssertOnly(t, base, "a.zip")
			return
		}
		skilltest.AssertOnly(t, base, "a.zip", "out")
		var files, entries int
		var total int64
		werr := filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
			if err != nil || p == dst {
				return err
			}
			rel, _ := filepath.Rel(dst, p)
			if _, cerr := skills.CleanRelPath(filepath.ToSlash(rel)); cerr != nil {
				t.Errorf("extracted unsafe name %q: %v", rel, cerr)
			}
			if depth := strings.Count(filepath.ToSlash(rel), "/") + 1; depth > lim.MaxDepth {
				t.Errorf("%q is %d deep", rel, depth)
			}
			entries++
			switch {
			case fi.Mode()&os.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				if j := path.Join(path.Dir(filepath.ToSlash(rel)), target); target == "" || path.IsAbs(target) || j == ".." || strings.HasPrefix(j, "../") {
					t.Errorf("%q links to %q, outside the archive", rel, target)
				}
				files++
			case fi.IsDir():
			case fi.Mode().IsRegular():
				files++
				total += fi.Size()
				if fi.Size() > lim.MaxFileBytes {
					t.Errorf("%q holds %d bytes", rel, fi.Size())
				}
				if m := fi.Mode().Perm(); m != 0o644 && m != 0o755 {
					t.Errorf("%q has mode %v", rel, m)
				}
			default:
				t.Errorf("%q is %v", rel, fi.Mode())
			}
			return nil
		})
		if werr != nil {
			t.Fatal(werr)
		}
		if files > lim.MaxFiles || entries > lim.MaxEntries || total > lim.MaxTotalBytes {
			t.Errorf("extracted %d files, %d entries, %d bytes", files, entries, total)
		}
	})
}
