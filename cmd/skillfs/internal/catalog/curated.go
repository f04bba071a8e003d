package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"skillfs/skills"
	"skillfs/skills/git"
	skillsource "skillfs/skills/source"
	"skillfs/skills/store"
)

// Curated catalogs: sources an admin registers whose skills are offered to
// everyone (the recommended list) but readable in no session until someone
// installs one. What a source offers is read when it is added and on each
// refresh and kept in the index (name, description, folder, the commit
// read); the content is not kept: installing re-reads the source, as any
// import does, so what is installed is the source as it is then.

// CuratedRequest says which curated source to add or refresh, or which
// curated skill to install.
type CuratedRequest struct {
	Source  string        // a source as import takes it; for install, narrows the skill to this source's
	Ref     string        // add: the git ref to follow ("" for the default branch)
	Name    string        // install: the skill's slug or name
	As      string        // acting uid ("" = Operator)
	Share   *skills.Share // install: nil = the default for the actor
	Timeout time.Duration // a git source must be read within this; 0: git.DefaultCloneTimeout
	API     bool          // the source came through the daemon's API (see ImportRequest.API)
}

// curatedName is how a curated source is registered: an existing local
// path as its absolute path, a common name of a hosted repository as the
// git source it stands for (see skillsource.ExpandName), anything else as given.
// Through the API, as skillsource.ExpandNameNoWorkDir spells it.
func curatedName(source string, api bool) string {
	source = strings.TrimSpace(source)
	if api {
		return skillsource.ExpandNameNoWorkDir(source)
	}
	if _, err := os.Lstat(source); err == nil {
		if abs, err := filepath.Abs(source); err == nil {
			return abs
		}
	}
	return skillsource.ExpandName(source)
}

// curatedNames are the registered names source may stand for, found
// without looking at the disk (so the answer never tells whether a path
// exists): as given, as the repository a common name stands for, and as
// an absolute path.
func curatedNames(source string) []string {
	source = strings.TrimSpace(source)
	names := []string{source}
	if gs, ok := git.ParseRemoteName(source); ok {
		names = append(names, gs.String())
	}
	if abs, err := filepath.Abs(source); err == nil && abs != source {
		names = append(names, abs)
	}
	return names
}

// AddCurated registers a source as curated (admins only). The source is
// read first: one that cannot be read, or holds no skill, is refused and
// nothing is registered.
func (c *Catalog) AddCurated(ctx context.Context, req CuratedRequest) (*skills.CuratedSource, error) {
	actor, err := c.Actor(ctx, req.As)
	if err != nil {
		return nil, err
	}
	if err := checkAdmin(actor, false); err != nil {
		return nil, fmt.Errorf("add a curated source: %w", err)
	}
	name := curatedName(req.Source, req.API)
	if name == "" {
		return nil, fmt.Errorf("add a curated source: no source given: %w", skills.ErrInvalid)
	}
	// Every user lists curated sources: credentials in one would be shown
	// to all of them.
	if err := git.ParseSpec(name).RefuseCredentials("curated source"); err != nil {
		return nil, err
	}
	if _, err := c.curatedSource(ctx, []string{name}); err == nil {
		return nil, fmt.Errorf("%q is a curated source already (refresh it with `skillfs skill curated refresh`): %w", name, skills.ErrExists)
	}
	commit, list, err := c.readCurated(ctx, ImportRequest{Source: name, Ref: req.Ref, As: req.As, Timeout: req.Timeout, API: req.API})
	if err != nil {
		return nil, err
	}
	now := c.now().UTC()
	src := skills.CuratedSource{Source: name, Ref: strings.TrimSpace(req.Ref), AddedBy: actor.UID, AddedAt: now, Commit: commit, RefreshedAt: now}
	if err := c.db.AddCuratedSource(ctx, src, list); err != nil {
		return nil, err
	}
	c.log.Info("curated source added", "source", name, "skills", len(list), "by", actor.UID)
	return c.curatedSource(ctx, []string{name})
}

// RemoveCurated unregisters a curated source (admins only); the skills
// installed from it stay.
func (c *Catalog) RemoveCurated(ctx context.Context, as, source string) error {
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return err
	}
	if err := checkAdmin(actor, false); err != nil {
		return fmt.Errorf("remove a curated source: %w", err)
	}
	src, err := c.curatedSource(ctx, curatedNames(source))
	if err != nil {
		return err
	}
	return c.db.RemoveCuratedSource(ctx, src.Source)
}

