package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api/apitest"
)

// credClient calls the daemon with a bearer token, over the TCP listener or
// the socket, every exchange checked against the OpenAPI document.
type credClient struct {
	hc    *http.Client
	check *apitest.Transport
	base  string
}

func newCredClient(base string, dial func(ctx context.Context, _, _ string) (net.Conn, error)) *credClient {
	check := &apitest.Transport{Contract: contract, Base: &http.Transport{DialContext: dial}}
	return &credClient{hc: &http.Client{Transport: check}, check: check, base: base}
}

// tcpCredClient calls the TCP listener at addr.
func tcpCredClient(addr string) *credClient {
	var d net.Dialer
	return newCredClient("http://"+addr, func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) })
}

// sockCredClient calls the socket of the data directory home.
func sockCredClient(home string) *credClient {
	var d net.Dialer
	sock := filepath.Join(home, "skillfs.sock")
	return newCredClient("http://skillfs", func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) })
}

// send sends one request with token (none when ""), as user when not "",
// and returns the answer's status, header and body.
func (c *credClient) send(t testing.TB, method, path, token, user string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if user != "" {
		req.Header.Set("X-Skillfs-As", user)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if v := c.check.Take(); len(v) > 0 {
		t.Errorf("%s %s off the OpenAPI document: %v", method, path, v)
	}
	return resp.StatusCode, resp.Header, data
}

// credListener is the TCP listener's own token in the tests of credentials.
const credListener = "op3rator-listener"

// newCredEnv is a daemon listening on TCP behind credListener too, with the
// fixtures and alice, and a client of its TCP listener; extra are more
// flags of serve.
func newCredEnv(t *testing.T, extra ...string) (*env, *daemon, *credClient) {
	t.Helper()
	e := newEnv(t)
	d := e.serve(append([]string{"--examples=false", "--listen", "127.0.0.1:0", "--token-file", writeTokenFile(t, credListener, 0o600)}, extra...)...)
	e.importFixtures(fixtureSkills)
	e.ok("user", "add", "alice")
	return e, d, tcpCredClient(listenAddr(t, d))
}

// TestSessionTokenCredentials: through the binary, a session's token —
// answered once by its create — reads its own session's prompt and
// activations, on the TCP listener and the socket; another session, one
// that does not exist and the catalog all look like no route; acting as
// another user is refused; a rotation kills the old token and a close the
// new one. A reader token lists sessions but opens none and makes no
// token; revoked, it is refused at its next request. No token is in the
// daemon's log or metrics, a wrong one included.
func TestSessionTokenCredentials(t *testing.T) {
	e, d, tcp := newCredEnv(t)
	sock := sockCredClient(e.home)

	var s, other struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "alpha")
	r := e.run("session", "create", "--user", "alice", "--skills", "beta")
	if r.code != 0 || !strings.Contains(r.stdout, "\ntoken sfs_s_") || !strings.Contains(r.stderr, "shown this once") {
		t.Fatalf("session create: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	other.ID = strings.Fields(r.stdout)[1]
	if !strings.HasPrefix(s.Token, "sfs_s_") {
		t.Fatalf("session create --json answered token %q", s.Token)
	}
	if out := e.ok("session", "show", s.ID, "--json"); strings.Contains(out, s.Token) || strings.Contains(out, `"token"`) {
		t.Errorf("session show answers the token: %s", out)
	}
	used := []string{s.Token, credListener}

	for name, c := range map[string]*credClient{"tcp": tcp, "socket": sock} {
		if code, _, body := c.send(t, "GET", "/v1/sessions/"+s.ID+"/prompt", s.Token, "", nil); code != 200 || !bytes.Contains(body, []byte("alpha")) {
			t.Errorf("%s: its prompt with its token: %d %s", name, code, body)
		}
		if code, _, body := c.send(t, "GET", "/v1/sessions/"+s.ID+"/activations", s.Token, "", nil); code != 200 {
			t.Errorf("%s: its activations with its token: %d %s", name, code, body)
		}
		code, hdr, body := c.send(t, "GET", "/v1/sessions/"+other.ID+"/prompt", s.Token, "", nil)
		ncode, nhdr, nbody := c.send(t, "GET", "/v1/sessions/0000/prompt", s.Token, "", nil)
		if code != 404 || code != ncode || hdr.Get("Content-Type") != nhdr.Get("Content-Type") ||
			!bytes.Equal(bytes.ReplaceAll(body, []byte(other.ID), []byte("0000")), nbody) {
			t.Errorf("%s: another session's prompt %d %s, one that does not exist %d %s: want the same 404", name, code, body, ncode, nbody)
		}
		if code, _, body := c.send(t, "GET", "/v1/skills", s.Token, "", nil); code != 404 || !bytes.Contains(body, []byte("no such route")) {
			t.Errorf("%s: the catalog with a session token: %d %s", name, code, body)
		}
		if code, _, body := c.send(t, "GET", "/v1/sessions/"+s.ID, s.Token, "bob", nil); code != 403 {
			t.Errorf("%s: its session as bob: %d %s", name, code, body)
		}
	}

	if r := e.run("session", "token", s.ID); r.code != 2 || !strings.Contains(r.stderr, "shown once") || !strings.Contains(r.stderr, "--rotate") {
		t.Errorf("session token without --rotate: exit %d %s", r.code, r.stderr)
	}
	rotated := strings.TrimSpace(e.ok("session", "token", s.ID, "--rotate"))
	used = append(used, rotated)
	if code, _, _ := tcp.send(t, "GET", "/v1/sessions/"+s.ID, s.Token, "", nil); code != 401 {
		t.Errorf("the token before the rotation: %d, want 401", code)
	}
	if code, _, body := tcp.send(t, "GET", "/v1/sessions/"+s.ID, rotated, "", nil); code != 200 {
		t.Errorf("the rotated token: %d %s", code, body)
	}
	e.ok("session", "close", s.ID)
	if code, _, _ := sock.send(t, "GET", "/v1/sessions/"+s.ID, rotated, "", nil); code != 401 {
		t.Errorf("the token of a closed session: %d, want 401", code)
	}

	reader := strings.TrimSpace(e.ok("token", "create", "dash", "--role", "reader"))
	used = append(used, reader)
	if !strings.HasPrefix(reader, "sfs_p_") {
		t.Fatalf("token create printed %q", reader)
	}
	if code, _, body := tcp.send(t, "GET", "/v1/sessions", reader, "", nil); code != 200 || !bytes.Contains(body, []byte(other.ID)) {
		t.Errorf("a reader lists sessions: %d %s", code, body)
	}
	if code, _, body := tcp.send(t, "POST", "/v1/sessions", reader, "", map[string]any{"user": "alice", "skills": []string{}}); code != 403 {
		t.Errorf("a reader opens a session: %d %s", code, body)
	}
	if code, _, body := tcp.send(t, "POST", "/v1/tokens", reader, "", map[string]any{"name": "mine", "role": "operator"}); code != 403 {
		t.Errorf("a reader makes an operator token: %d %s", code, body)
	}
	if out := e.ok("token", "list", "--json"); strings.Contains(out, reader) || !strings.Contains(out, `"dash"`) {
		t.Errorf("token list: %s", out)
	}
	e.ok("token", "revoke", "dash")
	if code, _, _ := tcp.send(t, "GET", "/v1/sessions", reader, "", nil); code != 401 {
		t.Errorf("a revoked token: %d, want 401", code)
	}

	wrong := "sfs_s_" + strings.Repeat("A", 43)
	used = append(used, wrong)
	if code, _, _ := sock.send(t, "GET", "/v1/whoami", wrong, "", nil); code != 401 {
		t.Errorf("a wrong token on the socket: %d, want 401", code)
	}
	_, _, metrics := tcp.send(t, "GET", "/metrics", credListener, "", nil)
	for _, tok := range used {
		if strings.Contains(d.logs(), tok) || bytes.Contains(metrics, []byte(tok)) {
			t.Errorf("the daemon's log or metrics hold a token (%.10s…)", tok)
		}
	}
}

// What a reader token and a session token may call, written out here (the
// daemon's table is server/access.go; its in-process test has its own
// copy): a route missing from the document is simply not sent.
var (
	readerMayCall = []string{
		"GET /v1/openapi.json", "GET /v1/health", "GET /v1/status", "GET /v1/ready", "GET /v1/hosts", "GET /metrics",
		"GET /v1/whoami", "GET /v1/sessions", "GET /v1/events",
		"GET /v1/sessions/{id}", "GET /v1/sessions/{id}/activations", "GET /v1/sessions/{id}/audit",
		"GET /v1/sessions/{id}/prompt",
		"GET /v1/sessions/{id}/events", "POST /v1/sessions/{id}/globs",
		"GET /v1/skills", "GET /v1/skills/{slug}", "GET /v1/skills/{slug}/versions",
		"GET /v1/curated", "GET /v1/catalog", "GET /v1/curated/skills",
	}
	sessionMayCall = []string{
		"GET /v1/whoami", "POST /v1/sessions",
		"GET /v1/sessions/{id}", "GET /v1/sessions/{id}/activations", "GET /v1/sessions/{id}/audit",
		"GET /v1/sessions/{id}/prompt", "POST /v1/sessions/{id}/mentions", "GET /v1/sessions/{id}/resolve",
		"GET /v1/sessions/{id}/events", "POST /v1/sessions/{id}/turn", "POST /v1/sessions/{id}/globs",
		"POST /v1/sessions/{id}/skills",
	}
)

// TestCredentialTableThroughTheBinary: every route of the document, sent
// to the running daemon with a reader token, the token of session S (on
// S's own routes) and the token of another session: a route refused to the
// reader is a 403 saying so, one refused to a session token answers as a
// path no route takes; one allowed reaches its handler (whatever it then
// answers to an empty request). Without a token, TCP refuses every route.
// Requests that are allowed carry no body, so that none changes anything.
func TestCredentialTableThroughTheBinary(t *testing.T) {
	e, _, tcp := newCredEnv(t)
	var s, other struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "alpha")
	e.okJSON(&other, "session", "create", "--user", "alice", "--skills", "beta")
	reader := strings.TrimSpace(e.ok("token", "create", "dash", "--role", "reader"))

	pathOf := func(pattern string) (method, path string) {
		method, path, _ = strings.Cut(pattern, " ")
		id := "x" // a draft's
		if strings.HasPrefix(path, "/v1/sessions/") {
			id = s.ID
		}
		path = strings.NewReplacer("{id}", id, "{slug}", "alpha", "{path...}", "a.md", "{name}", "nope", "{uid}", "bob").Replace(path)
		if strings.HasSuffix(path, "/events") {
			path += "?after=x" // an allowed stream is refused at once (400), not held open
		}
		return method, path
	}
	looksMissing := func(code int, body []byte) bool {
		return (code == 404 && bytes.Contains(body, []byte(": no such route"))) ||
			(code == 405 && bytes.Contains(body, []byte("method not allowed")))
	}
	for _, pattern := range contract.Patterns() {
		method, path := pathOf(pattern)
		code, _, body := tcp.send(t, method, path, reader, "", nil)
		refused := code == 403 && bytes.Contains(body, []byte("not open to a reader token"))
		if want := !slices.Contains(readerMayCall, pattern); refused != want {
			t.Errorf("%s with a reader token: %d %s (refused %v, want %v)", pattern, code, body, refused, want)
		}
		code, _, body = tcp.send(t, method, path, s.Token, "", nil)
		if want := !slices.Contains(sessionMayCall, pattern); looksMissing(code, body) != want {
			t.Errorf("%s with its session's token: %d %s (looks missing %v, want %v)", pattern, code, body, !want, want)
		}
		code, _, body = tcp.send(t, method, path, other.Token, "", nil)
		want := !slices.Contains(sessionMayCall, pattern) || strings.Contains(pattern, "{id}")
		if looksMissing(code, body) != want {
			t.Errorf("%s with another session's token: %d %s (want looks missing: %v)", pattern, code, body, want)
		}
		if code, _, _ := tcp.send(t, method, path, "", "", nil); code != 401 {
			t.Errorf("%s without a token on TCP: %d, want 401", pattern, code)
		}
	}
}
