package bind

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// fileID identifies a file independently of the paths that reach it.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{dev: uint64(st.Dev), ino: st.Ino} }

// fence is what a bind target must stay out of, identified in the daemon's
// namespace: the data directory, and every file of the daemon's FUSE mount;
// and what it must not cover, found by path where the bind is made: the
// data directory and the mount root.
type fence struct {
	home     fileID
	fuseDev  uint64
	homePath string
	mntPath  string
}

// fence identifies the data directory and the mount now, so that one moved
// or mounted again since the start is what counts.
func (m Binder) fence() (*fence, error) {
	var home, mnt unix.Stat_t
	if err := unix.Stat(m.Home, &home); err != nil {
		return nil, fmt.Errorf("stat the data directory: %w", err)
	}
	if err := unix.Stat(m.MountRoot, &mnt); err != nil {
		return nil, fmt.Errorf("stat the mount root: %w", err)
	}
	return &fence{home: idOf(&home), fuseDev: uint64(mnt.Dev), homePath: m.Home, mntPath: m.MountRoot}, nil
}

// check refuses the directory open at fd (named path in messages) if it or
// any of its ancestors, up to the root of the calling thread's namespace, is
// the data directory or lies in the daemon's mount. A target that is itself
// the root is refused too. The walk up follows "..", which crosses from the
// root of a mount to where it is mounted, so it sees the ancestors the
// target has there, whatever names they go by.
func (f *fence) check(fd int, path string) error { return f.checkFolder(fd, path, false) }

// checkFolder is check, the root itself allowed when rootOK (a folder an
// API socket is made in).
func (f *fence) checkFolder(fd int, path string, rootOK bool) error {
	cur := fd
	defer func() {
		if cur != fd {
			unix.Close(cur)
		}
	}()
	for range 4096 {
		var st unix.Stat_t
		err := unix.Fstat(cur, &st)
		switch {
		case err != nil && cur == fd && isDeadMount(err):
			// The dead mount of a crashed daemon's bind, to be replaced
			// or stacked upon; its ancestors still count.
		case err != nil:
			return fmt.Errorf("mount target %q: %w", path, err)
		case uint64(st.Dev) == f.fuseDev:
			return fmt.Errorf("mount target %q is inside the daemon's own mount: %w", path, skills.ErrInvalid)
		case idOf(&st) == f.home:
			return fmt.Errorf("mount target %q is inside the data directory: %w", path, skills.ErrInvalid)
		}
		parent, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("mount target %q: open a parent: %w", path, err)
		}
		root, err := isRootOf(cur, parent, &st)
		if err != nil {
			unix.Close(parent)
			return fmt.Errorf("mount target %q: %w", path, err)
		}
		if root {
			unix.Close(parent)
			if cur == fd && !rootOK {
				return fmt.Errorf("mount target %q is the root directory: %w", path, skills.ErrInvalid)
			}
			return nil
		}
		if cur != fd {
			unix.Close(cur)
		}
		cur = parent
	}
	return fmt.Errorf("mount target %q is nested too deep: %w", path, skills.ErrLimit)
}

// place is where a directory is in a namespace: the mount it is reached
// through and its identity. The same directory bound elsewhere is another
// place, and a bind over one place hides what is below it only there.
type place struct {
	mnt uint64
	id  fileID
}

// placeOf is the place of the directory open at fd.
func placeOf(fd int) (place, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_MNT_ID, &stx); err != nil {
		return place{}, fmt.Errorf("statx: %w", err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return place{}, errors.New("the kernel does not report mount ids (STATX_MNT_ID)")
	}
	return place{mnt: stx.Mnt_id, id: fileID{dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), ino: stx.Ino}}, nil
}

// covers refuses the directory open at fd (named path in messages) if the
// data directory or the daemon's mount root lies below it in the calling
// thread's namespace: a bind there would hide them (the store, the socket,
// the sessions). Each is looked up there by its path and counts only if
// that path reaches the very directory; a sandbox's namespace may not show
// it at all, and then nothing there covers it.
func (f *fence) covers(fd int, path string) error {
	want, err := placeOf(fd)
	if isDeadMount(err) {
		return nil // a dead mount holds nothing
	}
	if err != nil {
		return fmt.Errorf("mount target %q: %w", path, err)
	}
	for _, c := range []struct {
		path, what string
		is         func(*unix.Stat_t) bool
	}{
		{f.homePath, "the data directory", func(st *unix.Stat_t) bool { return idOf(st) == f.home }},
		{f.mntPath, "the daemon's mount root", func(st *unix.Stat_t) bool { return uint64(st.Dev) == f.fuseDev }},
	} {
		below, err := isBelow(c.path, c.is, want)
		if err != nil {
			return fmt.Errorf("mount target %q: look for %s at %q: %w", path, c.what, c.path, err)
		}
		if below {
			return fmt.Errorf("mount target %q contains %s (%s): %w", path, c.what, c.path, skills.ErrInvalid)
		}
	}
	return nil
}

// isBelow tells whether the directory at path lies at or below the place
// want in the calling thread's namespace: whether want is one of the places
// the walk up from it passes. If path does not reach a directory here, or
// reaches one that is not the one meant (is says), it is not below.
func isBelow(path string, is func(*unix.Stat_t) bool, want place) (bool, error) {
	if path == "" {
		return false, nil
	}
	cur, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EACCES),
		errors.Is(err, unix.ELOOP), isDeadMount(err):
		return false, nil // not there, so nothing here covers it
	case err != nil:
		return false, err
	}
	defer func() { unix.Close(cur) }()
	var st unix.Stat_t
	if err := unix.Fstat(cur, &st); isDeadMount(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if !is(&st) {
		return false, nil // another directory goes by that name here
	}
	for range 4096 {
		p, err := placeOf(cur)
		if err != nil {
			return false, err
		}
		if p == want {
			return true, nil
		}
		if err := unix.Fstat(cur, &st); err != nil {
			return false, err
		}
		parent, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, fmt.Errorf("open a parent: %w", err)
		}
		root, err := isRootOf(cur, parent, &st)
		if err != nil || root {
			unix.Close(parent)
			return false, err
		}
		unix.Close(cur)
		cur = parent
	}
	return false, fmt.Errorf("nested too deep: %w", skills.ErrLimit)
}

// isRootOf tells whether the directory open at cur (its stat in st, zero if
// it could not be had) is the root, given its ".." open at parent: ".." of
// the root is the root itself. The file alone does not tell: a directory
// bound onto its own subdirectory has itself as "..", in another mount.
func isRootOf(cur, parent int, st *unix.Stat_t) (bool, error) {
	var pst unix.Stat_t
	if err := unix.Fstat(parent, &pst); err != nil {
		return false, fmt.Errorf("stat a parent: %w", err)
	}
	if st.Ino == 0 || idOf(&pst) != idOf(st) {
		return false, nil
	}
	a, err := mountID(cur)
	if err != nil {
		return false, err
	}
	b, err := mountID(parent)
	if err != nil {
		return false, err
	}
	return a == b, nil
}

// mountID is the id of the mount the file open at fd is reached through.
func mountID(fd int) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, fmt.Errorf("statx: %w", err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, errors.New("the kernel does not report mount ids (STATX_MNT_ID)")
	}
	return stx.Mnt_id, nil
}

// isDeadMount tells the errors of a FUSE mount whose server is gone.
func isDeadMount(err error) bool {
	return errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED)
}
