package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"skillfs/skills"
)

// Source names a repository, an optional ref (branch, tag or commit) and
// an optional sub-folder to import from.
type Source struct {
	URL string // what git clones: a URL, an scp-like address (user@host:path) or a local path
	Ref string // branch, tag (short or refs/heads/, refs/tags/ name) or commit hash; "" for the default branch
	// Path is the folder inside the repository to import from, a slash path
	// relative to its root; "" for the whole repository. ParseSource
	// keeps it cleaned when CleanRelPath accepts it and as written
	// otherwise; SubRoot confines it (and refuses what CleanRelPath
	// refuses) when the checkout is there.
	Path string
}

// String returns the source in the form ParseSource reads, with any
// credentials embedded in the URL replaced by "xxxxx", so it is safe to log
// and to record as provenance.
func (s Source) String() string {
	return s.join(redactGitURL(s.URL))
}

// Spec returns the source in the form ParseSource reads, its URL as
// given, credentials included: what a reader of the source is handed
// (ParseSource(s.Spec()) is s), never what is shown or recorded.
func (s Source) Spec() string {
	return s.join(s.URL)
}

// join writes the source with u as its URL.
func (s Source) join(u string) string {
	if s.Path != "" {
		return u + "#" + s.Ref + ":" + s.Path
	}
	if s.Ref == "" {
		if strings.Contains(u[userinfoEnd(u):], "#") {
			return u + "#"
		}
		return u
	}
	return u + "#" + s.Ref
}

// ParseSource splits "URL#ref", "URL#ref:path" and "URL#:path" at the
// last '#': the part before is the URL, the part after the ref and, after
// the first ':' in it, the path of a sub-folder of the repository (each ""
// when there is none or it is empty). All three are trimmed of surrounding
// space. The ref may be a branch, a tag, a refs/heads/ or refs/tags/ name,
// or a commit hash, full or abbreviated; git refuses ':' in ref names, so
// the first ':' is free to start the path. The path is kept cleaned (see
// CleanRelPath: "./skills//x/" is "skills/x") when it is a safe relative
// path and as written otherwise, for SubRoot to refuse with ErrUnsafePath.
// A URL or path that itself holds a '#' is written with a trailing '#' (and
// an empty ref), or with its ref after the last '#'. Git URLs never need a
// fragment, so '#' is free to mark the ref, as pip and npm do; a ':' in the
// URL (an scp-like address, a port) is never read as the path's, since the
// path is looked for after the '#' only. The '#' is looked for after the
// URL's user information (see splitUserinfo), so a '#' in a password stays
// in the URL, where String and Spec.String hide it, and never becomes a
// ref that messages show.
func ParseSource(s string) Source {
	s = strings.TrimSpace(s)
	from := userinfoEnd(s) // a '#' in a password is not the ref's
	i := strings.LastIndexByte(s[from:], '#')
	if i < 0 {
		return Source{URL: s}
	}
	i += from
	g := Source{URL: strings.TrimSpace(s[:i])}
	ref, sub, _ := strings.Cut(s[i+1:], ":")
	g.Ref = strings.TrimSpace(ref)
	g.Path = cleanSubPath(sub)
	return g
}

// cleanSubPath normalises the path of a git source: trimmed, cleaned when
// CleanRelPath accepts it, "" when it names the repository's root ("." or
// "./"), as written otherwise. Applied twice, it changes nothing, so a
// source read back from String is the same.
func cleanSubPath(p string) string {
	p = strings.TrimSpace(p)
	for {
		if len(skills.SplitSlash(p)) == 0 && !strings.HasPrefix(p, "/") {
			return ""
		}
		clean, err := skills.CleanRelPath(p)
		if err != nil {
			return p
		}
		// Cleaning may bare a space ("x /" is "x "): trim and clean again.
		next := strings.TrimSpace(clean)
		if next == p {
			return p
		}
		p = next
	}
}

// gitSchemes are the URL schemes Spec.IsGit accepts; Clone lets git use only
// their transports.
var gitSchemes = []string{"https://", "http://", "ssh://", "git+ssh://", "ssh+git://", "git://", "file://"}

// IsSCPLike reports whether s has the form user@host:path, which git reads
// as an ssh address. A bare host:path is not accepted: too many local file
// names hold a colon.
func IsSCPLike(s string) bool {
	colon := strings.IndexByte(s, ':')
	if colon < 0 || colon == len(s)-1 {
		return false
	}
	if slash := strings.IndexByte(s, '/'); slash >= 0 && slash < colon {
		return false
	}
	at := strings.IndexByte(s[:colon], '@')
	if at <= 0 || at == colon-1 {
		return false
	}
	host := s[at+1 : colon]
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	user := s[:at]
	return !strings.ContainsAny(user, " \t/\\")
}

