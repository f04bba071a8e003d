// Package catalog is the skill catalog as operators and the daemon use it: it
// joins the content store and the index, applies the access policy, and runs
// every import through one path — stage, validate, hash, publish atomically.
// Its sources are read by skills/source, under the catalog's policy of who
// may read what (see package confine).
package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"skillfs/cmd/skillfs/internal/catalog/confine"
	"skillfs/cmd/skillfs/internal/catalog/content"
	"skillfs/cmd/skillfs/internal/catalog/datadir"
	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/diff"
	"skillfs/skills/store"
)

// Operator is the identity management commands act as when none is given. It
// is created as a superadmin when the data directory is first opened: whoever
// can write the data directory already controls the catalog.
const Operator = "operator"

// Options configure a Catalog.
type Options struct {
	Limits skills.Limits // zero value means skills.DefaultLimits()
	Logger *slog.Logger
	Now    func() time.Time
	// Index is a shared index several data directories (hosts) use: a
	// PostgreSQL URL or the path of a SQLite file outside the data
	// directory. Empty: the data directory's own index.db. With a shared
	// index the data directory's store is this host's cache of the
	// fleet's content and its identity names the host (HostID).
	Index string
	// ImportRoots are the folders a source named through the API may read
	// (see OpenImportRoots); nil: none, so through the API only remote
	// repositories and uploads are read.
	ImportRoots *confine.ImportRoots
}

// Catalog is an open data directory: index, content store and limits.
type Catalog struct {
	home  string
	db    *index.DB
	store *store.Store
	lim   skills.Limits
	log   *slog.Logger
	now   func() time.Time
	// shared says the index is the fleet's (Options.Index), not this
	// data directory's own. host is the store's identity, which names this
	// data directory as a host (of a fleet, or the only one).
	shared bool
	host   string
	cache  *content.Cache // this host's copies of versions, as this process knows them
	imp    *importLock    // shared while importing, exclusive to sweep and reconcile
	pub    *os.File       // publish lock: exclusive from choosing a slug to the index row
	pubMu  sync.Mutex     // the same between goroutines (flock does not exclude within a process)
	// diffLimit is the comparison budget of one request, bytes and steps
	// (see diff.Budget; 0: the defaults). Tests make it smaller.
	diffLimit [2]int64
	roots     *confine.ImportRoots // Options.ImportRoots
	// gate bounds what comparisons hold together (LimitDiffs); nil: no
	// bound but each request's own.
	gate DiffGate
}

// diffBudget is a fresh comparison budget for one request.
func (c *Catalog) diffBudget() *diff.Budget {
	return diff.NewBudget(c.diffLimit[0], c.diffLimit[1])
}

// Layout of a data directory.
const (
	indexFile = datadir.IndexFile
	storeDir  = datadir.StoreDir
	tmpDir    = "tmp"
	lockFile  = "import.lock"
	pubFile   = "publish.lock"
)

// Open opens (creating if needed) the data directory home. The directory is
// resolved to its real path once, so every spelling of it (a symlink, a
// relative path) is the same data directory. Open sweeps what crashed
// imports left in the staging area when no other process is importing, and
// never touches published content. A damaged data directory — an index that
// is missing, empty or unreadable beside published content, or that belongs
// to another data directory — is a *datadir.DamagedError (errors.Is(err,
// skills.ErrDamaged)) and nothing is changed; `skillfs check --repair`
// repairs it.
func Open(ctx context.Context, home string, opts Options) (*Catalog, error) {
	opts = opts.withDefaults()
	home, err := prepareHome(home)
	if err != nil {
		return nil, err
	}
	if opts.Index != "" {
		return openShared(ctx, home, opts)
	}
	st, err := datadir.Inspect(home)
	if err != nil {
		return nil, err
	}
	if problem := st.Damage(); problem != "" {
		return nil, &datadir.DamagedError{Home: home, Problem: problem}
	}
	c, err := openParts(home, opts)
	if err != nil {
		return nil, err
	}
	if n, err := c.db.Count(ctx); err != nil {
		c.Close()
		return nil, err
	} else if n.Skills == 0 && n.Users == 0 && st.Stored > 0 {
		// Every index that ever served has its operator: this one was
		// replaced by a new, empty database.
		c.Close()
		return nil, &datadir.DamagedError{Home: home, Problem: fmt.Sprintf(
			"%s holds no skills and no users, but the content store holds %d published versions", indexFile, st.Stored)}
	}
	if err := c.bindIdentity(ctx, st); err != nil {
		c.Close()
		return nil, err
	}
	return c.ready(ctx)
}

