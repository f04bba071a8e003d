package fs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/fs/fusetest"
	"skillfs/fs/readbench"
)

// The tests of a connection outliving its server run the server in a child
// process (this test binary, run again with childEnv set: see TestMain),
// mounting with a Keeper whose descriptors this process holds
// (keeper_test.go). This process reads through the mount while children
// are killed and started.

// childEnv carries a child's configuration (childConfig, JSON).
const childEnv = "SKILLFS_FS_TEST_SERVER"

// childConfig is what a serving child mounts and serves.
type childConfig struct {
	Mnt, StateDir, FsName string
	SinkFile              string // activations are appended here, "session slug" a line
	SinkDelay             time.Duration
	Opens, Passthrough    bool
	Sessions              map[string]View // set before RestoreDone
	SetDelay              time.Duration   // waited before setting them
}

// childMain serves a mount as childConfig says, then takes commands from
// stdin, one a line: "set ID VIEW-JSON", "remove ID", "rekeep", "detach",
// "unmount".
// It answers "ok" or "err TEXT"; it prints "ready resumed=BOOL" once
// serving. It exits after detach or unmount, or when stdin closes (after
// unmounting).
func childMain(cfgJSON string) {
	var c childConfig
	if err := json.Unmarshal([]byte(cfgJSON), &c); err != nil {
		fmt.Println("err", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := Mount(c.Mnt, Options{FsName: c.FsName, Keeper: &keeperClient{conn: 3}, StateDir: c.StateDir,
		Sink: &fileSink{path: c.SinkFile, delay: c.SinkDelay}, Opens: c.Opens, Passthrough: c.Passthrough, Logger: log})
	if err != nil {
		fmt.Println("err", err)
		os.Exit(2)
	}
	time.Sleep(c.SetDelay)
	for id, v := range c.Sessions {
		if err := srv.SetSession(id, v); err != nil {
			fmt.Println("err", err)
			os.Exit(2)
		}
	}
	srv.RestoreDone()
	fmt.Printf("ready resumed=%t passthrough=%t\n", srv.Resumed(), srv.PassthroughSupported())
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		var err error
		switch cmd {
		case "set":
			id, view, _ := strings.Cut(arg, " ")
			var v View
			if err = json.Unmarshal([]byte(view), &v); err == nil {
				err = srv.SetSession(id, v)
			}
		case "remove":
			srv.RemoveSession(arg)
		case "rekeep":
			err = srv.Rekeep()
		case "detach":
			err = srv.Detach()
		case "unmount":
			err = srv.Unmount()
		default:
			err = fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			fmt.Println("err", err)
		} else {
			fmt.Println("ok")
		}
		if cmd == "detach" || cmd == "unmount" {
			os.Exit(0)
		}
	}
	srv.Unmount()
	os.Exit(0)
}

// fileSink appends activations to a file: what it wrote survives the
// process being killed.
type fileSink struct {
	path  string
	delay time.Duration
	mu    sync.Mutex
}

func (s *fileSink) Opened(session, slug string) error {
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s %s\n", session, slug)
	return err
}

// servers runs the serving children of one mountpoint in turn.
type servers struct {
	t      *testing.T
	keeper *testKeeper
	cfg    childConfig
	cur    *child
	all    []*child // every child started, for their logs
}

// child is one serving process.
type child struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	stderr  *os.File
	started time.Time // when it was started
	ready   time.Time // when it said it serves
	resumed bool
	// passthrough: the kernel offered FUSE passthrough.
	passthrough bool
}

func newServers(t *testing.T, sessions map[string]View) *servers {
	fusetest.Require(t)
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &servers{t: t, keeper: newTestKeeper(), cfg: childConfig{Mnt: mnt, StateDir: filepath.Join(dir, "state"),
		FsName: testFsName, SinkFile: filepath.Join(dir, "activations"), Sessions: sessions}}
	t.Cleanup(s.cleanup)
	return s
}

