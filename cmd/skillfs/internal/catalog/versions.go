package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"skillfs/cmd/skillfs/api"
	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/diff"
	"skillfs/skills/manifest"
	"skillfs/skills/store"
)

// VersionInfo is one version of a skill as `skill versions` lists it: its
// provenance, whether it is the current one, and what changed against the
// version before it (Against; none for the first). When the two cannot be
// compared (the content of one is missing from the store) DiffStatError
// says so instead of a DiffStat.
type VersionInfo struct {
	*skills.Version
	Current       bool       `json:"current"`
	Against       string     `json:"against,omitempty"`
	DiffStat      *diff.Stat `json:"diffstat,omitempty"`
	DiffStatError string     `json:"diffstat_error,omitempty"`
}

// Versions lists the versions of a skill the actor may see, newest first,
// each with its diffstat against the one it replaced (or, for a version
// recorded without one, the one installed before it). A diffstat is
// computed once and kept in the index; those not kept yet are computed
// within one comparison budget for the whole listing (see
// diff.Budget): the files that do not fit what is left of it are
// reported not compared, and such a diffstat is not kept (a later listing
// computes it again): only a complete one is.
func (c *Catalog) Versions(ctx context.Context, as, slug string) ([]VersionInfo, error) {
	d, err := c.Show(ctx, as, slug)
	if err != nil {
		return nil, err
	}
	kept, err := c.db.DiffStats(ctx, slug)
	if err != nil {
		return nil, err
	}
	have := make(map[string]bool, len(d.Versions))
	for _, v := range d.Versions {
		have[v.Hash] = true
	}
	budget := c.diffBudget()
	out := make([]VersionInfo, len(d.Versions))
	for i, v := range d.Versions {
		prev := v.Previous
		if !have[prev] {
			prev = ""
			if i+1 < len(d.Versions) {
				prev = d.Versions[i+1].Hash
			}
		}
		out[i] = VersionInfo{Version: v, Current: v.Hash == d.Version, Against: prev}
		if prev == "" {
			continue
		}
		key := index.DiffStatKey{Hash: v.Hash, Against: prev}
		if st, ok := kept[key]; ok {
			out[i].DiffStat = &st
			continue
		}
		st, err := c.versionStat(ctx, slug, prev, v.Hash, budget)
		if err != nil {
			out[i].DiffStatError = err.Error()
			continue
		}
		out[i].DiffStat = &st
		// Kept only complete: one with files not compared says what this
		// request's budget allowed, not what the versions hold.
		if st.NotCompared == 0 {
			c.keepStat(ctx, slug, key, st)
		}
	}
	return out, nil
}

// versionStat compares two stored versions of slug for their diffstat;
// the error says, without a path, why they could not be compared.
func (c *Catalog) versionStat(ctx context.Context, slug, from, to string, budget *diff.Budget) (diff.Stat, error) {
	var dirs [2]string
	for i, h := range []string{from, to} {
		dir, err := c.versionDir(ctx, slug, h)
		if err != nil {
			return diff.Stat{}, fmt.Errorf("the content of version %s could not be fetched from the shared index (see the log)", store.ShortHash(h))
		}
		if _, err := os.Lstat(dir); err != nil {
			return diff.Stat{}, fmt.Errorf("the content of version %s is missing from the store (see `skillfs check`)", store.ShortHash(h))
		}
		dirs[i] = dir
	}
	var stat diff.Stat
	err := c.compare(ctx, dirs[0], dirs[1], false, budget, nil, func(fc *diff.FileChange) error {
		stat.Add(fc)
		return nil
	})
	if errors.Is(err, skills.ErrBusy) {
		return diff.Stat{}, err
	}
	if err != nil {
		c.log.Warn("compare versions", "slug", slug, "from", from, "to", to, "err", err)
		if errors.Is(err, fs.ErrNotExist) {
			return diff.Stat{}, fmt.Errorf("a file of version %s or %s went missing from the store (see `skillfs check`)", store.ShortHash(from), store.ShortHash(to))
		}
		return diff.Stat{}, fmt.Errorf("versions %s and %s could not be compared: %w", store.ShortHash(from), store.ShortHash(to), errors.Unwrap(err))
	}
	return stat, nil
}

