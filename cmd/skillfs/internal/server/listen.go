package server

import (
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the API's connection limits (Limits fields left zero).
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultReadTimeout   = 60 * time.Second
	DefaultWriteTimeout  = 60 * time.Second
	DefaultIdleTimeout   = 60 * time.Second
	DefaultMaxConns      = 256  // TCP
	DefaultSocketConns   = 1024 // the Unix socket
	DefaultMaxStreams    = 512  // event streams on each listener
	DefaultFDReserve     = 1024 // descriptors the API's connections never take
)

// Limits are the limits of the API's connections, on the socket and the
// TCP listener alike; zero or less picks the Default… constant. The event
// streams are bound by none of the timeouts while their client keeps
// reading.
type Limits struct {
	HeaderTimeout time.Duration // to read a request's header
	ReadTimeout   time.Duration // to read a request's body, from the end of its header
	WriteTimeout  time.Duration // for each write of a response to complete
	IdleTimeout   time.Duration // a kept-alive connection waiting for its next request

	// MaxConns and MaxSocketConns cap the open connections of the TCP
	// listener and of the Unix socket (see capListener), MaxStreams the
	// event streams of each (at most half its connections; one over is
	// answered 503 busy). Both caps are lowered to leave FDReserve
	// descriptors of the open file limit to the mount, the store and the
	// index (fitConns).
	MaxConns       int
	MaxSocketConns int
	MaxStreams     int
	FDReserve      int
}

// Defaults fills the limits left zero.
func (o *Limits) Defaults() {
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = DefaultHeaderTimeout
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxSocketConns <= 0 {
		o.MaxSocketConns = DefaultSocketConns
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.FDReserve <= 0 {
		o.FDReserve = DefaultFDReserve
	}
}

// apiServer is the HTTP server of one API listener.
//
// It sets no http.Server ReadTimeout or WriteTimeout: both run from the
// start of a request to its very end, and an expired read deadline also
// cancels the request's context through the server's background read. That
// would cut the event streams, which live as long as their client, and
// catalog calls that legitimately run long (a git clone for POST
// /v1/drafts). withDeadlines bounds the reading of a request's body and
// each write of its response instead.
//
// Served on a capListener (serveCapped), it tells the listener which of its
// connections wait for a request, so that at the cap an idle one makes room
// for a new client; and its handlers find the listener's limits (its event
// streams) in their requests' context.
func apiServer(h http.Handler, lim Limits) *http.Server {
	return &http.Server{
		Handler:           withDeadlines(h, lim.ReadTimeout, lim.WriteTimeout),
		ReadHeaderTimeout: lim.HeaderTimeout,
		IdleTimeout:       lim.IdleTimeout,
	}
}

// listenerLimits are the limits of one API listener and what they hold.
type listenerLimits struct {
	name    string // "socket" or "tcp", the metrics' listener label
	conns   *capListener
	streams *streamGate
}

// serveCapped has s serve l behind its limits: at most conns connections
// (see capListener) and streams event streams.
func serveCapped(s *http.Server, l net.Listener, name string, conns, streams int) (*listenerLimits, net.Listener) {
	capped := limitListener(l, conns)
	lim := &listenerLimits{name: name, conns: capped, streams: newStreamGate(streams)}
	s.ConnState = capped.track
	s.BaseContext = func(net.Listener) context.Context {
		return context.WithValue(context.Background(), limitsKey{}, lim)
	}
	return lim, capped
}

// limitsKey carries a request's listenerLimits in its context.
type limitsKey struct{}

// limitsOf are the limits of the listener r came in on; nil for a handler
// served otherwise (tests), which no limit binds.
func limitsOf(r *http.Request) *listenerLimits {
	lim, _ := r.Context().Value(limitsKey{}).(*listenerLimits)
	return lim
}

// withDeadlines gives a request's body read timeout to be read to its end,
// and every write of the response write timeout to complete, so a client
// that trickles its body or stops reading the answer is dropped instead of
// holding a connection and a goroutine forever.
func withDeadlines(h http.Handler, read, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body != nil && r.Body != http.NoBody {
			rc.SetReadDeadline(time.Now().Add(read))
			r.Body = &bodyReader{ReadCloser: r.Body, rc: rc}
		}
		dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: write}
		// A deadline from the connection's previous request may have
		// passed; the server writes "100 Continue" before any of ours.
		dw.extend()
		// The server flushes what the handler left buffered after it returns.
		defer dw.extend()
		h.ServeHTTP(dw, r)
	})
}

// bodyReader lifts the read deadline once the body has been read to its
// end: the server then keeps reading the connection in the background to
// notice a client going away, and a deadline left there would cancel a
// handler that runs longer than the read timeout. After any other error
// the deadline stays, so the server's discarding of an unread rest cannot
// block on a slow client either.
type bodyReader struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// deadlineWriter moves the connection's write deadline forward before every
// write, so a long response (an export, an event stream) lives as long as
// its client keeps reading, while a write that stalls fails after timeout.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *deadlineWriter) extend() { w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

