package git

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"skillfs/skills"
)

// A repository on this machine is not cloned: its commit is read straight
// from its objects with git archive, run in a repository of our own that
// borrows the source's objects (objects/info/alternates) and holds nothing
// else. Git thus never runs in the source repository, so nothing of its
// configuration applies (filters, hooks, fsmonitor, attribute files), and
// nothing is copied; only the listing of its refs runs git upload-pack
// there, as a clone would. The tree is held to the limits from the objects
// first, as a clone's is, and the archive is unpacked with every path,
// count and size checked again on the bytes actually read.

// gitLocalAttributes overrides, from our repository's info/attributes (which
// wins over the tree's .gitattributes), the attributes that only git
// archive honours: a checkout writes export-ignore files and leaves
// $Format:$ placeholders as they are, and so does this. The tree's other
// attributes (end-of-line conversion, ident) apply as they do at checkout;
// filter drivers need configuration, and there is none.
const gitLocalAttributes = "* -export-ignore -export-subst\n"

// gitLocalRepo is the name of our repository inside the runner's home.
const gitLocalRepo = "borrow.git"

// localRepoPath returns the directory of a repository on this machine named
// by u: a local path, or a file:// URL without a host. ok is false for
// anything else.
func localRepoPath(u string) (string, bool) {
	if p, ok := gitLocalPath(u); ok {
		return p, true
	}
	if len(u) < len("file://") || !strings.EqualFold(u[:len("file://")], "file://") {
		return "", false
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Host != "" && pu.Host != "localhost") || pu.Path == "" || pu.RawQuery != "" || pu.Fragment != "" {
		return "", false
	}
	return pu.Path, true
}

// localObjectDir finds the object directory of the repository at dir: that
// of its .git directory, of the common directory of a linked worktree (a
// .git file naming its git directory), or of dir itself when it is a bare
// repository. It is read from the files, never by running git there. ok is
// false when dir does not look like any of these.
func localObjectDir(dir string) (string, bool) {
	gitDir := dir
	fi, err := os.Lstat(filepath.Join(dir, ".git"))
	switch {
	case err == nil && fi.IsDir():
		gitDir = filepath.Join(dir, ".git")
	case err == nil && fi.Mode().IsRegular():
		b, err := skills.ReadRegular(filepath.Join(dir, ".git"), ".git", 4096, false)
		target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if err != nil || !ok {
			return "", false
		}
		gitDir = strings.TrimSpace(target)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(dir, gitDir)
		}
	case err == nil || !errors.Is(err, os.ErrNotExist):
		return "", false
	}
	if b, err := skills.ReadRegular(filepath.Join(gitDir, "commondir"), "commondir", 4096, false); err == nil {
		common := strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
		gitDir = common
	}
	head, err := os.Stat(filepath.Join(gitDir, "HEAD"))
	if err != nil || !head.Mode().IsRegular() {
		return "", false
	}
	objects, err := filepath.EvalSymlinks(filepath.Join(gitDir, "objects"))
	if err != nil {
		return "", false
	}
	if fi, err := os.Stat(objects); err != nil || !fi.IsDir() {
		return "", false
	}
	abs, err := filepath.Abs(objects)
	if err != nil || strings.ContainsAny(abs, "\n\r") {
		return "", false // alternates are one path a line
	}
	return abs, true
}

// maxAlternateDepth is how deep git follows alternates of alternates.
const maxAlternateDepth = 5

