// Package readbench holds the read benchmarks that compare a session's
// mount with a projection: a `cp -a` copy of the same session's skill files
// in a plain folder, what an operator would set up instead of skillfs. The
// fs package runs them against a mount served in process, where it also
// counts the FUSE requests each operation sends; the integration package
// runs them against the real daemon.
package readbench

import (
	"crypto/rand"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"golang.org/x/sys/unix"
)

// The benchmarked skills.
const (
	Tree = "bench-tree" // SKILL.md, a 4 KiB file, a folder of 34 entries: 200 files
	Big  = "bench-big"  // a 64 MiB and a 16 MiB file
)

const (
	treeFiles = 200
	wideFiles = 34
	readers   = 4
	file4K    = Tree + "/references/4k.txt"
	wideDir   = Tree + "/references/wide"
	big64     = Big + "/assets/64m.bin"
	big16     = Big + "/assets/16m.bin"
)

// Fixture returns the benchmarked skills: slug → its tree (write one with
// skilltest.WriteDir).
func Fixture() map[string]fstest.MapFS {
	tree := fstest.MapFS{
		"SKILL.md":          {Data: manifest(Tree, "A skill with many small files.")},
		"references/4k.txt": {Data: []byte(strings.Repeat("0123456789abcde\n", 256))},
	}
	for i := range wideFiles {
		tree[fmt.Sprintf("references/wide/w%02d.md", i)] = &fstest.MapFile{Data: text(i, 600)}
	}
	for i := range treeFiles - wideFiles - 2 {
		tree[fmt.Sprintf("references/d%d/e%d/f%03d.md", i%10, i%3, i)] = &fstest.MapFile{Data: text(i, 1200)}
	}
	big := fstest.MapFS{
		"SKILL.md":       {Data: manifest(Big, "A skill with large assets.")},
		"assets/64m.bin": {Data: random(64 << 20)},
		"assets/16m.bin": {Data: random(16 << 20)},
	}
	return map[string]fstest.MapFS{Tree: tree, Big: big}
}

func manifest(name, description string) []byte {
	body := strings.Repeat("Follow the steps in references/ and run the scripts as shown.\n", 30)
	return []byte(fmt.Sprintf("---\nname: %s\ndescription: %s\n---\n\n# Instructions\n\n%s", name, description, body))
}

func text(i, size int) []byte {
	line := fmt.Sprintf("file %d: a line of reference text for the agent to read.\n", i)
	return []byte(strings.Repeat(line, size/len(line)+1)[:size])
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// Project copies a session's folder the way an operator would project its
// skills into a sandbox: `cp -a` into a plain folder. It returns the copy.
func Project(tb testing.TB, session string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), "projection")
	if out, err := exec.Command("cp", "-a", session+"/.", dst).CombinedOutput(); err != nil {
		tb.Fatalf("cp -a %s: %v\n%s", session, err, out)
	}
	return dst
}

// Side is one place the cases read a session's skills from.
type Side struct {
	Name string // "mount" or "projection"
	Dir  string // the session's folder, one folder per skill
	// Backing, when set, gives the file that holds the bytes of a file of
	// Dir (the store's copy behind a mount), whose cached pages a cold read
	// drops as well.
	Backing func(rel string) string
	// Requests, when set, returns how many FUSE requests were served so
	// far, and how many of them asked for extended attributes: each case
	// then reports the requests per operation (req/op) and fails if an
	// operation asked for extended attributes.
	Requests func() (total, xattr uint64)
}

// benchCase is one operation, measured on every side.
type benchCase struct {
	name    string
	bytes   int64  // per operation, for MB/s
	readers int    // goroutines running the operation at once; 0 is one
	cold    string // the file whose cached pages are dropped before each operation
	op      func(dir string) (func() error, error)
	// python, instead of op: a Python statement run on the file of that
	// name (p) in a loop of its own (startup left out), each run timed
	// by Python.
	python string
	file   string
}