// CuratedSources lists the curated sources; any registered user may.
func (c *Catalog) CuratedSources(ctx context.Context, as string) ([]skills.CuratedSource, error) {
	if _, err := c.Actor(ctx, as); err != nil {
		return nil, err
	}
	return c.db.CuratedSources(ctx)
}

// curatedSource finds a registered curated source by the first of names
// registered, or fails with an error wrapping skills.ErrNotFound that lists
// them.
func (c *Catalog) curatedSource(ctx context.Context, names []string) (*skills.CuratedSource, error) {
	all, err := c.db.CuratedSources(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if i := slices.IndexFunc(all, func(s skills.CuratedSource) bool { return s.Source == name }); i >= 0 {
			return &all[i], nil
		}
	}
	name := git.ParseSpec(names[0]).String()
	if len(all) == 0 {
		return nil, fmt.Errorf("%q is not a curated source: there are none (add one with `skillfs skill curated add SOURCE`): %w", name, skills.ErrNotFound)
	}
	registered := make([]string, len(all))
	for i := range all {
		registered[i] = all[i].Source
	}
	return nil, fmt.Errorf("%q is not a curated source (curated: %s): %w", name, strings.Join(registered, ", "), skills.ErrNotFound)
}

// RefreshCurated reads every curated source again (admins only), or only
// source when it is not "", and records what each offers now. A source that
// cannot be read keeps what it offered and records why; the error then
// says how many failed and wraps the first failure.
func (c *Catalog) RefreshCurated(ctx context.Context, req CuratedRequest) ([]skills.CuratedSource, error) {
	actor, err := c.Actor(ctx, req.As)
	if err != nil {
		return nil, err
	}
	if err := checkAdmin(actor, false); err != nil {
		return nil, fmt.Errorf("refresh curated sources: %w", err)
	}
	all, err := c.db.CuratedSources(ctx)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Source) != "" {
		one, err := c.curatedSource(ctx, curatedNames(req.Source))
		if err != nil {
			return nil, err
		}
		all = []skills.CuratedSource{*one}
	}
	var errs []error
	for _, src := range all {
		// Registered names are absolute paths or repositories: never read
		// relative to a working directory. Read as registered: the
		// registration (by an admin, checked then) is the grant.
		commit, list, err := c.readCurated(ctx, ImportRequest{Source: src.Source, Ref: src.Ref, Timeout: req.Timeout, recorded: true})
		if err == nil {
			err = c.db.RefreshCuratedSource(ctx, src.Source, commit, c.now().UTC(), list)
		}
		if err != nil {
			errs = append(errs, err)
			if rerr := c.db.SetCuratedError(ctx, src.Source, err.Error()); rerr != nil {
				errs = append(errs, rerr)
			}
			c.log.Warn("curated source not refreshed", "source", src.Source, "err", err)
		}
	}
	out, err := c.db.CuratedSources(ctx)
	if err != nil {
		return nil, err
	}
	out = slices.DeleteFunc(out, func(s skills.CuratedSource) bool {
		return !slices.ContainsFunc(all, func(a skills.CuratedSource) bool { return a.Source == s.Source })
	})
	if len(errs) > 0 {
		return out, fmt.Errorf("%d of %d curated sources could not be refreshed: %w", len(errs), len(all), errs[0])
	}
	return out, nil
}

// readCurated reads a source as an import would and describes each skill
// it holds; skills whose SKILL.md cannot be read are left out.
func (c *Catalog) readCurated(ctx context.Context, req ImportRequest) (string, []skills.CuratedSkill, error) {
	unlock, err := c.sharedLock()
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	src, cands, err := c.discover(ctx, req, &ImportResult{})
	if err != nil {
		return "", nil, err
	}
	defer src.Close()
	lim := c.lim.WithDefaults()
	fs := skillsource.ReadFound(stageRoot(req, src), cands, lim.MaxManifest, lim.MaxTotalBytes)
	list := []skills.CuratedSkill{}
	for _, f := range fs {
		if f.Manifest == nil || src.Sub != "" && !skillsource.InFolder(f.Rel, src.Sub) {
			continue
		}
		a := available(f)
		list = append(list, skills.CuratedSkill{Slug: a.Slug, Name: a.Name, Description: a.Description, Path: f.Rel,
			Origin: skillsource.SkillKey(src.Key, f.Candidate, false)})
	}
	if len(list) == 0 {
		return "", nil, fmt.Errorf("%q holds no skill that can be read: %w", req.display(), skills.ErrNoManifest)
	}
	return src.Commit, list, nil
}

