package integration

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api/apitest"
)

// checkCLI puts a checking proxy between the CLI and the daemon: the
// daemon's socket moves aside and the proxy listens at its path, forwarding
// every request (streams included) and checking it and its answer against
// the OpenAPI document. The CLI finds the daemon where it always does.
// Call conform on the result to fail t for what did not conform; the
// proxy goes, and the daemon's socket comes back, when t ends.
//
// It is for tests of the CLI's API calls: tests that speak HTTP on the
// socket themselves (connection limits, hostile clients) need the daemon's
// own socket, so the proxy is not the harness's default.
func (e *env) checkCLI(t *testing.T) *apitest.Transport {
	t.Helper()
	sock := filepath.Join(e.home, "skillfs.sock")
	aside := sock + ".daemon"
	if err := os.Rename(sock, aside); err != nil {
		t.Fatal(err)
	}
	// The daemon's socket goes back where it removes it when it stops,
	// once the proxy is gone.
	t.Cleanup(func() { os.Rename(aside, sock) })
	return checkingProxy(t, sock, aside)
}

// checkingProxy listens on a new Unix socket at listen (mode 0600) and
// forwards every request to the daemon's socket at upstream, checking it
// and its answer against the OpenAPI document (streams pass at once). It
// stops when t ends.
func checkingProxy(t *testing.T, listen, upstream string) *apitest.Transport {
	t.Helper()
	l, err := net.Listen("unix", listen)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(listen, 0o600)
	check := &apitest.Transport{Contract: contract, Base: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", upstream)
		},
	}}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "skillfs" },
		Transport:     check,
		FlushInterval: -1, // event streams pass at once
	}
	srv := &http.Server{Handler: proxy}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("checking proxy: %v", err)
		}
	})
	return check
}

// conformed fails t for every exchange since the last call that does not
// conform to the OpenAPI document.
func conformed(t *testing.T, check *apitest.Transport) {
	t.Helper()
	for _, v := range check.Take() {
		t.Errorf("OpenAPI contract: %s", v)
	}
}

// TestCLIConformsToContract: every API call the CLI makes, and what the
// daemon answers it, conforms to the OpenAPI document: each session
// command, the status, the catalog notice, and their errors.
func TestCLIConformsToContract(t *testing.T) {
	e := newEnv(t)
	e.serve("--examples=false")
	check := e.checkCLI(t)
	e.importFixtures(fixtureSkills) // tells the daemon the catalog changed
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "alpha,beta", "--preload", "beta")
	e.ok("session", "show", s.ID)
	e.ok("session", "show", s.ID, "--json")
	e.newSession("alice", "--all")
	if out := e.ok("session", "list", "--limit", "1", "--json"); !strings.Contains(out, s.ID) {
		t.Errorf("session list --limit 1: %s", out)
	}
	e.ok("session", "list")
	if _, err := fetch(filepath.Join(s.Path, "alpha", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if a := e.activationsOf(s.ID); a.opens("alpha") != 1 {
		t.Errorf("activations: %+v", a)
	}
	e.ok("session", "activations", s.ID)
	for _, format := range []string{"xml", "markdown"} {
		if out := e.ok("session", "prompt", s.ID, "--format", format); !strings.Contains(out, "alpha") {
			t.Errorf("prompt --format %s: %s", format, out)
		}
	}
	e.ok("session", "mentions", s.ID, "--text", "Use $beta and $gamma.")
	e.ok("session", "mentions", s.ID, "--text", "Use $beta.", "--json")
	if out := e.ok("session", "read", s.ID, "skill://alpha/references/guide.md"); !strings.Contains(out, "Read me.") {
		t.Errorf("session read: %q", out)
	}
	e.ok("session", "read", s.ID, "skill://beta/assets/data.bin")
	target := filepath.Join(t.TempDir(), "skills")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	e.ok("session", "mount", s.ID, target)
	e.ok("session", "show", s.ID, "--json") // with its bind
	e.ok("session", "unmount", s.ID, target)
	e.ok("skill", "disable", "beta") // tells the daemon
	e.ok("session", "refresh", s.ID)
	e.ok("status")
	e.ok("status", "--json")
	// Errors, as the daemon answers them and the CLI reports them.
	for _, args := range [][]string{
		{"session", "show", "0123456789abcdef0123456789abcdef"},
		{"session", "create", "--user", "nobody", "--skills", "alpha"},
		{"session", "create", "--user", "alice", "--skills", "alpha", "--all"},
		{"session", "prompt", s.ID, "--format", "html"},
		{"session", "read", s.ID, "skill://alpha/../../etc/passwd"},
		{"session", "read", s.ID, "skill://gamma/SKILL.md"},
		{"session", "list", "--after", "nope"},
		{"session", "mount", "0123456789abcdef0123456789abcdef", target},
		{"session", "set", "0123456789abcdef0123456789abcdef", "--all"},
		{"session", "set", s.ID, "--skills", "alpha", "--preload", "beta"},
	} {
		if r := e.run(args...); r.code == 0 {
			t.Errorf("skillfs %s: exit 0, want an error", strings.Join(args, " "))
		}
	}
	e.ok("session", "set", s.ID, "--skills", "alpha,gamma", "--preload", "gamma", "--json")
	e.ok("session", "mentions", s.ID, "--text", "/skill:gamma now\nand $alpha", "--json")
	e.ok("session", "close", s.ID)
	conformed(t, check)
	// Each command above made at least one call, through the proxy.
	if n := check.Checked(); n < 30 {
		t.Errorf("the proxy checked %d exchanges: the CLI went around it", n)
	}
}
