package catalog

import (
	"context"
	"errors"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"skillfs/cmd/skillfs/internal/catalog/datadir"
	"skillfs/skills"
	"skillfs/skills/store"
)

// storeListing is every path below the data directory's store/skills with
// its mode and size: what must never change when something goes wrong.
func storeListing(t testing.TB, home string) []string {
	t.Helper()
	root := filepath.Join(home, storeDir, "skills")
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
		out = append(out, rel+" "+fi.Mode().String()+" "+itoa(size))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// populate installs a few skills as two users, with a dependency, a tool, a
// share and an edit, and returns the data directory.
func populate(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	c, err := Open(ctx, home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() // now: tests copy and damage the files it leaves
	for _, u := range []skills.User{{UID: "alice", Role: "user", Department: "eng"}, {UID: "root2", Role: "admin"}} {
		if err := c.PutUser(ctx, "", u, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AddTool(ctx, "", "browser", false); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	skillDir(t, filepath.Join(src, "base"), "name: base\ndescription: the base\ntool_dependencies: [browser]")
	skillDir(t, filepath.Join(src, "top"), "name: top\ndescription: on top\nskill_dependencies: [base]")
	if _, err := c.Import(ctx, ImportRequest{Source: filepath.Join(src, "base"), Share: &skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Import(ctx, ImportRequest{Source: filepath.Join(src, "top"), As: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Edit(ctx, "alice", "top", "notes.md", strings.NewReader(string([]byte("second version\n")))); err != nil {
		t.Fatal(err)
	}
	return home
}

func versionsOf(t testing.TB, c *Catalog, slug string) []string {
	t.Helper()
	vs, err := c.db.Versions(context.Background(), slug)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vs {
		out = append(out, v.Hash)
	}
	return out
}

// A data directory reached through a symlink, or copied whole, is the same
// data directory: nothing of it is swept, nothing quarantined.
func TestDataDirectoryThroughSymlinkOrCopy(t *testing.T) {
	ctx := context.Background()
	home := populate(t)
	before := storeListing(t, home)

	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	c, err := Open(ctx, link, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Home() != home {
		t.Errorf("Home() through a symlink = %q, want the real %q", c.Home(), home)
	}
	r, err := c.Reconcile(ctx)
	if err != nil || !r.OK || len(r.Actions) != 0 {
		t.Fatalf("Reconcile through a symlink = %+v, %v", r, err)
	}
	c.Close()
	if after := storeListing(t, home); !slices.Equal(before, after) {
		t.Fatalf("store changed through a symlink:\n%q\n%q", before, after)
	}

	copyDir := filepath.Join(t.TempDir(), "copied")
	copyTree(t, home, copyDir)
	c, err = Open(ctx, copyDir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err = c.Reconcile(ctx)
	if err != nil || !r.OK || len(r.Actions) != 0 {
		t.Fatalf("Reconcile of a copy = %+v, %v", r, err)
	}
	d, err := c.Show(ctx, "", "top")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.Path, copyDir+"/") {
		t.Errorf("the copy serves %q, outside itself", d.Path)
	}
	if _, err := os.Stat(filepath.Join(d.Path, "notes.md")); err != nil {
		t.Errorf("copied content: %v", err)
	}
}

// copyTree copies a data directory the way `cp -a` would, read-only modes
// included.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	type dirMode struct {
		p string
		m os.FileMode
	}
	var dirs []dirMode
	err := filepath.WalkDir(src, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, dirMode{out, fi.Mode().Perm()})
			return os.MkdirAll(out, 0o755)
		case fi.Mode().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm()|0o200)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, in); err != nil {
				f.Close()
				return err
			}
			f.Close()
			return os.Chmod(out, fi.Mode().Perm())
		}
		return nil // sockets and the like are not copied
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Chmod(dirs[i].p, dirs[i].m)
	}
	t.Cleanup(func() { skills.RemoveTree(dst) })
}

// A missing, empty or foreign index beside published content is a damaged
// data directory: refused with a way to repair it, nothing changed.
func TestDamagedDataDirectoryIsRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, home string)
		want   string
	}{
		{"missing index", func(t *testing.T, home string) {
			for _, f := range []string{"index.db", "index.db-wal", "index.db-shm"} {
				os.Remove(filepath.Join(home, f))
			}
		}, "index.db is missing"},
		{"missing index, WAL left", func(t *testing.T, home string) {
			os.Remove(filepath.Join(home, "index.db"))
			os.WriteFile(filepath.Join(home, "index.db-wal"), []byte("x"), 0o600)
		}, "write-ahead log"},
		{"empty index", func(t *testing.T, home string) {
			os.Truncate(filepath.Join(home, "index.db"), 0)
		}, "index.db is empty"},
		{"fresh database in place of the index", func(t *testing.T, home string) {
			for _, f := range []string{"index.db", "index.db-wal", "index.db-shm"} {
				os.Remove(filepath.Join(home, f))
			}
			other := filepath.Join(t.TempDir(), "x.db")
			db, err := openParts(filepath.Dir(other), Options{}.withDefaults())
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			copyFile(t, filepath.Join(filepath.Dir(other), "index.db"), filepath.Join(home, "index.db"))
		}, "holds no skills and no users"},
		{"foreign index", func(t *testing.T, home string) {
			other := populate(t)
			for _, f := range []string{"index.db", "index.db-wal", "index.db-shm"} {
				os.Remove(filepath.Join(home, f))
			}
			c, err := Open(ctx, other, Options{})
			if err != nil {
				t.Fatal(err)
			}
			c.Close() // checkpoints the WAL into index.db
			copyFile(t, filepath.Join(other, "index.db"), filepath.Join(home, "index.db"))
		}, "belongs to data directory"},
		{"garbage index", func(t *testing.T, home string) {
			for _, f := range []string{"index.db-wal", "index.db-shm"} {
				os.Remove(filepath.Join(home, f))
			}
			os.WriteFile(filepath.Join(home, "index.db"), []byte(strings.Repeat("not a database ", 400)), 0o600)
		}, "cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := populate(t)
			before := storeListing(t, home)
			tc.damage(t, home)
			_, err := Open(ctx, home, Options{})
			var de *datadir.DamagedError
			if !errors.As(err, &de) || !errors.Is(err, skills.ErrDamaged) {
				t.Fatalf("Open = %v, want a DamagedError", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "check --repair") {
				t.Errorf("message %q: want %q and the repair command", err, tc.want)
			}
			if after := storeListing(t, home); !slices.Equal(before, after) {
				t.Fatalf("store changed:\n%q\n%q", before, after)
			}
			r, err := datadir.Check(ctx, home, true)
			if err != nil || r.OK || r.Index == datadir.IndexOK {
				t.Fatalf("Check = %+v, %v", r, err)
			}

			// The repair rebuilds the catalog from the store.
			r, err = Repair(ctx, home, Options{})
			if err != nil {
				t.Fatalf("Repair: %v", err)
			}
			if !r.OK || len(r.Missing) != 0 || r.Skills != 2 || r.Versions != 3 || r.Stored != 3 {
				t.Fatalf("after repair: %+v", r)
			}
			// What the repair says it did names only files that are there.
			for _, a := range r.Actions {
				for _, f := range strings.Fields(a) {
					if strings.HasPrefix(f, home) {
						if _, err := os.Stat(f); err != nil {
							t.Errorf("repair says %q: %v", a, err)
						}
					}
				}
			}
			if tc.name == "missing index" && !slices.Contains(r.Actions, "no index was there: built a new one from the store") {
				t.Errorf("repair of a missing index says %q", r.Actions)
			}
			if after := storeListing(t, home); !slices.Equal(before, after) {
				t.Fatalf("repair changed the store:\n%q\n%q", before, after)
			}
			checkRebuilt(t, home)
			aside, _ := filepath.Glob(filepath.Join(home, "index.db.damaged-*"))
			if tc.name != "missing index" && len(aside) == 0 {
				t.Error("the damaged index was not kept")
			}
		})
	}
}

