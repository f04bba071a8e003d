package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/events"
)

// short are limits small enough for tests to wait them out.
var short = Limits{
	HeaderTimeout: 200 * time.Millisecond,
	ReadTimeout:   200 * time.Millisecond,
	WriteTimeout:  200 * time.Millisecond,
	IdleTimeout:   200 * time.Millisecond,
	MaxConns:      8,
}

// hang bounds every wait for something that must happen: far above the
// limits under test, so only a hang reaches it.
const hang = 10 * time.Second

// serveTCP serves h on a loopback port the way Run serves the TCP listener
// and returns its address.
func serveTCP(t *testing.T, h http.Handler, opts Limits) string {
	t.Helper()
	opts.Defaults()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := apiServer(h, opts)
	done := make(chan struct{})
	go func() { srv.Serve(limitListener(l, opts.MaxConns)); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return l.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(hang))
	return c
}

// TestUnauthorisedConnectionIsClosed: a request without the token gets its
// 401 and then the connection ends, instead of idling on as a keep-alive.
func TestUnauthorisedConnectionIsClosed(t *testing.T) {
	a := New(Config{Events: events.NewHub(openDB(t))})
	addr := serveTCP(t, a.Handler("secret"), Limits{}) // default limits: idle 60 s
	c := dial(t, addr)
	fmt.Fprint(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Fatalf("status %d, close %v; want 401 announcing the close", resp.StatusCode, resp.Close)
	}
	start := time.Now()
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the 401 the connection gave %d bytes, %v; want EOF (waited %v)", n, err, time.Since(start))
	}
}

// TestSlowBodyIsDropped: a client with the token that sends its body a byte
// at a time is cut off after the read timeout.
func TestSlowBodyIsDropped(t *testing.T) {
	a := New(Config{Events: events.NewHub(openDB(t))})
	addr := serveTCP(t, a.Handler("secret"), short)
	c := dial(t, addr)
	fmt.Fprint(c, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body after %v: %v", time.Since(start), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
	t.Logf("trickled body refused after %v", time.Since(start).Round(time.Millisecond))
}

// TestLongHandlerKeepsItsContext: a handler that has read its body may run
// far longer than the read timeout without its context being cancelled, as
// an http.Server ReadTimeout would do through its background read.
func TestLongHandlerKeepsItsContext(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(5 * short.ReadTimeout):
		}
		fmt.Fprint(w, "done")
	})
	addr := serveTCP(t, h, short)
	client := &http.Client{Timeout: hang}
	resp, err := client.Post("http://"+addr+"/", "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "done" {
		t.Fatalf("answer %q, %v; want the handler to finish", b, err)
	}
}

// TestStalledReaderIsDropped: a response to a client that stops reading
// fails once a write has stalled for the write timeout.
func TestStalledReaderIsDropped(t *testing.T) {
	failed := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 1 << 14 { // 1 GiB: far beyond any socket buffer
			if _, err := w.Write(chunk); err != nil {
				failed <- err
				return
			}
		}
		failed <- nil
	})
	addr := serveTCP(t, h, short)
	c := dial(t, addr)
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("a gigabyte went to a client that reads nothing")
		}
	case <-time.After(hang):
		t.Fatal("the write to a client that stopped reading never failed")
	}
}

// TestStreamOutlivesTimeouts: an event stream stays open well past every
// timeout and still delivers, on the TCP listener and the Unix socket.
func TestStreamOutlivesTimeouts(t *testing.T) {
	h := events.NewHub(openDB(t))
	a := New(Config{Events: h})
	tcp := serveTCP(t, a.Handler("secret"), short)
	sock := filepath.Join(t.TempDir(), "s.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	opts := short
	opts.Defaults()
	usrv := apiServer(a.Handler(""), opts)
	go usrv.Serve(ul)
	t.Cleanup(func() { usrv.Close() })

	// The socket's requests carry no token: one it does not know would be
	// refused there as on TCP.
	for name, connect := range map[string]func(*testing.T) (net.Conn, string){
		"tcp":  func(t *testing.T) (net.Conn, string) { return dial(t, tcp), "Authorization: Bearer secret\r\n" },
		"unix": func(t *testing.T) (net.Conn, string) { return dialUnix(t, sock), "" },
	} {
		t.Run(name, func(t *testing.T) {
			c, auth := connect(t)
			fmt.Fprint(c, "GET /v1/events HTTP/1.1\r\nHost: x\r\n"+auth+"\r\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("open the stream: %v, %v", resp, err)
			}
			time.Sleep(5 * short.ReadTimeout) // all four timeouts pass
			h.Publish(api.Event{ID: 1, Type: "activated", Session: "s1", Slug: "pdf"})
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("the stream ended after the timeouts: %v", err)
				}
				if strings.HasPrefix(line, "data: ") {
					if !strings.Contains(line, `"pdf"`) {
						t.Fatalf("event %q", line)
					}
					return
				}
			}
		})
	}
}

