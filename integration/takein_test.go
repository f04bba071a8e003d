package integration

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"skillfs/skills/skilltest"
)

// longDescription is over the 1024 characters the Agent Skills rules allow:
// import keeps it, with a warning.
var longDescription = strings.Repeat("Lints everything. ", 70)

// marketplaceRepo writes a repository shaped like the public plugin
// marketplaces: plugins that each hold a skill named "setup", skills with
// Claude Code's frontmatter and names that are not slugs, a helper skill in
// .claude/skills, .github layouts, a skill nested inside another, a
// marketplace entry pointing outside the repository and a skill that
// cannot be read at all. It returns the repository and, for each skill
// that must be installed, its slug and its folder in the repository.
func marketplaceRepo(t testing.TB, base string) (*gitRepo, map[string]string) {
	t.Helper()
	g := newGitRepo(t, filepath.Join(base, "market"))
	root := g.dir
	put := func(rel, content string) {
		t.Helper()
		skilltest.WriteFile(t, filepath.Join(root, filepath.FromSlash(rel)), []byte(content), 0o644)
	}
	// Outside the repository, named by the marketplace: never read.
	writeSkill(t, filepath.Join(base, "outside-plugin", "skills", "stolen"), "name: stolen\ndescription: "+outsideSecret, nil)

	put(".claude-plugin/marketplace.json", `{
  "name": "acme",
  "owner": {"name": "Acme"},
  "plugins": [
    {"name": "alpha", "source": "./plugins/alpha"},
    {"name": "beta", "source": "./plugins/beta", "description": "Beta tools"},
    {"name": "outside", "source": "../outside-plugin"},
    {"name": "remote", "source": {"source": "github", "repo": "acme/remote"}}
  ]
}`)
	put("plugins/alpha/.claude-plugin/plugin.json", `{"name": "alpha", "version": "1.0.0"}`)
	put("plugins/alpha/skills/setup/SKILL.md", "---\nname: setup\ndescription: Sets up alpha.\n---\n# Alpha setup\n")
	put("plugins/alpha/skills/setup/scripts/setup.sh", "#!/bin/sh\necho alpha\n")
	// A skill inside a skill's folder is part of it.
	put("plugins/alpha/skills/setup/examples/inner/SKILL.md", "---\nname: inner\ndescription: An example.\n---\n")
	// Claude Code's frontmatter, a display name, a nested metadata map.
	put("plugins/alpha/skills/web-search/SKILL.md", `---
name: Web Search Automation
description: Searches the web in a loop.
when_to_use: When the user asks to research something.
argument-hint: "[query]"
allowed-tools: Read, Grep, WebFetch
user-invocable: false
model: sonnet
effort: high
context: fork
agent: general-purpose
hooks:
  PreToolUse:
    - matcher: WebFetch
      hooks:
        - type: command
          command: echo check
metadata:
  openclaw:
    requires: {bins: [curl]}
  tags: [web, search]
---
# Web search

Search, read, repeat.
`)
	put("plugins/beta/.claude-plugin/plugin.json", `{"name": "beta"}`)
	put("plugins/beta/skills/setup/SKILL.md", "---\nname: setup\ndescription: Sets up beta.\n---\n# Beta setup\n")
	put("plugins/beta/skills/lint/SKILL.md", "---\nname: lint\ndisable-model-invocation: true\ndescription: "+longDescription+"\n---\n# Lint\n")
	// A helper skill in .claude/skills does not hide the plugins.
	put(".claude/skills/helper/SKILL.md", "---\nname: helper\ndescription: Helps with this repository.\n---\n")
	// .github layouts; no description: the body's first paragraph stands in.
	put(".github/skills/gh-notes/SKILL.md", "---\nname: gh-notes\n---\n# Notes\n\nKeeps release notes tidy.\n\nMore.\n")
	put(".github/plugins/gamma/skills/setup/SKILL.md", "---\nname: setup\ndescription: Sets up gamma.\n---\n")
	// No frontmatter at all: named after its folder, as the agents do.
	put("skills/plain-notes/SKILL.md", "# Plain notes\n\nJust Markdown.\n")
	// No name: the folder's name is the display name everywhere.
	put("skills/Team Notes/SKILL.md", "---\ndescription: Notes of the team.\n---\n")
	// An invalid slug key: the slug comes from the name, the line is rewritten.
	put("skills/escape/SKILL.md", "---\nname: escape\nslug: ../../x\ndescription: Tries to leave the store.\n---\n")
	// What no agent can load: refused, with the reason.
	put("skills/broken/SKILL.md", "---\nname: broken\n  description: [unclosed\n---\n")
	g.commit("a plugin marketplace")
	return g, map[string]string{
		"alpha-setup":           "plugins/alpha/skills/setup",
		"beta-setup":            "plugins/beta/skills/setup",
		"gamma-setup":           ".github/plugins/gamma/skills/setup",
		"web-search-automation": "plugins/alpha/skills/web-search",
		"lint":                  "plugins/beta/skills/lint",
		"helper":                ".claude/skills/helper",
		"gh-notes":              ".github/skills/gh-notes",
		"plain-notes":           "skills/plain-notes",
		"escape":                "skills/escape",
		"team-notes":            "skills/Team Notes",
	}
}

