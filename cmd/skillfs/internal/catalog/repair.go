package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"skillfs/cmd/skillfs/internal/catalog/datadir"
	"skillfs/skills"
	"skillfs/skills/store"
)

// Reconcile brings the content store in line with the index, as the daemon
// does at every start: it checks the index's integrity (a damaged index is a
// *DamagedError), moves every version the index cannot explain to the
// quarantine (never deleting it), brings back from the quarantine versions
// the index needs, and gives versions published before versions carried
// metadata their metadata file. Versions the index knows but nobody has are
// reported in Missing. It does nothing to the store while another process
// is importing (the report says so).
//
// With a shared index the store is this host's cache: versions the index
// knows and the cache lacks are counted in NotCached (fetched on first
// use), and the content of versions the cache holds but the index lacks
// (published before the index was shared) is stored in the index.
func (c *Catalog) Reconcile(ctx context.Context) (*datadir.Report, error) {
	r := datadir.NewReport(c.home)
	if err := c.db.Check(ctx); err != nil {
		return nil, &datadir.DamagedError{Home: c.home, Problem: err.Error()}
	}
	r.Index = datadir.IndexOK
	release, ok, err := c.imp.exclusive(false)
	if err != nil {
		return nil, err
	}
	if !ok {
		r.Act("left the content store alone: an import is in progress")
		return r, nil
	}
	defer release()
	unlock, err := c.publishLock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := c.reconcileStore(ctx, r); err != nil {
		return nil, err
	}
	return r.Finish(), nil
}

// reconcileStore does Reconcile's work; the caller holds both locks.
func (c *Catalog) reconcileStore(ctx context.Context, r *datadir.Report) error {
	return c.dataDir().Reconcile(ctx, r)
}

// dataDir is the data directory as check and repair work on it.
func (c *Catalog) dataDir() *datadir.Dir {
	return &datadir.Dir{Home: c.home, DB: c.db, Store: c.store, Log: c.log, Now: c.now, Limits: c.lim, Operator: Operator,
		Shared: c.shared, UploadMissing: c.cache.UploadMissing}
}

