package bind

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"skillfs/skills"
)

// TestNamespaceErrors: only a process that is gone (ENOENT, ESRCH) makes
// the lookup of its namespace ErrNotFound; any other error (descriptors
// exhausted, say) says nothing about the process and is passed on.
func TestNamespaceErrors(t *testing.T) {
	readLink, openFile := ReadNamespaceLink, OpenNamespaceFile
	t.Cleanup(func() { ReadNamespaceLink, OpenNamespaceFile = readLink, openFile })
	for _, errno := range []unix.Errno{unix.EMFILE, unix.ENFILE, unix.ENOMEM, unix.EACCES, unix.ENOENT, unix.ESRCH} {
		t.Run(errno.Error(), func(t *testing.T) {
			ReadNamespaceLink = func(p string) (string, error) {
				return "", &os.PathError{Op: "readlink", Path: p, Err: errno}
			}
			OpenNamespaceFile = func(string) (int, error) { return -1, errno }
			gone := errno == unix.ENOENT || errno == unix.ESRCH
			if err := namespaceError(1, errno); errors.Is(err, skills.ErrNotFound) != gone || !errors.Is(err, errno) && !gone {
				t.Errorf("namespaceError: %v", err)
			}
			if _, err := NamespaceOf(1); errors.Is(err, skills.ErrNotFound) != gone || !errors.Is(err, errno) && !gone {
				t.Errorf("NamespaceOf: %v", err)
			}
			if _, _, err := openNamespace(1); errors.Is(err, skills.ErrNotFound) != gone || !errors.Is(err, errno) && !gone {
				t.Errorf("openNamespace: %v", err)
			}
		})
	}
	ReadNamespaceLink, OpenNamespaceFile = readLink, openFile
	self, err := NamespaceOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	fd, ns, err := openNamespace(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if ns != self {
		t.Fatalf("the namespace opened is named %q, looked up %q", ns, self)
	}
}
