package fs

import (
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"runtime"
	skillstore "skillfs/skills/store"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/fs/readbench"
	"skillfs/skills/skilltest"

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
		store[slug] = writeVersion(b, filepath.Join(root, slug, "v1"), files)
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
			return total, xattrRequests(srv.Requests())
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
			hash, _, _, err := skillstore.TreeHash(dir)
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
	hash, _, _, err := skillstore.TreeHash(tr.dir)
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

// BenchmarkCountRead is the read audit's cost on a read's path: the count
// of a file already read in this batch (a short lock and a map lookup), from
// parallel readers of the same file.
func BenchmarkCountRead(b *testing.B) {
	var a readAudit
	g := &grant{}
	a.countRead(g, 1)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.countRead(g, 1)
		}
	})
}

// BenchmarkSessionNodes measures what the nodes of a walked skill cost the
// daemon's heap, per session: SKILLFS_NODE_SESSIONS sessions (default 20)
// each walk a skill of SKILLFS_NODE_FILES files (default 18,000, in
// folders of 150) and stat every entry, as `ls -lR` does, so that the
// kernel holds a node of every entry of every session. A first session
// walks the skill before the count starts: the version's tree, shared by
// every session of it, and the FUSE server's request buffers are made then
// (MB-shared). It reports the live heap (after a collection) the other
// sessions' walks added per node the kernel looked up (B/node), per
// session (MB/session) and for 1,000 such sessions (MB/1000-sessions); the
// kernel's own inodes per node looked up (kernel-inodes/node, from
// /proc/slabinfo: about one, so every node was held while counted); and
// what is left once those sessions are closed and the kernel has forgotten
// their nodes (B/node-closed).
func BenchmarkSessionNodes(b *testing.B) {
	sessions := envCount(b, "SKILLFS_NODE_SESSIONS", 20)
	files := envCount(b, "SKILLFS_NODE_FILES", 18000)
	sk := largeSkill(b, files)
	srv := mountTest(b, Options{Sink: &fakeSink{}})
	empty := liveHeap()
	walkStat(b, setSession(b, srv, "first", View{sk}))
	shared := float64(liveHeap()) - float64(empty)
	var open, closed, nodes, inodes float64
	for i := 0; b.Loop(); i++ {
		base, kbase := liveHeap(), kernelInodes(b)
		forgets := srv.Requests()[ReqForget]
		walked := 0
		ids := make([]string, sessions)
		for j := range ids {
			ids[j] = fmt.Sprintf("sess%d-%d", i, j)
			walked += walkStat(b, setSession(b, srv, ids[j], View{sk}))
		}
		held, kheld := liveHeap(), kernelInodes(b)
		for _, id := range ids {
			srv.RemoveSession(id)
		}
		waitForgotten(srv, forgets+uint64(walked))
		left := liveHeap()
		open += float64(held) - float64(base)
		closed += float64(left) - float64(base)
		nodes += float64(walked)
		inodes += float64(kheld) - float64(kbase)
	}
	perNode := open / nodes
	perSession := perNode * nodes / float64(b.N) / float64(sessions)
	b.ReportMetric(perNode, "B/node")
	b.ReportMetric(perSession/1e6, "MB/session")
	b.ReportMetric(perSession*1000/1e6, "MB/1000-sessions")
	b.ReportMetric(shared/1e6, "MB-shared")
	b.ReportMetric(inodes/nodes, "kernel-inodes/node")
	b.ReportMetric(closed/nodes, "B/node-closed")
}

// kernelInodes returns how many FUSE inodes the kernel holds, on every FUSE
// mount of the machine.
func kernelInodes(tb testing.TB) uint64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/slabinfo")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "fuse_inode" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				tb.Fatalf("/proc/slabinfo: %q: %v", line, err)
			}
			return n
		}
	}
	tb.Fatal("/proc/slabinfo has no fuse_inode line")
	return 0
}

// envCount reads a positive count from the environment, or returns def.
func envCount(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive count", name, v)
	}
	return n
}

// largeSkill writes a skill of n small files in folders of 150.
func largeSkill(tb testing.TB, n int) Skill {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "large", "v1")
	files := fstest.MapFS{"SKILL.md": skilltest.File(manifest("large", "a skill of many files"))}
	for i := range n - 1 {
		files[fmt.Sprintf("references/d%03d/f%05d.md", i/150, i)] = skilltest.File("reference text\n")
	}
	return Skill{Slug: "large", Version: "v1", Dir: writeVersion(tb, dir, files)}
}

// walkStat walks a session's folder and stats every entry; it returns how
// many entries it saw below the session's folder.
func walkStat(tb testing.TB, session string) int {
	tb.Helper()
	n := 0
	err := filepath.WalkDir(session, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == session {
			return nil
		}
		n++
		_, err = d.Info()
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// waitForgotten waits until the kernel has sent want FORGETs in all, or
// sends no more for a second.
func waitForgotten(srv *Server, want uint64) {
	last, quiet := srv.Requests()[ReqForget], 0
	for deadline := time.Now().Add(30 * time.Second); last < want && quiet < 20 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		n := srv.Requests()[ReqForget]
		if n == last {
			quiet++
		} else {
			last, quiet = n, 0
		}
	}
}
