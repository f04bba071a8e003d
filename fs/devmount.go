package fs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A mount with a keeper is made here rather than by go-fuse, so that the
// connection's INIT exchange can be kept for the server that takes the
// connection back (go-fuse reads INIT itself and cannot be handed a
// connection whose INIT is done):
//
//   - the mount(2) call is go-fuse's mountDirect one, on a /dev/fuse
//     descriptor of our own;
//   - we read the kernel's INIT request from it, and hand go-fuse a
//     socketpair, named by its magic "/dev/fd/N" mountpoint, holding that
//     request: go-fuse answers INIT on the socketpair;
//   - its answer goes to the kernel, and the real descriptor is put in
//     place of the socketpair's end under go-fuse's descriptor number
//     (dup3), so from then on go-fuse serves the real connection.
//
// A server taking the connection back replays the saved request the same
// way, checks that go-fuse answers as it did (what the kernel negotiated
// then holds for it), and puts the kept descriptor in place. go-fuse never
// knows the real mountpoint: its Unmount must never be called on these
// mounts (Server.Unmount unmounts s.mnt itself).

// initBufSize is what a read of the kernel's INIT request is given: the
// kernel refuses reads into buffers smaller than a whole request could be.
const initBufSize = maxRequest + 64<<10

// maxInitMessage bounds a saved INIT request or reply.
const maxInitMessage = 4096

// devMount opens /dev/fuse and mounts it at mnt as go-fuse's direct mount
// would, with mo's options. It returns the descriptor, blocking (so that
// os.NewFile never hands it to the poller) and close-on-exec.
func devMount(mnt string, mo *fuse.MountOptions) (int, error) {
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/fuse: %w", err)
	}
	opts := []string{
		"fd=" + strconv.Itoa(fd),
		"rootmode=40000",
		"user_id=" + strconv.Itoa(os.Geteuid()),
		"group_id=" + strconv.Itoa(os.Getegid()),
		"max_read=" + strconv.Itoa(mo.MaxWrite),
	}
	opts = append(opts, mo.Options...)
	if mo.AllowOther {
		opts = append(opts, "allow_other")
	}
	if err := unix.Mount(mo.FsName, mnt, "fuse."+mo.Name, mo.DirectMountFlags, strings.Join(opts, ",")); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("mount: %w", err)
	}
	return fd, nil
}

// kernelMaxWrite is the largest request the kernel takes (go-fuse caps
// MaxWrite to it, and max_read must say the same).
func kernelMaxWrite() int {
	lim := 256
	if b, err := os.ReadFile("/proc/sys/fs/fuse/max_pages_limit"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			lim = n
		}
	}
	return lim * os.Getpagesize()
}

// readInit reads the kernel's INIT request from a fresh connection.
func readInit(fd int) ([]byte, error) {
	buf := make([]byte, initBufSize)
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read INIT: %w", err)
		}
		if err := checkInitRequest(buf[:n]); err != nil {
			return nil, err
		}
		return append([]byte(nil), buf[:n]...), nil
	}
}

// inHeaderSize and outHeaderSize are fuse_in_header's and
// fuse_out_header's sizes.
const (
	inHeaderSize  = 40
	outHeaderSize = 16
	opInit        = 26
)

// checkInitRequest checks that b is an INIT request as the kernel sends one.
func checkInitRequest(b []byte) error {
	if len(b) < inHeaderSize+16 || len(b) > maxInitMessage {
		return fmt.Errorf("INIT request of %d bytes: %w", len(b), errBadInit)
	}
	if l := le32(b[0:]); int(l) != len(b) {
		return fmt.Errorf("INIT request says %d bytes, has %d: %w", l, len(b), errBadInit)
	}
	if op := le32(b[4:]); op != opInit {
		return fmt.Errorf("first request has opcode %d, not INIT: %w", op, errBadInit)
	}
	return nil
}

// checkInitReply checks that b is an answer to INIT: its length and no error.
func checkInitReply(b []byte) error {
	if len(b) < outHeaderSize+24 || len(b) > maxInitMessage {
		return fmt.Errorf("INIT reply of %d bytes: %w", len(b), errBadInit)
	}
	if l := le32(b[0:]); int(l) != len(b) {
		return fmt.Errorf("INIT reply says %d bytes, has %d: %w", l, len(b), errBadInit)
	}
	if e := int32(le32(b[4:])); e != 0 {
		return fmt.Errorf("INIT answered with error %d: %w", e, errBadInit)
	}
	return nil
}