// keepStat stores a diffstat so it is not computed again. A failure only
// costs that: it is logged.
func (c *Catalog) keepStat(ctx context.Context, slug string, key index.DiffStatKey, st diff.Stat) {
	if err := c.db.PutDiffStat(ctx, slug, key, st); err != nil {
		c.log.Warn("keep a diffstat", "slug", slug, "version", key.Hash, "against", key.Against, "err", err)
	}
}

// resolveVersion finds the version of slug a VERSION argument names: a
// unique prefix of its hash.
func (c *Catalog) resolveVersion(ctx context.Context, slug, arg string) (*skills.Version, error) {
	prefix, err := skills.CleanVersion(arg)
	if err != nil {
		return nil, err
	}
	return c.db.ResolveVersion(ctx, slug, prefix)
}

// Diff is what changed from one version of a skill to another.
type Diff struct {
	Slug     string            `json:"slug"`
	From     string            `json:"from"` // "" for the empty tree (the first version has none before it)
	To       string            `json:"to"`
	DiffStat diff.Stat         `json:"diffstat"`
	Files    []diff.FileChange `json:"files"`
}

// Diff compares two versions of a skill the actor may see: a (default: the
// version b replaced, or the empty tree for the first) with b (default: the
// current version). Each of a and b is a unique prefix of a version's hash.
// It keeps every change; DiffEach hands them on one at a time.
func (c *Catalog) Diff(ctx context.Context, as, slug, a, b string) (*Diff, error) {
	var d *Diff
	st, err := c.DiffEach(ctx, as, slug, a, b, true, func(head *Diff) error {
		d = head
		d.Files = []diff.FileChange{}
		return nil
	}, func(fc *diff.FileChange) error {
		d.Files = append(d.Files, *fc)
		return nil
	})
	if err != nil {
		return nil, err
	}
	d.DiffStat = st
	return d, nil
}

// DiffEach compares two versions as Diff does, with text diffs or (text
// false) only their counts. Once the versions are resolved and what the
// comparison holds is granted (see DiffGate), it calls start with the
// Diff's slug and versions, then each with every file that changed, as it
// is made: none is kept. An error of start or each stops it. It returns
// the diffstat of the changes.
func (c *Catalog) DiffEach(ctx context.Context, as, slug, a, b string, text bool,
	start func(*Diff) error, each func(*diff.FileChange) error) (diff.Stat, error) {
	var st diff.Stat
	from, to, err := c.diffVersions(ctx, as, slug, a, b)
	if err != nil {
		return st, err
	}
	fromDir := ""
	if from != "" {
		if fromDir, err = c.versionDir(ctx, slug, from); err != nil {
			return st, err
		}
	}
	toDir, err := c.versionDir(ctx, slug, to)
	if err != nil {
		return st, err
	}
	err = c.compare(ctx, fromDir, toDir, text, c.diffBudget(), func() error {
		return start(&Diff{Slug: slug, From: from, To: to})
	}, func(fc *diff.FileChange) error {
		st.Add(fc)
		return each(fc)
	})
	if err != nil {
		return st, fmt.Errorf("diff %q %s..%s: %w", slug, store.ShortHash(from), store.ShortHash(to), err)
	}
	return st, nil
}

// diffVersions resolves the versions Diff compares: from ("" for the
// empty tree) and to.
func (c *Catalog) diffVersions(ctx context.Context, as, slug, a, b string) (from, to string, err error) {
	d, err := c.Show(ctx, as, slug)
	if err != nil {
		return "", "", err
	}
	to = d.Version
	if b != "" {
		v, err := c.resolveVersion(ctx, slug, b)
		if err != nil {
			return "", "", err
		}
		to = v.Hash
	}
	if a != "" {
		v, err := c.resolveVersion(ctx, slug, a)
		if err != nil {
			return "", "", err
		}
		return v.Hash, to, nil
	}
	for i, v := range d.Versions {
		if v.Hash != to {
			continue
		}
		from = v.Previous
		if from == "" && i+1 < len(d.Versions) {
			from = d.Versions[i+1].Hash
		}
	}
	return from, to, nil
}

