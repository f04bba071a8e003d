package fs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// nodeFS answers the kernel's requests from the sessions' views. It keeps
// no node of its own: a node id names its owner and its entry (nodeids.go),
// the owner's tree has the entry, so the kernel's cache is the only copy of
// the nodes it holds. Every operation that would change something is
// refused with EROFS (the mount is also read-only in the kernel, which
// refuses most of them before asking).
type nodeFS struct{ s *Server }

var _ fuse.RawFileSystem = (*nodeFS)(nil)

// nodeKind says what a node id names.
type nodeKind uint8

const (
	staleNode   nodeKind = iota // nothing the daemon serves or the kernel may still hold
	rootNode                    // the mount's root
	sessionNode                 // a session's directory
	entryNode                   // a file or directory of a grant's tree
)

// node is what a node id names, resolved.
type node struct {
	kind nodeKind
	ss   *session
	g    *grant
	t    *tree
	idx  int32
}

// resolve finds what the kernel names by nodeid.
func (s *Server) resolve(nodeid uint64) node {
	if nodeid == fuse.FUSE_ROOT_ID {
		return node{kind: rootNode}
	}
	id, e := ownerOf(nodeid)
	o, ok := s.ids.get(id)
	if ok && o.p != nil {
		o, ok = s.awaitOwner(id, o.p)
	}
	switch {
	case !ok:
		return node{}
	case e == 0 && o.ss != nil:
		return node{kind: sessionNode, ss: o.ss}
	case e == 0 || o.g == nil:
		return node{}
	}
	t, _, err := o.g.ref.get()
	if err != nil || e > uint64(len(t.entries)) {
		// The kernel was given the id, so the tree was walked: unreachable.
		return node{}
	}
	return node{kind: entryNode, g: o.g, t: t, idx: int32(e - 1)}
}

func (n node) isDir() bool { return n.kind != entryNode || n.t.entries[n.idx].dir }

// reqContext is a request's context: done when the kernel interrupts it.
func reqContext(h *fuse.InHeader, cancel <-chan struct{}) context.Context {
	return &fuse.Context{Caller: h.Caller, Cancel: cancel}
}

func errStatus(errno syscall.Errno) fuse.Status { return fuse.Status(errno) }

// setTimes sets all three times of an attribute to t.
func setTimes(a *fuse.Attr, t time.Time) {
	a.SetTimes(&t, &t, &t)
}

// dirAttr fills the attributes every directory shares.
func (s *Server) dirAttr(a *fuse.Attr, ino uint64, mtime time.Time, perm uint32) {
	a.Ino = ino
	a.Mode = syscall.S_IFDIR | perm
	a.Nlink = 2
	a.Owner = fuse.Owner{Uid: s.opts.UID, Gid: s.opts.GID}
	a.Blksize = 4096
	setTimes(a, mtime)
}

// entryAttr fills the attributes of a version tree entry.
func (s *Server) entryAttr(a *fuse.Attr, g *grant, t *tree, idx int32) {
	e := &t.entries[idx]
	if e.dir {
		s.dirAttr(a, g.ino(idx), e.mtime, 0o555)
		return
	}
	a.Ino = g.ino(idx)
	a.Mode = syscall.S_IFREG | 0o444
	if e.exec {
		a.Mode |= 0o111
	}
	a.Size = uint64(e.size)
	a.Blocks = (a.Size + 511) / 512
	a.Nlink = 1
	a.Owner = fuse.Owner{Uid: s.opts.UID, Gid: s.opts.GID}
	a.Blksize = 4096
	setTimes(a, e.mtime)
}

// attr fills the attributes of a resolved node.
func (s *Server) attr(a *fuse.Attr, n node) {
	switch n.kind {
	case rootNode:
		// Search permission only: names resolve, listing is refused.
		s.dirAttr(a, fuse.FUSE_ROOT_ID, s.start, 0o111)
	case sessionNode:
		s.dirAttr(a, n.ss.ino, n.ss.created, 0o555)
	case entryNode:
		s.entryAttr(a, n.g, n.t, n.idx)
	}
}

func (f *nodeFS) String() string { return "skillfs" }

func (f *nodeFS) SetDebug(bool) {}

