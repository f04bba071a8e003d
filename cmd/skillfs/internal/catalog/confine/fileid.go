package confine

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// fileID identifies a file independently of the paths that reach it: its
// device and inode. Sources are fenced off the data directory (fence.go)
// and kept inside the import roots (roots.go) by it, as bind targets are.
type fileID struct{ dev, ino uint64 }

// statID is the identity of a file stat'ed as st.
func statID(st *unix.Stat_t) fileID { return fileID{dev: uint64(st.Dev), ino: st.Ino} }

// infoID is the identity of a file stat'ed as fi, if its stat has one.
func infoID(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, true
}
