package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startKeeperProc starts `skillfs keeper --socket sock` and waits until
// it listens; the test's end stops it (SIGTERM) if it still runs. It is
// stopped and killed as a daemon is.
func startKeeperProc(t *testing.T, sock string) *daemon {
	t.Helper()
	k := &daemon{t: t, cmd: exec.Command(binary, "keeper", "--socket", sock), done: make(chan struct{})}
	k.cmd.Stderr = &lockedWriter{mu: &k.mu, w: &k.log}
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := k.cmd.Start(); err != nil {
		t.Fatalf("start skillfs keeper: %v", err)
	}
	go func() { k.err = k.cmd.Wait(); close(k.done) }()
	t.Cleanup(func() { k.stop() })
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(k.logs(), "keeper listening"); time.Sleep(5 * time.Millisecond) {
		select {
		case <-k.done:
			t.Fatalf("skillfs keeper exited: %v\n%s", k.err, k.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("skillfs keeper does not listen after 10s\n%s", k.logs())
		}
	}
	return k
}

// loopReader reads every file of a skill, through a sandbox's bind, in a
// loop: each read with the kernel's cached pages dropped first, so that it
// reaches the daemon, and checked against the bytes the skill holds.
type loopReader struct {
	dir   string            // the skill's folder as the sandbox's bind shows it
	files map[string][]byte // name → content
	stop  chan struct{}
	done  chan struct{}

	mu    sync.Mutex
	reads []span // every read, in order
	errs  []string
	skill int // reads of SKILL.md
}

// span is one read: when it began and ended.
type span struct{ start, end time.Time }

func startLoopReader(dir string, files map[string][]byte) *loopReader {
	r := &loopReader{dir: dir, files: files, stop: make(chan struct{}), done: make(chan struct{})}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	go func() {
		defer close(r.done)
		for {
			for _, name := range names {
				select {
				case <-r.stop:
					return
				default:
				}
				start := time.Now()
				got, err := fetch(filepath.Join(dir, name))
				end := time.Now()
				r.mu.Lock()
				r.reads = append(r.reads, span{start, end})
				if name == "SKILL.md" {
					r.skill++
				}
				switch {
				case err != nil:
					r.errs = append(r.errs, fmt.Sprintf("%s at %s: %v", name, start.Format(time.StampMilli), err))
				case !bytes.Equal(got, files[name]):
					r.errs = append(r.errs, fmt.Sprintf("%s at %s: %d bytes, not the %d the skill holds", name, start.Format(time.StampMilli), len(got), len(files[name])))
				}
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// count is how many reads completed.
func (r *loopReader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reads)
}

// waitReads waits until n more reads completed than now.
func (r *loopReader) waitReads(t *testing.T, n int) {
	t.Helper()
	want := r.count() + n
	for deadline := time.Now().Add(30 * time.Second); r.count() < want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the reader made %d reads, want %d within 30s; errors: %v", r.count(), want, r.errors())
		}
	}
}

func (r *loopReader) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// pauseAcross returns the longest read that spans the instant at (began
// before it and ended after it), and whether there is one: a read that
// waited through the outage.
func (r *loopReader) pauseAcross(at time.Time) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var longest time.Duration
	found := false
	for _, s := range r.reads {
		if s.start.Before(at) && s.end.After(at) {
			found = true
			longest = max(longest, s.end.Sub(s.start))
		}
	}
	return longest, found
}

func (r *loopReader) close() {
	close(r.stop)
	<-r.done
}

// outage is one restart of the daemon under a reader.
type outage struct {
	how       string
	down      time.Time     // when the daemon stopped serving
	toServing time.Duration // from the new daemon's start to its readiness line
	pause     time.Duration // the reader's longest read across it
}

// TestKeeperKeepsReadersThroughRestarts: with `skillfs keeper` holding the
// FUSE connection, a sandbox reading a skill in a loop (every read
// reaching the daemon) sees no failure through kill -9 of the daemon twice
// and a SIGTERM, each followed by a restart: every read returns the skill's
// bytes, the reads in flight wait and complete, neither the sandbox's bind
// nor one in the daemon's own namespace is made again (the session's API
// socket in the sandbox is), and the activations are exact. The keeper killed while the
// daemon runs costs nothing (the daemon gives its connection to the next
// keeper); the keeper gone and then the daemon killed ends the mount
// (ENOTCONN), and the next start mounts afresh and binds the sandbox again.
// SIGINT is a real stop: nothing stays mounted.
func TestKeeperKeepsReadersThroughRestarts(t *testing.T) {
	e := newEnv(t)
	// A bind in the daemon's own namespace too, as a CSI target is.
	podDir := t.TempDir()
	// Registered first, so it runs last: whatever a failure leaves mounted
	// with a keeper (a detached mount outlives its daemon) is unmounted.
	t.Cleanup(func() {
		for _, m := range slices.Backward(append(mountedUnder(t, e.home), mountedUnder(t, podDir)...)) {
			t.Errorf("left mounted: %s", m)
			unix.Unmount(m, unix.MNT_DETACH)
		}
	})
	sock := filepath.Join(t.TempDir(), "keeper.sock")
	k := startKeeperProc(t, sock)
	serve := func() (*daemon, time.Duration) {
		start := time.Now()
		d := e.serve("--keeper", sock)
		took := time.Since(start)
		waitLog(t, d, "msg=serving ") // the log up to the readiness line is in
		return d, took
	}
	d, first := serve()
	if !strings.Contains(d.logs(), "resumed=false") {
		t.Fatalf("the first start does not say it mounted anew:\n%s", d.logs())
	}

	// A skill of many files with bytes of their own.
	rng := rand.New(rand.NewPCG(21, 2))
	files := map[string][]byte{"SKILL.md": []byte("---\nname: kept-reads\ndescription: read through restarts\n---\n\n# Instructions\n")}
	src := filepath.Join(t.TempDir(), "kept-reads")
	for i := range 12 {
		b := make([]byte, 16<<10+rng.IntN(64<<10))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		files[fmt.Sprintf("references/part-%02d.bin", i)] = b
	}
	for name, b := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.ok("skill", "import", src, "--share", "global")
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "kept-reads,release-notes")
	pid := startSandbox(t)
	inside := "/proc/" + strconv.Itoa(pid) + "/root/home/gem/skills"
	e.ok("session", "mount", s.ID, "/home/gem/skills", "--pid", strconv.Itoa(pid), "--api-socket", "/home/gem/.skillfs.sock")
	// The session's API socket in the sandbox dies with each daemon; the
	// restart makes it again beside the kept bind.
	apiSocket := "/proc/" + strconv.Itoa(pid) + "/root/home/gem/.skillfs.sock"
	socketAnswers := func(when string) {
		t.Helper()
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", apiSocket)
			}}}
		resp, err := hc.Get("http://skillfs/v1/sessions/" + s.ID + "/activations")
		if err != nil {
			t.Fatalf("%s: the session's API socket: %v", when, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: the session's API socket answers %d", when, resp.StatusCode)
		}
	}
	socketAnswers("bound")
	target := filepath.Join(podDir, "target")
	e.ok("session", "mount", s.ID, target)
	r := startLoopReader(filepath.Join(inside, "kept-reads"), files)
	defer func() {
		select {
		case <-r.done:
		default:
			r.close()
		}
	}()
	r.waitReads(t, 2*len(files))
	before := e.activationsOf(s.ID)
	if len(before.Activated) != 1 || before.Activated[0].Slug != "kept-reads" {
		t.Fatalf("activations before the restarts: %+v", before.Activated)
	}

	var outages []outage
	restart := func(how string, stop func()) {
		t.Helper()
		r.waitReads(t, len(files))
		down := time.Now()
		stop()
		time.Sleep(300 * time.Millisecond) // the reader meets a mount nobody serves
		var took time.Duration
		d, took = serve()
		r.waitReads(t, 2*len(files))
		pause, ok := r.pauseAcross(down.Add(150 * time.Millisecond))
		if !ok {
			t.Fatalf("%s: no read waited through the outage (did reads reach the daemon?)", how)
		}
		if !strings.Contains(d.logs(), "resumed=true") {
			t.Fatalf("%s: the restart did not resume the kept connection:\n%s", how, d.logs())
		}
		if strings.Contains(d.logs(), "session rebound") {
			t.Fatalf("%s: the sandbox was bound again, not kept:\n%s", how, d.logs())
		}
		if strings.Count(d.logs(), "bind kept across the restart") != 2 {
			t.Fatalf("%s: the restart does not say it kept both binds, the sandbox's and its own namespace's:\n%s", how, d.logs())
		}
		outages = append(outages, outage{how: how, down: down, toServing: took, pause: pause})
	}
	restart("kill -9", d.kill)
	restart("kill -9 again", d.kill)
	restart("SIGTERM", func() {
		if code := d.stop(); code != 0 {
			t.Fatalf("SIGTERM: exit %d\n%s", code, d.logs())
		}
		if !strings.Contains(d.logs(), "mount detached") {
			t.Fatalf("SIGTERM with a keeper did not leave the mount to it:\n%s", d.logs())
		}
	})
	if errs := r.errors(); len(errs) > 0 {
		t.Fatalf("%d reads failed through the restarts, the first: %s", len(errs), strings.Join(errs[:min(5, len(errs))], "\n"))
	}
	t.Logf("first start to serving: %v (command: go test ./integration -run TestKeeperKeepsReadersThroughRestarts -v)", first.Round(time.Millisecond))
	for _, o := range outages {
		t.Logf("%-14s the daemon back to serving in %v; the reader's longest read across it %v (300 ms of it the daemon was down on purpose)",
			o.how+":", o.toServing.Round(time.Millisecond), o.pause.Round(time.Millisecond))
	}
	checkKept(t, e, true)
	socketAnswers("after the restarts")
	if got, err := fetch(filepath.Join(target, "kept-reads", "SKILL.md")); err != nil || !bytes.Equal(got, files["SKILL.md"]) {
		t.Fatalf("the bind in the daemon's namespace after the restarts reads %q, %v", got, err)
	}
	after := e.activationsOf(s.ID)
	r.mu.Lock()
	skillReads := r.skill
	r.mu.Unlock()
	if len(after.Activated) != 1 || after.Activated[0].Slug != "kept-reads" || !after.Activated[0].FirstAt.Equal(before.Activated[0].FirstAt) ||
		after.Activated[0].Opens < before.Activated[0].Opens || after.Activated[0].Opens > skillReads+len(outages) {
		t.Fatalf("activations after the restarts: %+v; want kept-reads alone, first at %v, opens between %d and %d",
			after.Activated, before.Activated[0].FirstAt, before.Activated[0].Opens, skillReads+len(outages))
	}

	// The keeper killed while the daemon runs: the daemon gives its
	// connection to the next keeper, and a crash after that is as before.
	k.kill()
	k = startKeeperProc(t, sock)
	waitLog(t, d, "connection given again to a keeper")
	checkKept(t, e, true)
	restart("keeper replaced, then kill -9", d.kill)
	if errs := r.errors(); len(errs) > 0 {
		t.Fatalf("%d reads failed through a keeper's restart, the first: %s", len(errs), errs[0])
	}
	o := outages[len(outages)-1]
	t.Logf("%-14s the daemon back to serving in %v; the reader's longest read across it %v", "keeper replaced, kill -9:", o.toServing.Round(time.Millisecond), o.pause.Round(time.Millisecond))
	r.close()

	// The keeper gone and the daemon killed: the connection ends, as
	// documented; the next start mounts afresh and binds the sandbox again.
	k.kill()
	waitLog(t, d, "keeper unreachable")
	var st struct {
		Keeper *struct {
			Holds bool   `json:"holds"`
			Error string `json:"error"`
		} `json:"keeper"`
	}
	e.okJSON(&st, "status")
	if st.Keeper == nil || st.Keeper.Holds || !strings.Contains(st.Keeper.Error, "does not answer") {
		t.Fatalf("status with the keeper gone: %+v", st.Keeper)
	}
	d.kill()
	if _, err := os.ReadDir(filepath.Join(inside, "kept-reads")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("keeper and daemon gone: the sandbox reads %v, want ENOTCONN", err)
	}
	k = startKeeperProc(t, sock)
	d, _ = serve()
	if !strings.Contains(d.logs(), "resumed=false") || !strings.Contains(d.logs(), "session rebound") {
		t.Fatalf("after keeper and daemon were gone, the start did not mount anew and bind again:\n%s", d.logs())
	}
	if got, err := fetch(filepath.Join(inside, "kept-reads", "SKILL.md")); err != nil || !bytes.Equal(got, files["SKILL.md"]) {
		t.Fatalf("the sandbox after a fresh mount reads %q, %v", got, err)
	}

	// SIGINT is a real stop, keeper or not: the mount and the sandbox's
	// bind end.
	d.cmd.Process.Signal(os.Interrupt)
	<-d.done
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("SIGINT: exit %d\n%s", code, d.logs())
	}
	if m := append(mountedUnder(t, e.home), mountedUnder(t, podDir)...); len(m) != 0 {
		t.Fatalf("mounts left after SIGINT: %v", m)
	}
	if names, err := os.ReadDir(inside); err != nil || len(names) != 0 {
		t.Fatalf("after SIGINT the sandbox sees %v, %v; want its empty folder", names, err)
	}
	if code := k.stop(); code != 0 {
		t.Fatalf("keeper: SIGTERM exit %d\n%s", code, k.logs())
	}
	if !strings.Contains(k.logs(), "keeper: dropped") && !strings.Contains(k.logs(), "connection ended") {
		t.Errorf("the keeper does not say the mount's connection went:\n%s", k.logs())
	}
}