// Init: the server is known to Server before it serves.
func (f *nodeFS) Init(*fuse.Server) {}

func (f *nodeFS) OnUnmount() {}

// Lookup resolves a name. The root resolves session ids but cannot be
// listed: a session's id is its capability. "." and ".." are never asked
// for on a path; the kernel asks for them only to decode a file handle,
// which this filesystem refuses.
func (f *nodeFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if name == "." || name == ".." {
		return fuse.Status(syscall.ESTALE)
	}
	s := f.s
	switch n := s.resolve(h.NodeId); n.kind {
	case rootNode:
		return s.lookupSession(name, out)
	case sessionNode:
		return s.lookupSkill(n.ss, name, out)
	case entryNode:
		if !n.t.entries[n.idx].dir {
			return fuse.Status(syscall.ENOTDIR)
		}
		if n.g.revoked() {
			return fuse.ENOENT
		}
		ci, ok := n.t.child(n.idx, name)
		if !ok {
			return fuse.ENOENT
		}
		return s.handEntry(n.g, n.t, ci, out)
	}
	return fuse.Status(syscall.ESTALE)
}

func (s *Server) lookupSession(id string, out *fuse.EntryOut) fuse.Status {
	ss := s.session(id)
	if ss == nil && s.restore != nil {
		if id == s.probe {
			return fuse.Status(probeErrno)
		}
		if p := s.pendingOf(id); p != nil {
			s.awaitSession(p)
			ss = s.session(id)
		}
	}
	if ss == nil || !s.ids.hand(ss.ino, &ss.kernel) {
		return fuse.ENOENT
	}
	if ss.gone.Load() {
		// Removed between finding it and handing it: RemoveSession may
		// have looked at what the kernel holds before this lookup counted.
		s.ids.unhand(ss.ino)
		return fuse.ENOENT
	}
	s.dirAttr(&out.Attr, ss.ino, ss.created, 0o555)
	s.entryOut(out, ss.ino, ss.gen)
	return fuse.OK
}

func (s *Server) lookupSkill(ss *session, slug string, out *fuse.EntryOut) fuse.Status {
	if ss.gone.Load() {
		return fuse.ENOENT
	}
	var tried *grant
	for range 2 { // once more when a version swap dropped the grant found
		g := ss.grant(slug)
		if g == nil || g == tried {
			break // the same grant would fail the same way (a walk is not remembered when it fails)
		}
		tried = g
		if st := s.lookupGrant(g, out); st != fuse.ENOENT {
			return st
		}
	}
	return fuse.ENOENT
}

// lookupGrant answers the lookup of the directory of skill grant g.
func (s *Server) lookupGrant(g *grant, out *fuse.EntryOut) fuse.Status {
	t, skipped, err := g.ref.get()
	if err != nil {
		s.log.Error("read version tree", "session", g.session, "slug", g.skill.Slug, "dir", g.skill.Dir, "err", err)
		return errStatus(ToErrno(err))
	}
	if len(skipped) > 0 {
		s.log.Warn("version tree holds entries that are neither files nor directories; not served",
			"dir", g.skill.Dir, "entries", skipped)
	}
	return s.handEntry(g, t, 0, out)
}

// handEntry answers a lookup of entry idx of g's tree, recording that the
// kernel holds it.
func (s *Server) handEntry(g *grant, t *tree, idx int32, out *fuse.EntryOut) fuse.Status {
	if !s.ids.hand(g.ino(idx), &g.kernel) {
		return fuse.ENOENT // the grant left the table meanwhile
	}
	if g.revoked() {
		// Revoked between the caller's check and the hand: the revocation
		// may have listed what the kernel holds before this entry counted,
		// so the kernel must not be given it.
		s.ids.unhand(g.ino(idx))
		return fuse.ENOENT
	}
	s.entryAttr(&out.Attr, g, t, idx)
	s.entryOut(out, g.ino(idx), g.gen)
	return fuse.OK
}

// Forget takes back lookups the kernel no longer holds.
func (f *nodeFS) Forget(nodeid, nlookup uint64) { f.s.ids.forget(nodeid, nlookup) }

func (f *nodeFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	n := f.s.resolve(in.NodeId)
	if n.kind == staleNode {
		return fuse.Status(syscall.ESTALE)
	}
	f.s.attr(&out.Attr, n)
	out.SetTimeout(f.s.opts.AttrTimeout)
	return fuse.OK
}

