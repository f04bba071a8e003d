// Package content serves the content of versions from this host's store:
// a copy is verified against its hash before it is served, a damaged one
// is refused (and, with a shared index, fetched again in the background,
// the damaged copy quarantined), and with a shared index a version not in
// the store is fetched from the index chunk by chunk, each checked, and
// published only when the tree hashes to the version's name. It also
// stores this host's versions in a shared index (Upload, UploadMissing).
package content

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"skillfs/cmd/skillfs/internal/catalog/datadir"
	"skillfs/index"
	"skillfs/skills"
	"skillfs/skills/store"
)

// Cache serves the content of versions from this host's store, and is
// what this process knows of the copies there — with a shared index, this
// host's cache of the fleet's content: when each copy was last found to
// hash to its name, which copies were found damaged, and what it fetched.
// It is memory only: every daemon verifies a copy again the first time it
// serves it. Make one with New; Close ends its background fetches.
type Cache struct {
	Store  *store.Store
	DB     *index.DB
	Log    *slog.Logger
	Limits skills.Limits
	// Shared says DB is a fleet's index: copies not in the store are
	// fetched from it, and a damaged one is fetched again.
	Shared bool
	// Lock takes the data directory's import lock shared, so that no sweep
	// takes a fetch's staging directory.
	Lock func() (release func(), err error)

	// verified maps a version directory to when its copy was last found
	// whole: store.ChangeClock at the start of that check.
	verified sync.Map
	// present holds the version directories seen in the store (own index:
	// a copy is not verified before it is served, see Ensure).
	present sync.Map
	// damaged maps a version directory to the error that refuses its
	// copy: until a good one takes its place (shared index) or the daemon
	// restarts (own index: the store's copy is the only one), see verify.
	damaged sync.Map
	locks   KeyedLocks

	// Background fetches of damaged copies, ended by Close.
	mu     sync.Mutex
	closed bool
	ctx    context.Context
	stop   context.CancelFunc
	bg     sync.WaitGroup

	fills, fillBytes, fillFailures, damagedCopies atomic.Int64
}

// New makes the cache of store, fetching from db when shared.
func New(store *store.Store, db *index.DB, log *slog.Logger, lim skills.Limits, shared bool, lock func() (func(), error)) *Cache {
	ctx, stop := context.WithCancel(context.Background())
	return &Cache{Store: store, DB: db, Log: log, Limits: lim, Shared: shared, Lock: lock, ctx: ctx, stop: stop}
}

// Close cancels the background fetches and waits for them.
func (cc *Cache) Close() {
	cc.mu.Lock()
	cc.closed = true
	cc.mu.Unlock()
	cc.stop()
	cc.bg.Wait()
}

// Forget drops what is known of a version directory whose copy was
// removed.
func (cc *Cache) Forget(dir string) {
	cc.verified.Delete(dir)
	cc.present.Delete(dir)
	cc.damaged.Delete(dir)
}

// KeyedLocks serialises work on one key at a time: here a version
// directory (concurrent fills or checks of one version happen once, the
// callers that waited finding the work done); for the daemon, a user (whose
// installs are checked against quotas one at a time). Its zero value is
// ready; a key's lock is held in memory only while taken or waited for.
type KeyedLocks struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	waiters int // guarded by KeyedLocks.mu
}

// Lock takes the lock of key and returns its release.
func (k *KeyedLocks) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyedLock{}
		k.m[key] = l
	}
	l.waiters++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.waiters--; l.waiters == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// Stats counts what this process did with the content of versions.
type Stats struct {
	Fills        int64 // versions fetched from the shared index into this host's store
	FillBytes    int64 // bytes of chunks those fetches read
	FillFailures int64 // fetches that failed: the index unreachable, the content not stored or damaged
	Damaged      int64 // copies found not to hash to their name: this host's (refused, quarantined) or the index's (never published)
}

// WaitFetches waits for the background fetches started so far.
func (cc *Cache) WaitFetches() { cc.bg.Wait() }

// Stats returns the counts since the cache was made.
func (cc *Cache) Stats() Stats {
	return Stats{Fills: cc.fills.Load(), FillBytes: cc.fillBytes.Load(),
		FillFailures: cc.fillFailures.Load(), Damaged: cc.damagedCopies.Load()}
}

