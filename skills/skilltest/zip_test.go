package skilltest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"slices"
	"testing"
	"testing/fstest"
	"time"
)

// readZip opens an archive with archive/zip.
func readZip(t *testing.T, data []byte) *zip.Reader {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("open the archive: %v", err)
	}
	return zr
}

// body reads an entry's content, or returns the error reading it.
func body(f *zip.File) (string, error) {
	rc, err := f.Open()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// TestZipWritesAsTold: names that no tool would write, modes of every
// kind, raw Unix modes, stored and deflated entries, times or none come
// back from archive/zip as given.
func TestZipWritesAsTold(t *testing.T) {
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	data := Zip(t,
		ZipEntry{Name: "skill/", Mode: fs.ModeDir | 0o700, Modified: when},
		ZipEntry{Name: "skill/SKILL.md", Data: []byte("---\nname: a\n---\n"), Modified: when},
		ZipEntry{Name: "skill/run.sh", Data: []byte("#!/bin/sh\n"), Mode: 0o755, Store: true},
		ZipEntry{Name: "skill/link", Data: []byte("../../etc/passwd"), Mode: fs.ModeSymlink | 0o777},
		ZipEntry{Name: "skill/null", Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666},
		ZipEntry{Name: "skill/raw", UnixMode: 0o010644}, // a fifo, by its raw bits
		ZipEntry{Name: "../evil.txt", Data: []byte("x")},
		ZipEntry{Name: "skill/a\x00b\xff.txt", Data: []byte("x")},
		ZipEntry{Name: "skill/notes.txt", Data: []byte("one")},
		ZipEntry{Name: "skill/notes.txt", Data: []byte("two")},
	)
	zr := readZip(t, data)
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	want := []string{"skill/", "skill/SKILL.md", "skill/run.sh", "skill/link", "skill/null", "skill/raw",
		"../evil.txt", "skill/a\x00b\xff.txt", "skill/notes.txt", "skill/notes.txt"}
	if !slices.Equal(names, want) {
		t.Fatalf("names %q, want %q", names, want)
	}
	f := zr.File
	for i, m := range []fs.FileMode{fs.ModeDir | 0o700, 0o644, 0o755, fs.ModeSymlink | 0o777,
		fs.ModeDevice | fs.ModeCharDevice | 0o666, fs.ModeNamedPipe | 0o644, 0o644, 0o644} {
		if got := f[i].Mode(); got != m {
			t.Errorf("%q: mode %v, want %v", f[i].Name, got, m)
		}
	}
	if f[2].Method != zip.Store || f[1].Method != zip.Deflate || f[0].Method != zip.Store {
		t.Errorf("methods %d %d %d, want stored, deflated, stored", f[0].Method, f[1].Method, f[2].Method)
	}
	if !f[1].Modified.Equal(when) || f[6].ModifiedDate != 0 || f[6].ModifiedTime != 0 {
		t.Errorf("times %v and %v, want %v and none", f[1].Modified, f[6].Modified, when)
	}
	for i, w := range map[int]string{1: "---\nname: a\n---\n", 3: "../../etc/passwd", 8: "one", 9: "two"} {
		if got, err := body(f[i]); err != nil || got != w {
			t.Errorf("%q: %q, %v; want %q", f[i].Name, got, err, w)
		}
	}
}

// TestZipBytesPinned pins the bytes of two archives, one as the
// integration suite's hostile archives are built (every entry stamped, raw
// headers that lie), one as the skills package's are (no time, raw Unix
// modes): the pins are the archives the helpers this package replaced
// wrote, and a change here changes every hostile archive of the tests.
func TestZipBytesPinned(t *testing.T) {
	x := []byte("x")
	stamped := Zip(t, Stamp(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), []ZipEntry{
		{Name: "skill/", Mode: os.ModeDir | 0o755},
		{Name: "skill/SKILL.md", Data: []byte("---\nname: hostile\ndescription: A skill that looks harmless.\n---\n\nBody.\n")},
		{Name: "skill/../../evil.txt", Data: x},
		{Name: "skill/style.md", Mode: os.ModeSymlink | 0o777, Data: []byte("../shared/style.md")},
		{Name: "skill/big.txt", Data: bytes.Repeat([]byte("reference text\n"), 400), Store: true},
		RawEntry("skill/tera.bin", zip.Deflate, Deflate(x), crc32.ChecksumIEEE(x), uint64(len(Deflate(x))), 1<<40),
	})...)
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	timeless := Zip(t,
		ZipEntry{Name: "./", Mode: os.ModeDir | 0o755},
		ZipEntry{Name: "demo/", Mode: os.ModeDir | 0o700, Modified: old},
		ZipEntry{Name: "demo/SKILL.md", Data: []byte("---\nname: demo\ndescription: d\n---\n"), Modified: old},
		ZipEntry{Name: "demo/run.sh", Data: []byte("#!/bin/sh\n"), Mode: 0o755, Store: true},
		ZipEntry{Name: "demo/link", Data: []byte("SKILL.md"), Mode: os.ModeSymlink | 0o777},
		ZipEntry{Name: "demo/dev", UnixMode: 0o020644},
	)
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"stamped":  {stamped, "821e1cb00b2f92d485c74dde7b392591a289c60850d4a278ae438911a2e27002"},
		"timeless": {timeless, "8bdd8c0c619d85cabee06a3f7afb280858a6d3c61905982a8fbab24283b17bdc"},
	} {
		sum := sha256.Sum256(c.data)
		if got := hex.EncodeToString(sum[:]); got != c.want {
			t.Errorf("%s archive: sha256 %s, want %s", name, got, c.want)
		}
	}
}

