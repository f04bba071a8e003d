package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The caps of one sandbox's API socket (ServeSession): an agent's tools
// make a few calls at a time and follow an event stream or two, and
// thousands of sandboxes must not take the daemon's descriptors.
const (
	SessionSocketConns   = 16
	SessionSocketStreams = 4
)

// sandboxListener names a session's API socket among the listeners.
const sandboxListener = "sandbox"

// ServeSession serves the API on l, the API socket a bind put into the
// sandbox of session: the socket is that session's credential. Every
// connection's context carries Principal{Role: RoleSession, Session:
// session, Via: ViaSandboxSocket} with the peer's pid and uid (SO_PEERCRED,
// in the daemon's namespaces), which are logged. The connections are capped
// at SessionSocketConns, the event streams at SessionSocketStreams; lim
// gives the timeouts. stop closes the listener and every connection on it
// (the credential is withdrawn) and waits for the server to end.
//
// It serves ConnHandler: the route table of a session credential applies,
// and a request carrying Authorization or X-Skillfs-As is refused (the
// socket is the credential; no other may ride on it).
func (a *API) ServeSession(l net.Listener, session string, lim Limits) (stop func()) {
	lim.Defaults()
	srv := apiServer(a.ConnHandler(), lim)
	_, capped := serveCapped(srv, l, sandboxListener, SessionSocketConns, SessionSocketStreams)
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		p := Principal{Role: RoleSession, Session: session, Via: ViaSandboxSocket}
		cred, err := peerCred(c)
		if err != nil {
			a.Log.Warn("sandbox socket connection: peer unknown", "session", session, "err", err)
		} else {
			p.PeerPID, p.PeerUID = int(cred.Pid), int(cred.Uid)
			a.Log.Info("sandbox socket connection", "session", session, "peer_pid", p.PeerPID, "peer_uid", p.PeerUID,
				"peer_gid", cred.Gid)
		}
		return WithPrincipal(ctx, p)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(capped); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.Log.Error("sandbox socket server", "session", session, "err", err)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			srv.Close()
			<-done
		})
	}
}

// peerCred is the peer of a Unix socket connection (under the caps'
// wrapper), as the kernel recorded it when the peer connected.
func peerCred(c net.Conn) (*unix.Ucred, error) {
	if cc, ok := c.(*capConn); ok {
		c = cc.Conn
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("a %T has no descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}
