package source

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/skills"
	"skillfs/skills/skilltest"
	"skillfs/skills/store"

	"golang.org/x/sys/unix"
)

// limitOf returns the name of the limit err hit, or "".
func limitOf(err error) string {
	var le *skills.LimitError
	if errors.As(err, &le) {
		return le.Limit
	}
	return ""
}

func TestStageDirCopiesTree(t *testing.T) {
	src := filepath.Join(t.TempDir(), "demo")
	skilltest.WriteDir(t, src, fstest.MapFS{
		"skill.md":         skilltest.File(skilltest.DemoManifest),
		"scripts/run.sh":   {Data: []byte("#!/bin/sh\necho hi\n"), Mode: 0o700},
		"scripts/lib.py":   {Data: []byte("x = 1\n"), Mode: 0o600},
		"scripts/all.sh":   {Data: []byte("#!/bin/sh\n"), Mode: 0o777},
		"references":       {Mode: fs.ModeDir | 0o700},
		"assets/empty":     skilltest.Dir(),
		".DS_Store":        skilltest.File("junk"),
		"assets/.DS_Store": skilltest.File("junk"),
		"__MACOSX/._x":     skilltest.File("junk"),
		".git/HEAD":        skilltest.File("ref: refs/heads/main\n"),
		"assets/.hidden":   skilltest.File("kept"),
	})
	old := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, p := range []string{"skill.md", "scripts/run.sh", "scripts", "assets/empty"} {
		if err := os.Chtimes(filepath.Join(src, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(t.TempDir(), "out")
	res, err := StageDir(src, dst, skills.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	got := skilltest.ReadDir(t, dst)
	want := map[string]os.FileMode{
		"SKILL.md":       0o644,
		"scripts":        os.ModeDir | 0o755,
		"scripts/run.sh": 0o755,
		"scripts/lib.py": 0o644,
		"scripts/all.sh": 0o755,
		"references":     os.ModeDir | 0o755,
		"assets":         os.ModeDir | 0o755,
		"assets/empty":   os.ModeDir | 0o755,
		"assets/.hidden": 0o644,
	}
	if len(got) != len(want) {
		t.Errorf("staged %d entries, want %d: %v", len(got), len(want), got)
	}
	for p, m := range want {
		e, ok := got[p]
		if !ok {
			t.Errorf("%s missing", p)
			continue
		}
		if e.Mode != m {
			t.Errorf("%s mode %v, want %v", p, e.Mode, m)
		}
	}
	if string(got["SKILL.md"].Data) != skilltest.DemoManifest || string(got["scripts/run.sh"].Data) != "#!/bin/sh\necho hi\n" {
		t.Errorf("contents changed: %+v", got)
	}
	for _, p := range []string{"SKILL.md", "scripts/run.sh", "scripts", "assets/empty"} {
		if got[p].ModTime.Unix() != old.Unix() {
			t.Errorf("%s mtime %v, want %v", p, got[p].ModTime.UTC(), old)
		}
	}
	if res.Files != 5 || res.Bytes != int64(len(skilltest.DemoManifest)+len("#!/bin/sh\necho hi\n")+len("x = 1\n")+len("#!/bin/sh\n")+len("kept")) {
		t.Errorf("result %+v", res)
	}
	// Other tools' bookkeeping (.git, .DS_Store, __MACOSX) is left out
	// silently; only the rename is worth a warning.
	if !slices.Equal(res.Warnings, []string{"renamed skill.md to SKILL.md"}) {
		t.Errorf("warnings %q, want only the rename", res.Warnings)
	}
}

// TestCheckNotLeftOutAgreesWithStaging: CheckNotLeftOut refuses exactly the
// paths staging leaves out, so a change refused by it is one an import
// could never store, and one it lets through is stored.
func TestCheckNotLeftOutAgreesWithStaging(t *testing.T) {
	for _, p := range []string{
		".git/config.md", "__MACOSX/x.md", "docs/.DS_Store/x.md", "docs/.git", "a/b/__MACOSX/c/d.md",
		"x.md", "docs/git/config.md", ".github/x.md", "MACOSX/x.md", ".gitignore", "docs/.git.md", ".GIT/config.md",
	} {
		t.Run(p, func(t *testing.T) {
			src := t.TempDir()
			skilltest.WriteDir(t, src, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest), p: skilltest.File("x")})
			dst := filepath.Join(t.TempDir(), "out")
			if _, err := StageDir(src, dst, skills.DefaultLimits()); err != nil {
				t.Fatal(err)
			}
			_, stored := skilltest.ReadDir(t, dst)[p]
			err := CheckNotLeftOut(p)
			switch {
			case stored && err != nil:
				t.Errorf("staging stores %s, CheckNotLeftOut refuses it: %v", p, err)
			case !stored && !errors.Is(err, skills.ErrUnsafePath):
				t.Errorf("staging leaves %s out, CheckNotLeftOut = %v", p, err)
			case !stored && !strings.HasPrefix(err.Error(), p+": "):
				t.Errorf("the refusal does not start with the path: %v", err)
			}
		})
	}
}

func TestStageDirKeepsBothManifestCases(t *testing.T) {
	src := t.TempDir()
	skilltest.WriteDir(t, src, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest), "skill.md": skilltest.File("other")})
	dst := filepath.Join(t.TempDir(), "out")
	res, err := StageDir(src, dst, skills.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	got := skilltest.ReadDir(t, dst)
	if string(got["SKILL.md"].Data) != skilltest.DemoManifest || string(got["skill.md"].Data) != "other" || len(res.Warnings) != 0 {
		t.Errorf("got %v, warnings %q", got, res.Warnings)
	}
}

func TestStageDirFollowsOnlyTheNamedRoot(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	skilltest.WriteDir(t, real, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest)})
	link := filepath.Join(base, "link")
	skilltest.WriteDir(t, base, fstest.MapFS{"link": skilltest.Symlink(real)})
	dst := filepath.Join(base, "out")
	if _, err := StageDir(link, dst, skills.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	if got := skilltest.ReadDir(t, dst); string(got["SKILL.md"].Data) != skilltest.DemoManifest {
		t.Errorf("got %v", got)
	}
}