// isLocalGitRepo reports whether path is a directory holding .git (a
// directory, or a file as in linked worktrees) or a bare repository.
func isLocalGitRepo(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return false
	}
	if _, err := os.Stat(filepath.Join(path, ".git")); err == nil {
		return true
	}
	for _, name := range []string{"objects", "refs"} {
		fi, err := os.Stat(filepath.Join(path, name))
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	fi, err = os.Stat(filepath.Join(path, "HEAD"))
	return err == nil && fi.Mode().IsRegular()
}

// Error reports a git source that could not be cloned. It wraps
// ErrNotFound when the repository or the ref does not exist (or cannot be
// read without credentials), ErrInvalid for a malformed URL or ref, the
// context's error when cancelled, and the process error otherwise.
type Error struct {
	Source Source // the source as given; Error redacts credentials
	Reason string // what went wrong, e.g. "repository not found or not readable without credentials"
	Detail string // git's own last error lines, bounded, with credential prompts and secrets removed
	Err    error
	// plain leaves Detail out of the message (RemotePolicy.Plain): it is
	// for the daemon's log, not for the caller.
	plain bool
}

// Error implements error.
func (e *Error) Error() string {
	msg := "clone git repository " + strconv.Quote(redactGitURL(e.Source.URL))
	if e.Source.Ref != "" {
		msg += " at ref " + strconv.Quote(e.Source.Ref)
	}
	msg += ": " + e.Reason
	if e.Detail != "" && !e.plain {
		msg += " (git: " + e.Detail + ")"
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// gitStderrMax bounds how much of git's standard error is kept for messages;
// the tail is what says what went wrong.
const gitStderrMax = 16 << 10

// gitStdoutMax bounds what is read from git's standard output (ref listings
// and hashes only).
const gitStdoutMax = 4 << 20

// gitCloneTimeoutGrace is how long a cancelled git process may hold its
// output pipes open after its process group was killed.
const gitCloneTimeoutGrace = 5 * time.Second

// Clone clones src into dir, which must not exist or be empty, checks out
// src.Ref when given, and returns the checked-out commit hash. It leaves a
// plain working tree: the .git directory is removed once the commit is
// known, so dir can be imported like any directory. Symlinks in the
// repository stay symlinks, so the import step rejects them with their path
// named; submodules are not cloned (their folders stay empty); Git LFS files
// stay pointer files.
//
// A clone is held to opts.Limits, the same limits as every other import
// source, before anything is checked out: git fetches without checking out,
// and is killed once the clone on disk grows past MaxTotalBytes; then the
// commit's tree is read from the fetched objects and every path must pass
// CleanRelPath (and hold no .git component in any case and no name over 255
// bytes), and the file and entry counts, the depth, every file size, the
// total and its ratio to the fetched objects on disk must be within the
// limits. Only then is the tree checked out, again watched against
// MaxTotalBytes. A refusal is a *Error wrapping a *LimitError
// (errors.Is(err, ErrLimit)) or an ErrUnsafePath error, naming the path in
// the repository.
//
// Git runs with no credentials and nothing from the machine's or user's git
// configuration: a scrubbed environment (a fresh empty HOME, no system or
// global config, no terminal or askpass prompts, ssh in batch mode with no
// keys or agent), no credential helper, no hooks, no templates, and only the
// https, http, ssh, git and file transports. The one thing taken from that
// configuration, its URL rewrites (url.<base>.insteadOf), is applied here
// before git runs (see ResolveURL): git is handed the rewritten URL, and
// a remote URL with a "." or ".." path segment, or a rewrite leading
// outside its folder, is refused with ErrInvalid. A repository that needs
// credentials is reported as not found. Clones are shallow where the ref
// allows: the default branch, a branch or a tag by depth-1 clone, a full
// commit hash by depth-1 fetch; an abbreviated hash (or a server that will
// not serve a hash) takes a full clone. A name that is both a branch and a
// tag is the branch; a branch or tag named like a hash wins over the hash.
//
// A repository on this machine (a local path, or a file:// URL without a
// host, whose object directory is found) is not cloned: its refs are listed
// as above, and the commit is read from its objects with git archive in an
// empty repository of our own that borrows them (see readLocal), so git
// never runs in it and nothing of its configuration applies. The tree is
// checked against the same limits first, the compression ratio against the
// commit's objects as they lie on disk, and every entry of the archive is
// checked again as it is written.
//
// The whole clone must finish within opts.Timeout (DefaultCloneTimeout when
// unset); the error then says "timed out after ..." and wraps
// context.DeadlineExceeded. Cancelling ctx, its deadline or the timeout kill
// git's whole process group. On any error dir is left as it was found:
// removed if Clone created it, emptied otherwise. The error is a
// *Error for failures of git itself and for refusals.
func Clone(ctx context.Context, src Source, dir string, opts CloneOptions) (commit string, err error) {
	src, fetchURL, err := checkGitSource(src, gitRewrites())
	if err != nil {
		return "", err
	}
	if local, ok := gitLocalPath(fetchURL); ok {
		// Absolute, because later steps run git inside dir.
		abs, err := filepath.Abs(local)
		if err != nil {
			return "", fmt.Errorf("clone git repository %q: %w", redactGitURL(src.URL), err)
		}
		fetchURL = abs
	}

	// Absolute too: git runs in the runner's empty home (see command).
	if dir, err = filepath.Abs(dir); err != nil {
		return "", fmt.Errorf("clone git repository %q: %w", redactGitURL(src.URL), err)
	}
	created, err := prepareCloneDir(dir)
	if err != nil {
		return "", err
	}
	timeout := opts.timeout()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, &cloneTimeoutError{d: timeout})
	defer cancel()
	var remote *remoteCheck
	if opts.Remote != nil {
		if remote, err = opts.Remote.check(ctx, src, fetchURL); err != nil {
			return "", err
		}
	}
	g, err := newGitRunner(src, fetchURL, opts.Limits)
	if err != nil {
		return "", err
	}
	defer g.close()
	if remote != nil {
		g.config, g.plain = remote.config, opts.Remote.Plain
	}
	defer func() {
		if err != nil {
			if cerr := clearCloneDir(dir, created); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()

	if local, ok := localRepoPath(fetchURL); ok && !opts.viaClone && remote == nil {
		objects, ok := localObjectDir(local)
		if !ok && opts.Confine != nil {
			if _, err := os.Lstat(local); errors.Is(err, os.ErrNotExist) {
				return "", &Error{Source: src, Reason: "repository not found or not readable without credentials", Err: skills.ErrNotFound}
			}
			return "", &Error{Source: src, Reason: "no object directory of its own to check", Err: skills.ErrPermission}
		}
		if ok {
			if err := confineObjects(objects, opts.Confine, 0); err != nil {
				return "", &Error{Source: src, Reason: "its objects may not be read", Err: err}
			}
			return g.readLocal(ctx, dir, objects)
		}
	}
	commit, err = g.clone(ctx, dir)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
		return "", fmt.Errorf("clone git repository %q: remove .git: %w", g.display(), err)
	}
	return commit, nil
}

// clone does the work of Clone once dir is ready: fetch without checking
// out, check the commit's tree against the limits, check it out.
func (g *gitRunner) clone(ctx context.Context, dir string) (string, error) {
	// While git fetches, the clone is nothing but the fetched objects, and
	// more of them than the whole tree may hold are refused as they arrive.
	fctx, stop := watchSize(ctx, func() int64 { return diskBytes(dir, "") }, g.lim.MaxTotalBytes, func(n int64) error {
		return &skills.LimitError{Limit: skills.LimitTotalBytes, Value: n, Max: g.lim.MaxTotalBytes}
	})
	commit, err := g.fetch(fctx, dir)
	if serr := stop(); err == nil && serr != nil {
		err = g.refuse(serr)
	}
	if err != nil {
		return "", err
	}
	gitBytes := diskBytes(filepath.Join(dir, ".git"), "")
	if err := g.checkTree(ctx, dir, commit, gitBytes); err != nil {
		return "", err
	}
	if err := g.checkout(ctx, dir, commit); err != nil {
		return "", err
	}
	return commit, nil
}

// checkout writes the tree of commit, already checked, into dir. Checkout
// may still grow files beyond their blob sizes (end-of-line conversion,
// ident expansion, working-tree-encoding), so the tree on disk is watched
// against the total-bytes limit too.
func (g *gitRunner) checkout(ctx context.Context, dir, commit string) error {
	limit := g.lim.MaxTotalBytes
	cctx, stop := watchSize(ctx, func() int64 { return diskBytes(dir, ".git") }, limit, func(n int64) error {
		return &skills.LimitError{Limit: skills.LimitTotalBytes, Value: n, Max: limit}
	})
	// read-tree -u fills the empty index and the work tree from the tree
	// alone; HEAD is irrelevant, as .git is removed afterwards.
	_, res := g.run(cctx, dir, "read-tree", "--reset", "-u", commit)
	if serr := stop(); serr != nil {
		return g.refuse(serr)
	}
	if res.err != nil {
		return g.fail(cctx, res, "check out failed", res.err)
	}
	return nil
}

// fetch lists the refs of the repository, fetches the objects for src.Ref
// into dir without checking anything out, and returns the commit hash.
func (g *gitRunner) fetch(ctx context.Context, dir string) (string, error) {
	src := g.src
	refs, err := g.listRefs(ctx)
	if err != nil {
		return "", err
	}

	base := []string{"clone", "--quiet", "--no-local", "--no-checkout", "--template=", "--no-recurse-submodules"}
	switch {
	case src.Ref == "":
		if err := g.cloneShallowFirst(ctx, dir, base); err != nil {
			return "", err
		}
	default:
		branch, hash := gitPickRef(refs, src.Ref)
		switch {
		case branch != "":
			with := append(append([]string(nil), base...), "--branch", branch)
			if err := g.cloneShallowFirst(ctx, dir, with); err != nil {
				return "", err
			}
		case hash != "":
			return g.fetchCommit(ctx, dir, base, hash)
		case isHexRef(src.Ref):
			return g.fetchCommit(ctx, dir, base, src.Ref)
		default:
			return "", &Error{Source: src, Reason: "ref not found: no branch, tag or commit of that name", Err: skills.ErrNotFound}
		}
	}

	out, res := g.run(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if res.err != nil {
		if ctx.Err() != nil {
			return "", g.fail(ctx, res, "", nil)
		}
		return "", &Error{Source: src, Reason: "repository has no commits on its default branch", Err: skills.ErrNotFound}
	}
	commit := strings.TrimSpace(string(out))
	if !isHexRef(commit) {
		return "", &Error{Source: src, Reason: fmt.Sprintf("git reported an unexpected commit %q", commit), Err: skills.ErrInvalid}
	}
	return commit, nil
}

// listRefs lists the repository's HEAD and the branch and tag named like
// src.Ref. Listing the refs first tells "repository not found" from "ref not
// found" without reading git's messages, and picks the cheapest clone.
func (g *gitRunner) listRefs(ctx context.Context) (map[string]string, error) {
	args := []string{"ls-remote", "--", g.url, "HEAD"}
	if g.src.Ref != "" {
		short := strings.TrimPrefix(strings.TrimPrefix(g.src.Ref, "refs/heads/"), "refs/tags/")
		args = append(args, "refs/heads/"+short, "refs/tags/"+short)
	}
	out, res := g.run(ctx, "", args...)
	if res.err != nil {
		return nil, g.fail(ctx, res, "repository not found or not readable without credentials", skills.ErrNotFound)
	}
	return parseLsRemote(out), nil
}

// cloneShallowFirst runs a depth-1 clone and, when that fails for a reason
// other than cancellation (dumb http servers cannot serve shallow clones),
// a full one.
func (g *gitRunner) cloneShallowFirst(ctx context.Context, dir string, args []string) error {
	shallow := append(append([]string(nil), args...), "--depth", "1", "--", g.url, dir)
	_, res := g.run(ctx, "", shallow...)
	if res.err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return g.fail(ctx, res, "", nil)
	}
	if err := clearCloneDir(dir, false); err != nil {
		return err
	}
	full := append(append([]string(nil), args...), "--", g.url, dir)
	if _, res := g.run(ctx, "", full...); res.err != nil {
		return g.fail(ctx, res, "clone failed", res.err)
	}
	return nil
}

// fetchCommit fetches the commit (or tag object) ref names and returns the
// commit hash: a full hash by a depth-1 fetch of just that object, falling
// back to a full clone in which an abbreviated hash can be resolved.
func (g *gitRunner) fetchCommit(ctx context.Context, dir string, base []string, ref string) (string, error) {
	if len(ref) == 40 || len(ref) == 64 {
		if _, res := g.run(ctx, "", "init", "--quiet", "--template=", "--", dir); res.err != nil {
			return "", g.fail(ctx, res, "initialise repository failed", res.err)
		}
		_, res := g.run(ctx, dir, "fetch", "--quiet", "--depth", "1", "--no-tags", "--no-recurse-submodules", "--", g.url, ref)
		if res.err == nil {
			return g.resolveCommit(ctx, dir, "FETCH_HEAD")
		}
		if ctx.Err() != nil {
			return "", g.fail(ctx, res, "", nil)
		}
		if err := clearCloneDir(dir, false); err != nil {
			return "", err
		}
	}
	full := append(append([]string(nil), base...), "--", g.url, dir)
	if _, res := g.run(ctx, "", full...); res.err != nil {
		return "", g.fail(ctx, res, "clone failed", res.err)
	}
	return g.resolveCommit(ctx, dir, ref)
}

// resolveCommit resolves rev to a full commit hash.
func (g *gitRunner) resolveCommit(ctx context.Context, dir, rev string) (string, error) {
	out, res := g.run(ctx, dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if res.err != nil {
		if ctx.Err() != nil {
			return "", g.fail(ctx, res, "", nil)
		}
		return "", &Error{Source: g.src, Reason: "ref not found: no branch, tag or commit of that name", Err: skills.ErrNotFound}
	}
	commit := strings.TrimSpace(string(out))
	if !isHexRef(commit) {
		return "", &Error{Source: g.src, Reason: fmt.Sprintf("git reported an unexpected commit %q", commit), Err: skills.ErrInvalid}
	}
	return commit, nil
}

// gitPickRef decides how to fetch ref given the ref listing: by clone
// --branch with a short name, or by the hash of a full tag name whose short
// name is also a branch (clone --branch would take the branch). Both are ""
// when the listing does not hold ref.
func gitPickRef(refs map[string]string, ref string) (branch, hash string) {
	if short, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		if _, ok := refs[ref]; ok {
			return short, ""
		}
		return "", ""
	}
	if short, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		h, ok := refs[ref]
		if !ok {
			return "", ""
		}
		if _, clash := refs["refs/heads/"+short]; clash {
			return "", h
		}
		return short, ""
	}
	if _, ok := refs["refs/heads/"+ref]; ok {
		return ref, ""
	}
	if _, ok := refs["refs/tags/"+ref]; ok {
		return ref, ""
	}
	return "", ""
}

// parseLsRemote maps ref names to hashes from git ls-remote output.
func parseLsRemote(out []byte) map[string]string {
	refs := make(map[string]string)
	for _, line := range strings.Split(string(out), "\n") {
		hash, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok || !isHexRef(hash) {
			continue
		}
		refs[name] = hash
	}
	return refs
}

// isHexRef reports whether s could be a commit hash, full or abbreviated
// (4 to 64 hex digits).
func isHexRef(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// gitURLProblem says why u cannot be handed to git, or "".
func gitURLProblem(u string) string {
	switch {
	case u == "":
		return "empty"
	case strings.HasPrefix(u, "-"):
		return "starts with '-'"
	case !utf8.ValidString(u):
		return "not valid UTF-8"
	}
	for _, r := range u {
		if r < 0x20 || r == 0x7f {
			// A newline in a URL once let a server steal credentials for
			// another host; no legitimate URL holds one.
			return "holds a control character"
		}
	}
	return ""
}

// gitRefProblem says why ref is not a name git could resolve safely (the
// rules of git check-ref-format, plus no leading '-'), or "".
func gitRefProblem(ref string) string {
	switch {
	case len(ref) > 1024:
		return "longer than 1024 bytes"
	case strings.HasPrefix(ref, "-"):
		return "starts with '-'"
	case !utf8.ValidString(ref):
		return "not valid UTF-8"
	case ref == "@":
		return `is "@"`
	case strings.Contains(ref, ".."):
		return `holds ".."`
	case strings.Contains(ref, "@{"):
		return `holds "@{"`
	case strings.Contains(ref, "//"):
		return `holds "//"`
	case strings.HasPrefix(ref, "/"), strings.HasSuffix(ref, "/"):
		return "starts or ends with '/'"
	case strings.HasSuffix(ref, "."), strings.HasSuffix(ref, ".lock"):
		return `ends with "." or ".lock"`
	}
	for _, r := range ref {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return fmt.Sprintf("holds %q", r)
		}
	}
	for _, c := range strings.Split(ref, "/") {
		if strings.HasPrefix(c, ".") {
			return "a component starts with '.'"
		}
	}
	return ""
}

// gitLocalPath reports whether u is a local path rather than a URL or an
// scp-like address, and returns it.
func gitLocalPath(u string) (string, bool) {
	if strings.Contains(u, "://") || strings.Contains(u, "::") || IsSCPLike(u) {
		return "", false
	}
	colon := strings.IndexByte(u, ':')
	slash := strings.IndexByte(u, '/')
	if colon >= 0 && (slash < 0 || colon < slash) {
		return "", false // git reads host:path as ssh
	}
	return u, true
}

// splitUserinfo splits raw, a URL with "://" (or scheme-relative "//"), around the user information
// of its authority: what comes before it (the scheme and "://"), the user
// information and what comes after its '@'. The authority is read up to the
// first '/' and its last '@' ends the user information, so a URL that does
// not parse (a '#', '?' or space in a password, a bad port) still has its
// credentials found. ok is false when there are none.
func splitUserinfo(raw string) (head, userinfo, rest string, ok bool) {
	var start int
	switch i := strings.Index(raw, "://"); {
	case i >= 0 && isScheme(raw[:i]):
		start = i + 3
	case strings.HasPrefix(raw, "//"): // scheme-relative: URL parsers find user information in it too
		start = 2
	default:
		return "", "", "", false
	}
	auth := raw[start:]
	if j := strings.IndexByte(auth, '/'); j >= 0 {
		auth = auth[:j]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return "", "", "", false
	}
	return raw[:start], raw[start : start+at], raw[start+at+1:], true
}

// isScheme reports whether s is a URI scheme (RFC 3986: a letter, then
// letters, digits, '+', '-' or '.'): only after one does "://" start an
// authority ("#://x@y" is a ref and a folder, not user information).
func isScheme(s string) bool {
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// userinfoEnd is where the user information of s, a URL (or a git source
// "URL#ref:path"), ends: just after its '@', or 0 when it has none. A
// password may hold '#', '?' or ':', so the '#' of a ref and the '?' of a
// query are looked for after it.
func userinfoEnd(s string) int {
	head, user, _, ok := splitUserinfo(s)
	if !ok {
		return 0
	}
	return len(head) + len(user) + 1
}

// isHTTPURL reports whether head, a scheme with "://", is http's or https's.
func isHTTPURL(head string) bool {
	h := strings.ToLower(head)
	return h == "http://" || h == "https://"
}

// redactGitURL hides credentials in a URL: the whole user part of an http(s)
// URL (a username alone is often a token), the password elsewhere, and the
// value of every secret parameter of its query (see SecretParam).
func redactGitURL(raw string) string {
	return redactQuery(redactUserinfo(raw))
}

// redactUserinfo hides the credentials in the user information of raw.
func redactUserinfo(raw string) string {
	head, user, rest, ok := splitUserinfo(raw)
	if !ok {
		return raw
	}
	if isHTTPURL(head) {
		return head + Hidden + "@" + rest
	}
	if name, _, hasPass := strings.Cut(user, ":"); hasPass {
		return head + name + ":" + Hidden + "@" + rest
	}
	return raw
}

// gitSecrets lists the strings of raw that must never appear in a message:
// what redactGitURL hides, as written, decoded and encoded.
func gitSecrets(raw string) []string {
	var s []string
	if head, user, _, ok := splitUserinfo(raw); ok {
		name, pass, hasPass := strings.Cut(user, ":")
		if hasPass {
			s = append(s, secretForms(pass)...)
		}
		if isHTTPURL(head) {
			s = append(s, secretForms(name)...)
		}
	}
	for _, v := range querySecrets(raw) {
		s = append(s, secretForms(v)...)
	}
	return s
}

// checkGitSource is the first step of Clone: src trimmed, with "HEAD"
// as the default branch, its URL and ref checked, and the URL git is to
// read (src's with the rewrites rules applied, see resolveGitURL). A
// refusal is a *Error wrapping ErrInvalid.
func checkGitSource(src Source, rules []gitRewrite) (Source, string, error) {
	src.URL = strings.TrimSpace(src.URL)
	src.Ref = strings.TrimSpace(src.Ref)
	if src.Ref == "HEAD" {
		src.Ref = ""
	}
	if reason := gitURLProblem(src.URL); reason != "" {
		return src, "", &Error{Source: src, Reason: "invalid URL: " + reason, Err: skills.ErrInvalid}
	}
	if src.Ref != "" {
		if reason := gitRefProblem(src.Ref); reason != "" {
			return src, "", &Error{Source: src, Reason: "invalid ref: " + reason, Err: skills.ErrInvalid}
		}
	}
	// What git reads: the URL with git's URL rewrites applied here, and
	// checked; git itself gets no rewrite configuration.
	fetchURL, err := resolveGitURL(src.URL, rules)
	if err != nil {
		return src, "", &Error{Source: src, Reason: "invalid URL: " + err.Error(), Err: err}
	}
	return src, fetchURL, nil
}

// prepareCloneDir checks that dir is absent or empty and reports whether it
// was absent.
func prepareCloneDir(dir string) (created bool, err error) {
	if dir == "" {
		return false, fmt.Errorf("clone git repository: no target directory: %w", skills.ErrInvalid)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("clone git repository into %q: %w", dir, err)
	case len(entries) > 0:
		return false, fmt.Errorf("clone git repository into %q: directory is not empty: %w", dir, skills.ErrExists)
	}
	return false, nil
}

// clearCloneDir removes dir when Clone created it, or else everything in it.
func clearCloneDir(dir string, created bool) error {
	if created {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("clean up clone %q: %w", dir, err)
		}
		return nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clean up clone %q: %w", dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("clean up clone %q: %w", dir, err)
		}
	}
	return nil
}

