package integration

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"skillfs/fs/fusetest"
	"skillfs/skills/skilltest"
)

// runAt runs the CLI on e's data directory in the working directory dir,
// with extra environment variables; it fails the test after 30 s.
func (e *env) runAt(t *testing.T, dir string, vars []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"--home", e.home}, args...)...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	if e.index != "" {
		cmd.Env = append(cmd.Env, "SKILLFS_INDEX="+e.index)
	}
	cmd.Env = append(cmd.Env, vars...) // the last of a name wins
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case ctx.Err() != nil:
		t.Fatalf("skillfs %v did not finish within 30s", args)
	case err != nil:
		t.Fatalf("skillfs %v: %v", args, err)
	}
	return r
}

// TestServeRefusesSettingsOutOfRange: serve with a setting out of its
// range — on the command line, in its configuration file, in the
// environment — exits 2 with one line naming the flag (or the file, its
// line and the key, or the variable) before it touches anything: no data
// directory, no mount, no file in the working directory (a libpq keyword
// string as the index once made a SQLite file named after its password
// there), and never a byte of the index's password. A command that opens
// the index refuses it the same way.
func TestServeRefusesSettingsOutOfRange(t *testing.T) {
	const secret = "pw-S3CRET"
	keywords := "host=127.0.0.1 port=1 dbname=skillfs user=skillfs password=" + secret
	token := writeTokenFile(t, "s3cret", 0o600)
	config := func(text string) string {
		p := filepath.Join(t.TempDir(), "skillfs.yaml")
		skilltest.WriteFile(t, p, []byte("# settings\n"+text), 0o644)
		return p
	}
	cases := []struct {
		name string
		vars []string
		args []string
		says []string
	}{
		{"fuse-request-timeout -5s", nil, []string{"serve", "--fuse-request-timeout", "-5s"}, []string{`--fuse-request-timeout: "-5s": out of range`, "15s to 18h12m15s"}},
		{"reconcile-every 1ns", nil, []string{"serve", "--reconcile-every", "1ns"}, []string{`--reconcile-every: "1ns"`, "100ms to 1h"}},
		{"event-retain-count 0", nil, []string{"serve", "--event-retain-count", "0"}, []string{"--event-retain-count", "1 to 1000000000"}},
		{"event-retention -1h", nil, []string{"serve", "--event-retention", "-1h"}, []string{"--event-retention", "1m to 87600h"}},
		{"owner nobody", nil, []string{"serve", "--owner", "nobody"}, []string{"--owner", "UID:GID"}},
		{"listen 0.0.0.0:0", nil, []string{"serve", "--listen", "0.0.0.0:0", "--token-file", token}, []string{`--listen: "0.0.0.0:0": 0.0.0.0 is not a loopback address`}},
		{"listen a name", nil, []string{"serve", "--listen", "example.com:80", "--token-file", token}, []string{"--listen", "not an IP address or localhost"}},
		{"listen without a token file", nil, []string{"serve", "--listen", "127.0.0.1:0"}, []string{"--listen needs --token-file"}},
		{"file: fuse-request-timeout -5s", nil, []string{"serve", "--config", config("examples: false\nfuse-request-timeout: -5s\n")},
			[]string{`line 3: key "fuse-request-timeout": "-5s": out of range`}},
		{"file: reconcile-every 1ns", nil, []string{"serve", "--config", config("reconcile-every: 1ns\n")}, []string{`line 2: key "reconcile-every": "1ns"`}},
		{"file: listen", nil, []string{"serve", "--config", config("token-file: " + token + "\nlisten: 0.0.0.0:8080\n")}, []string{`line 3: key "listen"`, "loopback"}},
		{"file: index keywords", nil, []string{"serve", "--config", config("index: \"" + keywords + "\"\n")}, []string{`line 2: key "index": a PostgreSQL keyword string`}},
		{"env: index keywords", []string{"SKILLFS_INDEX=" + keywords}, []string{"serve"}, []string{"$SKILLFS_INDEX: a PostgreSQL keyword string"}},
		{"flag: index keywords", nil, []string{"--index", keywords, "serve"}, []string{"--index: a PostgreSQL keyword string"}},
		{"flag: index of another scheme", nil, []string{"--index", "mysql://u:" + secret + "@127.0.0.1:1/x", "serve"}, []string{"--index: a URL, but not a postgres://"}},
		{"skill list: index keywords", []string{"SKILLFS_INDEX=" + keywords}, []string{"skill", "list"}, []string{"$SKILLFS_INDEX: a PostgreSQL keyword string"}},
		{"check: index keywords", nil, []string{"--index", keywords, "check"}, []string{"--index: a PostgreSQL keyword string"}},
		{"skill import --timeout -5s", nil, []string{"skill", "import", "/nonexistent", "--timeout", "-5s"}, []string{`--timeout: "-5s"`, "1s to 24h"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cwd := t.TempDir()
			r := e.runAt(t, cwd, tc.vars, tc.args...)
			if r.code != 2 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line", r.code, r.stdout, r.stderr)
			}
			for _, w := range tc.says {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q lacks %q", r.stderr, w)
				}
			}
			if strings.Contains(r.stderr, secret) {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
			if _, err := os.Stat(e.home); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the data directory was made: %v", err)
			}
			if left, _ := os.ReadDir(cwd); len(left) > 0 {
				t.Errorf("files made in the working directory: %v", left)
			}
			t.Logf("%s", strings.TrimSpace(r.stderr))
		})
	}
}

// TestServeStopsOnAnAddressInUse: an address serve cannot listen on stops
// it before it makes its data directory, installs the bundled skills or
// mounts (it once got that far and exited 1 only then).
func TestServeStopsOnAnAddressInUse(t *testing.T) {
	fusetest.Require(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := newEnv(t)
	r := e.runAt(t, t.TempDir(), nil, "serve", "--listen", l.Addr().String(), "--token-file", writeTokenFile(t, "s3cret", 0o600))
	if r.code != 1 || !strings.Contains(r.stderr, "--listen "+l.Addr().String()) || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("serve on an address in use: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(e.home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data directory was made: %v", err)
	}
}

// TestBearerSchemeAnyCase: the TCP listener takes the bearer token with
// the scheme in any case (RFC 7235), and still nothing else.
func TestBearerSchemeAnyCase(t *testing.T) {
	e := newEnv(t)
	d := e.serve("--examples=false", "--listen", "127.0.0.1:0", "--token-file", writeTokenFile(t, "s3cret", 0o600))
	addr := listenAddr(t, d)
	hc := &http.Client{Timeout: 10 * time.Second}
	for auth, want := range map[string]int{
		"Bearer s3cret": 200, "bearer s3cret": 200, "BEARER s3cret": 200, "bEaReR s3cret": 200,
		"bearer S3CRET": 401, "bearer wrong": 401, "Basic czNjcmV0": 401, "s3cret": 401, "": 401,
	} {
		req, err := http.NewRequest("GET", "http://"+addr+"/v1/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET /v1/health with %q: %v", auth, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /v1/health with Authorization %q: %d, want %d", auth, resp.StatusCode, want)
		}
	}
}
