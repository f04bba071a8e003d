package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/skills/skilltest"
)

// backingFds counts the descriptors of this process open on files below
// dir: the daemon's descriptors on the store, not the test's on the mount.
func backingFds(tb testing.TB, dir string) int {
	tb.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		tb.Fatal(err)
	}
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, de := range des {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", de.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if strings.HasPrefix(target, real+"/") {
			n++
		}
	}
	return n
}

// loadStore is a version with a few files to read over and over.
func loadStore(tb testing.TB) (Skill, []string) {
	tb.Helper()
	files := fstest.MapFS{"SKILL.md": skilltest.File(manifest("load", "read me often"))}
	names := []string{"SKILL.md"}
	for i := range 3 {
		name := fmt.Sprintf("references/doc-%d.md", i)
		files[name] = skilltest.File(strings.Repeat(fmt.Sprintf("line %d\n", i), 2000))
		names = append(names, name)
	}
	dir := writeVersion(tb, filepath.Join(tb.TempDir(), "store", "load", "v1"), files)
	return Skill{Slug: "load", Version: "v1", Dir: dir}, names
}

// TestBackingDescriptorsBounded holds thousands of opens and runs many
// readers in open/read/close loops: the daemon's descriptors on the store
// must stay at most one per file read, however many opens are outstanding
// (the kernel releases handles long after the reader moved on).
func TestBackingDescriptorsBounded(t *testing.T) {
	for _, passthrough := range []bool{false, true} {
		name := "reads through the daemon"
		if passthrough {
			name = "passthrough"
		}
		t.Run(name, func(t *testing.T) { testDescriptorsBounded(t, passthrough) })
	}
}

func testDescriptorsBounded(t *testing.T, passthrough bool) {
	sk, names := loadStore(t)
	srv := mountTest(t, Options{Sink: &fakeSink{}, Passthrough: passthrough})
	if passthrough && !srv.PassthroughSupported() {
		t.Skip("the kernel does not offer FUSE passthrough")
	}
	dir := filepath.Join(setSession(t, srv, "sess", View{sk}), "load")
	store := filepath.Dir(sk.Dir)

	t.Run("opens held", func(t *testing.T) {
		const opens = 5000
		held := make([]*os.File, 0, opens)
		defer func() {
			for _, f := range held {
				f.Close()
			}
		}()
		buf := make([]byte, 16)
		for i := range opens {
			f, err := os.Open(filepath.Join(dir, names[i%len(names)]))
			if err != nil {
				t.Fatalf("open %d: %v", i, err)
			}
			held = append(held, f)
			if i%100 == 0 {
				// Make the read reach the daemon, not the page cache.
				unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
			}
			if _, err := f.ReadAt(buf, 0); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
		}
		n := backingFds(t, store)
		t.Logf("%d opens held: %d descriptors on the store", opens, n)
		if n > len(names) {
			t.Errorf("%d opens held: %d descriptors on the store, want at most %d (one per file)", opens, n, len(names))
		}
	})

	t.Run("readers looping", func(t *testing.T) {
		const readers, loops = 40, 250
		var peak atomic.Int64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				if n := int64(backingFds(t, store)); n > peak.Load() {
					peak.Store(n)
				}
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan error, readers)
		for r := range readers {
			wg.Go(func() {
				buf := make([]byte, 4096)
				for i := range loops {
					f, err := os.Open(filepath.Join(dir, names[(r+i)%len(names)]))
					if err != nil {
						errs <- err
						return
					}
					if i%10 == 0 {
						unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
					}
					_, err = f.Read(buf)
					f.Close()
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(stop)
		<-sampled
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("%d readers x %d open/read/close: peak %d descriptors on the store", readers, loops, peak.Load())
		if n := peak.Load(); n > int64(len(names)) {
			t.Errorf("peak of %d descriptors on the store, want at most %d (one per file)", n, len(names))
		}
	})
}

// TestBackingFileGone deletes a store file the mount shows but never read:
// reading it fails with ENOENT or EIO, and the server keeps serving.
func TestBackingFileGone(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "sess", View{st.alpha1})
	p := filepath.Join(dir, "alpha", "references", "guide.md")
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	refs := filepath.Join(st.alpha1.Dir, "references")
	if err := os.Remove(filepath.Join(refs, "guide.md")); err != nil {
		t.Fatal(err)
	}
	_, err = f.Read(make([]byte, 64))
	if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EIO) {
		t.Errorf("read a file deleted from the store: err = %v, want ENOENT or EIO", err)
	}
	if _, err := os.ReadFile(p); !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EIO) {
		t.Errorf("open and read it again: err = %v, want ENOENT or EIO", err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "alpha", "SKILL.md")); err != nil || string(data) != manifest("alpha", "alpha version one") {
		t.Errorf("another file afterwards: %q, %v", data, err)
	}
}

