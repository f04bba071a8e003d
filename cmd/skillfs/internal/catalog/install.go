package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/manifest"
	skillsource "skillfs/skills/source"
	"skillfs/skills/store"
)

// maxSuffix bounds the -vN search for a free slug.
const maxSuffix = 100

// stagedSkill is one skill of a source copied into a staging folder and
// parsed as import parses it: what it would install as, before its slug is
// settled.
type stagedSkill struct {
	dir      string             // the staged tree
	data     []byte             // its SKILL.md
	m        *manifest.Manifest // parsed from data
	warnings []string
}

// stageSkill copies the skill f of src into dst with every package rule and
// limit, and parses the staged SKILL.md leniently, with the skill's folder
// for a skill without a usable name.
//
// The skills of one source are held together to the limits (src.used),
// as the files of one source are: a symlink is stored as a copy of its
// target, and a folder every skill links to must not count once per skill.
// The skills of the agents' folders, each its own root, are counted each
// on its own.
func (c *Catalog) stageSkill(req ImportRequest, src *source, f found, dst string) (*stagedSkill, error) {
	opts := skillsource.StageOptions{Root: stageRoot(req, src), Link: src.owned && !req.Agents}
	before := src.used
	if !req.Agents {
		opts.Used = &src.used
	}
	st, err := skillsource.StageDirOpts(f.Dir, dst, c.lim, opts)
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
	m, mw, err := parseImported(data, f.Name)
	if err != nil {
		return nil, err
	}
	warnings := append(slices.Clone(st.Warnings), mw...)
	if f.Name != "" && f.Rel != "." && f.Name != m.Slug && !req.Agents {
		warnings = append(warnings, fmt.Sprintf("folder %q differs from slug %q: the slug is the identity", f.Name, m.Slug))
	}
	return &stagedSkill{dir: dst, data: data, m: m, warnings: warnings}, nil
}

// settle decides the slug of a staged skill: the slug it asks for (its own,
// or its plugin-namespaced one), or the next free -vN when another source's
// skill holds it; existing is the skill it becomes a new version of. The
// caller that publishes holds the publish lock. taken holds the slugs that
// skills listed before this one in the same plan or draft will have.
//
// Whether a plugin's skill is namespaced depends on the other skills its
// source holds, which change: when this skill of this source is installed
// already under the other form (its own slug, or the namespaced one), that
// skill gets the new version and keeps its slug, so that one SOURCE//PATH
// stays one skill.
func (c *Catalog) settle(ctx context.Context, actor skills.User, req ImportRequest, key string, f found, st *stagedSkill, taken map[string]bool) (slug string, existing *skills.Skill, warnings []string, err error) {
	want := st.m.Slug
	if f.want != "" && f.Plugin != "" && f.want != st.m.Slug {
		want = f.want
		warnings = append(warnings, fmt.Sprintf("another skill of this source is also %q: installed as %q, the slug of plugin %q", st.m.Slug, want, f.Plugin))
	}
	if f.Plugin != "" {
		other := st.m.Slug
		if want == st.m.Slug {
			other = namespaced(f.Plugin, st.m.Slug)
		}
		if other != "" && other != want {
			slug, existing, err := c.sameSource(ctx, actor, req, key, other, taken)
			if err != nil {
				return "", nil, nil, err
			}
			if existing != nil {
				return slug, existing, []string{fmt.Sprintf("this skill of this source is installed as %q already: a new version of it, not %q", slug, want)}, nil
			}
		}
	}
	slug, existing, err = c.chooseSlug(ctx, actor, req, key, want, taken)
	if err != nil {
		return "", nil, nil, err
	}
	if slug != want {
		warnings = append(warnings, fmt.Sprintf("slug %q is taken: installed as %q "+
			"(whoever manages %q can import with --replace to make this a new version of it instead)", want, slug, want))
	}
	return slug, existing, warnings, nil
}

