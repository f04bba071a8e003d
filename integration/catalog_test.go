package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"skillfs/skills/manifest"
	"skillfs/skills/skilltest"
	"skillfs/skills/store"
)

// importOut is `skill import --json`.
type importOut struct {
	Installed []struct {
		Slug     string   `json:"slug"`
		Name     string   `json:"name"`
		Version  string   `json:"version"`
		Warnings []string `json:"warnings"`
	} `json:"installed"`
	Failed []struct {
		Source string `json:"source"`
		Error  string `json:"error"`
	} `json:"failed"`
	Available []struct {
		Name        string   `json:"name"`
		Slug        string   `json:"slug"`
		Description string   `json:"description"`
		Path        string   `json:"path"`
		Plugin      string   `json:"plugin"`
		Status      string   `json:"status"`
		Warnings    []string `json:"warnings"`
		Error       string   `json:"error"`
	} `json:"available"`
	Shadowed []struct {
		Source string `json:"source"`
		Slug   string `json:"slug"`
		By     string `json:"by"`
		Reason string `json:"reason"`
	} `json:"shadowed"`
	Warnings []string `json:"warnings"`
}

// installedSlugs lists the slugs an import reported, sorted.
func (o importOut) installedSlugs() []string {
	var out []string
	for _, in := range o.Installed {
		out = append(out, in.Slug)
	}
	sort.Strings(out)
	return out
}

// listItem is one element of `skill list --json`.
type listItem struct {
	Slug              string   `json:"slug"`
	Name              string   `json:"name"`
	Plugin            string   `json:"plugin"`
	Description       string   `json:"description"`
	Version           string   `json:"version"`
	Enabled           bool     `json:"enabled"`
	SourceType        string   `json:"source_type"`
	SkillDependencies []string `json:"skill_dependencies"`
	Creator           string   `json:"creator"`
}

// versionOut is one version in `skill show --json`.
type versionOut struct {
	Hash       string `json:"hash"`
	Path       string `json:"path"`
	SourceType string `json:"source_type"`
	Source     string `json:"source"`
	Ref        string `json:"ref"`
	Commit     string `json:"commit"`
	Installer  string `json:"installer"`
	Previous   string `json:"previous"`
	Files      int    `json:"files"`
	Bytes      int64  `json:"bytes"`
	Worktree   string `json:"worktree"`
}

// showOut is `skill show --json`.
type showOut struct {
	listItem
	Source   string       `json:"source"`
	Path     string       `json:"path"`
	Versions []versionOut `json:"versions"`
}

// newCatalogEnv is a data directory whose read-only published content is
// made removable again before the temporary directory is cleaned up.
func newCatalogEnv(t testing.TB) *env {
	t.Helper()
	e := newEnv(t)
	t.Cleanup(func() { makeWritable(e.home) })
	return e
}

// makeWritable undoes the read-only modes of a published store.
func makeWritable(dir string) {
	filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
}

// importJSON runs `skill import ... --json` and decodes what it printed,
// whether it succeeded or not.
func (e *env) importJSON(args ...string) (importOut, result) {
	e.t.Helper()
	r := e.run(append(append([]string{"skill", "import"}, args...), "--json")...)
	var out importOut
	if strings.TrimSpace(r.stdout) != "" {
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			e.t.Fatalf("skill import %v --json: decode %q: %v (stderr %s)", args, r.stdout, err, r.stderr)
		}
	}
	return out, r
}

