package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"skillfs/policy"
	"skillfs/skills"
)

// ImportRequest says what to import and how.
type ImportRequest struct {
	Source  string        // directory, ZIP, SKILL.md, git URL or local repository
	Display string        // how messages name the source when Source is a temporary copy (an upload)
	Ref     string        // git ref; also accepted as Source "URL#ref"
	Path    string        // import only from this folder of the source; also accepted as Source "URL#ref:path"
	Skills  []string      // pick these skills (folder name, slug, name or path; globs allowed) from a multi-skill source
	Ignore  []string      // leave out the skills these globs match (folder name, slug, name or path)
	All     bool          // import every skill the source holds
	List    bool          // only list what the source holds
	As      string        // acting uid ("" = Operator)
	Share   *skills.Share // nil = default for the actor (private to them; global for builtins)
	Replace bool          // a manager replaces a same-slug skill from another source
	Builtin bool          // register as a builtin (system) skill
	Origin  string        // provenance key overriding the one derived from Source (stable across re-syncs)

	// Agents imports from the skill folders of agents on this machine
	// instead of Source: AgentHome's and Project's .claude/skills,
	// .agents/skills and .codex/skills, in skills.AgentDirs precedence.
	// Their SKILL.md files are parsed leniently.
	Agents    bool
	AgentHome string
	Project   string
}

// display is the name of the source in messages.
func (r ImportRequest) display() string {
	if r.Display != "" {
		return r.Display
	}
	return r.Source
}

// Installed is one skill an import published (or found unchanged).
type Installed struct {
	Slug     string   `json:"slug"`
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	Warnings []string `json:"warnings"`
}

// Failed is one skill of a source that could not be imported.
type Failed struct {
	Source string `json:"source"`
	Error  string `json:"error"`
}

// Available is a skill a source holds (for --list).
type Available struct {
	Name        string `json:"name"`
	Slug        string `json:"slug"`
	Description string `json:"description"`
	Path        string `json:"path"`
}

// ImportResult is what an import did. Its JSON form is part of the CLI contract.
type ImportResult struct {
	Installed []Installed `json:"installed"`
	Failed    []Failed    `json:"failed"`
	Available []Available `json:"available,omitempty"`
}

// source is a resolved import source: a directory tree to discover skills in.
type source struct {
	root       string // directory holding the skill(s)
	key        string // provenance key: same key + same relative path ⇒ same source
	sourceType string
	ref        string
	commit     string
	worktree   string   // a local git working tree: skills.WorktreeClean or WorktreeModified
	sub        string   // the folder of the source root is in, when one was named ("" for all of it)
	warnings   []string // about the source as a whole (archive entries left out), given with every skill
	cleanup    func()
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
	sel, err := c.selectSkills(ctx, req, res)
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
	cands []skills.Candidate
	mode  skills.Mode
}

