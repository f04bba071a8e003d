package bind

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// target is a bind target opened in the namespace the bind is made in.
type target struct {
	fd   int    // O_PATH descriptor of the directory
	path string // its path there, with every symlink resolved
}

// openTarget opens the directory at path (absolute and clean) as an O_PATH
// descriptor, following symlinks as the calling thread's namespace resolves
// them. With create, missing directories at its end are made, but only
// below an existing ancestor that passed the fence (so a refused target
// leaves nothing behind) and never through a symlink. With a fence, the
// directory is checked against it, and refused if it holds what the fence
// protects. procFD is the daemon's /proc/self/fd, opened in the daemon's
// namespace: a sandbox's /proc may not show the daemon at all.
func openTarget(path string, create bool, f *fence, procFD int) (*target, error) {
	existing := path
	var missing []string // innermost first
	fd := -1
	for {
		var err error
		fd, err = unix.Open(existing, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil {
			break
		}
		if !create || !errors.Is(err, unix.ENOENT) || existing == "/" {
			return nil, targetError(path, err)
		}
		missing = append(missing, filepath.Base(existing))
		existing = filepath.Dir(existing)
	}
	fail := func(err error) (*target, error) {
		unix.Close(fd)
		return nil, err
	}
	if f != nil {
		if err := f.check(fd, path); err != nil {
			return fail(err)
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := unix.Mkdirat(fd, missing[i], 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return fail(fmt.Errorf("create mount target %q: %w", path, err))
		}
		// O_NOFOLLOW: a symlink that appeared in the meantime is refused
		// (ENOTDIR), not followed to wherever it points.
		next, err := unix.Openat(fd, missing[i], unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(targetError(path, err))
		}
		unix.Close(fd)
		fd = next
	}
	if f != nil && len(missing) > 0 {
		if err := f.check(fd, path); err != nil {
			return fail(err)
		}
	}
	if f != nil {
		if err := f.covers(fd, path); err != nil {
			return fail(err)
		}
	}
	resolved, err := fdPath(procFD, fd)
	if err != nil {
		return fail(fmt.Errorf("mount target %q: %w", path, err))
	}
	return &target{fd: fd, path: resolved}, nil
}

// targetError names the target in an error opening it, marking the
// caller's mistakes (a missing directory, a file in the way) as such.
func targetError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("mount target %q does not exist: %w", path, skills.ErrNotFound)
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return fmt.Errorf("mount target %q is not a directory (or reached through a symlink made while creating it): %w", path, skills.ErrInvalid)
	}
	return fmt.Errorf("mount target %q: %w", path, err)
}

// fdPath is the path of an open file as the calling thread's root sees it,
// refused if it does not name the same file any more.
func fdPath(procFD, fd int) (string, error) {
	buf := make([]byte, unix.PathMax+1)
	n, err := unix.Readlinkat(procFD, strconv.Itoa(fd), buf)
	if err != nil {
		return "", fmt.Errorf("read its path: %w", err)
	}
	p := string(buf[:n])
	if n > unix.PathMax || !filepath.IsAbs(p) || strings.HasSuffix(p, " (deleted)") {
		return "", fmt.Errorf("no usable path (%q): %w", p, skills.ErrInvalid)
	}
	var want, got unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		if isDeadMount(err) {
			return p, nil // nothing to compare; the parents were checked
		}
		return "", err
	}
	if err := unix.Stat(p, &got); err != nil || idOf(&got) != idOf(&want) {
		return "", fmt.Errorf("its path %q names another file: %w", p, skills.ErrInvalid)
	}
	return p, nil
}

// isMountRoot tells whether the directory open at fd is the root of a mount.
func isMountRoot(fd int) (bool, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, &stx); err != nil {
		return false, err
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, fmt.Errorf("the kernel does not tell mount roots (STATX_ATTR_MOUNT_ROOT)")
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// readOnlyTree clones the mount at src, detached and read-only, ready to be
// attached anywhere.
func readOnlyTree(src string) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("clone %q: %w", src, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("make %q read-only: %w", src, err)
	}
	return fd, nil
}

// attachTo attaches a detached tree onto the target's descriptor.
func attachTo(tree int, t *target) error {
	if err := unix.MoveMount(tree, "", t.fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach at %q: %w", t.path, err)
	}
	return nil
}

// unbind removes a bind, lazily if it is busy; not mounted is fine. A
// symlink now at the target is not followed.
func unbind(target string) error {
	err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}