// TestImportMarketplace imports a plugin marketplace as an operator would
// import the skills their teams use: --list says what would happen to every
// skill (and exits 0), the import takes in everything an agent would load,
// with plugin namespaces for the duplicate names, and a session reads each
// skill byte for byte, apart from a slug line written in where the slug
// differs from what the file says. The agents' own flags keep a skill out
// of the prompt or of mention resolution.
func TestImportMarketplace(t *testing.T) {
	base := t.TempDir()
	g, want := marketplaceRepo(t, base)
	e := newCatalogEnv(t)

	// --list, from the git URL: a plan, nothing installed, exit 0 even
	// though one skill would be refused.
	list, r := e.importJSON(g.url(), "--list")
	if r.code != 0 {
		t.Fatalf("--list: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	status := map[string]string{}
	for _, a := range list.Available {
		status[a.Slug] = a.Status
		if a.Slug == "broken" && (a.Status != "refused" || !strings.Contains(a.Error, "invalid YAML")) {
			t.Errorf("broken listed as %q (%s), want refused for its YAML", a.Status, a.Error)
		}
	}
	for slug := range want {
		if status[slug] != "install" {
			t.Errorf("--list: %s is %q, want install (listed: %v)", slug, status[slug], status)
		}
	}
	if len(list.Available) != len(want)+1 {
		t.Errorf("--list offers %d skills, want %d: %v", len(list.Available), len(want)+1, status)
	}
	if len(e.list("")) != 0 {
		t.Fatal("--list installed something")
	}
	for _, w := range []string{"../outside-plugin", "acme/remote"} {
		if !slices.ContainsFunc(list.Warnings, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("no warning names the skipped plugin source %s: %q", w, list.Warnings)
		}
	}

	// The import itself, from the working tree, leaving out what cannot be
	// loaded with a glob.
	out := e.mustImport(g.dir, "--all", "--ignore", "bro*", "--share", "global")
	var got []string
	warned := map[string][]string{}
	for _, in := range out.Installed {
		got = append(got, in.Slug)
		warned[in.Slug] = in.Warnings
	}
	sort.Strings(got)
	var wantSlugs []string
	for s := range want {
		wantSlugs = append(wantSlugs, s)
	}
	sort.Strings(wantSlugs)
	if !slices.Equal(got, wantSlugs) || len(out.Failed) != 0 {
		t.Fatalf("installed %v, failed %+v; want %v", got, out.Failed, wantSlugs)
	}
	for slug, subs := range map[string][]string{
		"alpha-setup":           {`plugin "alpha"`},
		"web-search-automation": {`"Web Search Automation"`},
		"lint":                  {"exceeds 1024 characters"},
		"gh-notes":              {"first paragraph"},
		"plain-notes":           {"frontmatter: none", "folder"},
		"escape":                {"../../x"},
	} {
		for _, sub := range subs {
			if !slices.ContainsFunc(warned[slug], func(w string) bool { return strings.Contains(w, sub) }) {
				t.Errorf("warnings of %s %q lack %q", slug, warned[slug], sub)
			}
		}
	}
	// Claude Code's keys are known: no "unknown key" warning for them.
	for _, w := range warned["web-search-automation"] {
		if strings.Contains(w, "unknown") {
			t.Errorf("web-search-automation: %q", w)
		}
	}
	plugin := map[string]string{}
	names := map[string]string{}
	for _, it := range e.list("") {
		plugin[it.Slug], names[it.Slug] = it.Plugin, it.Name
	}
	for slug, p := range map[string]string{"alpha-setup": "alpha", "beta-setup": "beta", "gamma-setup": "gamma",
		"web-search-automation": "alpha", "lint": "beta", "helper": ""} {
		if plugin[slug] != p {
			t.Errorf("%s: plugin %q, want %q", slug, plugin[slug], p)
		}
	}
	if names["web-search-automation"] != "Web Search Automation" || names["plain-notes"] != "plain-notes" || names["team-notes"] != "Team Notes" {
		t.Errorf("names %v", names)
	}
	for slug := range want {
		checkStored(t, e, slug)
	}

	// A session reads every file as it is in the repository.
	e.serve()
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", strings.Join(wantSlugs, ","))
	for slug, rel := range want {
		src := filepath.Join(g.dir, filepath.FromSlash(rel))
		mounted := filepath.Join(s.Path, slug)
		switch slug {
		case "alpha-setup", "beta-setup", "gamma-setup", "escape":
			checkSlugRewrite(t, src, mounted, slug)
		default:
			if d := diffTrees(readTree(t, src), readTree(t, mounted)); len(d) > 0 {
				t.Errorf("%s through the mount differs from %s:\n%s", slug, rel, strings.Join(d, "\n"))
			}
		}
	}
	if _, err := os.Stat(filepath.Join(s.Path, "alpha-setup", "examples", "inner", "SKILL.md")); err != nil {
		t.Errorf("the nested skill is not part of alpha-setup: %v", err)
	}
	checkNoSecret(t, s.Path)
	checkNoSecret(t, e.home)

	// The prompt: plugin:name, and no lint (disable-model-invocation).
	var p promptXML
	if err := xml.Unmarshal([]byte(e.ok("session", "prompt", s.ID)), &p); err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, sk := range p.Skills {
		shown = append(shown, sk.Name)
	}
	sort.Strings(shown)
	wantShown := []string{"Team Notes", "alpha:Web Search Automation", "alpha:setup", "beta:setup", "escape", "gamma:setup", "gh-notes", "helper", "plain-notes"}
	if !slices.Equal(shown, wantShown) {
		t.Errorf("prompt lists %q, want %q", shown, wantShown)
	}
	// Mentions: lint still resolves; web-search-automation is not
	// user-invocable, so it does not.
	var m struct {
		Mentions []struct {
			Slug string `json:"slug"`
		} `json:"mentions"`
	}
	e.okJSON(&m, "session", "mentions", s.ID, "--text", "Run $lint, then $web-search-automation and $helper.")
	var mentioned []string
	for _, x := range m.Mentions {
		mentioned = append(mentioned, x.Slug)
	}
	if !slices.Equal(mentioned, []string{"lint", "helper"}) {
		t.Errorf("mentions resolved %q, want lint and helper", mentioned)
	}
	// Everything stays readable.
	for _, slug := range []string{"lint", "web-search-automation"} {
		if _, err := os.ReadFile(filepath.Join(s.Path, slug, "SKILL.md")); err != nil {
			t.Errorf("%s is not readable: %v", slug, err)
		}
	}

	// Listing again: everything is installed already.
	again, r := e.importJSON(g.dir, "--list", "--ignore", "broken")
	if r.code != 0 {
		t.Fatalf("--list again: exit %d: %s", r.code, r.stderr)
	}
	for _, a := range again.Available {
		if a.Status != "unchanged" {
			t.Errorf("listed again: %s is %q, want unchanged", a.Slug, a.Status)
		}
	}
	checkNoLeftovers(t, e)
}

// checkNoSecret asserts that nothing below dir holds the content of the
// files outside the imported source.
func checkNoSecret(t testing.TB, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), outsideSecret) {
			t.Errorf("%s holds content from outside the source", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestImportAgentFolders imports the skills of the agents on a machine:
// personal folders win over the project's, Codex's folder is searched in
// depth, a shadowed skill is reported with who wins and is not a failure,
// and --list exits 0.
func TestImportAgentFolders(t *testing.T) {
	e := newCatalogEnv(t)
	home, project := t.TempDir(), t.TempDir()
	writeSkill(t, filepath.Join(home, ".claude", "skills", "notes"), "name: notes\ndescription: mine", nil)
	writeSkill(t, filepath.Join(project, ".claude", "skills", "notes"), "name: notes\ndescription: the project's", nil)
	writeSkill(t, filepath.Join(home, ".codex", "skills", "team", "review"), "name: review\ndescription: in a category folder", nil)
	writeSkill(t, filepath.Join(project, ".opencode", "skills", "deploy"), "name: Deploy App\ndescription: a display name", nil)
	run := func(args ...string) (importOut, result) {
		t.Helper()
		r := e.runEnv([]string{"HOME=" + home}, append([]string{"skill", "import", "--agents", "--project", project, "--json"}, args...)...)
		var out importOut
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("decode %q: %v (stderr %s)", r.stdout, err, r.stderr)
		}
		return out, r
	}
	list, r := run("--list")
	if r.code != 0 || len(list.Available) != 3 || len(list.Shadowed) != 1 || len(list.Failed) != 0 {
		t.Fatalf("--agents --list: exit %d, %+v\n%s", r.code, list, r.stderr)
	}
	out, r := run("--all")
	if r.code != 0 {
		t.Fatalf("--agents --all: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := out.installedSlugs(); !slices.Equal(got, []string{"deploy-app", "notes", "review"}) {
		t.Fatalf("installed %v", got)
	}
	sh := out.Shadowed
	if len(sh) != 1 || sh[0].Source != filepath.Join(project, ".claude", "skills", "notes") ||
		sh[0].By != filepath.Join(home, ".claude", "skills", "notes") || !strings.Contains(sh[0].Reason, "precedence") {
		t.Fatalf("shadowed %+v", sh)
	}
	if d := e.show("notes"); d.Description != "mine" {
		t.Fatalf("notes is %q, want the personal one", d.Description)
	}
	// The human form says who wins, and exits 0.
	r = e.runEnv([]string{"HOME=" + home}, "skill", "import", "--agents", "--project", project, "--all")
	if r.code != 0 || !strings.Contains(r.stdout, "shadowed "+filepath.Join(project, ".claude", "skills", "notes")) {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