// Ensure returns the directory of this host's copy of version hash
// of slug, ready to serve.
//
// With the data directory's own index that is the store's copy, which must
// be there (skills.ErrNotFound otherwise); it is verified the first time a
// file of it is opened (Verify).
//
// With a shared index the store is this host's cache of the fleet's
// content. A cached copy is verified against its hash the first time this
// process serves it — that needs no index, so cached versions are served
// while the index is unreachable — and one that does not match is fetched
// again, taking the damaged copy's place (which goes to the quarantine). A
// version not cached is fetched from the index (fill): every chunk checked
// against its sum as it arrives, the tree it makes checked against hash
// before it is published into the store. A mismatch wraps
// skills.ErrDamaged and publishes nothing. Concurrent calls for one version
// fetch it once.
func (c *Cache) Ensure(ctx context.Context, slug, hash string) (string, error) {
	dir := c.Store.VersionPath(slug, hash)
	if dir == "" {
		return "", fmt.Errorf("version %s of %q: %w", hash, slug, skills.ErrUnsafePath)
	}
	if !c.Shared {
		if _, ok := c.present.Load(dir); ok {
			return dir, nil
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("the content of version %s of %q is missing from the store (see `skillfs check`): %w",
				store.ShortHash(hash), slug, skills.ErrNotFound)
		}
		c.present.Store(dir, true)
		return dir, nil
	}
	if c.cached(dir) {
		return dir, nil
	}
	unlock := c.locks.Lock(dir)
	defer unlock()
	if c.cached(dir) {
		return dir, nil // fetched or verified while this call waited
	}
	if _, damaged := c.damaged.Load(dir); !damaged {
		switch err := c.verify(slug, hash, dir); {
		case err == nil:
			return dir, nil
		case errors.Is(err, skills.ErrNotFound), errors.Is(err, skills.ErrDamaged):
			// Not cached, or damaged: fetched below.
		default:
			return "", err
		}
	}
	if err := c.fill(ctx, slug, hash, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// cached reports whether this host's copy in dir was verified in this
// process and is still there: a copy removed behind the daemon's back (an
// operator, a repair) is fetched again rather than served as missing.
func (c *Cache) cached(dir string) bool {
	if _, ok := c.verified.Load(dir); !ok {
		return false
	}
	if _, err := os.Lstat(dir); errors.Is(err, iofs.ErrNotExist) {
		c.Forget(dir)
		return false
	}
	return true
}

// Verified returns when this host's copy in the version directory dir was
// last found to hash to its version's name in this process (the start of
// that check, on store.ChangeClock), or the zero time. With Verify it
// makes the catalog the filesystem's fs.Content.
func (c *Cache) Verified(dir string) time.Time {
	if at, ok := c.verified.Load(dir); ok {
		return at.(time.Time)
	}
	return time.Time{}
}

// Verify checks this host's copy in the version directory dir against its
// hash again, unless it was verified after changed (the ctime of one of its
// files, which the filesystem found later than the last check). A copy that
// does not match is never served again (see verify): every later open is
// refused at once, without hashing it again; with a shared index a good
// copy is fetched in the background and takes its place, and reads succeed
// again.
func (c *Cache) Verify(dir string, changed time.Time) error {
	slug, hash, ok := c.Store.VersionOf(dir)
	if !ok {
		return fmt.Errorf("verify %q: not a version directory of this store: %w", dir, skills.ErrInvalid)
	}
	if err, ok := c.damaged.Load(dir); ok {
		return err.(error)
	}
	unlock := c.locks.Lock(dir)
	defer unlock()
	if c.Verified(dir).After(changed) {
		return nil
	}
	err := c.verify(slug, hash, dir)
	if errors.Is(err, skills.ErrDamaged) && c.Shared {
		c.refetch(slug, hash)
	}
	return err
}

// verify hashes this host's copy of a version and remembers when it
// matched; the caller holds the version's lock. A copy that is not there is
// skills.ErrNotFound, one that cannot be read now (EIO, EACCES) is
// returned as such and acted on by nobody. A copy that does not match is
// damage: counted, logged and remembered as damaged, never served again.
// With a shared index it stays where it is, refused, until a good copy is
// fetched to take its place (it then goes to the quarantine, never
// deleted): opens meanwhile fail with EIO, not as if the file were gone.
// With the data directory's own index the copy is the only one: it stays
// refused until the daemon restarts (`skillfs check` reports it, `skillfs
// check --repair` quarantines it).
func (c *Cache) verify(slug, hash, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("version %s of %q is not in this host's store: %w", store.ShortHash(hash), slug, skills.ErrNotFound)
	}
	at := store.ChangeClock()
	got, _, _, err := store.TreeHash(dir)
	switch {
	case err == nil && got == hash:
		c.verified.Store(dir, at)
		return nil
	case err != nil && !errors.Is(err, skills.ErrSpecialFile) && !errors.Is(err, iofs.ErrNotExist):
		return fmt.Errorf("verify version %s of %q: %w", store.ShortHash(hash), slug, err)
	}
	c.verified.Delete(dir)
	c.damagedCopies.Add(1)
	why := "its content hashes to " + got
	if err != nil {
		why = err.Error()
	}
	derr := fmt.Errorf("this host's copy of version %s of %q does not match its hash (%s): %w", hash, slug, why, skills.ErrDamaged)
	c.damaged.Store(dir, derr)
	if c.Shared {
		c.Log.Error("damaged copy of a version: not served, fetched again", "slug", slug, "version", hash, "problem", why)
	} else {
		c.Log.Error("version content changed on disk: not served (see `skillfs check`)", "slug", slug, "version", hash, "problem", why)
	}
	return derr
}

// publishFetched puts a fetched copy of a version into this host's store:
// in place of a damaged copy, if this host has one, in one exchange (readers
// never find the version missing; the damaged copy goes to the quarantine,
// never deleted); else as any version is published. The caller holds the
// version's lock.
func (c *Cache) publishFetched(staging, slug, hash, dir string, meta *store.VersionMeta) error {
	derr, damaged := c.damaged.Load(dir)
	if !damaged {
		_, _, err := c.Store.Publish(staging, slug, hash, meta)
		return err
	}
	_, to, err := c.Store.Replace(staging, slug, hash, meta, "this host's copy no longer hashes to its name: "+derr.(error).Error())
	if err != nil {
		return fmt.Errorf("replace the damaged copy of version %s of %q: %w", store.ShortHash(hash), slug, err)
	}
	if to != "" {
		c.Log.Warn("damaged copy of a version moved to the quarantine", "slug", slug, "version", hash, "to", to)
	}
	return nil
}

// refetch fetches a version again in the background, after its copy was
// found damaged.
func (c *Cache) refetch(slug, hash string) {
	cc := c
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return
	}
	cc.bg.Add(1)
	go func() {
		defer cc.bg.Done()
		if _, err := c.Ensure(cc.ctx, slug, hash); err != nil {
			c.Log.Error("fetch a version again after its copy was found damaged", "slug", slug, "version", hash, "err", err)
		}
	}()
}