// selectSkills resolves the request's source and picks its skills. With
// --list it fills res.Available and returns no selection; a source holding
// several skills needs --skill or --all.
func (c *Catalog) selectSkills(ctx context.Context, req ImportRequest, res *ImportResult) (*selection, error) {
	var src *source
	var cands []skills.Candidate
	var err error
	mode := skills.Strict
	if req.Agents {
		mode = skills.Lenient
		src, cands = c.agentSource(req, res)
		if len(cands) == 0 {
			return nil, fmt.Errorf("no skills found in the agent folders of %q and %q: %w", req.AgentHome, req.Project, skills.ErrNoManifest)
		}
	} else {
		src, err = c.resolve(ctx, req)
		if err != nil {
			return nil, err
		}
		var warns []string
		cands, warns, err = skills.Discover(src.root, skills.DefaultDiscoverDepth)
		for _, w := range warns {
			c.log.Warn("find skills", "source", req.display(), "warning", w)
		}
		if err != nil {
			src.cleanup()
			if len(src.warnings) > 0 { // e.g. a SKILL.md that was a link left out
				return nil, fmt.Errorf("find skills in %q: %w (%s)", req.display(), err, strings.Join(src.warnings, "; "))
			}
			return nil, fmt.Errorf("find skills in %q: %w", req.display(), err)
		}
		// Paths stay those of the whole source, so a skill imported
		// through a folder is the same source as through the repository.
		for i := range cands {
			if src.sub != "" {
				cands[i].Rel = path.Join(src.sub, cands[i].Rel)
			}
		}
	}
	if req.Origin != "" {
		src.key = req.Origin
	}
	cands = ignore(cands, req.Ignore)
	if len(cands) == 0 {
		src.cleanup()
		return nil, fmt.Errorf("every skill of %q is ignored: %w", req.display(), skills.ErrNotFound)
	}
	if req.List || (len(cands) > 1 && !req.All && len(req.Skills) == 0) {
		res.Available = describe(cands) // before cleanup: it reads the files
		src.cleanup()
		if req.List {
			return nil, nil
		}
		names := make([]string, len(res.Available))
		for i, a := range res.Available {
			names[i] = a.Slug
		}
		return nil, fmt.Errorf("%q holds %d skills (%s): choose with --skill NAME or --all: %w",
			req.display(), len(cands), strings.Join(names, ", "), skills.ErrAmbiguous)
	}
	if len(req.Skills) > 0 {
		picked, err := pick(cands, req.Skills)
		if err != nil {
			res.Available = describe(cands)
			src.cleanup()
			return nil, fmt.Errorf("in %q: %w", req.display(), err)
		}
		cands = picked
	}
	return &selection{src: src, cands: dependencyOrder(cands), mode: mode}, nil
}

// install imports every selected skill; per-skill failures go to
// res.Failed. It fails when nothing could be installed.
func (c *Catalog) install(ctx context.Context, actor skills.User, req ImportRequest, sel *selection, res *ImportResult) error {
	src := sel.src
	var errs []error
	for _, cand := range sel.cands {
		inst, err := c.importOne(ctx, actor, req, src, cand, sel.mode)
		if err != nil {
			where := req.display()
			if req.Agents {
				where = cand.Dir
			} else if cand.Rel != "." {
				where += "//" + cand.Rel
			}
			res.Failed = append(res.Failed, Failed{Source: where, Error: err.Error()})
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			c.log.Info("import failed", "source", where, "err", err)
			continue
		}
		inst.Warnings = append(slices.Clone(src.warnings), inst.Warnings...)
		res.Installed = append(res.Installed, *inst)
	}
	if len(res.Installed) == 0 && len(res.Failed) > 0 {
		if len(errs) == 1 {
			return errs[0]
		}
		return fmt.Errorf("no skill of %d imported from %q: %w", len(errs), req.display(), errors.Join(errs...))
	}
	return nil
}

// agentSource lists the skills of the agents' folders as candidates; those
// that cannot be loaded at all are reported as failed.
func (c *Catalog) agentSource(req ImportRequest, res *ImportResult) (*source, []skills.Candidate) {
	found, problems := skills.ScanAgentDirs(skills.AgentDirs(req.AgentHome, req.Project))
	for _, p := range problems {
		res.Failed = append(res.Failed, Failed{Source: "agents", Error: p})
	}
	cands := make([]skills.Candidate, len(found))
	for i, f := range found {
		cands[i] = skills.Candidate{Name: filepath.Base(f.Dir), Rel: f.RealDir, Dir: f.RealDir}
	}
	return &source{key: "agent:", sourceType: skills.SourceUpload, cleanup: func() {}}, cands
}

// resolve turns the request's source into a directory tree.
func (c *Catalog) resolve(ctx context.Context, req ImportRequest) (*source, error) {
	sub := req.Path
	if _, err := os.Stat(req.Source); err != nil {
		if gs := skills.ParseGitSource(req.Source); gs.Path != "" {
			if sub != "" && sub != gs.Path {
				return nil, fmt.Errorf("source %q names the folder %q and --path %q: choose one: %w", req.display(), gs.Path, sub, skills.ErrInvalid)
			}
			sub, gs.Path = gs.Path, ""
			req.Source = gs.String()
		}
	}
	if sub != "" {
		clean, err := skills.CleanRelPath(sub)
		if err != nil {
			return nil, fmt.Errorf("source %q: folder %w", req.display(), err)
		}
		sub = clean
	}
	src, err := c.resolveTree(ctx, req)
	if err != nil || sub == "" {
		return src, err
	}
	root, err := skills.SubRoot(src.root, sub)
	if err != nil {
		src.cleanup()
		return nil, fmt.Errorf("source %q: %w", req.display(), err)
	}
	src.root, src.sub = root, sub
	return src, nil
}

