package fs

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// errNotServable says a backing file is no longer what its version tree
// recorded: not a regular file, or not of the recorded size. The store
// never changes a version in place, so this is damage or tampering; it
// reaches readers as EIO.
var errNotServable = errors.New("backing file does not match its version")

// errUnverified says a backing file changed (its ctime) after its version
// was last verified, and the version no longer verifies (see Content): it
// is damaged, or being replaced by a good copy. It reaches readers as EIO.
var errUnverified = errors.New("backing file changed since its version was verified")

// Content vouches for the content of the version directories served
// (Options.Content). A published version never changes, and any change to
// a file — its bytes, mode, owner or links — moves its ctime; so a backing
// file whose ctime is not older than its version's last verification is
// not served until the version verifies again. Opening a backing file, and
// reading through a descriptor kept open (its file may change in place),
// costs an fstat and a lookup; a version is hashed again only when one of
// its files changed.
type Content interface {
	// Verified returns when the content of version directory dir was
	// last found to match its version: the time that check began, on the
	// clock the kernel stamps changes with (skills.ChangeClock), so that a
	// change made during or after the check has a ctime no earlier. Zero:
	// never in this process.
	Verified(dir string) time.Time
	// Verify checks the content of dir against its version again, unless
	// it was verified after changed. nil means it matches; an error means
	// the file is not served (EIO). The implementation reports and deals
	// with a damaged copy.
	Verify(dir string, changed time.Time) error
}

// open opens the backing file of a regular entry for reading.
//
// No component below the version directory may be a symlink, so a tampered
// store cannot lead a reader outside it. O_NONBLOCK makes the open of a FIFO
// put in a file's place return at once instead of waiting for a writer (and
// holding the reader's request, which cannot be killed, until one comes);
// the descriptor must then be a regular file of the size the tree recorded,
// since that size is what the kernel was told and caches. With a Content,
// a file that changed since its version was verified is served only once
// the version verifies again (errUnverified otherwise).
func (t *tree) open(idx int32) (int, error) {
	e := &t.entries[idx]
	p := filepath.Join(t.dir, filepath.FromSlash(e.rel))
	const flags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   flags,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Open(p, flags, 0)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "fstat", Path: p, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		unix.Close(fd)
		return -1, fmt.Errorf("open %q: not a regular file (mode %#o): %w", p, st.Mode, errNotServable)
	case st.Size != e.size:
		unix.Close(fd)
		return -1, fmt.Errorf("open %q: %d bytes, the version recorded %d: %w", p, st.Size, e.size, errNotServable)
	}
	if err := t.vouch(idx, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// vouch checks the backing file of entry idx, described by st, against
// its version's last verification (see Content): one that changed since is
// served only once the version verifies again (errUnverified otherwise).
// Without a Content every file passes.
func (t *tree) vouch(idx int32, st *unix.Stat_t) error {
	if t.content == nil {
		return nil
	}
	// A ctime equal to the verification's start may be a change made just
	// after it began (the kernel's clock is coarse).
	changed := time.Unix(st.Ctim.Unix())
	if changed.Before(t.content.Verified(t.name)) {
		return nil
	}
	if err := t.content.Verify(t.name, changed); err != nil {
		return fmt.Errorf("%q of %q: %v: %w", t.entries[idx].rel, t.dir, err, errUnverified)
	}
	return nil
}

// revouch checks a descriptor the cache held open before this read:
// its file may have been changed in place since it was opened.
func (t *tree) revouch(idx int32, fd int) error {
	if t.content == nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat %q of %q: %w", t.entries[idx].rel, t.dir, err)
	}
	return t.vouch(idx, &st)
}

// preadFull reads len(buf) bytes at off, or fewer only at the end of the
// file.
func preadFull(fd int, buf []byte, off int64) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], off+int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

// Defaults of the descriptor cache.
const (
	// defaultMaxFds bounds the descriptors kept open for reads.
	defaultMaxFds = 1024
	// defaultFdIdle is how long a descriptor no read uses stays open: long
	// enough to serve the next read of a file being read, short enough that
	// a deleted version's files are let go soon.
	defaultFdIdle = time.Minute
)

// fdKey names a backing file: an entry of one version tree.
type fdKey struct {
	t   *tree
	idx int32
}

// backingFd is a descriptor on a backing file, shared by every read of it.
type backingFd struct {
	key   fdKey
	ready chan struct{} // closed once fd or err is set by the read that opened it
	fd    int
	err   error

	// Guarded by fdCache.mu.
	refs       int       // reads using fd now
	used       time.Time // when the last of them ended
	prev, next *backingFd
}