// Repair makes a damaged data directory usable again and returns what it
// found and did. An index that is missing, empty, unreadable or another
// data directory's is moved aside (index.db.damaged-<time>, never deleted)
// and a new one is rebuilt from the store's own metadata: skills with all
// their versions and provenance, the share, enabled flag and creator each
// had when its newest version was published, the users named as creators
// and installers (as ordinary users: roles, departments and sessions are
// not in the store) and the tools and MCP servers the skills depend on. A
// sound index is reconciled with the store as at a daemon start, its
// content hashes are verified (a version whose content no longer matches is
// quarantined), and a skill whose current version has no content falls back
// to its newest version that has. Repair refuses to run while a daemon
// serves the data directory.
func Repair(ctx context.Context, home string, opts Options) (*datadir.Report, error) {
	opts = opts.withDefaults()
	if _, err := os.Stat(home); err != nil {
		return nil, fmt.Errorf("data directory %q: %w", home, skills.ErrNotFound)
	}
	home, err := prepareHome(home)
	if err != nil {
		return nil, err
	}
	release, err := LockServe(home)
	if err != nil {
		return nil, fmt.Errorf("%w (stop it before repairing)", err)
	}
	defer release()
	st, err := datadir.Inspect(home)
	if err != nil {
		return nil, err
	}
	db, state, ierr := datadir.OpenForCheck(ctx, home, st)
	r := datadir.NewReport(home)
	r.Index = state
	if db != nil {
		db.Close()
	}
	if state != datadir.IndexOK && state != datadir.IndexNew {
		r.IndexError = errString(ierr)
		aside, moved, err := datadir.MoveIndexAside(home, opts.Now())
		switch {
		case err != nil:
			return nil, err
		case aside != "":
			r.Act("moved the %s index aside to %s", state, aside)
			opts.Logger.Warn("damaged index moved aside", "state", state, "to", aside, "problem", r.IndexError)
		case len(moved) > 0:
			r.Act("no index was there: moved what was left of it aside to %s and built a new one from the store", strings.Join(moved, " and "))
		default:
			r.Act("no index was there: built a new one from the store")
		}
	}
	c, err := openParts(home, opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	unlock, err := c.lockStore()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := store.Open(c.store.Root); err != nil {
		return nil, err
	}
	if state != datadir.IndexOK && state != datadir.IndexNew {
		if err := c.dataDir().Rebuild(ctx, st.StoreID, r); err != nil {
			return nil, err
		}
	} else if err := c.bindIdentity(ctx, st); err != nil {
		return nil, err
	}
	if err := c.dataDir().EnsureOperator(ctx); err != nil {
		return nil, err
	}
	// Metadata first (a version lacking it is no sign of damage), then
	// content against its hash, then what the index points at.
	if err := c.reconcileStore(ctx, r); err != nil {
		return nil, err
	}
	if err := c.dataDir().QuarantineMismatched(ctx, r); err != nil {
		return nil, err
	}
	if err := c.dataDir().FixCurrentVersions(ctx, r); err != nil {
		return nil, err
	}
	if err := c.dataDir().ForgetLost(ctx, r); err != nil {
		return nil, err
	}
	// What the repaired directory looks like now.
	final := datadir.NewReport(home)
	final.Index = datadir.IndexOK
	if err := datadir.Compare(ctx, c.db, c.store, final, false); err != nil {
		return nil, err
	}
	final.Actions, final.Quarantine = r.Actions, r.Quarantine
	if r.IndexError != "" {
		final.IndexError = "before the repair: " + r.IndexError
	}
	return final.Finish(), nil
}

// lockStore takes what a repair holds while it moves content: the import
// lock exclusively (waiting for the imports in flight) and the publish
// lock.
func (c *Catalog) lockStore() (unlock func(), err error) {
	releaseImports, _, err := c.imp.exclusive(true)
	if err != nil {
		return nil, err
	}
	unlockPub, err := c.publishLock()
	if err != nil {
		releaseImports()
		return nil, err
	}
	return func() { unlockPub(); releaseImports() }, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// serveLockFile is the lock a daemon holds on the data directory it serves.
const serveLockFile = "serve.lock"

// LockServe takes the data directory for one daemon: a second daemon would
// steal the socket and re-point the binds while the first still serves, and
// a repair must not run under a daemon. It fails with skills.ErrExists when
// the lock is held.
func LockServe(home string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(home, serveLockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open serve lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another skillfs serve is running on %s: %w", home, skills.ErrExists)
	}
	return func() { f.Close() }, nil
}

// RepairShared repairs the cache of a host of a fleet sharing the index
// opts.Index, with the host's daemon stopped: versions the index cannot
// explain and cached copies that no longer hash to their name go to the
// quarantine (never deleted; a damaged copy is fetched again on first use),
// quarantined copies the index names come back, and the content of
// versions the index lacks but this host holds is stored in the index. The
// index's rows are never changed from one host's cache: a version whose
// content no host holds stays as it is, reported.
func RepairShared(ctx context.Context, home string, opts Options) (*datadir.Report, error) {
	if _, err := os.Stat(home); err != nil {
		return nil, fmt.Errorf("data directory %q: %w", home, skills.ErrNotFound)
	}
	release, err := LockServe(home)
	if err != nil {
		return nil, fmt.Errorf("%w (stop it before repairing)", err)
	}
	defer release()
	c, err := Open(ctx, home, opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.db.Check(ctx); err != nil {
		return nil, fmt.Errorf("the shared index is damaged (a host's cache cannot repair it): %w", err)
	}
	unlock, err := c.lockStore()
	if err != nil {
		return nil, err
	}
	defer unlock()
	r := datadir.NewReport(c.home)
	if err := c.reconcileStore(ctx, r); err != nil {
		return nil, err
	}
	if err := c.dataDir().QuarantineMismatched(ctx, r); err != nil {
		return nil, err
	}
	final, err := c.cacheReport(ctx, false)
	if err != nil {
		return nil, err
	}
	final.Actions = r.Actions
	return final, nil
}

// CheckShared checks a data directory that is one host of a fleet sharing
// the index opts.Index: the index's integrity as this host reads it, and
// this host's cache against it — versions it cannot explain, every cached
// version against its hash, and the versions whose content the index
// lacks. It changes neither: the index is the fleet's, and no host's check
// repairs it. A data directory that does not exist is skills.ErrNotFound.
func CheckShared(ctx context.Context, home string, opts Options) (*datadir.Report, error) {
	if _, err := os.Stat(home); err != nil {
		return nil, fmt.Errorf("data directory %q: %w", home, skills.ErrNotFound)
	}
	c, err := Open(ctx, home, opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.cacheReport(ctx, true)
}

// cacheReport compares this host's cache with the shared index (hashing
// every cached version when verify is set).
func (c *Catalog) cacheReport(ctx context.Context, verify bool) (*datadir.Report, error) {
	r := datadir.NewReport(c.home)
	r.Shared = true
	if err := c.db.Check(ctx); err != nil {
		r.Index, r.IndexError = datadir.IndexDamaged, err.Error()
		return r.Finish(), nil
	}
	r.Index = datadir.IndexOK
	if err := datadir.Compare(ctx, c.db, c.store, r, verify); err != nil {
		return nil, err
	}
	r.Identity, r.NotCached, r.Missing = c.host, len(r.Missing), []datadir.VersionRef{}
	onDisk, err := c.store.Versions()
	if err != nil {
		return nil, err
	}
	without, err := c.db.VersionsWithoutContent(ctx)
	if err != nil {
		return nil, err
	}
	for _, v := range without {
		if slices.Contains(onDisk[v.Slug], v.Hash) {
			r.NoContent = append(r.NoContent, datadir.VersionRef{Slug: v.Slug, Hash: v.Hash})
		} else {
			r.Unfetchable = append(r.Unfetchable, datadir.VersionRef{Slug: v.Slug, Hash: v.Hash})
		}
	}
	q, err := c.store.Quarantined()
	if err != nil {
		return nil, err
	}
	r.SetQuarantine(q)
	return r.Finish(), nil
}
