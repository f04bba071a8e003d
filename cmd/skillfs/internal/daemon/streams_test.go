package daemon

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// tapped is an open event stream read line by line as it comes.
type tapped struct {
	lines chan string // closed when the stream ends
}

// tapStream opens the stream at path with header (nil: none) through
// client (nil: the default) and reads it in the background; it must
// answer 200.
func tapStream(t *testing.T, client *http.Client, url string, header http.Header) *tapped {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	s := &tapped{lines: make(chan string, 1024)}
	go func() {
		defer close(s.lines)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	s.until(t, ": subscribed")
	return s
}

// until reads the stream up to the line want and returns what came before
// it; the stream ending first, or a minute without it, fails the test.
func (s *tapped) until(t *testing.T, want string) []string {
	t.Helper()
	var got []string
	deadline := time.After(time.Minute)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				t.Fatalf("the stream ended without %q after %q", want, got)
			}
			if line == want {
				return got
			}
			got = append(got, line)
		case <-deadline:
			t.Fatalf("no %q within a minute after %q", want, got)
		}
	}
}

// rest reads the stream to its end and returns the events it sent (its
// comment lines left out); a minute without its end fails the test.
func (s *tapped) rest(t *testing.T) []apitest.SSE {
	t.Helper()
	var text strings.Builder
	deadline := time.After(time.Minute)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				var out []apitest.SSE
				apitest.ParseSSE(t, strings.NewReader(text.String()), func(e apitest.SSE) bool { out = append(out, e); return true })
				return out
			}
			text.WriteString(line + "\n")
		case <-deadline:
			all := text.String()
			t.Fatalf("the stream goes on after %d bytes, ending %q", len(all), all[max(0, len(all)-200):])
		}
	}
}

// next reads the stream's next event, skipping comment lines.
func (s *tapped) next(t *testing.T) apitest.SSE {
	t.Helper()
	var got []apitest.SSE
	lines := s.until(t, "")
	for len(lines) == 0 || strings.HasPrefix(lines[0], ":") {
		lines = s.until(t, "")
	}
	apitest.ParseSSE(t, strings.NewReader(strings.Join(lines, "\n")+"\n\n"), func(e apitest.SSE) bool { got = append(got, e); return true })
	if len(got) != 1 {
		t.Fatalf("lines %q: want one event", lines)
	}
	return got[0]
}

// wantUnauthorized fails the test unless evs are one unauthorized event
// at id last.
func wantUnauthorized(t *testing.T, what string, evs []apitest.SSE, last int64) {
	t.Helper()
	if len(evs) != 1 || evs[0].Data.Type != skills.EventUnauthorized || evs[0].Data.ID != last ||
		!strings.Contains(evs[0].Data.Reason, "no longer proves its principal") {
		t.Fatalf("%s: the stream ended with %+v, want one unauthorized event at id %d", what, evs, last)
	}
}

// wantRefused fails the test unless a request with token is a 401.
func wantRefused(t *testing.T, c *apitest.Checked, token, path string) {
	t.Helper()
	if code, _, body := c.Send("GET", path, bearerOf(token), nil); code != http.StatusUnauthorized {
		t.Fatalf("GET %s with the dead token: %d %s", path, code, body)
	}
}

// keepQuiet is a keep-alive interval no test waits for: a stream that
// ends was ended by the change it was told of.
const keepQuiet = time.Hour

// quietDaemon is a daemon logging into log whose streams never wait for a
// keep-alive, with skill x, serving its socket's API at srv (closed after
// the test's streams end) and c.
func quietDaemon(t *testing.T, log *skilltest.SyncBuffer) (*Daemon, *httptest.Server, *apitest.Checked) {
	t.Helper()
	d := newDaemonWith(t, log, Options{keepAlive: keepQuiet})
	install(t, d, "name: x\ndescription: one skill", skills.ScopeGlobal)
	srv := httptest.NewServer(d.http.Handler(""))
	t.Cleanup(srv.Close)
	return d, srv, apitest.NewChecked(t, d.http.Handler(""))
}

