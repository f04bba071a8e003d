package catalog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"skillfs/cmd/skillfs/internal/catalog/datadir"
	"skillfs/skills"
)

// locksHeld counts the POSIX locks this process holds on the file at p, as
// /proc/locks lists them. SQLite holds one on its database file while a
// connection is open; closing any other descriptor of the file drops it.
func locksHeld(t testing.TB, p string) int {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pid, ino := strconv.Itoa(os.Getpid()), ":"+strconv.FormatUint(st.Ino, 10)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: POSIX  ADVISORY  READ 16185 fe:00:9980588 1073741826 1073742335"
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && fields[1] == "POSIX" && fields[4] == pid && strings.HasSuffix(fields[5], ino) {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// fenceCase is one source that reaches the data directory or the index.
type fenceCase struct {
	name  string
	path  string
	dir   bool // a folder (else a file)
	skill bool // a folder with a SKILL.md of its own
	holds bool // a folder holding the data directory or the index
}

// fenceCases builds, for the catalog c whose index is the SQLite file
// indexPath, every kind of source that must be refused: the data directory,
// what lies in it (store, a published version, a draft, tmp, a missing
// file), the index and the files beside it (directly, through a symlink,
// through a hard link), and folders holding the data directory or the
// index.
func fenceCases(t *testing.T, c *Catalog, indexPath string) []fenceCase {
	t.Helper()
	ctx := context.Background()
	outside := t.TempDir()
	src := skillDir(t, filepath.Join(outside, "pdf"), "name: pdf\ndescription: a skill")
	res, err := c.Import(ctx, ImportRequest{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Prepare(ctx, ImportRequest{Source: skillDir(t, filepath.Join(outside, "draft"), "name: draft\ndescription: a draft")})
	if err != nil {
		t.Fatal(err)
	}
	tmpSkill := skillDir(t, filepath.Join(c.home, tmpDir, "a-skill"), "name: tmp-skill\ndescription: in tmp")
	link := filepath.Join(outside, "index-link")
	if err := os.Symlink(indexPath, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(outside, "index-hardlink")
	if err := os.Link(indexPath, hard); err != nil {
		t.Fatal(err)
	}
	homeLink := filepath.Join(outside, "home-link")
	if err := os.Symlink(c.home, homeLink); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(indexPath + suffix); err != nil {
			t.Fatalf("the index has no %s to try: %v", suffix, err)
		}
	}
	cases := []fenceCase{
		{name: "the data directory", path: c.home, dir: true},
		{name: "the data directory through a symlink", path: homeLink, dir: true},
		{name: "the store", path: filepath.Join(c.home, storeDir), dir: true},
		{name: "a published version", path: c.VersionPath(res.Installed[0].Slug, res.Installed[0].Version), dir: true, skill: true},
		{name: "a draft", path: filepath.Join(c.home, draftsDir, d.ID, "0"), dir: true, skill: true},
		{name: "tmp", path: filepath.Dir(tmpSkill), dir: true},
		{name: "a skill in tmp", path: tmpSkill, dir: true, skill: true},
		{name: "a missing file in the data directory", path: filepath.Join(c.home, "no-such-file.zip")},
		{name: "the index", path: indexPath},
		{name: "the index through a symlink", path: link},
		{name: "the index through a hard link", path: hard},
		{name: "the index's -wal", path: indexPath + "-wal"},
		{name: "the index's -shm", path: indexPath + "-shm"},
		{name: "the folder holding the data directory", path: filepath.Dir(c.home), dir: true, holds: true},
		{name: "the root", path: "/", dir: true, holds: true},
	}
	if filepath.Dir(indexPath) != c.home {
		cases = append(cases, fenceCase{name: "the folder holding the index", path: filepath.Dir(indexPath), dir: true, holds: true})
	}
	return cases
}

func (fc fenceCase) exists() bool {
	_, err := os.Stat(fc.path)
	return err == nil
}

// fenceEntry is one way a source reaches the catalog. It returns the
// refusal, or nil when the source was taken.
type fenceEntry struct {
	name string
	run  func(t *testing.T, c *Catalog, fc fenceCase) (given string, err error)
}

var fenceEntries = []fenceEntry{
	{"import", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		_, err := c.Import(context.Background(), ImportRequest{Source: fc.path, All: true})
		return fc.path, err
	}},
	{"import --list", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		_, err := c.Import(context.Background(), ImportRequest{Source: fc.path, List: true})
		return fc.path, err
	}},
	{"import --path", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		_, err := c.Import(context.Background(), ImportRequest{Source: fc.path, Path: "x", All: true})
		return fc.path, err
	}},
	{"import as a file:// URL", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		_, err := c.Import(context.Background(), ImportRequest{Source: "file://" + fc.path, All: true})
		return "file://" + fc.path, err
	}},
	{"prepare (a draft, through the API)", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		_, err := c.Prepare(context.Background(), ImportRequest{Source: fc.path, All: true, API: true})
		return fc.path, err
	}},
	{"curated add", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		_, err := c.AddCurated(context.Background(), CuratedRequest{Source: fc.path, API: true})
		return fc.path, err
	}},
	{"update of a recorded local source", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		// A skill installed from a folder that is now a link to the source.
		ctx := context.Background()
		dir := filepath.Join(t.TempDir(), "upd")
		skillDir(t, dir, "name: upd-"+strconv.Itoa(len(t.Name()))+"\ndescription: to update")
		res, err := c.Import(ctx, ImportRequest{Source: dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(fc.path, dir); err != nil {
			t.Fatal(err)
		}
		up, err := c.Update(ctx, UpdateRequest{Slugs: []string{res.Installed[0].Slug}})
		if err != nil {
			t.Fatal(err)
		}
		if u := up.Skills[0]; u.Status == UpdateFailed && strings.Contains(u.Error, "never") {
			return dir, fmt.Errorf("%s: %w", u.Error, skills.ErrInvalid)
		} else if u.Status == UpdateFailed {
			return dir, errors.New(u.Error)
		}
		return dir, nil
	}},
	{"agents: a project skill linked to it", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		project := t.TempDir()
		skill := filepath.Join(project, ".claude", "skills", "evil")
		target := fc.path
		if !fc.dir { // a skill folder whose SKILL.md is the file
			if err := os.MkdirAll(skill, 0o755); err != nil {
				t.Fatal(err)
			}
			skill = filepath.Join(skill, skills.ManifestName)
		} else if err := os.MkdirAll(filepath.Dir(skill), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, skill); err != nil {
			t.Fatal(err)
		}
		res, err := c.Import(context.Background(), ImportRequest{Agents: true, Project: project, All: true})
		for _, f := range res.Failed {
			if strings.Contains(f.Error, "never") {
				return skill, fmt.Errorf("%s: %w", f.Error, skills.ErrInvalid)
			}
		}
		if err != nil && !errors.Is(err, skills.ErrNoManifest) {
			return skill, err
		}
		if len(res.Installed) > 0 {
			return skill, nil
		}
		return skill, fmt.Errorf("nothing installed, but not refused either: %v %+v", err, res.Failed)
	}},
	{"agents --project it", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		_, err := c.Import(context.Background(), ImportRequest{Agents: true, AgentHome: t.TempDir(), Project: fc.path, All: true})
		return fc.path, err
	}},
	{"edit --from", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		return fc.path, c.CheckSource(fc.path, fc.path)
	}},
	{"validate", func(t *testing.T, c *Catalog, fc fenceCase) (string, error) {
		index := ""
		if files := c.db.Files(); len(files) > 0 && filepath.Dir(files[0]) != c.home {
			index = files[0]
		}
		return fc.path, CheckSourceIn(c.home, index, fc.path, fc.path)
	}},
}