// TestRawEntryLies: a raw entry's header claims what it was given, and
// reading it meets the lie.
func TestRawEntryLies(t *testing.T) {
	real := make([]byte, 4096)
	comp := Deflate(real)
	data := Zip(t, RawEntry("liar.bin", zip.Deflate, comp, crc32.ChecksumIEEE(real), uint64(len(comp)), 10))
	f := readZip(t, data).File[0]
	if f.UncompressedSize64 != 10 || f.CompressedSize64 != uint64(len(comp)) || f.Mode() != 0o644 {
		t.Fatalf("header: %d/%d bytes, mode %v; want 10/%d, 0644", f.UncompressedSize64, f.CompressedSize64, f.Mode(), len(comp))
	}
	if _, err := body(f); err == nil {
		t.Error("read 4096 bytes declared as 10 without an error")
	}
}

func TestStamp(t *testing.T) {
	when, own := time.Unix(1e9, 0).UTC(), time.Unix(2e9, 0).UTC()
	raw := RawEntry("r", zip.Store, nil, 0, 0, 0)
	in := []ZipEntry{{Name: "a"}, {Name: "b", Modified: own}, raw}
	out := Stamp(when, in)
	if !out[0].Modified.Equal(when) || !out[1].Modified.Equal(own) || !out[2].Modified.IsZero() || !out[2].Raw.Modified.IsZero() {
		t.Errorf("stamped %v %v %v", out[0].Modified, out[1].Modified, out[2].Modified)
	}
	if !in[0].Modified.IsZero() {
		t.Error("Stamp changed its argument")
	}
}

// TestZipFS packs a tree and a folder written from it: the same entries,
// modes and bytes, an entry for the empty directory only.
func TestZipFS(t *testing.T) {
	tree := fstest.MapFS{
		"SKILL.md":       File("---\nname: a\n---\n"),
		"scripts/run.sh": Executable("#!/bin/sh\n"),
		"empty":          Dir(),
		"link":           Symlink("SKILL.md"),
	}
	dir := WriteDir(t, t.TempDir(), tree)
	for name, fsys := range map[string]fs.FS{"tree": tree, "folder": os.DirFS(dir)} {
		t.Run(name, func(t *testing.T) {
			zr := readZip(t, ZipFS(t, fsys, "a/"))
			got := map[string]string{}
			for _, f := range zr.File {
				b, err := body(f)
				if err != nil {
					t.Fatal(err)
				}
				got[f.Name] = f.Mode().String() + " " + b
			}
			want := map[string]string{
				"a/SKILL.md":       "-rw-r--r-- ---\nname: a\n---\n",
				"a/scripts/run.sh": "-rwxr-xr-x #!/bin/sh\n",
				"a/empty/":         "drwxr-xr-x ",
				"a/link":           "Lrwxrwxrwx SKILL.md",
			}
			if len(got) != len(want) {
				t.Errorf("entries %q, want %q", got, want)
			}
			for n, w := range want {
				if got[n] != w {
					t.Errorf("%s: %q, want %q", n, got[n], w)
				}
			}
		})
	}
}

// TestPatchAndRebuild: the central directory is found, patched in place
// and rebuilt with several names for one local entry.
func TestPatchAndRebuild(t *testing.T) {
	data := Zip(t, ZipEntry{Name: "a.txt", Data: []byte("checked\n"), Store: true}, ZipEntry{Name: "b.txt", Data: []byte("b")})
	if _, _, n := ZipDirectory(t, data); n != 2 {
		t.Fatalf("%d entries in the directory, want 2", n)
	}
	names, headers := CentralHeaders(t, data)
	if !slices.Equal(names, []string{"a.txt", "b.txt"}) || len(headers) != 2 {
		t.Fatalf("names %q", names)
	}
	if got := string(EntryData(t, data, "a.txt")); got != "checked\n" {
		t.Errorf("stored bytes %q", got)
	}

	overlap := RebuildDirectory(t, data, [][]byte{headers["a.txt"], headers["a.txt"], headers["a.txt"]}, []string{"x1", "x2", "x3"})
	zr := readZip(t, overlap)
	if len(zr.File) != 3 {
		t.Fatalf("%d entries after the rebuild, want 3", len(zr.File))
	}
	for _, f := range zr.File {
		if b, err := body(f); err != nil || b != "checked\n" {
			t.Errorf("%s: %q, %v", f.Name, b, err)
		}
	}

	bad := PatchEntry(t, bytes.Clone(data), "a.txt", func(c, l []byte) { c[16] ^= 0xff; l[14] ^= 0xff })
	if _, err := body(readZip(t, bad).File[0]); !errors.Is(err, zip.ErrChecksum) {
		t.Errorf("a patched CRC reads with %v, want %v", err, zip.ErrChecksum)
	}
	if msg := fails(t, func(tb testing.TB) { PatchEntry(tb, data, "none", func(c, l []byte) {}) }); msg == "" {
		t.Error("patched an entry that is not there")
	}
	if msg := fails(t, func(tb testing.TB) { ZipDirectory(tb, data[:len(data)-1]) }); msg == "" {
		t.Error("found a directory in a cut archive")
	}
}
