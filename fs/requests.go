package fs

import (
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The requests Server.Requests counts, by the kernel's name of the
// operation: every request the FUSE server hands to the filesystem. The
// server answers a few itself, uncounted: INIT (once per mount), INTERRUPT
// (the kernel giving up on a request of a process that got a signal),
// NOTIFY_REPLY (answers to notifications the daemon never sends), POLL
// (ENOSYS, and the kernel stops asking) and operations it does not know
// (ENOSYS). FORGET counts the nodes forgotten, one by one, also those of a
// BATCH_FORGET; RENAME counts RENAME2 too.
const (
	ReqLookup        = "LOOKUP"
	ReqForget        = "FORGET"
	ReqGetattr       = "GETATTR"
	ReqSetattr       = "SETATTR"
	ReqStatx         = "STATX"
	ReqAccess        = "ACCESS"
	ReqReadlink      = "READLINK"
	ReqMknod         = "MKNOD"
	ReqMkdir         = "MKDIR"
	ReqUnlink        = "UNLINK"
	ReqRmdir         = "RMDIR"
	ReqRename        = "RENAME"
	ReqLink          = "LINK"
	ReqSymlink       = "SYMLINK"
	ReqCreate        = "CREATE"
	ReqTmpfile       = "TMPFILE"
	ReqOpen          = "OPEN"
	ReqRead          = "READ"
	ReqWrite         = "WRITE"
	ReqCopyFileRange = "COPY_FILE_RANGE"
	ReqLseek         = "LSEEK"
	ReqIoctl         = "IOCTL"
	ReqFlush         = "FLUSH"
	ReqFsync         = "FSYNC"
	ReqFallocate     = "FALLOCATE"
	ReqGetlk         = "GETLK"
	ReqSetlk         = "SETLK"
	ReqSetlkw        = "SETLKW"
	ReqRelease       = "RELEASE"
	ReqOpendir       = "OPENDIR"
	ReqReaddir       = "READDIR"
	ReqReaddirplus   = "READDIRPLUS"
	ReqReleasedir    = "RELEASEDIR"
	ReqFsyncdir      = "FSYNCDIR"
	ReqStatfs        = "STATFS"
	ReqGetxattr      = "GETXATTR"
	ReqListxattr     = "LISTXATTR"
	ReqSetxattr      = "SETXATTR"
	ReqRemovexattr   = "REMOVEXATTR"
)

// Indexes of the counts, in the order of requestNames.
const (
	nLookup = iota
	nForget
	nGetattr
	nSetattr
	nStatx
	nAccess
	nReadlink
	nMknod
	nMkdir
	nUnlink
	nRmdir
	nRename
	nLink
	nSymlink
	nCreate
	nTmpfile
	nOpen
	nRead
	nWrite
	nCopyFileRange
	nLseek
	nIoctl
	nFlush
	nFsync
	nFallocate
	nGetlk
	nSetlk
	nSetlkw
	nRelease
	nOpendir
	nReaddir
	nReaddirplus
	nReleasedir
	nFsyncdir
	nStatfs
	nGetxattr
	nListxattr
	nSetxattr
	nRemovexattr
	nKinds
)

var requestNames = [nKinds]string{
	ReqLookup, ReqForget, ReqGetattr, ReqSetattr, ReqStatx, ReqAccess, ReqReadlink,
	ReqMknod, ReqMkdir, ReqUnlink, ReqRmdir, ReqRename, ReqLink, ReqSymlink, ReqCreate, ReqTmpfile,
	ReqOpen, ReqRead, ReqWrite, ReqCopyFileRange, ReqLseek, ReqIoctl, ReqFlush, ReqFsync, ReqFallocate,
	ReqGetlk, ReqSetlk, ReqSetlkw, ReqRelease,
	ReqOpendir, ReqReaddir, ReqReaddirplus, ReqReleasedir, ReqFsyncdir,
	ReqStatfs, ReqGetxattr, ReqListxattr, ReqSetxattr, ReqRemovexattr,
}

// maxErrno bounds the errnos counted one by one; a failure with a larger
// one (none on Linux) counts under 0, "other".
const maxErrno = 134

// requestCounts counts the requests of each kind, and those of each kind
// answered with an error, by errno.
type requestCounts struct {
	all    [nKinds]atomic.Uint64
	failed [nKinds][maxErrno]atomic.Uint64
}

func (c *requestCounts) add(i int) { c.all[i].Add(1) }

// result counts st against requests of kind i when it is an error, and
// returns it.
func (c *requestCounts) result(i int, st fuse.Status) fuse.Status {
	if st != fuse.OK {
		e := int(st)
		if e < 0 || e >= maxErrno {
			e = 0
		}
		c.failed[i][e].Add(1)
	}
	return st
}

// count counts a request of kind i and its answer.
func (c *requestCounts) count(i int, st fuse.Status) fuse.Status {
	c.add(i)
	return c.result(i, st)
}

// snapshot returns the counts by request name.
func (c *requestCounts) snapshot() map[string]uint64 {
	out := make(map[string]uint64, len(requestNames))
	for i, name := range requestNames {
		out[name] = c.all[i].Load()
	}
	return out
}

// errors returns the counts of failed requests by request name and errno
// name (ENOENT, …), leaving out those that never failed.
func (c *requestCounts) errors() map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for i, name := range requestNames {
		for e := range c.failed[i] {
			n := c.failed[i][e].Load()
			if n == 0 {
				continue
			}
			if out[name] == nil {
				out[name] = map[string]uint64{}
			}
			out[name][errnoName(e)] += n // several errnos may share the name "other"
		}
	}
	return out
}

