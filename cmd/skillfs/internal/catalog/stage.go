package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/manifest"
	skillsource "skillfs/skills/source"
	"skillfs/skills/store"
)

// The import pipeline. Every way content enters the catalog — an import,
// a confirmed draft, a curated install, an update, an edit — runs one
// skill at a time through staged:
//
//  1. stage (importRun.stage for a skill of a source, stageTree for an
//     edited copy): the tree is copied into a staging folder with every
//     package rule and limit, and its SKILL.md read and parsed;
//  2. settle the slug (settleSlug: the one it asks for, its plugin's, or
//     the next free -vN, and the skill it becomes a new version of), or
//     take the skill's own (an update, an edit), and write it into the
//     staged SKILL.md (writeSlug);
//  3. hash the tree (hashTree): unchanged content publishes nothing;
//  4. Publish, under the publish lock: the catalog entry is made (entry),
//     its dependencies checked, the tree moved into the store and the
//     version recorded in the index.
//
// --list and drafts run steps 1 to 3 and keep nothing (planOne) or keep
// the staged tree for a later confirmation (draftOne).

// importRun is one request reading one source: who imports, how, and the
// source its skills are staged from.
type importRun struct {
	c     *Catalog
	actor skills.User
	req   ImportRequest
	src   *source
}

// staged is one skill on its way into the catalog (see the pipeline
// above): its staged tree and manifest, where it comes from, and, once
// settled and hashed, its slug, the skill it becomes a new version of and
// its content's hash.
type staged struct {
	c     *Catalog
	actor skills.User

	dir      string             // the staged tree
	data     []byte             // its SKILL.md
	m        *manifest.Manifest // parsed from data
	warnings []string

	// Where it comes from: its plugin, the slug it asks for when that is
	// its plugin's (skillsource.Found.Want), its provenance key
	// (skillsource.SkillKey), and the provenance its version records (source type,
	// source, ref, commit, working-tree state).
	plugin, want, origin string
	prov                 skills.Version
	// How the request settles it: a builtin re-synced, --replace, and the
	// share a new skill asks for (nil: the actor's default).
	builtin, replace bool
	share            *skills.Share

	// Settled: the slug and the skill it becomes a new version of (nil: a
	// new skill).
	slug     string
	existing *skills.Skill
	// Hashed: the content's tree hash, files and bytes.
	hash  string
	files int
	bytes int64
}

// stage copies the skill f of the run's source into dst with every package
// rule and limit, and parses the staged SKILL.md leniently, with the
// skill's folder for a skill without a usable name.
//
// The skills of one source are held together to the limits (src.used),
// as the files of one source are: a symlink is stored as a copy of its
// target, and a folder every skill links to must not count once per skill.
// The skills of the agents' folders, each its own root, are counted each
// on its own.
func (r *importRun) stage(f skillsource.Found, dst string) (*staged, error) {
	c, req, src := r.c, r.req, r.src
	opts := skillsource.StageOptions{Root: stageRoot(req, src), Link: src.Owned && !req.Agents}
	before := src.used
	if !req.Agents {
		opts.Used = &src.used
	}
	tree, err := skillsource.StageDirOpts(f.Dir, dst, c.lim, opts)
	var le *skills.LimitError
	if errors.As(err, &le) && before != (skillsource.Usage{}) &&
		(le.Limit == skills.LimitTotalBytes || le.Limit == skills.LimitFiles || le.Limit == skills.LimitEntries) {
		return nil, fmt.Errorf("%w (the skills of one source count together: %d files, %d bytes before this one)", err, before.Files, before.Bytes)
	}
	if err != nil {
		return nil, err
	}
	data, err := skills.ReadManifest(filepath.Join(dst, skills.ManifestName), skills.ManifestName, c.lim.MaxManifest, false)
	if err != nil {
		return nil, err
	}
	m, mw, err := skillsource.ParseManifest(data, f.Name)
	if err != nil {
		return nil, err
	}
	warnings := append(slices.Clone(tree.Warnings), mw...)
	if f.Name != "" && f.Rel != "." && f.Name != m.Slug && !req.Agents {
		warnings = append(warnings, fmt.Sprintf("folder %q differs from slug %q: the slug is the identity", f.Name, m.Slug))
	}
	st := &staged{c: c, actor: r.actor, dir: dst, data: data, m: m, warnings: warnings,
		plugin: f.Plugin, want: f.Want, origin: skillsource.SkillKey(src.Key, f.Candidate, req.Agents),
		builtin: req.Builtin, replace: req.Replace, share: req.Share}
	st.prov = skills.Version{SourceType: requestSourceType(req, src), Source: st.origin, Ref: src.Ref, Commit: src.Commit, Worktree: src.Worktree}
	return st, nil
}

