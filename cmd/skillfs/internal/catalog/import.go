package catalog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	skillsource "skillfs/skills/source"
	"slices"
	"strings"
	"time"

	"skillfs/cmd/skillfs/internal/catalog/datadir"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/git"
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
	// and any other relative path is refused (see APISource). What it may
	// read on this machine is checked first (see checkSource): for admins
	// only, and only inside the import roots.
	API bool
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
func (r ImportRequest) where(f found) string {
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

// source is a resolved import source: a directory tree to discover skills in.
type source struct {
	root       string // directory holding the skill(s)
	key        string // provenance key: same key + same relative path ⇒ same source
	sourceType string
	ref        string
	commit     string
	worktree   string // a local git working tree: skills.WorktreeClean or WorktreeModified
	// sub is the folder of the source named with --path (or URL#ref:path),
	// as a real slash path below root ("" for all of it), and subRoot its
	// real absolute path. root stays the whole source: a skill imported
	// through a folder keeps the path, plugin, slug and links it has when
	// the whole source is imported.
	sub, subRoot string
	// only, when set, is sub: of the skills discovered in the whole
	// source, only those in it are imported.
	only     string
	warnings []string // about the source as a whole (archive entries left out), given with every skill
	// owned is set when root is the import's own copy of the source (a
	// clone, an unpacked archive), which nothing else writes: its files
	// are staged as hard links, not copied.
	owned bool
	// used is what the skills of this source staged so far hold: the
	// limits are those of the whole source, links (stored as copies)
	// included.
	used    skillsource.Usage
	cleanup func()
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
	if req.Share != nil {
		sh, err := policy.NormalizeShare(*req.Share)
		if err != nil {
			return res, err
		}
		req.Share = &sh
	}
	unlock, err := c.sharedLock()
	if err != nil {
		return res, err
	}
	defer unlock()
	sel, err := c.selectSkills(ctx, actor, req, res)
	if err != nil || sel == nil {
		return res, err
	}
	defer sel.src.cleanup()
	return res, c.install(ctx, actor, req, sel, res)
}

// selection is what a request picked from its source. The caller cleans
// up src.
type selection struct {
	src   *source
	found []found
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
		src.key = req.Origin
	}
	// Read (and namespaced) with every skill of the source, then narrowed
	// to the folder named, so that a skill gets the slug it gets when the
	// whole source is imported.
	lim := c.lim.WithDefaults()
	total := lim.MaxTotalBytes
	if req.Agents {
		total = 0 // each its own root, counted on its own
	}
	fs := readFound(stageRoot(req, src), cands, lim.MaxManifest, total)
	if src.only != "" {
		fs = slices.DeleteFunc(fs, func(f found) bool { return !inFolder(f.Rel, src.only) })
	}
	fs = ignore(fs, req.Ignore)
	if len(fs) == 0 {
		src.cleanup()
		return nil, fmt.Errorf("every skill of %q is ignored: %w", req.display(), skills.ErrNotFound)
	}
	if req.Folder != "" {
		fs = slices.DeleteFunc(fs, func(f found) bool { return f.Rel != req.Folder })
		if len(fs) == 0 {
			src.cleanup()
			return nil, fmt.Errorf("%q holds no skill in the folder %q (any more): %w", req.display(), req.Folder, skills.ErrNotFound)
		}
	}
	if len(req.Skills) > 0 {
		picked, err := pick(fs, req.Skills)
		if err != nil {
			res.Available = describe(fs)
			src.cleanup()
			return nil, fmt.Errorf("in %q: %w", req.display(), err)
		}
		fs = picked
	}
	if req.List {
		res.Available = (&importRun{c: c, actor: actor, req: req, src: src}).plan(ctx, fs)
		src.cleanup()
		return nil, nil
	}
	if len(fs) > 1 && !req.All && len(req.Skills) == 0 {
		res.Available = describe(fs)
		src.cleanup()
		names := make([]string, len(res.Available))
		for i, a := range res.Available {
			names[i] = a.Slug
		}
		return nil, fmt.Errorf("%q holds %d skills (%s): choose with --skill NAME or --all: %w",
			req.display(), len(fs), strings.Join(names, ", "), skills.ErrAmbiguous)
	}
	return &selection{src: src, found: dependencyOrder(fs)}, nil
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
	cands, warns, err := skillsource.Discover(src.root, skillsource.DefaultDiscoverDepth)
	if src.sub != "" {
		if err == nil && slices.ContainsFunc(cands, func(c skillsource.Candidate) bool { return inFolder(c.Rel, src.sub) }) {
			src.only = src.sub
		} else {
			// The whole source holds no skill of its own in the folder
			// (the folder lies inside a skill, or deeper than the search
			// goes): search the folder itself. Paths stay those of the
			// whole source.
			cands, warns, err = skillsource.Discover(src.subRoot, skillsource.DefaultDiscoverDepth)
			for i := range cands {
				cands[i].Rel = path.Join(src.sub, cands[i].Rel)
			}
		}
	}
	for _, w := range warns {
		c.log.Warn("find skills", "source", req.display(), "warning", w)
	}
	res.Warnings = append(res.Warnings, warns...)
	if err != nil {
		src.cleanup()
		if len(src.warnings) > 0 { // e.g. a SKILL.md that was a link left out
			return nil, nil, fmt.Errorf("find skills in %q: %w (%s)", req.display(), err, strings.Join(src.warnings, "; "))
		}
		return nil, nil, fmt.Errorf("find skills in %q: %w", req.display(), err)
	}
	return src, cands, nil
}

