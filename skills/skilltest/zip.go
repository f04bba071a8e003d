package skilltest

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"io/fs"
	"path"
	"testing"
	"time"
)

// ZipEntry is one entry of a test archive, written as told: its name and
// mode are not checked, so an archive can hold what no tool would write.
type ZipEntry struct {
	Name string
	Data []byte      // a file's content, a symlink's target
	Mode fs.FileMode // zero: a regular 0644 file
	// Modified is the entry's time; zero writes none (MS-DOS time 0, no
	// extended timestamp).
	Modified time.Time
	Store    bool // no compression (a name ending in "/" is always stored)
	// UnixMode, when not zero, is written as the raw Unix mode of the
	// external attributes (creator Unix), overriding Mode: a file type or
	// bits that fs.FileMode cannot say.
	UnixMode uint32
	// Raw, when set, is written as the header verbatim (zip.Writer's
	// CreateRaw) and Data as the entry's stored bytes: the header claims
	// whatever sizes, CRC and method the test wants. The other fields are
	// then unused.
	Raw *zip.FileHeader
}

// RawEntry is an entry whose header claims method, crc and the sizes
// given, mode 0644, with stored as its bytes: a header that lies.
func RawEntry(name string, method uint16, stored []byte, crc uint32, compressed, uncompressed uint64) ZipEntry {
	h := &zip.FileHeader{Name: name, Method: method, CRC32: crc, CompressedSize64: compressed, UncompressedSize64: uncompressed}
	h.SetMode(0o644)
	return ZipEntry{Raw: h, Data: stored}
}

// Zip returns an archive of the entries, in order; each but a stored one
// or a directory is deflated by archive/zip.
func Zip(tb testing.TB, entries ...ZipEntry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		if err := addEntry(zw, e); err != nil {
			tb.Fatalf("skilltest: zip entry %q: %v", e.Name, err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// addEntry writes one entry to zw.
func addEntry(zw *zip.Writer, e ZipEntry) error {
	if e.Raw != nil {
		w, err := zw.CreateRaw(e.Raw)
		if err == nil {
			_, err = w.Write(e.Data)
		}
		return err
	}
	h := &zip.FileHeader{Name: e.Name, Method: zip.Deflate, Modified: e.Modified}
	if e.Store {
		h.Method = zip.Store
	}
	mode := e.Mode
	if mode == 0 {
		mode = 0o644
	}
	h.SetMode(mode)
	if e.UnixMode != 0 {
		h.CreatorVersion = 3<<8 | 20
		h.ExternalAttrs = e.UnixMode << 16
	}
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = w.Write(e.Data)
	}
	return err
}

// WriteZip writes Zip(tb, entries...) to the file p (0644).
func WriteZip(tb testing.TB, p string, entries ...ZipEntry) {
	tb.Helper()
	WriteFile(tb, p, Zip(tb, entries...), 0o644)
}

// Stamp returns a copy of entries in which every entry without a time of
// its own (and not raw) has modified.
func Stamp(modified time.Time, entries []ZipEntry) []ZipEntry {
	out := make([]ZipEntry, len(entries))
	for i, e := range entries {
		if e.Raw == nil && e.Modified.IsZero() {
			e.Modified = modified
		}
		out[i] = e
	}
	return out
}

// ZipEntriesOf lists fsys as archive entries named prefix+path, in lexical
// order: every file with its mode (zero permission bits: 0644) and time,
// every symlink with its target, and a directory entry (0755) for every
// directory that holds nothing, so that empty directories survive. It
// works on a tree and on a folder (os.DirFS).
func ZipEntriesOf(tb testing.TB, fsys fs.FS, prefix string) []ZipEntry {
	tb.Helper()
	var out []ZipEntry
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || name == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := ZipEntry{Name: prefix + name, Mode: info.Mode(), Modified: info.ModTime()}
		switch {
		case d.IsDir():
			kids, err := fs.ReadDir(fsys, name)
			if err != nil || len(kids) > 0 {
				return err
			}
			e.Name, e.Mode, e.Modified = path.Clean(e.Name)+"/", fs.ModeDir|0o755, time.Time{}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := fs.ReadLink(fsys, name)
			if err != nil {
				return err
			}
			e.Data, e.Mode, e.Modified = []byte(target), fs.ModeSymlink|0o777, time.Time{}
		case info.Mode().IsRegular():
			if e.Mode.Perm() == 0 {
				e.Mode |= 0o644
			}
			if e.Data, err = fs.ReadFile(fsys, name); err != nil {
				return err
			}
		default:
			return &fs.PathError{Op: "zip", Path: name, Err: fs.ErrInvalid}
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// ZipFS is the archive of ZipEntriesOf(tb, fsys, prefix).
func ZipFS(tb testing.TB, fsys fs.FS, prefix string) []byte {
	tb.Helper()
	return Zip(tb, ZipEntriesOf(tb, fsys, prefix)...)
}

// Deflate compresses data once at the best ratio: the bytes of a raw
// deflated entry.
func Deflate(data []byte) []byte {
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestCompression)
	fw.Write(data)
	fw.Close()
	return buf.Bytes()
}
