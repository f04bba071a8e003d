package keeper

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// callTimeout bounds one exchange with the holder, dial included.
const callTimeout = 5 * time.Second

// Client is the keeper as a daemon sees it (an fs.Keeper): each call dials
// the holder's socket. It remembers the names of the connections it was
// given (Put) or handed back (Take) and not dropped since: the connections
// this process serves. Watch notices a holder that lost one (it was
// restarted) and has it given again, so that a keeper's restart while the
// daemon runs costs nothing.
type Client struct {
	path   string
	mu     sync.Mutex // guards served
	served map[string]bool
}

// Dial returns the client of the holder listening at path. It does not
// connect: every call does (Ping checks that the holder answers).
func Dial(path string) *Client { return &Client{path: path, served: map[string]bool{}} }

// Path is the holder's socket.
func (c *Client) Path() string { return c.path }

// Ping checks that the holder answers, and is the holder (root or this
// process's user).
func (c *Client) Ping() error {
	_, err := c.Kept()
	return err
}

// Kept lists the names the holder keeps descriptors under.
func (c *Client) Kept() ([]string, error) {
	r, _, err := c.call(opList, "", nil)
	if err != nil {
		return nil, err
	}
	if r.status != stList {
		return nil, fmt.Errorf("keeper %s: a list answered %q", c.path, r.status)
	}
	return parseNames(r.payload)
}

// Take returns a duplicate of the descriptor the holder keeps under name,
// nil when it keeps none.
func (c *Client) Take(name string) (*os.File, error) {
	r, f, err := c.call(opTake, name, nil)
	if err != nil {
		return nil, err
	}
	switch r.status {
	case stNone:
		return nil, nil
	case stDone:
		if f == nil {
			return nil, fmt.Errorf("keeper %s: a take of %q answered without a descriptor", c.path, name)
		}
		c.serve(name, true)
		return f, nil
	}
	return nil, fmt.Errorf("keeper %s: a take of %q answered %q", c.path, name, r.status)
}

// Put has the holder keep a duplicate of f under name, replacing any kept
// before.
func (c *Client) Put(name string, f *os.File) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("keeper: %w", err)
	}
	fd, err := rawFD(f)
	if err != nil {
		return err
	}
	c.serve(name, true)
	r, _, err := c.call(opPut, name, unix.UnixRights(fd))
	if err != nil {
		return err
	}
	if r.status != stDone {
		return fmt.Errorf("keeper %s: a put of %q answered %q", c.path, name, r.status)
	}
	return nil
}

// Drop has the holder close the descriptor it keeps under name, if any.
func (c *Client) Drop(name string) error {
	c.serve(name, false)
	r, _, err := c.call(opDrop, name, nil)
	if err != nil {
		return err
	}
	if r.status != stDone {
		return fmt.Errorf("keeper %s: a drop of %q answered %q", c.path, name, r.status)
	}
	return nil
}

// serve records that this process serves the connection name (or no
// longer does).
func (c *Client) serve(name string, yes bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if yes {
		c.served[name] = true
	} else {
		delete(c.served, name)
	}
}

