package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills/skilltest"
)

// principalSeen is a fake Sessions whose SessionInfo keeps the principal
// of each call.
type principalSeen struct {
	sessionsDeps // the calls the test makes none of
	mu           sync.Mutex
	seen         []Principal
}

func (p *principalSeen) SessionInfo(ctx context.Context, id string) (*api.SessionInfo, error) {
	got, ok := PrincipalOf(ctx)
	if !ok {
		return nil, errors.New("no principal")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, got)
	return &api.SessionInfo{ID: id}, nil
}

func (p *principalSeen) last() Principal {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[len(p.seen)-1]
}

// TestServeSession: every request on a session's API socket carries the
// session's principal with the peer's pid and uid, which are logged per
// connection; stop ends the connections and the listener.
func TestServeSession(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // a test's own temporary folders, for another uid to reach
		if d == os.TempDir() {
			break
		}
	}
	path := filepath.Join(dir, "api.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	var logged skilltest.SyncBuffer
	fake := &principalSeen{}
	stop := New(Config{Sessions: fake, Log: slog.New(slog.NewTextHandler(&logged, nil))}).ServeSession(l, "s1", Limits{})
	defer stop()

	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	resp, err := client.Get("http://x/v1/sessions/s1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/sessions/s1: %d", resp.StatusCode)
	}
	want := Principal{Role: RoleSession, Session: "s1", Via: ViaSandboxSocket, PeerPID: os.Getpid(), PeerUID: os.Getuid()}
	if got := fake.last(); got != want {
		t.Fatalf("principal %+v, want %+v", got, want)
	}
	if !strings.Contains(logged.String(), "peer_pid="+strconv.Itoa(os.Getpid())) {
		t.Fatalf("the connection's peer is not logged:\n%s", logged.String())
	}

	// Another process of another user: its own pid and uid.
	out, err := exec.Command("setpriv", "--reuid", "1234", "--regid", "1234", "--clear-groups", "--",
		"curl", "-sS", "--unix-socket", path, "http://x/v1/sessions/s1").CombinedOutput()
	if err != nil {
		t.Fatalf("curl as uid 1234: %v\n%s", err, out)
	}
	if got := fake.last(); got.PeerUID != 1234 || got.PeerPID == os.Getpid() || got.PeerPID <= 0 || got.Session != "s1" {
		t.Fatalf("principal of uid 1234's request: %+v", got)
	}
	if !strings.Contains(logged.String(), "peer_uid=1234") {
		t.Fatalf("uid 1234's connection is not logged:\n%s", logged.String())
	}

	// A connection kept alive is ended by stop, and nothing listens after.
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("GET /v1/sessions/s1 HTTP/1.1\r\nHost: x\r\n\r\n"))
	buf := make([]byte, 4096)
	if n, err := conn.Read(buf); err != nil || !bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 200")) {
		t.Fatalf("kept-alive connection: %q, %v", buf[:n], err)
	}
	stop()
	for {
		if _, err := conn.Read(buf); err != nil {
			break
		}
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		t.Fatal("the socket still takes connections after stop")
	}
	stop() // again: nothing
}