// importOne stages one skill of a source, validates it, settles its slug and
// publishes it. On any error nothing is left: no staging, no content, no row.
func (c *Catalog) importOne(ctx context.Context, actor skills.User, req ImportRequest, src *source, f found) (*Installed, error) {
	staging, err := c.store.NewStaging()
	if err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	defer forceRemoveAll(staging) // a no-op once published (renamed away)
	st, err := c.stageSkill(req, src, f, staging)
	if err != nil {
		return nil, err
	}
	m, warnings := st.m, st.warnings
	key := sourceKey(src.key, f.Candidate, req.Agents)

	// Settle the slug, publish and record under the publish lock, so no
	// other import (in any process) decides between our check and our row.
	unlock, err := c.publishLock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := c.stillRegistered(ctx, actor); err != nil {
		return nil, err
	}
	slug, existing, sw, err := c.settle(ctx, actor, req, key, f, st, nil)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, sw...)
	if err := rewriteSlugIfNeeded(st, slug); err != nil {
		return nil, err
	}
	hash, files, size, err := store.TreeHash(staging)
	if err != nil {
		return nil, fmt.Errorf("hash staged skill: %w", err)
	}
	if existing != nil && existing.Version == hash {
		warnings = append(warnings, "content identical to the current version: no new version")
		return &Installed{Slug: slug, Name: DisplayName(existing.Plugin, existing.Name), Version: hash, Warnings: nonNilStrings(warnings),
			Readable: policy.FormatScope(existing.Share.Read)}, nil
	}
	now := c.now().UTC()
	sk, err := c.skillEntry(actor, req, src, key, f, m, slug, hash, existing, now)
	if err != nil {
		return nil, err
	}
	ver := &skills.Version{
		Slug: slug, Hash: hash, SourceType: requestSourceType(req, src), Source: key, Ref: src.ref, Commit: src.commit, Worktree: src.worktree,
		Installer: actor.UID, InstalledAt: now, Files: files, Bytes: size,
	}
	if existing != nil {
		ver.Previous = existing.Version
	}
	if err := c.publishVersion(ctx, staging, sk, ver, existing == nil); err != nil {
		return nil, err
	}
	c.log.Info("skill installed", "slug", slug, "version", hash, "source", key)
	in := &Installed{Slug: slug, Name: DisplayName(sk.Plugin, sk.Name), Version: hash, Warnings: nonNilStrings(warnings),
		Readable: policy.FormatScope(sk.Share.Read)}
	if want := wantedSlug(f, st); existing == nil && slug != want && strings.HasPrefix(slug, want+"-v") {
		in.RenamedFrom = want
		in.Note = renameNote(want, slug)
	}
	return in, nil
}

// wantedSlug is the slug a staged skill asks for (see settle).
func wantedSlug(f found, st *stagedSkill) string {
	if f.want != "" && f.Plugin != "" {
		return f.want
	}
	return st.m.Slug
}

// renameNote says plainly that a skill became a new one beside the skill
// holding its slug, and how to update that one instead. It says nothing
// about that skill (its source, its owner): the importer may not see it.
func renameNote(want, slug string) string {
	return fmt.Sprintf("the slug %q is taken, so this one is a new skill %q "+
		"(two skills never overwrite each other by name). To make it a new version of %q instead, whoever manages %q "+
		"imports it with --replace; to pick up changes of %q's own source, they run `skillfs skill update %s`",
		want, slug, want, want, want, want)
}

// requestSourceType is the source type a request records for its versions.
func requestSourceType(req ImportRequest, src *source) string {
	if req.Builtin {
		return skills.SourceBuiltin
	}
	return src.sourceType
}

// skillEntry is the catalog entry importing f as slug makes: a new one, or
// existing with the new version's manifest and provenance; the share a new
// skill asks for must be one the actor may give.
func (c *Catalog) skillEntry(actor skills.User, req ImportRequest, src *source, key string, f found, m *manifest.Manifest, slug, hash string, existing *skills.Skill, now time.Time) (*skills.Skill, error) {
	sourceType := requestSourceType(req, src)
	sk := &skills.Skill{
		Slug: slug, Name: m.Name, Description: m.Description, Plugin: f.Plugin,
		SourceType: sourceType, Source: key, Enabled: true,
		SkillDependencies: m.SkillDependencies, ToolDependencies: m.ToolDependencies, MCPDependencies: m.MCPDependencies,
		Version: hash, Creator: actor.UID, CreatedAt: now, UpdatedAt: now,
	}
	if existing != nil {
		sk.Share, sk.Enabled, sk.Creator, sk.CreatedAt, sk.SourceType = existing.Share, existing.Enabled, existing.Creator, existing.CreatedAt, existing.SourceType
		return sk, nil
	}
	sk.Share = defaultShare(actor, sourceType)
	if req.Share != nil && sourceType != skills.SourceBuiltin {
		sk.Share = *req.Share
		if err := policy.CheckShare(actor, sk, sk.Share); err != nil {
			return nil, err
		}
	}
	return sk, nil
}

