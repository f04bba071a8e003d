package fs

import (
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The requests the kernel sends that Server.Requests counts, by name.
const (
	ReqLookup      = "LOOKUP"
	ReqForget      = "FORGET"
	ReqGetattr     = "GETATTR"
	ReqStatx       = "STATX"
	ReqAccess      = "ACCESS"
	ReqReadlink    = "READLINK"
	ReqOpen        = "OPEN"
	ReqRead        = "READ"
	ReqLseek       = "LSEEK"
	ReqFlush       = "FLUSH"
	ReqRelease     = "RELEASE"
	ReqOpendir     = "OPENDIR"
	ReqReaddir     = "READDIR"
	ReqReaddirplus = "READDIRPLUS"
	ReqReleasedir  = "RELEASEDIR"
	ReqStatfs      = "STATFS"
	ReqXattr       = "XATTR" // GETXATTR, LISTXATTR, SETXATTR and REMOVEXATTR
)

// Indexes of the counts, in the order of requestNames.
const (
	nLookup = iota
	nForget
	nGetattr
	nStatx
	nAccess
	nReadlink
	nOpen
	nRead
	nLseek
	nFlush
	nRelease
	nOpendir
	nReaddir
	nReaddirplus
	nReleasedir
	nStatfs
	nXattr
	nKinds
)

var requestNames = [nKinds]string{ReqLookup, ReqForget, ReqGetattr, ReqStatx, ReqAccess, ReqReadlink, ReqOpen, ReqRead, ReqLseek, ReqFlush, ReqRelease, ReqOpendir, ReqReaddir, ReqReaddirplus, ReqReleasedir, ReqStatfs, ReqXattr}

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

// counting counts the requests the kernel sends, on their way to the file
// system that answers them. Every other request passes through uncounted;
// most are refused (the mount is read-only) or never sent. It answers the
// extended attribute requests itself, with ENOSYS: no view holds any, and
// the kernel stops asking once told (ls -l asked twice for every entry).
type counting struct {
	fuse.RawFileSystem
	n *requestCounts
}

func (c *counting) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	c.n.add(nLookup)
	return c.n.result(nLookup, c.RawFileSystem.Lookup(cancel, h, name, out))
}

func (c *counting) Forget(nodeid, nlookup uint64) {
	c.n.add(nForget)
	c.RawFileSystem.Forget(nodeid, nlookup)
}

func (c *counting) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.n.add(nGetattr)
	return c.n.result(nGetattr, c.RawFileSystem.GetAttr(cancel, in, out))
}

func (c *counting) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	c.n.add(nStatx)
	return c.n.result(nStatx, c.RawFileSystem.Statx(cancel, in, out))
}

func (c *counting) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	c.n.add(nAccess)
	return c.n.result(nAccess, c.RawFileSystem.Access(cancel, in))
}

func (c *counting) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	c.n.add(nReadlink)
	b, st := c.RawFileSystem.Readlink(cancel, h)
	return b, c.n.result(nReadlink, st)
}

func (c *counting) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.n.add(nOpen)
	return c.n.result(nOpen, c.RawFileSystem.Open(cancel, in, out))
}

func (c *counting) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	c.n.add(nRead)
	res, st := c.RawFileSystem.Read(cancel, in, buf)
	return res, c.n.result(nRead, st)
}

func (c *counting) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	c.n.add(nLseek)
	return c.n.result(nLseek, c.RawFileSystem.Lseek(cancel, in, out))
}

func (c *counting) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	c.n.add(nFlush)
	return c.n.result(nFlush, c.RawFileSystem.Flush(cancel, in))
}

func (c *counting) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.n.add(nRelease)
	c.RawFileSystem.Release(cancel, in)
}

func (c *counting) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.n.add(nOpendir)
	return c.n.result(nOpendir, c.RawFileSystem.OpenDir(cancel, in, out))
}

func (c *counting) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.n.add(nReaddir)
	return c.n.result(nReaddir, c.RawFileSystem.ReadDir(cancel, in, out))
}

func (c *counting) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.n.add(nReaddirplus)
	return c.n.result(nReaddirplus, c.RawFileSystem.ReadDirPlus(cancel, in, out))
}

func (c *counting) ReleaseDir(in *fuse.ReleaseIn) {
	c.n.add(nReleasedir)
	c.RawFileSystem.ReleaseDir(in)
}

func (c *counting) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	c.n.add(nStatfs)
	return c.n.result(nStatfs, c.RawFileSystem.StatFs(cancel, h, out))
}

func (c *counting) GetXAttr(<-chan struct{}, *fuse.InHeader, string, []byte) (uint32, fuse.Status) {
	c.n.add(nXattr)
	return 0, c.n.result(nXattr, fuse.ENOSYS)
}

func (c *counting) ListXAttr(<-chan struct{}, *fuse.InHeader, []byte) (uint32, fuse.Status) {
	c.n.add(nXattr)
	return 0, c.n.result(nXattr, fuse.ENOSYS)
}

func (c *counting) SetXAttr(<-chan struct{}, *fuse.SetXAttrIn, string, []byte) fuse.Status {
	c.n.add(nXattr)
	return c.n.result(nXattr, fuse.ENOSYS)
}

func (c *counting) RemoveXAttr(<-chan struct{}, *fuse.InHeader, string) fuse.Status {
	c.n.add(nXattr)
	return c.n.result(nXattr, fuse.ENOSYS)
}