// cleanup ends whatever is left: the child, the kept connection, the mount.
func (s *servers) cleanup() {
	if s.cur != nil {
		s.kill()
	}
	if s.t.Failed() {
		for i, c := range s.all {
			s.t.Logf("server %d log:\n%s", i, c.log())
		}
	}
	s.keeper.close()
	if at, _ := mountsAt(s.cfg.Mnt); len(at) > 0 {
		s.t.Errorf("a mount is left at %s: detaching it", s.cfg.Mnt)
		unix.Unmount(s.cfg.Mnt, unix.MNT_DETACH)
	}
}

// start starts a child serving s.cfg and waits until it serves.
func (s *servers) start() *child {
	t := s.t
	t.Helper()
	conn, err := s.keeper.connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cfg, _ := json.Marshal(s.cfg)
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	c.cmd.Env = append(os.Environ(), childEnv+"="+string(cfg))
	c.cmd.ExtraFiles = []*os.File{conn}
	c.stderr, err = os.CreateTemp(t.TempDir(), "server-log")
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = c.stderr
	c.in, _ = c.cmd.StdinPipe()
	out, _ := c.cmd.StdoutPipe()
	c.out = bufio.NewReader(out)
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cur = c
	s.all = append(s.all, c)
	line, err := c.answer(60 * time.Second)
	if err != nil || !strings.HasPrefix(line, "ready ") {
		t.Fatalf("server did not start: %q %v\n%s", line, err, c.log())
	}
	c.ready = time.Now()
	c.resumed = strings.Contains(line, " resumed=true")
	c.passthrough = strings.Contains(line, " passthrough=true")
	return c
}

// answer reads one line the child prints.
func (c *child) answer(wait time.Duration) (string, error) {
	res := make(chan string, 1)
	go func() {
		line, _ := c.out.ReadString('\n')
		res <- strings.TrimSpace(line)
	}()
	select {
	case line := <-res:
		return line, nil
	case <-time.After(wait):
		return "", errors.New("no answer")
	}
}

func (c *child) log() string {
	b, _ := os.ReadFile(c.stderr.Name())
	return string(b)
}

// command sends the current child a command and checks it succeeded; the
// child exits after detach and unmount.
func (s *servers) command(cmd string) {
	t := s.t
	t.Helper()
	c := s.cur
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		t.Fatal(err)
	}
	line, err := c.answer(30 * time.Second)
	if err != nil || line != "ok" {
		t.Fatalf("%s: %q %v\n%s", strings.Fields(cmd)[0], line, err, c.log())
	}
	if cmd == "detach" || cmd == "unmount" {
		c.cmd.Wait()
		s.cur = nil
	}
}

// kill kills the current child, and returns when it was seen dead.
func (s *servers) kill() time.Time {
	c := s.cur
	c.cmd.Process.Kill()
	c.cmd.Wait()
	s.cur = nil
	return time.Now()
}

// activations reads what the children's sinks recorded, by "session slug".
func (s *servers) activations() map[string]int {
	b, err := os.ReadFile(s.cfg.SinkFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.t.Fatal(err)
	}
	m := make(map[string]int)
	for line := range strings.Lines(string(b)) {
		m[strings.TrimSpace(line)]++
	}
	return m
}

// testFile is a file a reader reads through the mount, with its content.
type testFile struct {
	path     string
	want     []byte
	manifest string // "session slug" for a top-level SKILL.md
}

// viewFiles lists the files of sessions as served at mnt.
func viewFiles(t *testing.T, mnt string, sessions map[string]View) []testFile {
	var out []testFile
	for id, v := range sessions {
		for _, sk := range v {
			filepath.WalkDir(sk.Dir, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), HiddenPrefix) || strings.Contains(p, "/"+HiddenPrefix) {
					return err
				}
				rel, _ := filepath.Rel(sk.Dir, p)
				want, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				f := testFile{path: filepath.Join(mnt, id, sk.Slug, rel), want: want}
				if rel == "SKILL.md" {
					f.manifest = id + " " + sk.Slug
				}
				out = append(out, f)
				return nil
			})
		}
	}
	return out
}

