package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"syscall"
	"testing"

	"skillfs/skills"
)

func TestToErrno(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"nil", nil, 0},
		{"not found", fmt.Errorf("find skill %q: %w", "x", skills.ErrNotFound), syscall.ENOENT},
		{"io/fs not exist", iofs.ErrNotExist, syscall.ENOENT},
		{"path error", &os.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, syscall.ENOENT},
		{"permission", fmt.Errorf("read: %w", skills.ErrPermission), syscall.EACCES},
		{"io/fs permission", iofs.ErrPermission, syscall.EACCES},
		{"unsafe path", skills.ErrUnsafePath, syscall.EACCES},
		{"exists", skills.ErrExists, syscall.EEXIST},
		{"invalid", skills.ErrInvalid, syscall.EINVAL},
		{"limit", skills.ErrLimit, syscall.EFBIG},
		{"closed", iofs.ErrClosed, syscall.EBADF},
		{"canceled", fmt.Errorf("wait: %w", context.Canceled), syscall.EINTR},
		{"errno kept", fmt.Errorf("open: %w", syscall.ELOOP), syscall.ELOOP},
		{"errno wins over sentinel", errors.Join(skills.ErrNotFound, syscall.EROFS), syscall.EROFS},
		{"zero errno", syscall.Errno(0), syscall.EIO},
		{"unknown", errors.New("disk on fire"), syscall.EIO},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ToErrno(tc.err); got != tc.want {
				t.Errorf("ToErrno(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