// gitRunner runs git for one Clone call.
type gitRunner struct {
	src  Source        // as given: what messages name
	url  string        // what git reads: src.URL rewritten (see ResolveGitURL), a local path made absolute
	lim  skills.Limits // with defaults filled in
	bin  string
	home string
	env  []string
	// config is passed after gitSafeConfig (RemotePolicy's), and plain
	// keeps git's messages out of errors (RemotePolicy.Plain).
	config []string
	plain  bool
}

// gitPassEnv are the variables git may keep from the daemon's environment:
// how to find programs, proxies and CA bundles. Nothing that carries
// configuration or credentials.
var gitPassEnv = []string{
	"PATH", "TMPDIR",
	"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
}

// gitSSHCommand makes ssh fail instead of asking, and keeps it from offering
// the machine's keys or agent: a clone never authenticates as the daemon's
// user. Host keys are still checked against the known_hosts files.
const gitSSHCommand = "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityFile=none -o IdentityAgent=none -o StrictHostKeyChecking=yes"

// gitSafeConfig is passed as -c options before every git command; it wins
// over any configuration a repository carries.
var gitSafeConfig = []string{
	"core.hooksPath=/dev/null",
	"core.askPass=",
	"core.fsmonitor=false",
	"credential.helper=",
	"advice.detachedHead=false",
	"submodule.recurse=false",
	"protocol.allow=never",
	"protocol.https.allow=always",
	"protocol.http.allow=always",
	"protocol.ssh.allow=always",
	"protocol.git.allow=always",
	"protocol.file.allow=always",
}

