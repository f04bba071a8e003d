package datadir

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/manifest"
	"skillfs/skills/store"
)

// Layout of a data directory: what check and repair look at.
const (
	IndexFile = "index.db" // the data directory's own index
	StoreDir  = "store"    // the content store
)

// Dir is an open data directory's index and content store as a check's
// repairs work on them. The caller holds what each step says.
type Dir struct {
	Home   string
	DB     *index.DB
	Store  *store.Store
	Log    *slog.Logger
	Now    func() time.Time
	Limits skills.Limits
	// Operator is the identity a data directory is created with (a
	// superadmin); content recovered without metadata is the operator's.
	Operator string
	// Shared says the index is a fleet's: the store is this host's cache
	// of its content, and UploadMissing stores in the index the content
	// of versions it names that this host holds.
	Shared        bool
	UploadMissing func(ctx context.Context, r *Report) error
}

// NewIdentity makes a random data directory identity.
func NewIdentity() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// EnsureOperator registers the operator as a superadmin unless it is
// registered.
func (d *Dir) EnsureOperator(ctx context.Context) error {
	if _, err := d.DB.User(ctx, d.Operator); err == nil {
		return nil
	} else if !errors.Is(err, skills.ErrNotFound) {
		return err
	}
	return d.DB.PutUser(ctx, skills.User{UID: d.Operator, Role: skills.RoleSuperadmin})
}

// Reconcile brings the store in line with the index (see
// catalog.Catalog.Reconcile): what the index cannot explain goes to the
// quarantine (never deleted), what it needs comes back from there, and
// versions published before versions carried metadata get theirs. With a
// shared index, versions not in this host's cache are counted, not
// missing, and UploadMissing stores the content the index lacks. The
// caller holds the import lock exclusively and the publish lock.
func (d *Dir) Reconcile(ctx context.Context, r *Report) error {
	if err := Compare(ctx, d.DB, d.Store, r, false); err != nil {
		return err
	}
	left := []VersionRef{}
	for _, u := range r.Unexplained {
		to, err := d.Store.Quarantine(u.Slug, u.Hash,
			"not in the index: left by an interrupted import, or newer than an index restored from a copy")
		if err != nil {
			// Left where it is: unexplained content is invisible to
			// sessions, and a start must not fail over it.
			d.Log.Warn("version the index does not know could not be moved to the quarantine", "slug", u.Slug, "version", u.Hash, "err", err)
			left = append(left, u)
			continue
		}
		d.Log.Warn("version the index does not know moved to the quarantine", "slug", u.Slug, "version", u.Hash, "to", to)
		r.Act("moved %s/%s, which the index does not know, to %s", u.Slug, u.Hash, to)
	}
	r.Unexplained = left
	if err := d.restoreMissing(r); err != nil {
		return err
	}
	noMeta := []VersionRef{}
	for _, ref := range r.NoMetadata {
		if err := d.BackfillMeta(ctx, ref); err != nil {
			d.Log.Warn("write the metadata of a version", "slug", ref.Slug, "version", ref.Hash, "err", err)
			noMeta = append(noMeta, ref)
		}
	}
	if n := len(r.NoMetadata) - len(noMeta); n > 0 {
		r.Act("wrote the metadata of %d versions published before versions carried it", n)
	}
	r.NoMetadata = noMeta
	if d.Shared {
		r.Shared, r.NotCached, r.Missing = true, len(r.Missing), []VersionRef{}
		if r.NotCached > 0 {
			d.Log.Info("versions not in this host's cache: fetched from the shared index on first use", "count", r.NotCached)
		}
		if err := d.UploadMissing(ctx, r); err != nil {
			return err
		}
	}
	for _, m := range r.Missing {
		d.Log.Error("the content of a version is missing; sessions will not see it", "slug", m.Slug, "version", m.Hash)
	}
	q, err := d.Store.Quarantined()
	if err != nil {
		d.Log.Warn("list the quarantine", "err", err)
	}
	r.SetQuarantine(q)
	return nil
}

// restoreMissing moves versions the index needs back from the quarantine,
// and keeps in r.Missing those it could not find.
func (d *Dir) restoreMissing(r *Report) error {
	if len(r.Missing) == 0 {
		return nil
	}
	q, err := d.Store.Quarantined()
	if err != nil {
		d.Log.Warn("list the quarantine", "err", err)
	}
	still := []VersionRef{}
	for _, m := range r.Missing {
		restored := false
		for _, e := range q {
			if e.Slug != m.Slug || e.Hash != m.Hash {
				continue
			}
			if err := d.Store.Restore(e); err != nil {
				d.Log.Warn("quarantined copy not restored", "path", e.Path, "err", err)
				continue
			}
			d.Log.Info("version restored from the quarantine", "slug", m.Slug, "version", m.Hash, "from", e.Path)
			r.Act("restored %s/%s from %s", m.Slug, m.Hash, e.Path)
			restored = true
			break
		}
		if !restored {
			still = append(still, m)
		}
	}
	r.Missing = still
	return nil
}