func TestStageDirRejects(t *testing.T) {
	small := skills.Limits{MaxTotalBytes: 100, MaxFiles: 3, MaxEntries: 5, MaxDepth: 3, MaxFileBytes: 60}
	cases := []struct {
		name      string
		lim       skills.Limits
		setup     func(tb testing.TB, src string)
		wantErr   error
		wantLimit string
		wantPath  string // for special files
	}{
		{
			name: "no manifest",
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"README.md": skilltest.File("x")})
			},
			wantErr: skills.ErrNoManifest,
		},
		{
			name: "manifest only deeper down",
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"sub/SKILL.md": skilltest.File(skilltest.DemoManifest)})
			},
			wantErr: skills.ErrNoManifest,
		},
		{
			name: "fifo",
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest), "scripts": skilltest.Dir()})
				if err := syscall.Mkfifo(filepath.Join(src, "scripts", "pipe"), 0o644); err != nil {
					tb.Fatal(err)
				}
			},
			wantErr:  skills.ErrSpecialFile,
			wantPath: "scripts/pipe",
		},
		{
			name: "socket",
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest)})
				l, err := net.Listen("unix", filepath.Join(src, "sock"))
				if err != nil {
					tb.Fatal(err)
				}
				tb.Cleanup(func() { l.Close() })
			},
			wantErr:  skills.ErrSpecialFile,
			wantPath: "sock",
		},
		{
			name: "device",
			setup: func(tb testing.TB, src string) {
				if os.Geteuid() != 0 {
					tb.Skip("creating a device node needs root")
				}
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest)})
				err := unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
				if errors.Is(err, unix.EPERM) {
					tb.Skip("mknod not permitted here, even as root")
				}
				if err != nil {
					tb.Fatal(err)
				}
			},
			wantErr:  skills.ErrSpecialFile,
			wantPath: "null",
		},
		{
			name: "invalid UTF-8 name",
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest)})
				// No path of a tree (not UTF-8): written on its own.
				skilltest.WriteFile(tb, filepath.Join(src, "bad\xffname.txt"), []byte("x"), 0o644)
			},
			wantErr: skills.ErrUnsafePath,
		},
		{
			name: "backslash in name",
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest), `a\..\b`: skilltest.File("x")})
			},
			wantErr: skills.ErrUnsafePath,
		},
		{
			name: "percent-encoded parent in name",
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest), "%2e%2e/x": skilltest.File("x")})
			},
			wantErr: skills.ErrUnsafePath,
		},
		{
			name: "nesting too deep",
			lim:  small,
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File("m"), "a/b/c/d": skilltest.File("")})
			},
			wantErr:   skills.ErrLimit,
			wantLimit: skills.LimitDepth,
		},
		{
			name: "deep empty directories",
			lim:  small,
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File("m"), "a/b/c/d": skilltest.Dir()})
			},
			wantErr:   skills.ErrLimit,
			wantLimit: skills.LimitDepth,
		},
		{
			name: "file over the size limit",
			lim:  small,
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File("m"), "big": skilltest.File(strings.Repeat("x", 61))})
			},
			wantErr:   skills.ErrLimit,
			wantLimit: skills.LimitFileBytes,
		},
		{
			name: "total over the limit",
			lim:  small,
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File(strings.Repeat("m", 50)), "x": skilltest.File(strings.Repeat("x", 51))})
			},
			wantErr:   skills.ErrLimit,
			wantLimit: skills.LimitTotalBytes,
		},
		{
			name: "too many files",
			lim:  small,
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File("m"), "a": skilltest.File(""), "b": skilltest.File(""), "c": skilltest.File("")})
			},
			wantErr:   skills.ErrLimit,
			wantLimit: skills.LimitFiles,
		},
		{
			name: "too many entries",
			lim:  small,
			setup: func(tb testing.TB, src string) {
				skilltest.WriteDir(tb, src, fstest.MapFS{"SKILL.md": skilltest.File("m"), "a": skilltest.Dir(), "b": skilltest.Dir(), "c": skilltest.Dir(), "d": skilltest.Dir(), "e": skilltest.Dir()})
			},
			wantErr:   skills.ErrLimit,
			wantLimit: skills.LimitEntries,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			src := filepath.Join(base, "src")
			if err := os.Mkdir(src, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, src)
			dst := filepath.Join(base, "out")
			res, err := StageDir(src, dst, tc.lim)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("StageDir error %v, want %v", err, tc.wantErr)
			}
			if res != nil {
				t.Errorf("result %+v on error", res)
			}
			if got := limitOf(err); got != tc.wantLimit {
				t.Errorf("limit %q, want %q (%v)", got, tc.wantLimit, err)
			}
			if tc.wantPath != "" {
				var se *skills.SpecialFileError
				if !errors.As(err, &se) || se.Path != tc.wantPath {
					t.Errorf("error %v does not name %q", err, tc.wantPath)
				}
			}
			skilltest.AssertAbsent(t, dst)
		})
	}
}

