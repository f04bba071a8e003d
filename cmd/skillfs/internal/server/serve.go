package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Listeners are where the API listens: the Unix socket, and optionally a
// loopback TCP address behind a bearer token.
type Listeners struct {
	Socket  string // the socket's path, created 0600
	TCPAddr string // "" for none; port 0 picks one
	Token   string // the bearer token of the TCP listener
	Limits
	// SoftFDLimit is the open file limit the connection caps are fitted
	// into (fitConns).
	SoftFDLimit uint64
}

// Servers are the API's servers on its listeners.
type Servers struct {
	log     *slog.Logger
	sock    string
	tcpAddr string
	caps    connCaps
	streams int // the stream cap asked for (Limits.MaxStreams)
	unix    *http.Server
	tcp     *http.Server
	wg      sync.WaitGroup
}

// Listen serves the API on the socket (created 0600) and, when asked, on
// loopback TCP behind the token, each with its caps of connections and
// event streams, fitted into the open file limit.
func (a *API) Listen(ls Listeners) (*Servers, error) {
	ls.Limits.Defaults()
	s := &Servers{log: a.Log, sock: ls.Socket, streams: ls.MaxStreams}
	tcpConns := 0
	if ls.TCPAddr != "" {
		tcpConns = ls.MaxConns
	}
	s.caps = fitConns(ls.SoftFDLimit, ls.FDReserve, ls.MaxSocketConns, tcpConns)
	if s.caps.lowered {
		a.Log.Warn("the open file limit leaves the API fewer connections than asked for: raise the limit (LimitNOFILE=) or lower --fd-reserve",
			"open_file_limit", ls.SoftFDLimit, "fd_reserve", ls.FDReserve, "socket_conns", s.caps.socket, "tcp_conns", s.caps.tcp,
			"asked_socket", ls.MaxSocketConns, "asked_tcp", tcpConns)
	}
	os.Remove(s.sock)
	old := unix.Umask(0o177) // the socket is created 0600, never wider even for a moment
	ln, err := net.Listen("unix", s.sock)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %q: %w", s.sock, err)
	}
	s.unix = apiServer(a.Handler(""), ls.Limits)
	s.serve(s.unix, a.capped(s.unix, ln, "socket", s.caps.socket, ls.MaxStreams))
	if ls.TCPAddr == "" {
		return s, nil
	}
	tl, err := net.Listen("tcp", ls.TCPAddr)
	if err == nil {
		if addr, ok := tl.Addr().(*net.TCPAddr); !ok || !addr.IP.IsLoopback() {
			tl.Close()
			err = fmt.Errorf("only loopback addresses are allowed")
		}
	}
	if err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("listen on %s: %w", ls.TCPAddr, err)
	}
	s.tcpAddr = tl.Addr().String() // the port chosen when asked for port 0
	s.tcp = apiServer(a.Handler(ls.Token), ls.Limits)
	s.serve(s.tcp, a.capped(s.tcp, tl, "tcp", s.caps.tcp, ls.MaxStreams))
	return s, nil
}

// capped puts listener l of s behind its caps and keeps its limits for the
// metrics.
func (a *API) capped(s *http.Server, l net.Listener, name string, conns, streams int) net.Listener {
	lim, capped := serveCapped(s, l, name, conns, streamsFor(conns, streams))
	a.Metrics.addListener(lim)
	return capped
}

func (s *Servers) serve(srv *http.Server, l net.Listener) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("api server", "err", err)
		}
	}()
}

// TCPAddr is the address the TCP listener listens on, "" for none.
func (s *Servers) TCPAddr() string { return s.tcpAddr }

// Socket is the socket's path.
func (s *Servers) Socket() string { return s.sock }

// Caps are the connection and stream caps of the socket and the TCP
// listener (0 for none), as fitted into the open file limit.
func (s *Servers) Caps() (socketConns, socketStreams, tcpConns, tcpStreams int) {
	return s.caps.socket, streamsFor(s.caps.socket, s.streams), s.caps.tcp, streamsFor(s.caps.tcp, s.streams)
}

// Shutdown stops both servers, waits for them and removes the socket.
func (s *Servers) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range []*http.Server{s.unix, s.tcp} {
		if srv != nil {
			srv.Shutdown(ctx)
		}
	}
	s.wg.Wait()
	os.Remove(s.sock)
}
