package integration

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"skillfs/skills/skilltest"
)

// published lists every path of the content store's published versions
// with its mode and size: what nothing may ever change by accident.
func published(t testing.TB, home string) []string {
	t.Helper()
	root := filepath.Join(home, "store", "skills")
	var out []string
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		size := fi.Size()
		if d.IsDir() {
			size = 0
		}
		out = append(out, fmt.Sprintf("%s %v %d", rel, fi.Mode(), size))
		return nil
	})
	if err != nil {
		t.Fatalf("list the store: %v", err)
	}
	sort.Strings(out)
	return out
}

// runTimeout runs the CLI (a serve that should refuse to start, say) and
// fails the test if it does not exit within a minute.
func (e *env) runTimeout(args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := e.command(ctx, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		e.t.Fatalf("skillfs %v did not exit within a minute", args)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// populated is a data directory with the bundled skills, an imported skill
// with two versions and an open session, the daemon stopped.
func populated(t *testing.T) (*env, string) {
	t.Helper()
	e := newEnv(t)
	src := filepath.Join(t.TempDir(), "notes")
	writeSkill(t, src, "name: notes\ndescription: notes for tests", map[string]string{"tips.md": "one\n"})
	d := e.serve()
	e.ok("skill", "import", src, "--share", "global")
	skilltest.WriteFile(t, filepath.Join(src, "tips.md"), []byte("two\n"), 0o644)
	e.ok("skill", "import", src)
	s := e.newSession("operator", "--all")
	if b, err := os.ReadFile(filepath.Join(s.Path, "notes", "tips.md")); err != nil || string(b) != "two\n" {
		t.Fatalf("read through the mount: %q %v", b, err)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d\n%s", code, d.logs())
	}
	return e, s.ID
}

// The data directory reached through a symlink, moved, or copied whole is
// the same data directory: nothing published is swept, the sessions come
// back, and the content reads as before.
func TestDataDirectorySpelledMovedCopied(t *testing.T) {
	ownIndexOnly(t, "a copied or moved data directory carries its own index file")
	e, sid := populated(t)
	before := published(t, e.home)

	// While a daemon serves H, a command through a symlink to H.
	d := e.serve()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(e.home, link); err != nil {
		t.Fatal(err)
	}
	viaLink := &env{t: t, home: link}
	if out := viaLink.ok("skill", "list", "--json"); !strings.Contains(out, `"notes"`) {
		t.Fatalf("skill list through the symlink: %s", out)
	}
	if got := published(t, e.home); !slices.Equal(got, before) {
		t.Fatalf("the store changed after a command through a symlink:\n%v\n%v", before, got)
	}
	d.stop()
	// Served through the symlink.
	d = viaLink.serve()
	checkSessionReads(t, viaLink, sid)
	d.stop()

	// Moved.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(e.home, moved); err != nil {
		t.Fatal(err)
	}
	m := &env{t: t, home: moved}
	d = m.serve()
	checkSessionReads(t, m, sid)
	d.stop()
	if got := published(t, moved); !slices.Equal(got, before) {
		t.Fatalf("the store changed after a move:\n%v\n%v", before, got)
	}

	// Copied whole, the original kept.
	copied := filepath.Join(t.TempDir(), "copied")
	if out, err := exec.Command("cp", "-a", moved, copied).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	c := &env{t: t, home: copied}
	d = c.serve()
	checkSessionReads(t, c, sid)
	if strings.Contains(d.logs(), "quarantine") {
		t.Errorf("a copy quarantined something:\n%s", d.logs())
	}
	d.stop()
	for _, h := range []string{moved, copied} {
		if got := published(t, h); !slices.Equal(got, before) {
			t.Fatalf("the store of %s changed:\n%v\n%v", h, before, got)
		}
	}
	t.Cleanup(func() { exec.Command("chmod", "-R", "u+w", copied, moved).Run() })
}

// checkSessionReads checks that a restored session reads its skill.
func checkSessionReads(t *testing.T, e *env, sid string) {
	t.Helper()
	var info sessionInfo
	e.okJSON(&info, "session", "show", sid)
	if b, err := os.ReadFile(filepath.Join(info.Path, "notes", "tips.md")); err != nil || string(b) != "two\n" {
		t.Fatalf("session %s after restart reads %q, %v", sid, b, err)
	}
}

// An index that is missing, empty, truncated, corrupted or another data
// directory's: the daemon and every command refuse to start with exit 8
// and say how to repair; nothing published changes; `check --repair`
// rebuilds the catalog from the store and the daemon serves it again.
func TestDamagedIndexRefusedAndRepaired(t *testing.T) {
	ownIndexOnly(t, "it damages the data directory's index file")
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, home string)
	}{
		{"missing", func(t *testing.T, home string) { removeIndex(t, home) }},
		{"empty", func(t *testing.T, home string) {
			if err := os.Truncate(filepath.Join(home, "index.db"), 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", func(t *testing.T, home string) {
			p := filepath.Join(home, "index.db")
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, fi.Size()/3); err != nil {
				t.Fatal(err)
			}
		}},
		{"corrupted", func(t *testing.T, home string) {
			p := filepath.Join(home, "index.db")
			fi, _ := os.Stat(p)
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			junk := []byte(strings.Repeat("\xde\xad\xbe\xef", int(fi.Size()-4096)/4))
			f.WriteAt(junk, 4096)
			f.Close()
		}},
		{"foreign", func(t *testing.T, home string) {
			other, _ := populated(t)
			removeIndex(t, home)
			data, err := os.ReadFile(filepath.Join(other.home, "index.db"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, "index.db"), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := populated(t)
			before := published(t, e.home)
			tc.damage(t, e.home)

			r := e.runTimeout("serve")
			if r.code != 8 || !strings.Contains(r.stderr, "check --repair") {
				t.Fatalf("serve on a %s index: exit %d, want 8 with a way to repair\n%s", tc.name, r.code, r.stderr)
			}
			if got := published(t, e.home); !slices.Equal(got, before) {
				t.Fatalf("the store changed:\n%v\n%v", before, got)
			}
			if r := e.run("check"); r.code != 8 {
				t.Fatalf("check: exit %d, want 8\n%s%s", r.code, r.stdout, r.stderr)
			}
			r = e.run("check", "--repair")
			if r.code != 0 {
				t.Fatalf("check --repair: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if got := published(t, e.home); !slices.Equal(got, before) {
				t.Fatalf("the repair changed the store:\n%v\n%v", before, got)
			}
			if r := e.run("check"); r.code != 0 {
				t.Fatalf("check after the repair: exit %d\n%s", r.code, r.stdout)
			}
			d := e.serve()
			s := e.newSession("operator", "--skills", "notes")
			if b, err := os.ReadFile(filepath.Join(s.Path, "notes", "tips.md")); err != nil || string(b) != "two\n" {
				t.Fatalf("after the repair the session reads %q, %v", b, err)
			}
			var show struct {
				Versions []struct{} `json:"versions"`
			}
			e.okJSON(&show, "skill", "show", "notes")
			if len(show.Versions) != 2 {
				t.Errorf("notes has %d versions after the repair, want 2", len(show.Versions))
			}
			d.stop()
		})
	}
}

func removeIndex(t *testing.T, home string) {
	t.Helper()
	for _, f := range []string{"index.db", "index.db-wal", "index.db-shm"} {
		if err := os.Remove(filepath.Join(home, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}
