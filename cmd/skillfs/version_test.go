package main

import (
	"encoding/json"
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

// `skillfs --version` and `-v` say what `skillfs version` says, and
// `version --json` is the same build as an object a script can read.
func TestVersionFlagAndJSON(t *testing.T) {
	want, _, code := runCLI(t, "version")
	if code != 0 || want != versionLine()+"\n" {
		t.Fatalf("version: exit %d, %q", code, want)
	}
	for _, flag := range []string{"--version", "-v"} {
		if got, errOut, code := runCLI(t, flag); code != 0 || got != want {
			t.Fatalf("%s: exit %d, %q (stderr %q), want %q", flag, code, got, errOut, want)
		}
	}
	out, _, code := runCLI(t, "version", "--json")
	var b buildInfo
	if err := json.Unmarshal([]byte(out), &b); code != 0 || err != nil {
		t.Fatalf("version --json: exit %d, %v: %q", code, err, out)
	}
	if b != build() || b.Go != runtime.Version() || b.Version == "" {
		t.Fatalf("version --json = %+v, want %+v", b, build())
	}
}