// op is one operation of a reader: when it started and ended, whether it
// failed.
type op struct {
	start, end time.Time
	err        error
}

// readers read files through the mount until stopped, each read reaching
// the server (the file's cached pages are dropped first), with lookups of
// names that do not exist in between.
type readers struct {
	stop      chan struct{}
	wg        sync.WaitGroup
	mu        sync.Mutex
	ops       []op
	manifests map[string]int // reads of each SKILL.md, by "session slug"
}

func startReaders(n int, files []testFile) *readers {
	r := &readers{stop: make(chan struct{}), manifests: make(map[string]int)}
	for i := range n {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for k := i; ; k++ {
				select {
				case <-r.stop:
					return
				default:
				}
				f := files[k%len(files)]
				o := op{start: time.Now()}
				o.err = readChecked(f)
				o.end = time.Now()
				l := op{start: o.end}
				if k%4 == 0 {
					var st unix.Stat_t
					name := filepath.Join(filepath.Dir(f.path), fmt.Sprintf("none-%d-%d", i, k))
					if err := unix.Lstat(name, &st); !errors.Is(err, unix.ENOENT) {
						l.err = fmt.Errorf("lstat %s: %w, want ENOENT", name, err)
					}
					l.end = time.Now()
				}
				r.mu.Lock()
				r.ops = append(r.ops, o)
				if !l.end.IsZero() {
					r.ops = append(r.ops, l)
				}
				if f.manifest != "" {
					r.manifests[f.manifest]++
				}
				r.mu.Unlock()
			}
		}()
	}
	return r
}

// readChecked reads a file from the server (its cached pages dropped
// first) and checks its bytes.
func readChecked(f testFile) error {
	got, err := readbench.ReadCold(f.path)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, f.want) {
		return fmt.Errorf("read %s: %q, want %q", f.path, got, f.want)
	}
	return nil
}

func (r *readers) halt() []op {
	close(r.stop)
	r.wg.Wait()
	return r.ops
}

// pause measures how long readers waited across a server change at at:
// of the operations under way then, the longest wait after at, and when
// the last of them was answered, from the new server's start and from its
// saying it serves.
type pause struct {
	fromKill, fromStart, fromReady time.Duration
	spanning                       int
}

func measurePause(ops []op, at time.Time, next *child) pause {
	var p pause
	var last time.Time
	for _, o := range ops {
		if o.start.Before(at) && o.end.After(at) {
			p.spanning++
			if o.end.After(last) {
				last = o.end
			}
		}
	}
	if p.spanning > 0 {
		p.fromKill, p.fromStart, p.fromReady = last.Sub(at), last.Sub(next.started), last.Sub(next.ready)
	}
	return p
}

func (p pause) String() string {
	return fmt.Sprintf("%d operations under way; the last answered %v after the old server ended, %v after the new one started, %v after it said it serves (negative: before)",
		p.spanning, p.fromKill.Round(time.Microsecond), p.fromStart.Round(time.Microsecond), p.fromReady.Round(time.Microsecond))
}

// serving starts the first server of the tests' sessions, and lists their
// files.
func serving(t *testing.T) (*servers, []testFile) {
	sessions := resumeSessions(newStore(t))
	s := newServers(t, sessions)
	s.start()
	return s, viewFiles(t, s.cfg.Mnt, sessions)
}

// resumeSessions is what the tests serve.
func resumeSessions(st *store) map[string]View {
	return map[string]View{"s1": {st.alpha1, st.beta1}, "s2": {st.alpha1, st.gamma1}}
}

