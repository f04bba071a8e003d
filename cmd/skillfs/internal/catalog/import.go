package catalog

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/git"
	skillsource "skillfs/skills/source"
)

// ImportRequest says what to import and how.
type ImportRequest struct {
	Source  string        // directory, ZIP, SKILL.md, git URL or local repository
	Display string        // how messages name the source when Source is a temporary copy (an upload)
	Ref     string        // git ref; also accepted as Source "URL#ref"
	Path    string        // import only from this folder of the source; also accepted as Source "URL#ref:path"
	Skills  []string      // pick these skills (folder name, slug, name or path; globs allowed) from a multi-skill source
	Folder  string        // pick the one skill whose folder in the source is this slash path, exactly ("." for the root)
	Ignore  []string      // leave out the skills these globs match (folder name, slug, name or path)
	All     bool          // import every skill the source holds
	List    bool          // only list what the source holds
	As      string        // acting uid ("" = Operator)
	Share   *skills.Share // nil = default for the actor (private to them; global for builtins)
	Replace bool          // a manager makes this a new version of the skill holding the slug
	Builtin bool          // register as a builtin (system) skill
	Origin  string        // provenance key overriding the one derived from Source (stable across re-syncs)
	Timeout time.Duration // a git source must be read within this; 0: git.DefaultCloneTimeout
	// API marks a source named through the daemon's API, which has no
	// working directory: only an absolute path (or a file:// URL) names
	// something on this machine, a name is never looked up on disk first,
	// and any other relative path is refused (see
	// skillsource.ExpandNameNoWorkDir). What it may read on this machine is
	// checked first (see checkSource): for admins only, and only inside the
	// import roots.
	API bool
	// RemoteOnly refuses a source on this machine, whoever asks: a
	// session's install reads a path in its sandbox, never one of the
	// daemon's (see checkSpec).
	RemoteOnly bool
	// Remote, when set, is what a clone of a git source may read: a
	// session's install reads only hosts on the internet, or those the
	// operator allows (see git.RemotePolicy).
	Remote *git.RemotePolicy
	// Vet, when set, is asked under the publish lock before a skill is
	// published (a new skill, or a new version of existing): its slug and
	// the bytes of its content. An error refuses that skill; nothing of it
	// is published. A session's install checks its user's quotas here.
	Vet func(ctx context.Context, slug string, existing *skills.Skill, bytes int64) error
	// upload marks Source as the catalog's own copy of an upload in its
	// temporary area (see PrepareUpload): the one local source inside the
	// data directory that is read.
	upload bool
	// recorded marks a source the catalog recorded (a curated source, the
	// provenance of an installed skill): read as the API reads a name,
	// absolute paths and URLs only, with no check of its own; whoever
	// asked for the read was checked for it (or is the operator at a
	// shell), or the source is curated, which is its registration's grant.
	recorded bool
	// inRoots marks a recorded source read for a request through the API
	// that was checked as one (an update): what it reads on this machine
	// stays inside the import roots, as for API (see objectsConfined).
	inRoots bool

	// Agents imports from the skill folders of agents on this machine
	// instead of Source: AgentHome's and Project's skills folders of
	// Claude Code, Codex, OpenCode and the shared .agents convention, in
	// skillsource.AgentDirs precedence (personal before project).
	Agents    bool
	AgentHome string
	Project   string
}

// display is the name of the source in messages, answers and logs, with
// any credentials in its URL hidden (see git.Spec.String).
func (r ImportRequest) display() string {
	if r.Display != "" {
		return r.Display
	}
	return git.ParseSpec(r.Source).String()
}

// where names a skill of the request's source in messages: the source as
// the user gave it, then the skill's folder in it; for the agents' folders,
// the skill's folder.
func (r ImportRequest) where(f skillsource.Found) string {
	switch {
	case r.Agents:
		return f.Dir
	case f.Rel != ".":
		return r.display() + "//" + f.Rel
	}
	return r.display()
}

// Installed is one skill an import published (or found unchanged).
type Installed struct {
	Slug     string   `json:"slug"`
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	Warnings []string `json:"warnings"`
	// RenamedFrom is the slug the skill asked for when a skill the
	// importer may not update holds it (another source's, or one of the
	// same source the importer does not manage by explicit right): this
	// one became a new skill, Slug, and Note says how to update the other
	// instead.
	RenamedFrom string `json:"renamed_from,omitempty"`
	Note        string `json:"note,omitempty"`
	// Previous is the version that was current before (a rollback).
	Previous string `json:"previous,omitempty"`
	// Readable is who may read the skill now, as a share scope (global,
	// department:IDS, user:UIDS): a skill private to its importer is not in
	// other users' sessions until it is shared.
	Readable string `json:"readable,omitempty"`
}

// Failed is one skill of a source that could not be imported.
type Failed struct {
	Source string `json:"source"`
	Error  string `json:"error"`
}

