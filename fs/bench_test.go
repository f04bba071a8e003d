package fs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skillfs/fs/readbench"
	"skillfs/skills"

	"golang.org/x/sys/unix"
)

// benchSession serves the benchmarked skills (readbench.Fixture) in one
// session and returns the session's folder and the store directory of each
// skill.
func benchSession(b *testing.B, opts Options) (srv *Server, session string, store map[string]string) {
	b.Helper()
	root := b.TempDir()
	store = map[string]string{}
	var view View
	for slug, files := range readbench.Fixture() {
		fixture := make(map[string]file, len(files))
		for name, data := range files {
			fixture[name] = file{data: string(data)}
		}
		store[slug] = writeVersion(b, filepath.Join(root, slug, "v1"), fixture)
		view = append(view, Skill{Slug: slug, Version: "v1", Dir: store[slug]})
	}
	srv = mountTest(b, opts)
	return srv, setSession(b, srv, "sess", view), store
}

// BenchmarkRead runs the read cases (package readbench) on a mount served
// in process and on a projection of the same session, a `cp -a` copy in a
// plain folder, and reports the FUSE requests every operation on the mount
// sent (req/op). scripts/bench.sh takes the requests from here and the
// times from the same cases run against the real daemon
// (integration.BenchmarkRead).
func BenchmarkRead(b *testing.B) {
	srv, session, store := benchSession(b, Options{Sink: &fakeSink{}})
	projection := readbench.Project(b, session)
	readbench.Run(b, readbench.Side{
		Name: "mount",
		Dir:  session,
		Backing: func(rel string) string {
			slug, name, _ := strings.Cut(rel, "/")
			return filepath.Join(store[slug], filepath.FromSlash(name))
		},
		Requests: func() (total, xattr uint64) {
			for _, n := range srv.Requests() {
				total += n
			}
			return total, srv.Requests()[ReqXattr]
		},
	}, readbench.Side{Name: "projection", Dir: projection})
}

// BenchmarkReadServed reads the 16 MiB file of the benchmarked skills with
// every byte served by the daemon from the store's cached pages: through
// the mount with its cached pages dropped before each read, and with
// passthrough, where the kernel reads the store's file itself.
func BenchmarkReadServed(b *testing.B) {
	sink := &fakeSink{}
	_, session, _ := benchSession(b, Options{Sink: sink})
	b.Run("16MiB-uncached/mount", func(b *testing.B) { benchLargeRead(b, session, true) })
	_, pass, _ := benchSession(b, Options{Sink: sink, Passthrough: true})
	b.Run("16MiB/passthrough", func(b *testing.B) { benchLargeRead(b, pass, false) })
}