func dialUnix(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(hang))
	return c
}

// TestCapListener: at the cap, Accept waits until a connection closes;
// closing one twice frees one slot; Close ends a waiting Accept.
func TestCapListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	capped := limitListener(l, 2)
	defer capped.Close()
	accepted := make(chan net.Conn, 10)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := capped.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			accepted <- c
		}
	}()
	for range 4 {
		dial(t, l.Addr().String())
	}
	first, second := <-accepted, <-accepted
	// Two more clients are connected (in the kernel's queue); none may be
	// handed out while two are open. A late handout shows up below too.
	select {
	case c := <-accepted:
		t.Fatalf("a third connection %v was accepted over the cap of 2", c.RemoteAddr())
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	first.Close() // must not free a second slot
	select {
	case <-accepted:
	case <-time.After(hang):
		t.Fatal("closing a connection did not let the next one in")
	}
	select {
	case c := <-accepted:
		t.Fatalf("a double close freed two slots: %v accepted", c.RemoteAddr())
	case <-time.After(200 * time.Millisecond):
	}
	second.Close()
	<-accepted
	capped.Close() // the accept loop is now waiting for a slot
	select {
	case err := <-acceptErr:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(hang):
		t.Fatal("Close did not end an Accept waiting for a slot")
	}
}

// serveUnixCapped serves h on a new Unix socket the way Run serves its
// listeners, behind caps of conns connections and streams event streams,
// and returns the socket's path and the listener's limits.
func serveUnixCapped(t *testing.T, h http.Handler, opts Limits, conns, streams int) (string, *listenerLimits) {
	t.Helper()
	opts.Defaults()
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := apiServer(h, opts)
	lim, capped := serveCapped(srv, l, "socket", conns, streams)
	done := make(chan struct{})
	go func() { srv.Serve(capped); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return sock, lim
}

// get sends one request on c and reads its answer.
func get(t *testing.T, c net.Conn, path string) *http.Response {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// TestIdleConnectionsMakeRoom: at the cap, a new client is served: the
// connection that waited longest for a request (one that never sent any,
// or one kept alive after its answer) is closed to make room, and the
// listener never holds more than its cap.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	a := New(Config{Events: events.NewHub(openDB(t))})
	const cap = 4
	sock, lim := serveUnixCapped(t, a.Handler(""), Limits{}, cap, 2)
	lim.conns.mu.Lock()
	lim.conns.minIdle = 50 * time.Millisecond // for the test to wait out
	lim.conns.mu.Unlock()
	kept := dialUnix(t, sock)
	resp := get(t, kept, "/v1/openapi.json")
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d, %v", resp.StatusCode, err)
	}
	var idle []net.Conn
	for range cap - 1 {
		idle = append(idle, dialUnix(t, sock))
	}
	waitUntil(t, "every connection accepted", func() bool { return lim.conns.Open() == cap })
	for range 3 * cap {
		c := dialUnix(t, sock)
		resp := get(t, c, "/v1/openapi.json")
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a new client at the cap: %d", resp.StatusCode)
		}
		if n := lim.conns.Open(); n > cap {
			t.Fatalf("%d connections open, over the cap of %d", n, cap)
		}
	}
	// The oldest went first: the kept-alive one and the silent ones are
	// closed (EOF), the daemon counts what it closed.
	for i, c := range append([]net.Conn{kept}, idle...) {
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("idle connection %d: read %d bytes, %v; want EOF", i, n, err)
		}
	}
	if n := lim.conns.evicted.Load(); n < cap {
		t.Errorf("%d idle connections closed to make room, want at least %d", n, cap)
	}
}

// TestBusyConnectionsAreKept: connections busy with an answer (event
// streams here) are never closed to make room: at the cap a new client
// waits in the kernel until one of them closes.
func TestBusyConnectionsAreKept(t *testing.T) {
	a := New(Config{Events: events.NewHub(openDB(t))})
	const cap = 3
	sock, _ := serveUnixCapped(t, a.Handler(""), Limits{}, cap, cap)
	var streams []net.Conn
	for range cap {
		c := dialUnix(t, sock)
		if resp := get(t, c, "/v1/events"); resp.StatusCode != http.StatusOK {
			t.Fatalf("open a stream: %d", resp.StatusCode)
		}
		streams = append(streams, c)
	}
	late := dialUnix(t, sock)
	fmt.Fprint(late, "GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")
	answered := make(chan error, 1)
	go func() {
		_, err := http.ReadResponse(bufio.NewReader(late), nil)
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("a client over the cap was served while every connection streams (%v)", err)
	case <-time.After(2 * minIdle):
	}
	streams[0].Close()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the waiting client once a stream closed: %v", err)
		}
	case <-time.After(hang):
		t.Fatal("a closed stream did not let the waiting client in")
	}
	for _, c := range streams[1:] {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
			t.Error("a busy stream was closed to make room")
		}
	}
}

