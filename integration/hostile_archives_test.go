package integration

import (
	"archive/zip"
	"bytes"
	endian "encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skillfs/skills/skilltest"
)

// noise is n pseudo-random bytes: incompressible.
func noise(n int, seed byte) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewChaCha8([32]byte{seed}))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// manifestZip is a skill "skill/" whose SKILL.md is m.
func manifestZip(m string) []skilltest.ZipEntry {
	return []skilltest.ZipEntry{{Name: "skill/", Mode: os.ModeDir | 0o755}, {Name: "skill/SKILL.md", Data: []byte(m)}}
}

// hostileArchive is one hostile ZIP: how to build it, the exit code that
// refuses it and what the refusal must name.
type hostileArchive struct {
	name  string
	build func(t *testing.T) []byte
	file  string   // the archive's file name, "" for a plain one
	code  int      // 0 means 5
	want  []string // each must appear in the message
}

func hostileArchives() []hostileArchive {
	plain := func(entries ...skilltest.ZipEntry) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return zipBytes(t, entries) }
	}
	with := func(extra ...skilltest.ZipEntry) func(t *testing.T) []byte { return plain(zipWith(extra...)...) }
	x := []byte("x")
	patched := func(entries []skilltest.ZipEntry, fn func(t *testing.T, data []byte) []byte) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return fn(t, zipBytes(t, entries)) }
	}
	mb := []byte(hex.EncodeToString(noise(1<<20, 7))) // 2 MiB of text that deflates 2:1
	zeros1M := make([]byte, 1<<20)
	long := strings.Repeat("n", 300)
	var longPath strings.Builder
	longPath.WriteString("skill/")
	for i := 0; i < 20; i++ {
		longPath.WriteString(strings.Repeat(string(rune('a'+i)), 250) + "/")
	}
	longPath.WriteString("deep.txt")
	laughs := "---\nname: laughs\n" +
		"a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" +
		"b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
		"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
		"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
		"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n" +
		"f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n" +
		"g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n" +
		"h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n" +
		"i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n" +
		"metadata: {laughs: *i}\nskill_dependencies: *i\ndescription: *i\n---\nBody.\n"
	// A frontmatter of many small keys: a few MB of YAML cost the parser
	// a hundred times that in memory.
	var bigFM strings.Builder
	bigFM.WriteString("---\nname: big-frontmatter\ndescription: Looks harmless.\nmetadata:\n")
	for i := 0; bigFM.Len() < 2<<20; i++ {
		fmt.Fprintf(&bigFM, "  k%d: v\n", i)
	}
	bigFM.WriteString("---\nBody.\n")

	return []hostileArchive{
		// Paths.
		{name: "zip-slip ../x", build: with(skilltest.ZipEntry{Name: "../evil.txt", Data: x}), want: []string{`"../evil.txt"`, "parent directory"}},
		{name: "zip-slip skill/../../x", build: with(skilltest.ZipEntry{Name: "skill/../../evil.txt", Data: x}), want: []string{`"skill/../../evil.txt"`, "parent directory"}},
		{name: "zip-slip a/../../x", build: with(skilltest.ZipEntry{Name: "a/../../evil.txt", Data: x}), want: []string{`"a/../../evil.txt"`}},
		{name: "zip-slip at the end skill/x/..", build: with(skilltest.ZipEntry{Name: "skill/x/..", Data: x}), want: []string{`"skill/x/.."`}},
		{name: "absolute /etc/x", build: with(skilltest.ZipEntry{Name: "/etc/evil.txt", Data: x}), want: []string{`"/etc/evil.txt"`, "absolute"}},
		{name: "drive letter C:/x", build: with(skilltest.ZipEntry{Name: "C:/evil.txt", Data: x}), want: []string{`"C:/evil.txt"`, "drive letter"}},
		{name: `drive letter C:\x`, build: with(skilltest.ZipEntry{Name: `C:\evil.txt`, Data: x}), want: []string{"evil.txt", "backslash"}},
		{name: `backslash skill\x`, build: with(skilltest.ZipEntry{Name: `skill\notes.txt`, Data: x}), want: []string{"notes.txt", "backslash"}},
		{name: `backslash slip skill\..\..\x`, build: with(skilltest.ZipEntry{Name: `skill\..\..\evil.txt`, Data: x}), want: []string{"evil.txt", "backslash"}},
		{name: "UNC //server/share/x", build: with(skilltest.ZipEntry{Name: "//server/share/evil.txt", Data: x}), want: []string{"//server/share/evil.txt", "absolute"}},
		{name: "percent-encoded %2e%2e/", build: with(skilltest.ZipEntry{Name: "skill/%2e%2e/%2e%2e/evil.txt", Data: x}), want: []string{"%2e%2e", "percent-encoded"}},
		{name: "percent-encoded %2E%2E%2F", build: with(skilltest.ZipEntry{Name: "skill/%2E%2E%2F%2E%2E%2Fevil.txt", Data: x}), want: []string{"%2E%2E%2F", "percent-encoded"}},
		{name: "double-encoded %252e%252e", build: with(skilltest.ZipEntry{Name: "skill/%252e%252e/%252e%252e/evil.txt", Data: x}), want: []string{"%252e%252e", "percent-encoded"}},
		{name: "overlong UTF-8 %c0%ae", build: with(skilltest.ZipEntry{Name: "skill/%c0%ae%c0%ae/evil.txt", Data: x}), want: []string{"%c0%ae", "invalid UTF-8"}},
		{name: "overlong UTF-8 bytes", build: with(skilltest.ZipEntry{Name: "skill/\xc0\xae\xc0\xae/evil.txt", Data: x}), want: []string{"evil.txt", "UTF-8"}},
		{name: "invalid UTF-8 name", build: with(skilltest.ZipEntry{Name: "skill/bad\xff\xfe.txt", Data: x}), want: []string{"UTF-8"}},
		{name: "NUL in a name", build: with(skilltest.ZipEntry{Name: "skill/a\x00b.txt", Data: x}), want: []string{`a\x00b.txt`, "NUL"}},
		{name: "control character in a name", build: with(skilltest.ZipEntry{Name: "skill/bell\a.txt", Data: x}), want: []string{`bell\a.txt`, "control character"}},
		{name: "newline in a name", build: with(skilltest.ZipEntry{Name: "skill/two\nlines.txt", Data: x}), want: []string{`two\nlines.txt`, "control character"}},
		{name: "DEL in a name", build: with(skilltest.ZipEntry{Name: "skill/del\x7f.txt", Data: x}), want: []string{`del\x7f.txt`, "control character"}},
		{name: "empty name", build: with(skilltest.ZipEntry{Name: "", Data: x}), want: []string{`""`, "empty"}},
		{name: "300-byte name", build: with(skilltest.ZipEntry{Name: "skill/" + long, Data: x}), want: []string{long, "255 bytes"}},
		{name: "path longer than PATH_MAX", build: with(skilltest.ZipEntry{Name: longPath.String(), Data: x}), want: []string{"deep.txt"}},
		{name: "reserved .skillfs name", build: with(skilltest.ZipEntry{Name: "skill/.skillfs-x", Data: x}), want: []string{".skillfs-x", "reserved"}},
		{name: "reserved .skillfs directory", build: with(skilltest.ZipEntry{Name: "skill/.skillfs/state.json", Data: x}), want: []string{".skillfs", "reserved"}},
		// Duplicates and type clashes.
		{name: "duplicate entries", build: with(skilltest.ZipEntry{Name: "skill/notes.txt", Data: x}, skilltest.ZipEntry{Name: "skill/notes.txt", Data: x}), want: []string{"skill/notes.txt", "duplicate"}},
		{name: "duplicate after cleaning ./", build: with(skilltest.ZipEntry{Name: "skill/notes.txt", Data: x}, skilltest.ZipEntry{Name: "skill/./notes.txt", Data: x}), want: []string{"skill/./notes.txt", "duplicate"}},
		{name: "duplicate after cleaning //", build: with(skilltest.ZipEntry{Name: "skill/notes.txt", Data: x}, skilltest.ZipEntry{Name: "skill//notes.txt", Data: x}), want: []string{"skill//notes.txt", "duplicate"}},
		{name: "duplicate SKILL.md", build: with(skilltest.ZipEntry{Name: "skill/SKILL.md", Data: goodManifest("other")}), want: []string{"skill/SKILL.md", "duplicate"}},
		{name: "file, then a directory of the same name", build: with(skilltest.ZipEntry{Name: "skill/x", Data: x}, skilltest.ZipEntry{Name: "skill/x/y.txt", Data: x}), want: []string{"skill/x", "both a file and a directory"}},
		{name: "directory, then a file of the same name", build: with(skilltest.ZipEntry{Name: "skill/x/y.txt", Data: x}, skilltest.ZipEntry{Name: "skill/x", Data: x}), want: []string{"skill/x", "duplicate"}},
		{name: "directory entry, then a file of the same name", build: with(skilltest.ZipEntry{Name: "skill/x/", Mode: os.ModeDir | 0o755}, skilltest.ZipEntry{Name: "skill/x", Data: x}), want: []string{"skill/x", "duplicate"}},
		// Entry types.
		// Symlink entries inside the archive are unpacked (TestImportSymlinksFromZip);
		// one that leaves it is skipped, and a SKILL.md skipped is none.
		{name: "SKILL.md is a symlink out of the archive", build: plain(skilltest.ZipEntry{Name: "skill/", Mode: os.ModeDir | 0o755}, skilltest.ZipEntry{Name: "skill/SKILL.md", Mode: os.ModeSymlink | 0o777, Data: []byte("/etc/passwd")}), want: []string{"skill/SKILL.md", "symlink", "no SKILL.md"}},
		{name: "character device", build: with(skilltest.ZipEntry{Name: "skill/null", Mode: os.ModeDevice | os.ModeCharDevice | 0o666}), want: []string{"skill/null", "character device"}},
		{name: "block device", build: with(skilltest.ZipEntry{Name: "skill/sda", Mode: os.ModeDevice | 0o660}), want: []string{"skill/sda", "block device"}},
		{name: "fifo", build: with(skilltest.ZipEntry{Name: "skill/pipe", Mode: os.ModeNamedPipe | 0o644}), want: []string{"skill/pipe", "fifo"}},
		{name: "socket", build: with(skilltest.ZipEntry{Name: "skill/sock", Mode: os.ModeSocket | 0o644}), want: []string{"skill/sock", "socket"}},
		{name: "directory entry with data", build: patched(zipWith(skilltest.ZipEntry{Name: "skill/dirx", Data: x, Store: true}), func(t *testing.T, data []byte) []byte {
			// archive/zip writes no data for a name ending in "/": rename
			// a file entry in the central directory instead.
			return skilltest.PatchEntry(t, data, "skill/dirx", func(c, l []byte) { c[46+len("skill/dirx")-1] = '/' })
		}), want: []string{"skill/dir/", "directory with data"}},
		// Bombs.
		{name: "deflate bomb: one entry at 1000:1", build: with(bombEntry("skill/assets/zeros.bin", 0)), want: []string{"skill/assets/zeros.bin", "compression-ratio limit"}},
		{name: "deflate bomb: whole archive, entries under the floor", build: func(t *testing.T) []byte {
			var es []skilltest.ZipEntry
			for i := 0; i < 100; i++ {
				es = append(es, skilltest.ZipEntry{Name: fmt.Sprintf("skill/assets/z%03d.bin", i), Data: zeros1M})
			}
			return zipBytes(t, zipWith(es...))
		}, want: []string{"compression-ratio limit"}},
		{name: "overlapping entries: 150 names for one deflate stream", build: func(t *testing.T) []byte {
			data := zipBytes(t, zipWith(skilltest.ZipEntry{Name: "skill/assets/z.bin", Data: zeros1M}))
			order, headers := skilltest.CentralHeaders(t, data)
			var hs [][]byte
			var names []string
			for _, n := range order {
				if n != "skill/assets/z.bin" {
					hs, names = append(hs, headers[n]), append(names, n)
				}
			}
			for i := 0; i < 150; i++ {
				hs, names = append(hs, headers["skill/assets/z.bin"]), append(names, fmt.Sprintf("skill/assets/z%03d.bin", i))
			}
			return skilltest.RebuildDirectory(t, data, hs, names)
		}, want: []string{"compression-ratio limit"}},
		{name: "overlapping entries: 100 names for one stored MiB", build: func(t *testing.T) []byte {
			data := zipBytes(t, zipWith(skilltest.ZipEntry{Name: "skill/assets/r.bin", Data: noise(1<<20, 3), Store: true}))
			order, headers := skilltest.CentralHeaders(t, data)
			var hs [][]byte
			var names []string
			for _, n := range order {
				if n != "skill/assets/r.bin" {
					hs, names = append(hs, headers[n]), append(names, n)
				}
			}
			for i := 0; i < 100; i++ {
				hs, names = append(hs, headers["skill/assets/r.bin"]), append(names, fmt.Sprintf("skill/assets/r%03d.bin", i))
			}
			return skilltest.RebuildDirectory(t, data, hs, names)
		}, want: []string{"skill/assets/r0", "overlap"}},
		// Headers that lie.
		{name: "declared small, real 60 MiB", build: with(bombEntry("skill/assets/liar.bin", 1000)), want: []string{"skill/assets/liar.bin"}},
		{name: "declared 10 bytes, stored 2 MB", build: patched(zipWith(skilltest.ZipEntry{Name: "skill/assets/big.txt", Data: mb, Store: true}), func(t *testing.T, data []byte) []byte {
			return skilltest.PatchEntry(t, data, "skill/assets/big.txt", func(c, l []byte) { endian.LittleEndian.PutUint32(c[24:], 10) })
		}), want: []string{"skill/assets/big.txt", "corrupt"}},
		{name: "declared larger than the data", build: patched(zipWith(skilltest.ZipEntry{Name: "skill/notes.txt", Data: []byte("short\n")}), func(t *testing.T, data []byte) []byte {
			return skilltest.PatchEntry(t, data, "skill/notes.txt", func(c, l []byte) { endian.LittleEndian.PutUint32(c[24:], 5000) })
		}), want: []string{"skill/notes.txt", "corrupt"}},
		{name: "compressed size cut short", build: patched(zipWith(skilltest.ZipEntry{Name: "skill/assets/big.txt", Data: mb}), func(t *testing.T, data []byte) []byte {
			return skilltest.PatchEntry(t, data, "skill/assets/big.txt", func(c, l []byte) {
				endian.LittleEndian.PutUint32(c[20:], endian.LittleEndian.Uint32(c[20:])/2)
			})
		}), want: []string{"skill/assets/big.txt", "corrupt"}},
		{name: "compressed size past the end of the archive", build: patched(zipWith(skilltest.ZipEntry{Name: "skill/notes.txt", Data: []byte("short\n")}), func(t *testing.T, data []byte) []byte {
			return skilltest.PatchEntry(t, data, "skill/notes.txt", func(c, l []byte) { endian.LittleEndian.PutUint32(c[20:], 1<<30) })
		}), want: []string{"skill/notes.txt", "past the end of the archive"}},
		{name: "local header offset into another entry's data", build: patched(zipWith(skilltest.ZipEntry{Name: "skill/notes.txt", Data: mb[:4096], Store: true}), func(t *testing.T, data []byte) []byte {
			return skilltest.PatchEntry(t, data, "skill/notes.txt", func(c, l []byte) {
				endian.LittleEndian.PutUint32(c[42:], endian.LittleEndian.Uint32(c[42:])+100)
			})
		}), want: []string{"skill/notes.txt", "local header"}},
		{name: "declared 1 TiB", build: with(skilltest.RawEntry("skill/assets/tera.bin", zip.Deflate, skilltest.Deflate(x), crc32.ChecksumIEEE(x), uint64(len(skilltest.Deflate(x))), 1<<40)), want: []string{"skill/assets/tera.bin", "file-bytes limit"}},
		{name: "ZIP64 size of 2^63", build: with(skilltest.RawEntry("skill/assets/zip64.bin", zip.Store, x, crc32.ChecksumIEEE(x), 1<<63-1, 1<<63-1)), want: []string{"skill/assets/zip64.bin", "limit"}},
		{name: "total over the limit by declared sizes", build: func(t *testing.T) []byte {
			var es []skilltest.ZipEntry
			for i := 0; i < 5; i++ {
				es = append(es, skilltest.RawEntry(fmt.Sprintf("skill/assets/big%d.bin", i), zip.Store, x, crc32.ChecksumIEEE(x), 60<<20, 60<<20))
			}
			return zipBytes(t, zipWith(es...))
		}, want: []string{"skill/assets/big4.bin", "total-bytes limit"}},
		{name: "ZIP64 end record claiming 10^12 entries", build: func(t *testing.T) []byte {
			data := zipBytes(t, zipWith())
			off, size, _ := skilltest.ZipDirectory(t, data)
			out := append([]byte(nil), data[:len(data)-22]...)
			z64 := len(out)
			rec := make([]byte, 56)
			endian.LittleEndian.PutUint32(rec[0:], 0x06064b50)
			endian.LittleEndian.PutUint64(rec[4:], 44)
			endian.LittleEndian.PutUint16(rec[12:], 45)
			endian.LittleEndian.PutUint64(rec[24:], 1e12)
			endian.LittleEndian.PutUint64(rec[32:], 1e12)
			endian.LittleEndian.PutUint64(rec[40:], uint64(size))
			endian.LittleEndian.PutUint64(rec[48:], uint64(off))
			loc := make([]byte, 20)
			endian.LittleEndian.PutUint32(loc[0:], 0x07064b50)
			endian.LittleEndian.PutUint64(loc[8:], uint64(z64))
			endian.LittleEndian.PutUint32(loc[16:], 1)
			end := make([]byte, 22)
			endian.LittleEndian.PutUint32(end[0:], 0x06054b50)
			endian.LittleEndian.PutUint16(end[8:], 0xffff)
			endian.LittleEndian.PutUint16(end[10:], 0xffff)
			endian.LittleEndian.PutUint32(end[12:], 0xffffffff)
			endian.LittleEndian.PutUint32(end[16:], 0xffffffff)
			return append(append(append(out, rec...), loc...), end...)
		}, want: []string{"corrupt"}},
		{name: "end record pointing past the file", build: func(t *testing.T) []byte {
			data := zipBytes(t, zipWith())
			endian.LittleEndian.PutUint32(data[len(data)-22+16:], 1<<30)
			return data
		}, want: []string{"skill/SKILL.md", "outside the archive", "corrupt"}},
		// Damaged data.
		{name: "truncated archive", build: func(t *testing.T) []byte {
			data := zipBytes(t, zipWith(skilltest.ZipEntry{Name: "skill/references/a.md", Data: mb}))
			return data[:len(data)/2]
		}, want: []string{"corrupt"}},
		{name: "truncated inside the central directory", build: func(t *testing.T) []byte {
			data := zipBytes(t, zipWith(skilltest.ZipEntry{Name: "skill/references/a.md", Data: mb}))
			return data[:len(data)-30]
		}, want: []string{"corrupt"}},
		{name: "corrupt deflate stream", build: patched(zipWith(skilltest.ZipEntry{Name: "skill/references/a.md", Data: mb}), func(t *testing.T, data []byte) []byte {
			d := skilltest.EntryData(t, data, "skill/references/a.md")
			for i := range d[:64] {
				d[i] = 0xff
			}
			return data
		}), want: []string{"skill/references/a.md", "corrupt"}},
		{name: "bad CRC", build: patched(zipWith(skilltest.ZipEntry{Name: "skill/notes.txt", Data: []byte("checked\n")}), func(t *testing.T, data []byte) []byte {
			return skilltest.PatchEntry(t, data, "skill/notes.txt", func(c, l []byte) { c[16] ^= 0xff; l[14] ^= 0xff })
		}), want: []string{"skill/notes.txt", "checksum"}},
		{name: "unsupported compression method", build: patched(zipWith(skilltest.ZipEntry{Name: "skill/notes.txt", Data: []byte("bzip2?\n")}), func(t *testing.T, data []byte) []byte {
			return skilltest.PatchEntry(t, data, "skill/notes.txt", func(c, l []byte) {
				endian.LittleEndian.PutUint16(c[10:], 12)
				endian.LittleEndian.PutUint16(l[8:], 12)
			})
		}), want: []string{"skill/notes.txt", "algorithm"}},
		{name: "encrypted flag set", build: patched(zipWith(skilltest.ZipEntry{Name: "skill/notes.txt", Data: []byte("secret?\n")}), func(t *testing.T, data []byte) []byte {
			return skilltest.PatchEntry(t, data, "skill/notes.txt", func(c, l []byte) { c[8] |= 1; l[6] |= 1 })
		}), want: []string{"skill/notes.txt", "encrypted"}},
		{name: "random bytes", build: func(t *testing.T) []byte { return noise(64<<10, 9) }, want: []string{"corrupt"}},
		{name: "zero bytes named .zip", file: ".zip", build: func(t *testing.T) []byte { return nil }, want: []string{"corrupt"}},
		{name: "prepended stub with a zip-slip", file: "setup.zip", build: func(t *testing.T) []byte {
			stub := append([]byte("MZ\x90\x00"), noise(4096, 4)...)
			return append(stub, zipBytes(t, zipWith(skilltest.ZipEntry{Name: "skill/../../evil.txt", Data: x}))...)
		}, want: []string{"skill/../../evil.txt"}},
		// Counts.
		{name: "too many entries", build: func(t *testing.T) []byte {
			es := zipWith()
			for i := 0; i <= 40000; i++ {
				es = append(es, skilltest.ZipEntry{Name: fmt.Sprintf("skill/d%05d/", i), Mode: os.ModeDir | 0o755})
			}
			return zipBytes(t, es)
		}, want: []string{"entries limit", "40000"}},
		{name: "too many files", build: func(t *testing.T) []byte {
			es := zipWith()
			for i := 0; i < 20000; i++ {
				es = append(es, skilltest.ZipEntry{Name: fmt.Sprintf("skill/f/%05d", i)})
			}
			return zipBytes(t, es)
		}, want: []string{"files limit", "20000"}},
		{name: "depth 33", build: with(skilltest.ZipEntry{Name: "skill/" + deepPath(31), Data: x}), want: []string{"depth limit", "33 > 32"}},
		// What the archive holds.
		{name: "no SKILL.md", build: plain(skilltest.ZipEntry{Name: "skill/README.md", Data: []byte("# no manifest\n")}), want: []string{"no SKILL.md"}},
		{name: "SKILL.md is a directory", build: plain(skilltest.ZipEntry{Name: "skill/SKILL.md/", Mode: os.ModeDir | 0o755}, skilltest.ZipEntry{Name: "skill/SKILL.md/x.md", Data: x}), want: []string{"no SKILL.md"}},
		{name: "empty archive", build: plain(), want: []string{"no SKILL.md"}},
		{name: "__MACOSX junk only", build: plain(skilltest.ZipEntry{Name: "__MACOSX/skill/._SKILL.md", Data: []byte("\x00\x05\x16\x07junk")}, skilltest.ZipEntry{Name: "__MACOSX/skill/SKILL.md", Data: goodManifest("hidden")}), want: []string{"no SKILL.md"}},
		{name: "a ZIP inside a ZIP only", build: func(t *testing.T) []byte {
			return zipBytes(t, []skilltest.ZipEntry{{Name: "inner.zip", Data: zipBytes(t, zipWith()), Store: true}})
		}, want: []string{"no SKILL.md"}},
		{name: "two skills without --all", code: 6, build: plain(append(manifestZip(string(goodManifest("one"))),
			skilltest.ZipEntry{Name: "other/SKILL.md", Data: goodManifest("two")})...), want: []string{"--all", "one", "two"}},
		{name: "unparseable YAML", build: plain(manifestZip("---\nname: x\n  description: [unclosed\n---\n")...), want: []string{"SKILL.md", "invalid YAML"}},
		{name: "frontmatter never closed", build: plain(manifestZip("---\nname: open\ndescription: d\n")...), want: []string{"SKILL.md", "not closed"}},
		{name: "frontmatter that is a list", build: plain(manifestZip("---\n- name: x\n- description: d\n---\n")...), want: []string{"SKILL.md", "not a list"}},
		{name: "YAML alias bomb", build: plain(manifestZip(laughs)...), want: []string{"SKILL.md", "alias bomb"}},
		{name: "SKILL.md over the file limit", build: plain(skilltest.ZipEntry{Name: "skill/", Mode: os.ModeDir | 0o755},
			skilltest.RawEntry("skill/SKILL.md", zip.Deflate, skilltest.Deflate(x), crc32.ChecksumIEEE(x), uint64(len(skilltest.Deflate(x))), 65<<20)), want: []string{"skill/SKILL.md", "file-bytes limit"}},
		{name: "frontmatter of 2 MiB", build: plain(manifestZip(bigFM.String())...), want: []string{"frontmatter", "limit"}},
		{name: "SKILL.md of 5 MiB", build: plain(manifestZip("---\nname: huge\ndescription: a long body\n---\n" + noiseText(5<<20))...), want: []string{"SKILL.md", "manifest-bytes limit"}},
	}
}

