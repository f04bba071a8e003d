package git

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"skillfs/skills"
)

// DefaultCloneTimeout bounds a whole Clone call when CloneOptions.Timeout
// is not set: listing, fetching, checking and checking out.
const DefaultCloneTimeout = 5 * time.Minute

// CloneOptions bounds what Clone may fetch and write.
type CloneOptions struct {
	// Limits are the import limits the commit's tree must meet before
	// anything is checked out; unset fields take DefaultLimits. Its
	// MaxTotalBytes also bounds the fetched objects on disk.
	Limits skills.Limits
	// Timeout bounds the whole clone; zero or negative means
	// DefaultCloneTimeout. A deadline of ctx applies as well.
	Timeout time.Duration
	// Confine, when set, is asked about every folder of this machine that
	// a read of a repository here takes objects from — its object
	// directory, found through a .git file or commondir, and the
	// alternates that lists — before anything is read: an error refuses
	// the read. A repository here whose objects cannot be found is then
	// refused too (git would look for them itself).
	Confine func(dir string) error
	// Remote, when set, is what the clone may read, for a caller not
	// trusted with the daemon's network (see RemotePolicy): checked
	// before git runs.
	Remote *RemotePolicy
	// viaClone reads a repository on this machine by cloning it, as a
	// remote one is read, instead of from its objects (tests of the clone).
	viaClone bool
}

func (o CloneOptions) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultCloneTimeout
	}
	return o.Timeout
}

// cloneTimeoutError is the cause of a clone's own deadline, so the error
// says which timeout ran out.
type cloneTimeoutError struct{ d time.Duration }

func (e *cloneTimeoutError) Error() string { return "timed out after " + e.d.String() }

// Unwrap lets errors.Is(err, context.DeadlineExceeded) match.
func (e *cloneTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// gitWatchInterval is how often the size of a clone is measured while git
// writes to it. Git is killed at the first measurement past the limit, so it
// can overshoot by what it writes in one interval.
const gitWatchInterval = 100 * time.Millisecond

// gitNameMax is the longest file name (one path component) a tree may hold:
// NAME_MAX on Linux, and what most file systems accept.
const gitNameMax = 255

// gitRecordMax bounds one record of git ls-tree output; a longer path could
// not be checked out on any file system.
const gitRecordMax = 64 << 10

// watchSize returns a context derived from ctx that is cancelled, with the
// error of over as its cause, once measure reports more than limit bytes; it
// measures every gitWatchInterval. Commands run under the returned context
// are killed with their process group when that happens. stop ends the
// watch and measures once more, so that growth between the last poll and the
// end is caught too; it returns the limit error, if any.
func watchSize(ctx context.Context, measure func() int64, limit int64, over func(n int64) error) (wctx context.Context, stop func() error) {
	wctx, cancel := context.WithCancelCause(ctx)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(gitWatchInterval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-wctx.Done():
				return
			case <-t.C:
				if n := measure(); n > limit {
					cancel(over(n))
					return
				}
			}
		}
	}()
	return wctx, func() error {
		close(quit)
		<-done
		defer cancel(nil)
		var le *skills.LimitError
		if wctx.Err() != nil && errors.As(context.Cause(wctx), &le) {
			return le
		}
		if n := measure(); n > limit {
			return over(n)
		}
		return nil
	}
}