// ExportVersion writes one version of a skill (a unique hash prefix; ""
// for the current one) as Export does.
func (c *Catalog) ExportVersion(ctx context.Context, as, slug, version string, w io.Writer) error {
	dir, err := c.ExportPath(ctx, as, slug, version)
	if err != nil {
		return err
	}
	return store.WriteZip(w, dir, slug+"/")
}

// ExportPath checks that the actor may export a version of slug (""
// for the current one) and returns where its content is.
func (c *Catalog) ExportPath(ctx context.Context, as, slug, version string) (string, error) {
	d, err := c.Show(ctx, as, slug)
	if err != nil {
		return "", err
	}
	hash := d.Version
	if version != "" {
		v, err := c.resolveVersion(ctx, slug, version)
		if err != nil {
			return "", err
		}
		hash = v.Hash
	}
	return c.versionDir(ctx, slug, hash)
}

// versionDir is where the content of a version can be read: with a shared
// index it is fetched into this host's cache first (EnsureVersion); with
// the data directory's own index it is the store's copy, there or not
// (each caller reports a missing one its way, as it did before).
func (c *Catalog) versionDir(ctx context.Context, slug, hash string) (string, error) {
	if !c.shared {
		return c.store.VersionPath(slug, hash), nil
	}
	return c.EnsureVersion(ctx, slug, hash)
}

// Rollback makes an older version of a skill its current one again: the
// index takes the name, description and dependencies from that version's
// SKILL.md. It is a catalog change like an edit (and needs the right to
// edit; builtins cannot be rolled back, they follow their source): open
// sessions keep the version they pinned until they refresh. Rolling back
// to the current version changes nothing.
func (c *Catalog) Rollback(ctx context.Context, as, slug, version string) (*Installed, error) {
	actor, s, err := c.lookup(ctx, as, slug)
	if err != nil {
		return nil, err
	}
	if err := policy.CheckEdit(actor, s); err != nil {
		return nil, fmt.Errorf("roll back: %w", err)
	}
	v, err := c.resolveVersion(ctx, slug, version)
	if err != nil {
		return nil, err
	}
	unlock, err := c.publishLock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if s, err = c.db.Skill(ctx, slug); err != nil { // the current version may have moved meanwhile
		return nil, err
	}
	if s.Version == v.Hash {
		return &Installed{Slug: slug, Name: skills.DisplayName(s.Plugin, s.Name), Version: v.Hash,
			Warnings: []string{"it is the current version already: nothing changed"}}, nil
	}
	dir, err := c.versionDir(ctx, slug, v.Hash)
	if err != nil {
		return nil, err
	}
	data, err := skills.ReadManifest(filepath.Join(dir, skills.ManifestName), skills.ManifestName, c.lim.MaxManifest, false)
	if err != nil {
		return nil, fmt.Errorf("read version %s of %q: %w", store.ShortHash(v.Hash), slug, err)
	}
	m, warnings, err := manifest.ParseStored(data, slug)
	if err != nil {
		return nil, fmt.Errorf("version %s of %q: %w", store.ShortHash(v.Hash), slug, err)
	}
	next := *s
	next.Name, next.Description = m.Name, m.Description
	next.SkillDependencies, next.ToolDependencies, next.MCPDependencies = m.SkillDependencies, m.ToolDependencies, m.MCPDependencies
	next.Version, next.UpdatedAt = v.Hash, c.now().UTC()
	snap, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if err := policy.ValidateDependencies(snap, &next); err != nil {
		return nil, fmt.Errorf("roll %q back to %s: %w", slug, store.ShortHash(v.Hash), err)
	}
	if err := c.db.AddVersion(ctx, &next, v); err != nil { // stored already: only made current
		return nil, err
	}
	c.markCurrent(ctx, &next, v.Hash, next.UpdatedAt)
	c.log.Info("skill rolled back", "slug", slug, "from", s.Version, "to", v.Hash, "by", actor.UID)
	return &Installed{Slug: slug, Name: skills.DisplayName(next.Plugin, next.Name), Version: v.Hash, Previous: s.Version, Warnings: api.NonNil(warnings)}, nil
}