// Flush keeps the event streams working through the wrapper.
func (w *deadlineWriter) Flush() {
	w.extend()
	w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// capListener keeps at most a fixed number of accepted connections open.
// At the cap it closes the connection that has waited longest for a
// request (a new one that sent none, or one kept alive after its answer),
// once it has waited minIdle, to make room for the next client: idle
// clients, however many, then cannot keep a new client out, whose request
// is read at once. When every connection is busy (a request being
// answered, an event stream), it stops accepting: further clients wait in
// the kernel's accept queue (the listen backlog; beyond it the kernel drops
// their handshakes and they retry) until a connection closes or goes idle,
// costing the daemon no descriptor and no goroutine. Which connections
// wait for a request, the HTTP server says (track, its ConnState hook).
type capListener struct {
	net.Listener
	max     int
	minIdle time.Duration // see minIdle
	mu      sync.Mutex
	open    int           // slots taken: the connections, and one Accept may be waiting with
	waiting bool          // an Accept waits for a connection with a slot
	idle    list.List     // of *capConn waiting for a request, longest first
	changed chan struct{} // a slot freed or a connection went idle
	done    chan struct{}
	once    sync.Once
	evicted atomic.Int64 // idle connections closed to make room
}

// minIdle is how long a connection must have waited for a request before
// it may be closed to make room: a client whose request is on its way is
// read well within it, even on a loaded machine.
const minIdle = time.Second

// limitListener caps the connections l hands out at n.
func limitListener(l net.Listener, n int) *capListener {
	return &capListener{Listener: l, max: n, minIdle: minIdle, changed: make(chan struct{}, 1), done: make(chan struct{})}
}

// Accept takes a slot (making one from an idle connection if need be),
// then waits for a connection.
func (l *capListener) Accept() (net.Conn, error) {
	if err := l.takeSlot(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	l.mu.Lock()
	l.waiting = false
	l.mu.Unlock()
	if err != nil {
		l.release()
		return nil, err
	}
	return &capConn{Conn: c, l: l}, nil
}

// takeSlot waits until a connection may be accepted: a slot is free, or
// the connection idle the longest has been idle for l.minIdle and is closed.
func (l *capListener) takeSlot() error {
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.waiting = true
			l.mu.Unlock()
			return nil
		}
		var victim *capConn
		wait := time.Duration(-1) // nothing idle: wait for a change
		if front := l.idle.Front(); front != nil {
			c := front.Value.(*capConn)
			if wait = time.Until(c.idleSince.Add(l.minIdle)); wait <= 0 {
				l.idle.Remove(front)
				c.elem, victim = nil, c
			}
		}
		l.mu.Unlock()
		if victim != nil {
			victim.Close() // gives its slot back
			l.evicted.Add(1)
			continue
		}
		if err := l.waitChange(wait); err != nil {
			return err
		}
	}
}

// waitChange waits for a slot to free or a connection to go idle, at most
// wait (less than 0: as long as it takes), or for the listener to close.
func (l *capListener) waitChange(wait time.Duration) error {
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-l.changed:
	case <-timer:
	case <-l.done:
		return net.ErrClosed
	}
	return nil
}

// release gives a slot back.
func (l *capListener) release() {
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
	l.signal()
}

func (l *capListener) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// track is the server's ConnState hook: a new connection, or one kept alive
// after its answer, waits for a request; any other state does not.
func (l *capListener) track(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*capConn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew, http.StateIdle:
		if c.elem == nil && !c.closed {
			c.idleSince = time.Now()
			c.elem = l.idle.PushBack(c)
			l.signal()
		}
	default:
		if c.elem != nil {
			l.idle.Remove(c.elem)
			c.elem = nil
		}
	}
}

// Open is how many connections are open now.
func (l *capListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting {
		return l.open - 1
	}
	return l.open
}

// Close also ends an Accept waiting for a slot.
func (l *capListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// capConn gives its slot back when closed, once however often it is closed.
type capConn struct {
	net.Conn
	l    *capListener
	once sync.Once
	// Guarded by l.mu: its place among the idle connections (nil when
	// not idle), since when it is idle, and whether it is closed.
	elem      *list.Element
	idleSince time.Time
	closed    bool
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.elem != nil {
			c.l.idle.Remove(c.elem)
			c.elem = nil
		}
		c.closed = true
		c.l.mu.Unlock()
		c.l.release()
	})
	return err
}

// CloseWrite passes the half-close through: net/http sends it before
// closing a connection it answered with "Connection: close", so the client
// reads the answer instead of a reset.
func (c *capConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