func newGitRunner(src Source, fetchURL string, lim skills.Limits) (*gitRunner, error) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("clone git repository %q: find git: %w", redactGitURL(src.URL), err)
	}
	home, err := os.MkdirTemp("", "skillfs-git-home-")
	if err != nil {
		return nil, fmt.Errorf("clone git repository %q: make empty home: %w", redactGitURL(src.URL), err)
	}
	env := []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		// No repository above the empty home it runs in is discovered.
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(home),
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"GIT_SSH_COMMAND=" + gitSSHCommand,
		"GIT_LFS_SKIP_SMUDGE=1",
		"GCM_INTERACTIVE=never",
	}
	for _, k := range gitPassEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return &gitRunner{src: src, url: fetchURL, lim: lim.WithDefaults(), bin: bin, home: home, env: env}, nil
}

func (g *gitRunner) close() { os.RemoveAll(g.home) }

func (g *gitRunner) display() string { return Source{URL: g.src.URL}.String() }

// gitResult is the outcome of one git command.
type gitResult struct {
	stderr string
	err    error
}

// command prepares git with the safe configuration, in dir when not "" (else
// in the runner's empty home), in its own session so cancellation can kill everything it started.
func (g *gitRunner) command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	full := make([]string, 0, 2*len(gitSafeConfig)+2*len(g.config)+len(args)+2)
	for _, c := range append(slices.Clip(gitSafeConfig), g.config...) {
		full = append(full, "-c", c)
	}
	if dir != "" {
		full = append(full, "-C", dir)
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, g.bin, full...)
	// Never where the daemon happens to run: git would read the config
	// of a repository enclosing that folder (url.*.insteadOf included),
	// and take a name for a path found there.
	cmd.Dir = g.home
	cmd.Env = g.env
	cmd.Stdin = nil
	// A new session has no controlling terminal, so nothing git starts
	// (ssh, credential helpers) can prompt on the daemon's terminal, and the
	// session's process group can be killed as a whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = gitCloneTimeoutGrace
	return cmd
}

