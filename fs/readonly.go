package fs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The requests nodeFS refuses whatever they name: a view holds no extended
// attributes and no locks, and nothing may change it.

// No view holds extended attributes: ENOSYS, and the kernel stops asking
// (ls -l asked twice for every entry).
func (f *nodeFS) GetXAttr(<-chan struct{}, *fuse.InHeader, string, []byte) (uint32, fuse.Status) {
	return 0, fuse.ENOSYS
}

func (f *nodeFS) ListXAttr(<-chan struct{}, *fuse.InHeader, []byte) (uint32, fuse.Status) {
	return 0, fuse.ENOSYS
}

func (f *nodeFS) SetXAttr(<-chan struct{}, *fuse.SetXAttrIn, string, []byte) fuse.Status {
	return fuse.ENOSYS
}

func (f *nodeFS) RemoveXAttr(<-chan struct{}, *fuse.InHeader, string) fuse.Status {
	return fuse.ENOSYS
}

// Locks are the kernel's own (no lock capability is offered).
func (f *nodeFS) GetLk(<-chan struct{}, *fuse.LkIn, *fuse.LkOut) fuse.Status { return fuse.ENOSYS }
func (f *nodeFS) SetLk(<-chan struct{}, *fuse.LkIn) fuse.Status              { return fuse.ENOSYS }
func (f *nodeFS) SetLkw(<-chan struct{}, *fuse.LkIn) fuse.Status             { return fuse.ENOSYS }

// Everything below would change the filesystem: EROFS.

const erofs = fuse.Status(syscall.EROFS)

func (f *nodeFS) SetAttr(<-chan struct{}, *fuse.SetAttrIn, *fuse.AttrOut) fuse.Status { return erofs }
func (f *nodeFS) Mknod(<-chan struct{}, *fuse.MknodIn, string, *fuse.EntryOut) fuse.Status {
	return erofs
}
func (f *nodeFS) Mkdir(<-chan struct{}, *fuse.MkdirIn, string, *fuse.EntryOut) fuse.Status {
	return erofs
}
func (f *nodeFS) Unlink(<-chan struct{}, *fuse.InHeader, string) fuse.Status { return erofs }
func (f *nodeFS) Rmdir(<-chan struct{}, *fuse.InHeader, string) fuse.Status  { return erofs }
func (f *nodeFS) Rename(<-chan struct{}, *fuse.RenameIn, string, string) fuse.Status {
	return erofs
}
func (f *nodeFS) Link(<-chan struct{}, *fuse.LinkIn, string, *fuse.EntryOut) fuse.Status {
	return erofs
}
func (f *nodeFS) Symlink(<-chan struct{}, *fuse.InHeader, string, string, *fuse.EntryOut) fuse.Status {
	return erofs
}
func (f *nodeFS) Create(<-chan struct{}, *fuse.CreateIn, string, *fuse.CreateOut) fuse.Status {
	return erofs
}
func (f *nodeFS) Tmpfile(<-chan struct{}, *fuse.CreateIn, *fuse.CreateOut) fuse.Status { return erofs }
func (f *nodeFS) Write(<-chan struct{}, *fuse.WriteIn, []byte) (uint32, fuse.Status) {
	return 0, erofs
}
func (f *nodeFS) Writev(<-chan struct{}, *fuse.WriteIn, [][]byte) (uint32, fuse.Status) {
	return 0, erofs
}
func (f *nodeFS) CopyFileRange(<-chan struct{}, *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	return 0, erofs
}
func (f *nodeFS) Fallocate(<-chan struct{}, *fuse.FallocateIn) fuse.Status { return erofs }
