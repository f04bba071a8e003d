package daemon

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Defaults of the API's connection limits (Options fields left zero).
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultReadTimeout   = 60 * time.Second
	DefaultWriteTimeout  = 60 * time.Second
	DefaultIdleTimeout   = 60 * time.Second
	DefaultMaxConns      = 256
)

// netDefaults fills the connection limits left zero.
func (o *Options) netDefaults() {
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
func apiServer(h http.Handler, opts Options) *http.Server {
	return &http.Server{
		Handler:           withDeadlines(h, opts.ReadTimeout, opts.WriteTimeout),
		ReadHeaderTimeout: opts.HeaderTimeout,
		IdleTimeout:       opts.IdleTimeout,
	}
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
// At the cap it stops accepting: further clients wait in the kernel's
// accept queue (the listen backlog; beyond it the kernel drops their
// handshakes and they retry) until a connection closes, so they cost the
// daemon no descriptor and no goroutine. Waiting rather than closing them
// at once lets a burst of legitimate clients through as soon as the idle
// ones time out (after the header timeout at most, as none can pass the
// token check without the token).
type capListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

// limitListener caps the connections l hands out at n.
func limitListener(l net.Listener, n int) net.Listener {
	return &capListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *capListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &capConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close also ends an Accept waiting for a slot.
func (l *capListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// capConn gives its slot back when closed, once however often it is closed.
type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
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
