package skills

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"syscall"
)

// OpenRegular opens a file for reading and checks, on the open descriptor,
// that it is a regular file: a FIFO, device or socket is refused with a
// *SpecialFileError before a byte is read. The open never blocks (O_NONBLOCK:
// a FIFO without a writer would otherwise hang the caller for good) and,
// unless follow is set, does not follow a symlink at the last component.
// display is the name errors use for the file: the path as the user gave it
// or as it lies in the source, never a temporary copy's.
func OpenRegular(path, display string, follow bool) (*os.File, iofs.FileInfo, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		if pe, ok := err.(*os.PathError); ok {
			pe.Path = display
		}
		if errors.Is(err, iofs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%w: %w", err, ErrNotFound)
		}
		if !follow && errors.Is(err, syscall.ELOOP) {
			return nil, nil, &SpecialFileError{Path: display, Kind: "symlink"}
		}
		if errors.Is(err, syscall.ENXIO) {
			// open(2) refuses a unix socket (and a device without a
			// driver) before there is a descriptor to check: it is a
			// special file all the same.
			stat := os.Stat
			if !follow {
				stat = os.Lstat
			}
			if fi, serr := stat(path); serr == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
				return nil, nil, &SpecialFileError{Path: display, Kind: FileKind(fi.Mode())}
			}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%q: %w", display, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		if fi.IsDir() {
			return nil, nil, fmt.Errorf("%q is a directory, not a file: %w", display, ErrInvalid)
		}
		return nil, nil, &SpecialFileError{Path: display, Kind: FileKind(fi.Mode())}
	}
	return f, fi, nil
}

// ReadRegular reads a whole regular file (see OpenRegular) of at most max
// bytes. The bytes are counted as they are read; the size the file claims is
// never trusted, since it may grow while being read. More than max bytes is
// a *LimitError for the per-file limit naming display.
func ReadRegular(path, display string, max int64, follow bool) ([]byte, error) {
	f, _, err := OpenRegular(path, display, follow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readCapped(f, display, max)
}

// readCapped reads r to its end, or fails once more than max bytes came.
func readCapped(r io.Reader, display string, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", display, err)
	}
	if int64(len(data)) > max {
		return nil, &LimitError{Limit: LimitFileBytes, Value: int64(len(data)), Max: max, Path: display}
	}
	return data, nil
}

// ReadCapped reads everything r yields, up to max bytes; more is a
// *LimitError for the per-file limit naming display. For streams with no
// size to check (standard input, a request body), bytes are counted as they
// arrive.
func ReadCapped(r io.Reader, display string, max int64) ([]byte, error) {
	return readCapped(r, display, max)
}

// ReadManifest reads a SKILL.md (see ReadRegular) of at most max bytes;
// more is a *LimitError for the manifest limit.
func ReadManifest(path, display string, max int64, follow bool) ([]byte, error) {
	data, err := ReadRegular(path, display, max, follow)
	var le *LimitError
	if errors.As(err, &le) {
		le.Limit = LimitManifest
	}
	return data, err
}
