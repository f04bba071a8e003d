package main

import (
	"runtime"
	"strings"
	"testing"
)

// version names the build: a release set at link time, else the module's
// version, then the VCS revision when the build recorded one, and Go's.
func TestVersionLine(t *testing.T) {
	got := versionLine()
	if !strings.HasPrefix(got, "skillfs ") || !strings.HasSuffix(got, " "+runtime.Version()) || strings.Contains(got, " dev ") {
		t.Fatalf("version %q: want skillfs, a version and %s", got, runtime.Version())
	}
	defer func(v string) { version = v }(version)
	version = "1.2.3"
	if got := versionLine(); !strings.HasPrefix(got, "skillfs 1.2.3 ") {
		t.Fatalf("with a release set at link time: %q", got)
	}
}
