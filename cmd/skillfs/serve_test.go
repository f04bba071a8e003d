package main

import (
	"runtime"
	"testing"
)

// TestCapProcs: serve runs on at most maxProcs Ps unless GOMAXPROCS says
// otherwise.
func TestCapProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(2 * maxProcs)
	if n, capped := capProcs(); n != maxProcs || !capped || runtime.GOMAXPROCS(0) != maxProcs {
		t.Errorf("capProcs with %d Ps = %d, %v; GOMAXPROCS now %d", 2*maxProcs, n, capped, runtime.GOMAXPROCS(0))
	}
	runtime.GOMAXPROCS(1)
	if n, capped := capProcs(); n != 1 || capped {
		t.Errorf("capProcs with 1 P = %d, %v", n, capped)
	}
	t.Setenv("GOMAXPROCS", "8")
	runtime.GOMAXPROCS(8)
	if n, capped := capProcs(); n != 8 || capped {
		t.Errorf("capProcs with GOMAXPROCS=8 set = %d, %v", n, capped)
	}
}