// Statx answers ENOSYS: the kernel then asks with GETATTR from then on.
func (f *nodeFS) Statx(<-chan struct{}, *fuse.StatxIn, *fuse.StatxOut) fuse.Status {
	return fuse.ENOSYS
}

// Access answers ENOSYS: with default_permissions the kernel checks access
// itself, and stops asking once told.
func (f *nodeFS) Access(<-chan struct{}, *fuse.AccessIn) fuse.Status { return fuse.ENOSYS }

// Readlink: nothing served is a symbolic link.
func (f *nodeFS) Readlink(<-chan struct{}, *fuse.InHeader) ([]byte, fuse.Status) {
	return nil, fuse.EINVAL
}

func (f *nodeFS) StatFs(_ <-chan struct{}, _ *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	*out = fuse.StatfsOut{Bsize: 4096, Frsize: 4096, NameLen: 255}
	return fuse.OK
}

// OpenDir answers ENOSYS unless Options.Opens: the kernel then opens
// directories without asking (its no-opendir mode, set for the whole
// connection), caches their listings and reads them with handle 0, and
// ReadDir checks what an OPENDIR would have. Views change under a
// session's directory: SetSession drops its cached listing whenever its
// skills do.
func (f *nodeFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if !f.s.opts.Opens {
		return fuse.ENOSYS
	}
	n := f.s.resolve(in.NodeId)
	if st := n.listable(); st != fuse.OK {
		return st
	}
	if n.kind == entryNode {
		// A version directory never changes: the kernel may cache it.
		out.OpenFlags = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	return fuse.OK
}

// listable says whether a directory may be listed: never the root (also to
// callers, such as root, that the kernel's permission check lets through),
// nor a removed session or a revoked skill.
func (n node) listable() fuse.Status {
	switch {
	case n.kind == staleNode:
		return fuse.Status(syscall.ESTALE)
	case n.kind == rootNode:
		return fuse.Status(syscall.EACCES)
	case n.kind == sessionNode && n.ss.gone.Load():
		return fuse.ENOENT
	case n.kind == entryNode && !n.t.entries[n.idx].dir:
		return fuse.Status(syscall.ENOTDIR)
	case n.kind == entryNode && n.g.revoked():
		return fuse.Status(syscall.EACCES)
	}
	return fuse.OK
}

func (f *nodeFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.s.list(in, out, false)
}

func (f *nodeFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.s.list(in, out, true)
}

// list answers a READDIR(PLUS) from the offset asked: entry i of a listing
// has offset i+1. A session's listing is made once per view (a large
// directory is read in many requests); a version directory's comes from its
// tree. READDIRPLUS gives the kernel the entries of a version directory as
// LOOKUP would; a session's skills it leaves to a LOOKUP (node id 0), so a
// listing walks no version directory.
func (s *Server) list(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	n := s.resolve(in.NodeId)
	if st := n.listable(); st != fuse.OK {
		return st
	}
	if n.kind == sessionNode {
		list := n.ss.entries()
		for i := int(in.Offset); i < len(list); i++ {
			e := list[i]
			e.Off = uint64(i + 1)
			if !plus {
				if !out.AddDirEntry(e) {
					break
				}
			} else if out.AddDirLookupEntry(e) == nil {
				break
			}
		}
		return fuse.OK
	}
	kids := n.t.entries[n.idx].children
	for i := int(in.Offset); i < len(kids); i++ {
		ci := kids[i]
		e := &n.t.entries[ci]
		de := fuse.DirEntry{Name: e.name, Mode: syscall.S_IFREG, Ino: n.g.ino(ci), Off: uint64(i + 1)}
		if e.dir {
			de.Mode = syscall.S_IFDIR
		}
		if !plus {
			if !out.AddDirEntry(de) {
				break
			}
			continue
		}
		eo := out.AddDirLookupEntry(de)
		if eo == nil {
			break
		}
		s.handEntry(n.g, n.t, ci, eo) // refused: node id 0, the kernel looks the name up
	}
	return fuse.OK
}

func (f *nodeFS) ReleaseDir(*fuse.ReleaseIn) {}

func (f *nodeFS) FsyncDir(<-chan struct{}, *fuse.FsyncIn) fuse.Status { return fuse.OK }

// writeFlags are the open flags that could change a file.
const writeFlags = syscall.O_WRONLY | syscall.O_RDWR | syscall.O_TRUNC | syscall.O_CREAT | syscall.O_APPEND

// handle numbers given to the kernel with an open.
const (
	plainHandle       = 0 // reads go through Read
	passthroughHandle = 1 // holds a reference on the node's backing file (passthrough.go)
)

// Open answers ENOSYS unless Options.Opens: the kernel then opens every
// file of the mount without asking, keeping its cached pages across opens
// (see Options.Opens); the read-only mount refuses writing opens itself,
// and Read records activations.
//
// With Opens it keeps nothing open: reads share one descriptor per backing
// file (see fdCache), so the handles the kernel holds cost the daemon no
// descriptor. Opening the top-level SKILL.md reports an activation to the
// sink before the open returns; if the sink fails, so does the open. The
// backing file is acquired through the cache and validated first: a
// SKILL.md that cannot be read fails its open with the errno its reads
// would get, and activates nothing.
func (f *nodeFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	s := f.s
	if !s.opts.Opens {
		return fuse.ENOSYS
	}
	n := s.resolve(in.NodeId)
	switch {
	case n.kind == staleNode:
		return fuse.Status(syscall.ESTALE)
	case n.isDir():
		return fuse.Status(syscall.EISDIR)
	case in.Flags&writeFlags != 0:
		return fuse.Status(syscall.EROFS)
	case n.g.revoked():
		return fuse.Status(syscall.EACCES)
	}
	g := n.g
	if n.t.entries[n.idx].manifest && s.opts.Sink != nil {
		if err := s.checkBacking(n); err != nil {
			s.log.Error("open backing file: no activation", "session", g.session, "slug", g.skill.Slug, "err", err)
			return errStatus(ToErrno(err))
		}
		if err := s.activate(reqContext(&in.InHeader, cancel), g.session, g.skill.Slug); err != nil {
			s.log.Warn("record activation", "session", g.session, "slug", g.skill.Slug, "err", err)
			return fuse.EIO
		}
		s.log.Debug("activation", "session", g.session, "slug", g.skill.Slug)
	}
	// Immutable content: keep the page cache across opens, and skip the
	// FLUSH round trip on every close (nothing is ever written).
	out.OpenFlags = fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH
	out.Fh = plainHandle
	if s.opts.Passthrough {
		s.openPassthrough(n, out)
		if g.revoked() {
			// Revoked while the open was under way (the activation takes
			// time): a passthrough handle would read on without asking.
			if out.Fh == passthroughHandle {
				s.releasePassthrough(n)
			}
			return fuse.Status(syscall.EACCES)
		}
	}
	return fuse.OK
}

// Release ends an open; only a passthrough open holds anything.
func (f *nodeFS) Release(_ <-chan struct{}, in *fuse.ReleaseIn) {
	if in.Fh != passthroughHandle {
		return
	}
	if n := f.s.resolve(in.NodeId); n.kind == entryNode {
		f.s.releasePassthrough(n)
	}
}

// Flush answers ENOSYS, so the kernel stops sending FLUSH on close: there
// is never anything to flush. (With Opens, FOPEN_NOFLUSH says so already.)
func (f *nodeFS) Flush(<-chan struct{}, *fuse.FlushIn) fuse.Status { return fuse.ENOSYS }

// Fsync has nothing to flush; it succeeds, as on any read-only filesystem.
func (f *nodeFS) Fsync(<-chan struct{}, *fuse.FsyncIn) fuse.Status { return fuse.OK }

// Lseek answers ENOSYS: the kernel then seeks by itself, as in any file of
// fixed size.
func (f *nodeFS) Lseek(<-chan struct{}, *fuse.LseekIn, *fuse.LseekOut) fuse.Status {
	return fuse.ENOSYS
}

// Read reads into the request's buffer through the descriptor shared by
// every read of the file. The data is copied rather than spliced
// (fuse.ReadResultFd): a splice happens after Read returns, when the shared
// descriptor may already be closed, or reused for another file. Reads fail
// once the grant is revoked.
//
// Without Options.Opens a read of the top-level SKILL.md is where an
// activation is recorded: the session's first read waits until the sink has
// it, before any byte is returned; later reads that reach the daemon at the
// file's start (the kernel fetching it again) are counted. A SKILL.md whose
// backing file cannot be read activates nothing.
//
// With Options.AuditReads every read served is counted for the read audit.
func (f *nodeFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, dest []byte) (fuse.ReadResult, fuse.Status) {
	s := f.s
	n := s.resolve(in.NodeId)
	switch {
	case n.kind == staleNode:
		return nil, fuse.Status(syscall.ESTALE)
	case n.isDir():
		return nil, fuse.Status(syscall.EISDIR)
	case n.g.revoked():
		return nil, fuse.Status(syscall.EACCES)
	}
	g, e := n.g, &n.t.entries[n.idx]
	b, err := s.fds.acquire(n.t, n.idx)
	if err != nil {
		s.log.Error("open backing file", "session", g.session, "slug", g.skill.Slug, "err", err)
		return nil, errStatus(ToErrno(err))
	}
	defer s.fds.release(b)
	off := int64(in.Offset)
	if !s.opts.Opens && e.manifest && s.opts.Sink != nil {
		if errno := s.recordRead(reqContext(&in.InHeader, cancel), g, off); errno != 0 {
			return nil, errStatus(errno)
		}
	}
	// Serve no more than the size the kernel was told.
	if off >= e.size {
		return fuse.ReadResultData(nil), fuse.OK
	}
	if rest := e.size - off; int64(len(dest)) > rest {
		dest = dest[:rest]
	}
	got, err := preadFull(b.fd, dest, off)
	if err != nil {
		s.log.Error("read backing file", "session", g.session, "slug", g.skill.Slug, "path", e.rel, "err", err)
		return nil, errStatus(ToErrno(err))
	}
	if s.opts.AuditReads {
		s.audit.countRead(g, n.idx)
	}
	return fuse.ReadResultData(dest[:got]), fuse.OK
}

// recordRead records a read of the session's SKILL.md (no-open mode): the
// first durably, with concurrent first readers waiting for it; later ones
// that start at the file's beginning as a count.
func (s *Server) recordRead(ctx context.Context, g *grant, off int64) syscall.Errno {
	if g.activated.Load() {
		if off != 0 {
			return 0
		}
		if err := s.opts.Sink.Opened(g.session, g.skill.Slug); err != nil {
			s.log.Warn("record activation", "session", g.session, "slug", g.skill.Slug, "err", err)
			return syscall.EIO
		}
		return 0
	}
	g.actMu.Lock()
	defer g.actMu.Unlock()
	if g.activated.Load() {
		return 0
	}
	if err := s.activate(ctx, g.session, g.skill.Slug); err != nil {
		s.log.Warn("record activation", "session", g.session, "slug", g.skill.Slug, "err", err)
		return syscall.EIO
	}
	g.activated.Store(true)
	s.log.Debug("activation", "session", g.session, "slug", g.skill.Slug)
	return 0
}

// checkBacking opens and validates the backing file (tree.open) as a read
// would, through the descriptor cache, where the descriptor then stays for
// the reads that follow. With passthrough the kernel reads on a reference
// of its own, so a descriptor opened here is closed at once rather than
// left idle in the cache.
func (s *Server) checkBacking(n node) error {
	if s.opts.Passthrough {
		fd, err := n.t.open(n.idx)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	}
	b, err := s.fds.acquire(n.t, n.idx)
	if err != nil {
		return err
	}
	s.fds.release(b)
	return nil
}

// Ioctl answers ENOTTY at once, without looking at the node: nothing here
// is a terminal or takes any ioctl. The kernel sends every ioctl of a
// file of the mount (isatty's TCGETS, which Python's open() makes, above
// all) and remembers no answer, so each costs a round trip whatever the
// answer (ENOSYS too: the kernel turns it into ENOTTY and asks again).
func (f *nodeFS) Ioctl(<-chan struct{}, *fuse.IoctlIn, []byte, *fuse.IoctlOut, []byte) fuse.Status {
	return fuse.Status(syscall.ENOTTY)
}
