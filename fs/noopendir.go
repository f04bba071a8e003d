package fs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// noOpendir serves directories without OPENDIR and RELEASEDIR requests.
// Its OpenDir answers ENOSYS, so the kernel opens directories without
// asking (its no-opendir mode, set for the whole connection) and caches
// their listings; a READDIR then comes without a handle, and noOpendir
// opens the directory inside the daemon for that one request, lists from
// the offset asked and releases it. Views change under a session's
// directory: SetSession drops its cached listing (NotifyContent) whenever
// its skills do.
type noOpendir struct {
	fuse.RawFileSystem
}

func (w *noOpendir) OpenDir(<-chan struct{}, *fuse.OpenIn, *fuse.OpenOut) fuse.Status {
	return fuse.Status(syscall.ENOSYS)
}

func (w *noOpendir) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return w.list(cancel, in, out, w.RawFileSystem.ReadDir)
}

func (w *noOpendir) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return w.list(cancel, in, out, w.RawFileSystem.ReadDirPlus)
}

func (w *noOpendir) ReleaseDir(in *fuse.ReleaseIn) {
	if in.Fh != 0 {
		w.RawFileSystem.ReleaseDir(in)
	}
}

// list answers one READDIR(PLUS) through a handle opened for it.
func (w *noOpendir) list(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList,
	read func(<-chan struct{}, *fuse.ReadIn, *fuse.DirEntryList) fuse.Status) fuse.Status {
	if in.Fh != 0 { // a handle from an OPENDIR answered before (none is)
		return read(cancel, in, out)
	}
	open := fuse.OpenIn{InHeader: in.InHeader, Flags: syscall.O_RDONLY | syscall.O_DIRECTORY}
	var opened fuse.OpenOut
	if st := w.RawFileSystem.OpenDir(cancel, &open, &opened); !st.Ok() {
		return st
	}
	defer w.RawFileSystem.ReleaseDir(&fuse.ReleaseIn{InHeader: in.InHeader, Fh: opened.Fh})
	req := *in
	req.Fh = opened.Fh
	return read(cancel, &req, out)
}
