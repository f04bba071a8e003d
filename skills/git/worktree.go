package git

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"skillfs/skills"
)

// WorktreeState tells, for a local folder inside a git working tree, the
// commit checked out (HEAD) and whether the folder holds exactly that
// commit's files below it: WorktreeClean, or WorktreeModified when a file
// was changed, added (ignored files included) or removed. A folder in no
// working tree, or in one without commits, gives "", "", nil.
//
// Only git's plumbing that reads objects runs (rev-parse, ls-tree), with the
// same scrubbed environment and safe configuration as Clone; the files
// are hashed here, so no filter, hook or other program a repository's
// configuration names ever runs.
func WorktreeState(ctx context.Context, dir string) (commit, state string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	if !inWorktree(abs) {
		return "", "", nil
	}
	g, err := newGitRunner(Source{URL: abs}, abs, skills.Limits{})
	if err != nil {
		return "", "", err
	}
	defer g.close()
	// A working tree the daemon's user does not own is still only read.
	safe := []string{"-c", "safe.directory=*"}
	out, res := g.run(ctx, abs, append(safe, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")...)
	if res.err != nil {
		return "", "", nil // no commits yet
	}
	commit = strings.TrimSpace(string(out))
	if !isHexRef(commit) {
		return "", "", fmt.Errorf("inspect working tree: unexpected commit %q", commit)
	}
	format := "sha1"
	if out, res := g.run(ctx, abs, append(safe, "rev-parse", "--show-object-format")...); res.err == nil {
		format = strings.TrimSpace(string(out))
	}
	out, res = g.run(ctx, abs, append(safe, "ls-tree", "-r", "-z", "HEAD")...)
	if res.err != nil {
		return "", "", fmt.Errorf("inspect working tree: list commit %s: %w", commit, res.err)
	}
	want, err := parseLsTreeBlobs(out)
	if err != nil {
		return "", "", fmt.Errorf("inspect working tree: %w", err)
	}
	same, err := treeMatches(abs, want, format)
	if err != nil {
		return "", "", fmt.Errorf("inspect working tree: %w", err)
	}
	if same {
		return commit, skills.WorktreeClean, nil
	}
	return commit, skills.WorktreeModified, nil
}

// inWorktree reports whether dir or one of its parents holds .git.
func inWorktree(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return true
		}
		if filepath.Dir(d) == d {
			return false
		}
	}
}

// gitBlob is what a commit holds at a path: mode and object id.
type gitBlob struct {
	mode string // "100644", "100755", "120000"
	id   string
}

// parseLsTreeBlobs reads `git ls-tree -r -z` output ("<mode> <type>
// <id>\t<path>\0" records), keeping blobs; submodules (commits) cannot be
// compared and are left out.
func parseLsTreeBlobs(out []byte) (map[string]gitBlob, error) {
	m := map[string]gitBlob{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		f := strings.Fields(string(meta))
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("unexpected ls-tree record %q", rec)
		}
		if f[1] != "blob" {
			continue
		}
		m[string(p)] = gitBlob{mode: f[0], id: f[2]}
	}
	return m, nil
}

// treeMatches reports whether the files below root are exactly want, by
// path, mode and git object id.
func treeMatches(root string, want map[string]gitBlob, format string) (bool, error) {
	seen := 0
	differ := errors.New("differs")
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		w, ok := want[rel]
		if !ok {
			return differ // added
		}
		seen++
		id, mode, err := gitObjectID(p, d, format)
		if err != nil {
			return err
		}
		if id != w.id || mode != w.mode {
			return differ
		}
		return nil
	})
	if errors.Is(err, differ) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return seen == len(want), nil // fewer: something was removed
}

// gitObjectID hashes a file the way git stores it: a symlink as its target,
// a regular file as its bytes; mode as git writes it.
func gitObjectID(p string, d iofs.DirEntry, format string) (id, mode string, err error) {
	var h hash.Hash = sha1.New()
	if format == "sha256" {
		h = sha256.New()
	}
	if d.Type()&iofs.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return "", "", err
		}
		io.WriteString(h, "blob "+strconv.Itoa(len(target))+"\x00"+target)
		return hex.EncodeToString(h.Sum(nil)), "120000", nil
	}
	if !d.Type().IsRegular() {
		return "", "special", nil // never in a commit: a difference
	}
	f, fi, err := skills.OpenRegular(p, path.Base(p), false)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	io.WriteString(h, "blob "+strconv.FormatInt(fi.Size(), 10)+"\x00")
	n, err := io.Copy(h, f)
	if err != nil {
		return "", "", err
	}
	if n != fi.Size() {
		return "", "", fmt.Errorf("%s changed while being read", p)
	}
	mode = "100644"
	if fi.Mode()&0o100 != 0 {
		mode = "100755"
	}
	return hex.EncodeToString(h.Sum(nil)), mode, nil
}