// TestReaderStreamEndsOnRevoke: a reader token's stream ends at once when
// the token is revoked, with an unauthorized event at the last id it was
// sent; the streams of the operator (the socket, an operator token) go on.
// The log holds neither token.
func TestReaderStreamEndsOnRevoke(t *testing.T) {
	var log skilltest.SyncBuffer
	d, srv, c := quietDaemon(t, &log)
	ctx := context.Background()
	reader, err := d.CreateToken(ctx, api.TokenRequest{Name: "watcher", Role: api.RoleReader})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := d.CreateToken(ctx, api.TokenRequest{Name: "ops", Role: api.RoleOperator})
	if err != nil {
		t.Fatal(err)
	}
	streams := map[string]*tapped{
		"reader":   tapStream(t, nil, srv.URL+"/v1/events", bearerOf(reader.Token)),
		"ops":      tapStream(t, nil, srv.URL+"/v1/events", bearerOf(ops.Token)),
		"operator": tapStream(t, nil, srv.URL+"/v1/events", nil),
	}
	closeOne := func() int64 {
		t.Helper()
		s, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{"x"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.CloseSession(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		id, _ := d.db.LastEventID(ctx)
		return id
	}
	first := closeOne()
	for name, s := range streams {
		if e := s.next(t); e.Data.Type != skills.EventClosed || e.Data.ID != first {
			t.Fatalf("%s's stream: %+v, want the close at %d", name, e, first)
		}
	}
	if err := d.RevokeToken(ctx, "watcher"); err != nil {
		t.Fatal(err)
	}
	wantUnauthorized(t, "revoked", streams["reader"].rest(t), first)
	wantRefused(t, c, reader.Token, "/v1/events")
	second := closeOne()
	for _, name := range []string{"ops", "operator"} {
		if e := streams[name].next(t); e.Data.Type != skills.EventClosed || e.Data.ID != second {
			t.Fatalf("%s's stream after the revocation: %+v, want the close at %d", name, e, second)
		}
	}
	for _, tok := range []string{reader.Token, ops.Token} {
		if strings.Contains(log.String(), tok) || strings.Contains(log.String(), tokenHash(tok)) {
			t.Fatal("the log holds a token or its hash")
		}
	}
}

// TestSessionStreamEndsOnRotateAndClose: a session token's stream ends at
// once when the token is rotated (unauthorized); the new token's stream
// ends with its session's close, the closed event its last; the
// operator's stream of the session goes on until that close.
func TestSessionStreamEndsOnRotateAndClose(t *testing.T) {
	var log skilltest.SyncBuffer
	d, srv, c := quietDaemon(t, &log)
	ctx := context.Background()
	info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	path := srv.URL + "/v1/sessions/" + info.ID + "/events"
	old := tapStream(t, nil, path, bearerOf(info.Token))
	operator := tapStream(t, nil, path, nil)
	readSKILL(t, d, info.ID, "x")
	activated := old.next(t)
	if activated.Data.Type != skills.EventActivated || operator.next(t).Data.ID != activated.Data.ID {
		t.Fatalf("first event %+v, want the activation on both streams", activated)
	}

	rotated, err := d.RotateSessionToken(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantUnauthorized(t, "rotated", old.rest(t), activated.Data.ID)
	wantRefused(t, c, info.Token, "/v1/sessions/"+info.ID+"/events")

	fresh := tapStream(t, nil, path, bearerOf(rotated.Token))
	if err := d.CloseSession(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*tapped{"the new token's": fresh, "the operator's": operator} {
		evs := s.rest(t)
		if len(evs) != 1 || evs[0].Data.Type != skills.EventClosed || evs[0].Data.Session != info.ID {
			t.Fatalf("%s stream ended with %+v, want the close alone", name, evs)
		}
	}
	wantRefused(t, c, rotated.Token, "/v1/sessions/"+info.ID)
}

// TestExpiredTokenStreamEndsAtKeepAlive: a stream lives across keep-alives
// while its token works; once the token expires (nothing tells the stream
// of it), the next keep-alive finds it and the stream ends.
func TestExpiredTokenStreamEndsAtKeepAlive(t *testing.T) {
	var log skilltest.SyncBuffer
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	d := newDaemonWith(t, &log, Options{keepAlive: 10 * time.Millisecond, now: now})
	ctx := context.Background()
	srv := httptest.NewServer(d.http.Handler("listener"))
	t.Cleanup(srv.Close) // after the streams end
	tok, err := d.CreateToken(ctx, api.TokenRequest{Name: "brief", Role: api.RoleReader, Expires: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	s := tapStream(t, nil, srv.URL+"/v1/events", bearerOf(tok.Token))
	for range 3 {
		if got := s.until(t, ": keep-alive"); len(got) != 1 || got[0] != "" {
			t.Fatalf("before the keep-alive: %q", got)
		}
	}
	mu.Lock()
	clock = clock.Add(2 * time.Hour)
	mu.Unlock()
	last, _ := d.db.LastEventID(ctx)
	wantUnauthorized(t, "expired", s.rest(t), last)
	wantRefused(t, apitest.NewChecked(t, d.http.Handler("listener")), tok.Token, "/v1/events")
}

// TestMovedSessionStreamEnds: a session moved to another host: the stream
// its token opened on the old host gets the moved event (committed while
// the token worked), then unauthorized, and ends, as the old host finds
// the session gone.
func TestMovedSessionStreamEnds(t *testing.T) {
	ctx := context.Background()
	a, b := newFleet(t)
	install(t, a, "name: x\ndescription: one skill", skills.ScopeGlobal)
	share(t, a, b)
	info, err := a.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.http.Handler(""))
	t.Cleanup(srv.Close) // after the streams end
	s := tapStream(t, nil, srv.URL+"/v1/sessions/"+info.ID+"/events", bearerOf(info.Token))
	if err := a.cat.DB().Heartbeat(ctx, a.host, time.Now().Add(-2*DefaultHostGrace)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Move(ctx, info.ID, false); err != nil {
		t.Fatal(err)
	}
	if err := a.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	evs := s.rest(t)
	if len(evs) != 2 || evs[0].Data.Type != skills.EventMoved || evs[0].Data.Host != b.host {
		t.Fatalf("the moved session's stream ended with %+v, want moved, then unauthorized", evs)
	}
	wantUnauthorized(t, "moved", evs[1:], evs[0].Data.ID)
}

// TestSandboxSocketStreamEndsOnUnbind: a stream on a session's API socket
// (no token: the connection is the credential) ends when the bind goes.
func TestSandboxSocketStreamEndsOnUnbind(t *testing.T) {
	ctx := context.Background()
	d, _, info := oneSkillSession(t)
	dir := t.TempDir()
	target, sock := filepath.Join(dir, "skills"), filepath.Join(dir, "api.sock")
	if _, err := d.Bind(ctx, info.ID, skills.Bind{Target: target, APISocket: sock}); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	s := tapStream(t, client, "http://skillfs/v1/sessions/"+info.ID+"/events", nil)
	readSKILL(t, d, info.ID, "x")
	if e := s.next(t); e.Data.Type != skills.EventActivated {
		t.Fatalf("first event %+v, want the activation", e)
	}
	if err := d.Unbind(ctx, info.ID, target, 0); err != nil {
		t.Fatal(err)
	}
	if evs := s.rest(t); len(evs) != 0 {
		t.Fatalf("the stream sent %+v after the unbind", evs)
	}
	if closed, err := d.SessionClosed(ctx, info.ID); err != nil || closed {
		t.Fatalf("the session is closed (%v, %v): the stream ended for another reason", closed, err)
	}
}