// inFolder reports whether the slash path rel is the folder dir or lies
// below it.
func inFolder(rel, dir string) bool {
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}

// agentSource lists the skills of the agents' folders as candidates; those
// that cannot be loaded at all are reported as failed, those another skill
// hides as shadowed.
func (c *Catalog) agentSource(req ImportRequest, res *ImportResult) (*source, []skillsource.Candidate, error) {
	// The home and project folders are named, not walked: only their
	// agents' skill folders are read, and each skill found there (which
	// may be a link to anywhere) is guarded before its SKILL.md is read.
	for _, p := range []string{req.AgentHome, req.Project} {
		if p != "" {
			if err := c.guardSource(p, p, false); err != nil {
				return nil, nil, err
			}
		}
	}
	list, shadowed, problems := skillsource.ScanAgentDirs(skillsource.AgentDirs(req.AgentHome, req.Project),
		func(p string) error { return c.guardSource(p, p, true) })
	for _, p := range problems {
		res.Failed = append(res.Failed, Failed{Source: "agents", Error: p})
	}
	for _, s := range shadowed {
		res.Shadowed = append(res.Shadowed, Shadowed{Source: s.Dir, Slug: s.Slug, By: s.By, Reason: s.String()})
	}
	return &source{key: "agent:", sourceType: skills.SourceUpload, cleanup: func() {}}, agentFound(list), nil
}

// resolve turns the request's source into a directory tree.
func (c *Catalog) resolve(ctx context.Context, req ImportRequest) (*source, error) {
	sub := req.Path
	switch {
	case req.API:
		req.Source = APISource(req.Source)
		if err := c.checkSource(ctx, req); err != nil {
			return nil, err
		}
	case req.recorded:
		req.Source = APISource(req.Source)
	default:
		req.Source = RemoteSource(req.Source)
	}
	// The one parse of the source as a git spec, "URL#ref:path".
	gs := git.ParseSource(req.Source)
	if _, err := req.stat(req.Source); err != nil && gs.Path != "" {
		if sub != "" && sub != gs.Path {
			return nil, fmt.Errorf("source %q names the folder %q and --path %q: choose one: %w", req.display(), gs.Path, sub, skills.ErrInvalid)
		}
		sub, gs.Path = gs.Path, ""
		req.Source = gs.Spec() // credentials and all: they are for this read
	}
	if sub != "" {
		clean, err := skills.CleanRelPath(sub)
		if err != nil {
			return nil, fmt.Errorf("source %q: folder %w", req.display(), err)
		}
		sub = clean
	}
	src, err := c.resolveTree(ctx, req, gs)
	if err != nil || sub == "" {
		return src, err
	}
	base, err := skillsource.SubRoot(src.root, "")
	if err != nil {
		src.cleanup()
		return nil, fmt.Errorf("source %q: %w", req.display(), err)
	}
	root, err := skillsource.SubRoot(src.root, sub)
	if err != nil {
		src.cleanup()
		return nil, fmt.Errorf("source %q: %w", req.display(), err)
	}
	if rel, err := filepath.Rel(base, root); err == nil && rel != "." {
		src.sub, src.subRoot = filepath.ToSlash(rel), root
	}
	return src, nil
}

