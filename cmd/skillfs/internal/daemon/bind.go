package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	skfs "skillfs/fs"
	"skillfs/skills"
)

// A session is bound read-only at a target either in the daemon's own mount
// namespace (PID 0) or inside the mount namespace of a sandbox process. Both
// attach a detached, read-only clone of the session's subtree (open_tree)
// onto a descriptor of the target (move_mount); for a sandbox, from a
// thread that joined its namespace: that is also how a restarted daemon
// replaces the dead mount a crash left inside a running sandbox.
//
// The target is resolved and opened in the namespace the bind is made in,
// checked there by identity (device and inode, which a symlink or another
// bind of the same directory cannot disguise) against the data directory and
// the daemon's own mount, and the bind goes onto that open descriptor, so a
// symlink swapped in after the check cannot redirect it. The resolved path is
// what is recorded. A target that holds the data directory or the mount root
// (one of their parents) is refused too: a bind there would hide them.
//
// Everything that touches the target runs on a thread of its own and is
// waited for at most targetTimeout (see onTarget), so a target on a hung
// filesystem costs the caller an error, not the daemon's lock.

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
func (d *Daemon) fence() (*fence, error) {
	var home, mnt unix.Stat_t
	if err := unix.Stat(d.cat.Home(), &home); err != nil {
		return nil, fmt.Errorf("stat the data directory: %w", err)
	}
	if err := unix.Stat(d.mountRoot, &mnt); err != nil {
		return nil, fmt.Errorf("stat the mount root: %w", err)
	}
	return &fence{home: idOf(&home), fuseDev: uint64(mnt.Dev), homePath: d.cat.Home(), mntPath: d.mountRoot}, nil
}