// checkRebuilt checks what populate made came back from the store.
func checkRebuilt(t *testing.T, home string) {
	t.Helper()
	ctx := context.Background()
	c, err := Open(ctx, home, Options{})
	if err != nil {
		t.Fatalf("Open after repair: %v", err)
	}
	defer c.Close()
	top, err := c.Show(ctx, "", "top")
	if err != nil {
		t.Fatal(err)
	}
	if top.Creator != "alice" || len(top.Versions) != 2 || top.Versions[0].Hash != top.Version ||
		top.Versions[0].Previous != top.Versions[1].Hash || top.Versions[0].Installer != "alice" {
		t.Errorf("rebuilt top: %+v versions %+v", top.Skill, top.Versions)
	}
	if _, err := os.Stat(filepath.Join(top.Path, "notes.md")); err != nil {
		t.Errorf("current version of top is not the edited one: %v", err)
	}
	base, err := c.Show(ctx, "", "base")
	if err != nil {
		t.Fatal(err)
	}
	if base.Share.Read.Kind != skills.ScopeGlobal || !slices.Equal(base.ToolDependencies, []string{"browser"}) {
		t.Errorf("rebuilt base: %+v", base.Skill)
	}
	if tools, _ := c.Tools(ctx, false); !slices.Contains(tools, "browser") {
		t.Errorf("tools after repair: %v", tools)
	}
	if u, err := c.Actor(ctx, "alice"); err != nil || u.Role != skills.RoleUser {
		t.Errorf("alice after repair: %+v %v", u, err)
	}
	if u, err := c.Actor(ctx, Operator); err != nil || u.Role != skills.RoleSuperadmin {
		t.Errorf("operator after repair: %+v %v", u, err)
	}
	// Alice still manages her skill: the rebuilt catalog is usable.
	if _, err := c.Edit(ctx, "alice", "top", "notes.md", strings.NewReader(string([]byte("third\n")))); err != nil {
		t.Errorf("edit after repair: %v", err)
	}
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A version the index cannot explain (an import that crashed between
// publishing and recording it) is moved to the quarantine, never deleted,
// and comes back when an index that needs it is restored.
func TestReconcileQuarantinesAndRestores(t *testing.T) {
	ctx := context.Background()
	home := populate(t)
	c, err := Open(ctx, home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hash := publishUnindexed(t, c, "orphan")
	half, _ := c.store.NewStaging()
	os.WriteFile(filepath.Join(half, "x"), []byte("x"), 0o644)
	c.Close()

	// Opening sweeps the staging area but leaves published content alone.
	c, err = Open(ctx, home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(leftovers(t, c)) != 0 {
		t.Errorf("staging not swept: %v", leftovers(t, c))
	}
	if _, err := os.Stat(c.store.VersionPath("orphan", hash)); err != nil {
		t.Fatalf("Open touched published content: %v", err)
	}
	r, err := c.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || len(r.Actions) != 1 || !strings.Contains(r.Actions[0], "orphan") || len(r.Quarantine) != 1 {
		t.Fatalf("Reconcile = %+v", r)
	}
	if _, err := os.Stat(filepath.Join(home, r.Quarantine[0].Path, "SKILL.md")); err != nil {
		t.Fatalf("quarantined content: %v", err)
	}

	// A version the index needs and only the quarantine has comes back.
	top, _ := c.db.Skill(ctx, "top")
	if _, err := c.store.Quarantine("top", top.Version, "test"); err != nil {
		t.Fatal(err)
	}
	r, err = c.Reconcile(ctx)
	if err != nil || !r.OK || len(r.Missing) != 0 {
		t.Fatalf("Reconcile with a version in quarantine = %+v, %v", r, err)
	}
	if _, err := os.Stat(c.store.VersionPath("top", top.Version)); err != nil {
		t.Fatalf("not restored: %v", err)
	}
	c.Close()
	skills.RemoveTree(filepath.Join(home, storeDir, "quarantine"))
}

// Versions published before versions carried metadata get it at the next
// reconcile, so a later repair can rebuild them.
func TestReconcileBackfillsMetadata(t *testing.T) {
	ctx := context.Background()
	home := populate(t)
	c := openHome(t, home)
	base, _ := c.db.Skill(ctx, "base")
	dir := c.store.VersionPath("base", base.Version)
	os.Chmod(dir, 0o755)
	if err := os.Remove(filepath.Join(dir, skills.MetaFileName)); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o555)
	r, err := c.Reconcile(ctx)
	if err != nil || !r.OK {
		t.Fatalf("Reconcile = %+v, %v", r, err)
	}
	m, err := c.store.ReadMeta("base", base.Version)
	if err != nil || m.Skill.Share.Read.Kind != skills.ScopeGlobal || m.Version.Installer != Operator {
		t.Fatalf("backfilled metadata = %+v, %v", m, err)
	}
}

// Content changed on disk is found by a check and quarantined by a repair;
// the skill falls back to a version whose content is intact.
func TestRepairQuarantinesTamperedContent(t *testing.T) {
	ctx := context.Background()
	home := populate(t)
	c, err := Open(ctx, home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	top, _ := c.db.Skill(ctx, "top")
	vs := versionsOf(t, c, "top")
	c.Close()
	p := filepath.Join(home, storeDir, "skills", "top", top.Version, "notes.md")
	os.Chmod(filepath.Dir(p), 0o755)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte("changed behind our back\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := datadir.Check(ctx, home, true)
	if err != nil || r.OK || len(r.Mismatched) != 1 || r.Mismatched[0].Hash != top.Version {
		t.Fatalf("Check = %+v, %v", r, err)
	}
	r, err = Repair(ctx, home, Options{})
	if err != nil || !r.OK {
		t.Fatalf("Repair = %+v, %v", r, err)
	}
	c, err = Open(ctx, home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now, _ := c.db.Skill(ctx, "top")
	if now.Version != vs[1] {
		t.Errorf("top after repair at %s, want the older intact %s", now.Version, vs[1])
	}
	skills.RemoveTree(filepath.Join(home, storeDir, "quarantine"))
}

// A repair never runs under a live daemon.
func TestRepairRefusesWhileServed(t *testing.T) {
	home := populate(t)
	release, err := LockServe(home)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := Repair(context.Background(), home, Options{}); !errors.Is(err, skills.ErrExists) {
		t.Fatalf("Repair while served = %v, want ErrExists", err)
	}
}

// A version that cannot be moved to the quarantine stays where it is,
// reported: a start never fails over content nobody serves.
func TestReconcileSurvivesAFailedQuarantine(t *testing.T) {
	ctx := context.Background()
	home := populate(t)
	c := openHome(t, home)
	hash := publishUnindexed(t, c, "orphan")
	// The quarantine cannot be made: a file is in its way.
	if err := os.WriteFile(filepath.Join(home, storeDir, "quarantine"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := c.Reconcile(ctx)
	if err != nil {
		t.Fatalf("Reconcile with a failing quarantine: %v", err)
	}
	if r.OK || len(r.Unexplained) != 1 || r.Unexplained[0].Slug != "orphan" {
		t.Fatalf("report = %+v, want orphan left unexplained", r)
	}
	if _, err := os.Stat(c.store.VersionPath("orphan", hash)); err != nil {
		t.Fatalf("the version moved anyway: %v", err)
	}
}

// Writing a version's metadata leaves nothing else in it, whatever happens
// midway, so its hash never changes.
func TestBackfillLeavesOnlyTheMetadata(t *testing.T) {
	ctx := context.Background()
	home := populate(t)
	c := openHome(t, home)
	base, _ := c.db.Skill(ctx, "base")
	dir := c.store.VersionPath("base", base.Version)
	before, _ := os.ReadDir(dir)
	if err := c.dataDir().BackfillMeta(ctx, datadir.VersionRef{Slug: "base", Hash: base.Version}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Fatalf("the version held %d entries, now %d", len(before), len(after))
	}
	if got, _, _, err := store.TreeHash(dir); err != nil || got != base.Version {
		t.Fatalf("hash after backfill %s, %v", got, err)
	}
	if l := leftovers(t, c); len(l) != 0 {
		t.Fatalf("leftovers: %v", l)
	}
}

// A FIFO in place of the index is damage, found without opening it.
func TestIndexThatIsAFIFO(t *testing.T) {
	home := populate(t)
	removeIndexFiles(t, home)
	if err := syscall.Mkfifo(filepath.Join(home, "index.db"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Open(context.Background(), home, Options{})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, skills.ErrDamaged) {
			t.Fatalf("Open with a FIFO index = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open blocked on a FIFO index")
	}
	r, err := Repair(context.Background(), home, Options{})
	if err != nil || !r.OK {
		t.Fatalf("Repair = %+v, %v", r, err)
	}
}

func removeIndexFiles(t testing.TB, home string) {
	t.Helper()
	for _, f := range []string{"index.db", "index.db-wal", "index.db-shm"} {
		if err := os.Remove(filepath.Join(home, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// Content reinstalled after newer content (A, B, then A again) is current;
// a rebuild from the store keeps it so.
func TestRebuildKeepsARevert(t *testing.T) {
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	c, err := Open(ctx, home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "notes")
	write := func(desc string) {
		skillDir(t, src, "name: notes\ndescription: "+desc)
		if _, err := c.Import(ctx, ImportRequest{Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	write("two")
	write("one")
	want, _ := c.db.Skill(ctx, "notes")
	c.Close()
	removeIndexFiles(t, home)
	if r, err := Repair(ctx, home, Options{}); err != nil || !r.OK {
		t.Fatalf("Repair = %+v, %v", r, err)
	}
	c, err = Open(ctx, home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, _ := c.db.Skill(ctx, "notes")
	if got.Version != want.Version || got.Description != "one" {
		t.Fatalf("after the rebuild notes is at %s (%q), want %s (%q)", got.Version, got.Description, want.Version, "one")
	}
	// The event log was lost with the index: an id a client may hold from
	// it (a small one) counts as pruned, so it is told to resync.
	page, err := c.db.Events(ctx, "", 41, 10)
	if err != nil || page.Pruned < 41 || page.Last < page.Pruned {
		t.Fatalf("event log after the rebuild: %+v, %v; want ids restarted above the old ones", page, err)
	}
}

// openHome opens the catalog of a data directory until the test ends.
func openHome(t testing.TB, home string) *Catalog {
	t.Helper()
	c, err := Open(context.Background(), home, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// publishUnindexed publishes a version of slug with no index row, as an
// import killed between publishing and recording leaves it.
func publishUnindexed(t testing.TB, c *Catalog, slug string) string {
	t.Helper()
	staging, err := c.store.NewStaging()
	if err != nil {
		t.Fatal(err)
	}
	skillDir(t, staging, "name: "+slug+"\ndescription: x")
	hash, _, _, err := store.TreeHash(staging)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.store.Publish(staging, slug, hash, nil); err != nil {
		t.Fatal(err)
	}
	return hash
}