func TestStageDirRefusesNonEmptyDestination(t *testing.T) {
	src := t.TempDir()
	skilltest.WriteDir(t, src, fstest.MapFS{"SKILL.md": skilltest.File(skilltest.DemoManifest)})
	dst := t.TempDir()
	skilltest.WriteDir(t, dst, fstest.MapFS{"keep.txt": skilltest.File("mine")})
	if _, err := StageDir(src, dst, skills.DefaultLimits()); !errors.Is(err, skills.ErrExists) {
		t.Fatalf("error %v, want ErrExists", err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "keep.txt")); err != nil || string(b) != "mine" {
		t.Fatalf("destination content touched: %q %v", b, err)
	}
	// An existing empty directory is fine.
	empty := t.TempDir()
	if _, err := StageDir(src, empty, skills.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
}

func TestCopyCountedEnforcesLimitsOnBytesSeen(t *testing.T) {
	cases := []struct {
		name      string
		lim       skills.Limits
		spent     int64
		n         int
		wantLimit string
	}{
		{name: "within", lim: skills.Limits{MaxFileBytes: 100, MaxTotalBytes: 1000}, n: 100},
		{name: "file", lim: skills.Limits{MaxFileBytes: 100, MaxTotalBytes: 1000}, n: 101, wantLimit: skills.LimitFileBytes},
		{name: "total", lim: skills.Limits{MaxFileBytes: 100, MaxTotalBytes: 1000}, spent: 950, n: 51, wantLimit: skills.LimitTotalBytes},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := skills.NewBudget(tc.lim)
			b.Bytes = tc.spent
			var sink strings.Builder
			n, err := b.CopyCounted(&sink, strings.NewReader(strings.Repeat("z", tc.n)), "f")
			if got := limitOf(err); got != tc.wantLimit {
				t.Fatalf("limit %q, want %q (err %v)", got, tc.wantLimit, err)
			}
			if tc.wantLimit == "" && (n != int64(tc.n) || sink.Len() != tc.n || b.Bytes != tc.spent+int64(tc.n)) {
				t.Fatalf("copied %d, wrote %d, total %d", n, sink.Len(), b.Bytes)
			}
			if tc.wantLimit != "" && int64(sink.Len()) >= int64(tc.n) {
				t.Fatalf("wrote all %d bytes despite the limit", sink.Len())
			}
		})
	}
}

