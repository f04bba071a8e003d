package integration

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/skills/skilltest"
)

// snapshot is what a failed import must leave exactly as it was: the
// catalog as `skill list --json` prints it, and every entry of the store
// outside its staging area with its mode and size.
func snapshot(t testing.TB, e *env) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(e.ok("skill", "list", "--json"))
	root := filepath.Join(e.home, "store")
	var lines []string
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ".staging" {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size := info.Size()
		if d.IsDir() {
			size = 0
		}
		lines = append(lines, fmt.Sprintf("%s %v %d", filepath.ToSlash(rel), info.Mode(), size))
		return nil
	})
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("list the store: %v", err)
	}
	sort.Strings(lines)
	b.WriteString(strings.Join(lines, "\n"))
	return b.String()
}

// leftovers lists what is in the staging area and the temporary directory.
func leftovers(t testing.TB, e *env) []string {
	t.Helper()
	var out []string
	for _, d := range []string{filepath.Join(e.home, "store", ".staging"), filepath.Join(e.home, "tmp")} {
		ents, err := os.ReadDir(d)
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			t.Fatal(err)
		}
		for _, ent := range ents {
			out = append(out, filepath.Join(d, ent.Name()))
		}
	}
	return out
}

// checkNoLeftovers fails the test if an import left anything behind in the
// staging area or the temporary directory.
func checkNoLeftovers(t testing.TB, e *env) {
	t.Helper()
	if l := leftovers(t, e); len(l) > 0 {
		t.Fatalf("leftovers of an import: %v", l)
	}
}

// zipTime is the modification time of the entries of the archives built
// here.
var zipTime = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// zipBytes is the archive of entries, in order, names and modes unchecked;
// an entry without a time of its own gets zipTime.
func zipBytes(t testing.TB, entries []skilltest.ZipEntry) []byte {
	t.Helper()
	return skilltest.Zip(t, skilltest.Stamp(zipTime, entries)...)
}

// goodManifest is a valid SKILL.md for the archives.
func goodManifest(slug string) []byte {
	return []byte("---\nname: " + slug + "\ndescription: A skill that looks harmless.\n---\n\nBody.\n")
}

// zipWith is a valid skill "skill/" plus extra entries.
func zipWith(extra ...skilltest.ZipEntry) []skilltest.ZipEntry {
	return append([]skilltest.ZipEntry{
		{Name: "skill/", Mode: os.ModeDir | 0o755},
		{Name: "skill/SKILL.md", Data: goodManifest("hostile")},
	}, extra...)
}

// zeros60 is 60 MiB of zeros deflated once: each copy in an archive is a
// compression bomb of about 1000:1 that stays below the single-file limit.
var zeros60 = sync.OnceValues(func() ([]byte, uint32) {
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestCompression)
	chunk := make([]byte, 1<<20)
	var crc uint32
	for i := 0; i < 60; i++ {
		fw.Write(chunk)
		crc = crc32.Update(crc, crc32.IEEETable, chunk)
	}
	fw.Close()
	return buf.Bytes(), crc
})

// bombEntry is one 60 MiB entry of zeros, with a header that tells the
// truth about its size or claims declared bytes.
func bombEntry(name string, declared uint64) skilltest.ZipEntry {
	data, crc := zeros60()
	if declared == 0 {
		declared = 60 << 20
	}
	return skilltest.RawEntry(name, zip.Deflate, data, crc, uint64(len(data)), declared)
}

// deepPath is a relative path n directories deep ending in a file.
func deepPath(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = "d"
	}
	return strings.Join(parts, "/") + "/deep.txt"
}

