package bind

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// A session's API socket is a listening Unix socket made at a path as a
// sandbox sees it: from a thread that joined the mount namespace of the
// sandbox's process (as a bind is made) and took that process's filesystem
// ids, groups and capabilities, so that the socket is made, and later
// removed, with no right the sandbox lacks. The socket file is therefore
// the sandboxed user's, made 0600 (the thread's own umask): only that user
// (and root) may connect. In a folder shared with a group on purpose, the
// socket is that group's too, 0660: a folder of root's, of a group other
// than root's, with mode exactly 02750 (setgid, what the CSI node plugin
// makes for a pod's group; see sharedFolder); a setgid folder of any other
// owner or mode (such as /var/local, 2775 root:staff) leaves the socket
// 0600. Its folder must exist there; nothing is created
// but the socket itself, and whatever is at the path already is refused and
// left alone, unless it is the socket a previous run made (Socket.ID, for a
// restart after a crash). The bind is made in the socket's folder (after
// fchdir to it), so a path longer than a socket address allows works. The
// listening descriptor, once made, serves from any thread.
//
// With pid 0 the socket is made in this process's namespace, as this
// process, 0600 (0660 and the folder's group's in a shared folder): for a
// runtime that passes it into a sandbox itself.

// Socket is an API socket as made: its path in the namespace it was made
// in, every symlink of its folder resolved, and the identity of the socket
// file ("dev:ino"), by which nothing but a socket of that identity is ever
// removed or replaced. (A socket made there later that took the same inode
// number passes for it; in a sandbox it is removed with the sandbox's own
// rights, which could remove it anyway.)
type Socket struct {
	Path string
	ID   string
}

// maxSocketName is the longest name a socket address holds (sun_path,
// with its terminating NUL).
const maxSocketName = 107

// socketBacklog is the listen backlog of an API socket: a sandbox's few
// clients.
const socketBacklog = 64

// Listen makes a listening Unix socket at path (absolute) in the mount
// namespace of process pid (0: this process's), named ns when known
// (skills.Bind.NS: a namespace other than the one named is refused as
// gone), as that process (see above). replace is the ID of a socket a
// previous run made there, which may be replaced; "" for none. The work is
// bounded as a bind's (onTarget).
func (m Binder) Listen(pid int, ns, path, replace string) (net.Listener, Socket, error) {
	path = filepath.Clean(path)
	dir, name := filepath.Split(path)
	if !filepath.IsAbs(path) || name == "" || len(name) > maxSocketName {
		return nil, Socket{}, fmt.Errorf("api socket %q: want an absolute path whose last name is 1 to %d bytes: %w",
			path, maxSocketName, skills.ErrInvalid)
	}
	f, err := m.fence()
	if err != nil {
		return nil, Socket{}, err
	}
	procFD, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, Socket{}, fmt.Errorf("open /proc/self/fd: %w", err)
	}
	owned := []int{procFD}
	nsfd, c, err := sandboxOf(pid, ns)
	if err != nil {
		closeAll(owned)
		return nil, Socket{}, err
	}
	if nsfd >= 0 {
		owned = append(owned, nsfd)
	}
	var (
		lfd  int
		made Socket
	)
	err = onTarget(fmt.Sprintf("api socket %q", path), nsfd, pid, owned, func(gaveUp func() bool) (func(), error) {
		if err := ownThread(c); err != nil {
			return nil, err
		}
		fd, s, err := makeSocket(dir, name, replace, f, procFD)
		if err != nil {
			return nil, inNamespace(pid, err)
		}
		lfd, made = fd, s
		return func() {
			m.log().Warn("api socket made after its caller gave up: removed", "path", s.Path, "pid", pid)
			unix.Close(fd)
			if _, err := removeSocket(s); err != nil {
				m.log().Error("remove an api socket nobody recorded", "path", s.Path, "pid", pid, "err", err)
			}
		}, nil
	})
	if err != nil {
		return nil, Socket{}, err
	}
	file := os.NewFile(uintptr(lfd), made.Path)
	l, err := net.FileListener(file)
	file.Close()
	if err != nil {
		m.RemoveSocket(pid, ns, made)
		return nil, Socket{}, fmt.Errorf("api socket %q: %w", made.Path, err)
	}
	return l, made, nil
}

