package skills

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// reservedPrefix starts the names of skillfs's own bookkeeping files, which
// the filesystem hides; no skill may hold such a name.
const reservedPrefix = ".skillfs"

// lowerManifestName is accepted at a skill root when there is no SKILL.md and
// renamed to ManifestName in the staged copy.
const lowerManifestName = "skill.md"

// StageResult describes a staged skill tree.
type StageResult struct {
	Files    int      // regular files copied
	Bytes    int64    // their total size
	Warnings []string // entries skipped or renamed, one line each
}

// StageDir copies the skill rooted at src into dst, enforcing lim and the
// package rules: only regular files and directories (a symlink, device, socket
// or fifo is an error wrapping ErrSpecialFile naming its relative path), names
// confined by CleanRelPath, no .git, .DS_Store or __MACOSX (skipped with a
// warning), files stored 0644 or 0755 by the owner execute bit, directories
// 0755, mtimes kept. A root skill.md with no SKILL.md beside it becomes
// SKILL.md. A src without either (or with a directory by that name) is
// ErrNoManifest. Names starting with ".skillfs" are reserved (ErrUnsafePath),
// except a MetaFileName at the root, which is skipped with a warning. Errors
// name paths relative to src, never src itself, which is often a temporary
// copy: the caller names the source.
//
// src itself may be a symlink to a directory (the caller named it); nothing
// below it is followed. dst must not exist or be an empty directory; on any
// error it is removed entirely.
func StageDir(src, dst string, lim Limits) (res *StageResult, err error) {
	root, err := filepath.EvalSymlinks(src)
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("stage: not a directory: %w", ErrInvalid)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	var hasUpper, hasLower bool
	for _, e := range ents {
		switch e.Name() {
		case ManifestName:
			hasUpper = true
		case lowerManifestName:
			hasLower = true
		default:
			continue
		}
		if e.IsDir() {
			return nil, fmt.Errorf("stage: %s is a directory, not a file: %w", e.Name(), ErrNoManifest)
		}
	}
	if !hasUpper && !hasLower {
		return nil, fmt.Errorf("stage: %w", ErrNoManifest)
	}
	if err := prepareDst(dst); err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	defer func() {
		if err != nil {
			_ = removeTree(dst)
			res = nil
		}
	}()
	s := &stager{b: newBudget(lim), res: &StageResult{}, renameLower: hasLower && !hasUpper}
	if err := s.copyDir(root, dst, "", ents); err != nil {
		return nil, err
	}
	if err := os.Chtimes(dst, fi.ModTime(), fi.ModTime()); err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	s.res.Files = s.b.files
	s.res.Bytes = s.b.bytes
	return s.res, nil
}

type stager struct {
	b           *budget
	res         *StageResult
	renameLower bool
}

// junkName reports whether an entry is bookkeeping of another tool that a
// skill never needs.
func junkName(name string) bool {
	return name == ".git" || name == ".DS_Store" || name == "__MACOSX"
}

// copyDir copies the entries of srcDir (already read as ents) into dstDir,
// which exists; rel is srcDir's slash path below the source root.
func (s *stager) copyDir(srcDir, dstDir, rel string, ents []os.DirEntry) error {
	for _, e := range ents {
		name := e.Name()
		crel := path.Join(rel, name)
		if junkName(name) {
			s.res.Warnings = append(s.res.Warnings, fmt.Sprintf("skipped %s", crel))
			continue
		}
		if crel == MetaFileName {
			// A copy of a stored version (e.g. taken from the quarantine)
			// brings the store's metadata along: the store writes its own.
			s.res.Warnings = append(s.res.Warnings, fmt.Sprintf("skipped %s: skillfs metadata, not content", crel))
			continue
		}
		if strings.HasPrefix(name, reservedPrefix) {
			// The filesystem never serves these names; storing one would
			// keep content no agent can read.
			return fmt.Errorf("%q: names starting with %q are reserved for skillfs: %w", crel, reservedPrefix, ErrUnsafePath)
		}
		if _, err := CleanRelPath(crel); err != nil {
			return err
		}
		sp := filepath.Join(srcDir, name)
		info, err := os.Lstat(sp)
		if err != nil {
			return relError(crel, err)
		}
		dname := name
		if rel == "" && name == lowerManifestName && s.renameLower {
			dname = ManifestName
			s.res.Warnings = append(s.res.Warnings, fmt.Sprintf("renamed %s to %s", name, ManifestName))
		}
		dp := filepath.Join(dstDir, dname)
		switch {
		case info.IsDir():
			if err := s.b.dir(crel); err != nil {
				return err
			}
			children, err := os.ReadDir(sp)
			if err != nil {
				return relError(crel, err)
			}
			if err := os.Mkdir(dp, 0o755); err != nil {
				return relError(crel, err)
			}
			if err := os.Chmod(dp, 0o755); err != nil {
				return relError(crel, err)
			}
			if err := s.copyDir(sp, dp, crel, children); err != nil {
				return err
			}
			if err := os.Chtimes(dp, info.ModTime(), info.ModTime()); err != nil {
				return relError(crel, err)
			}
		case info.Mode().IsRegular():
			if err := s.b.file(crel); err != nil {
				return err
			}
			if err := s.b.size(crel, info.Size()); err != nil {
				return err
			}
			manifest := rel == "" && (name == ManifestName || name == lowerManifestName)
			if manifest {
				if err := s.b.manifest(crel, info.Size()); err != nil {
					return err
				}
			}
			if err := s.copyFile(sp, dp, crel, info); err != nil {
				return err
			}
			if manifest { // it may have grown since it was stat'ed
				if fi, err := os.Lstat(dp); err != nil {
					return relError(crel, err)
				} else if err := s.b.manifest(crel, fi.Size()); err != nil {
					return err
				}
			}
		default:
			return &SpecialFileError{Path: crel, Kind: kindOf(info.Mode())}
		}
	}
	return nil
}