// With Link, a source's files are staged as hard links to them, counted
// and limited as copies are.
func TestStageDirLink(t *testing.T) {
	src := filepath.Join(t.TempDir(), "demo")
	skilltest.WriteDir(t, src, fstest.MapFS{
		"SKILL.md":        skilltest.File(skilltest.DemoManifest),
		"scripts/run.sh":  skilltest.Executable("#!/bin/sh\n"),
		"assets/data.bin": skilltest.File(strings.Repeat("d", 1000)),
	})
	dst := filepath.Join(t.TempDir(), "staged")
	res, err := StageDirOpts(src, dst, skills.DefaultLimits(), StageOptions{Link: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 3 || res.Bytes != int64(len(skilltest.DemoManifest)+len("#!/bin/sh\n")+1000) {
		t.Errorf("staged %d files, %d bytes", res.Files, res.Bytes)
	}
	for _, rel := range []string{"SKILL.md", "scripts/run.sh", "assets/data.bin"} {
		a, err1 := os.Stat(filepath.Join(src, rel))
		b, err2 := os.Stat(filepath.Join(dst, rel))
		if err1 != nil || err2 != nil || !os.SameFile(a, b) {
			t.Errorf("%s is not staged as a link to the source's file (%v, %v)", rel, err1, err2)
		}
	}
	h1, _, _, err := store.TreeHash(src)
	if err != nil {
		t.Fatal(err)
	}
	if h2, _, _, err := store.TreeHash(dst); err != nil || h2 != h1 {
		t.Errorf("staged tree hashes to %s (%v), the source to %s", h2, err, h1)
	}

	_, err = StageDirOpts(src, filepath.Join(t.TempDir(), "small"), skills.Limits{MaxFileBytes: 999}, StageOptions{Link: true})
	var le *skills.LimitError
	if !errors.As(err, &le) || le.Limit != skills.LimitFileBytes || le.Path != "assets/data.bin" {
		t.Errorf("a file over the limit, linked: %v", err)
	}
}