// BackfillMeta writes the metadata file of a version from its index rows.
func (d *Dir) BackfillMeta(ctx context.Context, ref VersionRef) error {
	s, err := d.DB.Skill(ctx, ref.Slug)
	if err != nil {
		return err
	}
	v, err := d.DB.Version(ctx, ref.Slug, ref.Hash)
	if err != nil {
		return err
	}
	if err := d.Store.WriteMeta(ref.Slug, ref.Hash, &store.VersionMeta{Skill: *s, Version: *v}); err != nil {
		return fmt.Errorf("write metadata of %s/%s: %w", ref.Slug, ref.Hash, err)
	}
	return nil
}

// MoveIndexAside renames the index and its WAL and shared-memory files to
// index.db.damaged-<time>[...], and returns the new name of the index ("" when
// there was none) and the new names of every file it moved: a WAL left
// without its index is moved too, so a new index never replays it.
func MoveIndexAside(home string, now time.Time) (aside string, moved []string, err error) {
	stamp := now.UTC().Format("20060102T150405Z")
	aside = filepath.Join(home, IndexFile+".damaged-"+stamp)
	for n := 2; ; n++ {
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = filepath.Join(home, fmt.Sprintf("%s.damaged-%s-%d", IndexFile, stamp, n))
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		err := os.Rename(filepath.Join(home, IndexFile+suffix), aside+suffix)
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

// QuarantineMismatched hashes every indexed version's content again and
// moves a version whose content no longer matches its name to the
// quarantine: serving it would serve something nobody published.
func (d *Dir) QuarantineMismatched(ctx context.Context, r *Report) error {
	check := NewReport(d.Home)
	if err := Compare(ctx, d.DB, d.Store, check, true); err != nil {
		return err
	}
	for _, m := range check.Mismatched {
		to, err := d.Store.Quarantine(m.Slug, m.Hash, "its content no longer hashes to its name")
		if err != nil {
			return err
		}
		d.Log.Error("version content changed on disk: quarantined", "slug", m.Slug, "version", m.Hash, "to", to)
		r.Act("moved %s/%s, whose content no longer matches its hash, to %s", m.Slug, m.Hash, to)
	}
	return nil
}

// FixCurrentVersions points every skill whose current version has no
// content at its newest version that has.
func (d *Dir) FixCurrentVersions(ctx context.Context, r *Report) error {
	all, err := d.DB.Skills(ctx)
	if err != nil {
		return err
	}
	for _, s := range all {
		if dir := d.Store.VersionPath(s.Slug, s.Version); dir != "" {
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				continue // there, or unreadable for now: never a reason to move on
			}
		}
		vs, err := d.DB.Versions(ctx, s.Slug)
		if err != nil {
			return err
		}
		moved := false
		for _, v := range vs { // newest first
			if fi, err := os.Stat(d.Store.VersionPath(s.Slug, v.Hash)); err != nil || !fi.IsDir() {
				continue
			}
			if err := d.DB.SetCurrentVersion(ctx, s.Slug, v.Hash); err != nil {
				return err
			}
			r.Act("skill %s: its current version %s has no content; now at %s", s.Slug, store.ShortHash(s.Version), store.ShortHash(v.Hash))
			moved = true
			break
		}
		if !moved {
			r.Act("skill %s has no content left: reinstall or delete it", s.Slug)
		}
	}
	return nil
}

// ForgetLost drops the index rows of older versions whose content is gone
// and could not be restored, so the index explains the store again. Current
// versions without content stay (FixCurrentVersions said what to do).
func (d *Dir) ForgetLost(ctx context.Context, r *Report) error {
	now := NewReport(d.Home)
	if err := Compare(ctx, d.DB, d.Store, now, false); err != nil {
		return err
	}
	for _, m := range now.Missing {
		err := d.DB.ForgetVersion(ctx, m.Slug, m.Hash)
		switch {
		case err == nil:
			r.Act("forgot version %s/%s: its content is gone (see the quarantine for any copy)", m.Slug, store.ShortHash(m.Hash))
		case errors.Is(err, skills.ErrInvalid), errors.Is(err, skills.ErrNotFound):
		default:
			return err
		}
	}
	return nil
}

// Rebuild fills a new index from the store's own metadata. The caller holds
// both locks.
func (d *Dir) Rebuild(ctx context.Context, storeID string, r *Report) error {
	if storeID == "" {
		var err error
		if storeID, err = d.Store.EnsureID(NewIdentity()); err != nil {
			return err
		}
	}
	if err := d.DB.SetDataDirID(ctx, storeID); err != nil {
		return err
	}
	// The old event log is lost: ids start above any it can have given
	// (one per microsecond since 1970), so clients resuming from an old id
	// are told to resync instead of skipping new events under reused ids.
	if err := d.DB.RestartEventIDsAfter(ctx, time.Now().UnixMicro()); err != nil {
		return err
	}
	if err := d.EnsureOperator(ctx); err != nil {
		return err
	}
	onDisk, err := d.Store.Versions()
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
		s, vs, err := d.recoverSkill(slug, onDisk[slug], r)
		if err != nil {
			return err
		}
		if s == nil {
			continue
		}
		if err := d.DB.RestoreSkill(ctx, s, vs); err != nil {
			return err
		}
		r.Act("rebuilt skill %s with %d versions (current %s)", slug, len(vs), store.ShortHash(s.Version))
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
	return d.restoreRegistries(ctx, people, tools, mcps, r)
}

// restoreRegistries registers the users, tools and MCP servers the rebuilt
// skills name.
func (d *Dir) restoreRegistries(ctx context.Context, people, tools, mcps map[string]bool, r *Report) error {
	for _, uid := range sortedKeys(people) {
		if uid == "" {
			continue
		}
		if _, err := d.DB.User(ctx, uid); err == nil {
			continue
		} else if !errors.Is(err, skills.ErrNotFound) {
			return err // never demote someone because a query failed
		}
		if err := d.DB.PutUser(ctx, skills.User{UID: uid, Role: skills.RoleUser}); err != nil {
			return err
		}
		r.Act("registered user %s as an ordinary user: set roles and departments again with `skillfs user set`", uid)
	}
	for _, t := range sortedKeys(tools) {
		if err := d.DB.AddTool(ctx, t); err != nil && !errors.Is(err, skills.ErrExists) {
			return err
		}
	}
	for _, m := range sortedKeys(mcps) {
		if err := d.DB.AddMCP(ctx, m); err != nil && !errors.Is(err, skills.ErrExists) {
			return err
		}
	}
	if len(tools)+len(mcps) > 0 {
		r.Act("registered %d tools and %d MCP servers the skills depend on", len(tools), len(mcps))
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
func (d *Dir) recoverSkill(slug string, hashes []string, r *Report) (*skills.Skill, []*skills.Version, error) {
	type found struct {
		meta    *store.VersionMeta
		derived bool
	}
	var ok []found
	for _, h := range hashes {
		reason := ""
		dir := d.Store.VersionPath(slug, h)
		switch {
		case !manifest.ValidSlug(slug) || dir == "":
			reason = "not a version of a valid slug"
		default:
			if got, _, _, err := store.TreeHash(dir); err != nil || got != h {
				reason = "its content does not hash to its name"
			}
		}
		if reason != "" {
			to, err := d.Store.Quarantine(slug, h, reason)
			if err != nil {
				return nil, nil, err
			}
			r.Act("moved %s/%s to %s: %s", slug, h, to, reason)
			continue
		}
		m, err := d.Store.ReadMeta(slug, h)
		derived := false
		if err != nil {
			if m, err = d.deriveMeta(slug, h, dir); err != nil {
				to, qerr := d.Store.Quarantine(slug, h, "no metadata and no readable SKILL.md: "+err.Error())
				if qerr != nil {
					return nil, nil, qerr
				}
				r.Act("moved %s/%s to %s: %v", slug, h, to, err)
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
			r.Act("version %s/%s had no metadata: its provenance is unknown (recorded as %q)", slug, store.ShortHash(v.Hash), v.Source)
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
func (d *Dir) deriveMeta(slug, hash, dir string) (*store.VersionMeta, error) {
	data, err := skills.ReadRegular(filepath.Join(dir, skills.ManifestName), skills.ManifestName, d.Limits.MaxFileBytes, false)
	if err != nil {
		return nil, err
	}
	m, _, err := manifest.ParseStored(data, slug)
	if err != nil {
		return nil, err
	}
	_, files, size, err := store.TreeHash(dir)
	if err != nil {
		return nil, err
	}
	at := d.Now().UTC()
	if fi, err := os.Stat(dir); err == nil {
		at = fi.ModTime().UTC()
	}
	source := "recovered:" + slug
	return &store.VersionMeta{
		Skill: skills.Skill{Slug: slug, Name: m.Name, Description: m.Description, SourceType: skills.SourceUpload,
			Source: source, Share: policy.DefaultShare(d.Operator), Enabled: true,
			SkillDependencies: m.SkillDependencies, ToolDependencies: m.ToolDependencies, MCPDependencies: m.MCPDependencies,
			Version: hash, Creator: d.Operator, CreatedAt: at, UpdatedAt: at},
		Version: skills.Version{Slug: slug, Hash: hash, SourceType: skills.SourceUpload, Source: source,
			Installer: d.Operator, InstalledAt: at, Files: files, Bytes: size},
	}, nil
}