// TestResumeAfterKill kills the server twice in the middle of reads, then
// detaches one: readers never fail, every byte is right, each new server
// resumes the connection, and activations are all recorded.
func TestResumeAfterKill(t *testing.T) {
	st := newStore(t)
	sessions := resumeSessions(st)
	s := newServers(t, sessions)
	s.cfg.SinkDelay = 2 * time.Millisecond // requests in flight at the kill
	if c := s.start(); c.resumed {
		t.Fatal("the first server resumed a connection")
	}
	files := viewFiles(t, s.cfg.Mnt, sessions)
	r := startReaders(4, files)

	type change struct {
		how  string
		at   time.Time
		next *child
	}
	var changes []change
	for _, how := range []string{"kill", "kill", "detach"} {
		time.Sleep(300 * time.Millisecond)
		var at time.Time
		if how == "kill" {
			at = s.kill()
		} else {
			s.command("detach")
			at = time.Now()
		}
		next := s.start()
		if !next.resumed {
			t.Fatalf("the server started after %s did not resume\n%s", how, next.log())
		}
		changes = append(changes, change{how, at, next})
	}
	time.Sleep(300 * time.Millisecond)
	ops := r.halt()

	// The one failure the kernel makes: a request it was copying to the
	// server at the instant the server was killed ends with EIO (a dying
	// process's memory takes no page fault; fuse_dev_do_read then fails
	// the request instead of keeping it for a resend). It can only hit an
	// operation under way at a kill; Detach never causes it.
	failed, lost := 0, 0
	for _, o := range ops {
		if o.err == nil {
			continue
		}
		if errors.Is(o.err, unix.EIO) && slices.ContainsFunc(changes, func(c change) bool {
			return c.how == "kill" && o.start.Before(c.at) && o.end.After(c.at)
		}) {
			lost++
			t.Logf("lost to a kill: %v", o.err)
			continue
		}
		if failed++; failed <= 10 {
			t.Errorf("%v", o.err)
		}
	}
	t.Logf("%d operations, %d failed, %d lost to the kernel at a kill", len(ops), failed, lost)
	for _, c := range changes {
		t.Logf("after %s: %v", c.how, measurePause(ops, c.at, c.next))
	}

	// Each read of a SKILL.md reaching a server is reported to its sink;
	// one a dead server had reported may be reported again when resent.
	acts := s.activations()
	for key, n := range r.manifests {
		if acts[key] == 0 {
			t.Errorf("%d reads of %s's SKILL.md, no activation", n, key)
		}
	}
	for key, n := range acts {
		if r.manifests[key] == 0 {
			t.Errorf("activation of %s (%d) never read", key, n)
		}
	}
	t.Logf("reads of SKILL.md %v, activations %v", r.manifests, acts)

	s.command("unmount")
	if at, _ := mountsAt(s.cfg.Mnt); len(at) > 0 {
		t.Errorf("mounts left at %s after unmount: %v", s.cfg.Mnt, at)
	}
	if s.keeper.has(keeperName(s.cfg.Mnt)) {
		t.Error("the keeper still holds the connection after unmount")
	}
}

