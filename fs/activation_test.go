package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestActivation checks which calls record an activation, in both modes:
// by default a session's first read of SKILL.md activates (the kernel opens
// files without asking the daemon); with Options.Opens every open does. The
// sink sleeps before recording, so a sink called after the call returned
// (or not waited for) would show up as a missing count.
func TestActivation(t *testing.T) {
	for _, opens := range []bool{false, true} {
		t.Run(fmt.Sprintf("opens=%v", opens), func(t *testing.T) { testActivation(t, opens) })
	}
}

func testActivation(t *testing.T, opens bool) {
	st := newStore(t)
	sink := &fakeSink{delay: 20 * time.Millisecond}
	srv := mountTest(t, Options{Sink: sink, Opens: opens})

	readFile := func(p string) error { _, err := os.ReadFile(p); return err }
	// byMode picks the expectation of the mode under test.
	byMode := func(reads, opensWant int) int {
		if opens {
			return opensWant
		}
		return reads
	}
	var appendErr error // a read-only open with O_APPEND: allowed by the kernel, as on any read-only filesystem
	if opens {
		appendErr = syscall.EROFS // refused by the daemon
	}
	cases := []struct {
		name    string
		op      func(dir string) error
		wantErr error
		want    int // activations of alpha in this session
	}{
		{"open SKILL.md", func(d string) error { return openErr(d+"/alpha/SKILL.md", unix.O_RDONLY) }, nil, byMode(0, 1)},
		{"read SKILL.md", func(d string) error { return readFile(d + "/alpha/SKILL.md") }, nil, 1},
		// The second read comes from the kernel's cache.
		{"read SKILL.md twice", func(d string) error {
			return errors.Join(readFile(d+"/alpha/SKILL.md"), readFile(d+"/alpha/SKILL.md"))
		}, nil, byMode(1, 2)},
		{"read SKILL.md through dot-dot", func(d string) error { return readFile(d + "/alpha/scripts/../SKILL.md") }, nil, 1},
		{"map SKILL.md", func(d string) error { return mapFirstByte(d + "/alpha/SKILL.md") }, nil, 1},
		// The kernel turns O_CREAT on an existing file into a plain open, as
		// on every read-only filesystem.
		{"open SKILL.md with O_CREAT", func(d string) error {
			return openErr(d+"/alpha/SKILL.md", unix.O_RDONLY|unix.O_CREAT)
		}, nil, byMode(0, 1)},
		{"stat SKILL.md", func(d string) error { _, err := os.Stat(d + "/alpha/SKILL.md"); return err }, nil, 0},
		{"access SKILL.md", func(d string) error { return unix.Access(d+"/alpha/SKILL.md", unix.R_OK) }, nil, 0},
		{"list skill", func(d string) error { _, err := os.ReadDir(d + "/alpha"); return err }, nil, 0},
		{"list session", func(d string) error { _, err := os.ReadDir(d); return err }, nil, 0},
		{"open skill directory", func(d string) error { return openErr(d+"/alpha", unix.O_RDONLY|unix.O_DIRECTORY) }, nil, 0},
		{"read nested SKILL.md", func(d string) error { return readFile(d + "/alpha/references/nested/SKILL.md") }, nil, 0},
		{"read other file", func(d string) error { return readFile(d + "/alpha/references/guide.md") }, nil, 0},
		{"run script", func(d string) error { return runFromMount(d + "/alpha/scripts/run.sh").Run() }, nil, 0},
		{"open SKILL.md for writing", func(d string) error {
			return openErr(d+"/alpha/SKILL.md", unix.O_WRONLY)
		}, syscall.EROFS, 0},
		{"open SKILL.md for appending", func(d string) error {
			return openErr(d+"/alpha/SKILL.md", unix.O_RDONLY|unix.O_APPEND)
		}, appendErr, 0},
		{"open SKILL.md as directory", func(d string) error {
			return openErr(d+"/alpha/SKILL.md", unix.O_RDONLY|unix.O_DIRECTORY)
		}, syscall.ENOTDIR, 0},
		{"open lower-case skill.md", func(d string) error { return readFile(d + "/alpha/skill.md") }, syscall.ENOENT, 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("act-%d", i)
			dir := setSession(t, srv, id, View{st.alpha1, st.beta1})
			err := tc.op(dir)
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			// Counted before the call returned: no waiting here.
			if got := sink.count(id, "alpha"); got != tc.want {
				t.Errorf("activations of alpha = %d, want %d", got, tc.want)
			}
			if got := sink.count(id, "beta"); got != 0 {
				t.Errorf("activations of beta = %d, want 0", got)
			}
		})
	}
}

// mapFirstByte maps a file and reads its first byte through the mapping.
func mapFirstByte(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 1, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	first := m[0]
	if err := unix.Munmap(m); err != nil {
		return err
	}
	if first == 0 {
		return errors.New("mapped SKILL.md starts with a NUL byte")
	}
	return nil
}

