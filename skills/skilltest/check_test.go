package skilltest

import (
	"path/filepath"
	"testing"
	"testing/fstest"
)

func TestDemoManifest(t *testing.T) {
	if got := Manifest("name: demo\ndescription: A demo skill.", "Use it.\n"); got != DemoManifest {
		t.Errorf("DemoManifest = %q, want %q", DemoManifest, got)
	}
}

func TestAssertAbsentAndOnly(t *testing.T) {
	dir := WriteDir(t, t.TempDir(), fstest.MapFS{"b": File("b"), "a": Dir(), "dangling": Symlink("nowhere")})
	AssertAbsent(t, filepath.Join(dir, "none"))
	AssertOnly(t, dir, "dangling", "b", "a")
	for name, fn := range map[string]func(testing.TB){
		"a file that is there":     func(tb testing.TB) { AssertAbsent(tb, filepath.Join(dir, "b")) },
		"a dangling link":          func(tb testing.TB) { AssertAbsent(tb, filepath.Join(dir, "dangling")) },
		"an entry too many":        func(tb testing.TB) { AssertOnly(tb, dir, "a", "b") },
		"an entry missing":         func(tb testing.TB) { AssertOnly(tb, dir, "a", "b", "dangling", "c") },
		"a folder that is not one": func(tb testing.TB) { AssertOnly(tb, filepath.Join(dir, "none")) },
	} {
		if msg := fails(t, fn); msg == "" {
			t.Errorf("%s: passed, want a failure", name)
		}
	}
}
