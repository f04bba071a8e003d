package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"skillfs/skills"
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
func (c *Catalog) Reconcile(ctx context.Context) (*Report, error) {
	r := newReport(c.home)
	if err := c.db.Check(ctx); err != nil {
		return nil, &DamagedError{Home: c.home, Problem: err.Error()}
	}
	r.Index = IndexOK
	release, ok, err := c.imp.exclusive(false)
	if err != nil {
		return nil, err
	}
	if !ok {
		r.act("left the content store alone: an import is in progress")
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
	return r.finish(), nil
}

// reconcileStore does Reconcile's work; the caller holds both locks.
func (c *Catalog) reconcileStore(ctx context.Context, r *Report) error {
	if err := compare(ctx, c.db, c.store, r, false); err != nil {
		return err
	}
	var left []VersionRef
	for _, u := range r.Unexplained {
		to, err := c.store.Quarantine(u.Slug, u.Hash,
			"not in the index: left by an interrupted import, or newer than an index restored from a copy")
		if err != nil {
			// Left where it is: unexplained content is invisible to
			// sessions, and a start must not fail over it.
			c.log.Warn("version the index does not know could not be moved to the quarantine", "slug", u.Slug, "version", u.Hash, "err", err)
			left = append(left, u)
			continue
		}
		c.log.Warn("version the index does not know moved to the quarantine", "slug", u.Slug, "version", u.Hash, "to", to)
		r.act("moved %s/%s, which the index does not know, to %s", u.Slug, u.Hash, to)
	}
	r.Unexplained = nonNil(left)
	if err := c.restoreMissing(r); err != nil {
		return err
	}
	var noMeta []VersionRef
	for _, ref := range r.NoMetadata {
		if err := c.backfillMeta(ctx, ref); err != nil {
			c.log.Warn("write the metadata of a version", "slug", ref.Slug, "version", ref.Hash, "err", err)
			noMeta = append(noMeta, ref)
		}
	}
	if n := len(r.NoMetadata) - len(noMeta); n > 0 {
		r.act("wrote the metadata of %d versions published before versions carried it", n)
	}
	r.NoMetadata = nonNil(noMeta)
	if c.shared {
		r.Shared, r.NotCached, r.Missing = true, len(r.Missing), []VersionRef{}
		if r.NotCached > 0 {
			c.log.Info("versions not in this host's cache: fetched from the shared index on first use", "count", r.NotCached)
		}
		if err := c.uploadMissing(ctx, r); err != nil {
			return err
		}
	}
	for _, m := range r.Missing {
		c.log.Error("the content of a version is missing; sessions will not see it", "slug", m.Slug, "version", m.Hash)
	}
	q, err := c.store.Quarantined()
	if err != nil {
		c.log.Warn("list the quarantine", "err", err)
	}
	r.Quarantine = nonNil(q)
	return nil
}

// restoreMissing moves versions the index needs back from the quarantine,
// and keeps in r.Missing those it could not find.
func (c *Catalog) restoreMissing(r *Report) error {
	if len(r.Missing) == 0 {
		return nil
	}
	q, err := c.store.Quarantined()
	if err != nil {
		c.log.Warn("list the quarantine", "err", err)
	}
	var still []VersionRef
	for _, m := range r.Missing {
		restored := false
		for _, e := range q {
			if e.Slug != m.Slug || e.Hash != m.Hash {
				continue
			}
			if err := c.store.Restore(e); err != nil {
				c.log.Warn("quarantined copy not restored", "path", e.Path, "err", err)
				continue
			}
			c.log.Info("version restored from the quarantine", "slug", m.Slug, "version", m.Hash, "from", e.Path)
			r.act("restored %s/%s from %s", m.Slug, m.Hash, e.Path)
			restored = true
			break
		}
		if !restored {
			still = append(still, m)
		}
	}
	r.Missing = nonNil(still)
	return nil
}

// backfillMeta writes the metadata file of a version from its index rows.
func (c *Catalog) backfillMeta(ctx context.Context, ref VersionRef) error {
	s, err := c.db.Skill(ctx, ref.Slug)
	if err != nil {
		return err
	}
	v, err := c.db.Version(ctx, ref.Slug, ref.Hash)
	if err != nil {
		return err
	}
	if err := c.store.WriteMeta(ref.Slug, ref.Hash, &skills.VersionMeta{Skill: *s, Version: *v}); err != nil {
		return fmt.Errorf("write metadata of %s/%s: %w", ref.Slug, ref.Hash, err)
	}
	return nil
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
func Repair(ctx context.Context, home string, opts Options) (*Report, error) {
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
	st, err := inspect(home)
	if err != nil {
		return nil, err
	}
	db, state, ierr := openForCheck(ctx, home, st)
	r := newReport(home)
	r.Index = state
	if db != nil {
		db.Close()
	}
	if state != IndexOK && state != IndexNew {
		r.IndexError = errString(ierr)
		aside, moved, err := moveIndexAside(home, opts.Now())
		switch {
		case err != nil:
			return nil, err
		case aside != "":
			r.act("moved the %s index aside to %s", state, aside)
			opts.Logger.Warn("damaged index moved aside", "state", state, "to", aside, "problem", r.IndexError)
		case len(moved) > 0:
			r.act("no index was there: moved what was left of it aside to %s and built a new one from the store", strings.Join(moved, " and "))
		default:
			r.act("no index was there: built a new one from the store")
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
	if _, err := skills.OpenStore(c.store.Root); err != nil {
		return nil, err
	}
	if state != IndexOK && state != IndexNew {
		if err := c.rebuild(ctx, st.storeID, r); err != nil {
			return nil, err
		}
	} else if err := c.bindIdentity(ctx, st); err != nil {
		return nil, err
	}
	if err := c.ensureOperator(ctx); err != nil {
		return nil, err
	}
	// Metadata first (a version lacking it is no sign of damage), then
	// content against its hash, then what the index points at.
	if err := c.reconcileStore(ctx, r); err != nil {
		return nil, err
	}
	if err := c.quarantineMismatched(ctx, r); err != nil {
		return nil, err
	}
	if err := c.fixCurrentVersions(ctx, r); err != nil {
		return nil, err
	}
	if err := c.forgetLost(ctx, r); err != nil {
		return nil, err
	}
	// What the repaired directory looks like now.
	final := newReport(home)
	final.Index = IndexOK
	if err := compare(ctx, c.db, c.store, final, false); err != nil {
		return nil, err
	}
	final.Actions, final.Quarantine = r.Actions, r.Quarantine
	if r.IndexError != "" {
		final.IndexError = "before the repair: " + r.IndexError
	}
	return final.finish(), nil
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

// moveIndexAside renames the index and its WAL and shared-memory files to
// index.db.damaged-<time>[...], and returns the new name of the index ("" when
// there was none) and the new names of every file it moved: a WAL left
// without its index is moved too, so a new index never replays it.
func moveIndexAside(home string, now time.Time) (aside string, moved []string, err error) {
	stamp := now.UTC().Format("20060102T150405Z")
	aside = filepath.Join(home, indexFile+".damaged-"+stamp)
	for n := 2; ; n++ {
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = filepath.Join(home, fmt.Sprintf("%s.damaged-%s-%d", indexFile, stamp, n))
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		err := os.Rename(filepath.Join(home, indexFile+suffix), aside+suffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", moved, fmt.Errorf("move the damaged index aside: %w", err)
		}
		if err == nil {
			moved = append(moved, aside+suffix)
		}
	}
	if len(moved) == 0 || moved[0] != aside {
		return "", moved, nil
	}
	return aside, moved, nil
}

// quarantineMismatched hashes every indexed version's content again and
// moves a version whose content no longer matches its name to the
// quarantine: serving it would serve something nobody published.
func (c *Catalog) quarantineMismatched(ctx context.Context, r *Report) error {
	check := newReport(c.home)
	if err := compare(ctx, c.db, c.store, check, true); err != nil {
		return err
	}
	for _, m := range check.Mismatched {
		to, err := c.store.Quarantine(m.Slug, m.Hash, "its content no longer hashes to its name")
		if err != nil {
			return err
		}
		c.log.Error("version content changed on disk: quarantined", "slug", m.Slug, "version", m.Hash, "to", to)
		r.act("moved %s/%s, whose content no longer matches its hash, to %s", m.Slug, m.Hash, to)
	}
	return nil
}

// fixCurrentVersions points every skill whose current version has no
// content at its newest version that has.
func (c *Catalog) fixCurrentVersions(ctx context.Context, r *Report) error {
	all, err := c.db.Skills(ctx)
	if err != nil {
		return err
	}
	for _, s := range all {
		if dir := c.store.VersionPath(s.Slug, s.Version); dir != "" {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				continue // there, or unreadable for now: never a reason to move on
			}
		}
		vs, err := c.db.Versions(ctx, s.Slug)
		if err != nil {
			return err
		}
		moved := false
		for _, v := range vs { // newest first
			if fi, err := os.Stat(c.store.VersionPath(s.Slug, v.Hash)); err != nil || !fi.IsDir() {
				continue
			}
			if err := c.db.SetCurrentVersion(ctx, s.Slug, v.Hash); err != nil {
				return err
			}
			r.act("skill %s: its current version %s has no content; now at %s", s.Slug, short(s.Version), short(v.Hash))
			moved = true
			break
		}
		if !moved {
			r.act("skill %s has no content left: reinstall or delete it", s.Slug)
		}
	}
	return nil
}

// forgetLost drops the index rows of older versions whose content is gone
// and could not be restored, so the index explains the store again. Current
// versions without content stay (fixCurrentVersions said what to do).
func (c *Catalog) forgetLost(ctx context.Context, r *Report) error {
	now := newReport(c.home)
	if err := compare(ctx, c.db, c.store, now, false); err != nil {
		return err
	}
	for _, m := range now.Missing {
		err := c.db.ForgetVersion(ctx, m.Slug, m.Hash)
		switch {
		case err == nil:
			r.act("forgot version %s/%s: its content is gone (see the quarantine for any copy)", m.Slug, short(m.Hash))
		case errors.Is(err, skills.ErrInvalid), errors.Is(err, skills.ErrNotFound):
		default:
			return err
		}
	}
	return nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// rebuild fills a new index from the store's own metadata. The caller holds
// both locks.
func (c *Catalog) rebuild(ctx context.Context, storeID string, r *Report) error {
	if storeID == "" {
		var err error
		if storeID, err = c.store.EnsureID(newIdentity()); err != nil {
			return err
		}
	}
	if err := c.db.SetDataDirID(ctx, storeID); err != nil {
		return err
	}
	// The old event log is lost: ids start above any it can have given
	// (one per microsecond since 1970), so clients resuming from an old id
	// are told to resync instead of skipping new events under reused ids.
	if err := c.db.RestartEventIDsAfter(ctx, time.Now().UnixMicro()); err != nil {
		return err
	}
	if err := c.ensureOperator(ctx); err != nil {
		return err
	}
	onDisk, err := c.store.Versions()
	if err != nil {
		return err
	}
	slugs := make([]string, 0, len(onDisk))
	for slug := range onDisk {
		slugs = append(slugs, slug)
	}
	sort.Strings(slugs)
	people := map[string]bool{}
	tools, mcps := map[string]bool{}, map[string]bool{}
	for _, slug := range slugs {
		s, vs, err := c.recoverSkill(slug, onDisk[slug], r)
		if err != nil {
			return err
		}
		if s == nil {
			continue
		}
		if err := c.db.RestoreSkill(ctx, s, vs); err != nil {
			return err
		}
		r.act("rebuilt skill %s with %d versions (current %s)", slug, len(vs), short(s.Version))
		people[s.Creator] = true
		for _, v := range vs {
			people[v.Installer] = true
		}
		for _, t := range s.ToolDependencies {
			tools[t] = true
		}
		for _, m := range s.MCPDependencies {
			mcps[m] = true
		}
	}
	return c.restoreRegistries(ctx, people, tools, mcps, r)
}

// restoreRegistries registers the users, tools and MCP servers the rebuilt
// skills name.
func (c *Catalog) restoreRegistries(ctx context.Context, people, tools, mcps map[string]bool, r *Report) error {
	for _, uid := range sortedKeys(people) {
		if uid == "" {
			continue
		}
		if _, err := c.db.User(ctx, uid); err == nil {
			continue
		} else if !errors.Is(err, skills.ErrNotFound) {
			return err // never demote someone because a query failed
		}
		if err := c.db.PutUser(ctx, skills.User{UID: uid, Role: skills.RoleUser}); err != nil {
			return err
		}
		r.act("registered user %s as an ordinary user: set roles and departments again with `skillfs user set`", uid)
	}
	for _, t := range sortedKeys(tools) {
		if err := c.db.AddTool(ctx, t); err != nil && !errors.Is(err, skills.ErrExists) {
			return err
		}
	}
	for _, m := range sortedKeys(mcps) {
		if err := c.db.AddMCP(ctx, m); err != nil && !errors.Is(err, skills.ErrExists) {
			return err
		}
	}
	if len(tools)+len(mcps) > 0 {
		r.act("registered %d tools and %d MCP servers the skills depend on", len(tools), len(mcps))
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// recoverSkill reads the versions of one slug from the store: each version's
// metadata, or what its SKILL.md says when it has none. Versions whose
// content does not hash to their name, and folders that are no versions of
// a valid slug, go to the quarantine. The version that became current last
// is current. A slug with nothing usable returns a nil skill.
func (c *Catalog) recoverSkill(slug string, hashes []string, r *Report) (*skills.Skill, []*skills.Version, error) {
	type found struct {
		meta    *skills.VersionMeta
		derived bool
	}
	var ok []found
	for _, h := range hashes {
		reason := ""
		dir := c.store.VersionPath(slug, h)
		switch {
		case !skills.ValidSlug(slug) || dir == "":
			reason = "not a version of a valid slug"
		default:
			if got, _, _, err := skills.TreeHash(dir); err != nil || got != h {
				reason = "its content does not hash to its name"
			}
		}
		if reason != "" {
			to, err := c.store.Quarantine(slug, h, reason)
			if err != nil {
				return nil, nil, err
			}
			r.act("moved %s/%s to %s: %s", slug, h, to, reason)
			continue
		}
		m, err := c.store.ReadMeta(slug, h)
		derived := false
		if err != nil {
			if m, err = c.deriveMeta(slug, h, dir); err != nil {
				to, qerr := c.store.Quarantine(slug, h, "no metadata and no readable SKILL.md: "+err.Error())
				if qerr != nil {
					return nil, nil, qerr
				}
				r.act("moved %s/%s to %s: %v", slug, h, to, err)
				continue
			}
			derived = true
		}
		ok = append(ok, found{m, derived})
	}
	if len(ok) == 0 {
		return nil, nil, nil
	}
	sort.SliceStable(ok, func(i, j int) bool {
		a, b := ok[i].meta.Since(), ok[j].meta.Since()
		if !a.Equal(b) {
			return a.Before(b)
		}
		return ok[i].meta.Version.Hash < ok[j].meta.Version.Hash
	})
	cur := ok[len(ok)-1]
	s := cur.meta.Skill
	s.Slug, s.Version = slug, cur.meta.Version.Hash
	vs := make([]*skills.Version, len(ok))
	for i, f := range ok {
		v := f.meta.Version
		vs[i] = &v
		if f.derived {
			r.act("version %s/%s had no metadata: its provenance is unknown (recorded as %q)", slug, short(v.Hash), v.Source)
		}
	}
	if !slices.ContainsFunc(vs, func(v *skills.Version) bool { return v.Hash == s.Version }) {
		return nil, nil, fmt.Errorf("rebuild %s: current version lost", slug)
	}
	return &s, vs, nil
}

// deriveMeta makes up the metadata of a version that has none, from its
// SKILL.md: private to the operator, installed by the operator at the time
// of the version directory.
func (c *Catalog) deriveMeta(slug, hash, dir string) (*skills.VersionMeta, error) {
	data, err := skills.ReadRegular(filepath.Join(dir, skills.ManifestName), skills.ManifestName, c.lim.MaxFileBytes, false)
	if err != nil {
		return nil, err
	}
	m, _, err := skills.ParseStored(data, slug)
	if err != nil {
		return nil, err
	}
	_, files, size, err := skills.TreeHash(dir)
	if err != nil {
		return nil, err
	}
	at := c.now().UTC()
	if fi, err := os.Stat(dir); err == nil {
		at = fi.ModTime().UTC()
	}
	source := "recovered:" + slug
	return &skills.VersionMeta{
		Skill: skills.Skill{Slug: slug, Name: m.Name, Description: m.Description, SourceType: skills.SourceUpload,
			Source: source, Share: defaultShare(skills.User{UID: Operator}, skills.SourceUpload), Enabled: true,
			SkillDependencies: m.SkillDependencies, ToolDependencies: m.ToolDependencies, MCPDependencies: m.MCPDependencies,
			Version: hash, Creator: Operator, CreatedAt: at, UpdatedAt: at},
		Version: skills.Version{Slug: slug, Hash: hash, SourceType: skills.SourceUpload, Source: source,
			Installer: Operator, InstalledAt: at, Files: files, Bytes: size},
	}, nil
}

// RepairShared repairs the cache of a host of a fleet sharing the index
// opts.Index, with the host's daemon stopped: versions the index cannot
// explain and cached copies that no longer hash to their name go to the
// quarantine (never deleted; a damaged copy is fetched again on first use),
// quarantined copies the index names come back, and the content of
// versions the index lacks but this host holds is stored in the index. The
// index's rows are never changed from one host's cache: a version whose
// content no host holds stays as it is, reported.
func RepairShared(ctx context.Context, home string, opts Options) (*Report, error) {
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
	r := newReport(c.home)
	if err := c.reconcileStore(ctx, r); err != nil {
		return nil, err
	}
	if err := c.quarantineMismatched(ctx, r); err != nil {
		return nil, err
	}
	final, err := c.cacheReport(ctx, false)
	if err != nil {
		return nil, err
	}
	final.Actions = r.Actions
	return final, nil
}