// Every way a source reaches the catalog refuses every source that is, lies
// in or holds the data directory, or is a file of the index, with
// skills.ErrInvalid naming the source as given; nothing is installed, and
// the index's file is never opened: the POSIX lock SQLite holds on it
// stays (closing any other descriptor of the file would drop it).
//
// The catalog's import root is /, so that the API's sources pass the roots
// and what refuses them is the fence.
func TestSourcesReachingTheDataDirectoryAreRefused(t *testing.T) {
	c := openWith(t, Options{ImportRoots: rootsOf(t, "/")})
	indexPath := filepath.Join(c.home, indexFile)
	testFence(t, c, indexPath)
}

// A shared SQLite index outside the data directory is guarded as the data
// directory's own is: the file, the files beside it, the folder holding
// it.
func TestSourcesReachingASharedIndexAreRefused(t *testing.T) {
	indexPath := filepath.Join(t.TempDir(), "fleet", "fleet.db")
	if err := os.MkdirAll(filepath.Dir(indexPath), 0o700); err != nil {
		t.Fatal(err)
	}
	c := openWith(t, Options{Index: indexPath, ImportRoots: rootsOf(t, "/")})
	testFence(t, c, indexPath)
}

func testFence(t *testing.T, c *Catalog, indexPath string) {
	ctx := context.Background()
	cases := fenceCases(t, c, indexPath)
	if locksHeld(t, indexPath) == 0 {
		t.Fatal("SQLite holds no lock on the index: nothing to watch")
	}
	tried := 0
	for _, fc := range cases {
		for _, ep := range fenceEntries {
			switch {
			case ep.name == "agents: a project skill linked to it" && (fc.dir && !fc.skill || !fc.dir && !fc.exists()):
				continue // no skill folder, so nothing is read: nothing to guard
			case ep.name == "agents --project it" && (!fc.dir || fc.holds):
				continue // only the project's agent folders are read, each guarded
			}
			t.Run(fc.name+"/"+ep.name, func(t *testing.T) {
				tried++
				before, err := c.db.Count(ctx)
				if err != nil {
					t.Fatal(err)
				}
				given, err := ep.run(t, c, fc)
				if n := locksHeld(t, indexPath); n == 0 {
					t.Fatalf("the index's POSIX locks are gone: the file was opened and closed beside SQLite (err %v)", err)
				}
				if !errors.Is(err, skills.ErrInvalid) || !strings.Contains(err.Error(), "never") {
					t.Fatalf("err = %v, want a refusal wrapping ErrInvalid", err)
				}
				if !strings.Contains(err.Error(), strconv.Quote(given)) {
					t.Errorf("the refusal does not name the source as given (%q): %v", given, err)
				}
				after, err := c.db.Count(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if after.Skills > before.Skills+1 { // update's own setup installs one
					t.Errorf("skills %d → %d", before.Skills, after.Skills)
				}
			})
		}
	}
	t.Logf("%d sources × %d entry points: %d tried, all refused, index locks held", len(cases), len(fenceEntries), tried)

	// What the fence leaves alone: an upload, which the catalog reads from
	// its own temporary area, and a folder beside the data directory.
	if _, err := c.PrepareUpload(ctx, ImportRequest{}, UploadManifest, "SKILL.md",
		strings.NewReader("---\nname: uploaded\ndescription: an upload\n---\nbody\n")); err != nil {
		t.Errorf("upload: %v", err)
	}
	beside := skillDir(t, filepath.Join(filepath.Dir(c.home), "beside"), "name: beside\ndescription: next to the data directory")
	if _, err := c.Import(ctx, ImportRequest{Source: beside}); err != nil {
		t.Errorf("a folder beside the data directory: %v", err)
	}
}

// Nothing but SQLite opens the index's files: everything a process that
// has the index open does to the data directory besides importing —
// inspecting it when another catalog opens it, checking and hashing it,
// reconciling the store, telling whether it exists — leaves the POSIX lock
// SQLite holds on index.db in place (closing any other descriptor of the
// file would drop it).
func TestIndexIsOpenedOnlyThroughTheDriver(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	p := filepath.Join(c.home, indexFile)
	src := skillDir(t, filepath.Join(t.TempDir(), "pdf"), "name: pdf\ndescription: a skill")
	if _, err := c.Import(ctx, ImportRequest{Source: src}); err != nil {
		t.Fatal(err)
	}
	if locksHeld(t, p) == 0 {
		t.Fatal("SQLite holds no lock on the index: nothing to watch")
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"open the data directory again", func() error {
			c2, err := Open(ctx, c.home, Options{})
			if err == nil {
				err = c2.Close()
			}
			return err
		}},
		{"check, hashing every version", func() error { _, err := datadir.Check(ctx, c.home, true); return err }},
		{"reconcile the store", func() error { _, err := c.Reconcile(ctx); return err }},
		{"tell whether it exists", func() error {
			if !Exists(c.home) {
				return errors.New("the data directory does not exist")
			}
			return nil
		}},
		{"check the index's files", func() error { return c.db.CheckFiles() }},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if locksHeld(t, p) == 0 {
			t.Fatalf("%s dropped the process's POSIX locks on the index: it opened the file beside SQLite", s.name)
		}
	}
}