// RemoteSource spells a source given by a common name of a hosted
// repository (owner/repo, github:owner/repo, a GitHub or GitLab tree URL;
// see git.ParseRemoteName) as the git source it stands for,
// "URL#ref:path". A path that exists on this machine is always that path:
// ./x, /x and ~/x are never names, and an existing folder named like
// owner/repo wins over the repository. Anything else is returned as given.
// This is the command line's rule, which has a working directory; the API's
// is APISource.
func RemoteSource(source string) string {
	if _, err := os.Lstat(source); err == nil {
		return source
	}
	if gs, ok := git.ParseRemoteName(source); ok {
		return gs.String()
	}
	return source
}

// APISource is RemoteSource for a source named through the daemon's API,
// which has no working directory: an absolute path is that path, whether
// it exists or not, and anything else that is a common name of a hosted
// repository is that repository, whatever exists on disk. Nothing is looked
// up on disk, so the answer never tells whether a path exists. Anything
// else is returned as given.
func APISource(source string) string {
	source = strings.TrimSpace(source)
	if filepath.IsAbs(source) {
		return source
	}
	if gs, ok := git.ParseRemoteName(source); ok {
		return gs.String()
	}
	return source
}

// stat is os.Stat of a path the request's source may be; through the API
// (and for a recorded source), a path that is not absolute is never looked
// up (see ImportRequest.API).
func (r ImportRequest) stat(p string) (os.FileInfo, error) {
	if (r.API || r.recorded) && !filepath.IsAbs(p) {
		return nil, fmt.Errorf("stat %s: not an absolute path: %w", p, os.ErrNotExist)
	}
	return os.Stat(p)
}

// resolveTree turns the request's source into a directory tree: the whole
// folder, archive or repository. gs is the source parsed as a git spec,
// without its folder.
func (c *Catalog) resolveTree(ctx context.Context, req ImportRequest, gs git.Source) (*source, error) {
	tmp := filepath.Join(c.home, tmpDir)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("create temporary directory: %w", err)
	}
	work, err := os.MkdirTemp(tmp, "import-")
	if err != nil {
		return nil, fmt.Errorf("create temporary directory: %w", err)
	}
	cleanup := func() { datadir.RemoveTree(work) }
	fail := func(err error) (*source, error) { cleanup(); return nil, err }

	// "PATH#ref" and "file://PATH[#ref]" name a local repository: resolve
	// them to PATH and the ref, so every spelling has one identity. Both
	// ask for git (a commit), where a plain PATH asks for the folder.
	spec := req.Source
	asGit := false
	if _, err := req.stat(spec); err != nil {
		if p := strings.TrimPrefix(gs.URL, "file://"); p != spec {
			if _, err := req.stat(p); err == nil {
				spec, asGit = p, true
				if req.Ref == "" {
					req.Ref = gs.Ref
				}
			}
		}
	}
	fi, statErr := req.stat(spec)
	local := statErr == nil
	if p := localPath(spec, local, gs); p != "" && !req.upload {
		if err := c.guardSource(req.display(), p, true); err != nil {
			return fail(err)
		}
	}
	// A local folder is read as it is on disk, working-tree edits included
	// (its commit and whether the files match it are recorded); only a ref
	// (--ref or PATH#ref), a file:// URL, or a bare repository, which has
	// no files to read, makes it a commit to clone. Either way its identity is its absolute
	// path, so every spelling of it reinstalls the same skills.
	if local && fi.IsDir() && !asGit && req.Ref == "" && !isBareRepo(spec) {
		abs, _ := filepath.Abs(spec)
		commit, state, err := git.WorktreeState(ctx, abs)
		if err != nil {
			c.log.Warn("could not tell which commit a local folder holds", "source", abs, "err", err)
		}
		return &source{root: abs, key: "local:" + abs, sourceType: skills.SourceUpload,
			commit: commit, worktree: state, cleanup: cleanup}, nil
	}
	if local && fi.IsDir() && !isRepo(spec) {
		return fail(fmt.Errorf("source %q: --ref needs a git repository, and this is a plain directory: %w", spec, skills.ErrInvalid))
	}
	if local && !fi.IsDir() {
		return c.resolveFile(spec, req.display(), work, cleanup)
	}
	if !local && !git.ParseSpec(spec).IsGit() {
		return fail(fmt.Errorf("source %q: no such file, directory or git repository: %w", req.display(), skills.ErrNotFound))
	}
	if req.Ref != "" {
		gs.Ref = req.Ref
	}
	key := "git:" + git.Source{URL: gs.URL}.String() // no credentials in provenance
	if local {
		// A repository on this machine: spec is its path, whichever way
		// the source named it (PATH, PATH#ref, file://PATH).
		abs, _ := filepath.Abs(spec)
		gs = git.Source{URL: abs, Ref: req.Ref}
		key = "local:" + abs
	}
	root := filepath.Join(work, "clone")
	commit, err := git.Clone(ctx, gs, root, git.CloneOptions{Limits: c.lim, Timeout: req.Timeout, Confine: c.objectsConfined(req)}) // a plain tree within the limits, no .git
	if err != nil {
		return fail(err)
	}
	return &source{root: root, key: key, sourceType: skills.SourceRemote, ref: gs.Ref, commit: commit, owned: true, cleanup: cleanup}, nil
}