// RemoveSocket removes the socket file s made by Listen in the namespace of
// process pid (named ns), if it is still that very file: whatever else is
// at its path now is left alone, and so is everything of a sandbox that is
// gone (it took its files with it).
func (m Binder) RemoveSocket(pid int, ns string, s Socket) error {
	nsfd, c, err := sandboxOf(pid, ns)
	if errors.Is(err, skills.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var owned []int
	if nsfd >= 0 {
		owned = []int{nsfd}
	}
	var other bool
	err = onTarget(fmt.Sprintf("api socket %q", s.Path), nsfd, pid, owned, func(func() bool) (func(), error) {
		if err := ownThread(c); err != nil {
			return nil, err
		}
		var err error
		other, err = removeSocket(s)
		return nil, inNamespace(pid, err)
	})
	if err == nil && other {
		m.log().Warn("api socket path holds another file: left alone", "path", s.Path, "pid", pid)
	}
	return err
}

// sandboxOf opens the mount namespace of process pid (refused as gone if it
// is not ns, when ns is known) and reads the process's credentials; for
// pid 0, nothing (-1, nil).
func sandboxOf(pid int, ns string) (int, *creds, error) {
	if pid == 0 {
		return -1, nil, nil
	}
	nsfd, _, err := namespaceFor(skills.Bind{PID: pid, NS: ns})
	if err != nil {
		return -1, nil, err
	}
	c, err := credsOf(pid)
	if err == nil {
		// The credentials are those of the process whose namespace is
		// open, not of one that took its number since.
		var now string
		if now, err = NamespaceOf(pid); err == nil && now != mntName(nsfd) {
			err = fmt.Errorf("process %d is in another mount namespace than when bound: %w", pid, skills.ErrNotFound)
		}
	}
	if err != nil {
		unix.Close(nsfd)
		return -1, nil, err
	}
	return nsfd, c, nil
}

// mntName is the name of the mount namespace open at nsfd, as NamespaceOf
// spells it; "" if it cannot be read.
func mntName(nsfd int) string {
	var st unix.Stat_t
	if unix.Fstat(nsfd, &st) != nil {
		return ""
	}
	return fmt.Sprintf("mnt:[%d]", st.Ino)
}

// ownThread gives the calling goroutine a thread of its own, never
// returned to the runtime (the thread ends with the goroutine), with
// filesystem attributes (working directory, umask) of its own, acting as c
// when c is not nil. onTarget's goroutines only.
func ownThread(c *creds) error {
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare filesystem attributes: %w", err)
	}
	if c != nil {
		return c.assume()
	}
	return nil
}

