package catalog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/diff"
	"skillfs/skills/git"
	skillsource "skillfs/skills/source"
	"skillfs/skills/store"
)

// UpdateRequest asks to re-read the recorded sources of skills.
type UpdateRequest struct {
	As     string
	Slugs  []string
	All    bool   // every skill the actor manages
	DryRun bool   // say what would change, install nothing
	Force  bool   // install what the source holds also when the skill is held (see UpdateHeld)
	Ref    string // read this git ref (a newer tag, another branch) instead of the one recorded
	// API marks an update asked for through the daemon's API: each source
	// is checked as a draft of it would be, under today's rules (see
	// updateSource).
	API bool
	// Timeout bounds the reading of each git source; 0:
	// git.DefaultCloneTimeout.
	Timeout time.Duration
}

// UpdateRef is the ref an update reads given --ref and --tag: at most
// one of them; a tag is looked for among the tags only.
func UpdateRef(ref, tag string) (string, error) {
	switch {
	case ref != "" && tag != "":
		return "", fmt.Errorf("give --ref or --tag, not both: %w", skills.ErrInvalid)
	case tag != "":
		return "refs/tags/" + tag, nil
	}
	return ref, nil
}

// What updating a skill did (or, with DryRun, would do).
const (
	UpdateUnchanged = "unchanged"    // its source holds the current version
	UpdateUpdated   = "updated"      // a new version was installed
	UpdateAvailable = "would_update" // DryRun: the source holds something else
	UpdateFailed    = "failed"       // Error says why
	UpdateHeld      = "held"         // the source holds a version it delivered before, not the current one: installed only with Force; Note says why
	UpdateNoSource  = "no_source"    // builtin, uploaded archive or file: nothing to re-read
)

// Updated is what updating one skill did. Its JSON form is part of the CLI
// contract.
type Updated struct {
	Slug     string     `json:"slug"`
	Status   string     `json:"status"`
	Source   string     `json:"source,omitempty"` // the recorded source, as import keys it
	Ref      string     `json:"ref,omitempty"`    // the git ref read
	Commit   string     `json:"commit,omitempty"` // the commit read
	From     string     `json:"from,omitempty"`   // the current version before
	To       string     `json:"to,omitempty"`     // the version the source holds
	DiffStat *diff.Stat `json:"diffstat,omitempty"`
	Error    string     `json:"error,omitempty"`
	Note     string     `json:"note,omitempty"` // why a skill is held
	Warnings []string   `json:"warnings,omitempty"`
}

// UpdateResult is what an update did, skill by skill in slug order.
type UpdateResult struct {
	DryRun bool      `json:"dry_run"`
	Skills []Updated `json:"skills"`
}

// Failed counts the skills that could not be updated.
func (r *UpdateResult) Failed() int {
	n := 0
	for _, u := range r.Skills {
		if u.Status == UpdateFailed {
			n++
		}
	}
	return n
}

