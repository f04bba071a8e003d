// Package pgtest runs a throwaway PostgreSQL server for tests: one per test
// binary, started when a test first asks for a database, listening on
// loopback only, with its data in a temporary directory that goes with it.
// Each caller of Database gets a fresh, empty database of its own.
//
// A test binary that uses it calls Main from its TestMain, so the server
// stops and its directory goes when the tests are done (without Main the
// server still dies with the test binary, but its directory stays). Tests
// that use Server's Stop and Start, to test an outage, must not run in
// parallel with other tests of the binary that use the server. The server is the postgres program of the
// newest PostgreSQL installed (Debian: /usr/lib/postgresql/N/bin); when
// there is none, or it cannot start, tests that need it are skipped, or fail
// when CI=true, since CI must run them.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// superuser is the role initdb makes; it owns every test database.
const superuser = "skillfs"

// startTimeout bounds how long a start may take before it counts as failed.
const startTimeout = 60 * time.Second

// Srv is the test binary's PostgreSQL server.
type Srv struct {
	dir  string // the temporary directory: data, socket, log
	bin  string // the directory of initdb and postgres
	port int
	cred *syscall.Credential // whom the server runs as; nil: this process's user

	mu  sync.Mutex
	cmd *exec.Cmd     // the running postmaster, nil when stopped
	end chan struct{} // closed when cmd has exited
}

var (
	once    sync.Once
	srv     *Srv
	srvErr  error
	created atomic.Int64 // databases made, for their names
)

// Server returns the test binary's server, starting it on first use. When
// PostgreSQL is missing or does not start, it skips the test (fails it
// under CI=true) saying why.
func Server(t testing.TB) *Srv {
	t.Helper()
	once.Do(func() { srv, srvErr = start() })
	if srvErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is needed under CI=true: %v", srvErr)
		}
		t.Skipf("no PostgreSQL to test against: %v", srvErr)
	}
	return srv
}

// Database makes a fresh, empty database on the test binary's server and
// returns its URL; the database is dropped when the test ends.
func Database(t testing.TB) string {
	t.Helper()
	s := Server(t)
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), created.Add(1))
	// Root collation ("und"), not C: the index must not rely on the
	// database's default collation to order its keys as the program does.
	if err := s.admin(fmt.Sprintf(`CREATE DATABASE %s TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE 'und'`, name)); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		if err := s.admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return s.URL(name)
}

// Main runs the tests of m and then stops the server, if one was started,
// and removes its directory. TestMain calls it.
func Main(m *testing.M) {
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

// Shutdown stops the server, if one was started, and removes its
// directory: for a TestMain that has more to do after the tests than Main.
func Shutdown() {
	if srv != nil {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop:", err)
		}
		os.RemoveAll(srv.dir)
	}
}

// URL is the address of database name on the server, for the superuser.
func (s *Srv) URL(name string) string {
	u := url.URL{Scheme: "postgres", User: url.User(superuser), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path: "/" + name, RawQuery: "sslmode=disable"}
	return u.String()
}

// Port is the loopback TCP port the server listens on; it stays the same
// across Stop and Start.
func (s *Srv) Port() int { return s.port }

// DataDir is the server's data directory.
func (s *Srv) DataDir() string { return filepath.Join(s.dir, "data") }

// Running reports whether the server is started.
func (s *Srv) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// admin runs one statement in the maintenance database.
func (s *Srv) admin(stmt string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, stmt)
	return err
}

// start makes the data directory and starts the server on a free port.
func start() (*Srv, error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Srv{dir: dir, bin: bin}
	if err := s.init(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// A port found free may be taken before the server binds it: try again
	// with another.
	for attempt := 0; ; attempt++ {
		if s.port, err = freePort(); err == nil {
			if err = s.Start(); err == nil {
				return s, nil
			}
		}
		if attempt == 2 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// findBin returns the bin directory of the newest PostgreSQL installed, or
// the directory of initdb on PATH.
func findBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			found = append(found, d)
		}
	}
	if len(found) > 0 {
		version := func(d string) int {
			v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			return v
		}
		sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
		return found[0], nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL is not installed (Debian: apt-get install postgresql)")
}

// init runs initdb. PostgreSQL refuses to run as root, so as root the
// directory is given to the postgres user and everything runs as it.
func (s *Srv) init() error {
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root and there is no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
	}
	cmd := s.command("initdb", "-D", s.DataDir(), "-A", "trust", "-U", superuser, "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	return nil
}

// command is program of the PostgreSQL installation, run as the server's
// user in the server's directory.
func (s *Srv) command(program string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, program), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

// Start starts the server (again, after Stop) and waits until it takes
// connections. The postmaster is a child of the test binary that the
// kernel stops if the test binary dies, so no server outlives its tests.
func (s *Srv) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := s.command("postgres", "-D", s.DataDir(), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = log, log
	// SIGQUIT is PostgreSQL's immediate shutdown.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	end := make(chan struct{})
	go func() { cmd.Wait(); close(end) }()
	if err := s.waitReady(end); err != nil {
		cmd.Process.Signal(syscall.SIGQUIT)
		<-end
		return fmt.Errorf("%w; server log:\n%s", err, s.logTail())
	}
	s.cmd, s.end = cmd, end
	return nil
}

// waitReady waits until the server takes connections, or has exited.
func (s *Srv) waitReady(end <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-end:
			return errors.New("postgres exited while starting")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not take connections within %v: %v", startTimeout, err)
		}
	}
}

// Stop stops the server (a fast shutdown: sessions are ended, committed
// data stays) and waits until it has exited. Start starts it again on the
// same port with the same data.
func (s *Srv) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		return err
	}
	select {
	case <-s.end:
	case <-time.After(startTimeout):
		s.cmd.Process.Kill()
		<-s.end
		return errors.New("postgres did not stop: killed")
	}
	s.cmd, s.end = nil, nil
	return nil
}

// logTail is the end of the server's log, for errors.
func (s *Srv) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