// ready finishes opening c: it sweeps what crashed imports left and makes
// sure the operator exists; on error c is closed.
func (c *Catalog) ready(ctx context.Context) (*Catalog, error) {
	if err := c.sweep(); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.ensureOperator(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// openShared opens a data directory whose index is shared with other hosts.
// The index then explains more than this store holds (versions published
// on other hosts), and this store's identity names the host rather than
// binding the index to it, so the checks of a data directory's own index
// do not apply.
func openShared(ctx context.Context, home string, opts Options) (*Catalog, error) {
	c, err := openParts(home, opts)
	if err != nil {
		return nil, err
	}
	if c.host, err = c.store.EnsureID(datadir.NewIdentity()); err != nil {
		c.Close()
		return nil, err
	}
	return c.ready(ctx)
}

func (o Options) withDefaults() Options {
	if o.Limits == (skills.Limits{}) {
		o.Limits = skills.DefaultLimits()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// prepareHome creates the data directory if needed, private to the
// operator, and returns its real path: one identity however it is spelled.
func prepareHome(home string) (string, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", fmt.Errorf("create data directory %q: %w", home, err)
	}
	real, err := filepath.EvalSymlinks(home)
	if err != nil {
		return "", fmt.Errorf("resolve data directory %q: %w", home, err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", fmt.Errorf("resolve data directory %q: %w", home, err)
	}
	// The data directory holds the index and every session's capability
	// (its id, under the mount root): it is private to the operator.
	if err := os.Chmod(real, 0o700); err != nil {
		return "", fmt.Errorf("make data directory %q private: %w", real, err)
	}
	return real, nil
}

// openParts opens the locks and the index of a data directory whose state
// was checked.
func openParts(home string, opts Options) (*Catalog, error) {
	lock, err := os.OpenFile(filepath.Join(home, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open import lock: %w", err)
	}
	pub, err := os.OpenFile(filepath.Join(home, pubFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open publish lock: %w", err)
	}
	target := opts.Index
	if target == "" {
		target = filepath.Join(home, indexFile)
	}
	db, err := index.Open(target)
	if err != nil {
		lock.Close()
		pub.Close()
		if errors.Is(err, skills.ErrDamaged) && opts.Index == "" {
			return nil, &datadir.DamagedError{Home: home, Problem: fmt.Sprintf("the index cannot be read (%v)", err)}
		}
		return nil, err
	}
	c := &Catalog{home: home, db: db, lim: opts.Limits, log: opts.Logger, now: opts.Now, imp: &importLock{f: lock}, pub: pub, roots: opts.ImportRoots,
		store: &store.Store{Root: filepath.Join(home, storeDir)}, shared: opts.Index != ""}
	c.cache = content.New(c.store, db, c.log, c.lim, c.shared, c.sharedLock)
	return c, nil
}

// bindIdentity ties index and store to one data directory identity: a new
// data directory gets one, an index or store from before identities adopts
// the other's, and an index of another data directory is refused. When
// either side has none, it binds them under the exclusive import lock and
// reads both again, so processes starting together on a new data directory
// agree on one identity.
func (c *Catalog) bindIdentity(ctx context.Context, st *datadir.State) error {
	idxID, err := c.db.DataDirID(ctx)
	if err != nil {
		return err
	}
	if idxID == "" || st.StoreID == "" {
		release, _, err := c.imp.exclusive(true)
		if err != nil {
			return err
		}
		defer release()
		if idxID, err = c.db.DataDirID(ctx); err != nil {
			return err
		}
		if st.StoreID, err = c.store.ID(); err != nil {
			return err
		}
	}
	storeID := st.StoreID
	switch {
	case idxID == "" && storeID == "":
		if storeID, err = c.store.EnsureID(datadir.NewIdentity()); err != nil {
			return err
		}
		c.host = storeID
		return c.db.SetDataDirID(ctx, storeID)
	case idxID == "":
		c.host = storeID
		return c.db.SetDataDirID(ctx, storeID)
	case storeID == "":
		storeID, err = c.store.EnsureID(idxID)
		if err != nil {
			return err
		}
	}
	if idxID != storeID {
		return &datadir.DamagedError{Home: c.home, Problem: fmt.Sprintf(
			"the index belongs to data directory %s, the content store to %s (an index copied from elsewhere?)", idxID, storeID)}
	}
	c.host = storeID
	return nil
}

// Close ends the background fetches and releases the index.
func (c *Catalog) Close() error {
	c.cache.Close()
	err := c.db.Close()
	c.imp.close()
	c.pub.Close()
	return err
}

// Shared reports whether the index is shared with other hosts (Options.Index).
func (c *Catalog) Shared() bool { return c.shared }

// HostID names this data directory among the hosts sharing an index: the
// identity of its store. A data directory with its own index is the one
// host of its catalog, named the same way (its index records the same
// identity).
func (c *Catalog) HostID() string { return c.host }

// DB exposes the index to the daemon, which keeps sessions in it.
func (c *Catalog) DB() *index.DB { return c.db }

// Home is the data directory.
func (c *Catalog) Home() string { return c.home }

// Limits are the import limits in force.
func (c *Catalog) Limits() skills.Limits { return c.lim }

// Store is the content store of the data directory.
func (c *Catalog) Store() *store.Store { return c.store }

// VersionPath is where the content of a version lives, whether or not it
// is there (see EnsureVersion).
func (c *Catalog) VersionPath(slug, hash string) string { return c.store.VersionPath(slug, hash) }

func (c *Catalog) ensureOperator(ctx context.Context) error { return c.dataDir().EnsureOperator(ctx) }

// sweep removes what crashed imports left outside the published store —
// staging directories, unpacked archives and clones, expired drafts — when
// it can take the import lock exclusively, i.e. no import is running in any
// process. Published versions are never touched here: comparing them with
// the index is Reconcile's job, at daemon start.
func (c *Catalog) sweep() error {
	release, ok, err := c.imp.exclusive(false)
	if err != nil || !ok {
		return err // someone is importing: their staging is not ours to sweep
	}
	defer release()
	if _, err := store.Open(c.store.Root); err != nil { // creates the layout, sweeps staging
		return fmt.Errorf("open content store: %w", err)
	}
	c.sweepDrafts()
	return os.RemoveAll(filepath.Join(c.home, tmpDir))
}

// sharedLock marks an import in progress so that no process sweeps its
// staging directory or its freshly published version.
func (c *Catalog) sharedLock() (unlock func(), err error) { return c.imp.share() }

// publishLock serialises, across processes, the step from choosing a slug
// to recording the version: two imports of the same content must not both
// believe they created (and may remove) the same published directory.
//
// With a shared index the data directory's lock excludes only this host:
// the index's catalog lock is taken too, so a check and the write it
// decides (a dependency, a share, a free slug) never interleave with
// another host's.
func (c *Catalog) publishLock() (unlock func(), err error) {
	c.pubMu.Lock()
	if err := syscall.Flock(int(c.pub.Fd()), syscall.LOCK_EX); err != nil {
		c.pubMu.Unlock()
		return nil, fmt.Errorf("take publish lock: %w", err)
	}
	local := func() {
		syscall.Flock(int(c.pub.Fd()), syscall.LOCK_UN)
		c.pubMu.Unlock()
	}
	if !c.shared {
		return local, nil
	}
	fleet, err := c.db.CatalogLock(context.Background())
	if err != nil {
		local()
		return nil, err
	}
	return func() { fleet(); local() }, nil
}

// snapshot reads what the policy validators need. Its skills are the
// index's in-memory catalog (Base, shared and read only); a caller adds the
// skills it plans to Skills.
func (c *Catalog) snapshot(ctx context.Context) (policy.Catalog, error) {
	set, err := c.db.SkillSet(ctx)
	if err != nil {
		return policy.Catalog{}, err
	}
	tools, err := c.db.Tools(ctx)
	if err != nil {
		return policy.Catalog{}, err
	}
	mcps, err := c.db.MCPs(ctx)
	if err != nil {
		return policy.Catalog{}, err
	}
	pc := policy.Catalog{
		Skills: map[string]*skills.Skill{},
		Base:   set,
		Tools:  make(map[string]bool, len(tools)),
		MCPs:   make(map[string]bool, len(mcps)),
		// Only the users a check names are read, each once.
		LookupUser: c.userLookup(ctx),
	}
	for _, t := range tools {
		pc.Tools[t] = true
	}
	for _, m := range mcps {
		pc.MCPs[m] = true
	}
	return pc, nil
}

// userLookup finds users in the index by uid, remembering what it read. A
// user that cannot be read counts as unknown: judged as an ordinary user of
// no department, which can only make a check stricter.
func (c *Catalog) userLookup(ctx context.Context) func(uid string) (skills.User, bool) {
	seen := map[string]*skills.User{}
	return func(uid string) (skills.User, bool) {
		if u, ok := seen[uid]; ok {
			if u == nil {
				return skills.User{}, false
			}
			return *u, true
		}
		u, err := c.db.User(ctx, uid)
		if err != nil {
			if !errors.Is(err, skills.ErrNotFound) {
				c.log.Warn("read user for a dependency check", "uid", uid, "err", err)
			}
			seen[uid] = nil
			return skills.User{}, false
		}
		seen[uid] = &u
		return u, true
	}
}

// Exists reports whether home holds a data directory: its own index, or
// the identity of a host of a shared index. Open on a home without either
// makes a new data directory there.
func Exists(home string) bool {
	for _, p := range []string{indexFile, filepath.Join(storeDir, store.IDFile)} {
		if _, err := os.Lstat(filepath.Join(home, p)); err == nil {
			return true
		}
	}
	return false
}

// Actor resolves a uid to the user a command acts as.
func (c *Catalog) Actor(ctx context.Context, uid string) (skills.User, error) {
	if uid == "" {
		uid = Operator
	}
	u, err := c.db.User(ctx, uid)
	if err != nil {
		if errors.Is(err, skills.ErrNotFound) {
			return skills.User{}, fmt.Errorf("user %q is not registered (add it with `skillfs user add`): %w", uid, err)
		}
		return skills.User{}, err
	}
	return u, nil
}
