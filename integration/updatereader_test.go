package integration

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpdateByAReader: a user who reads a skill from a real git repository
// but may not change it is refused `skill update SLUG` with exit 4 (403 in
// the API), as for any change of a skill she sees; --all takes only what
// she manages, which is nothing here.
func TestUpdateByAReader(t *testing.T) {
	e := newCatalogEnv(t)
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "repo"))
	writeSkill(t, filepath.Join(repo.dir, "skills", "alpha"), "name: alpha\ndescription: Alpha.", map[string]string{"notes.txt": "a1\n"})
	repo.commit("first")
	e.mustImport(repo.url(), "--all")
	e.ok("user", "add", "bob")
	e.ok("skill", "share", "alpha", "--read", "global")
	writeSkill(t, filepath.Join(repo.dir, "skills", "alpha"), "name: alpha\ndescription: Alpha.", map[string]string{"notes.txt": "a2\n"})
	repo.commit("second")

	for _, args := range [][]string{{"skill", "update", "alpha", "--as", "bob"}, {"skill", "update", "alpha", "--dry-run", "--as", "bob"}} {
		if r := e.run(args...); r.code != 4 || !strings.Contains(r.stderr, "permission denied") {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	var u updateJSON
	e.okJSON(&u, "skill", "update", "--all", "--as", "bob")
	if len(u.Skills) != 0 {
		t.Errorf("a reader's --all: %+v", u)
	}
	if n := len(e.versions("alpha")); n != 1 {
		t.Fatalf("alpha has %d versions after a reader's updates", n)
	}

	e.serve("--import-root", filepath.Dir(repo.dir)) // where the API may read the source
	c := newAPIClient(e.home)
	if code := c.do(t, "POST", "/v1/skills/alpha/update", "bob", map[string]any{}, nil); code != http.StatusForbidden {
		t.Errorf("POST /v1/skills/alpha/update as a reader: %d", code)
	}
	if code := c.do(t, "POST", "/v1/skills/update", "bob", map[string]any{"skills": []string{"alpha"}, "dry_run": true}, nil); code != http.StatusForbidden {
		t.Errorf("POST /v1/skills/update naming alpha as a reader: %d", code)
	}
	if code := c.do(t, "POST", "/v1/skills/alpha/update", "", map[string]any{}, &u); code != http.StatusOK || len(u.Skills) != 1 || u.Skills[0].Status != "updated" {
		t.Errorf("the operator updates: %d %+v", code, u)
	}
	c.conform(t)
}
