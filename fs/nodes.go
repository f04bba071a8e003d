package fs

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// readOnly answers every mutating operation with EROFS. The mount is also
// read-only in the kernel, which refuses most of these before asking; these
// methods make the daemon refuse them too, rather than fall back to go-fuse
// defaults (some of which report success).
type readOnly struct{}

func (readOnly) Setattr(context.Context, fusefs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Setxattr(context.Context, string, []byte, uint32) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Removexattr(context.Context, string) syscall.Errno { return syscall.EROFS }

func (readOnly) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Link(context.Context, fusefs.InodeEmbedder, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Symlink(context.Context, string, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Create(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (readOnly) Tmpfile(context.Context, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (readOnly) Unlink(context.Context, string) syscall.Errno { return syscall.EROFS }

func (readOnly) Rmdir(context.Context, string) syscall.Errno { return syscall.EROFS }

func (readOnly) Rename(context.Context, string, fusefs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Write(context.Context, fusefs.FileHandle, []byte, int64) (uint32, syscall.Errno) {
	return 0, syscall.EROFS
}

func (readOnly) Allocate(context.Context, fusefs.FileHandle, uint64, uint64, uint32) syscall.Errno {
	return syscall.EROFS
}

// Fsync has nothing to flush; it succeeds, as on any read-only filesystem.
func (readOnly) Fsync(context.Context, fusefs.FileHandle, uint32) syscall.Errno { return 0 }

func (readOnly) Statfs(_ context.Context, out *fuse.StatfsOut) syscall.Errno {
	*out = fuse.StatfsOut{Bsize: 4096, Frsize: 4096, NameLen: 255}
	return 0
}

// The interfaces every node type implements through readOnly.
type readOnlyNode interface {
	fusefs.NodeSetattrer
	fusefs.NodeSetxattrer
	fusefs.NodeRemovexattrer
	fusefs.NodeMkdirer
	fusefs.NodeMknoder
	fusefs.NodeLinker
	fusefs.NodeSymlinker
	fusefs.NodeCreater
	fusefs.NodeTmpfiler
	fusefs.NodeUnlinker
	fusefs.NodeRmdirer
	fusefs.NodeRenamer
	fusefs.NodeWriter
	fusefs.NodeAllocater
	fusefs.NodeFsyncer
	fusefs.NodeStatfser
}

var (
	_ = (readOnlyNode)((*rootNode)(nil))
	_ = (readOnlyNode)((*sessionDir)(nil))
	_ = (readOnlyNode)((*dirNode)(nil))
	_ = (readOnlyNode)((*fileNode)(nil))
)

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

// rootNode is the mount's root. It resolves session ids but cannot be
// listed: a session's id is its capability.
type rootNode struct {
	fusefs.Inode
	readOnly
	srv *Server
}

var (
	_ = (fusefs.NodeLookuper)((*rootNode)(nil))
	_ = (fusefs.NodeGetattrer)((*rootNode)(nil))
	_ = (fusefs.NodeOpendirHandler)((*rootNode)(nil))
)

func (r *rootNode) Getattr(_ context.Context, _ fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	// Search permission only: names resolve, listing is refused.
	r.srv.dirAttr(&out.Attr, fuse.FUSE_ROOT_ID, r.srv.start, 0o111)
	return 0
}

// OpendirHandle refuses to list the root, also to callers (root) that the
// kernel's permission check lets through.
func (r *rootNode) OpendirHandle(context.Context, uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, syscall.EACCES
}

func (r *rootNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	ss := r.srv.session(name)
	if ss == nil {
		return nil, syscall.ENOENT
	}
	r.srv.dirAttr(&out.Attr, ss.dirIno, ss.created, 0o555)
	if ch := r.GetChild(name); ch != nil {
		if d, ok := ch.Operations().(*sessionDir); ok && d.sess == ss {
			return ch, 0
		}
	}
	return r.NewInode(ctx, &sessionDir{srv: r.srv, sess: ss}, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: ss.dirIno}), 0
}

// sessionDir lists the skills of one session.
type sessionDir struct {
	fusefs.Inode
	readOnly
	srv  *Server
	sess *session
}

var (
	_ = (fusefs.NodeLookuper)((*sessionDir)(nil))
	_ = (fusefs.NodeGetattrer)((*sessionDir)(nil))
	_ = (fusefs.NodeOpendirHandler)((*sessionDir)(nil))
)

func (d *sessionDir) Getattr(_ context.Context, _ fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.srv.dirAttr(&out.Attr, d.sess.dirIno, d.sess.created, 0o555)
	return 0
}

func (d *sessionDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if d.sess.gone.Load() {
		return nil, syscall.ENOENT
	}
	g := d.sess.grant(name)
	if g == nil {
		return nil, syscall.ENOENT
	}
	t, skipped, err := g.ref.get()
	if err != nil {
		d.srv.log.Error("read version tree", "session", g.session, "slug", g.skill.Slug, "dir", g.skill.Dir, "err", err)
		return nil, ToErrno(err)
	}
	if len(skipped) > 0 {
		d.srv.log.Warn("version tree holds entries that are neither files nor directories; not served",
			"dir", g.skill.Dir, "entries", skipped)
	}
	d.srv.entryAttr(&out.Attr, g, t, 0)
	if ch := d.GetChild(name); ch != nil {
		if n, ok := ch.Operations().(*dirNode); ok && n.g == g {
			return ch, 0
		}
	}
	n := &dirNode{srv: d.srv, g: g, t: t, idx: 0}
	return d.NewInode(ctx, n, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: g.ino(0)}), 0
}

// OpendirHandle lists the session's skills. The listing is not cached by the
// kernel, since the view can change at any time.
func (d *sessionDir) OpendirHandle(context.Context, uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if d.sess.gone.Load() {
		return nil, 0, syscall.ENOENT
	}
	return fusefs.NewListDirStream(d.sess.entries()), 0, 0
}

// dirNode is a directory of a version tree, as seen by one grant.
type dirNode struct {
	fusefs.Inode
	readOnly
	srv       *Server
	g         *grant
	t         *tree
	idx       int32
	forgotten atomic.Bool // nothing below is held by the kernel any more
}

var (
	_ = (fusefs.NodeOnForgetter)((*dirNode)(nil))
	_ = (fusefs.NodeLookuper)((*dirNode)(nil))
	_ = (fusefs.NodeGetattrer)((*dirNode)(nil))
	_ = (fusefs.NodeOpendirHandler)((*dirNode)(nil))
)

func (n *dirNode) OnForget() { n.forgotten.Store(true) }

func (n *dirNode) Getattr(_ context.Context, _ fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.srv.entryAttr(&out.Attr, n.g, n.t, n.idx)
	return 0
}

func (n *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if n.g.revoked() {
		return nil, syscall.ENOENT
	}
	ci, ok := n.t.child(n.idx, name)
	if !ok {
		return nil, syscall.ENOENT
	}
	n.srv.entryAttr(&out.Attr, n.g, n.t, ci)
	if ch := n.GetChild(name); ch != nil {
		return ch, 0
	}
	if n.t.entries[ci].dir {
		ch := &dirNode{srv: n.srv, g: n.g, t: n.t, idx: ci}
		return n.NewInode(ctx, ch, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: n.g.ino(ci)}), 0
	}
	ch := &fileNode{srv: n.srv, g: n.g, t: n.t, idx: ci}
	return n.NewInode(ctx, ch, fusefs.StableAttr{Mode: syscall.S_IFREG, Ino: n.g.ino(ci)}), 0
}

// OpendirHandle lists a version directory; it never changes, so the kernel
// may cache the listing.
func (n *dirNode) OpendirHandle(context.Context, uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if n.g.revoked() {
		return nil, 0, syscall.EACCES
	}
	kids := n.t.entries[n.idx].children
	list := make([]fuse.DirEntry, 0, len(kids))
	for _, ci := range kids {
		e := &n.t.entries[ci]
		mode := uint32(syscall.S_IFREG)
		if e.dir {
			mode = syscall.S_IFDIR
		}
		list = append(list, fuse.DirEntry{Name: e.name, Mode: mode, Ino: n.g.ino(ci)})
	}
	return fusefs.NewListDirStream(list), fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

// fileNode is a regular file of a version tree, as seen by one grant.
type fileNode struct {
	fusefs.Inode
	readOnly
	srv   *Server
	g     *grant
	t     *tree
	idx   int32
	audit readCounter // with Options.AuditReads
}

var (
	_ = (fusefs.NodeGetattrer)((*fileNode)(nil))
	_ = (fusefs.NodeOpener)((*fileNode)(nil))
	_ = (fusefs.NodeReader)((*fileNode)(nil))
	_ = (fusefs.NodeFlusher)((*fileNode)(nil))
)

func (n *fileNode) Getattr(_ context.Context, _ fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.srv.entryAttr(&out.Attr, n.g, n.t, n.idx)
	return 0
}

// writeFlags are the open flags that could change a file.
const writeFlags = syscall.O_WRONLY | syscall.O_RDWR | syscall.O_TRUNC | syscall.O_CREAT | syscall.O_APPEND

// Open answers ENOSYS unless Options.Opens: the kernel then opens every
// file of the mount without asking, keeping its cached pages across opens
// (see Options.Opens); the read-only mount refuses writing opens itself,
// and Read records activations.
//
// With Opens it keeps nothing open: reads share one descriptor per
// backing file (see fdCache), so the handles the kernel holds cost the
// daemon no descriptor. Opening the top-level SKILL.md reports an
// activation to the sink before the open returns; if the sink fails, so
// does the open. The backing file is acquired through the cache and
// validated first: a SKILL.md that cannot be read fails its open with the
// errno its reads would get, and activates nothing.
func (n *fileNode) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if !n.srv.opts.Opens {
		return nil, 0, syscall.ENOSYS
	}
	if flags&writeFlags != 0 {
		return nil, 0, syscall.EROFS
	}
	if n.g.revoked() {
		return nil, 0, syscall.EACCES
	}
	if n.t.entries[n.idx].manifest && n.srv.opts.Sink != nil {
		if err := n.checkBacking(); err != nil {
			n.srv.log.Error("open backing file: no activation", "session", n.g.session, "slug", n.g.skill.Slug, "err", err)
			return nil, 0, ToErrno(err)
		}
		if err := n.srv.activate(ctx, n.g.session, n.g.skill.Slug); err != nil {
			n.srv.log.Warn("record activation", "session", n.g.session, "slug", n.g.skill.Slug, "err", err)
			return nil, 0, syscall.EIO
		}
		n.srv.log.Debug("activation", "session", n.g.session, "slug", n.g.skill.Slug)
	}
	// Immutable content: keep the page cache across opens, and skip the
	// FLUSH round trip on every close (nothing is ever written).
	const openFlags = fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH
	if n.srv.opts.Passthrough {
		h := &passthroughHandle{fileHandle: fileHandle{n}}
		h.fd.Store(-1)
		return h, openFlags, 0
	}
	return &fileHandle{n}, openFlags, 0
}

// Flush answers ENOSYS, so the kernel stops sending FLUSH on close: there
// is never anything to flush. (With Opens, FOPEN_NOFLUSH says so already.)
func (n *fileNode) Flush(context.Context, fusefs.FileHandle) syscall.Errno { return syscall.ENOSYS }

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
// With Options.AuditReads every read served is counted for the read audit
// (an atomic add; the first read of a batch also takes the clock).
func (n *fileNode) Read(ctx context.Context, _ fusefs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if n.g.revoked() {
		return nil, syscall.EACCES
	}
	b, err := n.srv.fds.acquire(n.t, n.idx)
	if err != nil {
		n.srv.log.Error("open backing file", "session", n.g.session, "slug", n.g.skill.Slug, "err", err)
		return nil, ToErrno(err)
	}
	defer n.srv.fds.release(b)
	if !n.srv.opts.Opens && n.t.entries[n.idx].manifest && n.srv.opts.Sink != nil {
		if errno := n.recordRead(ctx, off); errno != 0 {
			return nil, errno
		}
	}
	// Serve no more than the size the kernel was told.
	size := n.t.entries[n.idx].size
	if off >= size {
		return fuse.ReadResultData(nil), 0
	}
	if rest := size - off; int64(len(dest)) > rest {
		dest = dest[:rest]
	}
	got, err := preadFull(b.fd, dest, off)
	if err != nil {
		n.srv.log.Error("read backing file", "session", n.g.session, "slug", n.g.skill.Slug,
			"path", n.t.entries[n.idx].rel, "err", err)
		return nil, ToErrno(err)
	}
	if n.srv.opts.AuditReads {
		n.srv.audit.countRead(n)
	}
	return fuse.ReadResultData(dest[:got]), 0
}

// recordRead records a read of the session's SKILL.md (no-open mode): the
// first durably, with concurrent first readers waiting for it; later ones
// that start at the file's beginning as a count.
func (n *fileNode) recordRead(ctx context.Context, off int64) syscall.Errno {
	g := n.g
	if g.activated.Load() {
		if off != 0 {
			return 0
		}
		if err := n.srv.opts.Sink.Opened(g.session, g.skill.Slug); err != nil {
			n.srv.log.Warn("record activation", "session", g.session, "slug", g.skill.Slug, "err", err)
			return syscall.EIO
		}
		return 0
	}
	g.actMu.Lock()
	defer g.actMu.Unlock()
	if g.activated.Load() {
		return 0
	}
	if err := n.srv.activate(ctx, g.session, g.skill.Slug); err != nil {
		n.srv.log.Warn("record activation", "session", g.session, "slug", g.skill.Slug, "err", err)
		return syscall.EIO
	}
	g.activated.Store(true)
	n.srv.log.Debug("activation", "session", g.session, "slug", g.skill.Slug)
	return 0
}

// checkBacking opens and validates the backing file (tree.open) as a read
// would, through the descriptor cache, where the descriptor then stays for
// the reads that follow. With passthrough the kernel reads on a descriptor
// of its own (PassthroughFd), so one opened here is closed at once rather
// than left idle in the cache.
func (n *fileNode) checkBacking() error {
	if n.srv.opts.Passthrough {
		fd, err := n.t.open(n.idx)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	}
	b, err := n.srv.fds.acquire(n.t, n.idx)
	if err != nil {
		return err
	}
	n.srv.fds.release(b)
	return nil
}

// fileHandle is a file opened with Options.Opens; fileNode.Read serves
// its reads.
type fileHandle struct{ n *fileNode }

var (
	_ = (fusefs.FilePassthroughFder)((*passthroughHandle)(nil))
	_ = (fusefs.FileReleaser)((*passthroughHandle)(nil))
)

// passthroughHandle lets the kernel read the backing file directly. The
// kernel registers one backing file per inode and keeps its own reference
// to it, so go-fuse asks for a descriptor only on an open of an inode that
// has no registration; that handle then holds the descriptor until it is
// released. Passthrough thus costs up to one descriptor per file with
// handles open, held until the kernel's RELEASE of the handle that
// registered it.
type passthroughHandle struct {
	fileHandle
	fd atomic.Int64 // -1 until PassthroughFd opened it
}

// PassthroughFd opens the backing file for the kernel to register. If it
// cannot, the handle reads through the daemon.
func (h *passthroughHandle) PassthroughFd() (int, bool) {
	n := h.n
	fd, err := n.t.open(n.idx)
	if err != nil {
		n.srv.log.Error("open backing file", "session", n.g.session, "slug", n.g.skill.Slug, "err", err)
		return -1, false
	}
	if old := h.fd.Swap(int64(fd)); old >= 0 {
		unix.Close(int(old))
	}
	return fd, true
}

func (h *passthroughHandle) Release(context.Context) syscall.Errno {
	if fd := h.fd.Swap(-1); fd >= 0 {
		return ToErrno(unix.Close(int(fd)))
	}
	return 0
}