// confineObjects asks confine (when set) about the object directory objects
// and every alternate it lists (objects/info/alternates, and theirs, as
// deep as git follows them).
func confineObjects(objects string, confine func(string) error, depth int) error {
	if confine == nil {
		return nil
	}
	if err := confine(objects); err != nil {
		return err
	}
	b, err := skills.ReadRegular(filepath.Join(objects, "info", "alternates"), "alternates", 64<<10, false)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read the alternates of a repository: %w", skills.ErrPermission)
	}
	for _, line := range strings.Split(string(b), "\n") {
		alt := strings.TrimSpace(line)
		if alt == "" || strings.HasPrefix(alt, "#") {
			continue
		}
		if depth >= maxAlternateDepth || strings.HasPrefix(alt, "\"") {
			return fmt.Errorf("alternates too deep or quoted: %w", skills.ErrPermission)
		}
		if !filepath.IsAbs(alt) {
			alt = filepath.Join(objects, alt)
		}
		if err := confineObjects(filepath.Clean(alt), confine, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// readLocal does the work of Clone for a repository on this machine whose
// objects are in objects: resolve the ref, check the commit's tree against
// the limits, unpack it into dir.
func (g *gitRunner) readLocal(ctx context.Context, dir, objects string) (string, error) {
	refs, err := g.listRefs(ctx)
	if err != nil {
		return "", err
	}
	rev, err := g.pickLocalRev(refs)
	if err != nil {
		return "", err
	}
	// The refs tell the object format (an abbreviated hash cannot).
	sha256 := len(rev) == 64
	for _, h := range refs {
		sha256 = sha256 || len(h) == 64
	}
	repo, err := g.borrowObjects(ctx, objects, sha256)
	if err != nil {
		return "", err
	}
	commit, err := g.resolveCommit(ctx, repo, rev)
	if err != nil {
		return "", err
	}
	// What a clone would fetch for this commit, as the objects take it on
	// disk: the measure of the tree's compression ratio.
	out, res := g.run(ctx, repo, "rev-list", "--objects", "--no-walk", "--disk-usage", commit)
	if res.err != nil {
		return "", g.fail(ctx, res, "measure the commit's objects failed", res.err)
	}
	objBytes, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || objBytes < 0 {
		return "", &Error{Source: g.src, Reason: fmt.Sprintf("git reported an unexpected size %q", strings.TrimSpace(string(out))), Err: skills.ErrInvalid}
	}
	if err := g.checkTree(ctx, repo, commit, objBytes); err != nil {
		return "", err
	}
	if err := g.unpackArchive(ctx, repo, commit, dir); err != nil {
		return "", err
	}
	return commit, nil
}

// pickLocalRev decides from the ref listing what to read: the default
// branch's commit, a branch (before a tag of the same name), a tag, or a
// commit hash, full or abbreviated, resolved later among the objects.
func (g *gitRunner) pickLocalRev(refs map[string]string) (string, error) {
	ref := g.src.Ref
	if ref == "" {
		if h := refs["HEAD"]; h != "" {
			return h, nil
		}
		return "", &Error{Source: g.src, Reason: "repository has no commits on its default branch", Err: skills.ErrNotFound}
	}
	branch, hash := gitPickRef(refs, ref)
	switch {
	case branch != "":
		if h, ok := refs["refs/heads/"+branch]; ok {
			return h, nil
		}
		return refs["refs/tags/"+branch], nil
	case hash != "":
		return hash, nil
	case isHexRef(ref):
		return strings.ToLower(ref), nil
	}
	return "", &Error{Source: g.src, Reason: "ref not found: no branch, tag or commit of that name", Err: skills.ErrNotFound}
}

// borrowObjects makes an empty bare repository of our own in the runner's
// home that reads its objects from objects, and returns its path. It has no
// refs, so a name can never be taken for a ref of ours.
func (g *gitRunner) borrowObjects(ctx context.Context, objects string, sha256 bool) (string, error) {
	repo := filepath.Join(g.home, gitLocalRepo)
	args := []string{"init", "--quiet", "--bare", "--template="}
	if sha256 {
		args = append(args, "--object-format=sha256")
	}
	if _, res := g.run(ctx, "", append(args, "--", repo)...); res.err != nil {
		return "", g.fail(ctx, res, "initialise repository failed", res.err)
	}
	for _, f := range []struct{ name, data string }{
		{filepath.Join("objects", "info", "alternates"), objects + "\n"},
		{filepath.Join("info", "attributes"), gitLocalAttributes},
	} {
		p := filepath.Join(repo, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("read git repository %q: %w", g.display(), err)
		}
		if err := os.WriteFile(p, []byte(f.data), 0o644); err != nil {
			return "", fmt.Errorf("read git repository %q: %w", g.display(), err)
		}
	}
	return repo, nil
}

// gitArchiveTrailMax bounds what git archive may write after the end of its
// archive (tar pads to whole records).
const gitArchiveTrailMax = 1 << 20

// unpackArchive writes the tree of commit, already checked, into dir from
// git archive, checking every entry again on what the archive holds: its
// path, its kind, and the bytes actually read against the limits (end-of-line
// conversion may grow a file beyond its blob).
func (g *gitRunner) unpackArchive(ctx context.Context, repo, commit, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("read git repository %q: %w", g.display(), err)
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := g.command(actx, repo, "archive", "--format=tar", commit)
	stderr := &gitBoundedBuffer{max: gitStderrMax, keepTail: true}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("read git repository %q: %w", g.display(), err)
	}
	if err := cmd.Start(); err != nil {
		return &Error{Source: g.src, Reason: "read the commit's files failed", Err: err}
	}
	xerr := untarGitArchive(out, dir, skills.NewBudget(g.lim))
	if xerr == nil {
		// The rest is padding; more than that is not an archive of git's.
		if n, _ := io.Copy(io.Discard, io.LimitReader(out, gitArchiveTrailMax+1)); n > gitArchiveTrailMax {
			xerr = fmt.Errorf("git archive wrote more than %d bytes past its end: %w", gitArchiveTrailMax, skills.ErrInvalid)
		}
	}
	if xerr != nil {
		cancel() // git may still be writing; nothing more will be read
	}
	werr := cmd.Wait()
	var we *archiveWriteError
	switch {
	case ctx.Err() != nil:
		return g.stopped(ctx)
	case errors.Is(xerr, skills.ErrLimit), errors.Is(xerr, skills.ErrUnsafePath):
		return g.refuse(xerr)
	case errors.As(xerr, &we):
		return &Error{Source: g.src, Reason: "write the commit's files failed: " + we.Error(), Err: we.err}
	case werr != nil:
		// A git that failed half-way also leaves its archive cut short.
		return g.fail(ctx, gitResult{stderr: stderr.String(), err: werr}, "read the commit's files failed", werr)
	case xerr != nil:
		return g.refuse(xerr)
	}
	return nil
}

// archiveWriteError is a failure to write the tree unpacked from an
// archive (a full disk), not a fault of the archive.
type archiveWriteError struct{ err error }

func (e *archiveWriteError) Error() string { return e.err.Error() }
func (e *archiveWriteError) Unwrap() error { return e.err }

// written wraps a failure to write rel as an *archiveWriteError.
func written(rel string, err error) error {
	return &archiveWriteError{err: skills.RelError(rel, err)}
}

// untarGitArchive unpacks the tar stream of git archive into dir, an empty
// directory: directories, regular files (keeping the execute bit) and
// symlinks (kept as links, for the staging step to confine), nothing else.
// Every path must pass checkGitPath, be new, and lie in a folder the
// archive made; every entry and byte is counted against the limits in b.
// Errors name the path in the repository.
func untarGitArchive(r io.Reader, dir string, b *skills.Budget) error {
	tr := tar.NewReader(r)
	dirs := map[string]bool{"": true}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read git archive: %v: %w", err, skills.ErrInvalid)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // the commit's id, as a comment
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if err := checkGitPath(name); err != nil {
			return err
		}
		parent := path.Dir(name)
		if parent == "." {
			parent = ""
		}
		if !dirs[parent] {
			return fmt.Errorf("path %q: %q is not a folder of the archive: %w", name, parent, skills.ErrUnsafePath)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if _, err := os.Lstat(p); err == nil {
			// A crafted tree may name an entry twice (a link, then a
			// folder of the same name to write through it).
			return fmt.Errorf("path %q: named twice in the tree: %w", name, skills.ErrUnsafePath)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := b.Dir(name); err != nil {
				return err
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				return written(name, err)
			}
			dirs[name] = true
		case tar.TypeReg:
			if err := b.File(name); err != nil {
				return err
			}
			if err := writeArchived(p, name, skills.StoredFileMode(os.FileMode(hdr.Mode)), tr, b); err != nil {
				return err
			}
		case tar.TypeSymlink:
			// Counted as the file it may become, as the tree check counts it.
			n := int64(len(hdr.Linkname))
			if err := b.File(name); err != nil {
				return err
			}
			if err := b.Size(name, n); err != nil {
				return err
			}
			if err := b.Add(name, n); err != nil {
				return err
			}
			if err := os.Symlink(hdr.Linkname, p); err != nil {
				return written(name, err)
			}
		default:
			return fmt.Errorf("path %q: unsupported archive entry of type %q: %w", name, hdr.Typeflag, skills.ErrInvalid)
		}
	}
}

// writeArchived writes one regular file of the archive, new, counting its
// bytes as they are read.
func writeArchived(p, rel string, mode os.FileMode, r io.Reader, b *skills.Budget) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, mode)
	if err != nil {
		return written(rel, err)
	}
	w := &recordWriter{w: f}
	_, err = b.CopyCounted(w, r, rel)
	var le *skills.LimitError
	switch {
	case err == nil:
		if err = f.Chmod(mode); err != nil { // the umask may have narrowed it
			err = written(rel, err)
		}
	case w.err != nil:
		err = written(rel, err)
	case !errors.As(err, &le):
		err = fmt.Errorf("%q: read git archive: %v: %w", rel, err, skills.ErrInvalid)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = written(rel, cerr)
	}
	return err
}

// recordWriter keeps the first error of the writer it wraps, to tell a
// failed write from a failed read.
type recordWriter struct {
	w   io.Writer
	err error
}

func (r *recordWriter) Write(p []byte) (int, error) {
	n, err := r.w.Write(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}