// checkKept checks what `skillfs status` says of the keeper: that it holds
// the mount's connection, and whether this start resumed it.
func checkKept(t *testing.T, e *env, resumed bool) {
	t.Helper()
	var st struct {
		Keeper *struct {
			Resumed bool   `json:"resumed"`
			Holds   bool   `json:"holds"`
			Error   string `json:"error"`
		} `json:"keeper"`
	}
	e.okJSON(&st, "status")
	if st.Keeper == nil || !st.Keeper.Holds || st.Keeper.Resumed != resumed {
		t.Fatalf("status of the keeper: %+v, want it holding the connection, resumed %t", st.Keeper, resumed)
	}
}

// TestKeeperUnreachable: serve --keeper with no keeper listening refuses to
// start, saying so, and touches nothing.
func TestKeeperUnreachable(t *testing.T) {
	e := newEnv(t)
	sock := filepath.Join(t.TempDir(), "keeper.sock")
	r := e.run("serve", "--keeper", sock)
	if r.code != 1 || !strings.Contains(r.stderr, "cannot be reached") || !strings.Contains(r.stderr, "skillfs keeper --socket "+sock) {
		t.Fatalf("serve without its keeper: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(e.home); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("serve without its keeper made the data directory: %v", err)
	}
	// A second keeper on a socket one listens on is refused (exit 6).
	k := startKeeperProc(t, sock)
	r = e.run("keeper", "--socket", sock)
	if r.code != 6 || !strings.Contains(r.stderr, "a keeper listens on it already") {
		t.Fatalf("a second keeper: exit %d\n%s", r.code, r.stderr)
	}
	if code := k.stop(); code != 0 {
		t.Fatalf("keeper: SIGTERM exit %d\n%s", code, k.logs())
	}
}

// Under a service manager (skillfs-keeper.service is Type=notify) the
// keeper says READY=1 once its socket listens.
func TestKeeperTellsServiceManager(t *testing.T) {
	next := serviceManager(t)
	sock := filepath.Join(t.TempDir(), "keeper.sock")
	k := startKeeperProc(t, sock)
	got := next(10 * time.Second)
	if !strings.HasPrefix(got, "READY=1\n") || !strings.Contains(got, sock) {
		t.Fatalf("the keeper told %q, want READY=1 naming its socket\n%s", got, k.logs())
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("at READY=1 the socket is %v, %v; want a socket of mode 0600", fi, err)
	}
	if code := k.stop(); code != 0 {
		t.Fatalf("keeper: SIGTERM exit %d\n%s", code, k.logs())
	}
}