// stageTree stages the tree of an edited copy of skill s into dst, as any
// import stages, and reads its SKILL.md as an import reads it (leniently),
// so that an edit of any file of an imported skill is not refused for what
// its import let pass. Its slug cannot change.
func (c *Catalog) stageTree(actor skills.User, s *skills.Skill, tree, dst string) (*staged, error) {
	if _, err := skillsource.StageDir(tree, dst, c.lim); err != nil {
		return nil, err
	}
	data, err := skills.ReadManifest(filepath.Join(dst, skills.ManifestName), skills.ManifestName, c.lim.MaxManifest, false)
	if err != nil {
		return nil, err
	}
	m, warnings, err := manifest.ParseStored(data, s.Slug)
	if err != nil {
		return nil, err
	}
	if m.Slug != s.Slug {
		return nil, fmt.Errorf("SKILL.md gives slug %q, but the slug of a skill cannot change (it is %q; keep a `slug: %s` line): %w", m.Slug, s.Slug, s.Slug, skills.ErrInvalid)
	}
	return &staged{c: c, actor: actor, dir: dst, data: data, m: m, warnings: warnings, slug: s.Slug}, nil
}

// writeSlug writes the settled slug into the staged SKILL.md unless it is
// settled there already (manifest.SlugSettled): for a -vN or plugin slug, a
// slug derived from a folder named otherwise, or a slug key that is not a
// valid slug. Only the slug line changes.
func (st *staged) writeSlug() error {
	if manifest.SlugSettled(st.data, st.slug) {
		return nil
	}
	rewritten, err := manifest.RewriteSlug(st.data, st.slug)
	if err != nil {
		return err
	}
	// Replaced, never written in place: the staged file may be a link to
	// the source's (skillsource.StageOptions.Link), which must not change.
	p := filepath.Join(st.dir, skills.ManifestName)
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("rewrite slug: %w", err)
	}
	mode := os.FileMode(0o644)
	if fi.Mode()&0o100 != 0 {
		mode = 0o755
	}
	// A reserved name, which no staged tree holds.
	tmp := filepath.Join(st.dir, ".skillfs-manifest.tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return fmt.Errorf("rewrite slug: %w", err)
	}
	_, err = f.Write(rewritten)
	if err == nil {
		err = f.Chmod(mode) // the umask may have narrowed it
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rewrite slug: %w", err)
	}
	st.data = rewritten
	return nil
}

// hashTree hashes the staged tree as it is now.
func (st *staged) hashTree() error {
	hash, files, size, err := store.TreeHash(st.dir)
	if err != nil {
		return err
	}
	st.hash, st.files, st.bytes = hash, files, size
	return nil
}

// unchanged reports whether the staged content is the current version of
// the skill it settled on.
func (st *staged) unchanged() bool { return st.existing != nil && st.existing.Version == st.hash }

// entry is the catalog entry publishing the staged skill makes: existing
// with the new version's manifest and provenance, or a new skill, whose
// share must be one the actor may give.
func (st *staged) entry(now time.Time) (*skills.Skill, error) {
	m := st.m
	if st.existing != nil {
		sk := *st.existing
		sk.Name, sk.Description, sk.Plugin, sk.Source, sk.Version, sk.UpdatedAt = m.Name, m.Description, st.plugin, st.origin, st.hash, now
		sk.SkillDependencies, sk.ToolDependencies, sk.MCPDependencies = m.SkillDependencies, m.ToolDependencies, m.MCPDependencies
		return &sk, nil
	}
	sourceType := st.prov.SourceType
	sk := &skills.Skill{
		Slug: st.slug, Name: m.Name, Description: m.Description, Plugin: st.plugin,
		SourceType: sourceType, Source: st.origin, Enabled: true, Share: defaultShare(st.actor, sourceType),
		SkillDependencies: m.SkillDependencies, ToolDependencies: m.ToolDependencies, MCPDependencies: m.MCPDependencies,
		Version: st.hash, Creator: st.actor.UID, CreatedAt: now, UpdatedAt: now,
	}
	if st.share != nil && sourceType != skills.SourceBuiltin {
		sk.Share = *st.share
		if err := policy.CheckShare(st.actor, sk, sk.Share); err != nil {
			return nil, err
		}
	}
	return sk, nil
}

