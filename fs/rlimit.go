package fs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// RaiseFileLimit raises this process's soft limit on open descriptors
// (RLIMIT_NOFILE) to its hard limit and returns both. Reads hold few
// descriptors, but a descriptor-hungry moment (passthrough, many sandboxes
// at once) should meet the hard limit, not a soft limit of 1024.
//
// The Go runtime raises the soft limit to one below the hard limit at start,
// which lets it give started processes the original limit back; a limit
// already there is left alone to keep that.
func RaiseFileLimit() (soft, hard uint64, err error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read the open file limit: %w", err)
	}
	if lim.Cur == unix.RLIM_INFINITY || lim.Cur+1 >= lim.Max {
		return lim.Cur, lim.Max, nil
	}
	want := unix.Rlimit{Cur: lim.Max, Max: lim.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		return lim.Cur, lim.Max, fmt.Errorf("raise the open file limit to %d: %w", lim.Max, err)
	}
	return want.Cur, want.Max, nil
}
