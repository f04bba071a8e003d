package source

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/skills"
	"skillfs/skills/manifest"
	"skillfs/skills/skilltest"
)

// writeAgentSkill writes a skill folder with one manifest file.
func writeAgentSkill(tb testing.TB, dir, manifest, content string) {
	tb.Helper()
	skilltest.WriteFile(tb, filepath.Join(dir, manifest), []byte(content), 0o644)
}

// agentMkdirs creates the folders paths, with their parents.
func agentMkdirs(tb testing.TB, paths ...string) {
	tb.Helper()
	for _, p := range paths {
		skilltest.WriteDir(tb, p, nil)
	}
}

// agentSymlink writes a symlink at link to target, with link's parents.
func agentSymlink(tb testing.TB, target, link string) {
	tb.Helper()
	skilltest.WriteDir(tb, filepath.Dir(link), fstest.MapFS{filepath.Base(link): skilltest.Symlink(target)})
}

func skillDoc(name, desc string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n# " + name + "\n"
}

type dirKey struct {
	Path  string
	Agent string
	Scope string
	Rank  int
	Depth int
}

func dirKeys(dirs []AgentDir) []dirKey {
	var out []dirKey
	for _, d := range dirs {
		out = append(out, dirKey(d))
	}
	return out
}

func TestAgentDirs(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	project := filepath.Join(root, "project")
	elsewhere := filepath.Join(root, "elsewhere")
	agentMkdirs(t,
		filepath.Join(project, ".claude", "skills"),
		filepath.Join(project, ".codex", "skills"),
		filepath.Join(project, ".opencode", "skills"),
		filepath.Join(home, ".claude", "skills"),
		filepath.Join(home, ".config", "opencode", "skills"),
		elsewhere,
	)
	agentSymlink(t, elsewhere, filepath.Join(home, ".agents", "skills"))
	skilltest.WriteFile(t, filepath.Join(home, ".codex", "skills"), []byte("not a folder"), 0o644)

	sameHome := filepath.Join(root, "same")
	agentMkdirs(t, filepath.Join(sameHome, ".claude", "skills"), filepath.Join(sameHome, ".codex", "skills"))

	linkedHome := filepath.Join(root, "linked")
	agentMkdirs(t, filepath.Join(linkedHome, ".claude", "skills"))
	agentSymlink(t, filepath.Join(linkedHome, ".claude", "skills"), filepath.Join(linkedHome, ".agents", "skills"))

	tests := []struct {
		name          string
		home, project string
		want          []dirKey
	}{
		{"user before project, fixed order, only existing folders", home, project, []dirKey{
			{filepath.Join(home, ".claude", "skills"), AgentClaude, AgentScopeUser, 0, 1},
			{filepath.Join(home, ".agents", "skills"), AgentAgents, AgentScopeUser, 1, AgentScanDepth},
			{filepath.Join(home, ".config", "opencode", "skills"), AgentOpenCode, AgentScopeUser, 3, AgentScanDepth},
			{filepath.Join(project, ".claude", "skills"), AgentClaude, AgentScopeProject, 5, 1},
			{filepath.Join(project, ".codex", "skills"), AgentCodex, AgentScopeProject, 7, AgentScanDepth},
			{filepath.Join(project, ".opencode", "skills"), AgentOpenCode, AgentScopeProject, 8, AgentScanDepth},
		}},
		{"home only", home, "", []dirKey{
			{filepath.Join(home, ".claude", "skills"), AgentClaude, AgentScopeUser, 0, 1},
			{filepath.Join(home, ".agents", "skills"), AgentAgents, AgentScopeUser, 1, AgentScanDepth},
			{filepath.Join(home, ".config", "opencode", "skills"), AgentOpenCode, AgentScopeUser, 3, AgentScanDepth},
		}},
		{"project only", "", project, []dirKey{
			{filepath.Join(project, ".claude", "skills"), AgentClaude, AgentScopeProject, 5, 1},
			{filepath.Join(project, ".codex", "skills"), AgentCodex, AgentScopeProject, 7, AgentScanDepth},
			{filepath.Join(project, ".opencode", "skills"), AgentOpenCode, AgentScopeProject, 8, AgentScanDepth},
		}},
		{"project is home", sameHome, sameHome, []dirKey{
			{filepath.Join(sameHome, ".claude", "skills"), AgentClaude, AgentScopeUser, 0, 1},
			{filepath.Join(sameHome, ".codex", "skills"), AgentCodex, AgentScopeUser, 2, AgentScanDepth},
		}},
		{"folder linked to another", linkedHome, "", []dirKey{
			{filepath.Join(linkedHome, ".claude", "skills"), AgentClaude, AgentScopeUser, 0, 1},
		}},
		{"neither", "", "", nil},
		{"missing home", filepath.Join(root, "nobody"), "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := dirKeys(AgentDirs(tc.home, tc.project))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("AgentDirs(%q, %q) =\n%+v\nwant\n%+v", tc.home, tc.project, got, tc.want)
			}
		})
	}
}