// diskBytes sums the sizes of the regular files below dir, skipping the
// top-level entry named skip when it is not "". Files that vanish while it
// walks (git renames its temporary packs) are not counted.
func diskBytes(dir, skip string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if skip != "" && d.IsDir() && p == filepath.Join(dir, skip) {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// gitTreeEntry is one record of git ls-tree -r -t -l -z.
type gitTreeEntry struct {
	mode string // as git prints it: 040000, 100644, 100755, 120000, 160000
	typ  string // tree, blob or commit
	size int64  // blob size; -1 for trees and submodules
	path string // slash path from the repository root, as stored
}

// parseLsTreeRecord reads "<mode> SP <type> SP <object> SP <size> TAB <path>",
// the record of git ls-tree -l -z without its NUL. The path is everything
// after the first tab, verbatim.
func parseLsTreeRecord(rec []byte) (gitTreeEntry, error) {
	meta, path, ok := bytes.Cut(rec, []byte{'\t'})
	if !ok {
		return gitTreeEntry{}, fmt.Errorf("git ls-tree printed a record without a path: %w", skills.ErrInvalid)
	}
	f := strings.Fields(string(meta))
	if len(f) != 4 || !isHexRef(f[2]) {
		return gitTreeEntry{}, fmt.Errorf("git ls-tree printed a malformed record %q: %w", meta, skills.ErrInvalid)
	}
	e := gitTreeEntry{mode: f[0], typ: f[1], size: -1, path: string(path)}
	if f[3] != "-" {
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil || n < 0 {
			return gitTreeEntry{}, fmt.Errorf("git ls-tree printed a malformed size %q: %w", f[3], skills.ErrInvalid)
		}
		e.size = n
	}
	return e, nil
}

// checkGitPath refuses a path of a repository's tree that could not be
// imported as it is named: one CleanRelPath rejects or would change, a
// component longer than gitNameMax, or a .git component in any case (a
// ".GIT" directory is git's own on a case-insensitive file system).
func checkGitPath(p string) error {
	clean, err := skills.CleanRelPath(p)
	if err != nil {
		return err
	}
	if clean != p {
		return fmt.Errorf("path %q: empty or \".\" component: %w", p, skills.ErrUnsafePath)
	}
	for _, c := range strings.Split(p, "/") {
		if len(c) > gitNameMax {
			return fmt.Errorf("path %q: a name of %d bytes, over %d: %w", p, len(c), gitNameMax, skills.ErrUnsafePath)
		}
		if strings.EqualFold(c, ".git") {
			return fmt.Errorf("path %q: %q is reserved for git: %w", p, c, skills.ErrUnsafePath)
		}
	}
	return nil
}

// accountGitEntry checks one tree entry against the path rules and adds it to b the
// way StageDir would count what checkout makes of it.
func accountGitEntry(b *skills.Budget, e gitTreeEntry) error {
	if err := checkGitPath(e.path); err != nil {
		return err
	}
	switch {
	case e.typ == "tree" && e.mode == "040000":
		return b.Dir(e.path)
	case e.typ == "commit" && e.mode == "160000":
		// A submodule is not fetched; checkout leaves an empty directory.
		return b.Dir(e.path)
	case e.typ == "blob" && (e.mode == "100644" || e.mode == "100755" || e.mode == "120000"):
		// A symlink (120000) is counted as the file it would be, so the
		// limits hold whatever the staging step makes of it.
		if e.size < 0 {
			return fmt.Errorf("path %q: blob without a size: %w", e.path, skills.ErrInvalid)
		}
		if err := b.File(e.path); err != nil {
			return err
		}
		if err := b.Size(e.path, e.size); err != nil {
			return err
		}
		return b.Add(e.path, e.size)
	}
	return fmt.Errorf("path %q: unsupported tree entry %s %s: %w", e.path, e.mode, e.typ, skills.ErrInvalid)
}

// checkTree reads the tree of commit from the objects in dir/.git and holds it
// to the limits before anything is checked out: every path, the counts, the
// depth, every blob size, their total, and the total against the fetched
// objects on disk (gitBytes) for the compression ratio. Git is killed at the
// first entry over a limit, so a tree that names millions of paths costs no
// more than the limits. A refusal is a *Error wrapping the *LimitError or
// the ErrUnsafePath error, which name the path in the repository.
func (g *gitRunner) checkTree(ctx context.Context, dir, commit string, gitBytes int64) error {
	b := skills.NewBudget(g.lim)
	res, err := g.stream(ctx, dir, func(rec []byte) error {
		e, err := parseLsTreeRecord(rec)
		if err != nil {
			return err
		}
		return accountGitEntry(b, e)
	}, "ls-tree", "-r", "-t", "-l", "-z", "--full-tree", commit)
	if err != nil {
		return g.refuse(err)
	}
	if res.err != nil {
		return g.fail(ctx, res, "list the commit's files failed", res.err)
	}
	if err := b.Ratio("", uint64(b.Bytes), uint64(gitBytes)); err != nil {
		return g.refuse(err)
	}
	return nil
}

// refuse reports a repository that does not meet the import rules. The
// reason is err's own message, which names the path in the repository.
func (g *gitRunner) refuse(err error) error {
	return &Error{Source: g.src, Reason: err.Error(), Err: err}
}

// stream runs git like run but hands each NUL-terminated record of its
// standard output to each as it arrives. When each fails, git's process
// group is killed and that error is returned as well as the command's.
func (g *gitRunner) stream(ctx context.Context, dir string, each func(rec []byte) error, args ...string) (gitResult, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := g.command(sctx, dir, args...)
	stderr := &gitBoundedBuffer{max: gitStderrMax, keepTail: true}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return gitResult{err: err}, nil
	}
	if err := cmd.Start(); err != nil {
		return gitResult{err: err}, nil
	}
	cbErr, rerr := readRecords(out, each)
	if cbErr != nil {
		cancel() // git may still be writing; nothing more will be read
	}
	werr := cmd.Wait()
	if werr == nil && rerr != nil {
		werr = rerr
	}
	return gitResult{stderr: stderr.String(), err: werr}, cbErr
}

// readRecords reads NUL-terminated records from r until the end or the first
// error of each, which it returns first; read errors come second.
func readRecords(r io.Reader, each func(rec []byte) error) (cbErr, rerr error) {
	br := bufio.NewReaderSize(r, gitRecordMax)
	for {
		rec, err := br.ReadSlice(0)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return fmt.Errorf("a path of more than %d bytes: %w", gitRecordMax, skills.ErrUnsafePath), nil
		case err == nil:
			if cbErr := each(rec[:len(rec)-1]); cbErr != nil {
				return cbErr, nil
			}
		case errors.Is(err, io.EOF):
			if len(rec) > 0 { // -z ends every record with NUL; check a stray tail all the same
				return each(rec), nil
			}
			return nil, nil
		default:
			return nil, err
		}
	}
}