// mustImport imports and fails the test unless the import exits 0.
func (e *env) mustImport(args ...string) importOut {
	e.t.Helper()
	out, r := e.importJSON(args...)
	if r.code != 0 {
		e.t.Fatalf("skill import %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return out
}

// list is `skill list --json` as the acting user as ("" = operator).
func (e *env) list(as string) []listItem {
	e.t.Helper()
	args := []string{"skill", "list"}
	if as != "" {
		args = append(args, "--as", as)
	}
	var out []listItem
	e.okJSON(&out, args...)
	return out
}

// listSlugs is the sorted slugs of `skill list` for the operator.
func (e *env) listSlugs() []string {
	e.t.Helper()
	var out []string
	for _, s := range e.list("") {
		out = append(out, s.Slug)
	}
	sort.Strings(out)
	return out
}

// show is `skill show SLUG --json`.
func (e *env) show(slug string) showOut {
	e.t.Helper()
	var out showOut
	e.okJSON(&out, "skill", "show", slug)
	return out
}

// hashDir is the tree hash of a folder as skillfs computes it.
func hashDir(t testing.TB, dir string) string {
	t.Helper()
	h, _, _, err := store.TreeHash(dir)
	if err != nil {
		t.Fatalf("tree hash of %s: %v", dir, err)
	}
	return h
}

// treeEntry is what the tests compare of one file or directory.
type treeEntry struct {
	dir  bool
	exec bool
	size int64
	sum  [32]byte
}

// readTree reads every entry below dir by slash path.
func readTree(t testing.TB, dir string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	err := filepath.WalkDir(dir, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == ".skillfs-version.json" {
			return nil // the store's metadata of a version, not content
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			out[rel] = treeEntry{dir: true}
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = treeEntry{exec: info.Mode()&0o100 != 0, size: int64(len(data)), sum: sha256.Sum256(data)}
		default:
			t.Fatalf("%s: unexpected %v", p, info.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read tree %s: %v", dir, err)
	}
	return out
}

// diffTrees lists how two trees differ, ignoring the paths in skip.
func diffTrees(src, stored map[string]treeEntry, skip ...string) []string {
	var diffs []string
	for rel, a := range src {
		if slices.Contains(skip, rel) {
			continue
		}
		b, ok := stored[rel]
		switch {
		case !ok:
			diffs = append(diffs, "missing from the store: "+rel)
		case a.dir != b.dir:
			diffs = append(diffs, "file/directory mismatch: "+rel)
		case a.exec != b.exec:
			diffs = append(diffs, "execute bit differs: "+rel)
		case a.size != b.size || a.sum != b.sum:
			diffs = append(diffs, "content differs: "+rel)
		}
	}
	for rel := range stored {
		if _, ok := src[rel]; !ok && !slices.Contains(skip, rel) {
			diffs = append(diffs, "only in the store: "+rel)
		}
	}
	sort.Strings(diffs)
	return diffs
}

// checkStored asserts that slug's current version in the store is what the
// index says: the directory exists, hashes to the version, and its SKILL.md
// declares the slug.
func checkStored(t testing.TB, e *env, slug string) showOut {
	t.Helper()
	s := e.show(slug)
	if s.Path == "" {
		t.Fatalf("show %s: no path", slug)
	}
	if _, err := os.Stat(s.Path); err != nil {
		t.Fatalf("%s: the index names version %s, but its store directory is gone: %v", slug, s.Version, err)
	}
	if got := hashDir(t, s.Path); got != s.Version {
		t.Fatalf("%s: store directory hashes to %s, index says %s", slug, got, s.Version)
	}
	if filepath.Base(s.Path) != s.Version {
		t.Fatalf("%s: store directory %s is not named by its version %s", slug, s.Path, s.Version)
	}
	data, err := os.ReadFile(filepath.Join(s.Path, "SKILL.md"))
	if err != nil {
		t.Fatalf("%s: %v", slug, err)
	}
	// Read as a stored SKILL.md is read: leniently, in a folder named by its slug.
	m, _, err := manifest.ParseStored(data, slug)
	if err != nil {
		t.Fatalf("%s: stored SKILL.md: %v", slug, err)
	}
	if m.Slug != slug {
		t.Fatalf("%s: stored SKILL.md declares slug %q", slug, m.Slug)
	}
	return s
}

// checkNoOrphans asserts that every version directory in the store belongs
// to a version the index knows, and the other way round.
func checkNoOrphans(t testing.TB, e *env) {
	t.Helper()
	indexed := map[string]bool{}
	for _, s := range e.list("") {
		for _, v := range e.show(s.Slug).Versions {
			indexed[s.Slug+"/"+v.Hash] = true
		}
	}
	onDisk := map[string]bool{}
	root := filepath.Join(e.home, "store", "skills")
	slugs, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, sd := range slugs {
		hashes, err := os.ReadDir(filepath.Join(root, sd.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(hashes) == 0 {
			t.Errorf("empty slug directory left in the store: %s", sd.Name())
		}
		for _, h := range hashes {
			onDisk[sd.Name()+"/"+h.Name()] = true
		}
	}
	for k := range onDisk {
		if !indexed[k] {
			t.Errorf("store holds %s, which no index row names", k)
		}
	}
	for k := range indexed {
		if !onDisk[k] {
			t.Errorf("index names version %s, which is not in the store", k)
		}
	}
}

func TestValidate(t *testing.T) {
	e := newCatalogEnv(t)
	cases := []struct {
		name        string
		folder      string
		frontmatter string
		wantCode    int
		wantFields  []string // fields of the problems reported
	}{
		{
			name:        "good skill",
			folder:      "release-helper",
			frontmatter: "name: release-helper\ndescription: Drafts release notes from merged changes.",
			wantCode:    0,
		},
		{
			name:        "bad name and long description",
			folder:      "my-skill",
			frontmatter: "name: My--Skill_\ndescription: " + strings.Repeat("x", 1100),
			wantCode:    1,
			wantFields:  []string{"name", "description"},
		},
		{
			name:        "missing description and bad dependency",
			folder:      "deps",
			frontmatter: "name: deps\nskill_dependencies: [Not_A_Slug]",
			wantCode:    1,
			wantFields:  []string{"description", "skill_dependencies"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.folder)
			writeSkill(t, dir, tc.frontmatter, nil)

			text := e.run("skill", "validate", dir)
			if text.code != tc.wantCode {
				t.Fatalf("validate: exit %d, want %d\nstdout: %s\nstderr: %s", text.code, tc.wantCode, text.stdout, text.stderr)
			}
			jr := e.run("skill", "validate", dir, "--json")
			if jr.code != tc.wantCode {
				t.Fatalf("validate --json: exit %d, want %d\n%s%s", jr.code, tc.wantCode, jr.stdout, jr.stderr)
			}
			var v struct {
				Valid  bool `json:"valid"`
				Slug   string
				Errors []struct{ Field, Message string }
			}
			if err := json.Unmarshal([]byte(jr.stdout), &v); err != nil {
				t.Fatalf("decode %q: %v", jr.stdout, err)
			}
			if v.Valid != (tc.wantCode == 0) {
				t.Fatalf("valid = %v, want %v", v.Valid, tc.wantCode == 0)
			}
			if tc.wantCode == 0 {
				if v.Slug != tc.folder || !strings.Contains(text.stdout, tc.folder) {
					t.Fatalf("slug = %q, output %q: want %q named", v.Slug, text.stdout, tc.folder)
				}
				return
			}
			fields := map[string]bool{}
			for _, p := range v.Errors {
				fields[p.Field] = true
			}
			for _, f := range tc.wantFields {
				if !fields[f] {
					t.Errorf("no problem reported for %q; got %+v", f, v.Errors)
				}
				if !strings.Contains(text.stdout, "error: "+f+":") {
					t.Errorf("text output does not list the %q problem:\n%s", f, text.stdout)
				}
			}
		})
	}
	t.Run("long description names the limit", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "long")
		writeSkill(t, dir, "name: long\ndescription: "+strings.Repeat("y", 1100), nil)
		r := e.run("skill", "validate", dir)
		if r.code != 1 || !strings.Contains(r.stdout, "1024") || !strings.Contains(r.stdout, "1100") {
			t.Fatalf("exit %d, output %q: want exit 1 naming the limit 1024 and the length 1100", r.code, r.stdout)
		}
	})
}

// richSkill writes a skill with a script, nested references and a binary
// asset, the kinds of content a round trip must keep.
func richSkill(t testing.TB, dir, slug string, seed byte) {
	t.Helper()
	writeSkill(t, dir, "name: "+slug+"\ndescription: Converts things for "+slug+".", map[string]string{
		"scripts/run.sh":                     "#!/bin/sh\necho " + slug + "\n",
		"references/guide.md":                "# Guide\n",
		"references/deep/er/still/notes.txt": "deep\n",
	})
	blob := make([]byte, 100<<10)
	for i := range blob {
		blob[i] = byte(i*7) ^ seed
	}
	skilltest.WriteFile(t, filepath.Join(dir, "assets", "blob.bin"), blob, 0o644)
}

func TestExportRoundTrip(t *testing.T) {
	e := newCatalogEnv(t)
	src := filepath.Join(t.TempDir(), "converter")
	richSkill(t, src, "converter", 1)
	in := e.mustImport(src)
	if got := in.installedSlugs(); !slices.Equal(got, []string{"converter"}) {
		t.Fatalf("installed %v, want [converter]", got)
	}
	v1 := in.Installed[0].Version
	if want := hashDir(t, src); v1 != want {
		t.Fatalf("version %s, want the tree hash of the source %s", v1, want)
	}

	// Identical content again: no new version.
	again := e.mustImport(src)
	if again.Installed[0].Version != v1 {
		t.Fatalf("re-import gave version %s, want %s", again.Installed[0].Version, v1)
	}
	if n := len(e.show("converter").Versions); n != 1 {
		t.Fatalf("identical re-import: %d versions, want 1", n)
	}

	zipPath := filepath.Join(t.TempDir(), "converter.zip")
	e.ok("skill", "export", "converter", "-o", zipPath)
	stdoutZip := e.ok("skill", "export", "converter")
	fileZip, err := os.ReadFile(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(stdoutZip) == 0 || !bytes.HasPrefix([]byte(stdoutZip), []byte("PK")) || !bytes.HasPrefix(fileZip, []byte("PK")) {
		t.Fatalf("export did not write a ZIP (file %d bytes, stdout %d bytes)", len(fileZip), len(stdoutZip))
	}

	fresh := newCatalogEnv(t)
	out := fresh.mustImport(zipPath)
	if got := out.installedSlugs(); !slices.Equal(got, []string{"converter"}) {
		t.Fatalf("import of the export installed %v", got)
	}
	if out.Installed[0].Version != v1 {
		t.Fatalf("round trip changed the version: %s, want %s", out.Installed[0].Version, v1)
	}
	s := checkStored(t, fresh, "converter")
	if d := diffTrees(readTree(t, src), readTree(t, s.Path)); len(d) > 0 {
		t.Fatalf("round trip changed the content:\n%s", strings.Join(d, "\n"))
	}
	fresh.mustImport(zipPath)
	if n := len(fresh.show("converter").Versions); n != 1 {
		t.Fatalf("identical re-import of the ZIP: %d versions, want 1", n)
	}
	if r := e.run("skill", "export", "no-such-skill", "-o", filepath.Join(t.TempDir(), "x.zip")); r.code != 3 {
		t.Fatalf("export of a missing skill: exit %d, want 3", r.code)
	}
}

func TestSkillLifecycle(t *testing.T) {
	e := newCatalogEnv(t)
	e.ok("user", "add", "bob")
	src := filepath.Join(t.TempDir(), "notes")
	richSkill(t, src, "notes", 2)
	e.mustImport(src, "--share", "global")
	other := filepath.Join(t.TempDir(), "other")
	writeSkill(t, other, "name: other\ndescription: Another skill.", nil)
	e.mustImport(other)

	if got := e.listSlugs(); !slices.Equal(got, []string{"notes", "other"}) {
		t.Fatalf("list = %v", got)
	}
	bobSees := func() []string {
		var out []string
		for _, s := range e.list("bob") {
			out = append(out, s.Slug)
		}
		return out
	}
	if got := bobSees(); !slices.Equal(got, []string{"notes"}) {
		t.Fatalf("bob lists %v, want [notes] (other is private to the operator)", got)
	}
	s := e.show("notes")
	if !s.Enabled || s.Name != "notes" || s.Description != "Converts things for notes." || len(s.Versions) != 1 || s.Versions[0].Installer != "operator" {
		t.Fatalf("show notes = %+v", s)
	}
	if s.Versions[0].Files != 5 || s.Versions[0].Bytes <= 100<<10 {
		t.Fatalf("provenance counts %d files, %d bytes; want 5 files over 100 KiB", s.Versions[0].Files, s.Versions[0].Bytes)
	}

	e.ok("skill", "disable", "notes")
	var found *listItem
	for _, it := range e.list("") {
		if it.Slug == "notes" {
			found = &it
		}
	}
	if found == nil || found.Enabled {
		t.Fatalf("disabled skill: operator's list entry = %+v, want listed with enabled=false", found)
	}
	if e.show("notes").Enabled {
		t.Fatal("show after disable: enabled")
	}
	if got := bobSees(); len(got) != 0 {
		t.Fatalf("bob still lists %v after disable", got)
	}
	if r := e.run("skill", "show", "notes", "--as", "bob"); r.code != 3 {
		t.Fatalf("bob shows a disabled skill: exit %d, want 3", r.code)
	}

	e.ok("skill", "enable", "notes")
	if !e.show("notes").Enabled || !slices.Equal(bobSees(), []string{"notes"}) {
		t.Fatal("enable did not bring the skill back")
	}

	if r := e.run("skill", "delete", "notes", "--as", "bob"); r.code != 4 && r.code != 3 {
		t.Fatalf("bob deletes the operator's skill: exit %d, want 4 (or 3)", r.code)
	}
	storeDir := filepath.Join(e.home, "store", "skills", "notes")
	if _, err := os.Stat(storeDir); err != nil {
		t.Fatalf("store directory before delete: %v", err)
	}
	e.ok("skill", "delete", "notes")
	if _, err := os.Stat(storeDir); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("store directory after delete: %v, want gone", err)
	}
	if got := e.listSlugs(); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("list after delete = %v", got)
	}
	for _, args := range [][]string{{"skill", "show", "notes"}, {"skill", "delete", "notes"}, {"skill", "enable", "notes"}} {
		if r := e.run(args...); r.code != 3 {
			t.Errorf("%v after delete: exit %d, want 3", args, r.code)
		}
	}
	checkNoOrphans(t, e)
}

// manifestLines returns the SKILL.md of a folder split into lines.
func manifestLines(t testing.TB, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")
}

// checkSlugRewrite asserts that stored differs from src only in the slug
// line of SKILL.md: a changed `slug:` line, or one inserted.
func checkSlugRewrite(t testing.TB, src, stored, slug string) {
	t.Helper()
	a, b := manifestLines(t, src), manifestLines(t, stored)
	want := "slug: " + slug
	var diff []string
	if len(a) == len(b) {
		for i := range a {
			if a[i] != b[i] {
				diff = append(diff, a[i]+" -> "+b[i])
				if b[i] != want || !strings.HasPrefix(a[i], "slug:") {
					t.Errorf("line %d changed from %q to %q, want only the slug line set to %q", i+1, a[i], b[i], want)
				}
			}
		}
		if len(diff) != 1 {
			t.Errorf("stored SKILL.md differs in %d lines, want exactly the slug line: %v", len(diff), diff)
		}
	} else {
		i := slices.Index(b, want)
		if len(b) != len(a)+1 || i < 0 || !slices.Equal(slices.Delete(slices.Clone(b), i, i+1), a) {
			t.Errorf("stored SKILL.md is not the source with one %q line:\nsource: %q\nstored: %q", want, a, b)
		}
	}
	if d := diffTrees(readTree(t, src), readTree(t, stored), "SKILL.md"); len(d) > 0 {
		t.Errorf("files other than SKILL.md differ:\n%s", strings.Join(d, "\n"))
	}
}

func TestSlugConflictFromAnotherSource(t *testing.T) {
	e := newCatalogEnv(t)
	base := t.TempDir()
	first := filepath.Join(base, "team-a", "formatter")
	second := filepath.Join(base, "team-b", "formatter")
	writeSkill(t, first, "name: formatter\ndescription: Formats code the team A way.", map[string]string{"scripts/fmt.sh": "#!/bin/sh\necho a\n"})
	writeSkill(t, second, "name: Formatter\nslug: formatter\ndescription: Formats code the team B way.", map[string]string{"scripts/fmt.sh": "#!/bin/sh\necho b\n"})

	a := e.mustImport(first)
	if got := a.installedSlugs(); !slices.Equal(got, []string{"formatter"}) {
		t.Fatalf("first import installed %v", got)
	}
	b := e.mustImport(second)
	if got := b.installedSlugs(); !slices.Equal(got, []string{"formatter-v2"}) {
		t.Fatalf("second source installed %v, want [formatter-v2]", got)
	}
	if w := strings.Join(b.Installed[0].Warnings, "\n"); !strings.Contains(w, "formatter-v2") {
		t.Fatalf("no warning naming the new slug; warnings: %q", b.Installed[0].Warnings)
	}
	v2 := checkStored(t, e, "formatter-v2")
	if v2.Name != "Formatter" {
		t.Fatalf("display name of the -v2 skill = %q, want it kept as %q", v2.Name, "Formatter")
	}
	checkSlugRewrite(t, second, v2.Path, "formatter-v2")
	if got := e.show("formatter"); got.Version != a.Installed[0].Version || len(got.Versions) != 1 {
		t.Fatalf("original changed: %+v", got)
	}

	// The same second source again: a new version of formatter-v2 only when
	// its content changes.
	if again := e.mustImport(second); !slices.Equal(again.installedSlugs(), []string{"formatter-v2"}) {
		t.Fatalf("re-import of the second source installed %v", again.installedSlugs())
	}
	if n := len(e.show("formatter-v2").Versions); n != 1 {
		t.Fatalf("formatter-v2 has %d versions after an identical re-import, want 1", n)
	}

	// --replace: a manager makes the other source a new version of the original.
	r := e.mustImport(second, "--replace")
	if got := r.installedSlugs(); !slices.Equal(got, []string{"formatter"}) {
		t.Fatalf("--replace installed %v, want [formatter]", got)
	}
	s := checkStored(t, e, "formatter")
	if len(s.Versions) != 2 {
		t.Fatalf("formatter has %d versions after --replace, want 2", len(s.Versions))
	}
	if s.Version != hashDir(t, second) {
		t.Fatalf("formatter's version after --replace is %s, want the second source's hash %s", s.Version, hashDir(t, second))
	}
	if s.Versions[0].Hash != s.Version || s.Versions[0].Previous != a.Installed[0].Version {
		t.Fatalf("newest version %+v: want hash %s, previous %s", s.Versions[0], s.Version, a.Installed[0].Version)
	}
	if d := diffTrees(readTree(t, second), readTree(t, s.Path)); len(d) > 0 {
		t.Fatalf("--replace stored other content:\n%s", strings.Join(d, "\n"))
	}

	// Someone who does not manage the original cannot replace it. While she
	// cannot see it (private to the operator), --replace is answered as if
	// it were not asked: a new skill beside it, telling nothing of it.
	e.ok("user", "add", "carol")
	third := filepath.Join(base, "team-c", "formatter")
	writeSkill(t, third, "name: formatter\ndescription: Formats code the team C way.", nil)
	out, res := e.importJSON(third, "--replace", "--as", "carol")
	if res.code != 0 || !slices.Equal(out.installedSlugs(), []string{"formatter-v3"}) {
		t.Fatalf("carol --replace of a skill she cannot see: exit %d, installed %v, want formatter-v3\n%s", res.code, out.installedSlugs(), res.stderr)
	}
	// Once she reads it, she is refused: she knows it exists.
	e.ok("skill", "share", "formatter", "--read", "global")
	if out, res = e.importJSON(third, "--replace", "--as", "carol"); res.code != 4 {
		t.Fatalf("carol --replace of a skill she reads: exit %d, want 4; installed %v\n%s", res.code, out.installedSlugs(), res.stderr)
	}
	if got := e.show("formatter"); got.Version != s.Version || len(got.Versions) != 2 {
		t.Fatalf("formatter changed by a refused --replace: %+v", got)
	}
	checkNoOrphans(t, e)
}

func TestBuiltinSlugReserved(t *testing.T) {
	e := newCatalogEnv(t)
	base := t.TempDir()
	builtin := filepath.Join(base, "system", "triage")
	writeSkill(t, builtin, "name: triage\ndescription: Triage incoming issues.", nil)
	b := e.mustImport(builtin, "--builtin")
	if got := b.installedSlugs(); !slices.Equal(got, []string{"triage"}) {
		t.Fatalf("builtin import installed %v", got)
	}
	s := e.show("triage")
	if s.SourceType != "builtin" {
		t.Fatalf("source_type = %q, want builtin", s.SourceType)
	}

	e.ok("user", "add", "dave")
	if r := e.run("skill", "import", builtin, "--builtin", "--as", "dave"); r.code != 4 {
		t.Fatalf("a plain user registers a builtin: exit %d, want 4", r.code)
	}

	// Another install asking for a builtin's slug is refused, naming the
	// builtin, and never becomes triage-v2.
	upload := filepath.Join(base, "mine", "triage")
	writeSkill(t, upload, "name: triage\ndescription: My own triage.", nil)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"operator without --builtin", nil},
		{"operator with --replace", []string{"--replace"}},
		{"operator with --builtin from another source", []string{"--builtin"}},
		{"plain user", []string{"--as", "dave"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, r := e.importJSON(append([]string{upload}, tc.args...)...)
			if r.code != 6 || len(out.installedSlugs()) != 0 || !strings.Contains(r.stderr, `reserved by the builtin skill "triage"`) {
				t.Fatalf("exit %d, installed %v, stderr %q: want exit 6 naming the builtin", r.code, out.installedSlugs(), r.stderr)
			}
			got := e.show("triage")
			if got.Version != s.Version || len(got.Versions) != 1 || got.SourceType != "builtin" {
				t.Fatalf("builtin changed: %+v", got)
			}
		})
	}
	if r := e.run("skill", "delete", "triage"); r.code == 0 {
		t.Fatal("a builtin was deleted")
	}
	var list []struct {
		Slug string `json:"slug"`
	}
	e.okJSON(&list, "skill", "list")
	if len(list) != 1 {
		t.Fatalf("catalog %+v, want the builtin alone", list)
	}
	// The builtin itself re-syncs from its own source as before.
	writeSkill(t, builtin, "name: triage\ndescription: Triage incoming issues, newer.", nil)
	if got := e.mustImport(builtin, "--builtin").installedSlugs(); !slices.Equal(got, []string{"triage"}) {
		t.Fatalf("builtin re-sync installed %v", got)
	}
	checkNoOrphans(t, e)
}