// TestBackingFileFIFO replaces a store file by a FIFO with no writer: a read
// through the mount must fail, not wait for a writer that never comes.
func TestBackingFileFIFO(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{})
	dir := setSession(t, srv, "sess", View{st.alpha1})
	p := filepath.Join(dir, "alpha", "references", "guide.md")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	backing := filepath.Join(st.alpha1.Dir, "references", "guide.md")
	if err := os.Remove(backing); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(backing, 0o444); err != nil {
		t.Fatal(err)
	}
	// A reader stuck in the daemon cannot be killed; the test's last resort
	// is a writer that lets it go.
	t.Cleanup(func() {
		if fd, err := unix.Open(backing, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			unix.Close(fd)
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(p)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("read a file replaced by a FIFO: err = %v, want EIO", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a file replaced by a FIFO hangs")
	}
}

// cacheTree builds the tree of a version holding n small files.
func cacheTree(tb testing.TB, n int) (*tree, []int32) {
	tb.Helper()
	files := make(fstest.MapFS, n)
	for i := range n {
		files[fmt.Sprintf("f%03d", i)] = skilltest.File(fmt.Sprintf("file %d\n", i))
	}
	t, _, err := buildTree(writeVersion(tb, filepath.Join(tb.TempDir(), "v"), files))
	if err != nil {
		tb.Fatal(err)
	}
	return t, t.entries[0].children
}

// readCached reads entry idx of t through c and checks its content.
func readCached(tb testing.TB, c *fdCache, t *tree, idx int32) {
	tb.Helper()
	b, err := c.acquire(t, idx)
	if err != nil {
		tb.Fatalf("acquire %s: %v", t.entries[idx].name, err)
	}
	defer c.release(b)
	var i int
	if _, err := fmt.Sscanf(t.entries[idx].name, "f%d", &i); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := preadFull(b.fd, buf, 0)
	if want := fmt.Sprintf("file %d\n", i); err != nil || string(buf[:n]) != want {
		tb.Fatalf("read %s = %q, %v; want %q", t.entries[idx].name, buf[:n], err, want)
	}
}

// TestFdCacheBound reads more files than the cache keeps: idle descriptors
// beyond the bound are closed least recently used first, descriptors in use
// never, and closing the cache closes the rest.
func TestFdCacheBound(t *testing.T) {
	tr, kids := cacheTree(t, 20)
	store := tr.dir
	c := newFdCache(4, time.Hour)
	for _, idx := range kids {
		readCached(t, c, tr, idx)
		if n := c.held(); n > 4 {
			t.Fatalf("%d descriptors open, want at most 4", n)
		}
	}
	if n := backingFds(t, store); n != 4 {
		t.Errorf("%d descriptors on the store after reading 20 files, want the 4 kept", n)
	}
	// The most recently read are the ones kept.
	c.mu.Lock()
	for _, idx := range kids[16:] {
		if c.m[fdKey{tr, idx}] == nil {
			t.Errorf("%s, read last, was not kept", tr.entries[idx].name)
		}
	}
	c.mu.Unlock()

	// Descriptors in use stay open beyond the bound.
	var held []*backingFd
	for _, idx := range kids[:6] {
		b, err := c.acquire(tr, idx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
	}
	if n := c.held(); n != 6 {
		t.Errorf("%d descriptors open with 6 in use, want 6", n)
	}
	for _, b := range held {
		if _, err := unix.Pread(b.fd, make([]byte, 1), 0); err != nil {
			t.Errorf("descriptor in use was closed: %v", err)
		}
	}
	// Two reads of one file share its descriptor.
	again, err := c.acquire(tr, kids[0])
	if err != nil {
		t.Fatal(err)
	}
	if again != held[0] {
		t.Error("a second read of a file opened another descriptor")
	}
	c.release(again)
	for _, b := range held {
		c.release(b)
	}
	if n := c.held(); n != 4 {
		t.Errorf("%d descriptors open after the reads ended, want 4", n)
	}

	b, err := c.acquire(tr, kids[0])
	if err != nil {
		t.Fatal(err)
	}
	c.close()
	if n := backingFds(t, store); n != 1 {
		t.Errorf("%d descriptors on the store after close with one in use, want 1", n)
	}
	c.release(b)
	if n := backingFds(t, store); n != 0 {
		t.Errorf("%d descriptors on the store after the last read ended, want 0", n)
	}
	if _, err := c.acquire(tr, kids[1]); !errors.Is(err, os.ErrClosed) {
		t.Errorf("acquire after close: err = %v, want ErrClosed", err)
	}
}

// TestFdCacheIdle checks that descriptors no read uses are closed after the
// idle time, and that failed opens are not remembered.
func TestFdCacheIdle(t *testing.T) {
	tr, kids := cacheTree(t, 3)
	c := newFdCache(100, 10*time.Millisecond)
	defer c.close()
	for _, idx := range kids {
		readCached(t, c, tr, idx)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.held() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle descriptors still open after 10s", c.held())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := backingFds(t, tr.dir); n != 0 {
		t.Errorf("%d descriptors on the store, want 0", n)
	}

	p := filepath.Join(tr.dir, tr.entries[kids[0]].rel)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, p+".away"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.acquire(tr, kids[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("acquire a missing file: err = %v, want not exist", err)
	}
	if err := os.Rename(p+".away", p); err != nil {
		t.Fatal(err)
	}
	if b, err := c.acquire(tr, kids[0]); err != nil {
		t.Errorf("acquire after the file came back: %v", err)
	} else {
		buf := make([]byte, len(data))
		if n, err := preadFull(b.fd, buf, 0); err != nil || string(buf[:n]) != string(data) {
			t.Errorf("read %q, %v", buf[:n], err)
		}
		c.release(b)
	}
}

// TestBackingOpenRefuses checks that only regular files of the recorded size
// are served.
func TestBackingOpenRefuses(t *testing.T) {
	tr, kids := cacheTree(t, 3)
	fifo := filepath.Join(tr.dir, tr.entries[kids[0]].rel)
	os.Remove(fifo)
	if err := unix.Mkfifo(fifo, 0o444); err != nil {
		t.Fatal(err)
	}
	grown := filepath.Join(tr.dir, tr.entries[kids[1]].rel)
	os.Chmod(grown, 0o644)
	if err := os.WriteFile(grown, []byte("longer than it was\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tr.dir, tr.entries[kids[2]].rel)
	os.Remove(link)
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Fatal(err)
	}
	for _, idx := range kids {
		fd, err := tr.open(idx)
		if err == nil {
			unix.Close(fd)
			t.Errorf("open %s: no error", tr.entries[idx].name)
			continue
		}
		want := syscall.EIO
		if idx == kids[2] {
			want = syscall.ELOOP
		}
		if got := ToErrno(err); got != want {
			t.Errorf("open %s: %v (errno %v), want %v", tr.entries[idx].name, err, got, want)
		}
	}
}
