package fs

import (
	"context"
	"errors"
	iofs "io/fs"
	"syscall"

	"skillfs/skills"
)

// osErrnos maps the errors of io/fs and context, which are no error kinds
// of the project, to errnos; the project's sentinels map through
// skills.Kinds, before these.
var osErrnos = []struct {
	err   error
	errno syscall.Errno
}{
	{iofs.ErrNotExist, syscall.ENOENT},
	{iofs.ErrPermission, syscall.EACCES},
	{iofs.ErrExist, syscall.EEXIST},
	{iofs.ErrInvalid, syscall.EINVAL},
	{iofs.ErrClosed, syscall.EBADF},
	{context.Canceled, syscall.EINTR},
	{context.DeadlineExceeded, syscall.ETIMEDOUT},
}

// ToErrno maps an error to the errno a FUSE caller sees: nil is 0, an errno
// anywhere in the chain is kept, the project's sentinels and io/fs's map to
// their natural errno (not found → ENOENT, permission → EACCES, …; the
// project's as skills.Kinds says), and anything else is EIO. Only this
// package turns errors into errnos.
func ToErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		return errno
	}
	if k, ok := skills.KindOf(err); ok {
		return k.Errno
	}
	for _, m := range osErrnos {
		if errors.Is(err, m.err) {
			return m.errno
		}
	}
	return syscall.EIO
}