// copyFile copies one regular file, counting the bytes actually read: the
// file may have grown since it was stat'ed.
func (s *stager) copyFile(sp, dp, rel string, info iofs.FileInfo) error {
	// O_NOFOLLOW and O_NONBLOCK: if the entry was swapped for a symlink or a
	// fifo after Lstat, fail (or return at once) instead of following it or
	// blocking; the Stat below then rejects it.
	in, err := os.OpenFile(sp, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return relError(rel, err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return relError(rel, err)
	}
	if !fi.Mode().IsRegular() || !os.SameFile(fi, info) {
		return fmt.Errorf("%q changed while being read: %w", rel, ErrSpecialFile)
	}
	mode := storedFileMode(fi.Mode())
	out, err := os.OpenFile(dp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return relError(rel, err)
	}
	_, err = s.b.copyCounted(out, in, rel)
	var le *LimitError
	if err != nil && !errors.As(err, &le) {
		err = relError(rel, err)
	}
	if err == nil {
		err = out.Chmod(mode) // the umask may have narrowed it
	}
	if cerr := out.Close(); err == nil && cerr != nil {
		err = relError(rel, cerr)
	}
	if err != nil {
		return err
	}
	if err := os.Chtimes(dp, fi.ModTime(), fi.ModTime()); err != nil {
		return relError(rel, err)
	}
	return nil
}

// copyCounted copies r to w while enforcing the per-file and total limits on
// the bytes actually seen, not on any declared size, and adds them to the
// total. Read and write errors are returned as they are, for the caller to
// wrap; limit errors name rel.
func (b *budget) copyCounted(w io.Writer, r io.Reader, rel string) (int64, error) {
	return b.copyCountedRatio(w, r, rel, nil)
}

// copyCountedRatio is copyCounted with a hook run after every chunk with the
// bytes of this file so far, for checks such as the compression ratio.
func (b *budget) copyCountedRatio(w io.Writer, r io.Reader, rel string, check func(n int64) error) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, rerr := r.Read(buf)
		if k > 0 {
			n += int64(k)
			if err := b.size(rel, n); err != nil {
				return n, err
			}
			if err := b.add(rel, int64(k)); err != nil {
				return n, err
			}
			if check != nil {
				if err := check(n); err != nil {
					return n, err
				}
			}
			if _, err := w.Write(buf[:k]); err != nil {
				return n, err
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// storedFileMode is the mode a stored file gets: only the owner execute bit
// of the original survives, so content identity does not depend on umasks.
func storedFileMode(m iofs.FileMode) iofs.FileMode {
	if m&0o100 != 0 {
		return 0o755
	}
	return 0o644
}

// SpecialFileError reports an entry of a source that is neither a regular
// file nor a directory: a symlink, device, socket or fifo.
type SpecialFileError struct {
	Path string // slash path below the source root, or the archive entry name
	Kind string // "symlink", "fifo", "socket", "character device", ...
}

// Error implements error.
func (e *SpecialFileError) Error() string {
	return fmt.Sprintf("%q is a %s: only regular files and directories are allowed", e.Path, e.Kind)
}

// Unwrap lets errors.Is(err, ErrSpecialFile) match.
func (e *SpecialFileError) Unwrap() error { return ErrSpecialFile }

// kindOf names a non-regular file type for error messages.
func kindOf(m iofs.FileMode) string {
	switch {
	case m&iofs.ModeSymlink != 0:
		return "symlink"
	case m&iofs.ModeNamedPipe != 0:
		return "fifo"
	case m&iofs.ModeSocket != 0:
		return "socket"
	case m&iofs.ModeCharDevice != 0:
		return "character device"
	case m&iofs.ModeDevice != 0:
		return "block device"
	case m&iofs.ModeIrregular != 0:
		return "irregular file"
	}
	return "special file"
}

// prepareDst makes dst an empty directory, refusing one that already holds
// something: it is about to be removed on error and must not take anything
// else with it.
func prepareDst(dst string) error {
	fi, err := os.Lstat(dst)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("create %q: %w", dst, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("check %q: %w", dst, err)
	case !fi.IsDir():
		return fmt.Errorf("destination %q is not a directory: %w", dst, ErrExists)
	}
	f, err := os.Open(dst)
	if err != nil {
		return fmt.Errorf("check %q: %w", dst, err)
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("destination %q is not empty: %w", dst, ErrExists)
	}
	return nil
}

// removeTree removes p and everything below it, making read-only directories
// writable first. A missing p is not an error.
func removeTree(p string) error {
	if _, err := os.Lstat(p); errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d iofs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(q, 0o755)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// RelError names the entry rel in an error about it, without the absolute
// path an *os.PathError carries (see relError).
func RelError(rel string, err error) error { return relError(rel, err) }

// relError names the entry rel in an error about it, dropping the absolute
// path a *PathError or *LinkError carries: that path is a temporary copy or
// the staging area, which means nothing to whoever named the source. The
// errno stays wrapped (errors.Is(err, syscall.ENOSPC) still holds).
func relError(rel string, err error) error {
	var le0 *LimitError
	if errors.As(err, &le0) {
		return err // names its path already
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%q: %s: %w", rel, pe.Op, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%q: %s: %w", rel, le.Op, le.Err)
	}
	return fmt.Errorf("%q: %w", rel, err)
}