// makeSocket makes the listening socket name in folder dir, from a thread
// of its own (ownThread), and returns its descriptor. The folder must stay
// out of what f fences off (the data directory, the daemon's mount), as a
// bind target does.
func makeSocket(dir, name, replace string, f *fence, procFD int) (int, Socket, error) {
	path := filepath.Join(dir, name)
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return -1, Socket{}, fmt.Errorf("api socket %q: its folder %q does not exist (it is not created): %w", path, dir, skills.ErrNotFound)
	case errors.Is(err, unix.ENOTDIR):
		return -1, Socket{}, fmt.Errorf("api socket %q: %q is not a folder: %w", path, dir, skills.ErrInvalid)
	case errors.Is(err, unix.EACCES):
		return -1, Socket{}, fmt.Errorf("api socket %q: the sandbox's user cannot reach its folder: %w", path, skills.ErrPermission)
	case err != nil:
		return -1, Socket{}, fmt.Errorf("api socket %q: %w", path, err)
	}
	defer unix.Close(dfd)
	if err := f.checkFolder(dfd, dir, true); err != nil {
		return -1, Socket{}, fmt.Errorf("api socket %q: %w", path, err)
	}
	resolved, err := fdPath(procFD, dfd)
	if err != nil {
		return -1, Socket{}, fmt.Errorf("api socket %q: its folder: %w", path, err)
	}
	s := Socket{Path: filepath.Join(resolved, name)}
	var st unix.Stat_t
	err = unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return -1, Socket{}, fmt.Errorf("api socket %q: %w", path, err)
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return -1, Socket{}, fmt.Errorf("api socket %q: a file that is not a socket is there (left alone): %w", path, skills.ErrExists)
	case replace == "" || socketID(&st) != replace:
		return -1, Socket{}, fmt.Errorf("api socket %q: a socket skillfs did not make there is there (left alone): %w", path, skills.ErrExists)
	default: // this daemon's, from before a crash
		if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return -1, Socket{}, fmt.Errorf("api socket %q: remove the one a previous run left: %w", path, err)
		}
	}
	if err := unix.Fchdir(dfd); err != nil {
		return -1, Socket{}, fmt.Errorf("api socket %q: enter its folder: %w", path, err)
	}
	// This thread's umask alone (ownThread): the socket is 0600 from the
	// start, or 0660 in a shared folder, whose new files are its group's
	// (the kernel gives the socket that group): a folder shared with a
	// group on purpose shares the socket with it.
	mask := 0o177
	var dst unix.Stat_t
	if err := unix.Fstat(dfd, &dst); err == nil && sharedFolder(&dst) {
		mask = 0o117
	}
	unix.Umask(mask)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, Socket{}, fmt.Errorf("api socket %q: %w", path, err)
	}
	fail := func(err error) (int, Socket, error) {
		unix.Close(fd)
		return -1, Socket{}, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: name}); err != nil {
		switch {
		case errors.Is(err, unix.EADDRINUSE):
			return fail(fmt.Errorf("api socket %q: a file appeared there (left alone): %w", path, skills.ErrExists))
		case errors.Is(err, unix.EACCES):
			return fail(fmt.Errorf("api socket %q: the sandbox's user may not create files in %q: %w", path, dir, skills.ErrPermission))
		}
		return fail(fmt.Errorf("api socket %q: bind: %w", path, err))
	}
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		unix.Close(fd)
		return -1, Socket{}, fmt.Errorf("api socket %q: the socket made is gone (%v): %w", path, err, skills.ErrInvalid)
	}
	s.ID = socketID(&st)
	if err := unix.Listen(fd, socketBacklog); err != nil {
		unix.Close(fd)
		removeSocket(s)
		return -1, Socket{}, fmt.Errorf("api socket %q: listen: %w", path, err)
	}
	return fd, s, nil
}

// sharedFolder reports whether a folder is shared with a group on
// purpose: root's, setgid, of a group other than root's, mode exactly
// 02750 (no one else may enter it, and only root may make files in it).
// Any other setgid folder is not: its group may be one of many users
// (staff), or others may write in it.
func sharedFolder(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&0o7777 == 0o2750 && st.Uid == 0 && st.Gid != 0
}

// removeSocket removes s if its path still names that very socket, from a
// thread of its own (ownThread); other reports another file there, left
// alone.
func removeSocket(s Socket) (other bool, err error) {
	dir, name := filepath.Split(s.Path)
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("api socket %q: %w", s.Path, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("api socket %q: %w", s.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || socketID(&st) != s.ID {
		return true, nil
	}
	if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, fmt.Errorf("api socket %q: remove: %w", s.Path, err)
	}
	return false, nil
}

// socketID identifies a socket file as Socket.ID does.
func socketID(st *unix.Stat_t) string {
	id := idOf(st)
	return fmt.Sprintf("%d:%d", id.dev, id.ino)
}
