package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/skills/skilltest"
)

// updateJSON is the JSON of `skill update --json`.
type updateJSON struct {
	DryRun bool `json:"dry_run"`
	Skills []struct {
		Slug     string `json:"slug"`
		Status   string `json:"status"`
		From     string `json:"from"`
		To       string `json:"to"`
		Ref      string `json:"ref"`
		Error    string `json:"error"`
		DiffStat *struct {
			FilesChanged int `json:"files_changed"`
			Insertions   int `json:"insertions"`
			Deletions    int `json:"deletions"`
		} `json:"diffstat"`
	} `json:"skills"`
}

func (u updateJSON) status() map[string]string {
	out := map[string]string{}
	for _, s := range u.Skills {
		out[s.Slug] = s.Status
	}
	return out
}

// TestUpdateFromGitSource: skill update re-reads a real local git
// repository at the branch the skills came from, installs what changed as
// new versions (a dry run installs nothing), moves to a tag when asked,
// and reports skills without a source to re-read; a same-slug import from
// another source says plainly that it became a new skill.
func TestUpdateFromGitSource(t *testing.T) {
	e := newCatalogEnv(t)
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "repo"))
	writeSkill(t, filepath.Join(repo.dir, "skills", "alpha"), "name: alpha\ndescription: Alpha.", map[string]string{"notes.txt": "a1\n"})
	writeSkill(t, filepath.Join(repo.dir, "skills", "beta"), "name: beta\ndescription: Beta.", map[string]string{"notes.txt": "b1\n"})
	repo.commit("first")
	res := e.mustImport(repo.url(), "--all")
	if got := res.installedSlugs(); len(got) != 2 {
		t.Fatalf("imported %v", got)
	}
	zp := filepath.Join(t.TempDir(), "gamma.zip")
	skilltest.WriteFile(t, zp, zipBytes(t, []skilltest.ZipEntry{{Name: "gamma/SKILL.md", Data: []byte("---\nname: gamma\ndescription: Gamma.\n---\n")}}), 0o644)
	e.mustImport(zp)

	var u updateJSON
	e.okJSON(&u, "skill", "update", "--all")
	if st := u.status(); st["alpha"] != "unchanged" || st["beta"] != "unchanged" || st["gamma"] != "no_source" {
		t.Fatalf("update with nothing new: %+v", u)
	}

	writeSkill(t, filepath.Join(repo.dir, "skills", "alpha"), "name: alpha\ndescription: Alpha.", map[string]string{"notes.txt": "a2\n"})
	repo.commit("alpha two")
	e.okJSON(&u, "skill", "update", "--all", "--dry-run")
	if st := u.status(); !u.DryRun || st["alpha"] != "would_update" || st["beta"] != "unchanged" {
		t.Fatalf("dry run: %+v", u)
	}
	if n := len(e.versions("alpha")); n != 1 {
		t.Fatalf("the dry run installed something: alpha has %d versions", n)
	}
	out := e.ok("skill", "update", "alpha", "beta")
	if !strings.Contains(out, "alpha: updated ") || !strings.Contains(out, "+0 -0 ~1 files, +1 -1 lines") || !strings.Contains(out, "beta: unchanged") {
		t.Errorf("update said:\n%s", out)
	}
	vs := e.versions("alpha")
	if len(vs) != 2 || !vs[0].Current || vs[0].Against != vs[1].Hash || vs[0].Commit != repo.git("rev-parse", "HEAD") {
		t.Fatalf("alpha after update: %+v", vs)
	}
	if got := e.ok("skill", "diff", "alpha", "--stat"); !strings.Contains(got, "changed skills/alpha/notes.txt") && !strings.Contains(got, "changed notes.txt (+1 -1)") {
		t.Errorf("diff after update:\n%s", got)
	}

	// A tag: main moves on, the update reads the tag when asked to.
	writeSkill(t, filepath.Join(repo.dir, "skills", "alpha"), "name: alpha\ndescription: Alpha.", map[string]string{"notes.txt": "a3\n"})
	repo.commit("alpha three")
	repo.git("tag", "v3")
	writeSkill(t, filepath.Join(repo.dir, "skills", "alpha"), "name: alpha\ndescription: Alpha.", map[string]string{"notes.txt": "a4 unreleased\n"})
	repo.commit("alpha four")
	e.okJSON(&u, "skill", "update", "alpha", "--tag", "v3")
	if len(u.Skills) != 1 || u.Skills[0].Status != "updated" || u.Skills[0].Ref != "refs/tags/v3" {
		t.Fatalf("update --tag: %+v", u)
	}
	show := e.show("alpha")
	if got := bodyOfFile(t, show.Path, "notes.txt"); got != "a3\n" {
		t.Errorf("after update --tag v3: notes.txt = %q", got)
	}
	if r := e.run("skill", "update", "alpha", "--tag", "v9"); r.code == 0 || !strings.Contains(r.stderr, "1 of 1 skills failed") {
		t.Errorf("update to a missing tag: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := e.run("skill", "update", "nosuch"); r.code != 3 {
		t.Errorf("update of an unknown skill: exit %d", r.code)
	}
	if r := e.run("skill", "update"); r.code != 2 {
		t.Errorf("update without skills: exit %d", r.code)
	}

	// Another source's alpha: a new skill, and the answer says so.
	other := filepath.Join(t.TempDir(), "alpha")
	writeSkill(t, other, "name: alpha\ndescription: Another alpha.", nil)
	var imp struct {
		Installed []struct {
			Slug        string `json:"slug"`
			RenamedFrom string `json:"renamed_from"`
			Note        string `json:"note"`
		} `json:"installed"`
	}
	e.okJSON(&imp, "skill", "import", other)
	if len(imp.Installed) != 1 || imp.Installed[0].Slug != "alpha-v2" || imp.Installed[0].RenamedFrom != "alpha" ||
		!strings.Contains(imp.Installed[0].Note, "--replace") || !strings.Contains(imp.Installed[0].Note, "new skill \"alpha-v2\"") {
		t.Errorf("renamed import: %+v", imp.Installed)
	}
	writeSkill(t, other, "name: alpha\ndescription: Another alpha, again.", nil)
	if out := e.ok("skill", "import", other); !strings.Contains(out, "installed alpha-v2") || strings.Contains(out, "note:") {
		t.Errorf("reimport of the renamed skill's own source:\n%s", out)
	}

	// The API: one skill, and all the acting user manages; the sources'
	// folders are import roots, where the API may read.
	e.serve("--import-root", filepath.Dir(repo.dir), "--import-root", filepath.Dir(other))
	c := newAPIClient(e.home)
	var au updateJSON
	if code := c.do(t, "POST", "/v1/skills/alpha/update", "", map[string]any{"dry_run": true, "tag": "v3"}, &au); code != http.StatusOK ||
		len(au.Skills) != 1 || au.Skills[0].Status != "unchanged" || !au.DryRun {
		t.Errorf("POST /v1/skills/alpha/update: %d %+v", code, au)
	}
	if code := c.do(t, "POST", "/v1/skills/update", "", map[string]any{"all": true, "dry_run": true}, &au); code != http.StatusOK ||
		au.status()["alpha"] != "unchanged" || au.status()["beta"] != "unchanged" || au.status()["alpha-v2"] != "no_source" && au.status()["alpha-v2"] != "unchanged" {
		t.Errorf("POST /v1/skills/update: %d %+v", code, au)
	}
	// alpha stays at the tag it was last read at, until asked for a branch.
	if code := c.do(t, "POST", "/v1/skills/alpha/update", "", map[string]any{"dry_run": true, "ref": "main"}, &au); code != http.StatusOK ||
		au.status()["alpha"] != "would_update" || au.Skills[0].Ref != "main" {
		t.Errorf("update alpha to main: %d %+v", code, au)
	}
	if code := c.do(t, "POST", "/v1/skills/update", "", map[string]any{"all": true, "skills": []string{"beta"}}, nil); code != http.StatusBadRequest {
		t.Errorf("skills and all: %d", code)
	}
	if code := c.do(t, "POST", "/v1/skills/update", "", map[string]any{"ref": "main", "tag": "v3", "all": true}, nil); code != http.StatusBadRequest {
		t.Errorf("ref and tag: %d", code)
	}
	c.conform(t)
}

func bodyOfFile(t *testing.T, dir, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
