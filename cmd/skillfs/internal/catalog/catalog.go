// Package catalog is the skill catalog as operators and the daemon use it: it
// joins the content store and the index, applies the access policy, and runs
// every import through one path — stage, validate, hash, publish atomically.
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

	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
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
}

// Catalog is an open data directory: index, content store and limits.
type Catalog struct {
	home  string
	db    *index.DB
	store *skills.Store
	lim   skills.Limits
	log   *slog.Logger
	now   func() time.Time
	lock  *os.File   // import lock: shared while importing, exclusive to sweep
	pub   *os.File   // publish lock: exclusive from choosing a slug to the index row
	pubMu sync.Mutex // the same between goroutines (flock does not exclude within a process)
}

// Layout of a data directory.
const (
	indexFile = "index.db"
	storeDir  = "store"
	tmpDir    = "tmp"
	lockFile  = "import.lock"
	pubFile   = "publish.lock"
)

// Open opens (creating if needed) the data directory home. It sweeps leftovers
// of crashed imports — staging directories and published content no index row
// refers to — when no other process is importing.
func Open(ctx context.Context, home string, opts Options) (*Catalog, error) {
	if opts.Limits == (skills.Limits{}) {
		opts.Limits = skills.DefaultLimits()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %q: %w", home, err)
	}
	// The data directory holds the index and every session's capability
	// (its id, under the mount root): it is private to the operator.
	if err := os.Chmod(home, 0o700); err != nil {
		return nil, fmt.Errorf("make data directory %q private: %w", home, err)
	}
	lock, err := os.OpenFile(filepath.Join(home, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open import lock: %w", err)
	}
	pub, err := os.OpenFile(filepath.Join(home, pubFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open publish lock: %w", err)
	}
	db, err := index.Open(filepath.Join(home, indexFile))
	if err != nil {
		lock.Close()
		pub.Close()
		return nil, err
	}
	c := &Catalog{home: home, db: db, lim: opts.Limits, log: opts.Logger, now: opts.Now, lock: lock, pub: pub,
		store: &skills.Store{Root: filepath.Join(home, storeDir)}}
	if err := c.sweep(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.ensureOperator(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close releases the index.
func (c *Catalog) Close() error {
	err := c.db.Close()
	c.lock.Close()
	c.pub.Close()
	return err
}

// DB exposes the index to the daemon, which keeps sessions in it.
func (c *Catalog) DB() *index.DB { return c.db }

// Home is the data directory.
func (c *Catalog) Home() string { return c.home }

// Limits are the import limits in force.
func (c *Catalog) Limits() skills.Limits { return c.lim }

// VersionPath is where the content of a version lives.
func (c *Catalog) VersionPath(slug, hash string) string { return c.store.VersionPath(slug, hash) }

func (c *Catalog) ensureOperator(ctx context.Context) error {
	if _, err := c.db.User(ctx, Operator); err == nil {
		return nil
	} else if !errors.Is(err, skills.ErrNotFound) {
		return err
	}
	return c.db.PutUser(ctx, skills.User{UID: Operator, Role: skills.RoleSuperadmin})
}

// sweep removes what a crashed import left: staging directories and published
// versions without an index row. It only runs when it can take the import
// lock exclusively, i.e. no import is running in any process.
func (c *Catalog) sweep(ctx context.Context) error {
	if err := syscall.Flock(int(c.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil // another process is importing: its staging is not ours to sweep
	}
	defer syscall.Flock(int(c.lock.Fd()), syscall.LOCK_UN)
	st, err := skills.OpenStore(c.store.Root) // creates the store and sweeps staging
	if err != nil {
		return fmt.Errorf("open content store: %w", err)
	}
	known, err := c.db.VersionPaths(ctx)
	if err != nil {
		return err
	}
	onDisk, err := st.Versions()
	if err != nil {
		return fmt.Errorf("list content store: %w", err)
	}
	for slug, hashes := range onDisk {
		for _, h := range hashes {
			if known[st.VersionPath(slug, h)] {
				continue
			}
			c.log.Info("removing unindexed version left by an interrupted import", "slug", slug, "version", h)
			if err := st.RemoveVersion(slug, h); err != nil {
				return fmt.Errorf("sweep content store: %w", err)
			}
		}
	}
	c.sweepDrafts()
	return os.RemoveAll(filepath.Join(c.home, tmpDir))
}

// sharedLock marks an import in progress so that no other process sweeps its
// staging directory or its freshly published version.
func (c *Catalog) sharedLock() (unlock func(), err error) {
	if err := syscall.Flock(int(c.lock.Fd()), syscall.LOCK_SH); err != nil {
		return nil, fmt.Errorf("take import lock: %w", err)
	}
	return func() { syscall.Flock(int(c.lock.Fd()), syscall.LOCK_UN) }, nil
}

// publishLock serialises, across processes, the step from choosing a slug
// to recording the version: two imports of the same content must not both
// believe they created (and may remove) the same published directory.
func (c *Catalog) publishLock() (unlock func(), err error) {
	c.pubMu.Lock()
	if err := syscall.Flock(int(c.pub.Fd()), syscall.LOCK_EX); err != nil {
		c.pubMu.Unlock()
		return nil, fmt.Errorf("take publish lock: %w", err)
	}
	return func() {
		syscall.Flock(int(c.pub.Fd()), syscall.LOCK_UN)
		c.pubMu.Unlock()
	}, nil
}

// snapshot reads what the policy validators need.
func (c *Catalog) snapshot(ctx context.Context) (policy.Catalog, error) {
	all, err := c.db.Skills(ctx)
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
	users, err := c.db.Users(ctx)
	if err != nil {
		return policy.Catalog{}, err
	}
	pc := policy.Catalog{
		Skills: make(map[string]*skills.Skill, len(all)),
		Tools:  make(map[string]bool, len(tools)),
		MCPs:   make(map[string]bool, len(mcps)),
		Users:  users,
	}
	for _, s := range all {
		pc.Skills[s.Slug] = s
	}
	for _, t := range tools {
		pc.Tools[t] = true
	}
	for _, m := range mcps {
		pc.MCPs[m] = true
	}
	return pc, nil
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