// agentFixture is a fake home and project with skills in every folder kind.
type agentFixture struct {
	root, home, project string
}

func makeAgentFixture(tb testing.TB) agentFixture {
	tb.Helper()
	root := tb.TempDir()
	f := agentFixture{root: root, home: filepath.Join(root, "home"), project: filepath.Join(root, "project")}
	pClaude := filepath.Join(f.project, ".claude", "skills")
	uClaude := filepath.Join(f.home, ".claude", "skills")
	uAgents := filepath.Join(f.home, ".agents", "skills")
	uCodex := filepath.Join(f.home, ".codex", "skills")

	// The user's skill wins over the project's for the same slug.
	writeAgentSkill(tb, filepath.Join(pClaude, "pdf"), skills.ManifestName, skillDoc("pdf", "project pdf"))
	writeAgentSkill(tb, filepath.Join(uClaude, "pdf"), skills.ManifestName, skillDoc("pdf", "user pdf"))

	// Within the user scope: .agents wins over .codex.
	writeAgentSkill(tb, filepath.Join(uAgents, "shared"), skills.ManifestName, skillDoc("shared", "from agents"))
	writeAgentSkill(tb, filepath.Join(uCodex, "shared"), skills.ManifestName, skillDoc("shared", "from codex"))

	// Within one folder: by folder name, so "a-writer" beats "writer".
	writeAgentSkill(tb, filepath.Join(uAgents, "a-writer"), skills.ManifestName, skillDoc("writer", "first by folder name"))
	writeAgentSkill(tb, filepath.Join(uAgents, "writer"), skills.ManifestName, skillDoc("writer", "second by folder name"))

	// The same real folder twice: counted once, at its first place (here
	// shadowed by the user's pdf, so the project's is not reported again).
	agentSymlink(tb, filepath.Join(pClaude, "pdf"), filepath.Join(uAgents, "pdf-link"))

	// A linked skill with a real path of its own is found through its link.
	writeAgentSkill(tb, filepath.Join(root, "library", "linked"), skills.ManifestName, skillDoc("linked", "kept elsewhere"))
	agentSymlink(tb, filepath.Join(root, "library", "linked"), filepath.Join(uCodex, "linked"))

	// Broken skills are skipped with a reason.
	writeAgentSkill(tb, filepath.Join(uClaude, "bad-yaml"), skills.ManifestName, "---\nname: bad-yaml\n  description: x\n---\n")
	writeAgentSkill(tb, filepath.Join(uClaude, "unclosed"), skills.ManifestName, "---\nname: unclosed\ndescription: x\n")
	agentSymlink(tb, filepath.Join(root, "gone"), filepath.Join(uClaude, "dangling"))

	// What the agents load anyway loads: no description (the body stands
	// in), no frontmatter at all (the folder names it).
	writeAgentSkill(tb, filepath.Join(uClaude, "no-desc"), skills.ManifestName, "---\nname: no-desc\n---\nbody\n")
	writeAgentSkill(tb, filepath.Join(uClaude, "no-frontmatter"), skills.ManifestName, "# Just Markdown\n\nPlain notes.\n")

	// Names that are not slugs.
	writeAgentSkill(tb, filepath.Join(uClaude, "data-tool"), skills.ManifestName, skillDoc("Data Tool", "display name only"))
	writeAgentSkill(tb, filepath.Join(uClaude, "nameless"), skills.ManifestName, "---\ndescription: no name at all\n---\n")
	writeAgentSkill(tb, filepath.Join(uClaude, "odd-folder"), skills.ManifestName, skillDoc("renamed", "folder differs"))

	// Lower-case manifest name.
	writeAgentSkill(tb, filepath.Join(uClaude, "lower"), "skill.md", skillDoc("lower", "lower-case manifest"))

	// Codex searches its folder: a skill in a category folder is found, a
	// skill inside a skill is part of it, and a link back up is not
	// followed round.
	writeAgentSkill(tb, filepath.Join(uCodex, "group", "deep", "grouped"), skills.ManifestName, skillDoc("grouped", "in a category"))
	writeAgentSkill(tb, filepath.Join(uCodex, "group", "deep", "grouped", "inner"), skills.ManifestName, skillDoc("inner", "part of grouped"))
	agentSymlink(tb, uCodex, filepath.Join(uCodex, "group", "loop"))
	writeAgentSkill(tb, filepath.Join(uCodex, "a", "b", "c", "d", "e", "f", "too-deep"), skills.ManifestName, skillDoc("too-deep", "beyond the depth"))
	writeAgentSkill(tb, filepath.Join(uCodex, "a", "b", "c", "d", "e", "deepest"), skills.ManifestName, skillDoc("deepest", "at the depth"))

	// Not skills: hidden folders, plain files, folders without a manifest,
	// skills nested where Claude Code does not look.
	writeAgentSkill(tb, filepath.Join(uCodex, ".system", "skill-creator"), skills.ManifestName, skillDoc("skill-creator", "built in"))
	writeAgentSkill(tb, filepath.Join(uCodex, ".hidden"), skills.ManifestName, skillDoc("hidden", "hidden"))
	skilltest.WriteFile(tb, filepath.Join(uClaude, "README.md"), []byte("notes"), 0o644)
	agentMkdirs(tb, filepath.Join(uClaude, "empty"))
	writeAgentSkill(tb, filepath.Join(uClaude, "group", "nested"), skills.ManifestName, skillDoc("nested", "not a direct subfolder"))
	return f
}

