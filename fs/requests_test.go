package fs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// requestsDuring returns the requests the kernel sent while op ran, by
// kind, leaving out kinds it sent none of.
func requestsDuring(srv *Server, op func()) map[string]uint64 {
	before := srv.Requests()
	op()
	out := map[string]uint64{}
	for k, v := range srv.Requests() {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// xattrRequests adds up the extended attribute requests of a count.
func xattrRequests(m map[string]uint64) uint64 {
	return m[ReqGetxattr] + m[ReqListxattr] + m[ReqSetxattr] + m[ReqRemovexattr]
}

// lsLong does what `ls -l` does to a directory: list it, stat every entry
// and ask for the extended attributes ls shows.
func lsLong(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		unix.Lgetxattr(p, "security.selinux", buf)
		unix.Lgetxattr(p, "system.posix_acl_access", buf)
	}
}

// TestRequestsPerOperation counts what the kernel asks the daemon for the
// operations agents repeat: once a session has read a file, opening,
// reading and closing it again, `ls -l` and a walk of the skill send no
// request at all; extended attributes are asked for once per mount, never
// again.
func TestRequestsPerOperation(t *testing.T) {
	st := newStore(t)
	sink := &fakeSink{}
	srv := mountTest(t, Options{Sink: sink})
	dir := filepath.Join(setSession(t, srv, "sess", View{st.alpha1, st.beta1}), "alpha")
	manifestPath := filepath.Join(dir, "SKILL.md")
	guide := filepath.Join(dir, "references", "guide.md")
	readAll := func(p string) {
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}

	// The first open and close on the mount are asked once (answered
	// ENOSYS): from then on the kernel opens and closes without asking.
	once := requestsDuring(srv, func() { readAll(filepath.Join(filepath.Dir(dir), "beta", "SKILL.md")) })
	if once[ReqOpen] != 1 || once[ReqFlush] != 1 {
		t.Errorf("first read on the mount sent %v, want one OPEN and one FLUSH", once)
	}
	first := requestsDuring(srv, func() { readAll(manifestPath) })
	if first[ReqRead] == 0 || first[ReqOpen]+first[ReqFlush]+first[ReqRelease] != 0 || sink.count("sess", "alpha") != 1 {
		t.Errorf("first read of SKILL.md sent %v and activated %d times; want a READ, no OPEN, FLUSH or RELEASE, one activation",
			first, sink.count("sess", "alpha"))
	}
	readAll(guide)
	lsLong(t, dir)
	walkAll(t, os.DirFS(dir))

	for name, op := range map[string]func(){
		"read SKILL.md again": func() { readAll(manifestPath) },
		"read a file again":   func() { readAll(guide) },
		"ls -l":               func() { lsLong(t, dir) },
		"walk":                func() { walkAll(t, os.DirFS(dir)) },
	} {
		if got := requestsDuring(srv, func() {
			for range 20 {
				op()
			}
		}); len(got) != 0 {
			t.Errorf("%s 20 times sent %v, want no request", name, got)
		}
	}
	if n := xattrRequests(srv.Requests()); n > 2 {
		t.Errorf("%d extended attribute requests, want at most one of each kind the kernel asks", n)
	}
	if sink.count("sess", "alpha") != 1 {
		t.Errorf("activations = %d, want 1", sink.count("sess", "alpha"))
	}
}

// errorsDuring returns the requests answered with an error while op ran,
// by kind and errno.
func errorsDuring(srv *Server, op func()) map[string]map[string]uint64 {
	before := srv.RequestErrors()
	op()
	out := map[string]map[string]uint64{}
	for kind, byErrno := range srv.RequestErrors() {
		for errno, n := range byErrno {
			if d := n - before[kind][errno]; d > 0 {
				if out[kind] == nil {
					out[kind] = map[string]uint64{}
				}
				out[kind][errno] = d
			}
		}
	}
	return out
}

// TestRequestErrorsByErrno: a request the file system answers with an error
// is counted under its kind and errno, once; requests answered without one
// are not.
func TestRequestErrorsByErrno(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{Sink: &fakeSink{}})
	dir := filepath.Join(setSession(t, srv, "sess", View{st.alpha1}), "alpha")

	if _, err := os.Stat(dir); err != nil { // its own lookups done: only the missing name's follows
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "no-such-file")
	var lookups map[string]uint64
	got := errorsDuring(srv, func() {
		lookups = requestsDuring(srv, func() {
			if _, err := os.Stat(missing); !os.IsNotExist(err) {
				t.Fatalf("stat of a missing file: %v, want not found", err)
			}
		})
	})
	if want := map[string]map[string]uint64{ReqLookup: {"ENOENT": 1}}; lookups[ReqLookup] != 1 || !reflect.DeepEqual(got, want) {
		t.Errorf("stat of a missing file sent %v and counted errors %v, want one LOOKUP and %v", lookups, got, want)
	}

	read := func() {
		if _, err := os.ReadFile(filepath.Join(dir, "references", "guide.md")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadDir(filepath.Join(dir, "references")); err != nil {
			t.Fatal(err)
		}
	}
	// The mount's first OPEN, FLUSH and OPENDIR are answered ENOSYS: the
	// kernel then opens without asking.
	first := errorsDuring(srv, read)
	if want := map[string]map[string]uint64{ReqOpen: {"ENOSYS": 1}, ReqFlush: {"ENOSYS": 1}, ReqOpendir: {"ENOSYS": 1}}; !reflect.DeepEqual(first, want) {
		t.Errorf("first open and listing counted errors %v, want %v", first, want)
	}
	var sent map[string]uint64
	got = errorsDuring(srv, func() {
		sent = requestsDuring(srv, func() {
			if _, err := os.ReadFile(filepath.Join(dir, "SKILL.md")); err != nil {
				t.Fatal(err)
			}
		})
	})
	if sent[ReqLookup] == 0 || sent[ReqRead] == 0 || len(got) != 0 {
		t.Errorf("first read of SKILL.md sent %v and counted errors %v, want a LOOKUP and a READ, no error", sent, got)
	}
}

// TestIoctlCounted: every ioctl on a file of the mount reaches the daemon
// (isatty's TCGETS, which Python's open() makes, above all): each is
// counted, as IOCTL, and answered ENOTTY; the kernel remembers no answer,
// so it asks again every time.
func TestIoctlCounted(t *testing.T) {
	st := newStore(t)
	srv := mountTest(t, Options{Sink: &fakeSink{}})
	dir := setSession(t, srv, "sess", View{st.alpha1})
	f, err := os.Open(filepath.Join(dir, "alpha", "references", "guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sent map[string]uint64
	failed := errorsDuring(srv, func() {
		sent = requestsDuring(srv, func() {
			for range 20 {
				if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); !errors.Is(err, unix.ENOTTY) {
					t.Errorf("TCGETS on a file of the mount: %v, want ENOTTY", err)
				}
			}
		})
	})
	if want := map[string]uint64{ReqIoctl: 20}; !reflect.DeepEqual(sent, want) {
		t.Errorf("20 TCGETS sent %v, want %v", sent, want)
	}
	if want := map[string]map[string]uint64{ReqIoctl: {"ENOTTY": 20}}; !reflect.DeepEqual(failed, want) {
		t.Errorf("20 TCGETS counted errors %v, want %v", failed, want)
	}
}

// TestEveryRequestCounted calls every method of fuse.RawFileSystem that
// carries a request through the counter: each counts one request of its
// own kind, and every kind is some method's. (Write is the fallback of a
// WRITE that Writev answered ENOSYS: that request is counted by Writev.)
func TestEveryRequestCounted(t *testing.T) {
	var n requestCounts
	c := &counting{fuse.NewDefaultRawFileSystem(), &n}
	notRequests := map[string]bool{"String": true, "SetDebug": true, "Init": true, "OnUnmount": true, "Write": true}
	api := reflect.TypeFor[fuse.RawFileSystem]()
	kindOf := map[string]string{}
	for i := range api.NumMethod() {
		m := api.Method(i)
		if notRequests[m.Name] {
			continue
		}
		args := make([]reflect.Value, m.Type.NumIn())
		for j := range args {
			in := m.Type.In(j)
			if in.Kind() == reflect.Pointer {
				args[j] = reflect.New(in.Elem())
			} else {
				args[j] = reflect.Zero(in)
			}
		}
		before := n.snapshot()
		reflect.ValueOf(c).MethodByName(m.Name).Call(args)
		var counted []string
		for k, v := range n.snapshot() {
			if v != before[k] {
				counted = append(counted, k)
			}
		}
		if len(counted) != 1 {
			t.Errorf("%s counted %q, want one kind", m.Name, counted)
			continue
		}
		if other, dup := kindOf[counted[0]]; dup {
			t.Errorf("%s and %s both count %s", m.Name, other, counted[0])
		}
		kindOf[counted[0]] = m.Name
	}
	for _, kind := range requestNames {
		if _, ok := kindOf[kind]; !ok {
			t.Errorf("kind %s counts no method", kind)
		}
	}
}