// TestResumeFallback: a server that cannot resume the kept connection (no
// state, other options) mounts anew, without hanging.
func TestResumeFallback(t *testing.T) {
	s, files := serving(t)
	check := func() {
		t.Helper()
		if err := readChecked(files[0]); err != nil {
			t.Fatal(err)
		}
	}
	check()
	s.kill()
	if err := os.Remove(filepath.Join(s.cfg.StateDir, stateName)); err != nil {
		t.Fatal(err)
	}
	if c := s.start(); c.resumed {
		t.Fatal("resumed without a state")
	} else if !strings.Contains(c.log(), "no usable mount state") {
		t.Errorf("not resumed, but not because of no usable mount state:\n%s", c.log())
	}
	check()
	s.kill()
	s.cfg.Opens = true
	if c := s.start(); c.resumed {
		t.Fatal("resumed with other options")
	} else if !strings.Contains(c.log(), "options changed") {
		t.Errorf("not resumed, but not because of options changed:\n%s", c.log())
	}
	check()
	s.kill()
	s.keeper.close() // the keeper is gone too: the mount is dead
	if c := s.start(); c.resumed {
		t.Fatal("resumed with nothing kept")
	}
	check()

	// A server that answers INIT otherwise than the one that mounted.
	s.kill()
	statePath := filepath.Join(s.cfg.StateDir, stateName)
	ms, err := readState(s.cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	ms.InitReply[outHeaderSize+12] ^= 1 // a capability flag
	if err := writeState(s.cfg.StateDir, ms); err != nil {
		t.Fatal(err)
	}
	if c := s.start(); c.resumed {
		t.Fatal("resumed with another INIT answer")
	} else if !strings.Contains(c.log(), "answers INIT otherwise") {
		t.Errorf("not resumed, but not because of answers INIT otherwise:\n%s", c.log())
	}
	check()

	// A journal that cannot be read.
	s.kill()
	if err := os.WriteFile(filepath.Join(s.cfg.StateDir, journalName), []byte("{\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := s.start(); c.resumed {
		t.Fatal("resumed with a broken journal")
	} else if !strings.Contains(c.log(), "journal line 1") {
		t.Errorf("not resumed, but not because of journal line 1:\n%s", c.log())
	}
	check()

	// The kept connection is no longer mounted at the mountpoint.
	s.kill()
	if err := unix.Unmount(s.cfg.Mnt, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if c := s.start(); c.resumed {
		t.Fatal("resumed a connection mounted nowhere")
	} else if !strings.Contains(c.log(), "nothing is mounted at the mountpoint") {
		t.Errorf("not resumed, but not because of nothing is mounted at the mountpoint:\n%s", c.log())
	}
	check()
	if _, err := os.Stat(statePath); err != nil {
		t.Errorf("no state after a fresh mount: %v", err)
	}
	s.command("unmount")
}

// TestResumeRevocation: what changed while no server ran takes effect on
// resume: a revoked skill's open files fail and its name is gone, a
// session that did not come back is gone, a skill moved to another version
// keeps reading the old one through open files; FORGETs (cache drops)
// afterwards leave everything served.
func TestResumeRevocation(t *testing.T) {
	st := newStore(t)
	s := newServers(t, resumeSessions(st))
	s.start()
	mnt := s.cfg.Mnt
	open := func(p string) *os.File {
		t.Helper()
		f, err := os.Open(filepath.Join(mnt, p))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if _, err := io.ReadAll(f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// The first close of a file of the connection sends a FLUSH, which the
	// server refuses once for all. Let that happen now: else the close of
	// this process's descriptors in the next server's exec (close on exec)
	// would wait for that very server.
	if _, err := os.ReadFile(filepath.Join(mnt, "s1/alpha/SKILL.md")); err != nil {
		t.Fatal(err)
	}
	beta := open("s1/beta/notes.txt")
	alpha := open("s1/alpha/SKILL.md")
	gamma := open("s2/gamma/SKILL.md")
	s.kill()

	s.cfg.Sessions = map[string]View{"s1": {st.alpha2}}
	s.start()
	readAt := func(f *os.File) ([]byte, error) {
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		buf := make([]byte, 4096)
		n, err := f.ReadAt(buf, 0)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return buf[:n], err
	}
	for name, f := range map[string]*os.File{"revoked": beta, "of a session gone": gamma} {
		if _, err := readAt(f); !errors.Is(err, unix.EACCES) {
			t.Errorf("read of a file %s: %v, want EACCES", name, err)
		}
	}
	for _, p := range []string{"s1/beta", "s2", "s2/gamma/SKILL.md"} {
		if _, err := os.Stat(filepath.Join(mnt, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat %s: %v, want not found", p, err)
		}
	}
	want1, _ := os.ReadFile(filepath.Join(st.alpha1.Dir, "SKILL.md"))
	if got, err := readAt(alpha); err != nil || !bytes.Equal(got, want1) {
		t.Errorf("old version through an open file: %q, %v; want %q", got, err, want1)
	}
	want2, _ := os.ReadFile(filepath.Join(st.alpha2.Dir, "SKILL.md"))
	if got, err := os.ReadFile(filepath.Join(mnt, "s1/alpha/SKILL.md")); err != nil || !bytes.Equal(got, want2) {
		t.Errorf("new version: %q, %v; want %q", got, err, want2)
	}

	// The kernel forgets what it can (FORGETs reach the server).
	beta.Close()
	gamma.Close()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		t.Logf("drop caches: %v", err)
	}
	v, _ := json.Marshal(View{st.alpha2, st.beta1})
	s.command("set s1 " + string(v))
	wantBeta, _ := os.ReadFile(filepath.Join(st.beta1.Dir, "notes.txt"))
	if got, err := os.ReadFile(filepath.Join(mnt, "s1/beta/notes.txt")); err != nil || !bytes.Equal(got, wantBeta) {
		t.Errorf("granted again: %q, %v", got, err)
	}
	names := readDirNames(t, filepath.Join(mnt, "s1"))
	if !slices.Equal(names, []string{"alpha", "beta"}) {
		t.Errorf("listing %v", names)
	}
	// And once more across a kill: the owners made after the resume are
	// in the journal too.
	s.kill()
	s.cfg.Sessions = map[string]View{"s1": {st.alpha2, st.beta1}}
	if c := s.start(); !c.resumed {
		t.Fatal("not resumed")
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "s1/beta/notes.txt")); err != nil || !bytes.Equal(got, wantBeta) {
		t.Errorf("after the second resume: %q, %v", got, err)
	}
	alpha.Close()
	s.command("unmount")
}

// TestResumeWaits: requests reaching a resumed server before the daemon set
// their sessions again wait for it, and are then answered right.
func TestResumeWaits(t *testing.T) {
	s, files := serving(t)
	at := s.kill()
	s.cfg.SetDelay = 300 * time.Millisecond
	res := make(chan error, len(files))
	for _, f := range files {
		go func() { res <- readChecked(f) }()
	}
	next := s.start()
	for range files {
		if err := <-res; err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d reads waited %v from the kill, %v from the new server's start, until their sessions were set again",
		len(files), time.Since(at).Round(time.Millisecond), time.Since(next.started).Round(time.Millisecond))
	s.command("unmount")
}

// TestResumePassthrough: with passthrough, a file opened before the crash
// reads on from the kernel's backing file, its close (RELEASE) reaches the
// new server harmlessly, and opening it again works.
func TestResumePassthrough(t *testing.T) {
	st := newStore(t)
	s := newServers(t, resumeSessions(st))
	s.cfg.Passthrough = true
	if c := s.start(); !c.passthrough {
		s.command("unmount")
		t.Skip("the kernel offers no FUSE passthrough")
	}
	p := filepath.Join(s.cfg.Mnt, "s1/beta/notes.txt")
	want, _ := os.ReadFile(filepath.Join(st.beta1.Dir, "notes.txt"))
	if _, err := os.ReadFile(p); err != nil { // the first close's FLUSH, see TestResumeRevocation
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	s.kill()
	c := s.start()
	if !c.resumed {
		t.Fatal("not resumed")
	}
	got := make([]byte, len(want)+1)
	if n, err := f.ReadAt(got, 0); !errors.Is(err, io.EOF) || !bytes.Equal(got[:n], want) {
		t.Errorf("read through a handle of the dead server: %q, %v", got[:n], err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if again, err := os.ReadFile(p); err != nil || !bytes.Equal(again, want) {
		t.Errorf("opened again: %q, %v", again, err)
	}
	s.command("unmount")
}

// TestResumeRekeep: a keeper that lost the connection (it restarted while
// the server ran) is handed it again by Rekeep, and a crash after that is
// survived.
func TestResumeRekeep(t *testing.T) {
	s, files := serving(t)
	s.keeper.close()
	s.command("rekeep")
	if !s.keeper.has(keeperName(s.cfg.Mnt)) {
		t.Fatal("rekeep kept nothing")
	}
	if err := readChecked(files[0]); err != nil {
		t.Fatal(err)
	}
	s.kill()
	if c := s.start(); !c.resumed {
		t.Fatal("not resumed after rekeep")
	}
	if err := readChecked(files[0]); err != nil {
		t.Fatal(err)
	}
	s.command("unmount")
}

// brokenKeeper fails every call.
type brokenKeeper struct{}

func (brokenKeeper) Take(string) (*os.File, error) { return nil, errors.New("keeper unreachable") }
func (brokenKeeper) Put(string, *os.File) error    { return errors.New("keeper unreachable") }
func (brokenKeeper) Drop(string) error             { return errors.New("keeper unreachable") }

// TestKeeperRefused: a keeper that cannot be asked fails the mount (it may
// hold a connection mounted there, which mounting anew could hang on);
// a keeper needs a state directory; Detach needs a keeper.
func TestKeeperRefused(t *testing.T) {
	fusetest.Require(t)
	mnt := t.TempDir()
	if _, err := Mount(mnt, Options{FsName: testFsName, Keeper: brokenKeeper{}, StateDir: t.TempDir()}); err == nil ||
		!strings.Contains(err.Error(), "keeper unreachable") {
		t.Errorf("mount with an unreachable keeper: %v", err)
	}
	if _, err := Mount(mnt, Options{FsName: testFsName, Keeper: newTestKeeperClient(t)}); err == nil ||
		!strings.Contains(err.Error(), "StateDir") {
		t.Errorf("mount with a keeper and no state directory: %v", err)
	}
	if at, _ := mountsAt(mnt); len(at) > 0 {
		t.Fatalf("mounted: %v", at)
	}
	srv := mountTest(t, Options{})
	if err := srv.Detach(); !errors.Is(err, errNotResumed) {
		t.Errorf("detach without a keeper: %v", err)
	}
	if srv.Resumed() {
		t.Error("a mount without a keeper resumed")
	}
	srv.RestoreDone() // a no-op
}

// newTestKeeperClient is a client of a keeper of this process.
func newTestKeeperClient(t *testing.T) *keeperClient {
	k := newTestKeeper()
	conn, err := k.connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); k.close() })
	return &keeperClient{conn: int(conn.Fd())}
}

// BenchmarkResume measures what a server taking a connection back costs
// itself, without a process start: Detach, then Mount (INIT replayed, the
// journal of 200 sessions read, the connection probed, requests resent),
// every session set again and RestoreDone.
func BenchmarkResume(b *testing.B) {
	fusetest.Require(b)
	st := newStore(b)
	mnt := filepath.Join(b.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		b.Fatal(err)
	}
	k := newTestKeeper()
	b.Cleanup(k.close)
	conn, err := k.connect()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	opts := Options{FsName: testFsName, Keeper: &keeperClient{conn: int(conn.Fd())}, StateDir: b.TempDir()}
	view := View{st.alpha1, st.beta1}
	mount := func() *Server {
		srv, err := Mount(mnt, opts)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 200 {
			if err := srv.SetSession(fmt.Sprintf("s%d", i), view); err != nil {
				b.Fatal(err)
			}
		}
		srv.RestoreDone()
		return srv
	}
	srv := mount()
	for i := range 200 { // every grant reached: in the journal
		if _, err := os.Stat(filepath.Join(mnt, fmt.Sprintf("s%d", i), "beta", "notes.txt")); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if err := srv.Detach(); err != nil {
			b.Fatal(err)
		}
		srv = mount()
		if !srv.Resumed() {
			b.Fatal("not resumed")
		}
	}
	b.StopTimer()
	if err := srv.Unmount(); err != nil {
		b.Fatal(err)
	}
}