// checked is the entry publishing st makes at now, its name checked
// against the builtins' (reservedName) and its dependencies validated
// against snap: what Publish checks, and --list predicts.
func (st *staged) checked(snap policy.Catalog, now time.Time) (*skills.Skill, error) {
	sk, err := st.entry(now)
	if err != nil {
		return nil, err
	}
	if err := st.reservedName(snap, sk); err != nil {
		return nil, err
	}
	return sk, policy.ValidateDependencies(snap, sk)
}

// Publish makes the staged skill a new version of the skill it settled on,
// or a new skill: it validates the entry's dependencies, moves the staged
// tree into the store and records the version. The caller holds the
// publish lock, settled the slug and hashed the tree. On failure nothing
// it made is left behind.
func (st *staged) Publish(ctx context.Context) (*skills.Skill, error) {
	c := st.c
	now := c.now().UTC()
	snap, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	sk, err := st.checked(snap, now)
	if err != nil {
		return nil, err
	}
	ver := st.prov
	ver.Slug, ver.Hash, ver.Installer, ver.InstalledAt, ver.Files, ver.Bytes = st.slug, st.hash, st.actor.UID, now, st.files, st.bytes
	if st.existing != nil {
		ver.Previous = st.existing.Version
	}
	ver.Path = store.VersionRelPath(sk.Slug, ver.Hash)
	meta := &store.VersionMeta{Skill: *sk, Version: ver, CurrentSince: ver.InstalledAt}
	_, created, err := c.store.Publish(st.dir, sk.Slug, ver.Hash, meta)
	if err != nil {
		return nil, fmt.Errorf("publish %q: %w", sk.Slug, err)
	}
	// Other hosts learn of a version from its row: its content is in the
	// shared index before, so every host that sees it can fetch it.
	if c.shared {
		if err := c.cache.Upload(ctx, sk.Slug, ver.Hash); err != nil {
			if created {
				c.store.RemoveVersion(sk.Slug, ver.Hash)
			}
			return nil, fmt.Errorf("store the content of %q in the shared index: %w", sk.Slug, err)
		}
	}
	if st.existing == nil {
		err = c.db.InsertSkill(ctx, sk, &ver)
	} else {
		err = c.db.AddVersion(ctx, sk, &ver)
	}
	if err != nil {
		if created {
			c.store.RemoveVersion(sk.Slug, ver.Hash)
		}
		return nil, fmt.Errorf("record %q in the index: %w", sk.Slug, err)
	}
	if !created {
		c.markCurrent(ctx, sk, ver.Hash, ver.InstalledAt)
	}
	return sk, nil
}

// markCurrent records in the metadata of an existing version that it is its
// skill's current one again (older content reinstalled), so a rebuild from
// the store picks it. The version's provenance stays as first recorded, as
// in the index. A failure only costs a rebuild's accuracy: it is logged.
func (c *Catalog) markCurrent(ctx context.Context, sk *skills.Skill, hash string, at time.Time) {
	if _, err := os.Lstat(c.store.VersionPath(sk.Slug, hash)); err != nil && c.shared {
		return // not in this host's cache: nothing to record it in
	}
	v, err := c.db.Version(ctx, sk.Slug, hash)
	if err == nil {
		err = c.store.WriteMeta(sk.Slug, hash, &store.VersionMeta{Skill: *sk, Version: *v, CurrentSince: at})
	}
	if err != nil {
		c.log.Warn("record that a version is current again", "slug", sk.Slug, "version", hash, "err", err)
	}
}

// requestSourceType is the source type a request records for its versions.
func requestSourceType(req ImportRequest, src *source) string {
	if req.Builtin {
		return skills.SourceBuiltin
	}
	return src.Type
}

// stageRoot is what the symlinks of a source's skills are confined to: the
// clone, the unpacked archive or the local folder; "" (each skill folder
// itself) for agents' folders, which share no root, and for a draft.
func stageRoot(req ImportRequest, src *source) string {
	if req.Agents {
		return ""
	}
	return src.Root
}

// defaultShare: builtins are for everyone; anything else starts private to
// whoever installed it.
func defaultShare(actor skills.User, sourceType string) skills.Share {
	if sourceType == skills.SourceBuiltin {
		return skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}
	}
	return policy.DefaultShare(actor.UID)
}
