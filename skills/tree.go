package skills

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ReservedPrefix starts the names of skillfs's own bookkeeping files, which
// the filesystem hides; no skill may hold such a name.
const ReservedPrefix = ".skillfs"

// MetaFileName is the metadata file at the root of every published version:
// the catalog entry and provenance it was published with (see VersionMeta).
// It is not part of the tree hash, never exported and never served (the
// filesystem hides every name starting with ".skillfs").
const MetaFileName = ".skillfs-version.json"

// StoredFileMode is the mode a stored file gets: only the owner execute bit
// of the original survives, so content identity does not depend on umasks.
func StoredFileMode(m iofs.FileMode) iofs.FileMode {
	if m&0o100 != 0 {
		return 0o755
	}
	return 0o644
}

// SpecialFileError reports an entry of a source that is neither a regular
// file nor a directory: a device, socket or fifo, a symlink to one, or a
// symlink where none may be.
type SpecialFileError struct {
	Path string // slash path below the source root, or the archive entry name
	Kind string // "symlink", "fifo", "socket", "character device", ...
	Link string // when Path is a symlink to the special file: its target as written
}

// Error implements error.
func (e *SpecialFileError) Error() string {
	if e.Link != "" {
		return fmt.Sprintf("%q is a symlink to %q, a %s: only regular files and directories are allowed", e.Path, e.Link, e.Kind)
	}
	return fmt.Sprintf("%q is a %s: only regular files and directories are allowed", e.Path, e.Kind)
}

// Unwrap lets errors.Is(err, ErrSpecialFile) match.
func (e *SpecialFileError) Unwrap() error { return ErrSpecialFile }

// SpecialFilesError reports several special files of one source at once.
// errors.Is(err, ErrSpecialFile) matches, and errors.As to a
// *SpecialFileError finds the first.
type SpecialFilesError struct {
	Files []*SpecialFileError // in the order found, at least two
}

// Error implements error.
func (e *SpecialFilesError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d entries are not regular files or directories, the only kinds allowed: ", len(e.Files))
	for i, f := range e.Files {
		if i > 0 {
			b.WriteString("; ")
		}
		if f.Link != "" {
			fmt.Fprintf(&b, "%q is a symlink to %q, a %s", f.Path, f.Link, f.Kind)
		} else {
			fmt.Fprintf(&b, "%q is a %s", f.Path, f.Kind)
		}
	}
	return b.String()
}

// Unwrap returns every *SpecialFileError.
func (e *SpecialFilesError) Unwrap() []error {
	out := make([]error, len(e.Files))
	for i, f := range e.Files {
		out[i] = f
	}
	return out
}

// FileKind names a non-regular file type for error messages.
func FileKind(m iofs.FileMode) string {
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

// RemoveTree removes p and everything below it, making read-only directories
// (published content, a staged copy of it) writable by their owner alone
// first. A missing p is not an error.
func RemoveTree(p string) error {
	if _, err := os.Lstat(p); errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d iofs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// RelError names the entry rel in an error about it, dropping the absolute
// path a *PathError or *LinkError carries: that path is a temporary copy or
// the staging area, which means nothing to whoever named the source. The
// errno stays wrapped (errors.Is(err, syscall.ENOSPC) still holds).
func RelError(rel string, err error) error {
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