func TestScanAgentDirs(t *testing.T) {
	f := makeAgentFixture(t)
	dirs := AgentDirs(f.home, f.project)
	found, shadowed, problems := ScanAgentDirs(dirs, nil)

	type row struct{ Slug, Name, Description, Dir, Agent, Scope string }
	var got []row
	for _, s := range found {
		got = append(got, row{s.Slug, s.Name, s.Description, s.Dir, s.From.Agent, s.From.Scope})
	}
	uClaude := filepath.Join(f.home, ".claude", "skills")
	uAgents := filepath.Join(f.home, ".agents", "skills")
	uCodex := filepath.Join(f.home, ".codex", "skills")
	want := []row{
		{"data-tool", "Data Tool", "display name only", filepath.Join(uClaude, "data-tool"), AgentClaude, AgentScopeUser},
		{"lower", "lower", "lower-case manifest", filepath.Join(uClaude, "lower"), AgentClaude, AgentScopeUser},
		{"nameless", "nameless", "no name at all", filepath.Join(uClaude, "nameless"), AgentClaude, AgentScopeUser},
		{"no-desc", "no-desc", "body", filepath.Join(uClaude, "no-desc"), AgentClaude, AgentScopeUser},
		{"no-frontmatter", "no-frontmatter", "Plain notes.", filepath.Join(uClaude, "no-frontmatter"), AgentClaude, AgentScopeUser},
		{"renamed", "renamed", "folder differs", filepath.Join(uClaude, "odd-folder"), AgentClaude, AgentScopeUser},
		{"pdf", "pdf", "user pdf", filepath.Join(uClaude, "pdf"), AgentClaude, AgentScopeUser},
		{"writer", "writer", "first by folder name", filepath.Join(uAgents, "a-writer"), AgentAgents, AgentScopeUser},
		{"shared", "shared", "from agents", filepath.Join(uAgents, "shared"), AgentAgents, AgentScopeUser},
		{"deepest", "deepest", "at the depth", filepath.Join(uCodex, "a", "b", "c", "d", "e", "deepest"), AgentCodex, AgentScopeUser},
		{"grouped", "grouped", "in a category", filepath.Join(uCodex, "group", "deep", "grouped"), AgentCodex, AgentScopeUser},
		{"linked", "linked", "kept elsewhere", filepath.Join(uCodex, "linked"), AgentCodex, AgentScopeUser},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("found:\n%s\nwant:\n%s", fmtRows(got), fmtRows(want))
	}

	// Every skipped skill is reported once, naming its folder and why.
	wantProblems := []struct{ dir, reason string }{
		{filepath.Join(uClaude, "bad-yaml"), "frontmatter"},
		{filepath.Join(uClaude, "dangling"), "broken symlink"},
		{filepath.Join(uClaude, "unclosed"), "not closed"},
	}
	if len(problems) != len(wantProblems) {
		t.Errorf("%d problems, want %d:\n%s", len(problems), len(wantProblems), strings.Join(problems, "\n"))
	}
	for _, wp := range wantProblems {
		n := 0
		for _, p := range problems {
			if strings.HasPrefix(p, "skip "+wp.dir+":") {
				n++
				if !strings.Contains(p, wp.reason) {
					t.Errorf("problem %q does not say %q", p, wp.reason)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s reported %d times, want once:\n%s", wp.dir, n, strings.Join(problems, "\n"))
		}
	}

	// A skill that another with the same slug hides is shadowed, naming
	// the winner: the link to the project's pdf by the user's pdf, which
	// leaves the project's pdf itself unreported (the same folder).
	type shadow struct{ Dir, Slug, By string }
	var gotShadowed []shadow
	for _, s := range shadowed {
		gotShadowed = append(gotShadowed, shadow{s.Dir, s.Slug, s.By})
	}
	wantShadowed := []shadow{
		{filepath.Join(uAgents, "pdf-link"), "pdf", filepath.Join(uClaude, "pdf")},
		{filepath.Join(uAgents, "writer"), "writer", filepath.Join(uAgents, "a-writer")},
		{filepath.Join(uCodex, "shared"), "shared", filepath.Join(uAgents, "shared")},
	}
	if !reflect.DeepEqual(gotShadowed, wantShadowed) {
		t.Errorf("shadowed:\n%s\nwant:\n%s", fmtRows(gotShadowed), fmtRows(wantShadowed))
	}
	for _, s := range shadowed {
		if !strings.Contains(s.String(), s.By) || !strings.Contains(s.String(), s.ByFrom.Path) {
			t.Errorf("%q does not say who wins", s.String())
		}
	}

	byDir := make(map[string]FoundSkill)
	for _, s := range found {
		byDir[s.Dir] = s
	}
	warnings := []struct {
		dir  string
		want []string // each must appear in some warning
	}{
		{filepath.Join(uAgents, "a-writer"), []string{`folder "a-writer"`}},
		{filepath.Join(uClaude, "data-tool"), []string{`using "data-tool"`}},
		{filepath.Join(uClaude, "nameless"), []string{"folder name"}},
		{filepath.Join(uClaude, "odd-folder"), []string{`folder "odd-folder"`}},
		{filepath.Join(uClaude, "lower"), []string{"skill.md"}},
		{filepath.Join(uClaude, "no-desc"), []string{"first paragraph"}},
		{filepath.Join(uClaude, "no-frontmatter"), []string{"frontmatter: none", "folder name"}},
	}
	for _, w := range warnings {
		s, ok := byDir[w.dir]
		if !ok {
			t.Errorf("%s not found", w.dir)
			continue
		}
		for _, sub := range w.want {
			if !containsSub(s.Warnings, sub) {
				t.Errorf("warnings of %s = %q, want one mentioning %q", w.dir, s.Warnings, sub)
			}
		}
	}
	if s := byDir[filepath.Join(uClaude, "pdf")]; len(s.Warnings) != 0 {
		t.Errorf("pdf warnings = %q, want none", s.Warnings)
	}
	if s := byDir[filepath.Join(uCodex, "linked")]; s.RealDir != filepath.Join(f.root, "library", "linked") {
		t.Errorf("linked RealDir = %q", s.RealDir)
	}
	if s := byDir[filepath.Join(uClaude, "lower")]; s.Manifest != "skill.md" {
		t.Errorf("lower Manifest = %q", s.Manifest)
	}
	if s := byDir[filepath.Join(uClaude, "pdf")]; s.Manifest != skills.ManifestName || s.RealDir != filepath.Join(uClaude, "pdf") {
		t.Errorf("pdf Manifest, RealDir = %q, %q", s.Manifest, s.RealDir)
	}
	for _, s := range found {
		if !manifest.ValidSlug(s.Slug) {
			t.Errorf("%s: slug %q is not valid", s.Dir, s.Slug)
		}
	}
}

func TestScanAgentDirsSameDirTwice(t *testing.T) {
	f := makeAgentFixture(t)
	uClaude := filepath.Join(f.home, ".claude", "skills")
	link := filepath.Join(f.root, "claude-link")
	agentSymlink(t, uClaude, link)
	once, _, onceProblems := ScanAgentDirs([]AgentDir{{Path: uClaude, Agent: AgentClaude, Scope: AgentScopeUser, Rank: 3}}, nil)
	twice, _, twiceProblems := ScanAgentDirs([]AgentDir{
		{Path: uClaude, Agent: AgentClaude, Scope: AgentScopeUser, Rank: 3},
		{Path: uClaude, Agent: AgentClaude, Scope: AgentScopeUser, Rank: 3},
		{Path: link, Agent: AgentAgents, Scope: AgentScopeUser, Rank: 4},
	}, nil)
	if len(once) == 0 {
		t.Fatal("fixture holds no skills")
	}
	if !reflect.DeepEqual(once, twice) {
		t.Errorf("listing a folder again changed the result:\n%+v\n%+v", once, twice)
	}
	if !reflect.DeepEqual(onceProblems, twiceProblems) {
		t.Errorf("listing a folder again changed the problems:\n%q\n%q", onceProblems, twiceProblems)
	}
}

func TestScanAgentDirsMissingDir(t *testing.T) {
	f := makeAgentFixture(t)
	missing := filepath.Join(f.root, "missing")
	uClaude := filepath.Join(f.home, ".claude", "skills")
	found, _, problems := ScanAgentDirs([]AgentDir{
		{Path: missing, Agent: AgentClaude, Scope: AgentScopeProject},
		{Path: uClaude, Agent: AgentClaude, Scope: AgentScopeUser, Rank: 3},
	}, nil)
	if len(found) == 0 {
		t.Error("a missing folder hid the others")
	}
	if len(problems) == 0 || !strings.Contains(problems[0], missing) {
		t.Errorf("problems = %q, want the missing folder first", problems)
	}
}

func TestScanAgentDirsManifestLimit(t *testing.T) {
	old := agentManifestMax
	agentManifestMax = 4096
	t.Cleanup(func() { agentManifestMax = old })
	dir := t.TempDir()
	big := skillDoc("big", "too big") + strings.Repeat("x", int(agentManifestMax))
	writeAgentSkill(t, filepath.Join(dir, "big"), skills.ManifestName, big)
	writeAgentSkill(t, filepath.Join(dir, "small"), skills.ManifestName, skillDoc("small", "fits"))
	found, _, problems := ScanAgentDirs([]AgentDir{{Path: dir, Agent: AgentAgents, Scope: AgentScopeUser}}, nil)
	if len(found) != 1 || found[0].Slug != "small" {
		t.Errorf("found = %+v, want only small", found)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "big") || !strings.Contains(problems[0], skills.LimitManifest) {
		t.Errorf("problems = %q, want the manifest limit for big", problems)
	}
}

func containsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func fmtRows[T any](rows []T) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "  %+v\n", r)
	}
	return b.String()
}

