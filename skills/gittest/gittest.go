// Package gittest builds and serves git repositories for tests (tests
// only, standard library only): git commands run with an explicit
// environment (FixtureEnv: isolated from the machine, reproducible
// commits), a git that logs the commands a test makes, and a remote that
// git reads over HTTP, on a loopback port the test owns, so that a
// "remote" source needs no network.
package gittest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Serve serves the bare repositories below root with git's smart HTTP
// protocol (git http-backend) on a loopback port until the test ends, and
// returns the base URL, "http://127.0.0.1:PORT/": root/team/skills.git is
// cloned from BASE+"team/skills.git". Only reads are served.
func Serve(tb testing.TB, root string) string {
	tb.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		tb.Fatalf("find git's programs: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && !(r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack")) {
			http.Error(w, "read only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	return srv.URL + "/"
}
