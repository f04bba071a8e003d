package skilltest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"testing/fstest"
	"time"
)

// fatalTB records the first fatal failure of a helper instead of failing
// the test (see fails).
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) { f.msg = fmt.Sprint(args...); runtime.Goexit() }

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fails runs fn with a TB that records a fatal failure and returns its
// message, "" when fn did not fail.
func fails(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func TestManifestAndSkill(t *testing.T) {
	if got, want := Manifest("name: a\ndescription: d", "\n# Instructions\n"), "---\nname: a\ndescription: d\n---\n\n# Instructions\n"; got != want {
		t.Errorf("Manifest = %q, want %q", got, want)
	}
	tree := Skill("name: a", "body\n", map[string]string{"scripts/run.sh": "#!/bin/sh\n", "notes.md": "n"})
	if got := string(tree["SKILL.md"].Data); got != "---\nname: a\n---\nbody\n" {
		t.Errorf("SKILL.md = %q", got)
	}
	if m := permOf(tree["scripts/run.sh"]); m != 0o755 {
		t.Errorf("run.sh mode %v, want 0755", m)
	}
	if m := permOf(tree["notes.md"]); m != 0o644 {
		t.Errorf("notes.md mode %v, want 0644", m)
	}
	own := Skill("name: a", "body\n", map[string]string{"SKILL.md": "mine"})
	if got := string(own["SKILL.md"].Data); got != "mine" {
		t.Errorf("a SKILL.md among the files: %q, want it kept", got)
	}
}

// TestWriteDirModes writes a tree under a umask that would narrow every
// mode and reads it back: each entry has exactly its mode, a read-only
// directory is filled, times and symlink targets are kept.
func TestWriteDirModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	when := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	tree := fstest.MapFS{
		"SKILL.md":           File("---\nname: a\n---\n"),
		"scripts/run.sh":     Executable("#!/bin/sh\n"),
		"ro/locked.txt":      {Data: []byte("locked"), Mode: 0o444},
		"ro":                 {Mode: fs.ModeDir | 0o555},
		"private":            {Mode: fs.ModeDir | 0o700, ModTime: when},
		"private/f":          {Data: []byte("f"), ModTime: when},
		"empty":              Dir(),
		"deep/er/still/x.md": File("x"),
		"link":               Symlink("SKILL.md"),
		"out":                Symlink("../../etc/passwd"),
	}
	dir := filepath.Join(t.TempDir(), "skill")
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "ro"), 0o755) })
	if got := WriteDir(t, dir, tree); got != dir {
		t.Fatalf("WriteDir returned %q, want %q", got, dir)
	}
	back := ReadDir(t, dir)
	want := map[string]fs.FileMode{
		"SKILL.md": 0o644, "scripts": fs.ModeDir | 0o755, "scripts/run.sh": 0o755,
		"ro": fs.ModeDir | 0o555, "ro/locked.txt": 0o444, "private": fs.ModeDir | 0o700, "private/f": 0o644,
		"empty": fs.ModeDir | 0o755, "deep": fs.ModeDir | 0o755, "deep/er": fs.ModeDir | 0o755,
		"deep/er/still": fs.ModeDir | 0o755, "deep/er/still/x.md": 0o644,
		"link": fs.ModeSymlink | 0o777, "out": fs.ModeSymlink | 0o777,
	}
	for name, mode := range want {
		f, ok := back[name]
		if !ok {
			t.Errorf("%s not written", name)
			continue
		}
		if f.Mode != mode {
			t.Errorf("%s: mode %v, want %v", name, f.Mode, mode)
		}
		if src, ok := tree[name]; ok && !f.Mode.IsDir() && string(f.Data) != string(src.Data) {
			t.Errorf("%s: %q, want %q", name, f.Data, src.Data)
		}
	}
	if len(back) != len(want) {
		t.Errorf("read back %d entries, want %d", len(back), len(want))
	}
	for _, name := range []string{"private", "private/f"} {
		if !back[name].ModTime.Equal(when) {
			t.Errorf("%s: time %v, want %v", name, back[name].ModTime, when)
		}
	}
	// Written again over itself: the same tree.
	os.Chmod(filepath.Join(dir, "ro"), 0o755)
	WriteDir(t, dir, tree)
	if again := ReadDir(t, dir); len(again) != len(back) || string(again["link"].Data) != "SKILL.md" {
		t.Errorf("written twice: %d entries, link %q", len(again), again["link"].Data)
	}
}

func TestWriteDirRefuses(t *testing.T) {
	for name, tree := range map[string]fstest.MapFS{
		"a parent directory": {"../evil": File("x")},
		"an absolute path":   {"/etc/evil": File("x")},
		"the root":           {".": Dir()},
		"a device":           {"null": {Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666}},
		"a fifo":             {"pipe": {Mode: fs.ModeNamedPipe | 0o644}},
		"a file as a parent": {"f": File("x"), "f/g": File("y")},
	} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			msg := fails(t, func(tb testing.TB) { WriteDir(tb, filepath.Join(base, "skill"), tree) })
			if msg == "" {
				t.Fatal("written, want refused")
			}
			if _, err := os.Lstat(filepath.Join(base, "evil")); err == nil {
				t.Errorf("wrote outside the folder")
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "a", "b", "run.sh")
	WriteFile(t, p, []byte("#!/bin/sh\n"), 0o755)
	fi, err := os.Stat(p)
	if err != nil || fi.Mode() != 0o755 {
		t.Fatalf("stat: %v, %v; want 0755", fi.Mode(), err)
	}
}
