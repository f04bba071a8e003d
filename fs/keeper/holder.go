package keeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// maxConns bounds the connections a holder serves at a time; one more
	// is answered an error and closed.
	maxConns = 32
	// idleTimeout closes a connection that sends nothing this long.
	idleTimeout = 30 * time.Second
	// sweepEvery is how often the holder looks for connections that ended.
	sweepEvery = 5 * time.Second
	// oobSize is the control buffer of a received packet: room for a few
	// descriptors, so that a packet carrying more than one is seen as such
	// (and refused) rather than cut to one.
	oobSize = 64
)

// ErrInUse marks a socket another keeper listens on.
var ErrInUse = errors.New("a keeper listens on it already")

// Listen makes the holder's socket at path, mode 0600. A socket file left
// there by a keeper that died is replaced; one a keeper still listens on,
// or anything that is not a socket, is refused.
func Listen(path string) (*net.UnixListener, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("keeper socket %q: not an absolute path", path)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("keeper socket %q: a %v is there, not a socket: remove it or choose another path", path, fi.Mode().Type())
		}
		c, err := net.DialTimeout("unixpacket", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("keeper socket %q: %w", path, ErrInUse)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("keeper socket %q: is a keeper listening? %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("keeper socket %q: remove the socket a dead keeper left: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("keeper socket %q: %w", path, err)
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		// The file bind(2) makes takes the socket's mode: nobody else can
		// connect, not even in the instant before the chmod below.
		var err error
		if cerr := c.Control(func(fd uintptr) { err = unix.Fchmod(int(fd), 0o600) }); cerr != nil {
			return cerr
		}
		return err
	}}
	l, err := lc.Listen(context.Background(), "unixpacket", path)
	if err != nil {
		return nil, fmt.Errorf("keeper socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("keeper socket %q: %w", path, err)
	}
	return l.(*net.UnixListener), nil
}

// holder is what Serve keeps.
type holder struct {
	log  *slog.Logger
	uid  uint32
	mu   sync.Mutex
	kept map[string]*os.File
}

// Serve keeps descriptors for the peers of l until ctx ends, then closes
// l and every descriptor it keeps: a connection no one else holds then
// ends. It returns nil when ctx ended, else why it could not go on
// accepting.
func Serve(ctx context.Context, l *net.UnixListener, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &holder{log: log, uid: uint32(os.Geteuid()), kept: map[string]*os.File{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var conns sync.WaitGroup
	var mu sync.Mutex
	open := map[*net.UnixConn]bool{}
	conns.Go(func() {
		<-ctx.Done()
		l.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
	})
	conns.Go(func() { every(ctx, sweepEvery, h.sweep) })
	defer func() {
		cancel()
		conns.Wait()
		h.closeAll()
	}()
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return fmt.Errorf("keeper: accept: %w", err)
		}
		mu.Lock()
		full := len(open) >= maxConns
		if !full {
			open[c] = true
		}
		mu.Unlock()
		if full {
			go func() {
				c.Write(encodeReply(stError, fmt.Appendf(nil, "the keeper serves %d connections already", maxConns)))
				drain(c)
				c.Close()
			}()
			continue
		}
		conns.Go(func() {
			defer func() {
				mu.Lock()
				delete(open, c)
				mu.Unlock()
				c.Close()
			}()
			h.serveConn(c)
		})
	}
}

// every calls fn every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// closeAll closes every descriptor kept.
func (h *holder) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, f := range h.kept {
		f.Close()
		h.log.Info("keeper stopped: descriptor closed", "name", name)
	}
	clear(h.kept)
}

// peerAllowed checks the peer of c: root or the holder's own user.
func (h *holder) peerAllowed(c *net.UnixConn) error {
	cred, err := peerCred(c)
	if err != nil {
		return err
	}
	if cred.Uid != 0 && cred.Uid != h.uid {
		return fmt.Errorf("peer pid %d runs as uid %d: only root and uid %d may use this keeper", cred.Pid, cred.Uid, h.uid)
	}
	return nil
}

// peerCred returns the credentials of c's peer when it connected.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("peer credentials: %w", cerr)
	}
	return cred, nil
}

// serveConn answers the requests of one connection until it ends or sends
// what is not a request.
func (h *holder) serveConn(c *net.UnixConn) {
	if err := h.peerAllowed(c); err != nil {
		h.log.Warn("keeper: connection refused", "err", err)
		c.Write(encodeReply(stError, []byte(err.Error())))
		drain(c)
		return
	}
	buf := make([]byte, maxRequest+1)
	oob := make([]byte, oobSize)
	for {
		c.SetReadDeadline(time.Now().Add(idleTimeout))
		n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || (n == 0 && oobn == 0) {
			return // closed, idle too long, or an empty packet: the end
		}
		fds, ferr := receivedFDs(oob[:oobn])
		var req request
		switch {
		case ferr != nil:
			err = fmt.Errorf("%w: %v", errMalformed, ferr)
		case flags&unix.MSG_TRUNC != 0 || n > maxRequest:
			err = fmt.Errorf("%w: a request of more than %d bytes", errMalformed, maxRequest)
		case flags&unix.MSG_CTRUNC != 0:
			err = fmt.Errorf("%w: more descriptors than a request carries", errMalformed)
		default:
			req, err = parseRequest(buf[:n], len(fds))
		}
		if err != nil {
			closeFDs(fds)
			h.log.Warn("keeper: malformed request: connection closed", "err", err)
			c.Write(encodeReply(stError, []byte(err.Error())))
			return
		}
		out, fd := h.answer(req, fds)
		var rights []byte
		if fd >= 0 {
			rights = unix.UnixRights(fd)
		}
		_, _, err = c.WriteMsgUnix(out, rights, nil)
		if fd >= 0 {
			unix.Close(fd) // the duplicate sent
		}
		if err != nil {
			return
		}
	}
}