func FuzzParseAgentManifest(f *testing.F) {
	f.Add([]byte(skillDoc("pdf", "d")), "pdf")
	f.Add([]byte("---\ndescription: x\n---\n"), "My Folder")
	f.Add([]byte("---\nname: 数据\ndescription: x\n---\n"), "data")
	f.Add([]byte("---\nname: 数据\ndescription: x\n---\n"), "数据")
	f.Add([]byte("---\n{name: x, description: y}\n---\n"), "x")
	f.Add([]byte("---\nname: [\n---\n"), "x")
	f.Add([]byte("---\r\nslug: Bad Slug\r\ndescription: y\r\n---\r\n"), "good")
	f.Fuzz(func(t *testing.T, data []byte, folder string) {
		m, _, err := ParseManifest(data, folder)
		if err != nil {
			return
		}
		if !manifest.ValidSlug(m.Slug) {
			t.Fatalf("slug %q is not valid", m.Slug)
		}
		if m.Name == "" {
			t.Fatal("loaded with an empty name")
		}
		// The folder only stands in for what the frontmatter lacks.
		if plain, _, err := manifest.Parse(data, manifest.Lenient); err == nil && plain.Slug != m.Slug {
			t.Fatalf("slug %q with the folder, %q without", m.Slug, plain.Slug)
		}
	})
}