// cliProc is a CLI process running in the background.
type cliProc struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
}

// start starts one CLI process without waiting for it.
func (e *env) start(args ...string) *cliProc {
	e.t.Helper()
	p := &cliProc{cmd: e.command(context.Background(), args...)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		e.t.Fatalf("start skillfs %v: %v", args, err)
	}
	return p
}

// wait waits for the process and decodes its `skill import --json` output.
func (p *cliProc) wait(t testing.TB) (importOut, result) {
	t.Helper()
	err := p.cmd.Wait()
	r := result{stdout: p.out.String(), stderr: p.err.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var out importOut
	if strings.TrimSpace(r.stdout) != "" {
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("decode %q: %v", r.stdout, err)
		}
	}
	return out, r
}

// TestImportRaceForOneSlug starts two imports of the same slug from two
// sources at once. One must get the slug, the other the next -vN or a clear
// error; index and store must agree afterwards. Most rounds race identical
// content (two sources, one tree hash: both publish to the same store
// directory), every fourth round different content.
func TestImportRaceForOneSlug(t *testing.T) {
	e := newCatalogEnv(t)
	e.ok("skill", "list") // create the data directory outside the race
	const rounds = 16
	for i := 0; i < rounds; i++ {
		slug := "race-" + string(rune('a'+i))
		base := t.TempDir()
		dirs := []string{filepath.Join(base, "one", slug), filepath.Join(base, "two", slug)}
		for j, d := range dirs {
			body := "Same content."
			if i%4 == 3 {
				body = "Content of source " + string(rune('1'+j)) + "."
			}
			writeSkill(t, d, "name: "+slug+"\ndescription: "+body, map[string]string{"scripts/go.sh": "#!/bin/sh\necho " + body + "\n"})
		}
		p1 := e.start("skill", "import", dirs[0], "--json")
		p2 := e.start("skill", "import", dirs[1], "--json")
		o1, r1 := p1.wait(t)
		o2, r2 := p2.wait(t)

		var got []string
		for _, r := range []struct {
			o importOut
			r result
		}{{o1, r1}, {o2, r2}} {
			switch {
			case r.r.code == 0:
				got = append(got, r.o.installedSlugs()...)
			case strings.TrimSpace(r.r.stderr) == "":
				t.Errorf("round %d: an import failed (exit %d) without saying why", i, r.r.code)
			default:
				t.Logf("round %d: one import refused: exit %d: %s", i, r.r.code, strings.TrimSpace(r.r.stderr))
			}
		}
		sort.Strings(got)
		if len(got) == 0 || got[0] != slug || (len(got) == 2 && got[1] != slug+"-v2") || len(got) > 2 {
			t.Fatalf("round %d: installed %v, want [%s] and possibly %s-v2\nstderr 1: %s\nstderr 2: %s", i, got, slug, slug, r1.stderr, r2.stderr)
		}
		var listed []string
		for _, s := range e.listSlugs() {
			if s == slug || strings.HasPrefix(s, slug+"-") {
				listed = append(listed, s)
			}
		}
		if !slices.Equal(listed, got) {
			t.Fatalf("round %d: the imports reported %v, the index lists %v", i, got, listed)
		}
		for _, s := range listed {
			st := checkStored(t, e, s)
			if len(st.Versions) != 1 {
				t.Errorf("round %d: %s has %d versions, want 1", i, s, len(st.Versions))
			}
			// Each slug holds the whole content of one source, not a mix.
			if !slices.ContainsFunc(dirs, func(d string) bool {
				return len(diffTrees(readTree(t, d), readTree(t, st.Path), "SKILL.md")) == 0 && bodyOf(t, d) == bodyOf(t, st.Path)
			}) {
				t.Errorf("round %d: %s holds content of neither source", i, s)
			}
		}
		checkNoOrphans(t, e)
		if t.Failed() {
			return
		}
	}
}

// bodyOf is a SKILL.md without its slug line, for comparing a rewritten
// manifest with its source.
func bodyOf(t testing.TB, dir string) string {
	t.Helper()
	var keep []string
	for _, l := range manifestLines(t, dir) {
		if !strings.HasPrefix(l, "slug:") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
