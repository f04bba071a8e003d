package fs

import (
	"context"
	"errors"
	iofs "io/fs"
	"syscall"

	"skillfs/skills"
)

// errnoMap lists, in order, which errors become which errno. The first match
// wins, so more specific errors come first.
var errnoMap = []struct {
	err   error
	errno syscall.Errno
}{
	{skills.ErrNotFound, syscall.ENOENT},
	{iofs.ErrNotExist, syscall.ENOENT},
	{skills.ErrPermission, syscall.EACCES},
	{iofs.ErrPermission, syscall.EACCES},
	{skills.ErrUnsafePath, syscall.EACCES},
	{skills.ErrSpecialFile, syscall.EACCES},
	{skills.ErrExists, syscall.EEXIST},
	{iofs.ErrExist, syscall.EEXIST},
	{skills.ErrInvalid, syscall.EINVAL},
	{iofs.ErrInvalid, syscall.EINVAL},
	{skills.ErrLimit, syscall.EFBIG},
	{iofs.ErrClosed, syscall.EBADF},
	{context.Canceled, syscall.EINTR},
	{context.DeadlineExceeded, syscall.ETIMEDOUT},
}

// ToErrno maps an error to the errno a FUSE caller sees: nil is 0, an errno
// anywhere in the chain is kept, the project's sentinels and io/fs's map to
// their natural errno (not found → ENOENT, permission → EACCES, …), and
// anything else is EIO. Only this package turns errors into errnos.
func ToErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		return errno
	}
	for _, m := range errnoMap {
		if errors.Is(err, m.err) {
			return m.errno
		}
	}
	return syscall.EIO
}