// fdCache shares descriptors on backing files among all reads: each file
// of a version tree has at most one, opened by its first read, kept while
// reads use it and for a while after. The daemon's descriptors are then
// bounded by the files being read rather than by the opens the kernel holds
// (it releases a handle long after the reader closed it), and opens cost no
// descriptor at all.
//
// When more than max are open, idle ones are closed, least recently used
// first; any idle longer than idle is closed too. Descriptors in use are
// never closed, so more than max are open only while more than max files
// are being read at once.
type fdCache struct {
	max  int
	idle time.Duration

	mu     sync.Mutex
	m      map[fdKey]*backingFd
	lru    backingFd // sentinel of the idle list, most recently used first
	nidle  int
	timer  *time.Timer
	closed bool
}

func newFdCache(max int, idle time.Duration) *fdCache {
	c := &fdCache{max: max, idle: idle, m: make(map[fdKey]*backingFd)}
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	return c
}

// acquire returns the descriptor of entry idx of t, opening it if the cache
// holds none. The caller must release it.
func (c *fdCache) acquire(t *tree, idx int32) (*backingFd, error) {
	k := fdKey{t, idx}
	c.mu.Lock()
	b := c.m[k]
	if b == nil {
		if c.closed {
			c.mu.Unlock()
			return nil, fmt.Errorf("read backing file: %w", iofs.ErrClosed)
		}
		// Open outside the lock, so a slow store stalls only the reads of
		// this file; they wait for this open instead of opening their own.
		b = &backingFd{key: k, ready: make(chan struct{}), fd: -1, refs: 1}
		c.m[k] = b
		c.trim()
		c.mu.Unlock()
		b.fd, b.err = t.open(idx)
		if b.err != nil {
			c.mu.Lock()
			if c.m[k] == b {
				delete(c.m, k) // not remembered: the next read tries again
			}
			if errors.Is(b.err, errUnverified) {
				c.dropTree(t) // the version's other files are no better
			}
			c.mu.Unlock()
		}
		close(b.ready)
	} else {
		if b.refs == 0 {
			c.unlink(b)
		}
		b.refs++
		c.mu.Unlock()
		<-b.ready
		if b.err == nil {
			if err := t.revouch(idx, b.fd); err != nil {
				c.mu.Lock()
				c.dropTree(t)
				c.mu.Unlock()
				c.release(b)
				return nil, err
			}
		}
	}
	if b.err != nil {
		c.release(b)
		return nil, b.err
	}
	return b, nil
}

// release ends a use of b.
func (c *fdCache) release(b *backingFd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b.refs--
	if b.refs > 0 {
		return
	}
	if c.m[b.key] != b {
		// Dropped while in use (the cache closed) or never opened.
		if b.fd >= 0 {
			unix.Close(b.fd)
			b.fd = -1
		}
		return
	}
	b.used = time.Now()
	b.prev, b.next = &c.lru, c.lru.next
	b.prev.next, b.next.prev = b, b
	c.nidle++
	c.trim()
	c.schedule()
}

// trim closes idle descriptors, least recently used first, while more than
// max are open.
func (c *fdCache) trim() {
	for len(c.m) > c.max && c.nidle > 0 {
		c.drop(c.lru.prev)
	}
}

// unlink takes an idle b off the idle list.
func (c *fdCache) unlink(b *backingFd) {
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
	c.nidle--
}

// drop closes an idle descriptor and forgets it.
func (c *fdCache) drop(b *backingFd) {
	c.unlink(b)
	delete(c.m, b.key)
	unix.Close(b.fd)
	b.fd = -1
}

// schedule arms the timer that closes the oldest idle descriptor when it
// has been idle long enough.
func (c *fdCache) schedule() {
	if c.timer != nil || c.nidle == 0 || c.closed {
		return
	}
	c.timer = time.AfterFunc(time.Until(c.lru.prev.used.Add(c.idle)), c.sweep)
}

// sweep closes the descriptors idle for longer than c.idle.
func (c *fdCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	for c.nidle > 0 && time.Since(c.lru.prev.used) >= c.idle {
		c.drop(c.lru.prev)
	}
	c.schedule()
}

// dropTree forgets the descriptors on files of t, whose version was found
// damaged (and is refused until a good copy takes its place, where one can
// be had): later reads open its files anew. Idle ones are closed now, those in use when
// their reads end. The caller holds c.mu.
func (c *fdCache) dropTree(t *tree) {
	for k, b := range c.m {
		switch {
		case k.t != t:
		case b.refs == 0:
			c.drop(b)
		default:
			delete(c.m, k) // closed by its last release
		}
	}
}

// held returns the number of descriptors the cache holds open.
func (c *fdCache) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range c.m {
		select {
		case <-b.ready:
			if b.err == nil {
				n++
			}
		default:
		}
	}
	return n
}

// close closes every idle descriptor at once and the others when their
// reads end; later reads fail.
func (c *fdCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	for c.nidle > 0 {
		c.drop(c.lru.prev)
	}
	clear(c.m)
}
