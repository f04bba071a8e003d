package bind

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// nsPath is where /proc shows the mount namespace of a process.
func nsPath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/ns/mnt" }

// ReadNamespaceLink and OpenNamespaceFile are how a process's namespace is
// looked up in /proc. Tests, here and of what binds, swap them to inject the
// errors a full descriptor table or a restricted /proc give.
var (
	ReadNamespaceLink = os.Readlink
	OpenNamespaceFile = func(path string) (int, error) {
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

// NamespaceOf identifies the mount namespace of a process, as a bind in it
// records it (skills.Bind.NS). A process that is gone is skills.ErrNotFound.
func NamespaceOf(pid int) (string, error) {
	ns, err := ReadNamespaceLink(nsPath(pid))
	if err != nil {
		return "", namespaceError(pid, err)
	}
	return ns, nil
}

// openNamespace opens the mount namespace of pid and names it as
// NamespaceOf does, from the descriptor: the name is then that of the
// namespace joined, even if pid ended and its number was reused meanwhile.
func openNamespace(pid int) (int, string, error) {
	nsfd, err := OpenNamespaceFile(nsPath(pid))
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
