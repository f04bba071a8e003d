package fs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A keeper for tests: the test process holds the descriptors, a serving
// child process talks to it over a SOCK_SEQPACKET socketpair, descriptors
// passing with SCM_RIGHTS. One message a request ("take NAME", "put NAME"
// with a descriptor, "drop NAME"), one an answer ("ok" with a descriptor
// for take, "none", "err TEXT").

// testKeeper holds descriptors by name.
type testKeeper struct {
	mu  sync.Mutex
	fds map[string]*os.File
}

func newTestKeeper() *testKeeper { return &testKeeper{fds: make(map[string]*os.File)} }

// has reports whether a descriptor is kept under name.
func (k *testKeeper) has(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fds[name] != nil
}

// close drops every descriptor kept.
func (k *testKeeper) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for name, f := range k.fds {
		f.Close()
		delete(k.fds, name)
	}
}

// connect returns the child's end of a new connection to the keeper,
// served until the child closes it.
func (k *testKeeper) connect() (*os.File, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	go k.serve(pair[0])
	return os.NewFile(uintptr(pair[1]), "keeper"), nil
}

func (k *testKeeper) serve(conn int) {
	defer unix.Close(conn)
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(conn, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil || n == 0 {
			return
		}
		fds, _ := receivedFds(oob[:oobn])
		op, name, _ := strings.Cut(string(buf[:n]), " ")
		answer, send := k.handle(op, name, fds)
		var rights []byte
		if send != nil {
			rights = unix.UnixRights(int(send.Fd()))
		}
		err = unix.Sendmsg(conn, []byte(answer), rights, nil, 0)
		if send != nil {
			send.Close()
		}
		if err != nil {
			return
		}
	}
}

func (k *testKeeper) handle(op, name string, fds []int) (string, *os.File) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch op {
	case "take":
		f := k.fds[name]
		if f == nil {
			return "none", nil
		}
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return "err " + err.Error(), nil
		}
		return "ok", os.NewFile(uintptr(fd), name)
	case "put":
		if len(fds) != 1 {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return "err put takes one descriptor", nil
		}
		if old := k.fds[name]; old != nil {
			old.Close()
		}
		k.fds[name] = os.NewFile(uintptr(fds[0]), name)
		return "ok", nil
	case "drop":
		if old := k.fds[name]; old != nil {
			old.Close()
			delete(k.fds, name)
		}
		return "ok", nil
	}
	return "err unknown request " + op, nil
}

func receivedFds(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, got...)
		}
	}
	return fds, nil
}

// keeperClient is the Keeper a child process mounts with.
type keeperClient struct {
	mu   sync.Mutex
	conn int
}

var _ Keeper = (*keeperClient)(nil)

func (c *keeperClient) call(op, name string, f *os.File) (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rights []byte
	if f != nil {
		rights = unix.UnixRights(int(f.Fd()))
	}
	if err := unix.Sendmsg(c.conn, []byte(op+" "+name), rights, nil, 0); err != nil {
		return nil, fmt.Errorf("keeper: %s: %w", op, err)
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(c.conn, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("keeper: %s: %w", op, err)
	}
	fds, _ := receivedFds(oob[:oobn])
	answer := string(buf[:n])
	switch {
	case answer == "ok" && len(fds) == 1:
		return os.NewFile(uintptr(fds[0]), name), nil
	case answer == "ok" || answer == "none":
		return nil, nil
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	return nil, errors.New("keeper: " + op + ": " + answer)
}

func (c *keeperClient) Take(name string) (*os.File, error) { return c.call("take", name, nil) }

func (c *keeperClient) Put(name string, f *os.File) error {
	_, err := c.call("put", name, f)
	return err
}

func (c *keeperClient) Drop(name string) error {
	_, err := c.call("drop", name, nil)
	return err
}