var errBadInit = errors.New("not a FUSE INIT exchange")

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// initFlags returns the 64 capability flags of an INIT request or reply
// (flags and, from 7.36, flags2).
func initFlags(b []byte, reply bool) uint64 {
	at, at2 := inHeaderSize+12, inHeaderSize+16 // fuse_init_in: major minor max_readahead flags flags2
	if reply {
		at, at2 = outHeaderSize+12, outHeaderSize+32 // fuse_init_out: ... flags (12), ..., flags2 (32)
	}
	f := uint64(le32(b[at:]))
	if len(b) >= at2+4 {
		f |= uint64(le32(b[at2:])) << 32
	}
	return f
}

// serveInit has go-fuse answer INIT request req: it returns the server,
// reading on a socketpair end numbered sp, and the reply it wrote. The
// caller puts the real connection in place of sp (attach) before serving.
func serveInit(fs fuse.RawFileSystem, req []byte, mo *fuse.MountOptions) (*fuse.Server, int, []byte, error) {
	// Blocking, so that os.NewFile (in go-fuse) does not register it with
	// the poller: the descriptor number later names /dev/fuse.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, nil, fmt.Errorf("socketpair: %w", err)
	}
	defer unix.Close(pair[0])
	if _, err := unix.Write(pair[0], req); err != nil {
		unix.Close(pair[1])
		return nil, -1, nil, fmt.Errorf("hand INIT to the server: %w", err)
	}
	m := *mo
	m.DirectMount, m.DirectMountStrict = false, false
	srv, err := fuse.NewServer(fs, "/dev/fd/"+strconv.Itoa(pair[1]), &m)
	if err != nil {
		return nil, -1, nil, fmt.Errorf("answer INIT: %w", err) // go-fuse closed pair[1]
	}
	buf := make([]byte, maxInitMessage)
	n, err := unix.Read(pair[0], buf)
	if err != nil {
		return nil, -1, nil, fmt.Errorf("read the INIT reply: %w", err)
	}
	reply := buf[:n]
	if err := checkInitReply(reply); err != nil {
		return nil, -1, nil, err
	}
	return srv, pair[1], reply, nil
}

// attach puts connection fd in place of descriptor sp, go-fuse's, keeping
// fd (the caller closes it). The connection's reads must block.
func attach(fd, sp int) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil && fl&unix.O_NONBLOCK != 0 {
		// Left by a server that detached (see Detach).
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	if err != nil {
		return fmt.Errorf("make the connection blocking: %w", err)
	}
	if err := unix.Dup3(fd, sp, unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("attach the connection: %w", err)
	}
	return nil
}

// notifyResend asks the kernel to queue again the requests a server read
// but did not answer (FUSE_NOTIFY_RESEND, Linux 6.9 and later): a bare
// notification header (len 16, error FUSE_NOTIFY_RESEND, unique 0). They come back with FUSE_UNIQUE_RESEND set in their
// unique, which go-fuse echoes in its answers as the kernel wants.
func notifyResend(fd int) error {
	var hdr [outHeaderSize]byte
	hdr[0] = outHeaderSize
	hdr[4] = byte(-fuse.NOTIFY_RESEND) // the notification's code, in the error field (go-fuse's codes are negated)
	_, err := unix.Write(fd, hdr[:])
	return err
}

// mountDev returns the device (major:minor, as mountinfo shows it) of the
// topmost mount at path, from mountinfo alone: nothing asks the mount.
func mountDev(path string) (string, bool) {
	at, err := mountsAt(path)
	if err != nil || len(at) == 0 {
		return "", false
	}
	return at[len(at)-1].Dev, true
}

// isFuseDev reports whether fd is a /dev/fuse descriptor.
func isFuseDev(fd int) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	return st.Mode&syscall.S_IFMT == syscall.S_IFCHR && unix.Major(st.Rdev) == 10 && unix.Minor(st.Rdev) == 229
}
