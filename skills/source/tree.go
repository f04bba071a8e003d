package source

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"skillfs/skills"
	"skillfs/skills/git"
)

// Tree is a source resolved to a directory tree on this machine (see
// Resolve): the whole folder, archive or repository a spec names, and
// where it came from. Close removes what the read made.
type Tree struct {
	Root string // the directory holding the skill(s)
	// Key is the source's provenance key: same key and same relative path,
	// same source.
	Key string
	// Type is the source type its versions record: skills.SourceUpload for
	// a folder, an archive or a lone SKILL.md, skills.SourceRemote for a
	// repository read at a commit.
	Type     string
	Ref      string // the git ref read ("" for the default branch, or a folder as on disk)
	Commit   string // the commit read, or the one a local working tree is at
	Worktree string // a local git working tree: skills.WorktreeClean or WorktreeModified
	// Sub is the folder of the source named with ResolveOptions.Path (or
	// URL#ref:path), as a real slash path below Root ("" for all of it),
	// and SubRoot its real absolute path. Root stays the whole source: a
	// skill read through a folder keeps the path, plugin, slug and links it
	// has when the whole source is read.
	Sub, SubRoot string
	// Warnings are about the source as a whole (archive entries left out).
	Warnings []string
	// Owned is set when Root is the read's own copy of the source (a
	// clone, an unpacked archive), which nothing else writes: its files
	// may be staged as hard links, not copied.
	Owned bool
	// work is the folder of this read, removed by Close; "" for none.
	work string
}

// Close removes the read's own copies (a clone, an unpacked archive). A
// Tree made by hand, with no read of its own, has nothing to remove.
func (t *Tree) Close() {
	if t.work != "" {
		skills.RemoveTree(t.work)
	}
}

// Discover finds the skills the tree holds (see Discover), as deep as
// DefaultDiscoverDepth. With a Sub, they are those of the whole tree, of
// which the ones in Sub are meant (so that a skill keeps the slug, plugin
// and path it has when the whole source is read); when the whole tree
// holds no skill of its own in Sub (Sub lies inside a skill, or deeper
// than the search goes), they are those of Sub itself, their paths still
// those of the whole tree. Either way, the skills meant are those InFolder
// Sub.
func (t *Tree) Discover() ([]Candidate, []string, error) {
	cands, warns, err := Discover(t.Root, DefaultDiscoverDepth)
	if t.Sub == "" || err == nil && slices.ContainsFunc(cands, func(c Candidate) bool { return InFolder(c.Rel, t.Sub) }) {
		return cands, warns, err
	}
	cands, warns, err = Discover(t.SubRoot, DefaultDiscoverDepth)
	for i := range cands {
		cands[i].Rel = path.Join(t.Sub, cands[i].Rel)
	}
	return cands, warns, err
}

// ResolveOptions says how Resolve reads a spec, and what the caller's
// policy lets it read.
type ResolveOptions struct {
	// TempDir is where a read makes its folder of its own (created when
	// missing), for a clone, an unpacked archive or a lone SKILL.md.
	TempDir string
	Limits  skills.Limits
	Timeout time.Duration // a git source must be read within this; 0: git.DefaultCloneTimeout
	Ref     string        // the git ref to read (--ref); also accepted as the spec's "URL#ref"
	Path    string        // read only this folder of the source (--path); also accepted as "URL#ref:path"
	// Display is how messages name the source when the spec is a temporary
	// copy (an upload); "" names it by the spec, credentials hidden.
	Display string
	// NoWorkDir reads the spec as a reader with no working directory does
	// (the daemon's API, a recorded source): only an absolute path (or a
	// file:// URL) names something on this machine, a name is never
	// looked up on disk first, and any other relative path is no path (see
	// ExpandNameNoWorkDir).
	NoWorkDir bool
	// Check, when set, is called with the spec as expanded (see
	// ExpandName) and parsed, before anything of it is looked up: the
	// caller's check of who may read what it names.
	Check func(spec git.Spec) error
	// Guard, when set, is called with every path on this machine the spec
	// names (and the source as messages name it) before anything of it is
	// opened: the caller's fence around what no source may be.
	Guard func(display, path string) error
	// Confine is the check of every folder a read of a repository on this
	// machine takes objects from (git.CloneOptions.Confine); nil for none.
	Confine func(dir string) error
	// Remote is what a clone may read (git.CloneOptions.Remote); nil:
	// any source.
	Remote *git.RemotePolicy
	Log    *slog.Logger // nil: nothing is logged
}

