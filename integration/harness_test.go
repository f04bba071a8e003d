// Package integration holds black-box tests: they build the real skillfs
// binary, run it against a data directory in a temporary folder, mount real
// FUSE filesystems and read them like an agent would.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/fs/fusetest"
	"skillfs/index/pgtest"
	"skillfs/skills/skilltest"
)

// binary is the skillfs built once for the whole package.
var binary string

// contract is the daemon's OpenAPI document, which every request of the
// API clients is checked against.
var contract *apitest.Contract

// openAPIFile is the document in the source tree; the daemon embeds it.
const openAPIFile = "../cmd/skillfs/api/openapi.json"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "skillfs-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "skillfs")
	args := []string{"build", "-o", binary}
	if os.Getenv("SKILLFS_TEST_RACE") == "1" {
		args = append(args, "-race") // the daemon under the race detector
	}
	build := exec.Command("go", append(args, "../cmd/skillfs")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build skillfs:", err)
		os.Exit(1)
	}
	data, err := os.ReadFile(openAPIFile)
	if err == nil {
		contract, err = apitest.Load(data)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	pgtest.Shutdown()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireCommand does the same for an external program.
func requireCommand(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not installed, and CI=true: this test must run", name)
	}
	t.Skipf("%s not installed", name)
	return ""
}

// env is one data directory, and the shared index it uses if any.
type env struct {
	t     testing.TB
	home  string
	index string // --index of every command and daemon; "" for the data directory's own
}

// indexBackendEnv picks the index every test's data directory uses:
// "postgres" runs the whole suite with each data directory on a fresh
// PostgreSQL database of its own (a fleet of one host); unset, each has its
// own SQLite file.
const indexBackendEnv = "SKILLFS_TEST_INDEX"

// onPostgres reports whether the suite runs on PostgreSQL.
func onPostgres() bool { return os.Getenv(indexBackendEnv) == "postgres" }

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, home: filepath.Join(t.TempDir(), "home")}
	if onPostgres() {
		e.index = pgtest.Database(t)
	}
	return e
}

// ownIndexOnly skips a test of what only a data directory's own SQLite index
// has (its file, its repair) when the suite runs on PostgreSQL.
func ownIndexOnly(t testing.TB, why string) {
	t.Helper()
	if onPostgres() {
		t.Skipf("on a shared index: %s", why)
	}
}

// environ is the environment of the CLI and daemon of e: the process's,
// with e's shared index and vars added.
func (e *env) environ(vars []string) []string {
	if e.index == "" && vars == nil {
		return nil
	}
	out := os.Environ()
	if e.index != "" {
		out = append(out, "SKILLFS_INDEX="+e.index)
	}
	return append(out, vars...)
}

// result is what one CLI run produced.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the CLI against the env's data directory.
func (e *env) run(args ...string) result {
	e.t.Helper()
	return e.runIn(nil, args...)
}

func (e *env) runIn(stdin io.Reader, args ...string) result {
	e.t.Helper()
	return e.runWith(stdin, nil, args...)
}

// runEnv runs the CLI with extra environment variables (NAME=value).
func (e *env) runEnv(vars []string, args ...string) result {
	e.t.Helper()
	return e.runWith(nil, vars, args...)
}

// command is the CLI run on e's data directory (and shared index), bound
// to ctx.
func (e *env) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, append([]string{"--home", e.home}, args...)...)
	cmd.Env = e.environ(nil)
	return cmd
}

func (e *env) runWith(stdin io.Reader, vars []string, args ...string) result {
	e.t.Helper()
	cmd := exec.Command(binary, append([]string{"--home", e.home}, args...)...)
	cmd.Env = e.environ(vars)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, stdin
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run skillfs %v: %v", args, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// ok runs the CLI and fails the test unless it exits 0.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("skillfs %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// okJSON runs the CLI with --json and decodes its output.
func (e *env) okJSON(v any, args ...string) {
	e.t.Helper()
	out := e.ok(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("skillfs %s --json: decode %q: %v", strings.Join(args, " "), out, err)
	}
}

// daemon is a running `skillfs serve`.
type daemon struct {
	t     testing.TB
	cmd   *exec.Cmd
	mount string
	mu    sync.Mutex
	log   bytes.Buffer
	done  chan struct{}
	err   error
}

// serve starts the daemon and waits for its readiness line. It is stopped
// with SIGTERM at the end of the test if still running.
func (e *env) serve(extra ...string) *daemon {
	e.t.Helper()
	return e.serveUnder(nil, extra...)
}

// serveWithFileLimit is serve with the daemon's open file limit (soft and
// hard) set to n before it starts, as a service manager's LimitNOFILE=.
func (e *env) serveWithFileLimit(n int, extra ...string) *daemon {
	e.t.Helper()
	return e.serveUnder([]string{"sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, n)}, extra...)
}

// serveUnder is serve run by the command wrap, which is given the binary
// and its arguments to exec (nil: run the binary itself).
func (e *env) serveUnder(wrap []string, extra ...string) *daemon {
	e.t.Helper()
	fusetest.Require(e.t)
	args := append([]string{binary, "--home", e.home, "serve"}, extra...)
	args = append(wrap, args...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = e.environ(nil)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	d := &daemon{t: e.t, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &d.mu, w: &d.log}
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start skillfs serve: %v", err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "skillfs ready: mount ") {
				f := strings.Fields(line)
				ready <- f[3]
			}
		}
	}()
	go func() { d.err = cmd.Wait(); close(d.done) }()
	e.t.Cleanup(func() { d.stop() })
	select {
	case m := <-ready:
		d.mount = m
	case <-d.done:
		e.t.Fatalf("skillfs serve exited before ready: %v\n%s", d.err, d.logs())
	case <-time.After(30 * time.Second):
		d.kill()
		e.t.Fatalf("skillfs serve not ready after 30s\n%s", d.logs())
	}
	return d
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (d *daemon) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// stop sends SIGTERM and returns the exit code.
func (d *daemon) stop() int {
	select {
	case <-d.done:
	default:
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(20 * time.Second):
			d.kill()
			d.t.Errorf("%s did not stop within 20s of SIGTERM\n%s", strings.Join(d.cmd.Args[1:], " "), d.logs())
		}
	}
	return d.cmd.ProcessState.ExitCode()
}

// kill is a crash: SIGKILL, nothing cleaned up.
func (d *daemon) kill() {
	d.cmd.Process.Kill()
	<-d.done
}

// mountedUnder lists FUSE mounts at or below dir.
func mountedUnder(t testing.TB, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// writeSkill writes a skill folder: a SKILL.md of the frontmatter and an
// "# Instructions" heading, and extra files (name → content; a name ending
// in ".sh" is made executable).
func writeSkill(t testing.TB, dir, frontmatter string, files map[string]string) {
	t.Helper()
	skilltest.WriteDir(t, dir, skilltest.Skill(frontmatter, "\n# Instructions\n", files))
}

// ctxT is a context bounded by the test's deadline.
func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fetch reads a file through a session's mount with the kernel's cached
// pages of it dropped first, so that the read reaches skillfs, which counts
// it when the file is a SKILL.md (a read served from the kernel's cache is
// not seen; see "Activation" in the README).
func fetch(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}