// Curated lists the skills of curated sources the actor has not installed:
// those no skill the actor can see was installed from. Any registered user
// may list them.
func (c *Catalog) Curated(ctx context.Context, as string) ([]skills.CuratedSkill, error) {
	visible, err := c.List(ctx, as)
	if err != nil {
		return nil, err
	}
	all, err := c.db.CuratedSkills(ctx)
	if err != nil {
		return nil, err
	}
	installed := make(map[string]bool, len(visible))
	for _, s := range visible {
		installed[s.Source] = true
	}
	return slices.DeleteFunc(all, func(s skills.CuratedSkill) bool { return installed[s.Origin] }), nil
}

// InstallCurated installs a skill a curated source offers, by its slug or
// name, reading its source again; the new skill is the actor's, shared as
// req.Share says (or private to them). A skill the actor installed already
// (one they can see came from it) is refused with skills.ErrExists naming
// it; a name several curated sources offer needs req.Source.
func (c *Catalog) InstallCurated(ctx context.Context, req CuratedRequest) (*ImportResult, error) {
	res := &ImportResult{Installed: []Installed{}, Failed: []Failed{}}
	all, err := c.db.CuratedSkills(ctx)
	if err != nil {
		return res, err
	}
	name := strings.TrimSpace(req.Name)
	var from []string
	if strings.TrimSpace(req.Source) != "" {
		from = curatedNames(req.Source)
	}
	matches := slices.DeleteFunc(all, func(s skills.CuratedSkill) bool {
		return s.Slug != name && s.Name != name || from != nil && !slices.Contains(from, s.Source)
	})
	switch {
	case len(matches) == 0 && from != nil:
		return res, fmt.Errorf("curated source %q offers no skill named %q (see `skillfs skill list --curated`): %w", git.ParseSpec(from[0]).String(), name, skills.ErrNotFound)
	case len(matches) == 0:
		return res, fmt.Errorf("no curated skill is named %q (see `skillfs skill list --curated`): %w", name, skills.ErrNotFound)
	case len(matches) > 1:
		where := make([]string, len(matches))
		for i, m := range matches {
			where[i] = m.Source + " (" + m.Path + ")"
		}
		return res, fmt.Errorf("%q is offered by %d curated skills: %s; choose one with --source SOURCE: %w",
			name, len(matches), strings.Join(where, ", "), skills.ErrAmbiguous)
	}
	cs := matches[0]
	visible, err := c.List(ctx, req.As)
	if err != nil {
		return res, err
	}
	if i := slices.IndexFunc(visible, func(s *skills.Skill) bool { return s.Source == cs.Origin }); i >= 0 {
		return res, fmt.Errorf("curated skill %q is installed already as %q (to update it, whoever manages it imports its source again: `skillfs skill import %s --skill %s`): %w",
			name, visible[i].Slug, cs.Source, cs.Path, skills.ErrExists)
	}
	// Read at its curated ref, as registered: the registration (by an
	// admin, checked then) is the grant, also for a user who may not
	// draft the source (see checkSource).
	res, err = c.Import(ctx, ImportRequest{Source: cs.Source, Ref: cs.Ref, Folder: cs.Path, As: req.As, Share: req.Share, Timeout: req.Timeout, recorded: true})
	if err != nil || len(res.Installed) != 1 {
		return res, err
	}
	in := res.Installed[0]
	if v, verr := c.db.Version(ctx, in.Slug, in.Version); verr == nil && cs.Commit != "" && v.Commit != "" && v.Commit != cs.Commit {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the source changed since the curated list was refreshed: installed from commit %s, the list shows commit %s",
			store.ShortHash(v.Commit), store.ShortHash(cs.Commit)))
	} else if verr != nil && !errors.Is(verr, skills.ErrNotFound) {
		c.log.Warn("read installed version", "slug", in.Slug, "err", verr)
	}
	c.log.Info("curated skill installed", "slug", in.Slug, "source", cs.Source, "path", cs.Path)
	return res, nil
}
