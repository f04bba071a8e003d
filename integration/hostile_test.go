package integration

// The hostile-input part of the fault suite: special files and oversized
// sources through every entry point (CLI and API), endless request bodies,
// and hostile API requests. Archives are in hostile_archives_test.go, git
// repositories in hostile_git_test.go.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/skills/skilltest"
)

// hostileTimeout bounds one hostile case: a refusal must come long before.
const hostileTimeout = 30 * time.Second

// runBounded runs the CLI with stdin (nil: none) and fails the test when it
// has not exited within limit. It returns the result and how long it took.
func (e *env) runBounded(limit time.Duration, stdin io.Reader, args ...string) (result, time.Duration) {
	e.t.Helper()
	return e.runBoundedWith(limit, stdin, nil, args...)
}

// runBoundedEnv is runBounded with extra environment variables
// (NAME=value) and no stdin.
func (e *env) runBoundedEnv(limit time.Duration, vars []string, args ...string) (result, time.Duration) {
	e.t.Helper()
	return e.runBoundedWith(limit, nil, vars, args...)
}

func (e *env) runBoundedWith(limit time.Duration, stdin io.Reader, vars []string, args ...string) (result, time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := e.command(ctx, args...)
	if vars != nil {
		cmd.Env = e.environ(vars)
	}
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, stdin
	begin := time.Now()
	err := cmd.Run()
	took := time.Since(begin)
	if ctx.Err() != nil {
		e.t.Fatalf("skillfs %s: still running after %v (killed)\nstdout: %s\nstderr: %s", strings.Join(args, " "), limit, out.String(), errb.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run skillfs %v: %v", args, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}, took
}

// hostileState is everything a refused input must leave as it was: the
// catalog and the store (snapshot), the drafts and the sessions.
func hostileState(t testing.TB, e *env) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(snapshot(t, e))
	ents, err := os.ReadDir(filepath.Join(e.home, "drafts"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	b.WriteString("\ndrafts:")
	for _, en := range ents {
		b.WriteString(" " + en.Name())
	}
	return b.String()
}

// checkUnchanged compares the state after a case with the state before it
// and checks that nothing was left in the staging or temporary areas.
func checkUnchanged(t testing.TB, e *env, before string) {
	t.Helper()
	if after := hostileState(t, e); after != before {
		t.Errorf("catalog, store or drafts changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if l := leftovers(t, e); len(l) > 0 {
		t.Errorf("leftovers: %v", l)
	}
}

// checkNamesNoTemp fails when a message names a temporary or staging path
// instead of the source as the user gave it.
func checkNamesNoTemp(t testing.TB, e *env, msg string) {
	t.Helper()
	for _, p := range []string{filepath.Join(e.home, "tmp"), filepath.Join(e.home, "store", ".staging"),
		filepath.Join(e.home, "drafts"), "skillfs-validate-", "/import-", "/upload-", "/edit-"} {
		if strings.Contains(msg, p) {
			t.Errorf("message names a temporary path (%s):\n%s", p, msg)
		}
	}
}

// hostileAPI talks to the daemon's socket with a deadline on every request
// and never follows a redirect: what the daemon answers is what is checked.
type hostileAPI struct {
	sock string
	hc   *http.Client
}

func newHostileAPI(home string) *hostileAPI {
	sock := filepath.Join(home, "skillfs.sock")
	return &hostileAPI{sock: sock, hc: &http.Client{
		Timeout:       hostileTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}},
	}}
}

// apiAnswer is one answer of the daemon.
type apiAnswer struct {
	status int
	body   []byte
	err    struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	took time.Duration
}

func (a apiAnswer) String() string {
	return fmt.Sprintf("%d %s", a.status, bytes.TrimSpace(a.body))
}

// send sends one request. A path is sent as written, escapes included.
func (c *hostileAPI) send(t testing.TB, method, path, user, ctype string, hdr http.Header, body io.Reader) apiAnswer {
	t.Helper()
	u, err := url.Parse("http://skillfs" + path)
	if err != nil {
		t.Fatalf("parse %q: %v", path, err)
	}
	req, err := http.NewRequest(method, u.String(), body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if user != "" {
		req.Header.Set("X-Skillfs-As", user)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	begin := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var a apiAnswer
	a.status = resp.StatusCode
	a.body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	a.took = time.Since(begin)
	if a.status != http.StatusOK {
		json.Unmarshal(a.body, &a.err)
	}
	return a
}

// stream sends a request whose body is read from body as the daemon takes
// it, chunked, over a connection of its own, and reads the answer as soon
// as it comes: the daemon may answer (and close) long before an endless
// body ends. It fails the test when no answer came within hostileTimeout.
func (c *hostileAPI) stream(t testing.TB, method, path, user, ctype string, body io.Reader) apiAnswer {
	t.Helper()
	a, err := c.tryStream(method, path, user, ctype, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// tryStream is stream for goroutines other than the test's: it returns
// what went wrong instead of failing the test.
func (c *hostileAPI) tryStream(method, path, user, ctype string, body io.Reader) (apiAnswer, error) {
	var a apiAnswer
	conn, err := net.Dial("unix", c.sock)
	if err != nil {
		return a, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(hostileTimeout))
	begin := time.Now()
	hdr := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: skillfs\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n", method, path, ctype)
	if user != "" {
		hdr += "X-Skillfs-As: " + user + "\r\n"
	}
	if _, err := io.WriteString(conn, hdr+"\r\n"); err != nil {
		return a, err
	}
	go func() {
		cw := httputil.NewChunkedWriter(conn)
		if _, err := io.Copy(cw, body); err == nil {
			cw.Close()
			io.WriteString(conn, "\r\n")
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return a, fmt.Errorf("%s %s: no answer after %v: %w", method, path, time.Since(begin), err)
	}
	defer resp.Body.Close()
	a.status = resp.StatusCode
	a.body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	a.took = time.Since(begin)
	if a.status != http.StatusOK {
		json.Unmarshal(a.body, &a.err)
	}
	return a, nil
}

// checkRefusal checks an API refusal: the status, a JSON error body with
// the code that goes with it, and the substrings the message must hold.
func checkRefusal(t testing.TB, a apiAnswer, status int, want ...string) {
	t.Helper()
	codes := map[int]string{400: "invalid", 403: "permission", 404: "not_found", 409: "conflict"}
	if a.status != status {
		t.Errorf("status %d, want %d: %s", a.status, status, a)
		return
	}
	if a.err.Error == "" || a.err.Code != codes[status] {
		t.Errorf("body %q is not {\"error\",\"code\":%q}", bytes.TrimSpace(a.body), codes[status])
	}
	for _, w := range want {
		if !strings.Contains(a.err.Error, w) {
			t.Errorf("error does not name %q: %s", w, a.err.Error)
		}
	}
}

// textStream yields lines of UTF-8 text: n bytes, or endlessly when n < 0.
// It holds one 64 KiB block, whatever it yields.
type textStream struct{ n int64 }

var textBlock = func() []byte {
	line := []byte("All work and no play makes an agent a dull boy. Ünïcödé ✓\n")
	var b []byte
	for len(b) < 64<<10 {
		b = append(b, line...)
	}
	return b[:64<<10]
}()

func (s *textStream) Read(p []byte) (int, error) {
	if s.n == 0 {
		return 0, io.EOF
	}
	if len(p) > len(textBlock) {
		p = p[:len(textBlock)]
	}
	if s.n > 0 && int64(len(p)) > s.n {
		p = p[:s.n]
	}
	// Whole runes only: cut after the last newline that fits.
	k := copy(p, textBlock)
	if i := bytes.LastIndexByte(p[:k], '\n'); i >= 0 && (s.n < 0 || int64(k) < s.n) {
		k = i + 1
	}
	if s.n > 0 {
		s.n -= int64(k)
	}
	return k, nil
}

// zeroStream yields zero bytes, n of them or endlessly when n < 0.
type zeroStream struct{ n int64 }

func (s *zeroStream) Read(p []byte) (int, error) {
	if s.n == 0 {
		return 0, io.EOF
	}
	if s.n > 0 && int64(len(p)) > s.n {
		p = p[:s.n]
	}
	clear(p)
	if s.n > 0 {
		s.n -= int64(len(p))
	}
	return len(p), nil
}

// vmKB reads a field (VmRSS, VmHWM) of /proc/PID/status in KiB, or -1.
// sampleRSS samples the resident size of process pid every interval, in
// the background, until the returned stop is called; stop returns the
// highest seen, in KiB (VmHWM misses nothing between samples, but not
// every kernel lets a test reset it).
func sampleRSS(pid int, every time.Duration) (stop func() int64) {
	var peak atomic.Int64
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := vmKB(pid, "VmRSS"); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(every):
			}
		}
	}()
	return func() int64 {
		close(done)
		<-sampled
		return peak.Load()
	}
}

func vmKB(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// hostileSource is one special or oversized source.
type hostileSource struct {
	name     string
	path     string
	kind     string // what the message calls it
	dir      bool   // a directory holding the hostile SKILL.md
	editKind string // what `skill edit --from` says, when not kind
}

// makeHostileSources makes every special and oversized source below dir.
// The unix socket listens until the test ends.
func makeHostileSources(t *testing.T, dir string) []hostileSource {
	t.Helper()
	fifo := filepath.Join(dir, "pipe")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	fifoSkill := filepath.Join(dir, "fifo-skill")
	skilltest.WriteFile(t, filepath.Join(fifoSkill, "scripts", "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	if err := unix.Mkfifo(filepath.Join(fifoSkill, "SKILL.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirSkill := filepath.Join(dir, "dir-skill")
	skilltest.WriteFile(t, filepath.Join(dirSkill, "SKILL.md", "inner.md"), goodManifest("inner"), 0o644)
	// A lone SKILL.md one byte over the single-file limit: sparse (zeros),
	// and text, which `skill edit` would otherwise take.
	sparse := filepath.Join(dir, "huge.md")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64<<20 + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	text := filepath.Join(dir, "huge-text.md")
	f, err = os.Create(text)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("---\nname: huge-text\ndescription: A manifest one byte over the limit.\n---\n")
	st, _ := f.Stat()
	if _, err := io.Copy(f, &textStream{n: 64<<20 + 1 - st.Size()}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return []hostileSource{
		{"/dev/zero", "/dev/zero", "character device", false, ""},
		{"/dev/urandom", "/dev/urandom", "character device", false, ""},
		{"/dev/null", "/dev/null", "character device", false, ""},
		{"fifo without a writer", fifo, "fifo", false, ""},
		{"unix socket", sock, "socket", false, ""},
		// Edits take a file: a directory is refused as such.
		{"SKILL.md is a fifo", fifoSkill, "fifo", true, "is a directory"},
		{"SKILL.md is a directory", dirSkill, "SKILL.md", true, "is a directory"},
		// Edits take text: zeros are refused at the first byte.
		// As a lone SKILL.md both are over the manifest limit; as the
		// content of an edit, the text file is over the file limit.
		{"sparse file over the file limit", sparse, "manifest-bytes limit", false, "not UTF-8 text"},
		{"text file over the file limit", text, "manifest-bytes limit", false, "file-bytes limit"},
	}
}

// TestHostileSources sends every special and oversized source through
// every entry point that names a source, and endless or oversized bodies
// through every entry point that takes bytes: each is refused within
// seconds with the right code, a message naming the source as given, and
// nothing changed.
func TestHostileSources(t *testing.T) {
	e := newCatalogEnv(t)
	dir := t.TempDir() // the special sources, in an import root
	e.serve("--examples=false", "--import-root", dir)
	e.ok("user", "add", "alice")
	notes := filepath.Join(t.TempDir(), "notes")
	writeSkill(t, notes, "name: notes\ndescription: alice's notes", map[string]string{"tips.md": "one\n"})
	e.ok("skill", "import", notes, "--as", "alice")
	api := newHostileAPI(e.home)
	sources := makeHostileSources(t, dir)

	type entry struct {
		name string
		run  func(t *testing.T, src hostileSource) (code int, msg string)
		want func(src hostileSource) int // the code (exit code or HTTP status) a refusal has
	}
	cli := func(args ...string) func(t *testing.T, src hostileSource) (int, string) {
		return func(t *testing.T, src hostileSource) (int, string) {
			full := make([]string, len(args))
			for i, a := range args {
				full[i] = strings.ReplaceAll(a, "SRC", src.path)
			}
			r, _ := e.runBounded(hostileTimeout, nil, full...)
			return r.code, r.stdout + r.stderr
		}
	}
	draft := func(user string) func(t *testing.T, src hostileSource) (int, string) {
		return func(t *testing.T, src hostileSource) (int, string) {
			body, _ := json.Marshal(map[string]string{"source": src.path})
			a := api.send(t, "POST", "/v1/drafts", user, "application/json", nil, bytes.NewReader(body))
			if a.status != 200 && a.err.Code == "" {
				t.Errorf("not a JSON error: %s", a)
			}
			return a.status, a.err.Error
		}
	}
	always := func(c int) func(hostileSource) int { return func(hostileSource) int { return c } }
	entries := []entry{
		{"skill import", cli("skill", "import", "SRC"), always(5)},
		{"skill prepare", cli("skill", "prepare", "SRC"), always(5)},
		{"skill validate", cli("skill", "validate", "SRC"), always(1)},
		{"skill edit --from", cli("skill", "edit", "notes", "tips.md", "--from", "SRC"), always(5)},
		// /dev is never read through the API, whatever the roots.
		{"POST /v1/drafts as the operator", draft(""), func(src hostileSource) int {
			if strings.HasPrefix(src.path, "/dev/") {
				return 403
			}
			return 400
		}},
		{"POST /v1/drafts as a user", draft("alice"), always(403)},
	}
	tried, refused := 0, 0
	for _, src := range sources {
		for _, ep := range entries {
			t.Run(src.name+"/"+ep.name, func(t *testing.T) {
				tried++
				before := hostileState(t, e)
				begin := time.Now()
				code, msg := ep.run(t, src)
				took := time.Since(begin)
				if want := ep.want(src); code != want {
					t.Errorf("code %d, want %d:\n%s", code, want, msg)
				} else {
					refused++
				}
				if took > 10*time.Second {
					t.Errorf("refusal took %v", took)
				}
				checkNamesNoTemp(t, e, msg)
				switch {
				case ep.want(src) == 403:
					// Refused before the path is looked at.
					why := "admins only"
					if ep.name == "POST /v1/drafts as the operator" {
						why = "never /proc, /sys or /dev"
					}
					if !strings.Contains(msg, why) {
						t.Errorf("message does not say why (%s):\n%s", why, msg)
					}
				case ep.name == "skill validate":
					if !strings.Contains(msg, "error: ") {
						t.Errorf("validate lists no error:\n%s", msg)
					}
					fallthrough
				default:
					// Why, and the source as the user gave it; a
					// directory's problem names the file in it, and
					// what an edit refuses in the content names the
					// file being edited.
					kind, named := src.kind, src.path
					if ep.name == "skill edit --from" {
						if src.editKind != "" {
							kind = src.editKind
						}
						if kind == "file-bytes limit" || kind == "not UTF-8 text" {
							named = "tips.md"
						}
					} else if src.dir {
						named = "SKILL.md"
					}
					if !strings.Contains(msg, kind) {
						t.Errorf("message does not say %q:\n%s", kind, msg)
					}
					if !strings.Contains(msg, named) {
						t.Errorf("message does not name %q:\n%s", named, msg)
					}
				}
				checkUnchanged(t, e, before)
			})
		}
	}
	t.Logf("special and oversized sources: %d sources × %d entry points = %d tried, %d refused as expected (exit 5, validate exit 1, API 400/403), store unchanged",
		len(sources), len(entries), tried, refused)

	// Bytes rather than sources: standard input of `skill edit`, the
	// bodies of uploads and edits, endless or over the limit.
	dev := func(p string) func(t *testing.T) io.Reader {
		return func(t *testing.T) io.Reader {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}
	}
	endlessText := func(*testing.T) io.Reader { return &textStream{n: -1} }
	endlessZeros := func(*testing.T) io.Reader { return &zeroStream{n: -1} }
	bodies := []struct {
		name   string
		body   func(t *testing.T) io.Reader
		cli    bool // `skill edit notes tips.md` with body as stdin
		method string
		path   string
		ctype  string
		want   []string
	}{
		{"skill edit < /dev/zero", dev("/dev/zero"), true, "", "", "", []string{"tips.md", "not UTF-8 text"}},
		{"skill edit < /dev/urandom", dev("/dev/urandom"), true, "", "", "", []string{"tips.md", "not UTF-8 text"}},
		{"skill edit < endless text", endlessText, true, "", "", "", []string{"tips.md", "file-bytes limit"}},
		{"upload endless zeros as a ZIP", endlessZeros, false, "POST", "/v1/drafts?name=zeros.zip", "application/zip", []string{"zeros.zip", "total-bytes limit"}},
		{"upload endless text as a SKILL.md", endlessText, false, "POST", "/v1/drafts?name=SKILL.md", "text/markdown", []string{"SKILL.md", "manifest-bytes limit"}},
		{"upload endless zeros as a SKILL.md", endlessZeros, false, "POST", "/v1/drafts?name=zeros.md", "text/markdown", []string{"zeros.md", "manifest-bytes limit"}},
		{"PUT an endless text file", endlessText, false, "PUT", "/v1/skills/notes/files/tips.md", "text/plain", []string{"tips.md", "file-bytes limit"}},
		{"PUT endless zeros", endlessZeros, false, "PUT", "/v1/skills/notes/files/tips.md", "text/plain", []string{"tips.md", "not UTF-8 text"}},
		{"PUT 100 MB of text", func(*testing.T) io.Reader { return &textStream{n: 100e6} }, false, "PUT", "/v1/skills/notes/files/new.md", "text/plain", []string{"new.md", "file-bytes limit"}},
	}
	bodyRefused := 0
	for _, b := range bodies {
		t.Run(b.name, func(t *testing.T) {
			before := hostileState(t, e)
			var msg string
			var took time.Duration
			if b.cli {
				var r result
				r, took = e.runBounded(hostileTimeout, b.body(t), "skill", "edit", "notes", "tips.md")
				msg = r.stdout + r.stderr
				if r.code != 5 {
					t.Errorf("exit %d, want 5:\n%s", r.code, msg)
				} else {
					bodyRefused++
				}
			} else {
				a := api.stream(t, b.method, b.path, "alice", b.ctype, b.body(t))
				took, msg = a.took, a.err.Error
				n := t.Failed()
				checkRefusal(t, a, 400)
				if !n && !t.Failed() {
					bodyRefused++
				}
			}
			t.Logf("refused after %v: %s", took.Round(time.Millisecond), msg)
			if took > 10*time.Second {
				t.Errorf("refusal took %v", took)
			}
			for _, w := range b.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message does not name %q:\n%s", w, msg)
				}
			}
			checkNamesNoTemp(t, e, msg)
			checkUnchanged(t, e, before)
		})
	}
	t.Logf("endless and oversized bodies: %d tried (3 through `skill edit` stdin, 3 uploads, 3 edit PUTs), %d refused (exit 5 / 400), store unchanged", len(bodies), bodyRefused)

	checkDaemonServes(t, e, api, "")
}

// TestHostileConcurrentEdits sends eight 100 MB edits at once to a fresh
// daemon: each is streamed and cut at the limit, none is held in the
// daemon's memory. The daemon's RSS is sampled meanwhile and its peak
// reported.
func TestHostileConcurrentEdits(t *testing.T) {
	e := newCatalogEnv(t)
	d := e.serve("--examples=false")
	e.ok("user", "add", "alice")
	notes := filepath.Join(t.TempDir(), "notes")
	writeSkill(t, notes, "name: notes\ndescription: alice's notes", map[string]string{"tips.md": "one\n"})
	e.ok("skill", "import", notes, "--as", "alice")
	api := newHostileAPI(e.home)

	pid := d.cmd.Process.Pid
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Logf("cannot reset the peak RSS (%v): the sampled peak is reported", err)
	}
	base := vmKB(pid, "VmRSS")
	if base < 0 {
		t.Fatalf("no VmRSS for the daemon (pid %d)", pid)
	}
	stopSampling := sampleRSS(pid, 5*time.Millisecond)
	before := hostileState(t, e)
	var wg sync.WaitGroup
	answers := make([]apiAnswer, 8)
	errs := make([]error, 8)
	begin := time.Now()
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = api.tryStream("PUT", fmt.Sprintf("/v1/skills/notes/files/big%d.md", i), "alice", "text/markdown", &textStream{n: 100e6})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	peak := stopSampling()
	hwm := vmKB(pid, "VmHWM")
	for i, a := range answers {
		checkRefusal(t, a, 400, fmt.Sprintf("big%d.md", i), "file-bytes limit")
	}
	checkUnchanged(t, e, before)
	t.Logf("8 concurrent 100 MB edit PUTs refused in %v: daemon RSS %d MiB before, sampled peak %d MiB, VmHWM %d MiB (8 × 100 MB = 763 MiB)",
		took.Round(time.Millisecond), base>>10, peak>>10, hwm>>10)
	// Under the race detector memory is shadowed many times over: the
	// figure is reported, not judged.
	if most := max(peak, hwm); os.Getenv("SKILLFS_TEST_RACE") != "1" && (most > 200<<10 || most-base > 100<<10) {
		t.Errorf("the daemon's RSS reached %d MiB (from %d MiB) during 8 streamed edits", most>>10, base>>10)
	}
	checkDaemonServes(t, e, api, "")
}

// checkDaemonServes checks that the daemon still answers its health check
// and, given a session path, serves a read through the session's mount.
func checkDaemonServes(t testing.TB, e *env, api *hostileAPI, readPath string) {
	t.Helper()
	a := api.send(t, "GET", "/v1/health", "", "", nil, nil)
	if a.status != 200 || !bytes.Contains(a.body, []byte(`"ok": true`)) {
		t.Fatalf("health: %s", a)
	}
	if readPath != "" {
		if b, err := os.ReadFile(readPath); err != nil || len(b) == 0 {
			t.Fatalf("read %s through the mount: %v", readPath, err)
		}
	}
}

// hostileRequest is one request the daemon must refuse. Path and body may
// name {alice} and {bob} (their sessions), {alice-draft} and {bob-draft},
// {home} (the data directory), {dir} (a scratch directory), {fifo} and
// {link} (a symlink to a directory inside the data directory).
type hostileRequest struct {
	name   string
	method string
	path   string
	user   string // X-Skillfs-As; "" is the operator
	ctype  string // "" is application/json when there is a body
	body   string
	status int
	want   []string // each must appear in the error
	note   string   // a known gap, reported when the case fails
}

// TestHostileRequests sends requests that must be refused: malformed JSON,
// bodies over the cap, users that do not exist, paths that escape, other
// users' sessions, drafts and skills, scopes and dependencies that do not
// hold, mount targets the daemon must not touch. Each is refused with the
// right status and a JSON error, nothing changes, and the daemon keeps
// serving its API and its mounts.
func TestHostileRequests(t *testing.T) {
	e := newCatalogEnv(t)
	dir := t.TempDir() // an import root: the FIFO below lies in it
	e.serve("--examples=false", "--import-root", dir)
	api := newHostileAPI(e.home)
	e.ok("user", "add", "alice", "--department", "eng")
	e.ok("user", "add", "bob")
	e.ok("user", "add", "carol", "--role", "admin")
	src := t.TempDir()
	notes := filepath.Join(src, "notes")
	writeSkill(t, notes, "name: notes\ndescription: alice's notes", map[string]string{"tips.md": "one\n"})
	skilltest.WriteFile(t, filepath.Join(notes, "assets", "logo.png"), []byte("\x89PNG\r\n\x1a\n"), 0o644)
	e.ok("skill", "import", notes, "--as", "alice")
	notes2 := filepath.Join(src, "notes2")
	writeSkill(t, notes2, "name: notes2\ndescription: builds on notes\nskill_dependencies: [notes]", nil)
	e.ok("skill", "import", notes2, "--as", "alice")
	bobs := filepath.Join(src, "bobs")
	writeSkill(t, bobs, "name: bobs\ndescription: bob's own", map[string]string{"b.md": "b\n"})
	e.ok("skill", "import", bobs, "--as", "bob")
	rules := filepath.Join(src, "house-rules")
	writeSkill(t, rules, "name: house-rules\ndescription: the rules of the house", nil)
	e.ok("skill", "import", rules, "--builtin")
	alice := e.newSession("alice", "--skills", "notes")
	bob := e.newSession("bob", "--skills", "bobs")
	var aliceDraft, bobDraft struct {
		ID string `json:"draft"`
	}
	draftSrc := filepath.Join(src, "drafted")
	writeSkill(t, draftSrc, "name: drafted\ndescription: waits for confirmation", nil)
	for _, d := range []struct {
		user string
		out  any
	}{{"alice", &aliceDraft}, {"bob", &bobDraft}} {
		a := api.send(t, "POST", "/v1/drafts?name=drafted.zip", d.user, "application/zip", nil, bytes.NewReader(skilltest.ZipFS(t, os.DirFS(draftSrc), "drafted/")))
		if a.status != 200 || json.Unmarshal(a.body, d.out) != nil {
			t.Fatalf("%s prepares a draft: %s", d.user, a)
		}
	}
	fifo := filepath.Join(dir, "pipe")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "into-home")
	if err := os.Symlink(filepath.Join(e.home, "drafts"), link); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{alice}", alice.ID, "{bob}", bob.ID, "{alice-draft}", aliceDraft.ID,
		"{bob-draft}", bobDraft.ID, "{home}", e.home, "{dir}", dir, "{up}", strings.Repeat("/..", strings.Count(filepath.Clean(dir), "/")), "{fifo}", fifo, "{link}", link, "{target}", target)
	big := `{"text":"` + strings.Repeat("a", 2<<20) + `"}`

	cases := []hostileRequest{
		// Malformed bodies.
		{name: "JSON with trailing data", method: "PUT", path: "/v1/skills/notes/share", user: "alice",
			body: `{"read":"user:alice"}{"read":"global"}`, status: 400,
			note: "readJSON decodes the first value and ignores the rest (fixed in a parallel branch)"},
		{name: "JSON with an unknown field", method: "POST", path: "/v1/sessions", body: `{"user":"alice","skils":["notes"]}`, status: 400, want: []string{"unknown field", "skils"}},
		{name: "JSON with a wrong type", method: "POST", path: "/v1/sessions", body: `{"user":"alice","skills":"notes"}`, status: 400, want: []string{"skills"}},
		{name: "JSON with a wrong type in deps", method: "PUT", path: "/v1/skills/notes/deps", user: "alice", body: `{"skill_dependencies":{"a":1}}`, status: 400, want: []string{"skill_dependencies"}},
		{name: "JSON that is not an object", method: "POST", path: "/v1/sessions", body: `["alice"]`, status: 400, want: []string{"request body"}},
		// A session request without a user is answered as one for the
		// user "", who does not exist.
		{name: "JSON null", method: "POST", path: "/v1/sessions", body: `null`, status: 404, want: []string{`session user ""`}},
		{name: "empty body", method: "POST", path: "/v1/sessions", body: ``, status: 400, want: []string{"request body"}},
		{name: "a ZIP sent as JSON", method: "POST", path: "/v1/drafts", user: "alice", body: string(skilltest.ZipFS(t, os.DirFS(draftSrc), "drafted/")), status: 400, want: []string{"request body"}},
		{name: "2 MiB of JSON", method: "POST", path: "/v1/sessions/{alice}/mentions", body: big, status: 400, want: []string{"too large"}},
		// Who acts.
		{name: "acting as a user that does not exist", method: "POST", path: "/v1/skills/notes/disable", user: "mallory", status: 404, want: []string{"mallory", "not registered"}},
		{name: "a draft for a user that does not exist", method: "POST", path: "/v1/drafts", user: "mallory", body: `{"source":"{dir}"}`, status: 404, want: []string{"mallory"}},
		{name: "a session for a user that does not exist", method: "POST", path: "/v1/sessions", body: `{"user":"mallory","all":true}`, status: 404, want: []string{"mallory"}},
		{name: "a session with skills and all", method: "POST", path: "/v1/sessions", body: `{"user":"alice","skills":["notes"],"all":true}`, status: 400},
		{name: "a session without a user", method: "POST", path: "/v1/sessions", body: `{"skills":["notes"]}`, status: 404, want: []string{`session user ""`}},
		// Edits.
		{name: "edit path ..%2f..%2fetc%2fx.md", method: "PUT", path: "/v1/skills/notes/files/..%2f..%2fetc%2fx.md", user: "alice", ctype: "text/plain", body: "x\n", status: 400, want: []string{"parent directory"}},
		{name: "edit path %2e%2e/x.md", method: "PUT", path: "/v1/skills/notes/files/%2e%2e/x.md", user: "alice", ctype: "text/plain", body: "x\n", status: 400, want: []string{"x.md"}},
		{name: "edit path %252e%252e/x.md", method: "PUT", path: "/v1/skills/notes/files/%252e%252e/x.md", user: "alice", ctype: "text/plain", body: "x\n", status: 400, want: []string{"percent-encoded"}},
		{name: "edit path absolute %2fetc%2fx.md", method: "PUT", path: "/v1/skills/notes/files/%2fetc%2fx.md", user: "alice", ctype: "text/plain", body: "x\n", status: 400, want: []string{"absolute"}},
		{name: "edit path with a backslash", method: "PUT", path: "/v1/skills/notes/files/..%5c..%5cx.md", user: "alice", ctype: "text/plain", body: "x\n", status: 400, want: []string{"backslash"}},
		{name: "edit a reserved name", method: "PUT", path: "/v1/skills/notes/files/.skillfs-notes.md", user: "alice", ctype: "text/plain", body: "x\n", status: 400, want: []string{".skillfs-notes.md", "reserved"}},
		{name: "edit a builtin", method: "PUT", path: "/v1/skills/house-rules/files/SKILL.md", ctype: "text/plain", body: "---\nname: house-rules\ndescription: changed\n---\n", status: 403, want: []string{"house-rules"}},
		{name: "edit a binary extension", method: "PUT", path: "/v1/skills/notes/files/assets/logo.png", user: "alice", ctype: "image/png", body: "\x89PNG\r\n", status: 400, want: []string{"logo.png", "only text files"}},
		{name: "edit SKILL.md to change the slug", method: "PUT", path: "/v1/skills/notes/files/SKILL.md", user: "alice", ctype: "text/plain", body: "---\nname: stolen\ndescription: d\n---\n", status: 400, want: []string{"slug"}},
		{name: "edit another user's skill", method: "PUT", path: "/v1/skills/notes/files/tips.md", user: "bob", ctype: "text/plain", body: "bob was here\n", status: 404, want: []string{"notes"}},
		{name: "delete SKILL.md", method: "DELETE", path: "/v1/skills/notes/files/SKILL.md", user: "alice", status: 400, want: []string{"SKILL.md"}},
		// Sessions.
		{name: "resolve skill://notes/../bobs/b.md", method: "GET", path: "/v1/sessions/{alice}/resolve?uri=" + url.QueryEscape("skill://notes/../bobs/b.md"), status: 400, want: []string{"parent directory"}},
		{name: "resolve an encoded ..", method: "GET", path: "/v1/sessions/{alice}/resolve?uri=" + url.QueryEscape("skill://notes/%2e%2e/%2e%2e/%2e%2e/etc/passwd"), status: 400},
		{name: "resolve another session's skill", method: "GET", path: "/v1/sessions/{alice}/resolve?uri=" + url.QueryEscape("skill://bobs/b.md"), status: 404, want: []string{"bobs"}},
		{name: "resolve an absolute path", method: "GET", path: "/v1/sessions/{alice}/resolve?uri=" + url.QueryEscape("skill://notes//etc/passwd"), status: 400, want: []string{"absolute"}},
		{name: "a session that does not exist", method: "GET", path: "/v1/sessions/0123456789abcdef0123456789abcdef/activations", status: 404},
		{name: "a session id with a traversal", method: "POST", path: "/v1/sessions/..%2f..%2f{alice}/refresh", status: 404},
		{name: "mount inside the data directory", method: "POST", path: "/v1/sessions/{alice}/mounts", body: `{"target":"{home}/drafts"}`, status: 400, want: []string{"data directory"}},
		{name: "mount into the data directory through ..", method: "POST", path: "/v1/sessions/{alice}/mounts", body: `{"target":"{dir}{up}{home}/drafts"}`, status: 400, want: []string{"data directory"}},
		{name: "mount into the data directory through a symlink", method: "POST", path: "/v1/sessions/{alice}/mounts", body: `{"target":"{link}"}`, status: 400, want: []string{"data directory"}},
		{name: "mount on a relative target", method: "POST", path: "/v1/sessions/{alice}/mounts", body: `{"target":"sandbox/skills"}`, status: 400, want: []string{"absolute"}},
		{name: "mount with a negative pid", method: "POST", path: "/v1/sessions/{alice}/mounts", body: `{"target":"{target}","pid":-1}`, status: 400, want: []string{"pid"}},
		{name: "unmount with a pid that is not a number", method: "DELETE", path: "/v1/sessions/{alice}/mounts?target={target}&pid=x", status: 400, want: []string{"pid"}},
		// Drafts.
		{name: "delete another user's draft", method: "DELETE", path: "/v1/drafts/{bob-draft}", user: "alice", status: 404},
		{name: "confirm another user's draft", method: "POST", path: "/v1/drafts/{bob-draft}/confirm", user: "alice", body: `{}`, status: 404},
		{name: "confirm with an invalid share scope", method: "POST", path: "/v1/drafts/{alice-draft}/confirm", user: "alice", body: `{"share":"galaxy"}`, status: 400, want: []string{"galaxy"}},
		{name: "a draft id with a traversal", method: "DELETE", path: "/v1/drafts/..%2f..%2fstore", status: 404},
		{name: "a local-path draft by an ordinary user", method: "POST", path: "/v1/drafts", user: "alice", body: `{"source":"/etc"}`, status: 403, want: []string{"admins only"}},
		{name: "a missing local path by an ordinary user", method: "POST", path: "/v1/drafts", user: "alice", body: `{"source":"/no/such/skill"}`, status: 403, want: []string{"admins only"}},
		{name: "a file:// draft by an ordinary user", method: "POST", path: "/v1/drafts", user: "alice", body: `{"source":"file:///etc#main"}`, status: 403, want: []string{"admins only"}},
		{name: "a FIFO path as an admin", method: "POST", path: "/v1/drafts", user: "carol", body: `{"source":"{fifo}"}`, status: 400, want: []string{"{fifo}", "fifo"}},
		{name: "an upload named ../../x.zip", method: "POST", path: "/v1/drafts?name=..%2f..%2fx.zip", user: "alice", ctype: "application/zip", body: string(skilltest.ZipFS(t, os.DirFS(draftSrc), "drafted/")), status: 400, want: []string{"plain file name"}},
		// Catalog.
		{name: "an invalid share scope", method: "PUT", path: "/v1/skills/notes/share", user: "alice", body: `{"read":"department:"}`, status: 400},
		{name: "an unknown share kind", method: "PUT", path: "/v1/skills/notes/share", user: "alice", body: `{"read":"planet:earth"}`, status: 400, want: []string{"planet"}},
		{name: "deps with a cycle", method: "PUT", path: "/v1/skills/notes/deps", user: "alice", body: `{"skill_dependencies":["notes2"]}`, status: 400, want: []string{"cycle"}},
		{name: "deps on itself", method: "PUT", path: "/v1/skills/notes/deps", user: "alice", body: `{"skill_dependencies":["notes"]}`, status: 400},
		{name: "deps on an unregistered tool", method: "PUT", path: "/v1/skills/notes/deps", user: "alice", body: `{"tool_dependencies":["no-such-tool"]}`, status: 400, want: []string{"no-such-tool"}},
		{name: "deps on another user's skill", method: "PUT", path: "/v1/skills/notes/deps", user: "alice", body: `{"skill_dependencies":["bobs"]}`, status: 400, want: []string{"bobs"}},
		{name: "delete another user's skill", method: "DELETE", path: "/v1/skills/notes", user: "bob", status: 404},
		{name: "disable a builtin as a user", method: "POST", path: "/v1/skills/house-rules/disable", user: "alice", status: 403},
		{name: "export another user's skill", method: "GET", path: "/v1/skills/bobs/export", user: "alice", status: 404},
	}
	if len(cases) < 20 {
		t.Fatalf("%d hostile requests, want at least 20", len(cases))
	}
	state := func() string {
		a := api.send(t, "GET", "/v1/sessions", "", "", nil, nil)
		if a.status != 200 {
			t.Fatalf("list sessions: %s", a)
		}
		return hostileState(t, e) + "\nsessions: " + string(a.body)
	}
	read := filepath.Join(alice.Path, "notes", "tips.md")
	refused, gaps := 0, []string{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := state()
			var body io.Reader
			ctype := tc.ctype
			if tc.body != "" {
				body = strings.NewReader(fill.Replace(tc.body))
				if ctype == "" {
					ctype = "application/json"
				}
			}
			a := api.send(t, tc.method, fill.Replace(tc.path), tc.user, ctype, nil, body)
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = fill.Replace(w)
			}
			failed := t.Failed()
			checkRefusal(t, a, tc.status, want...)
			if after := state(); after != before {
				t.Errorf("state changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			checkNoLeftovers(t, e)
			checkDaemonServes(t, e, api, read)
			if !failed && !t.Failed() {
				refused++
			} else if tc.note != "" {
				gaps = append(gaps, tc.name+": "+tc.note)
				t.Logf("known gap: %s", tc.note)
			}
			t.Logf("%d %s", a.status, a.err.Error)
		})
	}
	t.Logf("hostile requests: %d tried, %d refused with the right status and a JSON error, nothing changed, health and mount reads served after each", len(cases), refused)
	for _, g := range gaps {
		t.Logf("known gap: %s", g)
	}
}
