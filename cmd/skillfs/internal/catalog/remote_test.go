package catalog

import (
	"os"
	"path/filepath"
	"testing"
)

// A path that exists wins over the common name of a repository it looks
// like; a name that is no path is the repository.
func TestRemoteSourcePrecedence(t *testing.T) {
	t.Chdir(t.TempDir())
	if got := RemoteSource("acme/skills"); got != "https://github.com/acme/skills.git" {
		t.Errorf("acme/skills with no such folder = %q", got)
	}
	if got := RemoteSource("acme/skills/x#v1"); got != "https://github.com/acme/skills.git#v1:x" {
		t.Errorf("acme/skills/x#v1 = %q", got)
	}
	if err := os.MkdirAll(filepath.Join("acme", "skills"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"acme/skills", "./acme/skills", "./missing/repo", "/nonexistent/o/r"} {
		if got := RemoteSource(s); got != s {
			t.Errorf("RemoteSource(%q) = %q, want the path as given", s, got)
		}
	}
	if got := curatedName("acme/skills"); !filepath.IsAbs(got) {
		t.Errorf("an existing folder is registered as %q, want its absolute path", got)
	}
}
