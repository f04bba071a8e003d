package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skillfs/skills/skilltest"
)

// curatedOut is one element of `skill list --curated --json` and of
// GET /v1/curated/skills.
type curatedOut struct {
	Slug        string `json:"slug"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Source      string `json:"source"`
	Path        string `json:"path"`
	Commit      string `json:"commit"`
}

func curatedSlugs(list []curatedOut) []string {
	out := []string{}
	for _, c := range list {
		out = append(out, c.Slug)
	}
	return out
}

// githubMirror makes a bare repository under a mirror folder and a git
// configuration, for this test process and every skillfs it starts, whose
// url.<base>.insteadOf sends https://github.com/ to that folder: the
// common names of GitHub repositories resolve without a network.
func githubMirror(t *testing.T, work *gitRepo, ownerRepo string) {
	t.Helper()
	mirror := filepath.Join(t.TempDir(), "mirror")
	bare := filepath.Join(mirror, ownerRepo+".git")
	if err := os.MkdirAll(filepath.Dir(bare), 0o755); err != nil {
		t.Fatal(err)
	}
	work.git("clone", "-q", "--bare", work.dir, bare)
	config := filepath.Join(t.TempDir(), "gitconfig")
	skilltest.WriteFile(t, config, []byte("[url \"file://"+mirror+"/\"]\n\tinsteadOf = https://github.com/\n"), 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", config)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
}

// TestCuratedCatalog: an admin registers a repository holding three
// skills as curated, by its GitHub name (served from a local mirror through
// insteadOf). Its skills are listed for everyone with name, description and
// source, and no session can read them; installed by one user (through the
// API), a skill becomes readable in her new sessions and leaves
// her recommended list, not another user's. Listings put builtins, then
// installed skills, then the curated tier.
func TestCuratedCatalog(t *testing.T) {
	e := newCatalogEnv(t)
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "skills-repo"))
	for _, s := range []string{"alpha", "beta", "gamma"} {
		writeSkill(t, filepath.Join(repo.dir, "skills", s), "name: "+s+"\ndescription: the "+s+" skill", map[string]string{"notes.md": "notes of " + s})
	}
	commit := repo.commit("three skills")
	githubMirror(t, repo, "acme/skills")

	// A builtin whose slug sorts last and an installed skill whose slug
	// sorts first: the order is by tier before slug.
	sys := filepath.Join(t.TempDir(), "zz-system")
	writeSkill(t, sys, "name: zz-system\ndescription: a system skill", nil)
	e.mustImport(sys, "--builtin")
	local := filepath.Join(t.TempDir(), "aa-local")
	writeSkill(t, local, "name: aa-local\ndescription: installed by hand\nslug: aa-local", nil)
	e.mustImport(local, "--share", "global")

	e.serve("--examples=false")
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	e.ok("user", "add", "carol", "--role", "admin")
	api := newAPIClient(e.home)

	// Only admins register sources; bad input registers nothing.
	if r := e.run("skill", "curated", "add", "acme/skills", "--as", "alice"); r.code != 4 {
		t.Fatalf("a user adds a curated source: exit %d, want 4 (%s)", r.code, r.stderr)
	}
	if r := e.run("skill", "curated", "add", "acme/missing"); r.code == 0 || !strings.Contains(r.stderr, "acme/missing") {
		t.Fatalf("a missing repository: exit %d, stderr %s", r.code, r.stderr)
	}
	var sources []struct {
		Source string `json:"source"`
		Skills int    `json:"skills"`
		Commit string `json:"commit"`
		Error  string `json:"error"`
	}
	e.okJSON(&sources, "skill", "curated", "list")
	if len(sources) != 0 {
		t.Fatalf("curated sources after refused adds: %+v", sources)
	}
	var added struct {
		Source string `json:"source"`
		Skills int    `json:"skills"`
		Commit string `json:"commit"`
	}
	e.okJSON(&added, "skill", "curated", "add", "acme/skills")
	const canonical = "https://github.com/acme/skills.git"
	if added.Source != canonical || added.Skills != 3 || added.Commit != commit {
		t.Fatalf("curated add = %+v, want %s with 3 skills at %s", added, canonical, commit)
	}
	if r := e.run("skill", "curated", "add", "github:acme/skills"); r.code != 6 {
		t.Fatalf("the same source under another name: exit %d, want 6 (%s)", r.code, r.stderr)
	}

	// Listed for everyone, with name, description and source.
	var offered []curatedOut
	e.okJSON(&offered, "skill", "list", "--curated", "--as", "alice")
	if got := curatedSlugs(offered); !slices.Equal(got, []string{"alpha", "beta", "gamma"}) {
		t.Fatalf("alice's recommended list = %v", got)
	}
	for _, c := range offered {
		if c.Name != c.Slug || c.Description != "the "+c.Slug+" skill" || c.Source != canonical || c.Path != "skills/"+c.Slug || c.Commit != commit {
			t.Errorf("curated entry %+v", c)
		}
	}
	text := e.ok("skill", "list", "--curated", "--as", "bob")
	if !strings.Contains(text, "the gamma skill") || !strings.Contains(text, canonical) {
		t.Errorf("skill list --curated shows no description or source:\n%s", text)
	}

	// Never readable in a session until installed.
	s := e.newSession("alice", "--all")
	for _, slug := range []string{"alpha", "beta", "gamma"} {
		if slices.Contains(s.Readable, slug) {
			t.Errorf("curated %s readable before it is installed: %v", slug, s.Readable)
		}
		if _, err := os.Stat(filepath.Join(s.Path, slug, "SKILL.md")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("curated %s in the mount before it is installed: %v", slug, err)
		}
	}

	// Alice installs beta through the API.
	var res struct {
		Installed []struct {
			Slug string `json:"slug"`
		} `json:"installed"`
	}
	if code := api.do(t, "POST", "/v1/curated/install", "alice", map[string]any{"name": "beta"}, &res); code != 200 || len(res.Installed) != 1 || res.Installed[0].Slug != "beta" {
		t.Fatalf("install beta: %d %+v", code, res)
	}
	if code := api.do(t, "POST", "/v1/curated/install", "alice", map[string]any{"name": "beta"}, nil); code != 409 {
		t.Errorf("install beta again: %d, want 409", code)
	}
	if code := api.do(t, "POST", "/v1/curated/install", "alice", map[string]any{"name": "delta"}, nil); code != 404 {
		t.Errorf("install a name no curated source offers: %d, want 404", code)
	}
	s = e.newSession("alice", "--all")
	b, err := os.ReadFile(filepath.Join(s.Path, "beta", "notes.md"))
	if err != nil || string(b) != "notes of beta" {
		t.Fatalf("installed beta in alice's session: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(s.Path, "alpha")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("alpha, not installed, in the mount: %v", err)
	}
	var forAlice, forBob []curatedOut
	if code := api.do(t, "GET", "/v1/curated/skills", "alice", nil, &forAlice); code != 200 {
		t.Fatalf("GET /v1/curated/skills: %d", code)
	}
	if got := curatedSlugs(forAlice); !slices.Equal(got, []string{"alpha", "gamma"}) {
		t.Errorf("alice's recommended list after installing beta = %v", got)
	}
	// Alice's beta is private to her: bob still has it recommended. He may
	// not share what he installs with everyone; carol, an admin, installs
	// gamma through the CLI for everyone.
	e.okJSON(&forBob, "skill", "list", "--curated", "--as", "bob")
	if got := curatedSlugs(forBob); !slices.Equal(got, []string{"alpha", "beta", "gamma"}) {
		t.Errorf("bob's recommended list = %v", got)
	}
	if _, r := e.importJSONArgs("skill", "install-curated", "gamma", "--share", "global", "--as", "bob"); r.code != 4 {
		t.Fatalf("bob installs gamma for everyone: exit %d, want 4 (%s)", r.code, r.stderr)
	}
	out, r := e.importJSONArgs("skill", "install-curated", "gamma", "--share", "global", "--as", "carol")
	if r.code != 0 || len(out.Installed) != 1 || out.Installed[0].Slug != "gamma" {
		t.Fatalf("carol installs gamma: exit %d %+v %s", r.code, out, r.stderr)
	}
	e.okJSON(&forAlice, "skill", "list", "--curated", "--as", "alice")
	if got := curatedSlugs(forAlice); !slices.Equal(got, []string{"alpha"}) {
		t.Errorf("alice's recommended list after carol shared gamma = %v", got)
	}

	// The catalog: builtins, then installed skills, each by slug; the
	// curated tier comes after.
	var order []string
	for _, it := range e.list("alice") {
		order = append(order, it.Slug)
	}
	if want := []string{"zz-system", "aa-local", "beta", "gamma"}; !slices.Equal(order, want) {
		t.Errorf("alice's catalog order = %v, want %v", order, want)
	}
	var apiList []listItem
	api.do(t, "GET", "/v1/skills", "alice", nil, &apiList)
	if len(apiList) != 4 || apiList[0].Slug != "zz-system" || apiList[1].Slug != "aa-local" {
		t.Errorf("GET /v1/skills order: %+v", apiList)
	}
	// The whole catalog in one list: builtins, installed, curated; each by
	// name; only what is not curated is active.
	type entry struct {
		Tier   string `json:"tier"`
		Slug   string `json:"slug"`
		Active bool   `json:"active"`
		Source string `json:"source"`
	}
	describe := func(list []entry) (out []string) {
		for _, x := range list {
			out = append(out, fmt.Sprintf("%s %s %v", x.Tier, x.Slug, x.Active))
		}
		return out
	}
	want := []string{"builtin zz-system true", "installed aa-local true", "installed beta true", "installed gamma true", "curated alpha false"}
	var whole, wholeAPI []entry
	e.okJSON(&whole, "skill", "catalog", "--as", "alice")
	if got := describe(whole); !slices.Equal(got, want) {
		t.Errorf("skill catalog = %v, want %v", got, want)
	}
	if code := api.do(t, "GET", "/v1/catalog", "alice", nil, &wholeAPI); code != 200 || !slices.Equal(describe(wholeAPI), want) {
		t.Errorf("GET /v1/catalog: %d %v, want %v", code, describe(wholeAPI), want)
	}
	if whole[len(whole)-1].Source == "" {
		t.Errorf("a curated entry names no source: %+v", whole[len(whole)-1])
	}

	// Refresh, over the API: admins only; a new skill in the source is
	// offered after it.
	if code := api.do(t, "POST", "/v1/curated/refresh", "alice", nil, nil); code != 403 {
		t.Errorf("a user refreshes: %d, want 403", code)
	}
	writeSkill(t, filepath.Join(repo.dir, "skills", "delta"), "name: delta\ndescription: the delta skill", nil)
	second := repo.commit("a fourth skill")
	repo.git("push", "-q", "file://"+mirrorOf(t, "acme/skills"), "main")
	var refreshed []struct {
		Source string `json:"source"`
		Skills int    `json:"skills"`
		Commit string `json:"commit"`
	}
	if code := api.do(t, "POST", "/v1/curated/refresh?source="+url.QueryEscape("acme/skills"), "", nil, &refreshed); code != 200 ||
		len(refreshed) != 1 || refreshed[0].Skills != 4 || refreshed[0].Commit != second {
		t.Fatalf("refresh: %d %+v", code, refreshed)
	}
	e.okJSON(&forAlice, "skill", "list", "--curated", "--as", "alice")
	if got := curatedSlugs(forAlice); !slices.Equal(got, []string{"alpha", "delta"}) {
		t.Errorf("alice's recommended list after refresh = %v", got)
	}

	// Removing the source leaves what was installed from it.
	if code := api.do(t, "DELETE", "/v1/curated?source="+url.QueryEscape(canonical), "bob", nil, nil); code != 403 {
		t.Errorf("a user removes a curated source: %d, want 403", code)
	}
	if code := api.do(t, "DELETE", "/v1/curated?source="+url.QueryEscape(canonical), "", nil, nil); code != 200 {
		t.Fatalf("remove the curated source: %d", code)
	}
	if code := api.do(t, "GET", "/v1/curated", "", nil, &sources); code != 200 || len(sources) != 0 {
		t.Errorf("curated sources after remove: %d %+v", code, sources)
	}
	e.okJSON(&forAlice, "skill", "list", "--curated", "--as", "alice")
	if len(forAlice) != 0 {
		t.Errorf("recommended after the source is gone: %v", curatedSlugs(forAlice))
	}
	if b, err := os.ReadFile(filepath.Join(s.Path, "beta", "SKILL.md")); err != nil || !strings.Contains(string(b), "name: beta") {
		t.Errorf("beta after its curated source was removed: %q %v", b, err)
	}
}

// importJSONArgs runs a command that answers as an import does, with
// --json, and decodes its answer.
func (e *env) importJSONArgs(args ...string) (importOut, result) {
	e.t.Helper()
	r := e.run(append(args, "--json")...)
	var out importOut
	if strings.TrimSpace(r.stdout) != "" {
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			e.t.Fatalf("skillfs %v --json: decode %q: %v", args, r.stdout, err)
		}
	}
	return out, r
}

// mirrorOf is where githubMirror put owner/repo, read back from the git
// configuration it wrote.
func mirrorOf(t *testing.T, ownerRepo string) string {
	t.Helper()
	b, err := os.ReadFile(os.Getenv("GIT_CONFIG_GLOBAL"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "file://")
	base, _, _ := strings.Cut(rest, "\"")
	return base + ownerRepo + ".git"
}

// TestRemoteNames: the common names of a GitHub repository, its tree and
// blob URLs, resolve to the repository, a ref and a folder (served from a
// local mirror through insteadOf); each names the same skill, so importing
// again under another name makes no second skill.
func TestRemoteNames(t *testing.T) {
	e := newCatalogEnv(t)
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "skills-repo"))
	writeSkill(t, filepath.Join(repo.dir, "skills", "pdf"), "name: pdf\ndescription: read PDFs", nil)
	writeSkill(t, filepath.Join(repo.dir, "skills", "xlsx"), "name: xlsx\ndescription: read sheets", nil)
	first := repo.commit("two skills")
	repo.git("tag", "v1")
	writeSkill(t, filepath.Join(repo.dir, "skills", "pdf"), "name: pdf\ndescription: read PDFs, better", nil)
	repo.commit("better pdf")
	githubMirror(t, repo, "acme/skills")

	in := e.mustImport("acme/skills/skills/pdf")
	if len(in.Installed) != 1 || in.Installed[0].Slug != "pdf" {
		t.Fatalf("owner/repo/path: %+v", in)
	}
	sh := e.show("pdf")
	if sh.Source != "git:https://github.com/acme/skills.git//skills/pdf" || sh.Description != "read PDFs, better" {
		t.Errorf("pdf from owner/repo/path: source %q, description %q", sh.Source, sh.Description)
	}
	// The tree URL of a tag: the same skill (no pdf-v2), at the tag.
	in = e.mustImport("https://github.com/acme/skills/tree/v1/skills/pdf")
	if len(in.Installed) != 1 || in.Installed[0].Slug != "pdf" {
		t.Fatalf("tree URL: %+v", in)
	}
	sh = e.show("pdf")
	if sh.Description != "read PDFs" || len(sh.Versions) != 2 || sh.Versions[0].Commit != first {
		t.Errorf("pdf from the tree URL of v1: description %q, versions %+v", sh.Description, sh.Versions)
	}
	in = e.mustImport("https://github.com/acme/skills/blob/main/skills/xlsx/SKILL.md")
	if len(in.Installed) != 1 || in.Installed[0].Slug != "xlsx" {
		t.Fatalf("blob URL: %+v", in)
	}
	in = e.mustImport("github:acme/skills", "--skill", "xlsx")
	if len(in.Installed) != 1 || in.Installed[0].Slug != "xlsx" || !slices.Contains(in.Installed[0].Warnings, "content identical to the current version: no new version") {
		t.Errorf("github:owner/repo --skill: %+v", in)
	}
	if got := e.listSlugs(); !slices.Equal(got, []string{"pdf", "xlsx"}) {
		t.Errorf("catalog = %v, want one skill per folder", got)
	}
}
