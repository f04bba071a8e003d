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
	"strings"
	"testing"
	"time"

	"skillfs/skills"
)

// zentry is one entry of a test archive. A zero mode means a regular 0644
// file; names are written verbatim, whatever they hold.
type zentry struct {
	name     string
	body     string
	mode     os.FileMode
	modified time.Time
	store    bool   // no compression
	unixMode uint32 // raw Unix mode for the external attributes, overriding mode
}

// buildZip returns an archive of the entries.
func buildZip(tb testing.TB, entries ...zentry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: e.modified}
		if e.store || strings.HasSuffix(e.name, "/") {
			h.Method = zip.Store
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h.SetMode(mode)
		if e.unixMode != 0 {
			h.CreatorVersion = 3<<8 | 20
			h.ExternalAttrs = e.unixMode << 16
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := io.WriteString(w, e.body); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func writeFile(tb testing.TB, p string, b []byte) {
	tb.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// deflated compresses b at the best ratio.
func deflated(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// overlapZip builds an archive whose central directory lists n names that
// all point at one local entry holding size zero bytes: the overlapping-files
// bomb, where each entry looks modest and the sum does not.
func overlapZip(tb testing.TB, n int, size int) []byte {
	tb.Helper()
	plain := make([]byte, size)
	comp := deflated(tb, plain)
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
		nm := "f" + strings.Repeat("0", 4-len(itoa(i))) + itoa(i)
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

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// lyingZip holds one entry whose header claims fewer bytes than its data
// inflates to.
func lyingZip(tb testing.TB, claimed uint64, real int) []byte {
	tb.Helper()
	plain := make([]byte, real)
	comp := deflated(tb, plain)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "SKILL.md", Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(plain),
		CompressedSize64: uint64(len(comp)), UncompressedSize64: claimed}
	h.SetMode(0o644)
	w, err := zw.CreateRaw(h)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(comp); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractZip(t *testing.T) {
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	data := buildZip(t,
		zentry{name: "./", mode: os.ModeDir | 0o755},
		zentry{name: "demo/", mode: os.ModeDir | 0o700, modified: old},
		zentry{name: "demo/SKILL.md", body: testManifest, modified: old},
		zentry{name: "demo/scripts/run.sh", body: "#!/bin/sh\n", mode: 0o700, modified: old},
		zentry{name: "demo/scripts/data.bin", body: "\x00\x01", mode: 0o600, store: true},
		zentry{name: "demo/assets/empty/", mode: os.ModeDir | 0o755},
		zentry{name: "demo/./refs//a.md", body: "a"},
		zentry{name: "demo/refs/A.md", body: "A", unixMode: 0o100744},
		zentry{name: "demo/refs/typeless", body: "t", unixMode: 0o755},
	)
	base := t.TempDir()
	zp := filepath.Join(base, "a.zip")
	writeFile(t, zp, data)
	dst := filepath.Join(base, "out")
	if _, err := ExtractZip(zp, dst, skills.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	got := readTree(t, dst)
	want := map[string]treeEntryInfo{
		"demo":                  {mode: os.ModeDir | 0o755, mtime: old.Unix()},
		"demo/SKILL.md":         {mode: 0o644, body: testManifest, mtime: old.Unix()},
		"demo/scripts":          {mode: os.ModeDir | 0o755},
		"demo/scripts/run.sh":   {mode: 0o755, body: "#!/bin/sh\n", mtime: old.Unix()},
		"demo/scripts/data.bin": {mode: 0o644, body: "\x00\x01"},
		"demo/assets":           {mode: os.ModeDir | 0o755},
		"demo/assets/empty":     {mode: os.ModeDir | 0o755},
		"demo/refs":             {mode: os.ModeDir | 0o755},
		"demo/refs/a.md":        {mode: 0o644, body: "a"},
		"demo/refs/A.md":        {mode: 0o755, body: "A"},
		"demo/refs/typeless":    {mode: 0o755, body: "t"},
	}
	if len(got) != len(want) {
		t.Errorf("extracted %v, want %v", got, want)
	}
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s missing", p)
		case g.mode != w.mode || g.body != w.body:
			t.Errorf("%s = %v %q, want %v %q", p, g.mode, g.body, w.mode, w.body)
		case w.mtime != 0 && g.mtime != w.mtime:
			t.Errorf("%s mtime %v, want %v", p, time.Unix(g.mtime, 0).UTC(), old)
		}
	}
}

func TestExtractZipRejects(t *testing.T) {
	ok := zentry{name: "SKILL.md", body: testManifest}
	small := skills.Limits{MaxFiles: 3, MaxEntries: 5, MaxDepth: 3, MaxFileBytes: 1000, MaxTotalBytes: 1500}
	big := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		name      string
		archive   func(tb testing.TB) []byte
		lim       skills.Limits
		wantErr   error
		wantLimit string
	}{
		{name: "parent", archive: entries(ok, zentry{name: "../evil.txt", body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "parent inside", archive: entries(ok, zentry{name: "a/../../evil.txt", body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "parent dir entry", archive: entries(ok, zentry{name: "../", mode: os.ModeDir | 0o755}), wantErr: skills.ErrUnsafePath},
		{name: "absolute", archive: entries(ok, zentry{name: "/etc/cron.d/evil", body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "drive letter", archive: entries(ok, zentry{name: "C:/evil.txt", body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "percent-encoded parent", archive: entries(ok, zentry{name: "%2e%2e/evil.txt", body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "mixed-case encoded parent and slash", archive: entries(ok, zentry{name: "%2E%2e%2Fevil.txt", body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "double-encoded parent", archive: entries(ok, zentry{name: "a/%252e%252e/%252e%252e/evil", body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "backslash parent", archive: entries(ok, zentry{name: `..\evil.txt`, body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "backslash separator", archive: entries(ok, zentry{name: `scripts\run.sh`, body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "NUL in name", archive: entries(ok, zentry{name: "a\x00.txt", body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "non-UTF-8 name", archive: entries(ok, zentry{name: "caf\xe9.txt", body: "x"}), wantErr: skills.ErrUnsafePath},
		{name: "symlink dir entry", archive: entries(ok, zentry{name: "up/", unixMode: 0o120777}), wantErr: skills.ErrSpecialFile},
		{name: "fifo entry", archive: entries(ok, zentry{name: "pipe", mode: os.ModeNamedPipe | 0o644}), wantErr: skills.ErrSpecialFile},
		{name: "device entry", archive: entries(ok, zentry{name: "null", mode: os.ModeDevice | os.ModeCharDevice | 0o666}), wantErr: skills.ErrSpecialFile},
		{name: "duplicate file", archive: entries(ok, zentry{name: "a.txt", body: "1"}, zentry{name: "a.txt", body: "2"}), wantErr: skills.ErrUnsafePath},
		{name: "duplicate after cleaning", archive: entries(ok, zentry{name: "a/b.txt", body: "1"}, zentry{name: "./a//b.txt", body: "2"}), wantErr: skills.ErrUnsafePath},
		{name: "duplicate manifest", archive: entries(ok, ok), wantErr: skills.ErrUnsafePath},
		{name: "duplicate dir", archive: entries(ok, zentry{name: "d/", mode: os.ModeDir | 0o755}, zentry{name: "d/", mode: os.ModeDir | 0o755}), wantErr: skills.ErrUnsafePath},
		{name: "file then dir", archive: entries(ok, zentry{name: "a", body: "1"}, zentry{name: "a/", mode: os.ModeDir | 0o755}), wantErr: skills.ErrUnsafePath},
		{name: "dir then file", archive: entries(ok, zentry{name: "a/", mode: os.ModeDir | 0o755}, zentry{name: "a", body: "1"}), wantErr: skills.ErrUnsafePath},
		{name: "file then child", archive: entries(ok, zentry{name: "a", body: "1"}, zentry{name: "a/b", body: "2"}), wantErr: skills.ErrUnsafePath},
		{name: "child then file", archive: entries(ok, zentry{name: "a/b", body: "2"}, zentry{name: "a", body: "1"}), wantErr: skills.ErrUnsafePath},
		{name: "directory with data", archive: func(tb testing.TB) []byte { return lyingDirZip(tb) }, wantErr: zip.ErrFormat},
		{name: "too many files", lim: small, archive: entries(ok, zentry{name: "a"}, zentry{name: "b"}, zentry{name: "c"}), wantErr: skills.ErrLimit, wantLimit: skills.LimitFiles},
		{name: "too many entries", lim: small, archive: entries(ok, zentry{name: "a/b/c"}, zentry{name: "d/e"}, zentry{name: "f/"}), wantErr: skills.ErrLimit, wantLimit: skills.LimitEntries},
		{name: "too many archive entries", lim: small, archive: entries(ok, zentry{name: "a/", mode: os.ModeDir | 0o755}, zentry{name: "b/", mode: os.ModeDir | 0o755}, zentry{name: "c/", mode: os.ModeDir | 0o755}, zentry{name: "d/", mode: os.ModeDir | 0o755}, zentry{name: "e/", mode: os.ModeDir | 0o755}), wantErr: skills.ErrLimit, wantLimit: skills.LimitEntries},
		{name: "nesting too deep", lim: small, archive: entries(ok, zentry{name: "a/b/c/d.txt"}), wantErr: skills.ErrLimit, wantLimit: skills.LimitDepth},
		{name: "deep dir entry", lim: small, archive: entries(ok, zentry{name: "a/b/c/d/", mode: os.ModeDir | 0o755}), wantErr: skills.ErrLimit, wantLimit: skills.LimitDepth},
		{name: "file over the size limit", lim: small, archive: entries(ok, zentry{name: "big", body: big(1001)}), wantErr: skills.ErrLimit, wantLimit: skills.LimitFileBytes},
		{name: "total over the limit", lim: small, archive: entries(zentry{name: "SKILL.md", body: big(800)}, zentry{name: "b", body: big(800)}), wantErr: skills.ErrLimit, wantLimit: skills.LimitTotalBytes},
		{name: "compression bomb entry", archive: func(tb testing.TB) []byte {
			return buildZip(tb, ok, zentry{name: "zeros", body: string(make([]byte, 8<<20))})
		}, wantErr: skills.ErrLimit, wantLimit: skills.LimitCompression},
		{name: "overlapping entries bomb", archive: func(tb testing.TB) []byte { return overlapZip(tb, 200, 1<<20) }, wantErr: skills.ErrLimit, wantLimit: skills.LimitCompression},
		{name: "overlapping entries over total", archive: func(tb testing.TB) []byte { return overlapZip(tb, 300, 1<<20) }, wantErr: skills.ErrLimit, wantLimit: skills.LimitTotalBytes},
		// Several entries sharing one stream are refused whatever the
		// sizes: here too small for any ratio or size limit.
		{name: "overlapping entries within the limits", archive: func(tb testing.TB) []byte { return overlapZip(tb, 3, 1<<10) }, wantErr: zip.ErrFormat},
		{name: "encrypted entry", archive: func(tb testing.TB) []byte {
			b := buildZip(tb, ok, zentry{name: "secret.txt", body: "plain text, flagged encrypted"})
			b[bytes.LastIndex(b, []byte{'P', 'K', 1, 2})+8] |= 1
			return b
		}, wantErr: skills.ErrInvalid},
		{name: "directory end implying a negative offset", archive: func(tb testing.TB) []byte {
			b := buildZip(tb, ok)
			binary.LittleEndian.PutUint32(b[len(b)-22+16:], 1<<30)
			return b
		}, wantErr: zip.ErrFormat},
		{name: "header understates size", archive: func(tb testing.TB) []byte { return lyingZip(tb, 100, 4<<20) }, wantErr: zip.ErrFormat},
		{name: "truncated", archive: func(tb testing.TB) []byte {
			b := buildZip(tb, ok, zentry{name: "scripts/run.sh", body: big(5000)})
			return b[:len(b)/2]
		}, wantErr: zip.ErrFormat},
		{name: "truncated central directory", archive: func(tb testing.TB) []byte {
			b := buildZip(tb, ok, zentry{name: "scripts/run.sh", body: big(5000)})
			return b[:len(b)-10]
		}, wantErr: zip.ErrFormat},
		{name: "corrupt data", archive: func(tb testing.TB) []byte {
			b := buildZip(tb, zentry{name: "SKILL.md", body: testManifest, store: true})
			i := bytes.Index(b, []byte("A demo skill"))
			b[i] ^= 0xff
			return b
		}, wantErr: zip.ErrChecksum},
		{name: "corrupt central directory", archive: func(tb testing.TB) []byte {
			b := buildZip(tb, ok, zentry{name: "b", body: "b"})
			i := bytes.LastIndex(b, []byte{'P', 'K', 1, 2})
			b[i+2] = 9
			return b
		}, wantErr: zip.ErrFormat},
		{name: "not an archive", archive: func(tb testing.TB) []byte { return []byte(testManifest) }, wantErr: zip.ErrFormat},
		{name: "empty file", archive: func(tb testing.TB) []byte { return nil }, wantErr: zip.ErrFormat},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			zp := filepath.Join(base, "a.zip")
			writeFile(t, zp, tc.archive(t))
			dst := filepath.Join(base, "out")
			_, err := ExtractZip(zp, dst, tc.lim)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ExtractZip error %v, want %v", err, tc.wantErr)
			}
			if got := limitOf(err); got != tc.wantLimit {
				t.Errorf("limit %q, want %q (%v)", got, tc.wantLimit, err)
			}
			assertAbsent(t, dst)
			assertOnly(t, base, "a.zip")
		})
	}
}

func entries(es ...zentry) func(testing.TB) []byte {
	return func(tb testing.TB) []byte { return buildZip(tb, es...) }
}

// lyingDirZip holds a directory entry that carries data.
func lyingDirZip(tb testing.TB) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "d/", Method: zip.Store, CRC32: crc32.ChecksumIEEE([]byte("data")), CompressedSize64: 4, UncompressedSize64: 4}
	h.SetMode(os.ModeDir | 0o755)
	w, err := zw.CreateRaw(h)
	if err != nil {
		tb.Fatal(err)
	}
	io.WriteString(w, "data")
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
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
		io.WriteString(w, testManifest)
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
			assertAbsent(t, dst)
			assertOnly(t, base, "a.zip")
		})
	}
}

func TestExtractZipNoManifest(t *testing.T) {
	base := t.TempDir()
	zp := filepath.Join(base, "a.zip")
	writeFile(t, zp, buildZip(t, zentry{name: "demo/README.md", body: "no manifest"}))
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
	assertAbsent(t, stage)
}

func TestExtractZipRefusesNonEmptyDestination(t *testing.T) {
	base := t.TempDir()
	zp := filepath.Join(base, "a.zip")
	writeFile(t, zp, buildZip(t, zentry{name: "SKILL.md", body: testManifest}))
	dst := filepath.Join(base, "out")
	writeTree(t, dst, tfile{name: "keep", body: "mine"})
	if _, err := ExtractZip(zp, dst, skills.DefaultLimits()); !errors.Is(err, skills.ErrExists) {
		t.Fatalf("error %v, want ErrExists", err)
	}
	assertOnly(t, dst, "keep")
}

// FuzzExtractZip feeds arbitrary bytes as an archive: ExtractZip must never
// panic, never write outside dst, never leave dst behind on error, and never
// exceed the limits on success. The only links it makes are relative ones
// that stay inside dst lexically, never in the place of a directory, and
// none was followed: nothing appeared outside dst.
func FuzzExtractZip(f *testing.F) {
	f.Add(buildZip(f, zentry{name: "SKILL.md", body: testManifest}, zentry{name: "scripts/run.sh", body: "#!/bin/sh\n", mode: 0o755}))
	f.Add(buildZip(f, zentry{name: "d/", mode: os.ModeDir | 0o755}, zentry{name: "d/SKILL.md", body: testManifest, store: true}))
	f.Add(buildZip(f, zentry{name: "../x", body: "x"}))
	f.Add(buildZip(f, zentry{name: "%2e%2e/x", body: "x"}))
	f.Add(buildZip(f, zentry{name: "l", body: "/etc", mode: os.ModeSymlink | 0o777}))
	f.Add(buildZip(f, zentry{name: "d/l", body: "../x", mode: os.ModeSymlink | 0o777}, zentry{name: "x/f", body: "f"}))
	f.Add(buildZip(f, zentry{name: "d/l", body: "../../x", mode: os.ModeSymlink | 0o777}, zentry{name: "d/l/f", body: "f"}))
	f.Add(buildZip(f, zentry{name: "l", body: ".", mode: os.ModeSymlink | 0o777}, zentry{name: "m", body: "l/l/..", mode: os.ModeSymlink | 0o777}))
	f.Add(buildZip(f, zentry{name: "a", body: "1"}, zentry{name: "a/b", body: "2"}))
	f.Add(buildZip(f, zentry{name: "a/b/c/d/e/f/g/h/i/j", body: "deep"}))
	f.Add(overlapZip(f, 4, 4096))
	f.Add(lyingZip(f, 10, 4096))
	f.Add(lyingDirZip(f))
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	lim := skills.Limits{MaxTotalBytes: 1 << 20, MaxFiles: 20, MaxEntries: 40, MaxDepth: 6, MaxFileBytes: 256 << 10, MaxCompression: 50}
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		zp := filepath.Join(base, "a.zip")
		writeFile(t, zp, data)
		dst := filepath.Join(base, "out")
		_, err := ExtractZip(zp, dst, lim)
		if err != nil {
			assertAbsent(t, dst)
			assertOnly(t, base, "a.zip")
			return
		}
		assertOnly(t, base, "a.zip", "out")
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