// resolveTree turns the request's source into a directory tree: the whole
// folder, archive or repository.
func (c *Catalog) resolveTree(ctx context.Context, req ImportRequest) (*source, error) {
	tmp := filepath.Join(c.home, tmpDir)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("create temporary directory: %w", err)
	}
	work, err := os.MkdirTemp(tmp, "import-")
	if err != nil {
		return nil, fmt.Errorf("create temporary directory: %w", err)
	}
	cleanup := func() { forceRemoveAll(work) }
	fail := func(err error) (*source, error) { cleanup(); return nil, err }

	// "PATH#ref" and "file://PATH[#ref]" name a local repository: resolve
	// them to PATH and the ref, so every spelling has one identity. Both
	// ask for git (a commit), where a plain PATH asks for the folder.
	spec := req.Source
	asGit := false
	if _, err := os.Stat(spec); err != nil {
		gs := skills.ParseGitSource(spec)
		if p := strings.TrimPrefix(gs.URL, "file://"); p != spec {
			if _, err := os.Stat(p); err == nil {
				spec, asGit = p, true
				if req.Ref == "" {
					req.Ref = gs.Ref
				}
			}
		}
	}
	fi, statErr := os.Stat(spec)
	local := statErr == nil
	// A local folder is read as it is on disk, working-tree edits included
	// (its commit and whether the files match it are recorded); only a ref
	// (--ref or PATH#ref), a file:// URL, or a bare repository, which has
	// no files to read, makes it a commit to clone. Either way its identity is its absolute
	// path, so every spelling of it reinstalls the same skills.
	if local && fi.IsDir() && !asGit && req.Ref == "" && !isBareRepo(spec) {
		abs, _ := filepath.Abs(spec)
		commit, state, err := skills.WorktreeState(ctx, abs)
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
	if !local && !skills.IsGitURL(spec) {
		return fail(fmt.Errorf("source %q: no such file, directory or git repository: %w", req.display(), skills.ErrNotFound))
	}
	gs := skills.ParseGitSource(spec)
	if req.Ref != "" {
		gs.Ref = req.Ref
	}
	key := "git:" + skills.GitSource{URL: gs.URL}.String() // no credentials in provenance
	if local {
		abs, _ := filepath.Abs(spec)
		gs.URL = abs
		key = "local:" + abs
	}
	root := filepath.Join(work, "clone")
	commit, err := skills.CloneGit(ctx, gs, root, skills.CloneOptions{Limits: c.lim}) // a plain tree within the limits, no .git
	if err != nil {
		return fail(err)
	}
	return &source{root: root, key: key, sourceType: skills.SourceRemote, ref: gs.Ref, commit: commit, cleanup: cleanup}, nil
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
		warnings, err := skills.ExtractZip(spec, root, c.lim)
		if err != nil {
			return fail(fmt.Errorf("source %s: %w", display, err))
		}
		return &source{root: root, key: "zip:" + abs, sourceType: skills.SourceUpload, warnings: warnings, cleanup: cleanup}, nil
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

// manifestMax bounds a SKILL.md read to list or order a source's skills;
// staging applies the limits in force.
var manifestMax = skills.DefaultLimits().MaxManifest

// describe parses candidates leniently for listing.
func describe(cands []skills.Candidate) []Available {
	out := make([]Available, 0, len(cands))
	for _, cand := range cands {
		a := Available{Name: cand.Name, Slug: cand.Name, Path: cand.Rel}
		if data, err := readManifest(cand.Dir, manifestMax); err == nil {
			if m, _, err := skills.ParseManifest(data, skills.Lenient); err == nil {
				a.Name, a.Slug, a.Description = m.Name, m.Slug, m.Description
			}
		}
		out = append(out, a)
	}
	return out
}

// readManifest reads the SKILL.md (or skill.md) of a candidate skill
// folder: never through a symlink, never from a FIFO or device, never more
// than a file may hold.
func readManifest(dir string, max int64) ([]byte, error) {
	data, err := skills.ReadManifest(filepath.Join(dir, skills.ManifestName), skills.ManifestName, max, false)
	if errors.Is(err, os.ErrNotExist) {
		lower := strings.ToLower(skills.ManifestName)
		data, err = skills.ReadManifest(filepath.Join(dir, lower), lower, max, false)
	}
	return data, err
}

// pick selects candidates by folder name, slug, display name or path in the
// source; a name with glob characters (*, ?, [) picks every candidate it
// matches (path.Match), and must match at least one.
func pick(cands []skills.Candidate, names []string) ([]skills.Candidate, error) {
	avail := describe(cands)
	var out []skills.Candidate
	var missing []string
	for _, n := range names {
		found := false
		for i, a := range avail {
			if !matchesCandidate(n, cands[i], a) {
				continue
			}
			if !slices.ContainsFunc(out, func(c skills.Candidate) bool { return c.Dir == cands[i].Dir }) {
				out = append(out, cands[i])
			}
			found = true
			if !isGlob(n) {
				break
			}
		}
		if !found {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		slugs := make([]string, len(avail))
		for i, a := range avail {
			slugs[i] = a.Slug
		}
		return cands, fmt.Errorf("no skill named %s (available: %s): %w",
			strings.Join(missing, ", "), strings.Join(slugs, ", "), skills.ErrNotFound)
	}
	return out, nil
}

// ignore leaves out the candidates any of the globs matches (by folder
// name, slug, display name or path in the source).
func ignore(cands []skills.Candidate, globs []string) []skills.Candidate {
	if len(globs) == 0 {
		return cands
	}
	avail := describe(cands)
	var out []skills.Candidate
	for i, cand := range cands {
		if !slices.ContainsFunc(globs, func(g string) bool { return matchesCandidate(g, cand, avail[i]) }) {
			out = append(out, cand)
		}
	}
	return out
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// matchesCandidate reports whether a name or glob names a candidate.
func matchesCandidate(pattern string, cand skills.Candidate, a Available) bool {
	for _, v := range []string{cand.Name, a.Slug, a.Name, cand.Rel} {
		if v == "" {
			continue
		}
		if !isGlob(pattern) {
			if pattern == v {
				return true
			}
			continue
		}
		if ok, err := path.Match(pattern, v); err == nil && ok {
			return true
		}
	}
	return false
}

// forceRemoveAll removes a tree even when published content made it read-only.
func forceRemoveAll(path string) {
	filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(path)
}

// dependencyOrder sorts the skills of one source so that a skill comes after
// the skills of the same source it depends on (dependency validation needs
// them installed first); otherwise the discovery order is kept.
func dependencyOrder(cands []skills.Candidate) []skills.Candidate {
	type node struct {
		cand skills.Candidate
		deps []string
	}
	bySlug := map[string]int{}
	nodes := make([]node, len(cands))
	for i, cand := range cands {
		nodes[i].cand = cand
		if data, err := readManifest(cand.Dir, manifestMax); err == nil {
			if m, _, err := skills.ParseManifest(data, skills.Lenient); err == nil {
				nodes[i].deps = m.SkillDependencies
				if _, dup := bySlug[m.Slug]; !dup {
					bySlug[m.Slug] = i
				}
			}
		}
	}
	out := make([]skills.Candidate, 0, len(cands))
	state := make([]int, len(cands)) // 0 new, 1 visiting, 2 done
	var visit func(i int)
	visit = func(i int) {
		if state[i] != 0 {
			return // done, or a cycle: validation will name it
		}
		state[i] = 1
		for _, d := range nodes[i].deps {
			if j, ok := bySlug[d]; ok {
				visit(j)
			}
		}
		state[i] = 2
		out = append(out, nodes[i].cand)
	}
	for i := range nodes {
		visit(i)
	}
	return out
}
