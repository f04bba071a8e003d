package fusetest

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// The kernel's encoding of a FUSE file handle (fuse_encode_fh):
// FILEID_INO64_GEN, three 32-bit words: the node id's high and low halves
// and the generation.
const (
	fileidIno64Gen = 0x81
	atHandleFID    = 0x200 // AT_HANDLE_FID: a handle that names a file where none can be decoded
)

// Handle builds the file handle the kernel gives a FUSE node: what a
// process guessing handles for open_by_handle_at would try.
func Handle(nodeid uint64, gen uint32) unix.FileHandle {
	b := make([]byte, 12)
	binary.NativeEndian.PutUint32(b[0:], uint32(nodeid>>32))
	binary.NativeEndian.PutUint32(b[4:], uint32(nodeid))
	binary.NativeEndian.PutUint32(b[8:], gen)
	return unix.NewFileHandle(fileidIno64Gen, b)
}

// HandleOf asks the kernel for the handle of a file of a FUSE mount: one
// open_by_handle_at may decode where the mount lets handles be decoded,
// else one that only names the file (AT_HANDLE_FID, Linux 6.5 and later).
// It returns the node id and generation the handle holds.
func HandleOf(tb testing.TB, path string) (nodeid uint64, gen uint32, decodable bool) {
	tb.Helper()
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, path, 0)
	decodable = err == nil
	if errors.Is(err, unix.EOPNOTSUPP) {
		h, _, err = unix.NameToHandleAt(unix.AT_FDCWD, path, atHandleFID)
	}
	if err != nil {
		tb.Fatalf("name_to_handle_at %s: %v", path, err)
	}
	b := h.Bytes()
	if h.Type() != fileidIno64Gen || len(b) != 12 {
		tb.Fatalf("handle of %s: type %#x, %d bytes, want a FUSE handle", path, h.Type(), len(b))
	}
	nodeid = uint64(binary.NativeEndian.Uint32(b[0:]))<<32 | uint64(binary.NativeEndian.Uint32(b[4:]))
	return nodeid, binary.NativeEndian.Uint32(b[8:]), decodable
}