// Shadowed is a skill of an agent folder that was not imported because
// another with the same slug takes precedence, as in the agents themselves.
type Shadowed struct {
	Source string `json:"source"` // the folder left out
	Slug   string `json:"slug"`
	By     string `json:"by"`     // the folder of the skill that wins
	Reason string `json:"reason"` // both, with the agent folders they are in
}

// Available is a skill a source holds: what --list shows, and what a
// source holding several skills offers when none was chosen.
type Available struct {
	Name        string `json:"name"`
	Slug        string `json:"slug"`
	Description string `json:"description"`
	Path        string `json:"path"`
	Plugin      string `json:"plugin,omitempty"`
	// With --list: what importing it would do (Status*), the warnings it
	// would get, or why it would be refused.
	Status   string   `json:"status,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// available describes a skill a source holds for a listing.
func available(f skillsource.Found) Available {
	a := Available{Name: f.Name, Slug: f.Slug(), Path: f.Rel, Plugin: f.Plugin}
	if f.Manifest != nil {
		a.Name, a.Description = skills.DisplayName(f.Plugin, f.Manifest.Name), f.Manifest.Description
	}
	if f.Err != nil {
		a.Status, a.Error = StatusRefused, f.Err.Error()
	}
	return a
}

// describe describes the skills a source holds for a listing.
func describe(fs []skillsource.Found) []Available {
	out := make([]Available, len(fs))
	for i, f := range fs {
		out[i] = available(f)
	}
	return out
}

// What importing a skill would do, as --list reports it.
const (
	StatusInstall   = "install"   // a new skill
	StatusUpdate    = "update"    // a new version of a skill installed from this source
	StatusUnchanged = "unchanged" // the same content is installed already
	StatusRefused   = "refused"   // it cannot be installed: Error says why
)

// ImportResult is what an import did. Its JSON form is part of the CLI contract.
type ImportResult struct {
	Installed []Installed `json:"installed"`
	Failed    []Failed    `json:"failed"`
	Shadowed  []Shadowed  `json:"shadowed,omitempty"`
	Warnings  []string    `json:"warnings,omitempty"` // about the source as a whole: plugin entries skipped, a search cut short
	Available []Available `json:"available,omitempty"`
}

// source is a resolved import source, a tree to discover skills in, and
// what the skills staged from it so far hold (used): the limits are those
// of the whole source, links (stored as copies) included.
type source struct {
	skillsource.Tree
	used skillsource.Usage
}

// Import runs an import request. Per-skill failures land in the result's
// Failed list; an error is returned when the source itself cannot be read,
// when a multi-skill source needs --skill/--all, or when nothing installed.
func (c *Catalog) Import(ctx context.Context, req ImportRequest) (*ImportResult, error) {
	res := &ImportResult{Installed: []Installed{}, Failed: []Failed{}}
	actor, err := c.Actor(ctx, req.As)
	if err != nil {
		return res, err
	}
	if req.Builtin {
		if err := policy.CheckInstallBuiltin(actor); err != nil {
			return res, err
		}
	}
	unlock, err := c.sharedLock()
	if err != nil {
		return res, err
	}
	defer unlock()
	return res, c.importAs(ctx, actor, req, res)
}

// importAs does Import's work for actor; the caller holds the import lock
// shared and checked the request.
func (c *Catalog) importAs(ctx context.Context, actor skills.User, req ImportRequest, res *ImportResult) error {
	if req.Share != nil {
		sh, err := policy.NormalizeShare(*req.Share)
		if err != nil {
			return err
		}
		req.Share = &sh
	}
	sel, err := c.selectSkills(ctx, actor, req, res)
	if err != nil || sel == nil {
		return err
	}
	defer sel.src.Close()
	return c.install(ctx, actor, req, sel, res)
}

// selection is what a request picked from its source. The caller cleans
// up src.
type selection struct {
	src   *source
	found []skillsource.Found
}

// selectSkills resolves the request's source and picks its skills. With
// --list it fills res.Available with what importing each would do and
// returns no selection; a source holding several skills needs --skill or
// --all.
func (c *Catalog) selectSkills(ctx context.Context, actor skills.User, req ImportRequest, res *ImportResult) (*selection, error) {
	src, cands, err := c.discover(ctx, req, res)
	if err != nil {
		return nil, err
	}
	if req.Origin != "" {
		src.Key = req.Origin
	}
	// Read (and namespaced) with every skill of the source, then narrowed
	// to the folder named, so that a skill gets the slug it gets when the
	// whole source is imported.
	lim := c.lim.WithDefaults()
	total := lim.MaxTotalBytes
	if req.Agents {
		total = 0 // each its own root, counted on its own
	}
	fs := skillsource.ReadFound(stageRoot(req, src), cands, lim.MaxManifest, total)
	if src.Sub != "" {
		fs = slices.DeleteFunc(fs, func(f skillsource.Found) bool { return !skillsource.InFolder(f.Rel, src.Sub) })
	}
	fs = skillsource.Ignore(fs, req.Ignore)
	if len(fs) == 0 {
		src.Close()
		return nil, fmt.Errorf("every skill of %q is ignored: %w", req.display(), skills.ErrNotFound)
	}
	if req.Folder != "" {
		fs = slices.DeleteFunc(fs, func(f skillsource.Found) bool { return f.Rel != req.Folder })
		if len(fs) == 0 {
			src.Close()
			return nil, fmt.Errorf("%q holds no skill in the folder %q (any more): %w", req.display(), req.Folder, skills.ErrNotFound)
		}
	}
	if len(req.Skills) > 0 {
		picked, err := skillsource.Pick(fs, req.Skills)
		if err != nil {
			res.Available = describe(fs)
			src.Close()
			return nil, fmt.Errorf("in %q: %w", req.display(), err)
		}
		fs = picked
	}
	if req.List {
		res.Available = (&importRun{c: c, actor: actor, req: req, src: src}).plan(ctx, fs)
		src.Close()
		return nil, nil
	}
	if len(fs) > 1 && !req.All && len(req.Skills) == 0 {
		res.Available = describe(fs)
		src.Close()
		names := make([]string, len(res.Available))
		for i, a := range res.Available {
			names[i] = a.Slug
		}
		return nil, fmt.Errorf("%q holds %d skills (%s): choose with --skill NAME or --all: %w",
			req.display(), len(fs), strings.Join(names, ", "), skills.ErrAmbiguous)
	}
	return &selection{src: src, found: skillsource.DependencyOrder(fs)}, nil
}

// discover resolves the request's source and finds the skills it holds.
func (c *Catalog) discover(ctx context.Context, req ImportRequest, res *ImportResult) (*source, []skillsource.Candidate, error) {
	if req.Agents {
		src, cands, err := c.agentSource(req, res)
		if err != nil {
			return nil, nil, err
		}
		if len(cands) == 0 {
			return nil, nil, fmt.Errorf("no skills found in the agent folders of %q and %q: %w", req.AgentHome, req.Project, skills.ErrNoManifest)
		}
		return src, cands, nil
	}
	src, err := c.resolve(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	cands, warns, err := src.Discover()
	for _, w := range warns {
		c.log.Warn("find skills", "source", req.display(), "warning", w)
	}
	res.Warnings = append(res.Warnings, warns...)
	if err != nil {
		src.Close()
		if len(src.Warnings) > 0 { // e.g. a SKILL.md that was a link left out
			return nil, nil, fmt.Errorf("find skills in %q: %w (%s)", req.display(), err, strings.Join(src.Warnings, "; "))
		}
		return nil, nil, fmt.Errorf("find skills in %q: %w", req.display(), err)
	}
	return src, cands, nil
}

// agentSource lists the skills of the agents' folders as candidates; those
// that cannot be loaded at all are reported as failed, those another skill
// hides as shadowed.
func (c *Catalog) agentSource(req ImportRequest, res *ImportResult) (*source, []skillsource.Candidate, error) {
	// The home and project folders are named, not walked: only their
	// agents' skill folders are read, and each skill found there (which
	// may be a link to anywhere) is guarded before its SKILL.md is read.
	// One fence for the whole scan: it measures the data directory and the
	// index once, not once for each skill found.
	fence := c.sourceFence()
	for _, p := range []string{req.AgentHome, req.Project} {
		if p != "" {
			if err := fence.Check(p, p, false); err != nil {
				return nil, nil, err
			}
		}
	}
	list, shadowed, problems := skillsource.ScanAgentDirs(skillsource.AgentDirs(req.AgentHome, req.Project),
		func(p string) error { return fence.Check(p, p, true) })
	for _, p := range problems {
		res.Failed = append(res.Failed, Failed{Source: "agents", Error: p})
	}
	for _, s := range shadowed {
		res.Shadowed = append(res.Shadowed, Shadowed{Source: s.Dir, Slug: s.Slug, By: s.By, Reason: s.String()})
	}
	return &source{Tree: skillsource.Tree{Key: "agent:", Type: skills.SourceUpload}}, skillsource.AgentCandidates(list), nil
}

// resolve turns the request's source into a directory tree, under the
// catalog's policy: a source named through the API is checked first (see
// checkSource), every local path it names is fenced (see guardSource) but
// the catalog's own copy of an upload, and what a read of a repository
// takes objects from is confined (see objectsConfined).
func (c *Catalog) resolve(ctx context.Context, req ImportRequest) (*source, error) {
	opts := skillsource.ResolveOptions{TempDir: filepath.Join(c.home, tmpDir), Limits: c.lim, Timeout: req.Timeout,
		Ref: req.Ref, Path: req.Path, Display: req.Display, NoWorkDir: req.API || req.recorded,
		Confine: c.objectsConfined(req), Remote: req.Remote, Log: c.log}
	if req.API {
		opts.Check = func(spec git.Spec) error {
			req.Source = spec.Given
			return c.checkSpec(ctx, req, spec)
		}
	}
	if !req.upload {
		opts.Guard = func(display, p string) error { return c.guardSource(display, p, true) }
	}
	t, err := skillsource.Resolve(ctx, req.Source, opts)
	if err != nil {
		return nil, err
	}
	return &source{Tree: *t}, nil
}