// rewriteSlugIfNeeded writes slug into the staged SKILL.md unless it is
// settled there already (manifest.SlugSettled): for a -vN or plugin slug, a
// slug derived from a folder named otherwise, or a slug key that is not a
// valid slug.
// Only the slug line changes.
func rewriteSlugIfNeeded(st *stagedSkill, slug string) error {
	if manifest.SlugSettled(st.data, slug) {
		return nil
	}
	rewritten, err := manifest.RewriteSlug(st.data, slug)
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

// publishVersion validates sk's dependencies, moves the staged tree into the
// store and records the version (a new skill when insert). The caller holds
// the publish lock. On failure nothing it made is left behind.
func (c *Catalog) publishVersion(ctx context.Context, staging string, sk *skills.Skill, ver *skills.Version, insert bool) error {
	snap, err := c.snapshot(ctx)
	if err != nil {
		return err
	}
	if err := policy.ValidateDependencies(snap, sk); err != nil {
		return err
	}
	ver.Path = store.VersionRelPath(sk.Slug, ver.Hash)
	meta := &store.VersionMeta{Skill: *sk, Version: *ver, CurrentSince: ver.InstalledAt}
	_, created, err := c.store.Publish(staging, sk.Slug, ver.Hash, meta)
	if err != nil {
		return fmt.Errorf("publish %q: %w", sk.Slug, err)
	}
	// Other hosts learn of a version from its row: its content is in the
	// shared index before, so every host that sees it can fetch it.
	if c.shared {
		if err := c.uploadVersion(ctx, sk.Slug, ver.Hash); err != nil {
			if created {
				c.store.RemoveVersion(sk.Slug, ver.Hash)
			}
			return fmt.Errorf("store the content of %q in the shared index: %w", sk.Slug, err)
		}
	}
	if insert {
		err = c.db.InsertSkill(ctx, sk, ver)
	} else {
		err = c.db.AddVersion(ctx, sk, ver)
	}
	if err != nil {
		if created {
			c.store.RemoveVersion(sk.Slug, ver.Hash)
		}
		return fmt.Errorf("record %q in the index: %w", sk.Slug, err)
	}
	if !created {
		c.markCurrent(ctx, sk, ver.Hash, ver.InstalledAt)
	}
	return nil
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

// stageRoot is what the symlinks of a source's skills are confined to: the
// clone, the unpacked archive or the local folder; "" (each skill folder
// itself) for agents' folders, which share no root, and for a draft.
func stageRoot(req ImportRequest, src *source) string {
	if req.Agents {
		return ""
	}
	return src.root
}

// sourceKey is the provenance of one skill of a source: same key, same
// source, so a reinstall makes a new version.
func sourceKey(key string, cand skillsource.Candidate, agents bool) string {
	switch {
	case agents:
		return key + cand.Rel // the agent folder's real path
	case cand.Rel != ".":
		return key + "//" + cand.Rel
	}
	return key
}

// chooseSlug decides where a skill with the wanted slug goes: a new skill
// (existing == nil) or a new version of existing. A slug in taken counts as
// taken by a skill from elsewhere. A skill of the same source becomes a new
// version only for those who manage it by explicit right (its creator, its
// manage scope: policy.ManagesByShare), never by an admin's role alone, so an
// admin's import does not take over another user's skill; --replace is how
// any manager (admins included) makes an import a new version of the skill
// holding the wanted slug. --replace of a skill the actor knows of
// (policy.Known) but may not manage is refused (skills.ErrPermission); of
// one the actor may not see, it is ignored: the import answers exactly as
// without it (a -vN beside the slug), as refusing would tell that the skill
// exists and is not theirs. The slug of a builtin is refused (skills.ErrExists)
// unless the operator re-syncs that builtin from its own source, or the skill
// of this source was installed as a -vN beside it (before builtin slugs were
// reserved) and the actor may update it.
func (c *Catalog) chooseSlug(ctx context.Context, actor skills.User, req ImportRequest, key, want string, taken map[string]bool) (string, *skills.Skill, error) {
	for n := 1; n <= maxSuffix; n++ {
		slug := want
		if n > 1 {
			slug = fmt.Sprintf("%s-v%d", want, n)
			if len(slug) > 64 {
				return "", nil, fmt.Errorf("slug %q is taken and %q is too long: %w", want, slug, skills.ErrExists)
			}
		}
		if taken[slug] {
			continue
		}
		ex, err := c.db.Skill(ctx, slug)
		if errors.Is(err, skills.ErrNotFound) {
			return slug, nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		manages := policy.Permission(actor, ex) == policy.Manage
		builtin := ex.SourceType == skills.SourceBuiltin
		switch {
		case builtin && req.Builtin && ex.Source == key:
			return slug, ex, nil // operator re-syncs a builtin from its source
		case builtin && n == 1:
			old, oldEx, err := c.sameSource(ctx, actor, req, key, want, taken)
			if err != nil || oldEx != nil {
				return old, oldEx, err // a -vN from before builtin slugs were reserved
			}
			return "", nil, reserved(actor, ex)
		case builtin:
			continue // a -vN some builtin took as its own name
		case ex.Source == key && policy.ManagesByShare(actor, ex):
			return slug, ex, nil // reinstall from the same source: new version
		case req.Replace && n == 1 && manages:
			return slug, ex, nil
		case req.Replace && n == 1 && policy.Known(actor, ex):
			return "", nil, fmt.Errorf("replace %q: %s may not manage it: %w", slug, actor.UID, skills.ErrPermission)
		}
		// Held by a skill the actor may not update, or (with --replace)
		// one the actor does not know of: the next -vN, as without
		// --replace, so that --replace tells nothing about a skill the
		// actor may not see.
	}
	return "", nil, fmt.Errorf("slug %q: every suffix up to -v%d is taken: %w", want, maxSuffix, skills.ErrExists)
}

// reserved is the refusal of an install by actor that asks for the slug of
// builtin skill b: builtin slugs are reserved, never taken by another install
// nor turned into -vN, whether the builtin is enabled or not. The builtin is
// named only to an actor who may know it (policy.Known: it is enabled, or
// the actor is an admin); to anyone else a disabled builtin does not exist,
// so the slug is only said to be reserved.
func reserved(actor skills.User, b *skills.Skill) error {
	const rename = "give the skill another name in its SKILL.md and import it again"
	if !policy.Known(actor, b) {
		return fmt.Errorf("slug %q is reserved: no install may take it; %s: %w", b.Slug, rename, skills.ErrExists)
	}
	return fmt.Errorf("slug %q is reserved by the builtin skill %q (%s): no other install may take a builtin's slug; "+
		"%s: %w", b.Slug, b.Slug, DisplayName(b.Plugin, b.Name), rename, skills.ErrExists)
}

// sameSource looks for the skill of source key among base and its -vN
// slugs, up to the first free one, as chooseSlug would settle on it: a
// skill the actor manages by explicit right (policy.ManagesByShare; a
// builtin only when re-synced as one). existing is nil when there is none.
func (c *Catalog) sameSource(ctx context.Context, actor skills.User, req ImportRequest, key, base string, taken map[string]bool) (string, *skills.Skill, error) {
	for n := 1; n <= maxSuffix; n++ {
		slug := base
		if n > 1 {
			slug = fmt.Sprintf("%s-v%d", base, n)
		}
		if taken[slug] {
			continue
		}
		ex, err := c.db.Skill(ctx, slug)
		if errors.Is(err, skills.ErrNotFound) {
			return "", nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		builtin := ex.SourceType == skills.SourceBuiltin
		if ex.Source == key && (builtin && req.Builtin || !builtin && policy.ManagesByShare(actor, ex)) {
			return slug, ex, nil
		}
	}
	return "", nil, nil
}

// defaultShare: builtins are for everyone; anything else starts private to
// whoever installed it.
func defaultShare(actor skills.User, sourceType string) skills.Share {
	if sourceType == skills.SourceBuiltin {
		return skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}
	}
	return policy.DefaultShare(actor.UID)
}