// lost lists the connections this process serves that the holder does not
// keep; an error when it does not answer.
func (c *Client) lost() ([]string, error) {
	c.mu.Lock()
	served := slices.Sorted(maps.Keys(c.served))
	c.mu.Unlock()
	if len(served) == 0 {
		return nil, nil
	}
	kept, err := c.Kept()
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, name := range served {
		if !slices.Contains(kept, name) {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// Holds says whether the holder keeps every connection this process
// serves through it (nil), or why not: a crash of this process would then
// end those it does not keep.
func (c *Client) Holds() error {
	c.mu.Lock()
	none := len(c.served) == 0
	c.mu.Unlock()
	if none {
		return fmt.Errorf("keeper %s: no connection was given to it", c.path)
	}
	missing, err := c.lost()
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("keeper %s does not hold %q (yet: it is given again within a second of answering)", c.path, missing)
	}
	return nil
}

// Watch looks every interval, until ctx ends, whether the holder still
// keeps every connection this process serves, and when it lost one (it
// was restarted) calls rekeep, which is to Put them again
// (fs.Server.Rekeep): a keeper restarted while the daemon runs holds them
// again within about interval. What it finds is logged once per change
// (unreachable, given again).
func (c *Client) Watch(ctx context.Context, interval time.Duration, log *slog.Logger, rekeep func() error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	told := ""
	every(ctx, interval, func() {
		msg := ""
		missing, err := c.lost()
		if err == nil && len(missing) > 0 {
			if err = rekeep(); err == nil {
				log.Info("connection given again to a keeper that had lost it", "names", missing, "socket", c.path)
			}
		}
		if err != nil {
			msg = err.Error()
		}
		if msg != told && msg != "" {
			log.Warn("keeper unreachable: a crash of the daemon now ends its mount", "socket", c.path, "err", msg)
		} else if msg == "" && told != "" {
			log.Info("keeper answers again", "socket", c.path)
		}
		told = msg
	})
}

// call makes one exchange: a request, with rights (a descriptor) for a
// put, and its reply, with the descriptor a take gets.
func (c *Client) call(op byte, name string, rights []byte) (reply, *os.File, error) {
	req, err := encodeRequest(op, name)
	if err != nil {
		return reply{}, nil, fmt.Errorf("keeper: %w", err)
	}
	d := net.Dialer{Timeout: callTimeout}
	nc, err := d.Dial("unixpacket", c.path)
	if err != nil {
		return reply{}, nil, fmt.Errorf("keeper %s does not answer (is `skillfs keeper --socket %s` running?): %w", c.path, c.path, err)
	}
	conn := nc.(*net.UnixConn)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(callTimeout))
	cred, err := peerCred(conn)
	if err != nil {
		return reply{}, nil, fmt.Errorf("keeper %s: %w", c.path, err)
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Geteuid() {
		return reply{}, nil, fmt.Errorf("keeper %s: the process listening runs as uid %d, neither root nor this process's uid %d", c.path, cred.Uid, os.Geteuid())
	}
	_, _, sendErr := conn.WriteMsgUnix(req, rights, nil)
	// A holder that refused the connection said why before closing it:
	// the reply is read even when the send failed.
	buf := make([]byte, maxReply+1)
	oob := make([]byte, oobSize)
	n, oobn, flags, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		if sendErr != nil {
			return reply{}, nil, fmt.Errorf("keeper %s: send: %w", c.path, sendErr)
		}
		return reply{}, nil, fmt.Errorf("keeper %s: receive: %w", c.path, err)
	}
	fds, err := receivedFDs(oob[:oobn])
	if err != nil {
		return reply{}, nil, fmt.Errorf("keeper %s: %w", c.path, err)
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		closeFDs(fds)
		return reply{}, nil, fmt.Errorf("keeper %s: %w: a reply larger than %d bytes, or with more descriptors than one", c.path, errMalformed, maxReply)
	}
	r, err := parseReply(buf[:n], len(fds))
	if err != nil {
		closeFDs(fds)
		return reply{}, nil, fmt.Errorf("keeper %s: %w", c.path, err)
	}
	if r.status == stError {
		return reply{}, nil, fmt.Errorf("keeper %s refused: %s", c.path, r.payload)
	}
	var f *os.File
	if len(fds) == 1 {
		if err := checkFUSE(fds[0]); err != nil {
			unix.Close(fds[0])
			return reply{}, nil, fmt.Errorf("keeper %s handed back what is not a live FUSE connection: %w", c.path, err)
		}
		f = os.NewFile(uintptr(fds[0]), "/dev/fuse")
	}
	return r, f, nil
}

// rawFD is f's descriptor, without turning it blocking as Fd would.
func rawFD(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("keeper: the descriptor: %w", err)
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, fmt.Errorf("keeper: the descriptor: %w", err)
	}
	return fd, nil
}
