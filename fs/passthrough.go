package fs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Passthrough (Options.Passthrough) lets the kernel read a backing file
// itself. The kernel registers one backing file per inode: the first open
// of a file registers it (FUSE_DEV_IOC_BACKING_OPEN, which takes the
// kernel's own reference to the file, so the daemon closes its descriptor
// at once), later opens of the same file name the same registration, and
// the release of the last open unregisters it. Passthrough thus costs the
// daemon no descriptor, and a registration per file with opens.

// backings holds the registrations of a grant's files with opens.
type backings struct {
	mu sync.Mutex
	m  map[int32]*backing // by entry
}

// backing is one registration of a backing file with the kernel.
type backing struct {
	id    int32
	opens int
}

// openPassthrough has an open read through the kernel's registration of
// the backing file, registering it if no open of the file holds one. If it
// cannot, the open reads through the daemon.
func (s *Server) openPassthrough(n node, out *fuse.OpenOut) {
	bs := &n.g.backings
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.m[n.idx]
	if b == nil {
		if s.backingRefused.Load() {
			return
		}
		id, ok := s.registerBacking(n)
		if !ok {
			return
		}
		if bs.m == nil {
			bs.m = make(map[int32]*backing)
		}
		b = &backing{id: id}
		bs.m[n.idx] = b
	}
	b.opens++
	out.BackingID = b.id
	out.OpenFlags |= fuse.FOPEN_PASSTHROUGH
	out.OpenFlags &^= fuse.FOPEN_KEEP_CACHE
	out.Fh = passthroughHandle
}

// registerBacking registers the backing file of n with the kernel.
func (s *Server) registerBacking(n node) (int32, bool) {
	g := n.g
	fd, err := n.t.open(n.idx)
	if err != nil {
		s.log.Error("open backing file", "session", g.session, "slug", g.skill.Slug, "err", err)
		return 0, false
	}
	defer unix.Close(fd)
	id, errno := s.fuse.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fd)})
	if errno != 0 {
		// Not privileged enough, or the kernel refuses: it will not change.
		if !s.backingRefused.Swap(true) {
			s.log.Warn("register backing file: passthrough off, reads go through the daemon", "errno", errno)
		}
		return 0, false
	}
	return id, true
}

// releasePassthrough ends a passthrough open of n; the last one unregisters
// the backing file.
func (s *Server) releasePassthrough(n node) {
	bs := &n.g.backings
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.m[n.idx]
	if b == nil {
		return
	}
	if b.opens--; b.opens > 0 {
		return
	}
	delete(bs.m, n.idx)
	if errno := s.fuse.UnregisterBackingFd(b.id); errno != 0 {
		s.log.Debug("unregister backing file", "session", n.g.session, "slug", n.g.skill.Slug, "errno", errno)
	}
}