// TestStreamsOverTheCapAreBusy: a listener serves at most its cap of event
// streams; one more is answered 503, code busy, with Retry-After, while
// other requests are served; once a stream ends, a new one is let in.
func TestStreamsOverTheCapAreBusy(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := New(Config{Events: events.NewHub(openDB(t)), Metrics: NewMetrics(reg)})
	sock, lim := serveUnixCapped(t, a.Handler(""), Limits{}, 16, 2)
	var streams []net.Conn
	for range 2 {
		c := dialUnix(t, sock)
		if resp := get(t, c, "/v1/events"); resp.StatusCode != http.StatusOK {
			t.Fatalf("open a stream: %d", resp.StatusCode)
		}
		streams = append(streams, c)
	}
	over := get(t, dialUnix(t, sock), "/v1/sessions/x/events")
	body, _ := io.ReadAll(over.Body)
	if over.StatusCode != http.StatusServiceUnavailable || over.Header.Get("Retry-After") != "5" || !strings.Contains(string(body), `"code": "busy"`) {
		t.Fatalf("a stream over the cap: %d, Retry-After %q, %s; want 503 busy with Retry-After 5", over.StatusCode, over.Header.Get("Retry-After"), body)
	}
	if resp := get(t, dialUnix(t, sock), "/v1/openapi.json"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another request at the stream cap: %d", resp.StatusCode)
	}
	if got := busySeries(t, reg); got != 1 {
		t.Errorf("busy answers counted: %v, want 1", got)
	}
	streams[0].Close()
	waitUntil(t, "the closed stream gone", func() bool { return lim.streams.open.Load() == 1 })
	if resp := get(t, dialUnix(t, sock), "/v1/events"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a stream once one ended: %d", resp.StatusCode)
	}
}

// TestIdleSocketConnectionsTimeOut: on the Unix socket too, a connection
// kept alive after its answer is closed after the idle timeout, and one
// that never sends a request after the header timeout.
func TestIdleSocketConnectionsTimeOut(t *testing.T) {
	a := New(Config{Events: events.NewHub(openDB(t))})
	sock, lim := serveUnixCapped(t, a.Handler(""), short, 16, 8)
	kept := dialUnix(t, sock)
	resp := get(t, kept, "/v1/openapi.json")
	io.Copy(io.Discard, resp.Body)
	silent := dialUnix(t, sock)
	for name, c := range map[string]net.Conn{"kept alive": kept, "silent": silent} {
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("%s connection: read %d bytes, %v; want EOF once it timed out", name, n, err)
		}
	}
	waitUntil(t, "the timed-out connections' slots given back", func() bool { return lim.conns.Open() == 0 })
}

// waitUntil waits for cond, failing t when it has not held after hang.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hang); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, hang)
		}
	}
}

// TestTCPListenerIsLoopbackOnly: the API refuses a TCP listener on any
// address but loopback, and leaves no socket behind when it refuses.
func TestTCPListenerIsLoopbackOnly(t *testing.T) {
	a := New(Config{})
	ls := Listeners{Socket: filepath.Join(t.TempDir(), api.SocketName), Token: "s3cret", SoftFDLimit: 1 << 20}
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		ls.TCPAddr = addr
		s, err := a.Listen(ls)
		if err == nil {
			s.Shutdown()
			t.Errorf("listen on %s: accepted", addr)
			continue
		}
		if !strings.Contains(err.Error(), "only loopback") {
			t.Errorf("listen on %s: %v, want only loopback", addr, err)
		}
		if _, err := os.Stat(ls.Socket); !os.IsNotExist(err) {
			t.Errorf("a refused listen on %s left the socket: %v", addr, err)
		}
	}
	ls.TCPAddr = "127.0.0.1:0"
	s, err := a.Listen(ls)
	if err != nil {
		t.Fatalf("listen on loopback: %v", err)
	}
	defer s.Shutdown()
	req, _ := http.NewRequest("GET", "http://"+s.TCPAddr()+"/v1/openapi.json", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := (&http.Client{Timeout: hang}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET over the loopback listener with the token: %d", resp.StatusCode)
	}
}

// busySeries is the count of requests refused at the cap of event streams.
func busySeries(t testing.TB, g prometheus.Gatherer) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "skillfs_api_busy_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "limit" && l.GetValue() == LimitStreams {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}