func TestBadInputChangesNothing(t *testing.T) {
	e := newCatalogEnv(t)
	// Something already installed, so "unchanged" is not "empty".
	good := filepath.Join(t.TempDir(), "kept")
	richSkill(t, good, "kept", 3)
	e.mustImport(good)

	zipCase := func(entries ...skilltest.ZipEntry) func(t *testing.T, dir string) string {
		return func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "skill.zip")
			skilltest.WriteFile(t, p, zipBytes(t, entries), 0o644)
			return p
		}
	}
	dirCase := func(extra func(t *testing.T, skill string)) func(t *testing.T, dir string) string {
		return func(t *testing.T, dir string) string {
			skill := filepath.Join(dir, "skill")
			writeSkill(t, skill, "name: hostile\ndescription: A skill that looks harmless.", map[string]string{"scripts/run.sh": "#!/bin/sh\n"})
			extra(t, skill)
			return skill
		}
	}
	manyZip := zipWith()
	for i := 0; i <= 20000; i++ {
		manyZip = append(manyZip, skilltest.ZipEntry{Name: fmt.Sprintf("skill/many/%05d", i)})
	}
	var bombs []skilltest.ZipEntry
	for i := 0; i < 5; i++ {
		bombs = append(bombs, bombEntry(fmt.Sprintf("skill/assets/zeros%d.bin", i), 0))
	}

	cases := []struct {
		name     string
		root     bool // needs root (mknod)
		build    func(t *testing.T, dir string) string
		wantCode int
		wantMsg  []string // each must appear in what the command prints
	}{
		{"zip entry with ../", false, zipCase(zipWith(skilltest.ZipEntry{Name: "skill/../../evil.txt", Data: []byte("x")})...), 5, []string{"evil.txt"}},
		{"zip entry with an absolute path", false, zipCase(zipWith(skilltest.ZipEntry{Name: "/etc/evil.txt", Data: []byte("x")})...), 5, []string{"/etc/evil.txt"}},
		{"zip entry with %2e%2e", false, zipCase(zipWith(skilltest.ZipEntry{Name: "skill/%2e%2e/%2e%2e/evil.txt", Data: []byte("x")})...), 5, []string{"%2e%2e"}},
		{"zip entry with backslashes", false, zipCase(zipWith(skilltest.ZipEntry{Name: `skill\..\..\evil.txt`, Data: []byte("x")})...), 5, []string{"evil.txt", "backslash"}},
		{"zip duplicate entries", false, zipCase(zipWith(skilltest.ZipEntry{Name: "skill/notes.txt", Data: []byte("one")}, skilltest.ZipEntry{Name: "skill/notes.txt", Data: []byte("two")})...), 5, []string{"skill/notes.txt", "duplicate"}},
		{"zip duplicate SKILL.md", false, zipCase(zipWith(skilltest.ZipEntry{Name: "skill/SKILL.md", Data: goodManifest("other")})...), 5, []string{"skill/SKILL.md", "duplicate"}},
		{"zip bomb", false, zipCase(zipWith(bombs...)...), 5, []string{"compression-ratio", "zeros0.bin"}},
		{"zip bomb with lying sizes", false, zipCase(zipWith(bombEntry("skill/assets/liar.bin", 1000))...), 5, []string{"liar.bin"}},
		{"zip with too many files", false, zipCase(manyZip...), 5, []string{"files limit", "20000"}},
		{"zip nested too deep", false, zipCase(zipWith(skilltest.ZipEntry{Name: "skill/" + deepPath(40), Data: []byte("x")})...), 5, []string{"depth limit"}},
		{"zip name not valid UTF-8", false, zipCase(zipWith(skilltest.ZipEntry{Name: "skill/bad\xff\xfe.txt", Data: []byte("x")})...), 5, []string{"UTF-8"}},
		{"zip without SKILL.md", false, zipCase(skilltest.ZipEntry{Name: "skill/README.md", Data: []byte("# no manifest\n")}), 5, []string{"SKILL.md"}},
		{"truncated archive", false, func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "full.zip")
			skilltest.WriteFile(t, p, zipBytes(t, zipWith(skilltest.ZipEntry{Name: "skill/references/a.md", Data: bytes.Repeat([]byte("reference text\n"), 4000)})), 0o644)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			cut := filepath.Join(dir, "truncated.zip")
			skilltest.WriteFile(t, cut, data[:len(data)/2], 0o644)
			return cut
		}, 5, []string{"truncated.zip"}},
		{"corrupt archive", false, func(t *testing.T, dir string) string {
			data := make([]byte, 64<<10)
			r := rand.New(rand.NewChaCha8([32]byte{9}))
			for i := range data {
				data[i] = byte(r.Uint32())
			}
			p := filepath.Join(dir, "corrupt.zip")
			skilltest.WriteFile(t, p, data, 0o644)
			return p
		}, 5, []string{"corrupt.zip"}},
		{"fifo in a directory", false, dirCase(func(t *testing.T, skill string) {
			if err := unix.Mkfifo(filepath.Join(skill, "assets-pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
		}), 5, []string{"assets-pipe", "fifo"}},
		{"device in a directory", true, dirCase(func(t *testing.T, skill string) {
			if err := unix.Mknod(filepath.Join(skill, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
				t.Fatal(err)
			}
		}), 5, []string{"null", "device"}},
		{"too many files in a directory", false, dirCase(func(t *testing.T, skill string) {
			many := filepath.Join(skill, "many")
			if err := os.Mkdir(many, 0o755); err != nil {
				t.Fatal(err)
			}
			// Hard links of one empty file: 20001 names, one inode.
			first := filepath.Join(many, "00000")
			skilltest.WriteFile(t, first, nil, 0o644)
			for i := 1; i <= 20000; i++ {
				if err := os.Link(first, filepath.Join(many, fmt.Sprintf("%05d", i))); err != nil {
					t.Fatal(err)
				}
			}
		}), 5, []string{"files limit", "20000"}},
		{"directory nested too deep", false, dirCase(func(t *testing.T, skill string) {
			skilltest.WriteFile(t, filepath.Join(skill, filepath.FromSlash(deepPath(40))), []byte("x"), 0o644)
		}), 5, []string{"depth limit"}},
		{"file over the size limit", false, dirCase(func(t *testing.T, skill string) {
			f, err := os.Create(filepath.Join(skill, "huge.bin"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(65 << 20); err != nil {
				t.Fatal(err)
			}
		}), 5, []string{"file-bytes limit", "huge.bin"}},
		{"file name not valid UTF-8", false, dirCase(func(t *testing.T, skill string) {
			skilltest.WriteFile(t, filepath.Join(skill, "bad\xff\xfe.txt"), []byte("x"), 0o644)
		}), 5, []string{"UTF-8"}},
		{"directory without SKILL.md", false, func(t *testing.T, dir string) string {
			d := filepath.Join(dir, "skill")
			skilltest.WriteFile(t, filepath.Join(d, "README.md"), []byte("# nothing\n"), 0o644)
			return d
		}, 5, []string{"SKILL.md"}},
		{"frontmatter that does not parse", false, func(t *testing.T, dir string) string {
			d := filepath.Join(dir, "skill")
			writeSkill(t, d, "name: broken\n  description: [unclosed", nil)
			return d
		}, 5, []string{"SKILL.md", "invalid YAML", "line 3"}},
		{"single SKILL.md whose frontmatter is never closed", false, func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "SKILL.md")
			skilltest.WriteFile(t, p, []byte("---\nname: x\ndescription: d\n"), 0o644)
			return p
		}, 5, []string{"SKILL.md", "not closed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				if os.Getenv("CI") == "true" {
					t.Fatal("needs root, and CI=true: this case must run")
				}
				t.Skip("needs root")
			}
			src := tc.build(t, t.TempDir())
			before := snapshot(t, e)
			r := e.run("skill", "import", src)
			out := r.stdout + r.stderr
			if r.code != tc.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.wantCode, r.stdout, r.stderr)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(out, m) {
					t.Errorf("message does not name %q:\n%s", m, out)
				}
			}
			if after := snapshot(t, e); after != before {
				t.Errorf("catalog or store changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if l := leftovers(t, e); len(l) > 0 {
				t.Errorf("leftovers: %v", l)
			}
		})
	}
	checkStored(t, e, "kept")
	checkNoOrphans(t, e)
}

