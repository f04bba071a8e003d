package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"skillfs/skills/skilltest"
)

// gitRepo is a working tree built with the git binary.
type gitRepo struct {
	t    testing.TB
	dir  string
	home string // HOME for git: no user configuration leaks in
}

func newGitRepo(t testing.TB, dir string) *gitRepo {
	t.Helper()
	requireCommand(t, "git")
	g := &gitRepo{t: t, dir: dir, home: t.TempDir()}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	g.git("init", "-q", "-b", "main")
	return g
}

// git runs git in the working tree and returns its trimmed output.
func (g *gitRepo) git(args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = g.dir
	env := []string{"HOME=" + g.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Skill Author", "GIT_AUTHOR_EMAIL=author@example.org",
		"GIT_COMMITTER_NAME=Skill Author", "GIT_COMMITTER_EMAIL=author@example.org"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit commits everything and returns the commit hash.
func (g *gitRepo) commit(msg string) string {
	g.t.Helper()
	g.git("add", "-A")
	g.git("commit", "-q", "-m", msg)
	return g.git("rev-parse", "HEAD")
}

// url is the repository as a git URL, so it is cloned (with provenance)
// rather than read as a plain directory.
func (g *gitRepo) url() string { return "file://" + g.dir }

// repoSkill is one skill of the test repository.
type repoSkill struct {
	rel  string   // folder below the repository root
	slug string   // the slug it declares
	name string   // display name
	deps []string // skill_dependencies
}

// repoSkills is a realistic catalog repository: most skills under skills/,
// a few under skills/.curated/, one whose name differs from its folder, two
// folders declaring the same slug, and dependencies (one pointing forward
// in discovery order).
var repoSkills = []repoSkill{
	{rel: "skills/api-client", slug: "api-client", deps: []string{"http-utils"}},
	{rel: "skills/changelog", slug: "changelog"},
	{rel: "skills/csv-tools", slug: "csv-tools"},
	{rel: "skills/docx-tools", slug: "word-documents"},
	{rel: "skills/font-kit", slug: "font-kit"},
	{rel: "skills/http-utils", slug: "http-utils"},
	{rel: "skills/image-resize", slug: "image-resize"},
	{rel: "skills/json-schema", slug: "json-schema"},
	{rel: "skills/log-parser", slug: "log-parser"},
	{rel: "skills/markdown-lint", slug: "markdown-lint"},
	{rel: "skills/pdf-forms", slug: "pdf-forms"},
	{rel: "skills/pptx-builder", slug: "pptx-builder"},
	{rel: "skills/regex-helper", slug: "regex-helper"},
	{rel: "skills/sql-query", slug: "sql-query"},
	{rel: "skills/test-runner", slug: "test-runner"},
	{rel: "skills/xlsx-reports", slug: "xlsx-reports", deps: []string{"csv-tools", "json-schema"}},
	{rel: "skills/yaml-config", slug: "yaml-config"},
	{rel: "skills/zip-inspect", slug: "zip-inspect"},
	{rel: "skills/.curated/changelog-pro", slug: "changelog", name: "Changelog Pro"},
	{rel: "skills/.curated/release-notes", slug: "release-notes", deps: []string{"markdown-lint", "changelog"}},
	{rel: "skills/.curated/security-review", slug: "security-review"},
}

// writeRepoSkills writes repoSkills below root: SKILL.md, executable
// scripts, references nested up to four levels, random binary assets of
// about assetBytes in total, and a 1 MiB font in font-kit.
func writeRepoSkills(t testing.TB, root string, assetBytes int) {
	t.Helper()
	writeSkillsOf(t, root, repoSkills, assetBytes)
}

// writeSkillsOf writes skills below root as writeRepoSkills writes
// repoSkills.
func writeSkillsOf(t testing.TB, root string, repoSkills []repoSkill, assetBytes int) {
	t.Helper()
	rng := rand.New(rand.NewChaCha8([32]byte{7}))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	per := assetBytes / len(repoSkills)
	for i, s := range repoSkills {
		dir := filepath.Join(root, filepath.FromSlash(s.rel))
		var fm strings.Builder
		if s.name != "" {
			fmt.Fprintf(&fm, "name: %s\nslug: %s\n", s.name, s.slug)
		} else {
			fmt.Fprintf(&fm, "name: %s\n", s.slug)
		}
		fmt.Fprintf(&fm, "description: Use when working with %s; covers the common cases.\n", s.slug)
		if len(s.deps) > 0 {
			fmt.Fprintf(&fm, "skill_dependencies: [%s]\n", strings.Join(s.deps, ", "))
		}
		fmt.Fprintf(&fm, "license: Apache-2.0\nmetadata:\n  version: \"1.%d\"\n", i)
		skilltest.WriteFile(t, filepath.Join(dir, "SKILL.md"), []byte("---\n"+fm.String()+"---\n\n# "+s.slug+"\n\nRun `scripts/run.sh`.\n"), 0o644)
		skilltest.WriteFile(t, filepath.Join(dir, "scripts", "run.sh"), []byte("#!/bin/sh\nset -eu\necho "+s.slug+"\n"), 0o755)
		if i%2 == 0 {
			skilltest.WriteFile(t, filepath.Join(dir, "scripts", "helper.py"), []byte("#!/usr/bin/env python3\nprint('"+s.slug+"')\n"), 0o755)
			skilltest.WriteFile(t, filepath.Join(dir, "scripts", "lib", "common.py"), []byte("X = 1\n"), 0o644)
		}
		skilltest.WriteFile(t, filepath.Join(dir, "references", "guide.md"), []byte("# Guide for "+s.slug+"\n"), 0o644)
		if i%3 == 0 {
			skilltest.WriteFile(t, filepath.Join(dir, "references", "api", "v1", "schemas", "request.json"), []byte(`{"type":"object"}`+"\n"), 0o644)
			skilltest.WriteFile(t, filepath.Join(dir, "references", "api", "v1", "schemas", "build.sh"), []byte("#!/bin/sh\n"), 0o755)
		}
		if i%4 == 1 {
			skilltest.WriteFile(t, filepath.Join(dir, "assets", "empty.txt"), nil, 0o644)
		}
		skilltest.WriteFile(t, filepath.Join(dir, "assets", "data.bin"), random(per/2+rng.IntN(per+1)), 0o644)
		if s.slug == "font-kit" {
			skilltest.WriteFile(t, filepath.Join(dir, "assets", "fonts", "SkillSans-Regular.ttf"), random(1<<20), 0o644)
		}
	}
	skilltest.WriteFile(t, filepath.Join(root, "README.md"), []byte("# Skills\n"), 0o644)
	skilltest.WriteFile(t, filepath.Join(root, "docs", "CONTRIBUTING.md"), []byte("Be nice.\n"), 0o644)
}

// sourceOf finds the repository folder an installed skill came from: the
// folder whose tree hash is its version, else the one holding its content
// apart from SKILL.md's slug line.
func sourceOf(t testing.TB, root, version, storedPath string) (rel string, renamed bool) {
	t.Helper()
	for _, s := range repoSkills {
		if hashDir(t, filepath.Join(root, s.rel)) == version {
			return s.rel, false
		}
	}
	stored := readTree(t, storedPath)
	for _, s := range repoSkills {
		dir := filepath.Join(root, s.rel)
		if len(diffTrees(readTree(t, dir), stored, "SKILL.md")) == 0 && bodyOf(t, dir) == bodyOf(t, storedPath) {
			return s.rel, true
		}
	}
	t.Fatalf("installed version %s (%s) matches no folder of the repository", version, storedPath)
	return "", false
}

func TestImportGitRepository(t *testing.T) {
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "skills-repo"))
	writeRepoSkills(t, repo.dir, 2<<20)
	commit1 := repo.commit("add skills")
	src := repo.url()
	e := newCatalogEnv(t)
	emptyStore := func(when string) {
		t.Helper()
		if got := e.listSlugs(); len(got) != 0 {
			t.Fatalf("%s: catalog lists %v, want nothing installed", when, got)
		}
		ents, _ := os.ReadDir(filepath.Join(e.home, "store", "skills"))
		if len(ents) != 0 {
			t.Fatalf("%s: store holds %d skill directories, want none", when, len(ents))
		}
		checkNoLeftovers(t, e)
	}

	// --list lists every skill and installs nothing.
	listed := e.mustImport(src, "--list")
	if len(listed.Installed) != 0 || len(listed.Available) != len(repoSkills) {
		t.Fatalf("--list: installed %d, available %d; want 0 and %d", len(listed.Installed), len(listed.Available), len(repoSkills))
	}
	var paths []string
	for _, a := range listed.Available {
		paths = append(paths, a.Path)
		if a.Description == "" {
			t.Errorf("--list: %s has no description", a.Path)
		}
	}
	var want []string
	for _, s := range repoSkills {
		want = append(want, s.rel)
	}
	sort.Strings(paths)
	sort.Strings(want)
	if !slices.Equal(paths, want) {
		t.Fatalf("--list paths:\n%v\nwant:\n%v", paths, want)
	}
	emptyStore("after --list")

	// Neither --skill nor --all: exit 6 listing the choices, nothing installed.
	r := e.run("skill", "import", src)
	if r.code != 6 {
		t.Fatalf("import of a multi-skill repository without --skill/--all: exit %d, want 6\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout+r.stderr, "xlsx-reports") || !strings.Contains(r.stderr, "--all") {
		t.Fatalf("exit 6 without naming the skills and how to choose:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
	emptyStore("after an import without --skill/--all")

	// --skill picks, by folder name or by slug.
	picked := e.mustImport(src, "--skill", "docx-tools", "--skill", "csv-tools")
	if got := picked.installedSlugs(); !slices.Equal(got, []string{"csv-tools", "word-documents"}) {
		t.Fatalf("--skill installed %v, want [csv-tools word-documents]", got)
	}
	if got := e.listSlugs(); !slices.Equal(got, []string{"csv-tools", "word-documents"}) {
		t.Fatalf("after --skill the catalog lists %v", got)
	}
	for _, in := range picked.Installed {
		if in.Slug == "word-documents" && !strings.Contains(strings.Join(in.Warnings, "\n"), "docx-tools") {
			t.Errorf("no warning that folder docx-tools differs from slug word-documents: %q", in.Warnings)
		}
	}
	if r := e.run("skill", "import", src, "--skill", "no-such-skill"); r.code != 3 {
		t.Fatalf("--skill of a missing skill: exit %d, want 3\n%s", r.code, r.stderr)
	}

	// --all installs the rest; the two already there get no new version.
	start := time.Now()
	all := e.mustImport(src, "--all")
	t.Logf("import --all of %d skills took %v", len(repoSkills), time.Since(start))
	if len(all.Failed) != 0 || len(all.Installed) != len(repoSkills) {
		t.Fatalf("--all: %d installed, failed %+v; want %d installed", len(all.Installed), all.Failed, len(repoSkills))
	}
	slugs := e.listSlugs()
	if len(slugs) != len(repoSkills) || !slices.Contains(slugs, "changelog-v2") {
		t.Fatalf("after --all the catalog lists %v", slugs)
	}
	warned := map[string][]string{}
	for _, in := range all.Installed {
		warned[in.Slug] = in.Warnings
	}
	if !strings.Contains(strings.Join(warned["changelog-v2"], "\n"), "changelog-v2") {
		t.Errorf("no warning for the renamed skill: %q", warned["changelog-v2"])
	}

	// Every byte and execute bit survives; versions are the tree hashes.
	versions := map[string]string{} // slug -> version after the first --all
	renamed := 0
	for _, slug := range slugs {
		s := checkStored(t, e, slug)
		versions[slug] = s.Version
		if len(s.Versions) != 1 {
			t.Errorf("%s: %d versions, want 1", slug, len(s.Versions))
		}
		if v := s.Versions[0]; v.Commit != commit1 || v.SourceType != "remote" || v.Installer != "operator" {
			t.Errorf("%s: provenance %+v, want commit %s, source type remote, installer operator", slug, v, commit1)
		}
		rel, isRenamed := sourceOf(t, repo.dir, s.Version, s.Path)
		dir := filepath.Join(repo.dir, rel)
		i := slices.IndexFunc(repoSkills, func(rs repoSkill) bool { return rs.rel == rel })
		if want := repoSkills[i].slug; slug != want && (!isRenamed || slug != want+"-v2") {
			t.Errorf("%s holds the content of %s, which declares slug %s", slug, rel, want)
		}
		if isRenamed {
			renamed++
			if slug != "changelog-v2" {
				t.Errorf("%s (from %s) was installed with a rewritten SKILL.md", slug, rel)
			}
			checkSlugRewrite(t, dir, s.Path, slug)
			if s.Name != "changelog" && s.Name != "Changelog Pro" {
				t.Errorf("renamed skill's display name = %q", s.Name)
			}
			continue
		}
		if d := diffTrees(readTree(t, dir), readTree(t, s.Path)); len(d) > 0 {
			t.Errorf("%s: stored content differs from %s:\n%s", slug, rel, strings.Join(d, "\n"))
		}
	}
	if renamed != 1 {
		t.Fatalf("%d skills were installed with a rewritten slug, want 1", renamed)
	}
	for _, tc := range []struct {
		slug string
		deps []string
	}{
		{"api-client", []string{"http-utils"}},
		{"xlsx-reports", []string{"csv-tools", "json-schema"}},
		{"release-notes", []string{"markdown-lint", "changelog"}},
	} {
		if got := e.show(tc.slug).SkillDependencies; !slices.Equal(got, tc.deps) {
			t.Errorf("%s: skill_dependencies = %v, want %v", tc.slug, got, tc.deps)
		}
	}
	fontPath := filepath.Join(e.show("font-kit").Path, "assets", "fonts", "SkillSans-Regular.ttf")
	if fi, err := os.Stat(fontPath); err != nil || fi.Size() != 1<<20 {
		t.Fatalf("font in the store: %v", err)
	}

	// A commit changes one skill: it alone gets a new version.
	skilltest.WriteFile(t, filepath.Join(repo.dir, "skills", "csv-tools", "references", "guide.md"), []byte("# Guide, second edition\n"), 0o644)
	skilltest.WriteFile(t, filepath.Join(repo.dir, "skills", "csv-tools", "scripts", "new.sh"), []byte("#!/bin/sh\necho new\n"), 0o755)
	commit2 := repo.commit("csv-tools: second edition")
	again := e.mustImport(src, "--all")
	if len(again.Failed) != 0 || len(again.Installed) != len(repoSkills) {
		t.Fatalf("second --all: %d installed, failed %+v", len(again.Installed), again.Failed)
	}
	if got := e.listSlugs(); !slices.Equal(got, slugs) {
		t.Fatalf("second --all changed the set of skills: %v, want %v", got, slugs)
	}
	for _, slug := range slugs {
		s := checkStored(t, e, slug)
		if slug != "csv-tools" {
			if len(s.Versions) != 1 || s.Version != versions[slug] {
				t.Errorf("%s: unchanged in the repository, but now %d versions, current %s (was %s)", slug, len(s.Versions), s.Version, versions[slug])
			}
			continue
		}
		csvDir := filepath.Join(repo.dir, "skills", "csv-tools")
		if want := hashDir(t, csvDir); s.Version != want {
			t.Errorf("csv-tools: version %s, want the new tree hash %s", s.Version, want)
		}
		if len(s.Versions) != 2 {
			t.Fatalf("csv-tools: %d versions, want 2", len(s.Versions))
		}
		newest, old := s.Versions[0], s.Versions[1]
		if newest.Hash != s.Version || newest.Previous != versions["csv-tools"] || newest.Commit != commit2 {
			t.Errorf("csv-tools newest version %+v: want hash %s, previous %s, commit %s", newest, s.Version, versions["csv-tools"], commit2)
		}
		if old.Hash != versions["csv-tools"] || old.Commit != commit1 {
			t.Errorf("csv-tools old version %+v: want hash %s, commit %s", old, versions["csv-tools"], commit1)
		}
		if _, err := os.Stat(old.Path); err != nil {
			t.Errorf("csv-tools: the old version's content is gone: %v", err)
		}
		if d := diffTrees(readTree(t, csvDir), readTree(t, s.Path)); len(d) > 0 {
			t.Errorf("csv-tools: new version differs from the source:\n%s", strings.Join(d, "\n"))
		}
	}
	checkNoOrphans(t, e)
	checkNoLeftovers(t, e)
}

func TestImportGitRefs(t *testing.T) {
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "repo"))
	for _, n := range []string{"alpha", "beta", "gamma"} {
		writeSkill(t, filepath.Join(repo.dir, "skills", n), "name: "+n+"\ndescription: The "+n+" skill.", map[string]string{"scripts/run.sh": "#!/bin/sh\necho " + n + "\n"})
	}
	commit1 := repo.commit("first")
	repo.git("tag", "v1")
	alphaDir := filepath.Join(repo.dir, "skills", "alpha")
	hash1 := hashDir(t, alphaDir)
	skilltest.WriteFile(t, filepath.Join(alphaDir, "references", "more.md"), []byte("more\n"), 0o644)
	commit2 := repo.commit("second")
	hash2 := hashDir(t, alphaDir)
	// The working tree moves on without a commit: a git import must not see it.
	skilltest.WriteFile(t, filepath.Join(alphaDir, "references", "uncommitted.md"), []byte("draft\n"), 0o644)

	cases := []struct {
		name       string
		args       []string
		wantHash   string
		wantCommit string
		wantRef    string
	}{
		{"tag in the URL", []string{repo.dir + "#v1"}, hash1, commit1, "v1"},
		{"tag with --ref", []string{repo.url(), "--ref", "v1"}, hash1, commit1, "v1"},
		{"commit hash", []string{repo.url() + "#" + commit1}, hash1, commit1, commit1},
		{"abbreviated commit hash", []string{repo.dir, "--ref", commit1[:10]}, hash1, commit1, commit1[:10]},
		{"branch", []string{repo.url(), "--ref", "main"}, hash2, commit2, "main"},
		{"default branch", []string{repo.url()}, hash2, commit2, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newCatalogEnv(t)
			out := e.mustImport(append(tc.args, "--skill", "alpha")...)
			if got := out.installedSlugs(); !slices.Equal(got, []string{"alpha"}) {
				t.Fatalf("installed %v", got)
			}
			s := checkStored(t, e, "alpha")
			if s.Version != tc.wantHash {
				t.Fatalf("version %s, want %s (the tree at that ref)", s.Version, tc.wantHash)
			}
			if v := s.Versions[0]; v.Commit != tc.wantCommit || v.Ref != tc.wantRef {
				t.Fatalf("provenance commit %q ref %q, want %q and %q", v.Commit, v.Ref, tc.wantCommit, tc.wantRef)
			}
		})
	}

	t.Run("tag then commit makes a new version", func(t *testing.T) {
		e := newCatalogEnv(t)
		e.mustImport(repo.url()+"#v1", "--skill", "alpha")
		e.mustImport(repo.url()+"#"+commit2, "--skill", "alpha")
		s := checkStored(t, e, "alpha")
		if len(s.Versions) != 2 || s.Version != hash2 || s.Versions[0].Previous != hash1 || s.Versions[1].Hash != hash1 {
			t.Fatalf("versions %+v: want %s after %s", s.Versions, hash2, hash1)
		}
	})

	t.Run("bare repository by path", func(t *testing.T) {
		bare := filepath.Join(t.TempDir(), "skills.git")
		repo.git("clone", "-q", "--bare", repo.dir, bare)
		e := newCatalogEnv(t)
		out, r := e.importJSON(bare, "--skill", "alpha")
		if r.code != 0 {
			t.Fatalf("import of a bare repository %s: exit %d, want 0\n%s", bare, r.code, r.stderr)
		}
		if s := checkStored(t, e, "alpha"); s.Version != hash2 || s.Versions[0].Commit != commit2 {
			t.Fatalf("installed %v at %s (commit %q), want %s at %s", out.installedSlugs(), s.Version, s.Versions[0].Commit, hash2, commit2)
		}
	})

	missing := filepath.Join(t.TempDir(), "no-such-repo")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"missing repository URL", []string{"file://" + missing + ".git", "--all"}},
		{"missing local path", []string{missing, "--all"}},
		{"missing ref in the URL", []string{repo.url() + "#no-such-tag", "--all"}},
		{"missing ref with --ref", []string{repo.dir, "--ref", "no-such-branch", "--all"}},
		{"missing commit", []string{repo.url(), "--ref", strings.Repeat("ab", 20), "--all"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCatalogEnv(t)
			e.ok("skill", "list")
			before := snapshot(t, e)
			out, r := e.importJSON(tc.args...)
			if r.code != 3 {
				t.Fatalf("exit %d, want 3 (not found)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			if len(out.Installed) != 0 || strings.TrimSpace(r.stderr) == "" {
				t.Fatalf("installed %v, stderr %q: want nothing installed and a message", out.installedSlugs(), r.stderr)
			}
			if after := snapshot(t, e); after != before {
				t.Fatalf("catalog changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			checkNoLeftovers(t, e)
		})
	}
}

// BenchmarkImportLocalGit measures `skill import PATH --ref main --all` of a
// repository on this machine holding 30 skills and about 20 MB of
// incompressible assets, scripts and nested folders: a commit read from the
// repository's objects, each round into a fresh data directory.
func BenchmarkImportLocalGit(b *testing.B) {
	repo := newGitRepo(b, filepath.Join(b.TempDir(), "skills-repo"))
	var many []repoSkill
	for i := range 30 {
		many = append(many, repoSkill{rel: fmt.Sprintf("skills/group-%d/skill-%02d", i%3, i), slug: fmt.Sprintf("skill-%02d", i)})
	}
	writeSkillsOf(b, repo.dir, many, 19<<20)
	repo.commit("skills")
	total := treeBytes(repo.dir)
	for b.Loop() {
		b.StopTimer()
		e := newCatalogEnv(b)
		b.StartTimer()
		out := e.mustImport(repo.dir, "--ref", "main", "--all")
		if len(out.Installed) != len(many) {
			b.Fatalf("installed %d skills, want %d", len(out.Installed), len(many))
		}
	}
	b.ReportMetric(float64(total)/1e6, "MB/repo")
}

// treeBytes sums the regular files of a working tree, .git left out.
func treeBytes(dir string) int64 {
	var total int64
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && !strings.Contains(p, string(filepath.Separator)+".git"+string(filepath.Separator)) {
			total += fi.Size()
		}
		return nil
	})
	return total
}

// BenchmarkImportRepo measures `skill import REPO --all` of a git repository
// holding 21 skills and about 10 MB of incompressible assets, each round into
// a fresh data directory.
func BenchmarkImportRepo(b *testing.B) {
	repo := newGitRepo(b, filepath.Join(b.TempDir(), "skills-repo"))
	writeRepoSkills(b, repo.dir, 9<<20)
	repo.commit("skills")
	total := treeBytes(repo.dir)
	for b.Loop() {
		b.StopTimer()
		e := newCatalogEnv(b)
		b.StartTimer()
		out := e.mustImport(repo.url(), "--all")
		if len(out.Installed) != len(repoSkills) {
			b.Fatalf("installed %d skills, want %d", len(out.Installed), len(repoSkills))
		}
	}
	b.ReportMetric(float64(total)/1e6, "MB/repo")
}