// isRepo reports whether dir is a git working tree or a bare repository.
func isRepo(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return true
	}
	return isBareRepo(dir)
}

// isBareRepo reports whether dir is a bare git repository.
func isBareRepo(dir string) bool {
	for _, p := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return false
		}
	}
	_, err := os.Stat(filepath.Join(dir, skills.ManifestName))
	return err != nil
}

// resolveFile turns a local file source — a ZIP archive or a lone
// SKILL.md — into a tree under work. The file's type is checked on the open
// descriptor and its bytes are counted as they are read: a FIFO, a device
// such as /dev/zero or a file that keeps growing is refused, never read
// forever.
func (c *Catalog) resolveFile(spec, display, work string, cleanup func()) (*source, error) {
	fail := func(err error) (*source, error) { cleanup(); return nil, err }
	abs, _ := filepath.Abs(spec)
	f, _, err := skills.OpenRegular(spec, display, true)
	if err != nil {
		return fail(fmt.Errorf("source %s: %w", display, err))
	}
	zipped := isZip(spec, f)
	f.Close()
	if zipped {
		root := filepath.Join(work, "unpacked")
		warnings, err := skillsource.ExtractZip(spec, root, c.lim)
		if err != nil {
			return fail(fmt.Errorf("source %s: %w", display, err))
		}
		return &source{root: root, key: "zip:" + abs, sourceType: skills.SourceUpload, warnings: warnings, owned: true, cleanup: cleanup}, nil
	}
	data, err := skills.ReadManifest(spec, display, c.lim.MaxManifest, true)
	if err != nil {
		return fail(fmt.Errorf("source %s: %w", display, err))
	}
	root := filepath.Join(work, "single")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(root, skills.ManifestName), data, 0o644); err != nil {
		return fail(err)
	}
	return &source{root: root, key: "file:" + abs, sourceType: skills.SourceUpload, cleanup: cleanup}, nil
}

// isZip tells a ZIP archive by its name or its first bytes.
func isZip(path string, f io.Reader) bool {
	if strings.EqualFold(filepath.Ext(path), ".zip") {
		return true
	}
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil {
		return false
	}
	return bytes.Equal(magic, []byte("PK\x03\x04")) || bytes.Equal(magic, []byte("PK\x05\x06"))
}
