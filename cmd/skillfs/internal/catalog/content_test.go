package catalog

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"skillfs/cmd/skillfs/internal/catalog/datadir"
	skfs "skillfs/fs"
	"skillfs/fs/fusetest"
	"skillfs/fs/readbench"
	"skillfs/index/pgtest"
	"skillfs/skills"
	"skillfs/skills/skilltest"
	"skillfs/skills/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// sharedIndexes are the shared indexes the fleet tests run on: a SQLite
// file beside the hosts' data directories, and a PostgreSQL database (see
// pgtest).
var sharedIndexes = []struct {
	name   string
	target func(t testing.TB) string
}{
	{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "fleet.db") }},
	{"postgres", pgtest.Database},
}

// forEachSharedIndex runs test once per kind of shared index, as a subtest
// named after it, with a new, empty one.
func forEachSharedIndex(t *testing.T, test func(t *testing.T, index string)) {
	for _, si := range sharedIndexes {
		t.Run(si.name, func(t *testing.T) { test(t, si.target(t)) })
	}
}

// fleet opens two hosts of one catalog: data directories a and b sharing
// the index at index.
func fleet(t testing.TB, index string) (a, b *Catalog) {
	t.Helper()
	dir := t.TempDir()
	open := func(name string) *Catalog {
		c, err := Open(context.Background(), filepath.Join(dir, name), Options{Index: index})
		if err != nil {
			t.Fatalf("open host %s: %v", name, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return open("a"), open("b")
}

// fleetSkill writes a skill source with what a version may hold: nested
// folders, an empty one, an executable, an empty file, and a file of big
// random bytes (none when big is 0).
func fleetSkill(t testing.TB, big int) string {
	t.Helper()
	tree := skilltest.Skill("name: fleet-skill\ndescription: served by every host", "body\n", map[string]string{
		"scripts/run.sh":       "#!/bin/sh\necho run\n",
		"references/a/deep.md": "# deep\n",
		"assets/empty.txt":     "",
	})
	tree["empty-folder"] = skilltest.Dir()
	if big > 0 {
		data := make([]byte, big)
		rand.Read(data)
		tree["assets/big.bin"] = &fstest.MapFile{Data: data}
	}
	return skilltest.WriteDir(t, filepath.Join(t.TempDir(), "fleet-skill"), tree)
}

// importOne imports src into c and returns the version installed.
func importOne(t testing.TB, c *Catalog, src string) (slug, hash string) {
	t.Helper()
	res, err := c.Import(context.Background(), ImportRequest{Source: src})
	if err != nil || len(res.Installed) != 1 {
		t.Fatalf("import %s: %v (%+v)", src, err, res)
	}
	return res.Installed[0].Slug, res.Installed[0].Version
}

// sameTree fails unless two version directories hold the same entries
// with the same bytes, modes and modification times, and the same
// metadata.
func sameTree(t testing.TB, want, got string) {
	t.Helper()
	list := func(root string) map[string]string {
		out := map[string]string{}
		err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
			if err != nil || p == root {
				return err
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			desc := fi.Mode().String()
			if !fi.IsDir() {
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				desc += " " + string(data)
				if rel != skills.MetaFileName { // written at publish on each host
					desc += " " + fi.ModTime().String()
				}
			}
			out[rel] = desc
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	w, g := list(want), list(got)
	if len(w) != len(g) {
		t.Errorf("%d entries, want %d", len(g), len(w))
	}
	for rel, desc := range w {
		if g[rel] != desc {
			t.Errorf("%s differs: %.80q, want %.80q", rel, g[rel], desc)
		}
	}
}

// A version imported on host a is fetched by host b on first use: the same
// tree, its metadata, verified; fetched once however many ask at once, and
// not again.
func TestEnsureVersionFillsFromSharedIndex(t *testing.T) {
	forEachSharedIndex(t, testEnsureVersionFillsFromSharedIndex)
}

func testEnsureVersionFillsFromSharedIndex(t *testing.T, index string) {
	ctx := context.Background()
	a, b := fleet(t, index)
	slug, hash := importOne(t, a, fleetSkill(t, 3<<20))
	if _, err := os.Lstat(b.VersionPath(slug, hash)); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("host b holds the version before it used it: %v", err)
	}
	dir, err := b.EnsureVersion(ctx, slug, hash)
	if err != nil {
		t.Fatal(err)
	}
	if dir != b.VersionPath(slug, hash) {
		t.Fatalf("EnsureVersion = %q, want the store's %q", dir, b.VersionPath(slug, hash))
	}
	sameTree(t, a.VersionPath(slug, hash), dir)
	if got, _, _, err := store.TreeHash(dir); err != nil || got != hash {
		t.Fatalf("the copy hashes to %s (%v), want %s", got, err, hash)
	}
	if b.Verified(dir).IsZero() {
		t.Error("a fetched copy is not verified")
	}
	st := b.ContentStats()
	if st.Fills != 1 || st.FillBytes < 3<<20 || st.FillFailures != 0 || st.Damaged != 0 {
		t.Errorf("after one fetch: %+v", st)
	}
	if _, err := b.EnsureVersion(ctx, slug, hash); err != nil || b.ContentStats().Fills != 1 {
		t.Errorf("a second use fetched again (or failed: %v)", err)
	}
	if len(leftovers(t, b)) > 0 {
		t.Errorf("a fetch left %v", leftovers(t, b))
	}

	// A new version, asked for by many at once, is fetched once.
	ed, err := a.Edit(ctx, "", slug, "references/new.md", strings.NewReader("# new\n"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	errs := make([]error, 8)
	for i := range dirs {
		wg.Go(func() { dirs[i], errs[i] = b.EnsureVersion(ctx, slug, ed.Version) })
	}
	wg.Wait()
	for i := range dirs {
		if errs[i] != nil || dirs[i] != b.VersionPath(slug, ed.Version) {
			t.Fatalf("concurrent EnsureVersion %d = %q, %v", i, dirs[i], errs[i])
		}
	}
	if n := b.ContentStats().Fills; n != 2 {
		t.Errorf("%d fetches for two versions", n)
	}
	sameTree(t, a.VersionPath(slug, ed.Version), dirs[0])

	// A copy moved away behind b's back is fetched again.
	if _, err := b.Store().Quarantine(slug, ed.Version, "moved by hand"); err != nil {
		t.Fatal(err)
	}
	if dir, err := b.EnsureVersion(ctx, slug, ed.Version); err != nil || b.ContentStats().Fills != 3 {
		t.Fatalf("EnsureVersion of a copy moved away = %q, %v, after %d fetches", dir, err, b.ContentStats().Fills)
	}
	sameTree(t, a.VersionPath(slug, ed.Version), dirs[0])

	// What reads version content on b fetches it: export, diff.
	var zip bytes.Buffer
	if err := b.ExportVersion(ctx, "", slug, "", &zip); err != nil || zip.Len() == 0 {
		t.Errorf("export on b: %v", err)
	}
	if d, err := b.Diff(ctx, "", slug, hash, ed.Version); err != nil || d.DiffStat.FilesAdded != 1 {
		t.Errorf("diff on b = %+v, %v; want one file added", d, err)
	}
}

// A chunk damaged in the shared index fails the fetch as damage that names
// the version, and nothing is published.
func TestDamagedChunkIsNeverPublished(t *testing.T) {
	forEachSharedIndex(t, testDamagedChunkIsNeverPublished)
}

func testDamagedChunkIsNeverPublished(t *testing.T, index string) {
	ctx := context.Background()
	a, b := fleet(t, index)
	slug, hash := importOne(t, a, fleetSkill(t, 2<<20))
	// The bytes of one chunk replaced with as many zeros: its name no
	// longer matches.
	driver, zeros := "sqlite3", "zeroblob(size)"
	if strings.HasPrefix(index, "postgres") {
		driver, zeros = "pgx", "decode(repeat('00', CAST(size AS integer)), 'hex')"
	}
	db, err := sql.Open(driver, index)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`UPDATE content_chunks SET data = ` + zeros + `
		WHERE sum = (SELECT sum FROM content_chunks ORDER BY size DESC LIMIT 1)`)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("damage a chunk: %v (%d rows)", err, n)
	}
	_, err = b.EnsureVersion(ctx, slug, hash)
	if !errors.Is(err, skills.ErrDamaged) || !strings.Contains(err.Error(), hash) || !strings.Contains(err.Error(), slug) {
		t.Fatalf("EnsureVersion of damaged content = %v, want ErrDamaged naming %s of %s", err, hash, slug)
	}
	if _, err := os.Lstat(b.VersionPath(slug, hash)); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("damaged content was published: %v", err)
	}
	if left := leftovers(t, b); len(left) > 0 {
		t.Errorf("a failed fetch left %v", left)
	}
	if st := b.ContentStats(); st.Damaged != 1 || st.FillFailures != 1 || st.Fills != 0 {
		t.Errorf("after a damaged fetch: %+v", st)
	}
}

// damage rewrites a file of a store's copy with other bytes of its size, as
// a disk or an operator might.
func damage(t testing.TB, p string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] ^= 0xff
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A file of host b's copy damaged on its disk after b verified it is
// refused by the mount (EIO, never its bytes, though the file was open and
// its descriptor cached), a good copy is fetched and takes the damaged
// one's place (which goes to the quarantine), and reads then succeed with
// the right bytes.
func TestDamagedCacheIsRefusedQuarantinedAndFetchedAgain(t *testing.T) {
	forEachSharedIndex(t, testDamagedCacheIsRefusedQuarantinedAndFetchedAgain)
}

func testDamagedCacheIsRefusedQuarantinedAndFetchedAgain(t *testing.T, index string) {
	fusetest.Require(t)
	ctx := context.Background()
	a, b := fleet(t, index)
	slug, hash := importOne(t, a, fleetSkill(t, 0))
	dir, err := b.EnsureVersion(ctx, slug, hash)
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := skfs.Mount(mnt, skfs.Options{Content: b, FsName: "skillfs-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Unmount() })
	if err := srv.SetSession("s", skfs.View{{Slug: slug, Version: hash, Dir: dir}}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(mnt, "s", slug, "references", "a", "deep.md")
	if data, err := readbench.ReadCold(p); err != nil || string(data) != "# deep\n" {
		t.Fatalf("read before the damage = %q, %v", data, err)
	}

	damage(t, filepath.Join(dir, "references", "a", "deep.md"))
	data, err := readbench.ReadCold(p)
	if !errors.Is(err, syscall.EIO) || len(data) != 0 {
		t.Fatalf("read of a damaged copy = %q, %v; want no bytes and EIO", data, err)
	}
	b.cache.WaitFetches() // the fetch the damage started
	if data, err := readbench.ReadCold(p); err != nil || string(data) != "# deep\n" {
		t.Fatalf("read after the copy was fetched again = %q, %v", data, err)
	}
	q, err := b.Store().Quarantined()
	if err != nil || len(q) != 1 || q[0].Slug != slug || q[0].Hash != hash {
		t.Fatalf("quarantine after the damage: %+v, %v", q, err)
	}
	sameTree(t, a.VersionPath(slug, hash), dir)
	if st := b.ContentStats(); st.Damaged != 1 || st.Fills != 2 {
		t.Errorf("after the damage and a fetch: %+v", st)
	}
}

// A daemon that starts finds a damaged copy before it serves it: the copy
// is quarantined and fetched again in place.
func TestDamagedCacheFoundAtFirstUse(t *testing.T) {
	forEachSharedIndex(t, testDamagedCacheFoundAtFirstUse)
}

func testDamagedCacheFoundAtFirstUse(t *testing.T, index string) {
	ctx := context.Background()
	a, b := fleet(t, index)
	slug, hash := importOne(t, a, fleetSkill(t, 0))
	dir, err := b.EnsureVersion(ctx, slug, hash)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	damage(t, filepath.Join(dir, "SKILL.md"))
	again, err := Open(ctx, b.Home(), Options{Index: index})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := again.EnsureVersion(ctx, slug, hash); err != nil {
		t.Fatal(err)
	}
	sameTree(t, a.VersionPath(slug, hash), dir)
	if st := again.ContentStats(); st.Damaged != 1 || st.Fills != 1 {
		t.Errorf("after a damaged copy at first use: %+v", st)
	}
}

// With its own index a data directory's copy is the only one: a damaged
// file is refused, the copy left where it is (for `check` to report) and
// not hashed again at every open.
func TestDamagedCopyOfASingleHostStaysRefused(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	slug, hash := importOne(t, c, fleetSkill(t, 0))
	dir, err := c.EnsureVersion(ctx, slug, hash)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(dir, time.Time{}); err != nil {
		t.Fatalf("verify an intact copy: %v", err)
	}
	damage(t, filepath.Join(dir, "scripts", "run.sh"))
	for range 2 {
		if err := c.Verify(dir, store.ChangeClock()); !errors.Is(err, skills.ErrDamaged) {
			t.Fatalf("verify a damaged copy = %v, want ErrDamaged", err)
		}
	}
	if st := c.ContentStats(); st.Damaged != 1 {
		t.Errorf("damage counted %d times, want once", st.Damaged)
	}
	if _, err := os.Lstat(dir); err != nil {
		t.Fatalf("the only copy was moved: %v", err)
	}
	r, err := datadir.Check(ctx, c.Home(), true)
	if err != nil || len(r.Mismatched) != 1 || r.OK {
		t.Fatalf("check after the damage: %+v, %v", r, err)
	}
}

// heapPeak runs fn and returns how far the heap's live objects grew above
// where they were while it ran, sampled throughout, with the collector
// kept close behind (10% growth) so garbage does not count as held.
func heapPeak(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, read())
			select {
			case <-done:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	fn()
	close(done)
	<-sampled
	if peak < base {
		return 0
	}
	return peak - base
}

// A file of tens of MiB is uploaded and fetched a chunk at a time: neither
// holds it whole in memory.
func TestLargeFileRoundTripsInBoundedMemory(t *testing.T) {
	forEachSharedIndex(t, testLargeFileRoundTripsInBoundedMemory)
}

func testLargeFileRoundTripsInBoundedMemory(t *testing.T, index string) {
	ctx := context.Background()
	a, b := fleet(t, index)
	const size = 48 << 20
	src := fleetSkill(t, size)
	var slug, hash string
	up := heapPeak(func() { slug, hash = importOne(t, a, src) })
	var dir string
	down := heapPeak(func() {
		var err error
		if dir, err = b.EnsureVersion(ctx, slug, hash); err != nil {
			t.Error(err)
		}
	})
	t.Logf("heap peak above the start: import with upload %d MiB, fetch %d MiB, of a %d MiB file", up>>20, down>>20, size>>20)
	for what, peak := range map[string]uint64{"import with upload": up, "fetch": down} {
		if peak > size/4 {
			t.Errorf("%s held %d MiB at its peak for a file of %d MiB", what, peak>>20, size>>20)
		}
	}
	if dir != "" {
		sameTree(t, a.VersionPath(slug, hash), dir)
	}
}

// Versions published before the index was shared (a data directory whose
// index became the fleet's) have no content in it: the host that holds
// them stores it when it starts; until then `check` says so on both
// hosts, and the shared index is never repaired from a host's store.
func TestContentPublishedBeforeSharingIsStoredAtStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	homeA := filepath.Join(dir, "a")
	own, err := Open(ctx, homeA, Options{})
	if err != nil {
		t.Fatal(err)
	}
	slug, hash := importOne(t, own, fleetSkill(t, 0))
	own.Close()
	index := filepath.Join(dir, "fleet.db")
	if err := os.Rename(filepath.Join(homeA, indexFile), index); err != nil {
		t.Fatal(err)
	}
	shared := Options{Index: index}
	homeB := filepath.Join(dir, "b")
	if err := os.Mkdir(homeB, 0o700); err != nil {
		t.Fatal(err)
	}
	// b holds a version nobody knows: a check reports it, a repair
	// quarantines it.
	stray := filepath.Join(homeB, storeDir, "skills", "stray", strings.Repeat("0", 64))
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}

	ra, err := CheckShared(ctx, homeA, shared)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := CheckShared(ctx, homeB, shared)
	if err != nil {
		t.Fatal(err)
	}
	want := []datadir.VersionRef{{Slug: slug, Hash: hash}}
	if ra.OK || !ra.Shared || !slices.Equal(ra.NoContent, want) || len(ra.Unfetchable) != 0 {
		t.Errorf("check on the host that holds it: %+v", ra)
	}
	if rb.OK || !slices.Equal(rb.Unfetchable, want) || rb.NotCached != 1 || len(rb.Unexplained) != 1 {
		t.Errorf("check on the host that does not: %+v", rb)
	}

	a, err := Open(ctx, homeA, shared)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r, err := a.Reconcile(ctx)
	if err != nil || !r.OK || len(r.Actions) == 0 {
		t.Fatalf("reconcile at a's start: %+v, %v", r, err)
	}
	rb, err = RepairShared(ctx, homeB, shared)
	if err != nil || !rb.OK || rb.NotCached != 1 || len(rb.Quarantine) != 1 {
		t.Fatalf("repair of b: %+v, %v", rb, err)
	}
	b, err := Open(ctx, homeB, shared)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := b.EnsureVersion(ctx, slug, hash)
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, a.VersionPath(slug, hash), got)
	if rb, err = CheckShared(ctx, homeB, shared); err != nil || !rb.OK || rb.NotCached != 0 {
		t.Errorf("check of b once it fetched the version: %+v, %v", rb, err)
	}
}

// BenchmarkFillFromSharedIndex times a host's first use of a version of
// about 20 MiB (a 20 MiB file and a few small ones) published by another
// host: fetched from a shared index (a SQLite file on the same disk, a
// PostgreSQL server on this machine), checked, published and verified; each
// run on a host that never held it.
func BenchmarkFillFromSharedIndex(b *testing.B) {
	for _, si := range sharedIndexes {
		b.Run(si.name, func(b *testing.B) {
			ctx := context.Background()
			index := si.target(b)
			a, _ := fleet(b, index)
			slug, hash := importOne(b, a, fleetSkill(b, 20<<20))
			b.SetBytes(20 << 20)
			for b.Loop() {
				b.StopTimer()
				host, err := Open(ctx, filepath.Join(b.TempDir(), "host"), Options{Index: index})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := host.EnsureVersion(ctx, slug, hash); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				host.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkImportLarge times the import of that version into a data
// directory with its own index and into a host of a fleet (on each kind of
// shared index), which also stores its content in the shared index.
func BenchmarkImportLarge(b *testing.B) {
	src := fleetSkill(b, 20<<20)
	kinds := append([]struct {
		name   string
		target func(t testing.TB) string
	}{{"own-index", func(testing.TB) string { return "" }}}, sharedIndexes...)
	for _, kind := range kinds {
		b.Run(kind.name, func(b *testing.B) {
			b.SetBytes(20 << 20)
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				opts := Options{Index: kind.target(b)}
				c, err := Open(context.Background(), filepath.Join(dir, "home"), opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				importOne(b, c, src)
				b.StopTimer()
				c.Close()
				b.StartTimer()
			}
		})
	}
}
