package fs

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/fs/fusetest"
	"skillfs/skills/skilltest"
)

// testFsName marks the mounts this process's tests make, so TestMain can
// find leftovers.
var testFsName = fusetest.FsName("skillfs-test")

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		childMain(cfg) // a serving child of resume_test.go
	}
	fusetest.Main(m, func() ([]string, error) { return MountsOf(testFsName) })
}

// mountTest mounts an empty filesystem in a temporary directory and
// unmounts it when the test ends, whether it passed or not.
func mountTest(tb testing.TB, opts Options) *Server {
	tb.Helper()
	fusetest.Require(tb)
	mnt := filepath.Join(tb.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		tb.Fatal(err)
	}
	if opts.FsName == "" {
		opts.FsName = testFsName
	}
	srv, err := Mount(mnt, opts)
	if err != nil {
		tb.Fatalf("mount: %v", err)
	}
	tb.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			tb.Errorf("unmount: %v", err)
		}
	})
	return srv
}

// setSession sets a view or fails the test.
func setSession(tb testing.TB, srv *Server, id string, v View) string {
	tb.Helper()
	if err := srv.SetSession(id, v); err != nil {
		tb.Fatalf("set session %q: %v", id, err)
	}
	return filepath.Join(srv.Mountpoint(), id)
}

// writeVersion writes a version directory the way the store keeps one:
// files read-only (0444 where the tree gives no mode), execute bits kept.
func writeVersion(tb testing.TB, dir string, files fstest.MapFS) string {
	tb.Helper()
	tree := make(fstest.MapFS, len(files))
	for name, f := range files {
		if f.Mode.IsRegular() && f.Mode.Perm() == 0 {
			ro := *f
			ro.Mode |= 0o444
			f = &ro
		}
		tree[name] = f
	}
	return skilltest.WriteDir(tb, dir, tree)
}

// manifest is a SKILL.md naming slug, with body.
func manifest(slug, body string) string {
	return skilltest.Manifest("name: "+slug+"\ndescription: "+slug+" skill", body+"\n")
}

// store is a content store with a few versions.
type store struct {
	root                                 string
	alpha1, alpha2, beta1, gamma1, delta Skill
}

func newStore(tb testing.TB) *store {
	tb.Helper()
	root := tb.TempDir()
	s := &store{root: root}
	s.alpha1 = Skill{Slug: "alpha", Version: "a1", Dir: writeVersion(tb, filepath.Join(root, "alpha", "a1"), fstest.MapFS{
		"SKILL.md":                    skilltest.File(manifest("alpha", "alpha version one")),
		"scripts/run.sh":              {Data: []byte("#!/bin/sh\necho alpha-ran \"$1\"\n"), Mode: 0o555},
		"scripts/helper":              {Data: []byte("#!/bin/sh\nexit 0\n"), Mode: 0o744},
		"references/guide.md":         skilltest.File("# Guide\nRead me.\n"),
		"references/nested/SKILL.md":  skilltest.File(manifest("nested", "not a skill of its own")),
		"assets/empty.txt":            skilltest.File(""),
		".skillfs-meta.json":          skilltest.File(`{"hash":"a1"}`),
		"references/.skillfs-partial": skilltest.File("hidden"),
	})}
	s.alpha2 = Skill{Slug: "alpha", Version: "a2", Dir: writeVersion(tb, filepath.Join(root, "alpha", "a2"), fstest.MapFS{
		"SKILL.md":            skilltest.File(manifest("alpha", "alpha version two")),
		"references/guide.md": skilltest.File("# Guide\nSecond edition.\n"),
	})}
	s.beta1 = Skill{Slug: "beta", Version: "b1", Dir: writeVersion(tb, filepath.Join(root, "beta", "b1"), fstest.MapFS{
		"SKILL.md":  skilltest.File(manifest("beta", "beta")),
		"notes.txt": skilltest.File("beta notes\n"),
	})}
	s.gamma1 = Skill{Slug: "gamma", Version: "g1", Dir: writeVersion(tb, filepath.Join(root, "gamma", "g1"), fstest.MapFS{
		"SKILL.md": skilltest.File(manifest("gamma", "gamma")),
	})}
	s.delta = Skill{Slug: "delta", Version: "d1", Dir: writeVersion(tb, filepath.Join(root, "delta", "d1"), fstest.MapFS{
		"SKILL.md":    skilltest.File(manifest("delta", "delta")),
		"secret.txt":  skilltest.File("only for sessions granted delta\n"),
		".skillfs-db": skilltest.File("hidden"),
	})}
	return s
}

// fakeSink records activations. A delay makes a sink that returned early
// visible; err makes it refuse.
type fakeSink struct {
	mu     sync.Mutex
	delay  time.Duration
	err    error
	counts map[[2]string]int
	tries  int
}

func (s *fakeSink) Opened(session, slug string) error {
	time.Sleep(s.delay)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.err != nil {
		return s.err
	}
	if s.counts == nil {
		s.counts = make(map[[2]string]int)
	}
	s.counts[[2]string{session, slug}]++
	return nil
}

func (s *fakeSink) count(session, slug string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[[2]string{session, slug}]
}

func (s *fakeSink) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries
}

func (s *fakeSink) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.counts {
		n += c
	}
	return n
}

// readDirNames lists a directory, sorted as returned.
func readDirNames(tb testing.TB, dir string) []string {
	tb.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatalf("read dir %q: %v", dir, err)
	}
	names := make([]string, len(des))
	for i, de := range des {
		names[i] = de.Name()
	}
	return names
}
