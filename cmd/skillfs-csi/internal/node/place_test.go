package node

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skillfs/skills"
)

// TestPlaceOf: a path's forms are the one given and the one with its
// parent's symlinks resolved, also when folders below the link are not
// made yet; the path itself is never resolved.
func TestPlaceOf(t *testing.T) {
	root, real := t.TempDir(), t.TempDir()
	if err := os.Symlink(real, filepath.Join(root, "pods")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(real, "u", "volumes"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The target itself a symlink: left as it is (it may be a bind).
	if err := os.Symlink("/", filepath.Join(real, "u", "volumes", "self")); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]place{
		filepath.Join(root, "pods", "u", "volumes", "self"):              {filepath.Join(root, "pods", "u", "volumes", "self"), filepath.Join(real, "u", "volumes", "self")},
		filepath.Join(root, "pods", "u", "volumes", "csi", "v", "mount"): {filepath.Join(root, "pods", "u", "volumes", "csi", "v", "mount"), filepath.Join(real, "u", "volumes", "csi", "v", "mount")},
		filepath.Join(real, "u", "volumes", "x") + "/":                   {filepath.Join(real, "u", "volumes", "x")},
	} {
		if got := placeOf(in); !slices.Equal(got, want) {
			t.Errorf("placeOf(%s) = %v, want %v", in, got, want)
		}
	}
	p := placeOf(filepath.Join(root, "pods", "u", "volumes", "csi", "v", "mount"))
	if up := p.up(2); !up.is(filepath.Join(real, "u", "volumes", "csi")) || !p.join("skills").is(filepath.Join(real, "u", "volumes", "csi", "v", "mount", "skills")) {
		t.Errorf("up(2) %v, join %v", up, p.join("skills"))
	}
}

func TestPodUIDOf(t *testing.T) {
	for in, want := range map[string]string{
		"/var/lib/kubelet/pods/0b7e-11/volumes/kubernetes.io~csi/skills/mount": "0b7e-11",
		"/k/pods/a/volumes/pods/b/volumes/x/mount":                             "b",
		"/k/pods/a/volumes":     "a",
		"/k/pods/volumes/x":     "",
		"/k/pods//volumes/x":    "",
		"/k/pods/a b/volumes/x": "",
		"/mnt/target":           "",
	} {
		if got, ok := podUIDOf(in); got != want || ok != (want != "") {
			t.Errorf("podUIDOf(%s) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func FuzzPodUIDOf(f *testing.F) {
	f.Add("/var/lib/kubelet/pods/0b7e-11/volumes/kubernetes.io~csi/skills/mount")
	f.Add("/pods/a b/volumes")
	f.Fuzz(func(t *testing.T, target string) {
		uid, ok := podUIDOf(target)
		if !ok {
			return
		}
		if !strings.Contains(filepath.Clean(target), "/pods/"+uid+"/volumes") && !strings.HasPrefix(filepath.Clean(target), "pods/"+uid+"/volumes") {
			t.Fatalf("podUIDOf(%q) = %q, not in the path", target, uid)
		}
		if err := skills.CheckLabel(LabelPodUID, uid); err != nil || strings.Contains(uid, "/") {
			t.Fatalf("podUIDOf(%q) = %q: %v", target, uid, err)
		}
	})
}
