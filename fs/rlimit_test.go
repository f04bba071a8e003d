package fs

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestRaiseFileLimit lowers the soft limit and checks RaiseFileLimit puts
// it at the hard limit.
func TestRaiseFileLimit(t *testing.T) {
	var orig unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Max < 512 || orig.Max == unix.RLIM_INFINITY {
		t.Skipf("hard limit %d leaves nothing to raise", orig.Max)
	}
	t.Cleanup(func() { unix.Prlimit(0, unix.RLIMIT_NOFILE, &orig, nil) })
	low := unix.Rlimit{Cur: 256, Max: orig.Max}
	if err := unix.Prlimit(0, unix.RLIMIT_NOFILE, &low, nil); err != nil {
		t.Fatal(err)
	}
	soft, hard, err := RaiseFileLimit()
	if err != nil || soft != orig.Max || hard != orig.Max {
		t.Fatalf("RaiseFileLimit = %d, %d, %v; want %d, %d", soft, hard, err, orig.Max, orig.Max)
	}
	var now unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &now); err != nil || now.Cur != orig.Max {
		t.Errorf("soft limit now %d, %v; want %d", now.Cur, err, orig.Max)
	}
}
