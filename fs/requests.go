package fs

import (
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
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

// requestCounts counts the requests of each kind.
type requestCounts [nKinds]atomic.Uint64

func (c *requestCounts) add(i int) { c[i].Add(1) }

// snapshot returns the counts by request name.
func (c *requestCounts) snapshot() map[string]uint64 {
	out := make(map[string]uint64, len(requestNames))
	for i, name := range requestNames {
		out[name] = c[i].Load()
	}
	return out
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
	return c.RawFileSystem.Lookup(cancel, h, name, out)
}

func (c *counting) Forget(nodeid, nlookup uint64) {
	c.n.add(nForget)
	c.RawFileSystem.Forget(nodeid, nlookup)
}

func (c *counting) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.n.add(nGetattr)
	return c.RawFileSystem.GetAttr(cancel, in, out)
}

func (c *counting) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	c.n.add(nStatx)
	return c.RawFileSystem.Statx(cancel, in, out)
}

func (c *counting) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	c.n.add(nAccess)
	return c.RawFileSystem.Access(cancel, in)
}

func (c *counting) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	c.n.add(nReadlink)
	return c.RawFileSystem.Readlink(cancel, h)
}

func (c *counting) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.n.add(nOpen)
	return c.RawFileSystem.Open(cancel, in, out)
}

func (c *counting) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	c.n.add(nRead)
	return c.RawFileSystem.Read(cancel, in, buf)
}

func (c *counting) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	c.n.add(nLseek)
	return c.RawFileSystem.Lseek(cancel, in, out)
}

func (c *counting) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	c.n.add(nFlush)
	return c.RawFileSystem.Flush(cancel, in)
}

func (c *counting) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.n.add(nRelease)
	c.RawFileSystem.Release(cancel, in)
}

func (c *counting) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.n.add(nOpendir)
	return c.RawFileSystem.OpenDir(cancel, in, out)
}

func (c *counting) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.n.add(nReaddir)
	return c.RawFileSystem.ReadDir(cancel, in, out)
}

func (c *counting) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.n.add(nReaddirplus)
	return c.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (c *counting) ReleaseDir(in *fuse.ReleaseIn) {
	c.n.add(nReleasedir)
	c.RawFileSystem.ReleaseDir(in)
}

func (c *counting) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	c.n.add(nStatfs)
	return c.RawFileSystem.StatFs(cancel, h, out)
}

func (c *counting) GetXAttr(<-chan struct{}, *fuse.InHeader, string, []byte) (uint32, fuse.Status) {
	c.n.add(nXattr)
	return 0, fuse.ENOSYS
}

func (c *counting) ListXAttr(<-chan struct{}, *fuse.InHeader, []byte) (uint32, fuse.Status) {
	c.n.add(nXattr)
	return 0, fuse.ENOSYS
}

func (c *counting) SetXAttr(<-chan struct{}, *fuse.SetXAttrIn, string, []byte) fuse.Status {
	c.n.add(nXattr)
	return fuse.ENOSYS
}

func (c *counting) RemoveXAttr(<-chan struct{}, *fuse.InHeader, string) fuse.Status {
	c.n.add(nXattr)
	return fuse.ENOSYS
}