// Update re-reads the recorded source of each skill asked for (git: the
// ref it was last installed from, or req.Ref; a local folder: as it is on
// disk) and installs what changed as a new version, as a reimport from
// the same source would. A skill whose source still holds a version it
// delivered before, while the skill's current version is another (a
// rollback or an edit since), is held: nothing is installed unless
// req.Force. Skills the actor may not see are not found, and
// a named one it may see but not edit is skills.ErrPermission, both for
// the whole request; --all takes only what the actor manages. One whose
// source cannot be read fails on its own and the others go on.
func (c *Catalog) Update(ctx context.Context, req UpdateRequest) (*UpdateResult, error) {
	res := &UpdateResult{DryRun: req.DryRun, Skills: []Updated{}}
	actor, err := c.Actor(ctx, req.As)
	if err != nil {
		return res, err
	}
	var targets []*skills.Skill
	switch {
	case req.All && len(req.Slugs) > 0:
		return res, fmt.Errorf("give either skills or all, not both: %w", skills.ErrInvalid)
	case req.All:
		all, err := c.db.Skills(ctx)
		if err != nil {
			return res, err
		}
		for _, s := range all {
			if policy.Permission(actor, s) == policy.Manage && s.SourceType != skills.SourceBuiltin {
				targets = append(targets, s)
			}
		}
	case len(req.Slugs) == 0:
		return res, fmt.Errorf("name the skills to update, or all: %w", skills.ErrInvalid)
	default:
		for _, slug := range dedupe(req.Slugs) {
			_, s, err := c.lookup(ctx, req.As, slug)
			if err != nil {
				return res, err
			}
			// A skill the actor sees but may not change refuses the
			// whole request, as rollback does; a builtin is answered
			// below as having no source to update from.
			if s.SourceType != skills.SourceBuiltin {
				if err := policy.CheckEdit(actor, s); err != nil {
					return res, fmt.Errorf("update: %w", err)
				}
			}
			targets = append(targets, s)
		}
	}
	unlock, err := c.sharedLock()
	if err != nil {
		return res, err
	}
	defer unlock()
	// What each reads, checked before anything is read: a named skill
	// whose source the actor may not have read refuses the whole request,
	// as a draft of that source is refused.
	plans := make([]updatePlan, len(targets))
	for i, s := range targets {
		plans[i] = c.planUpdate(ctx, actor, req, s)
		if plans[i].err != nil && !req.All {
			return res, fmt.Errorf("update %s: %w", s.Slug, plans[i].err)
		}
	}
	budget := c.diffBudget() // what comparing may take, for all the skills together
	for i, s := range targets {
		res.Skills = append(res.Skills, c.updateOne(ctx, actor, req, s, plans[i], budget))
	}
	return res, nil
}

// updatePlan is what updating one skill reads: read, its recorded source
// as rs names it; none when it has nothing to read again; err when it may
// not be read.
type updatePlan struct {
	read ImportRequest
	rs   skillsource.Recorded
	none bool
	err  error
}

// planUpdate says what updating s reads (see updateSource).
func (c *Catalog) planUpdate(ctx context.Context, actor skills.User, req UpdateRequest, s *skills.Skill) updatePlan {
	rs, ok := skillsource.ParseSkillKey(s.Source)
	if s.SourceType == skills.SourceBuiltin || !ok {
		return updatePlan{none: true}
	}
	read, err := c.updateSource(ctx, actor, req, s, rs)
	return updatePlan{read: read, rs: rs, err: err}
}

// updateSource is what updating s reads: its recorded source, at req.Ref
// or else the ref it was last read at. Through the API the source is
// checked as a new draft of it would be (checkSource), under the rules of
// today, not those of its install: the actor's role, the import roots,
// where git's URL rewrites send it now. A skill installed from a curated
// source that the actor may not read directly (could not draft) follows
// that source as curated today: its curated ref, and no other; a ref the
// actor names that is not that one is refused as the draft would be.
func (c *Catalog) updateSource(ctx context.Context, actor skills.User, req UpdateRequest, s *skills.Skill, rs skillsource.Recorded) (ImportRequest, error) {
	// A recorded source is read as the daemon reads one: never relative to
	// a working directory (recorded paths are absolute).
	read := ImportRequest{Source: rs.Base, Path: rs.Rel, Ref: req.Ref, As: actor.UID, Timeout: req.Timeout, recorded: true}
	refused := error(nil)
	if req.API {
		refused = c.checkSource(ctx, ImportRequest{Source: rs.Base, As: actor.UID, API: true})
	}
	if refused == nil {
		read.inRoots = req.API
		if read.Ref == "" {
			ref, err := c.recordedRef(ctx, s)
			if err != nil {
				return read, err
			}
			read.Ref = ref
		}
		return read, nil
	}
	cs, ok, err := c.curatedOrigin(ctx, s.Source)
	if err != nil {
		return read, err
	}
	if !ok {
		return read, refused
	}
	ref := curatedRef(cs)
	if req.Ref != "" && req.Ref != ref {
		return read, fmt.Errorf("%w (it follows its curated source at %s)", refused, describeRef(ref))
	}
	read.Ref = ref
	return read, nil
}