func TestScanAgentDirsFolderBudget(t *testing.T) {
	dir := t.TempDir()
	for i := range AgentScanMaxDirs + 1 {
		agentMkdirs(t, filepath.Join(dir, fmt.Sprintf("a%05d", i)))
	}
	writeAgentSkill(t, filepath.Join(dir, "b-direct"), skills.ManifestName, skillDoc("direct", "a direct subfolder"))
	writeAgentSkill(t, filepath.Join(dir, "c", "nested"), skills.ManifestName, skillDoc("nested", "past the budget"))
	found, _, problems := ScanAgentDirs([]AgentDir{{Path: dir, Agent: AgentCodex, Scope: AgentScopeUser, Depth: AgentScanDepth}}, nil)
	if len(found) != 1 || found[0].Slug != "direct" {
		t.Errorf("found = %+v, want only the direct subfolder", found)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "stopped searching") {
		t.Errorf("problems = %q, want one saying the search stopped", problems)
	}
}

// The guard sees each skill folder and then its manifest before the
// manifest is read; a skill it refuses is skipped with the refusal as its
// problem, and the others are found as before.
func TestScanAgentDirsGuard(t *testing.T) {
	dir := t.TempDir()
	writeAgentSkill(t, filepath.Join(dir, "kept"), skills.ManifestName, skillDoc("kept", "fine"))
	// Would be a parse problem if it were read.
	writeAgentSkill(t, filepath.Join(dir, "by-folder"), skills.ManifestName, "---\n: [\n---\n")
	writeAgentSkill(t, filepath.Join(dir, "by-manifest"), skills.ManifestName, "---\n: [\n---\n")
	var seen []string
	guard := func(p string) error {
		seen = append(seen, strings.TrimPrefix(p, dir+"/"))
		switch p {
		case filepath.Join(dir, "by-folder"), filepath.Join(dir, "by-manifest", skills.ManifestName):
			return fmt.Errorf("refused %s", filepath.Base(p))
		}
		return nil
	}
	found, _, problems := ScanAgentDirs([]AgentDir{{Path: dir, Agent: AgentClaude, Scope: AgentScopeUser, Depth: 1}}, guard)
	if len(found) != 1 || found[0].Slug != "kept" {
		t.Errorf("found %+v, want only kept", found)
	}
	want := []string{
		"skip " + filepath.Join(dir, "by-folder") + ": refused by-folder",
		"skip " + filepath.Join(dir, "by-manifest") + ": refused SKILL.md",
	}
	if !reflect.DeepEqual(problems, want) {
		t.Errorf("problems %q, want %q", problems, want)
	}
	if wantSeen := []string{"by-folder", "by-manifest", "by-manifest/SKILL.md", "kept", "kept/SKILL.md"}; !reflect.DeepEqual(seen, wantSeen) {
		t.Errorf("guard saw %q, want %q", seen, wantSeen)
	}
}