// TestActivationSinkFails checks that a read of SKILL.md whose activation
// cannot be recorded fails with EIO, without a byte of it, and that other
// files stay readable. (The kernel may try the read more than once.)
func TestActivationSinkFails(t *testing.T) {
	st := newStore(t)
	sink := &fakeSink{err: errors.New("index unavailable")}
	srv := mountTest(t, Options{Sink: sink})
	dir := setSession(t, srv, "sess", View{st.alpha1})

	if b, err := os.ReadFile(filepath.Join(dir, "alpha", "SKILL.md")); !errors.Is(err, syscall.EIO) || len(b) != 0 {
		t.Errorf("read SKILL.md: %d bytes, err = %v, want none and EIO", len(b), err)
	}
	if sink.attempts() < 1 || sink.total() != 0 {
		t.Errorf("sink saw %d attempts and %d activations, want some and 0", sink.attempts(), sink.total())
	}
	if _, err := os.ReadFile(filepath.Join(dir, "alpha", "references", "guide.md")); err != nil {
		t.Errorf("read another file: %v", err)
	}
	sink.mu.Lock()
	sink.err = nil
	sink.mu.Unlock()
	if _, err := os.ReadFile(filepath.Join(dir, "alpha", "SKILL.md")); err != nil || sink.count("sess", "alpha") != 1 {
		t.Errorf("open after the sink recovered: %v, activations %d", err, sink.count("sess", "alpha"))
	}
}

// TestActivationNeedsReadableBackingFile: a read (or with Opens, an open)
// of a SKILL.md whose file in the store cannot be served (replaced by a
// FIFO or a file of another size, removed) fails with the errno its reads
// would get, and the sink sees nothing: no activation is recorded for
// content the agent cannot read. Once the file is back, reading activates.
// In every mode.
func TestActivationNeedsReadableBackingFile(t *testing.T) {
	for _, o := range []Options{{}, {Opens: true}, {Passthrough: true}} {
		t.Run(fmt.Sprintf("opens=%v,passthrough=%v", o.Opens, o.Passthrough), func(t *testing.T) {
			testActivationNeedsReadableBackingFile(t, o)
		})
	}
}

func testActivationNeedsReadableBackingFile(t *testing.T, o Options) {
	sink := &fakeSink{}
	o.Sink = sink
	srv := mountTest(t, o)
	cases := []struct {
		name    string
		replace func(p string) error
		want    syscall.Errno
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, syscall.EIO},
		{"another size", func(p string) error { return os.WriteFile(p, []byte("short"), 0o444) }, syscall.EIO},
		{"removed", func(string) error { return nil }, syscall.ENOENT},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			id := fmt.Sprintf("broken-%d", i)
			file := filepath.Join(setSession(t, srv, id, View{st.alpha1}), "alpha", "SKILL.md")
			if _, err := os.Stat(file); err != nil { // the kernel knows the file now
				t.Fatal(err)
			}
			backing := filepath.Join(st.alpha1.Dir, "SKILL.md")
			good, err := os.ReadFile(backing)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(backing); err != nil {
				t.Fatal(err)
			}
			if err := tc.replace(backing); err != nil {
				t.Fatal(err)
			}
			if _, err := os.ReadFile(file); !errors.Is(err, tc.want) {
				t.Errorf("read: err = %v, want %v", err, tc.want)
			}
			if n := sink.attempts(); n != 0 {
				t.Errorf("the sink saw %d activations", n)
			}
			os.Remove(backing)
			if err := os.WriteFile(backing, good, 0o444); err != nil {
				t.Fatal(err)
			}
			if _, err := os.ReadFile(file); err != nil || sink.count(id, "alpha") != 1 {
				t.Errorf("read once the file is back: %v, activations %d", err, sink.count(id, "alpha"))
			}
			sink.mu.Lock()
			sink.tries = 0
			sink.mu.Unlock()
		})
	}
}

// TestActivationConcurrent reads (or with Opens, opens) SKILL.md files of
// 20 sessions from 8 goroutines and checks the sink saw each (session,
// skill) read, credited to the right session and skill: once by default
// (later reads come from the kernel's cache), every open with Opens.
func TestActivationConcurrent(t *testing.T) {
	for _, opens := range []bool{false, true} {
		t.Run(fmt.Sprintf("opens=%v", opens), func(t *testing.T) { testActivationConcurrent(t, opens) })
	}
}

func testActivationConcurrent(t *testing.T, opensMode bool) {
	st := newStore(t)
	sink := &fakeSink{}
	srv := mountTest(t, Options{Sink: sink, Opens: opensMode})
	const sessions, workers, opens = 20, 8, 1000
	slugs := []string{"alpha", "beta", "gamma"}
	for s := range sessions {
		setSession(t, srv, fmt.Sprintf("sess-%02d", s), View{st.alpha1, st.beta1, st.gamma1})
	}

	want := make(map[[2]string]int)
	for w := range workers {
		for i := range opens {
			want[[2]string{fmt.Sprintf("sess-%02d", (w*opens+i)%sessions), slugs[(w+i)%len(slugs)]}]++
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range opens {
				p := filepath.Join(srv.Mountpoint(), fmt.Sprintf("sess-%02d", (w*opens+i)%sessions), slugs[(w+i)%len(slugs)], "SKILL.md")
				if _, err := os.ReadFile(p); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.counts) != len(want) {
		t.Errorf("sink saw %d (session, slug) pairs, want %d", len(sink.counts), len(want))
	}
	total := 0
	for k, n := range want {
		total += n
		if !opensMode {
			n = 1
		}
		if sink.counts[k] != n {
			t.Errorf("%v: %d activations, want %d", k, sink.counts[k], n)
		}
	}
	if total != workers*opens {
		t.Fatalf("expected table counts %d opens, want %d", total, workers*opens)
	}
}