// display is the name of the source spec in messages, answers and logs,
// with any credentials in its URL hidden (see git.Spec.String).
func (o ResolveOptions) display(spec git.Spec) string {
	if o.Display != "" {
		return o.Display
	}
	return spec.String()
}

// stat is os.Stat of a path the spec may be; with NoWorkDir, a path that
// is not absolute is never looked up.
func (o ResolveOptions) stat(p string) (os.FileInfo, error) {
	if o.NoWorkDir && !filepath.IsAbs(p) {
		return nil, fmt.Errorf("stat %s: not an absolute path: %w", p, os.ErrNotExist)
	}
	return os.Stat(p)
}

// Resolve turns a source spec — a directory, a ZIP archive, a lone
// SKILL.md, a git URL or a repository on this machine, each as
// "URL#ref:path" too, or a common name of a hosted repository (see
// ExpandName) — into a directory tree within the limits. The spec is
// parsed once, as a git spec, and that parse is carried through the read.
// The caller closes the tree.
func Resolve(ctx context.Context, spec string, opts ResolveOptions) (*Tree, error) {
	if opts.NoWorkDir {
		spec = ExpandNameNoWorkDir(spec)
	} else {
		spec = ExpandName(spec)
	}
	// The one parse of the source as a git spec, "URL#ref:path".
	gspec := git.ParseSpec(spec)
	if opts.Check != nil {
		if err := opts.Check(gspec); err != nil {
			return nil, err
		}
	}
	sub := opts.Path
	if _, err := opts.stat(spec); err != nil && gspec.Git.Path != "" {
		if sub != "" && sub != gspec.Git.Path {
			return nil, fmt.Errorf("source %q names the folder %q and --path %q: choose one: %w", opts.display(gspec), gspec.Git.Path, sub, skills.ErrInvalid)
		}
		gs := gspec.Git
		sub, gs.Path = gs.Path, ""
		gspec = git.Spec{Given: gs.Spec(), Git: gs} // credentials and all: they are for this read
	}
	if sub != "" {
		clean, err := skills.CleanRelPath(sub)
		if err != nil {
			return nil, fmt.Errorf("source %q: folder %w", opts.display(gspec), err)
		}
		sub = clean
	}
	t, err := resolveTree(ctx, gspec, opts)
	if err != nil || sub == "" {
		return t, err
	}
	base, err := SubRoot(t.Root, "")
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("source %q: %w", opts.display(gspec), err)
	}
	root, err := SubRoot(t.Root, sub)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("source %q: %w", opts.display(gspec), err)
	}
	if rel, err := filepath.Rel(base, root); err == nil && rel != "." {
		t.Sub, t.SubRoot = filepath.ToSlash(rel), root
	}
	return t, nil
}