// errnoName names an errno as C does ("ENOENT"); 0 and errnos without a
// name are "other".
func errnoName(e int) string {
	if name := unix.ErrnoName(syscall.Errno(e)); e != 0 && name != "" {
		return name
	}
	return "other"
}

// counting counts every request the kernel sends on its way to the file
// system that answers it. It embeds nothing: a request kind the FUSE server
// adds must be counted here before it compiles.
type counting struct {
	fs fuse.RawFileSystem
	n  *requestCounts
}

var _ fuse.RawFileSystem = (*counting)(nil)

func (c *counting) String() string        { return c.fs.String() }
func (c *counting) SetDebug(debug bool)   { c.fs.SetDebug(debug) }
func (c *counting) Init(srv *fuse.Server) { c.fs.Init(srv) }
func (c *counting) OnUnmount()            { c.fs.OnUnmount() }

func (c *counting) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	return c.n.count(nLookup, c.fs.Lookup(cancel, h, name, out))
}

func (c *counting) Forget(nodeid, nlookup uint64) {
	c.n.add(nForget)
	c.fs.Forget(nodeid, nlookup)
}

func (c *counting) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	return c.n.count(nGetattr, c.fs.GetAttr(cancel, in, out))
}

func (c *counting) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	return c.n.count(nSetattr, c.fs.SetAttr(cancel, in, out))
}

func (c *counting) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	return c.n.count(nStatx, c.fs.Statx(cancel, in, out))
}

func (c *counting) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	return c.n.count(nAccess, c.fs.Access(cancel, in))
}

func (c *counting) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	b, st := c.fs.Readlink(cancel, h)
	return b, c.n.count(nReadlink, st)
}

func (c *counting) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return c.n.count(nMknod, c.fs.Mknod(cancel, in, name, out))
}

func (c *counting) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return c.n.count(nMkdir, c.fs.Mkdir(cancel, in, name, out))
}

func (c *counting) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return c.n.count(nUnlink, c.fs.Unlink(cancel, h, name))
}

func (c *counting) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return c.n.count(nRmdir, c.fs.Rmdir(cancel, h, name))
}

func (c *counting) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	return c.n.count(nRename, c.fs.Rename(cancel, in, oldName, newName))
}

func (c *counting) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	return c.n.count(nLink, c.fs.Link(cancel, in, name, out))
}

func (c *counting) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return c.n.count(nSymlink, c.fs.Symlink(cancel, h, target, name, out))
}

func (c *counting) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return c.n.count(nCreate, c.fs.Create(cancel, in, name, out))
}

func (c *counting) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	return c.n.count(nTmpfile, c.fs.Tmpfile(cancel, in, out))
}

func (c *counting) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return c.n.count(nOpen, c.fs.Open(cancel, in, out))
}

func (c *counting) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	res, st := c.fs.Read(cancel, in, buf)
	return res, c.n.count(nRead, st)
}

// Writev is how the server hands a WRITE over; it calls Write only when
// Writev answers ENOSYS, and then for the same request.
func (c *counting) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	n, st := c.fs.Writev(cancel, in, data)
	if st == fuse.ENOSYS {
		c.n.add(nWrite)
		return n, st
	}
	return n, c.n.count(nWrite, st)
}

func (c *counting) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	n, st := c.fs.Write(cancel, in, data)
	return n, c.n.result(nWrite, st)
}

func (c *counting) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	n, st := c.fs.CopyFileRange(cancel, in)
	return n, c.n.count(nCopyFileRange, st)
}

func (c *counting) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	return c.n.count(nLseek, c.fs.Lseek(cancel, in, out))
}

func (c *counting) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	return c.n.count(nIoctl, c.fs.Ioctl(cancel, in, inbuf, out, outbuf))
}

func (c *counting) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	return c.n.count(nFlush, c.fs.Flush(cancel, in))
}

func (c *counting) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return c.n.count(nFsync, c.fs.Fsync(cancel, in))
}

func (c *counting) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	return c.n.count(nFallocate, c.fs.Fallocate(cancel, in))
}

func (c *counting) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	return c.n.count(nGetlk, c.fs.GetLk(cancel, in, out))
}

func (c *counting) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return c.n.count(nSetlk, c.fs.SetLk(cancel, in))
}

func (c *counting) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return c.n.count(nSetlkw, c.fs.SetLkw(cancel, in))
}

func (c *counting) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.n.add(nRelease)
	c.fs.Release(cancel, in)
}

func (c *counting) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return c.n.count(nOpendir, c.fs.OpenDir(cancel, in, out))
}

func (c *counting) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return c.n.count(nReaddir, c.fs.ReadDir(cancel, in, out))
}

func (c *counting) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return c.n.count(nReaddirplus, c.fs.ReadDirPlus(cancel, in, out))
}

func (c *counting) ReleaseDir(in *fuse.ReleaseIn) {
	c.n.add(nReleasedir)
	c.fs.ReleaseDir(in)
}

func (c *counting) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return c.n.count(nFsyncdir, c.fs.FsyncDir(cancel, in))
}

func (c *counting) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	return c.n.count(nStatfs, c.fs.StatFs(cancel, h, out))
}

func (c *counting) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	n, st := c.fs.GetXAttr(cancel, h, attr, dest)
	return n, c.n.count(nGetxattr, st)
}

func (c *counting) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	n, st := c.fs.ListXAttr(cancel, h, dest)
	return n, c.n.count(nListxattr, st)
}

func (c *counting) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	return c.n.count(nSetxattr, c.fs.SetXAttr(cancel, in, attr, data))
}

func (c *counting) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	return c.n.count(nRemovexattr, c.fs.RemoveXAttr(cancel, h, attr))
}