// curatedOrigin finds the skill a curated source offers today whose
// install has the provenance key origin.
func (c *Catalog) curatedOrigin(ctx context.Context, origin string) (skills.CuratedSkill, bool, error) {
	all, err := c.db.CuratedSkills(ctx)
	if err != nil {
		return skills.CuratedSkill{}, false, err
	}
	for _, cs := range all {
		if cs.Origin == origin {
			return cs, true, nil
		}
	}
	return skills.CuratedSkill{}, false, nil
}

// curatedRef is the ref a curated skill's source is read at: its curated
// ref, or the one its source names ("URL#ref"), "" for the default branch
// (or a folder as on disk).
func curatedRef(cs skills.CuratedSkill) string {
	if cs.Ref != "" {
		return cs.Ref
	}
	return git.ParseSource(cs.Source).Ref
}

// describeRef names a ref in messages.
func describeRef(ref string) string {
	if ref == "" {
		return "its default branch (or, a folder, as it is on disk)"
	}
	return fmt.Sprintf("ref %q", ref)
}

// dedupe is in without repeats, in order.
func dedupe(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// updateOne updates one skill; what it did, or why it could not, is in
// the answer.
func (c *Catalog) updateOne(ctx context.Context, actor skills.User, req UpdateRequest, s *skills.Skill, plan updatePlan, budget *diff.Budget) Updated {
	u := Updated{Slug: s.Slug, Source: s.Source, From: s.Version}
	fail := func(err error) Updated {
		u.Status, u.Error = UpdateFailed, err.Error()
		c.log.Info("update failed", "slug", s.Slug, "err", err)
		return u
	}
	if plan.none {
		u.Status = UpdateNoSource
		u.Error = "no source to update from: " + noSourceReason(s)
		return u
	}
	if err := policy.CheckEdit(actor, s); err != nil {
		return fail(fmt.Errorf("update: %w", err))
	}
	if plan.err != nil {
		return fail(plan.err)
	}
	u.Ref = plan.read.Ref
	src, f, err := c.findRecorded(ctx, plan.read, plan.rs)
	if err != nil {
		return fail(err)
	}
	defer src.Close()
	u.Commit = src.Commit
	staging, err := c.store.NewStaging()
	if err != nil {
		return fail(err)
	}
	defer skills.RemoveTree(staging) // a no-op once published
	st, err := (&importRun{c: c, actor: actor, req: plan.read, src: src}).stage(f, staging)
	if err != nil {
		return fail(err)
	}
	// The skill keeps its slug and its recorded source, however the
	// source is spelled now.
	st.slug, st.origin, st.prov.Source = s.Slug, s.Source, s.Source
	if err := st.writeSlug(); err != nil {
		return fail(err)
	}
	u.Warnings = api.NonNil(append(src.Warnings, st.warnings...))
	if err := st.hashTree(); err != nil {
		return fail(err)
	}
	u.To = st.hash
	if st.hash == s.Version {
		u.Status = UpdateUnchanged
		return u
	}
	held := false
	if !req.Force {
		if held, err = c.deliveredBefore(ctx, s, st.hash); err != nil {
			return fail(err)
		}
	}
	stat, err := c.stagedStat(ctx, s, st.dir, budget)
	if err != nil {
		return fail(err)
	}
	u.DiffStat = &stat
	if held {
		u.Status = UpdateHeld
		u.Note = fmt.Sprintf("the source still holds %s, a version it delivered before: the current version differs "+
			"from the source's by a rollback or an edit (or the source went back to older content); --force installs the source's again", store.ShortHash(st.hash))
		return u
	}
	if req.DryRun {
		u.Status = UpdateAvailable
		return u
	}
	from, err := c.publishUpdate(ctx, req, s, st, stat)
	if err != nil {
		return fail(err)
	}
	u.From, u.Status = from, UpdateUpdated
	return u
}

// stagedStat is the diffstat of the staged tree dir against the current
// version of s.
func (c *Catalog) stagedStat(ctx context.Context, s *skills.Skill, dir string, budget *diff.Budget) (diff.Stat, error) {
	var stat diff.Stat
	current, err := c.versionDir(ctx, s.Slug, s.Version)
	if err != nil {
		return stat, err
	}
	err = c.compare(ctx, current, dir, false, budget, nil, func(fc *diff.FileChange) error {
		stat.Add(fc)
		return nil
	})
	return stat, err
}

// publishUpdate publishes st, staged from the recorded source of s, as the
// skill's new version, unless its source changed meanwhile; from is the
// version it replaced, and stat, when it is against that one, is kept for
// `skill versions`.
func (c *Catalog) publishUpdate(ctx context.Context, req UpdateRequest, s *skills.Skill, st *staged, stat diff.Stat) (from string, err error) {
	unlock, err := c.publishLock()
	if err != nil {
		return "", err
	}
	defer unlock()
	existing, err := c.db.Skill(ctx, s.Slug) // it may have changed meanwhile
	if err != nil {
		return "", err
	}
	if existing.Source != s.Source {
		return "", fmt.Errorf("its source changed meanwhile (now %s): run the update again: %w", existing.Source, skills.ErrExists)
	}
	st.existing, st.plugin = existing, existing.Plugin
	if _, err := st.Publish(ctx); err != nil {
		return "", err
	}
	// What `skill versions` shows for the new version (not for one --force
	// made current again: it keeps the version it first replaced).
	// Only a complete one (see Versions).
	if !req.Force && existing.Version == s.Version && stat.NotCompared == 0 {
		c.keepStat(ctx, s.Slug, index.DiffStatKey{Hash: st.hash, Against: s.Version}, stat)
	}
	c.log.Info("skill updated", "slug", s.Slug, "from", existing.Version, "to", st.hash, "source", s.Source)
	return existing.Version, nil
}

// noSourceReason says why a skill cannot be updated from its source.
func noSourceReason(s *skills.Skill) string {
	switch {
	case s.SourceType == skills.SourceBuiltin:
		return "a builtin skill follows the daemon's own copy"
	case strings.HasPrefix(s.Source, "zip:"), strings.HasPrefix(s.Source, "file:"):
		return "it was installed from an archive or a lone SKILL.md; import the new one with --replace"
	case strings.HasPrefix(s.Source, "agent:"):
		return "it was installed from an agent's skill folder; import it again with --agents"
	}
	return fmt.Sprintf("its source %q cannot be read again; import the new content with --replace", s.Source)
}

// deliveredBefore reports whether hash is a version s has from its
// recorded source (not an edit's or another source's).
func (c *Catalog) deliveredBefore(ctx context.Context, s *skills.Skill, hash string) (bool, error) {
	vs, err := c.db.Versions(ctx, s.Slug)
	if err != nil {
		return false, err
	}
	for _, v := range vs {
		if v.Hash == hash && v.Source == s.Source {
			return true, nil
		}
	}
	return false, nil
}

// recordedRef is the git ref the skill's newest version from its source
// was read at ("" for the default branch, or a local folder as on disk).
func (c *Catalog) recordedRef(ctx context.Context, s *skills.Skill) (string, error) {
	vs, err := c.db.Versions(ctx, s.Slug)
	if err != nil {
		return "", err
	}
	for _, v := range vs {
		if v.Source == s.Source {
			return v.Ref, nil
		}
	}
	return "", nil
}

// findRecorded reads the source again and finds the skill's folder in it.
// The caller cleans up the source.
func (c *Catalog) findRecorded(ctx context.Context, req ImportRequest, rs skillsource.Recorded) (*source, skillsource.Found, error) {
	src, cands, err := c.discover(ctx, req, &ImportResult{})
	if err != nil {
		return nil, skillsource.Found{}, err
	}
	rel := rs.Rel
	if rel == "" {
		rel = "."
	}
	lim := c.lim.WithDefaults()
	for _, f := range skillsource.ReadFound(stageRoot(req, src), cands, lim.MaxManifest, lim.MaxTotalBytes) {
		if f.Rel != rel {
			continue
		}
		if f.Err != nil {
			src.Close()
			return nil, skillsource.Found{}, f.Err
		}
		return src, f, nil
	}
	src.Close()
	where := rs.Base
	if rs.Rel != "" {
		where += "//" + rs.Rel
	}
	return nil, skillsource.Found{}, fmt.Errorf("the source holds no skill at %s any more: %w", where, skills.ErrNotFound)
}