var cases = []benchCase{
	{name: "4KiB", bytes: 4096, op: readFile(file4K)},
	{name: "4KiB-4readers", bytes: 4096, readers: readers, op: readFile(file4K)},
	{name: "SKILL.md", op: readFile(Tree + "/SKILL.md")},
	{name: "stat-tree", op: statTree},
	{name: "walk-read", op: walkRead},
	{name: "walk-stat", op: walkStat},
	{name: "ls-l-34", op: lsLong},
	{name: "64MiB", bytes: 64 << 20, op: readFile(big64)},
	{name: "16MiB", bytes: 16 << 20, op: readFile(big16)},
	{name: "py-open-4KiB", file: file4K, python: "with open(p) as f: f.read()"},
	{name: "py-open-4KiB-unbuffered", file: file4K, python: "with open(p, 'rb', buffering=0) as f: f.read()"},
	{name: "4KiB-cold", bytes: 4096, cold: file4K, op: readFile(file4K)},
	{name: "16MiB-cold", bytes: 16 << 20, cold: big16, op: readFile(big16)},
}

// Run measures every case on every side, as sub-benchmarks named
// case/side, each warmed by one operation before it is timed.
func Run(b *testing.B, sides ...Side) {
	for _, c := range cases {
		for _, s := range sides {
			b.Run(c.name+"/"+s.Name, func(b *testing.B) { run(b, c, s) })
		}
	}
}

func run(b *testing.B, c benchCase, s Side) {
	if c.python != "" {
		runPython(b, c, s)
		return
	}
	op, err := c.op(s.Dir)
	if err == nil {
		err = op()
	}
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(c.bytes)
	var total, xattr uint64
	if s.Requests != nil {
		total, xattr = s.Requests()
	}
	switch {
	case c.readers > 1:
		err = parallel(b, c.readers, op)
	case c.cold != "":
		unix.Sync() // pages still dirty are not dropped
		for b.Loop() {
			b.StopTimer()
			if err = drop(filepath.Join(s.Dir, filepath.FromSlash(c.cold))); err == nil && s.Backing != nil {
				err = drop(s.Backing(c.cold))
			}
			b.StartTimer()
			if err == nil {
				err = op()
			}
			if err != nil {
				break
			}
		}
	default:
		for b.Loop() {
			if err = op(); err != nil {
				break
			}
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	reportRequests(b, s, b.N, total, xattr)
}

// reportRequests reports the requests per operation of ops operations sent
// since the counts were total and xattr, and fails if any asked for
// extended attributes.
func reportRequests(b *testing.B, s Side, ops int, total, xattr uint64) {
	if s.Requests == nil {
		return
	}
	total2, xattr2 := s.Requests()
	b.ReportMetric(float64(total2-total)/float64(ops), "req/op")
	if xattr2 > xattr {
		b.Errorf("%d extended attribute requests in %d operations, want none", xattr2-xattr, ops)
	}
}

// pythonLoop runs a statement on file p for the seconds given (at least
// 100 times), and prints how many times it ran and the nanoseconds each
// took, on average.
const pythonLoop = `import sys, time
p, secs = sys.argv[1], float(sys.argv[2])
n, t = 0, time.perf_counter_ns()
end = t + int(secs * 1e9)
while n < 100 or time.perf_counter_ns() < end:
    %s
    n += 1
print(n, (time.perf_counter_ns() - t) / n)
`

// pythonSeconds is how long a Python case runs its statement, warmed by a
// run of 100 first: Python's startup alone may take longer than a
// benchmark's time, so the loop is Python's and not b.N.
const pythonSeconds = 0.5

// runPython times a Python case in one process, timed by Python itself
// (its startup left out), and reports it as ns/op.
func runPython(b *testing.B, c benchCase, s Side) {
	py, err := exec.LookPath("python3")
	if err != nil {
		b.Skipf("no python3: %v", err)
	}
	p := filepath.Join(s.Dir, filepath.FromSlash(c.file))
	script := fmt.Sprintf(pythonLoop, c.python)
	loop := func(secs float64) (n int, ns float64, err error) {
		out, err := exec.Command(py, "-c", script, p, strconv.FormatFloat(secs, 'f', -1, 64)).CombinedOutput()
		if err == nil {
			_, err = fmt.Sscan(string(out), &n, &ns)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("python3 %q on %s: %v\n%s", c.python, p, err, out)
		}
		return n, ns, nil
	}
	if _, _, err := loop(0); err != nil {
		b.Fatal(err)
	}
	var total, xattr uint64
	if s.Requests != nil {
		total, xattr = s.Requests()
	}
	n, ns, err := loop(pythonSeconds)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(ns, "ns/op")
	reportRequests(b, s, n, total, xattr)
}

// parallel runs b.N operations from n goroutines at once.
func parallel(b *testing.B, n int, op func() error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	b.ResetTimer()
	for range n {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	return <-errs
}

// ReadCold reads a whole file with its cached pages dropped first: on a
// mount, every byte is asked of the daemon.
func ReadCold(p string) ([]byte, error) {
	if err := drop(p); err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// drop drops a file's cached pages.
func drop(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// readFile opens, reads to the end and closes one file.
func readFile(rel string) func(string) (func() error, error) {
	return func(dir string) (func() error, error) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		var pool sync.Pool // a buffer per concurrent reader
		return func() error {
			buf, _ := pool.Get().([]byte)
			if buf == nil {
				buf = make([]byte, 128<<10)
			}
			defer pool.Put(buf)
			n, err := read(p, buf)
			if err == nil && n != st.Size() {
				err = fmt.Errorf("read %d bytes of %s, want %d", n, p, st.Size())
			}
			return err
		}, nil
	}
}

func read(p string, buf []byte) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
}

// walk lists the skill's tree, calls fn for every entry, and checks that
// it found every file.
func walk(root string, fn func(p string, d iofs.DirEntry) error) error {
	n := 0
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			n++
		}
		return fn(p, d)
	})
	if err == nil && n != treeFiles {
		err = fmt.Errorf("walk %s: %d files, want %d", root, n, treeFiles)
	}
	return err
}