// run runs git (see command) and collects its bounded output.
func (g *gitRunner) run(ctx context.Context, dir string, args ...string) ([]byte, gitResult) {
	cmd := g.command(ctx, dir, args...)
	stdout := &gitBoundedBuffer{max: gitStdoutMax}
	stderr := &gitBoundedBuffer{max: gitStderrMax, keepTail: true}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	err := cmd.Run()
	if err == nil && stdout.overflow {
		err = fmt.Errorf("git printed more than %d bytes: %w", gitStdoutMax, skills.ErrLimit)
	}
	return stdout.Bytes(), gitResult{stderr: stderr.String(), err: err}
}

// fail builds the Error for a failed command: why ctx is done when it is
// (see stopped), otherwise reason wrapping err.
func (g *gitRunner) fail(ctx context.Context, res gitResult, reason string, err error) error {
	if ctx.Err() != nil {
		return g.stopped(ctx)
	}
	if g.plain && unreachable(res.stderr) {
		reason = "the host could not be reached"
	}
	return &Error{Source: g.src, Reason: reason, Detail: gitDetail(res.stderr, append(gitSecrets(g.src.URL), gitSecrets(g.url)...)), Err: err,
		plain: g.plain}
}

// stopped builds the Error for a command killed because ctx is done: the
// limit the clone on disk exceeded, the clone's own timeout, or the caller's
// deadline or cancellation. Each wraps what errors.Is should find:
// ErrLimit, context.DeadlineExceeded or context.Canceled.
func (g *gitRunner) stopped(ctx context.Context) error {
	cause := context.Cause(ctx)
	var le *skills.LimitError
	var te *cloneTimeoutError
	switch {
	case errors.As(cause, &le):
		return g.refuse(le)
	case errors.As(cause, &te):
		return &Error{Source: g.src, Reason: te.Error(), Err: te}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &Error{Source: g.src, Reason: "deadline exceeded", Err: ctx.Err()}
	}
	return &Error{Source: g.src, Reason: "cancelled", Err: ctx.Err()}
}