// TestHostileArchives imports every hostile archive with the CLI and
// uploads it to the drafts API as an ordinary user: each is refused with
// exit 5 (6 for two skills and no choice) or 400 (409), a reason naming the
// entry, and nothing changed or left behind.
func TestHostileArchives(t *testing.T) {
	e := newCatalogEnv(t)
	e.serve("--examples=false")
	e.ok("user", "add", "alice")
	good := filepath.Join(t.TempDir(), "kept")
	richSkill(t, good, "kept", 3)
	e.mustImport(good)
	api := newHostileAPI(e.home)

	cases := hostileArchives()
	if len(cases) < 50 {
		t.Fatalf("%d hostile archives, want at least 50", len(cases))
	}
	var cliRefused, apiRefused, conflicts int
	var slowest time.Duration
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.code
			if want == 0 {
				want = 5
			}
			data := tc.build(t)
			file := tc.file
			if file == "" {
				file = fmt.Sprintf("hostile%02d.zip", i)
			}
			p := filepath.Join(t.TempDir(), file)
			skilltest.WriteFile(t, p, data, 0o644)

			before := hostileState(t, e)
			r, took := e.runBounded(hostileTimeout, nil, "skill", "import", p)
			slowest = max(slowest, took)
			msg := r.stdout + r.stderr
			if r.code != want {
				t.Errorf("skill import: exit %d, want %d (%v)\n%s", r.code, want, took, msg)
			} else {
				cliRefused++
				if want == 6 {
					conflicts++
				}
			}
			for _, w := range append([]string{p}, tc.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("skill import: message does not name %q:\n%s", w, msg)
				}
			}
			checkNamesNoTemp(t, e, msg)
			checkUnchanged(t, e, before)
			if line := strings.TrimSpace(msg); len(line) > 300 {
				t.Logf("exit %d after %v: %s…", r.code, took.Round(time.Millisecond), line[:300])
			} else {
				t.Logf("exit %d after %v: %s", r.code, took.Round(time.Millisecond), line)
			}

			// The same bytes uploaded by an ordinary user.
			name := fmt.Sprintf("upload%02d.zip", i)
			a := api.send(t, "POST", "/v1/drafts?name="+name, "alice", "application/zip", nil, bytes.NewReader(data))
			slowest = max(slowest, a.took)
			status := map[int]int{5: 400, 6: 409}[want]
			failed := t.Failed()
			checkRefusal(t, a, status, append([]string{name}, tc.want...)...)
			if !failed && !t.Failed() {
				apiRefused++
			}
			checkNamesNoTemp(t, e, a.err.Error)
			checkUnchanged(t, e, before)
			if t.Failed() {
				t.Logf("skill import said: %s", msg)
			}
		})
	}
	checkStored(t, e, "kept")
	checkNoOrphans(t, e)
	checkDaemonServes(t, e, api, "")
	t.Logf("hostile archives: %d tried, %d refused by `skill import` (%d with exit 5, %d with exit 6: two skills, none chosen), %d refused by the drafts API upload (400/409), store unchanged; slowest refusal %v",
		len(cases), cliRefused, cliRefused-conflicts, conflicts, apiRefused, slowest.Round(time.Millisecond))
}