// fill fetches version hash of slug from the shared index into this host's
// store (see Ensure) and verifies the published copy; the caller
// holds the version's lock. Nothing is published unless the content hashes
// to hash.
func (c *Cache) fill(ctx context.Context, slug, hash, dir string) (err error) {
	var read int64
	defer func() {
		if err != nil {
			c.fillFailures.Add(1)
			c.Log.Error("fetch a version from the shared index", "slug", slug, "version", hash, "err", err)
			return
		}
		c.fills.Add(1)
		c.fillBytes.Add(read)
	}()
	// No sweep takes the staging directory. The caller may share the lock
	// already (an update): shares nest while no goroutine of this process
	// waits to take it exclusively, which only opening a data directory of
	// its own and repairing one do, never a daemon that serves.
	unlock, err := c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	m, err := c.DB.ContentManifest(ctx, slug, hash)
	if errors.Is(err, skills.ErrNotFound) {
		return fmt.Errorf("version %s of %q: its content is not in the shared index (the host that holds it stores it there when it starts): %w",
			store.ShortHash(hash), slug, skills.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if err := m.CheckLimits(c.Limits); err != nil {
		return fmt.Errorf("version %s of %q in the shared index is over this host's limits: %w", store.ShortHash(hash), slug, err)
	}
	staging, err := c.Store.NewStaging()
	if err != nil {
		return err
	}
	defer skills.RemoveTree(staging) // a no-op once published
	got, err := store.WriteContent(staging, m.Entries, func(sum string) ([]byte, error) {
		data, err := c.DB.Chunk(ctx, sum)
		if errors.Is(err, skills.ErrNotFound) {
			return nil, fmt.Errorf("%w: %w", err, skills.ErrDamaged)
		}
		read += int64(len(data))
		return data, err
	})
	if err != nil {
		if errors.Is(err, skills.ErrDamaged) {
			c.damagedCopies.Add(1)
			return fmt.Errorf("the content of version %s of %q in the shared index is damaged: %w", hash, slug, err)
		}
		return fmt.Errorf("fetch version %s of %q: %w", store.ShortHash(hash), slug, err)
	}
	if got != hash {
		c.damagedCopies.Add(1)
		return fmt.Errorf("the content of version %s of %q in the shared index hashes to %s: %w", hash, slug, got, skills.ErrDamaged)
	}
	var meta *store.VersionMeta
	if m.Meta != nil {
		if meta, err = store.DecodeMeta(m.Meta, slug, hash); err != nil {
			c.Log.Warn("metadata of a fetched version not kept", "slug", slug, "version", hash, "err", err)
			meta = nil
		}
	}
	if err := c.publishFetched(staging, slug, hash, dir, meta); err != nil {
		return err
	}
	c.damaged.Delete(dir)
	c.Log.Info("version fetched from the shared index", "slug", slug, "version", hash, "bytes", read)
	return c.verify(slug, hash, dir)
}

// Upload stores the content of a version this host's store holds in
// the shared index, unless it is there already. The bytes are read from
// the published copy (each file checked on its open descriptor, counted as
// read) and must hash to the version's name, so a damaged copy never
// reaches other hosts.
func (c *Cache) Upload(ctx context.Context, slug, hash string) error {
	if ok, err := c.DB.HasContent(ctx, slug, hash); err != nil || ok {
		return err
	}
	dir := c.Store.VersionPath(slug, hash)
	meta, err := c.Store.RawMeta(slug, hash)
	if errors.Is(err, skills.ErrNotFound) {
		meta, err = nil, nil
	}
	if err != nil {
		return err
	}
	files, err := store.ReadContent(dir)
	if err != nil {
		return err
	}
	// Not remembered as verified: when another host stored the same
	// content first, PutContent reads none of these bytes, so this copy
	// is hashed at its first use like any other.
	return c.DB.PutContent(ctx, slug, hash, meta, files)
}

// UploadMissing stores in the shared index the content of the versions it
// names but holds no content for that this host holds: versions published
// before the index was shared (the bundled skills registered as builtins,
// a data directory that joined a fleet), or while an upload failed.
// Versions it cannot upload are reported: in NoContent when this host
// holds them, in Unfetchable when it does not (nobody can fetch them until
// the host that holds them uploads them).
func (c *Cache) UploadMissing(ctx context.Context, r *datadir.Report) error {
	vs, err := c.DB.VersionsWithoutContent(ctx)
	if err != nil {
		return err
	}
	for _, v := range vs {
		ref := datadir.VersionRef{Slug: v.Slug, Hash: v.Hash}
		if _, err := os.Lstat(c.Store.VersionPath(v.Slug, v.Hash)); err != nil {
			r.Unfetchable = append(r.Unfetchable, ref)
			continue
		}
		if err := c.Upload(ctx, v.Slug, v.Hash); err != nil {
			c.Log.Warn("store the content of a version in the shared index", "slug", v.Slug, "version", v.Hash, "err", err)
			r.NoContent = append(r.NoContent, ref)
			if errors.Is(err, skills.ErrUnavailable) {
				return err
			}
			continue
		}
		r.Act("stored the content of %s/%s in the shared index", v.Slug, store.ShortHash(v.Hash))
	}
	if n := len(r.Unfetchable); n > 0 {
		c.Log.Warn("versions whose content is in no host's reach from here: the shared index lacks it and this host does not hold it "+
			"(the host that holds a version stores it when it starts)", "count", n)
	}
	return nil
}