// gitDetailLines and gitDetailMax bound the part of git's message quoted in
// an error.
const (
	gitDetailLines = 3
	gitDetailMax   = 512
)

// gitDetail keeps the last meaningful lines of git's standard error, with
// credential prompts replaced by a plain statement and secrets removed.
func gitDetail(stderr string, secrets []string) string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(strings.TrimRight(l, "\r"))
		if l == "" || strings.HasPrefix(l, "hint:") {
			continue
		}
		l = strings.TrimPrefix(strings.TrimPrefix(l, "fatal: "), "error: ")
		low := strings.ToLower(l)
		if strings.Contains(low, "terminal prompts disabled") || strings.Contains(low, "could not read username") ||
			strings.Contains(low, "could not read password") || strings.Contains(low, "authentication failed") {
			l = "the server asked for credentials, which are never sent"
		}
		if len(lines) > 0 && lines[len(lines)-1] == l {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) > gitDetailLines {
		lines = lines[len(lines)-gitDetailLines:]
	}
	d := strings.Join(lines, "; ")
	for _, s := range secrets {
		if len(s) >= 3 {
			d = strings.ReplaceAll(d, s, "xxxxx")
		}
	}
	if len(d) > gitDetailMax {
		d = d[:gitDetailMax]
		for !utf8.ValidString(d) {
			d = d[:len(d)-1]
		}
		d += "…"
	}
	return d
}

// gitBoundedBuffer keeps at most max bytes of what is written: the head, or
// the tail when keepTail is set. It never fails a write, so git is never
// blocked on a full pipe.
type gitBoundedBuffer struct {
	buf      bytes.Buffer
	max      int
	keepTail bool
	overflow bool
}

func (b *gitBoundedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if b.keepTail {
		b.buf.Write(p)
		if b.buf.Len() > 2*b.max {
			tail := append([]byte(nil), b.buf.Bytes()[b.buf.Len()-b.max:]...)
			b.buf.Reset()
			b.buf.Write(tail)
			b.overflow = true
		}
		return n, nil
	}
	if room := b.max - b.buf.Len(); room < len(p) {
		p = p[:max(room, 0)]
		b.overflow = true
	}
	b.buf.Write(p)
	return n, nil
}

func (b *gitBoundedBuffer) Bytes() []byte { return b.buf.Bytes() }

func (b *gitBoundedBuffer) String() string {
	s := b.buf.Bytes()
	if b.keepTail && len(s) > b.max {
		s = s[len(s)-b.max:]
	}
	return string(s)
}