// TestZipWithStub: a valid archive behind a self-extractor stub is read the
// way Go's reader reads it (the directory end tells where the archive
// starts): imported or refused, never a crash or a hang.
func TestZipWithStub(t *testing.T) {
	e := newCatalogEnv(t)
	stub := append([]byte("MZ\x90\x00"), noise(4096, 5)...)
	p := filepath.Join(t.TempDir(), "setup.zip")
	skilltest.WriteFile(t, p, append(stub, zipBytes(t, zipWith())...), 0o644)
	before := hostileState(t, e)
	r, took := e.runBounded(hostileTimeout, nil, "skill", "import", p)
	switch r.code {
	case 0:
		if got := e.listSlugs(); len(got) != 1 || got[0] != "hostile" {
			t.Fatalf("imported %v, want [hostile]", got)
		}
		checkStored(t, e, "hostile")
		t.Logf("an archive behind a %d-byte stub is imported (%v)", len(stub), took)
	case 5:
		checkUnchanged(t, e, before)
		t.Logf("an archive behind a stub is refused (%v): %s", took, r.stderr)
	default:
		t.Fatalf("exit %d, want 0 or 5\n%s%s", r.code, r.stdout, r.stderr)
	}
	checkNoLeftovers(t, e)
}

// noiseText is n bytes of text that does not compress well.
func noiseText(n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\n"
	b := make([]byte, n)
	x := uint64(88172645463325252)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = letters[x%uint64(len(letters))]
	}
	return string(b)
}