// BenchmarkReadAudit measures what the read audit (Options.AuditReads)
// costs the reads that reach the daemon, the only ones it sees: a 4 KiB
// file and the 16 MiB file read with their cached pages dropped first
// (one READ, and 128 READs of 128 KiB), on a mount without and with the
// audit, taking the counts every 500 ms as the daemon does.
func BenchmarkReadAudit(b *testing.B) {
	for _, audit := range []bool{false, true} {
		srv, session, _ := benchSession(b, Options{Sink: &fakeSink{}, AuditReads: audit})
		name := map[bool]string{false: "off", true: "on"}[audit]
		stop := make(chan struct{})
		taken := make(chan struct{})
		go func() {
			defer close(taken)
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					srv.TakeReads()
				}
			}
		}()
		b.Run("4KiB-uncached/audit-"+name, func(b *testing.B) {
			p := filepath.Join(session, readbench.Tree, "references", "4k.txt")
			for b.Loop() {
				if _, err := readbench.ReadCold(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("16MiB-uncached/audit-"+name, func(b *testing.B) { benchLargeRead(b, session, true) })
		close(stop)
		<-taken
	}
}

// BenchmarkReadVouched measures what vouching for backing files
// (Options.Content) costs the reads that reach the daemon: a 4 KiB file
// and the 16 MiB file read with their cached pages dropped first, on a
// mount without and with a Content whose versions were verified before the
// runs. Each read then checks its cached descriptor again (an fstat and a
// lookup); a descriptor opened anew is checked in the same way.
func BenchmarkReadVouched(b *testing.B) {
	for _, vouched := range []bool{false, true} {
		opts := Options{Sink: &fakeSink{}}
		v := &hashVerifier{want: map[string]string{}, verified: map[string]time.Time{}}
		if vouched {
			opts.Content = v
		}
		_, session, store := benchSession(b, opts)
		nextTick()
		for _, dir := range store {
			hash, _, _, err := skills.TreeHash(dir)
			if err != nil {
				b.Fatal(err)
			}
			v.want[dir] = hash
			if err := v.Verify(dir, time.Time{}); err != nil {
				b.Fatal(err)
			}
		}
		name := map[bool]string{false: "off", true: "on"}[vouched]
		b.Run("4KiB-uncached/vouched-"+name, func(b *testing.B) {
			p := filepath.Join(session, readbench.Tree, "references", "4k.txt")
			for b.Loop() {
				if _, err := readbench.ReadCold(p); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("16MiB-uncached/vouched-"+name, func(b *testing.B) { benchLargeRead(b, session, true) })
		if checks, damaged := v.counts(); vouched && (checks != len(store) || damaged != 0) {
			b.Fatalf("%d checks, %d found damaged: the versions were hashed again", checks, damaged)
		}
	}
}

// BenchmarkVouch is the check itself, as a read through a kept descriptor
// makes it (tree.revouch): an fstat of the descriptor and the version's
// verification time looked up, the file unchanged since.
func BenchmarkVouch(b *testing.B) {
	tr, kids := cacheTree(b, 1)
	v := &hashVerifier{want: map[string]string{}, verified: map[string]time.Time{}}
	hash, _, _, err := skills.TreeHash(tr.dir)
	if err != nil {
		b.Fatal(err)
	}
	tr.name, tr.content, v.want[tr.dir] = tr.dir, v, hash
	nextTick()
	if err := v.Verify(tr.dir, time.Time{}); err != nil {
		b.Fatal(err)
	}
	fd, err := tr.open(kids[0])
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	for b.Loop() {
		if err := tr.revouch(kids[0], fd); err != nil {
			b.Fatal(err)
		}
	}
}

func benchLargeRead(b *testing.B, session string, uncached bool) {
	p := filepath.Join(session, readbench.Big, "assets", "16m.bin")
	buf := make([]byte, 128<<10)
	b.SetBytes(16 << 20)
	for b.Loop() {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if uncached {
			if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
				b.Fatal(err)
			}
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		if err != nil || n != 16<<20 {
			b.Fatalf("read %d bytes: %v", n, err)
		}
		f.Close()
	}
}

// BenchmarkSetSession serves a new session of 10,000 skills (a session
// asking for every skill of a large catalog) and removes it again.
func BenchmarkSetSession(b *testing.B) {
	srv := mountTest(b, Options{})
	root := b.TempDir()
	v := make(View, 10000)
	for i := range v {
		slug, hash := fmt.Sprintf("s%05d", i), fmt.Sprintf("%064x", i)
		dir := filepath.Join(root, slug, hash)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		v[i] = Skill{Slug: slug, Dir: dir, Version: hash}
	}
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("sess%d", i)
		if err := srv.SetSession(id, v); err != nil {
			b.Fatal(err)
		}
		srv.RemoveSession(id)
	}
}

// BenchmarkCountRead is the read audit's cost on a read's path: the counter
// of a file node already read in this batch (an atomic add), from parallel
// readers of the same file.
func BenchmarkCountRead(b *testing.B) {
	var a readAudit
	n := &fileNode{}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.countRead(n)
		}
	})
}