// TestImportKilledHalfway kills an import while it is staging (a directory)
// or unpacking (a ZIP); the next command sweeps what it left, and the
// catalog holds no trace of it.
func TestImportKilledHalfway(t *testing.T) {
	const files, size = 200, 1 << 20
	content := func(i int) []byte {
		b := make([]byte, size)
		r := rand.New(rand.NewPCG(uint64(i), 1))
		for j := 0; j < len(b); j += 8 {
			v := r.Uint64()
			for k := 0; k < 8; k++ {
				b[j+k] = byte(v >> (8 * k))
			}
		}
		return b
	}
	cases := []struct {
		name  string
		build func(t *testing.T, dir string) string
		busy  string // directory that fills up while the import runs
	}{
		{"directory", func(t *testing.T, dir string) string {
			d := filepath.Join(dir, "big")
			writeSkill(t, d, "name: big\ndescription: A large skill.", nil)
			for i := 0; i < files; i++ {
				skilltest.WriteFile(t, filepath.Join(d, "assets", fmt.Sprintf("part%03d.bin", i)), content(i), 0o644)
			}
			return d
		}, filepath.Join("store", ".staging")},
		{"zip", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "big.zip")
			entries := zipWith()
			for i := 0; i < files/2; i++ {
				entries = append(entries, skilltest.ZipEntry{Name: fmt.Sprintf("skill/assets/part%03d.bin", i), Data: content(i), Store: true})
			}
			skilltest.WriteFile(t, p, zipBytes(t, entries), 0o644)
			return p
		}, "tmp"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newCatalogEnv(t)
			e.ok("skill", "list")
			before := snapshot(t, e)
			src := tc.build(t, t.TempDir())

			p := e.start("skill", "import", src)
			done := make(chan error, 1)
			go func() { done <- p.cmd.Wait() }()
			busy := filepath.Join(e.home, tc.busy)
			deadline := time.After(60 * time.Second)
		poll:
			for {
				select {
				case err := <-done:
					t.Fatalf("the import finished (%v) before it could be killed; stdout %s stderr %s", err, p.out.String(), p.err.String())
				case <-deadline:
					p.cmd.Process.Kill()
					t.Fatal("the import never started writing")
				default:
				}
				if n := countFiles(busy); n >= 3 {
					break poll
				}
				time.Sleep(time.Millisecond)
			}
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err == nil {
				t.Fatal("the import exited 0 after SIGKILL")
			}
			if len(leftovers(t, e)) == 0 {
				t.Fatal("the killed import left nothing to sweep: the test did not kill it halfway")
			}

			// The next start of any command sweeps.
			for _, s := range e.list("") {
				if s.Slug == "big" || s.Slug == "hostile" {
					t.Fatalf("the killed import is in the catalog: %+v", s)
				}
			}
			checkNoLeftovers(t, e)
			if after := snapshot(t, e); after != before {
				t.Fatalf("catalog or store changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if ents, _ := os.ReadDir(filepath.Join(e.home, "store", "skills")); len(ents) != 0 {
				t.Fatalf("orphan content in the store: %v", ents)
			}
		})
	}
}

// countFiles counts regular files below dir, ignoring errors: the tree
// changes while it is read.
func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}