// drain reads what a refused peer sent, for a second at most, so that
// closing the connection does not reset it before the peer read why.
func drain(c *net.UnixConn) {
	c.SetReadDeadline(time.Now().Add(time.Second))
	buf, oob := make([]byte, maxRequest+1), make([]byte, oobSize)
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if fds, ferr := receivedFDs(oob[:oobn]); ferr == nil {
			closeFDs(fds)
		}
		if err != nil || (n == 0 && oobn == 0) {
			return
		}
	}
}

// answer carries out one request. A take's descriptor, if any, is
// returned for the reply: a duplicate, to be closed once sent (the holder
// keeps its own).
func (h *holder) answer(req request, fds []int) ([]byte, int) {
	switch req.op {
	case opPut:
		if err := h.put(req.name, fds[0]); err != nil {
			unix.Close(fds[0])
			h.log.Warn("keeper: descriptor refused", "name", req.name, "err", err)
			return encodeReply(stError, []byte(err.Error())), -1
		}
		return encodeReply(stDone, nil), -1
	case opTake:
		fd, err := h.take(req.name)
		if err != nil {
			return encodeReply(stError, []byte(err.Error())), -1
		}
		if fd < 0 {
			return encodeReply(stNone, nil), -1
		}
		return encodeReply(stDone, nil), fd
	case opDrop:
		h.drop(req.name, "dropped")
		return encodeReply(stDone, nil), -1
	default: // opList
		h.sweep()
		var p []byte
		for _, name := range h.names() {
			p = append(append(p, name...), '\n')
		}
		return encodeReply(stList, p), -1
	}
}

// put keeps fd under name, replacing any kept before, if it is a live FUSE
// connection and there is room.
func (h *holder) put(name string, fd int) error {
	if err := checkFUSE(fd); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old, replacing := h.kept[name]
	if !replacing && len(h.kept) >= MaxKept {
		return fmt.Errorf("the keeper keeps %d descriptors already, its most", MaxKept)
	}
	h.kept[name] = os.NewFile(uintptr(fd), name)
	if replacing {
		old.Close()
	}
	h.log.Info("keeper: connection kept", "name", name, "replaced", replacing, "kept", len(h.kept))
	return nil
}

// take returns a duplicate of the descriptor kept under name, -1 for none;
// the holder keeps its own. A connection that ended is dropped instead.
func (h *holder) take(name string) (int, error) {
	h.mu.Lock()
	f := h.kept[name]
	var live, err error
	dup := -1
	if f != nil {
		if live = liveFUSE(int(f.Fd())); live == nil {
			dup, err = unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		}
	}
	h.mu.Unlock()
	switch {
	case f == nil:
		return -1, nil
	case live != nil:
		h.drop(name, "connection ended: dropped")
		return -1, nil
	case err != nil:
		return -1, fmt.Errorf("duplicate the descriptor kept under %q: %w", name, err)
	}
	h.log.Info("keeper: connection handed back", "name", name)
	return dup, nil
}

// drop closes the descriptor kept under name, if any.
func (h *holder) drop(name, why string) {
	h.mu.Lock()
	f := h.kept[name]
	delete(h.kept, name)
	n := len(h.kept)
	h.mu.Unlock()
	if f != nil {
		f.Close()
		h.log.Info("keeper: "+why, "name", name, "kept", n)
	}
}

// names lists what is kept, sorted.
func (h *holder) names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name := range h.kept {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// sweep drops the connections that ended (unmounted, aborted): nobody can
// take them back.
func (h *holder) sweep() {
	h.mu.Lock()
	var ended []string
	for name, f := range h.kept {
		if liveFUSE(int(f.Fd())) != nil {
			ended = append(ended, name)
		}
	}
	h.mu.Unlock()
	for _, name := range ended {
		h.drop(name, "connection ended: dropped")
	}
}

// receivedFDs takes the descriptors out of a packet's control messages.
func receivedFDs(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %v", err)
	}
	var fds []int
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_RIGHTS {
			continue
		}
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			closeFDs(fds)
			return nil, fmt.Errorf("descriptors: %v", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// The FUSE device, as the kernel numbers it.
const (
	fuseMajor = 10
	fuseMinor = 229
)

// checkFUSE says why fd is not a live connection of the FUSE device, if it
// is not: what it is is asked of the kernel, never taken from the peer.
func checkFUSE(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat the descriptor: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != fuseMajor || unix.Minor(st.Rdev) != fuseMinor {
		return fmt.Errorf("the descriptor is not the FUSE device (mode %#o, device %d:%d; want character device %d:%d)",
			st.Mode&unix.S_IFMT, unix.Major(st.Rdev), unix.Minor(st.Rdev), fuseMajor, fuseMinor)
	}
	return liveFUSE(fd)
}

// liveFUSE says whether the FUSE descriptor fd is a connection that has
// not ended: the kernel reports POLLERR for one never mounted, unmounted or
// aborted.
func liveFUSE(fd int) error {
	pfd := []unix.PollFd{{Fd: int32(fd)}}
	for {
		_, err := unix.Poll(pfd, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll the descriptor: %w", err)
		}
		break
	}
	if pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
		return errors.New("the descriptor's FUSE connection has ended, or was never mounted")
	}
	return nil
}