// walkRead lists the tree and opens, reads and closes every file.
func walkRead(dir string) (func() error, error) {
	buf := make([]byte, 128<<10)
	root := filepath.Join(dir, Tree)
	return func() error {
		return walk(root, func(p string, d iofs.DirEntry) error {
			if d.IsDir() {
				return nil
			}
			_, err := read(p, buf)
			return err
		})
	}, nil
}

// walkStat lists the tree and stats every entry, as `ls -lR` does.
func walkStat(dir string) (func() error, error) {
	root := filepath.Join(dir, Tree)
	return func() error {
		return walk(root, func(_ string, d iofs.DirEntry) error {
			_, err := d.Info()
			return err
		})
	}, nil
}

// statTree stats every file of the tree, listed beforehand.
func statTree(dir string) (func() error, error) {
	var files []string
	err := walk(filepath.Join(dir, Tree), func(p string, d iofs.DirEntry) error {
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	return func() error {
		var st unix.Stat_t
		for _, p := range files {
			if err := unix.Lstat(p, &st); err != nil {
				return err
			}
		}
		return nil
	}, err
}

// lsLong does what `ls -l` does to a folder: list it, stat every entry and
// ask for the extended attributes it shows.
func lsLong(dir string) (func() error, error) {
	p := filepath.Join(dir, filepath.FromSlash(wideDir))
	buf := make([]byte, 256)
	return func() error {
		ents, err := os.ReadDir(p)
		if err == nil && len(ents) != wideFiles {
			err = fmt.Errorf("list %s: %d entries, want %d", p, len(ents), wideFiles)
		}
		if err != nil {
			return err
		}
		var st unix.Stat_t
		for _, e := range ents {
			q := filepath.Join(p, e.Name())
			if err := unix.Lstat(q, &st); err != nil {
				return err
			}
			unix.Lgetxattr(q, "security.selinux", buf)
			unix.Lgetxattr(q, "system.posix_acl_access", buf)
		}
		return nil
	}, nil
}