// resolveTree turns the spec, without its folder, into a directory tree:
// the whole folder, archive or repository.
func resolveTree(ctx context.Context, spec git.Spec, opts ResolveOptions) (*Tree, error) {
	if err := os.MkdirAll(opts.TempDir, 0o700); err != nil {
		return nil, fmt.Errorf("create temporary directory: %w", err)
	}
	work, err := os.MkdirTemp(opts.TempDir, "import-")
	if err != nil {
		return nil, fmt.Errorf("create temporary directory: %w", err)
	}
	fail := func(err error) (*Tree, error) { skills.RemoveTree(work); return nil, err }
	display := opts.display(spec)

	// "PATH#ref" and "file://PATH[#ref]" name a local repository: resolve
	// them to PATH and the ref, so every spelling has one identity. Both
	// ask for git (a commit), where a plain PATH asks for the folder.
	p, gs, ref := spec.Given, spec.Git, opts.Ref
	asGit := false
	if _, err := opts.stat(p); err != nil {
		if q := strings.TrimPrefix(gs.URL, "file://"); q != p {
			if _, err := opts.stat(q); err == nil {
				p, asGit = q, true
				if ref == "" {
					ref = gs.Ref
				}
			}
		}
	}
	fi, statErr := opts.stat(p)
	local := statErr == nil
	if lp := localPath(p, local, gs); lp != "" && opts.Guard != nil {
		if err := opts.Guard(display, lp); err != nil {
			return fail(err)
		}
	}
	// A local folder is read as it is on disk, working-tree edits included
	// (its commit and whether the files match it are recorded); only a ref
	// (--ref or PATH#ref), a file:// URL, or a bare repository, which has
	// no files to read, makes it a commit to clone. Either way its identity is its absolute
	// path, so every spelling of it reinstalls the same skills.
	if local && fi.IsDir() && !asGit && ref == "" && !isBareRepo(p) {
		abs, _ := filepath.Abs(p)
		commit, state, err := git.WorktreeState(ctx, abs)
		if err != nil && opts.Log != nil {
			opts.Log.Warn("could not tell which commit a local folder holds", "source", abs, "err", err)
		}
		return &Tree{Root: abs, Key: "local:" + abs, Type: skills.SourceUpload,
			Commit: commit, Worktree: state, work: work}, nil
	}
	if local && fi.IsDir() && !isRepo(p) {
		return fail(fmt.Errorf("source %q: --ref needs a git repository, and this is a plain directory: %w", p, skills.ErrInvalid))
	}
	if local && !fi.IsDir() {
		return resolveFile(p, display, work, opts.Limits)
	}
	if !local && !spec.IsGit() {
		return fail(fmt.Errorf("source %q: no such file, directory or git repository: %w", display, skills.ErrNotFound))
	}
	if ref != "" {
		gs.Ref = ref
	}
	key := "git:" + git.Source{URL: gs.URL}.String() // no credentials in provenance
	if local {
		// A repository on this machine: p is its path, whichever way
		// the source named it (PATH, PATH#ref, file://PATH).
		abs, _ := filepath.Abs(p)
		gs = git.Source{URL: abs, Ref: ref}
		key = "local:" + abs
	}
	root := filepath.Join(work, "clone")
	commit, err := git.Clone(ctx, gs, root, git.CloneOptions{Limits: opts.Limits, Timeout: opts.Timeout, Confine: opts.Confine, Remote: opts.Remote}) // a plain tree within the limits, no .git
	if err != nil {
		return fail(err)
	}
	return &Tree{Root: root, Key: key, Type: skills.SourceRemote, Ref: gs.Ref, Commit: commit, Owned: true, work: work}, nil
}

// localPath is the path on this machine that the source spec p names, if
// any: p itself when it exists or is absolute, else the path of a
// file:// URL (gs: p parsed as a git source); "" for anything else (a
// remote URL, a repository name).
func localPath(p string, exists bool, gs git.Source) string {
	if exists || filepath.IsAbs(p) {
		return p
	}
	if q, ok := strings.CutPrefix(gs.URL, "file://"); ok && filepath.IsAbs(q) {
		return q
	}
	return ""
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
// SKILL.md — into a tree under work, which it removes on failure. The
// file's type is checked on the open descriptor and its bytes are counted
// as they are read: a FIFO, a device such as /dev/zero or a file that
// keeps growing is refused, never read forever.
func resolveFile(p, display, work string, lim skills.Limits) (*Tree, error) {
	fail := func(err error) (*Tree, error) { skills.RemoveTree(work); return nil, err }
	abs, _ := filepath.Abs(p)
	f, _, err := skills.OpenRegular(p, display, true)
	if err != nil {
		return fail(fmt.Errorf("source %s: %w", display, err))
	}
	zipped := isZip(p, f)
	f.Close()
	if zipped {
		root := filepath.Join(work, "unpacked")
		warnings, err := ExtractZip(p, root, lim)
		if err != nil {
			return fail(fmt.Errorf("source %s: %w", display, err))
		}
		return &Tree{Root: root, Key: "zip:" + abs, Type: skills.SourceUpload, Warnings: warnings, Owned: true, work: work}, nil
	}
	data, err := skills.ReadManifest(p, display, lim.MaxManifest, true)
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
	return &Tree{Root: root, Key: "file:" + abs, Type: skills.SourceUpload, work: work}, nil
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
