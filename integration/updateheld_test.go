package integration

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpdateHoldsARollback: a bad upstream version rolled back stays rolled
// back when `skill update` finds the source unchanged — held, nothing
// installed, through the CLI and the API — until --force ("force": true)
// installs the source's version again.
func TestUpdateHoldsARollback(t *testing.T) {
	e := newCatalogEnv(t)
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "repo"))
	dir := filepath.Join(repo.dir, "skills", "alpha")
	writeSkill(t, dir, "name: alpha\ndescription: Alpha.", map[string]string{"notes.txt": "good\n"})
	repo.commit("first")
	v1 := e.mustImport(repo.url(), "--all").Installed[0].Version
	writeSkill(t, dir, "name: alpha\ndescription: Alpha.", map[string]string{"notes.txt": "bad\n"})
	repo.commit("a bad change")
	var u updateJSON
	e.okJSON(&u, "skill", "update", "alpha")
	v2 := u.Skills[0].To
	if u.Skills[0].Status != "updated" || v2 == v1 {
		t.Fatalf("first update: %+v", u)
	}
	e.ok("skill", "rollback", "alpha", v1)

	out := e.ok("skill", "update", "alpha")
	if !strings.Contains(out, "alpha: held at "+v1[:12]) || !strings.Contains(out, "--force") {
		t.Errorf("update after the rollback said:\n%s", out)
	}
	var held struct {
		Skills []struct {
			Status, From, To, Note string
		}
	}
	e.okJSON(&held, "skill", "update", "--all", "--dry-run")
	if len(held.Skills) != 1 || held.Skills[0].Status != "held" || held.Skills[0].From != v1 || held.Skills[0].To != v2 ||
		!strings.Contains(held.Skills[0].Note, "rollback") {
		t.Errorf("update --all --dry-run after the rollback: %+v", held)
	}
	if vs := e.versions("alpha"); len(vs) != 2 || e.show("alpha").Version != v1 {
		t.Fatalf("a held update installed something: %+v", vs)
	}

	e.serve("--import-root", filepath.Dir(repo.dir)) // where the API may read the source
	c := newAPIClient(e.home)
	if code := c.do(t, "POST", "/v1/skills/alpha/update", "", map[string]any{}, &u); code != http.StatusOK || u.Skills[0].Status != "held" {
		t.Errorf("API update after the rollback: %d %+v", code, u)
	}
	if code := c.do(t, "POST", "/v1/skills/update", "", map[string]any{"skills": []string{"alpha"}, "force": true}, &u); code != http.StatusOK ||
		u.Skills[0].Status != "updated" || u.Skills[0].From != v1 || u.Skills[0].To != v2 {
		t.Errorf("API update with force: %d %+v", code, u)
	}
	if got := e.show("alpha").Version; got != v2 {
		t.Errorf("after force the current version is %s, want %s", got, v2)
	}
	// The CLI's --force does the same after another rollback.
	e.ok("skill", "rollback", "alpha", v1)
	if out := e.ok("skill", "update", "alpha", "--force"); !strings.Contains(out, "alpha: updated ") {
		t.Errorf("update --force said:\n%s", out)
	}
	c.conform(t)
}