// check refuses the directory open at fd (named path in messages) if it or
// any of its ancestors, up to the root of the calling thread's namespace, is
// the data directory or lies in the daemon's mount. A target that is itself
// the root is refused too. The walk up follows "..", which crosses from the
// root of a mount to where it is mounted, so it sees the ancestors the
// target has there, whatever names they go by.
func (f *fence) check(fd int, path string) error {
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
			if cur == fd {
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

// nsPath is where /proc shows the mount namespace of a process.
func nsPath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/ns/mnt" }

// readNamespaceLink and openNamespaceFile look a process's namespace up;
// tests swap them to inject errors.
var (
	readNamespaceLink = os.Readlink
	openNamespaceFile = func(path string) (int, error) {
		return unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
)

// namespaceError names an error looking up the mount namespace of pid: only
// a process that is gone (ENOENT, ESRCH) makes it ErrNotFound. Anything else
// (EMFILE, ENOMEM, EACCES...) says nothing about the process, which may be
// alive.
func namespaceError(pid int, err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("mount namespace of process %d: process gone: %w", pid, skills.ErrNotFound)
	}
	return fmt.Errorf("mount namespace of process %d: %w", pid, err)
}

// namespaceOf identifies the mount namespace of a process.
func namespaceOf(pid int) (string, error) {
	ns, err := readNamespaceLink(nsPath(pid))
	if err != nil {
		return "", namespaceError(pid, err)
	}
	return ns, nil
}

// openNamespace opens the mount namespace of pid and names it as
// namespaceOf does, from the descriptor: the name is then that of the
// namespace joined, even if pid ended and its number was reused meanwhile.
func openNamespace(pid int) (int, string, error) {
	nsfd, err := openNamespaceFile(nsPath(pid))
	if err != nil {
		return -1, "", namespaceError(pid, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(nsfd, &st); err != nil {
		unix.Close(nsfd)
		return -1, "", fmt.Errorf("mount namespace of process %d: %w", pid, err)
	}
	return nsfd, fmt.Sprintf("mnt:[%d]", st.Ino), nil
}

// attach binds session id read-only at b.Target, in the daemon's namespace
// (PID 0, creating the target if missing) or in that of process b.PID (the
// target must exist there; a dead mount left there by a crash is replaced).
// taken, if not nil, sees the bind with its resolved target before anything
// is mounted and can refuse it. attach returns the bind as made: resolved
// target, and the namespace's name for a sandbox. The work on the target is
// bounded (onTarget): an attach that completes after attach gave up is
// undone.
func (d *Daemon) attach(id string, b skills.Bind, taken func(skills.Bind) error) (skills.Bind, error) {
	// The target as given is checked first: a bind there already makes it
	// resolve into the daemon's mount, which would hide the clearer
	// conflict. Then again once resolved (and, for a sandbox, its
	// namespace known).
	checkTaken := func(b skills.Bind) error {
		if taken == nil {
			return nil
		}
		return taken(b)
	}
	if err := checkTaken(b); err != nil {
		return b, err
	}
	f, err := d.fence()
	if err != nil {
		return b, err
	}
	procFD, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return b, fmt.Errorf("open /proc/self/fd: %w", err)
	}
	tree, err := readOnlyTree(filepath.Join(d.mountRoot, id))
	if err != nil {
		unix.Close(procFD)
		return b, err
	}
	owned := []int{procFD, tree}
	nsfd := -1
	if b.PID > 0 {
		var ns string
		nsfd, ns, err = openNamespace(b.PID)
		if err != nil {
			closeAll(owned)
			return b, err
		}
		owned = append(owned, nsfd)
		if b.NS != "" && b.NS != ns {
			closeAll(owned)
			return b, fmt.Errorf("process %d is in another mount namespace than when bound: %w", b.PID, skills.ErrNotFound)
		}
		b.NS = ns
	}
	// inNS names errors of the sandbox's namespace as such.
	inNS := func(err error) error {
		if b.PID > 0 && err != nil {
			return fmt.Errorf("in process %d's namespace: %w", b.PID, err)
		}
		return err
	}

	var made skills.Bind
	err = onTarget(fmt.Sprintf("mount target %q", b.Target), nsfd, b.PID, owned, func(gaveUp func() bool) (func(), error) {
		if b.PID > 0 {
			// A dead mount (ENOTCONN) is detached where the namespace
			// allows it; where it does not (a locked mount), the new one
			// is stacked on top. statfs reaches the filesystem's server,
			// where stat may be answered from the kernel's cache.
			var st unix.Statfs_t
			if err := unix.Statfs(b.Target, &st); isDeadMount(err) {
				unix.Unmount(b.Target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
			}
		}
		t, err := openTarget(b.Target, b.PID == 0, f, procFD)
		if err != nil {
			return nil, inNS(err)
		}
		defer unix.Close(t.fd)
		if b.PID == 0 {
			// Another bind there would hide this one or be hidden by it,
			// and unmounting by path would then remove the wrong one.
			// Rebinding after a crash cleared the dead mount first.
			if root, err := isMountRoot(t.fd); err != nil {
				return nil, fmt.Errorf("mount target %q: %w", t.path, err)
			} else if root {
				return nil, fmt.Errorf("mount target %q is already a mount point: %w", t.path, skills.ErrExists)
			}
		}
		nb := b
		nb.Target = t.path
		if gaveUp() {
			return nil, errGaveUp
		}
		if err := elsewhere(func() error { return checkTaken(nb) }); err != nil {
			return nil, err
		}
		// move_mount wants the target in the calling thread's namespace:
		// this one.
		if err := attachTo(tree, t); err != nil {
			return nil, inNS(err)
		}
		made = nb
		return func() {
			d.log.Warn("bind completed after its caller gave up: removed", "target", nb.Target, "pid", nb.PID)
			if err := d.removeBind(nb, f); err != nil {
				d.log.Error("remove a bind nobody recorded", "target", nb.Target, "pid", nb.PID, "err", err)
			}
		}, nil
	})
	if err != nil {
		return b, err
	}
	return made, nil
}

// resolveIn resolves an existing path in the namespace a bind of pid is
// made in, as attach records targets.
func resolveIn(pid int, path string) (string, error) {
	procFD, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open /proc/self/fd: %w", err)
	}
	owned := []int{procFD}
	nsfd := -1
	if pid > 0 {
		if nsfd, _, err = openNamespace(pid); err != nil {
			closeAll(owned)
			return "", err
		}
		owned = append(owned, nsfd)
	}
	var resolved string
	err = onTarget(fmt.Sprintf("mount target %q", path), nsfd, pid, owned, func(func() bool) (func(), error) {
		t, err := openTarget(path, false, nil, procFD)
		if err != nil {
			return nil, err
		}
		unix.Close(t.fd)
		resolved = t.path
		return nil, nil
	})
	if err != nil {
		return "", err
	}
	return resolved, nil
}

// removeBind removes the bind at b.Target in the calling thread's
// namespace; see detach.
func (d *Daemon) removeBind(b skills.Bind, f *fence) error {
	var st unix.Stat_t
	err := unix.Lstat(b.Target, &st)
	switch {
	case isDeadMount(err):
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("stat bind target %q: %w", b.Target, err)
	case uint64(st.Dev) != f.fuseDev:
		d.log.Warn("bind target holds another filesystem: left alone", "target", b.Target, "pid", b.PID)
		return nil
	}
	return unbind(b.Target)
}

// detach removes one bind; a sandbox that is gone took its binds with it.
// Only the daemon's own filesystem is unmounted, or a dead mount: whatever
// else is now on top at the target (a mount someone made over the bind, or
// one found there by rebind) is someone else's and stays. The work on the
// target is bounded (onTarget).
func (d *Daemon) detach(b skills.Bind) error {
	f, err := d.fence()
	if err != nil {
		return err
	}
	nsfd := -1
	var owned []int
	if b.PID > 0 {
		var ns string
		nsfd, ns, err = openNamespace(b.PID)
		if errors.Is(err, skills.ErrNotFound) {
			return nil // the sandbox is gone
		}
		if err != nil {
			return err
		}
		if ns != b.NS {
			unix.Close(nsfd)
			return nil // the number now belongs to another process
		}
		owned = []int{nsfd}
	}
	return onTarget(fmt.Sprintf("bind target %q", b.Target), nsfd, b.PID, owned, func(func() bool) (func(), error) {
		return nil, d.removeBind(b, f)
	})
}

// Mount binds a session read-only at target — in the daemon's namespace, or
// (pid > 0) in the mount namespace of that process — and records it so that
// a restart re-attaches it. It returns the bind as recorded, with the target
// resolved in that namespace.
func (d *Daemon) Mount(ctx context.Context, id, target string, pid int) (skills.Bind, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.servedSession(ctx, id); err != nil {
		return skills.Bind{}, err
	}
	if !filepath.IsAbs(target) || pid < 0 {
		return skills.Bind{}, fmt.Errorf("mount target %q must be an absolute path (and pid not negative): %w", target, skills.ErrInvalid)
	}
	b, err := d.attach(id, skills.Bind{Target: filepath.Clean(target), PID: pid}, func(b skills.Bind) error {
		return d.checkTaken(ctx, b)
	})
	if err != nil {
		return skills.Bind{}, err
	}
	if err := d.cat.DB().AddBind(ctx, id, d.host, b); err != nil {
		if derr := d.detach(b); derr != nil {
			d.log.Error("remove a bind that could not be recorded", "session", id, "target", b.Target, "pid", b.PID, "err", derr)
		}
		return skills.Bind{}, err
	}
	d.log.Info("session bound", "session", id, "target", b.Target, "pid", b.PID)
	return b, nil
}

// checkTaken refuses a target that another open session of this host is
// bound at in the same namespace: another bind there would hide the first,
// and unmounting by path would then expose the wrong session. (Other hosts'
// binds are in their machines' namespaces.)
func (d *Daemon) checkTaken(ctx context.Context, b skills.Bind) error {
	self, err := namespaceOf(os.Getpid())
	if err != nil {
		return err
	}
	nsOf := func(b skills.Bind) string {
		if b.PID == 0 {
			return self
		}
		return b.NS
	}
	all, err := d.cat.DB().OpenBinds(ctx, d.host, nil)
	if err != nil {
		return err
	}
	for id, binds := range all {
		for _, o := range binds {
			if o.Target == b.Target && (o.PID == b.PID || nsOf(o) == nsOf(b)) {
				return fmt.Errorf("mount target %q is taken by session %s: %w", b.Target, id, skills.ErrExists)
			}
		}
	}
	return nil
}

// Unmount removes a session's bind at target (in pid's namespace if pid > 0).
// target may be the path given to Mount or the resolved one it recorded.
func (d *Daemon) Unmount(ctx context.Context, id, target string, pid int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.servedSession(ctx, id); err != nil {
		return err
	}
	binds, err := d.cat.DB().Binds(ctx, id)
	if err != nil {
		return err
	}
	target = filepath.Clean(target)
	find := func(target string) (skills.Bind, bool) {
		for _, b := range binds {
			if b.Target == target && b.PID == pid {
				return b, true
			}
		}
		return skills.Bind{}, false
	}
	b, ok := find(target)
	if !ok && filepath.IsAbs(target) && pid >= 0 {
		// A path that does not resolve is not where anything is bound.
		if resolved, err := resolveIn(pid, target); err == nil {
			b, ok = find(resolved)
		}
	}
	if !ok {
		return fmt.Errorf("session %s is not mounted at %q (pid %d): %w", id, target, pid, skills.ErrNotFound)
	}
	if err := d.detach(b); err != nil {
		return fmt.Errorf("unmount %q: %w", b.Target, err)
	}
	return d.cat.DB().RemoveBind(ctx, id, b)
}

// rebind re-attaches the binds of restored sessions, replacing the dead
// mounts a crash left. A bind whose sandbox is gone (its process ended or
// now lives in another namespace) is forgotten; one whose sandbox cannot be
// looked up (any other error) is kept for the next start. A live mount found
// at a target is left alone: the previous daemon's binds died with it, so a
// live one belongs to someone else (another daemon serving a copy of the
// data directory, an operator's mount).
func (d *Daemon) rebind(ctx context.Context) {
	all, err := d.cat.DB().OpenBinds(ctx, d.host, nil)
	if err != nil {
		d.log.Error("list binds to rebind", "err", err)
		return
	}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		for _, b := range all[id] {
			if b.PID > 0 {
				ns, err := namespaceOf(b.PID)
				if err != nil && !errors.Is(err, skills.ErrNotFound) {
					// Nothing known of the sandbox: keep the record for the
					// next start.
					d.log.Error("look up a sandbox: session not rebound there, bind kept",
						"session", id, "target", b.Target, "pid", b.PID, "err", err)
					continue
				}
				if err != nil || ns != b.NS {
					d.log.Info("sandbox gone: bind forgotten", "session", id, "target", b.Target, "pid", b.PID)
					if err := d.cat.DB().RemoveBind(ctx, id, b); err != nil {
						d.log.Error("forget bind", "session", id, "target", b.Target, "pid", b.PID, "err", err)
					}
					continue
				}
			} else if err := onTarget(fmt.Sprintf("bind target %q", b.Target), -1, 0, nil, func(func() bool) (func(), error) {
				return nil, skfs.ClearStale(b.Target)
			}); err != nil {
				d.log.Warn("bind target holds a live mount or cannot be cleared: session not rebound there",
					"session", id, "target", b.Target, "err", err)
				continue
			}
			got, err := d.attach(id, b, nil)
			if err != nil {
				d.log.Error("rebind session", "session", id, "target", b.Target, "pid", b.PID, "err", err)
				continue
			}
			if got.Target != b.Target { // recorded before targets were resolved
				if err := d.cat.DB().RemoveBind(ctx, id, b); err != nil {
					d.log.Error("update bind record", "session", id, "target", b.Target, "err", err)
				} else if err := d.cat.DB().AddBind(ctx, id, d.host, got); err != nil {
					d.log.Error("update bind record", "session", id, "target", got.Target, "err", err)
				}
			}
			d.log.Info("session rebound", "session", id, "target", got.Target, "pid", got.PID)
		}
	}
}

// unbindAll detaches every bind at shutdown, sandboxes' included, so the
// filesystem is really released; the records stay for the next start. With
// nothing to return an error to at shutdown, failures are logged.
func (d *Daemon) unbindAll(ctx context.Context) {
	all, err := d.cat.DB().OpenBinds(ctx, d.host, nil)
	if err != nil {
		d.log.Error("list binds to unbind", "err", err)
		return
	}
	for _, binds := range all {
		for _, b := range binds {
			if err := d.detach(b); err != nil {
				d.log.Warn("unmount bind", "target", b.Target, "pid", b.PID, "err", err)
			}
		}
	}
}
