package catalog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"skillfs/skills"
	"skillfs/skills/manifest"
	"skillfs/skills/skilltest"
	skillsource "skillfs/skills/source"
)

func open(t testing.TB) *Catalog {
	t.Helper()
	return openWith(t, Options{})
}

// sharedManifestSource is a source of n skills s1..sn whose SKILL.md are
// links to one manifest of over 1 MiB; it returns the source and the names.
func sharedManifestSource(t testing.TB, n int) (string, []string) {
	t.Helper()
	src := t.TempDir()
	big := "---\nname: shared\ndescription: one file, many folders\n---\n" + strings.Repeat("body line\n", 110000)
	if err := os.WriteFile(filepath.Join(src, "big.md"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := 1; i <= n; i++ {
		d := filepath.Join(src, "skills", "s"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../big.md", filepath.Join(d, "SKILL.md")); err != nil {
			t.Fatal(err)
		}
		names = append(names, "s"+strconv.Itoa(i))
	}
	return src, names
}

// planOf is what --list says of src.
func planOf(t testing.TB, c *Catalog, src string) *ImportResult {
	t.Helper()
	res, err := c.Import(context.Background(), ImportRequest{Source: src, List: true})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// openWith opens a catalog in a new data directory with opts.
func openWith(t testing.TB, opts Options) *Catalog {
	t.Helper()
	c, err := Open(context.Background(), filepath.Join(t.TempDir(), "home"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func skillDir(t testing.TB, dir, front string) string {
	t.Helper()
	return skilltest.WriteDir(t, dir, skilltest.Skill(front, "body\n", nil))
}

// leftovers lists what an import may leave behind by mistake.
func leftovers(t testing.TB, c *Catalog) []string {
	t.Helper()
	var out []string
	for _, d := range []string{filepath.Join(c.home, storeDir, ".staging"), filepath.Join(c.home, tmpDir)} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			out = append(out, filepath.Join(d, e.Name()))
		}
	}
	return out
}

func TestImportOrdersDependenciesWithinASource(t *testing.T) {
	c := open(t)
	src := t.TempDir()
	// "a-user" sorts before "z-lib" but depends on it.
	skillDir(t, filepath.Join(src, "skills", "a-user"), "name: a-user\ndescription: uses z\nskill_dependencies: [z-lib]")
	skillDir(t, filepath.Join(src, "skills", "z-lib"), "name: z-lib\ndescription: a library")
	res, err := c.Import(context.Background(), ImportRequest{Source: src, All: true})
	if err != nil {
		t.Fatalf("import: %v (failed: %+v)", err, res.Failed)
	}
	if len(res.Installed) != 2 || res.Installed[0].Slug != "z-lib" || res.Installed[1].Slug != "a-user" {
		t.Fatalf("installed %+v, want z-lib then a-user", res.Installed)
	}
}

func TestReinstallAndConflicts(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	first := skillDir(t, filepath.Join(t.TempDir(), "pdf"), "name: pdf\ndescription: one")
	res, err := c.Import(ctx, ImportRequest{Source: first})
	if err != nil {
		t.Fatal(err)
	}
	v1 := res.Installed[0].Version

	// Same content again: no new version.
	res, err = c.Import(ctx, ImportRequest{Source: first})
	if err != nil || res.Installed[0].Version != v1 {
		t.Fatalf("identical reimport: %v %+v", err, res)
	}
	// Same source, new content: a new version with the old one kept.
	skillDir(t, first, "name: pdf\ndescription: two")
	res, err = c.Import(ctx, ImportRequest{Source: first})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Show(ctx, "", "pdf")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Versions) != 2 || d.Versions[0].Previous != v1 || d.Version == v1 {
		t.Fatalf("versions after reinstall: %+v", d.Versions)
	}
	// Another source with the same slug: pdf-v2, slug rewritten, name kept.
	other := skillDir(t, filepath.Join(t.TempDir(), "elsewhere"), "name: pdf\ndescription: another")
	res, err = c.Import(ctx, ImportRequest{Source: other})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Installed[0].Slug; got != "pdf-v2" {
		t.Fatalf("conflicting slug installed as %q, want pdf-v2", got)
	}
	d2, _ := c.Show(ctx, "", "pdf-v2")
	data, err := os.ReadFile(filepath.Join(d2.Path, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "slug: pdf-v2\n") || !strings.Contains(string(data), "name: pdf\n") {
		t.Fatalf("stored SKILL.md:\n%s", data)
	}
	// --replace by a manager: a new version of pdf instead.
	res, err = c.Import(ctx, ImportRequest{Source: other, Replace: true})
	if err != nil || res.Installed[0].Slug != "pdf" {
		t.Fatalf("replace: %v %+v", err, res)
	}
	if l := leftovers(t, c); len(l) > 0 {
		t.Fatalf("leftovers: %v", l)
	}
}

func TestFailedImportLeavesNothing(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	bad := skillDir(t, filepath.Join(t.TempDir(), "bad"), "name: bad\n  description: [unclosed")
	if _, err := c.Import(ctx, ImportRequest{Source: bad}); !errors.Is(err, skills.ErrInvalidManifest) {
		t.Fatalf("err = %v, want ErrInvalidManifest", err)
	}
	dep := skillDir(t, filepath.Join(t.TempDir(), "dep"), "name: dep\ndescription: x\ntool_dependencies: [unregistered]")
	if _, err := c.Import(ctx, ImportRequest{Source: dep}); !errors.Is(err, skills.ErrDependency) {
		t.Fatalf("err = %v, want ErrDependency", err)
	}
	list, err := c.List(ctx, "")
	if err != nil || len(list) != 0 {
		t.Fatalf("catalog after failures: %v %v", list, err)
	}
	vs, _ := c.store.Versions()
	if len(vs) != 0 || len(leftovers(t, c)) != 0 {
		t.Fatalf("store after failures: %v, leftovers %v", vs, leftovers(t, c))
	}
}

func TestPermissionsOnManagement(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	for _, u := range []skills.User{{UID: "alice", Role: "user"}, {UID: "bob", Role: "user"}} {
		if err := c.PutUser(ctx, "", u, true); err != nil {
			t.Fatal(err)
		}
	}
	src := skillDir(t, filepath.Join(t.TempDir(), "notes"), "name: notes\ndescription: x")
	if _, err := c.Import(ctx, ImportRequest{Source: src, As: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Show(ctx, "bob", "notes"); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("bob sees alice's private skill: %v", err)
	}
	if err := c.Delete(ctx, "bob", "notes"); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("bob deletes alice's skill: %v", err)
	}
	sh := skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}
	if _, err := c.Share(ctx, "alice", "notes", sh); !errors.Is(err, skills.ErrPermission) {
		t.Fatalf("a user shares globally: %v", err)
	}
	if _, err := c.Share(ctx, "", "notes", sh); err != nil {
		t.Fatalf("the operator shares globally: %v", err)
	}
	if _, err := c.Show(ctx, "bob", "notes"); err != nil {
		t.Fatalf("bob reads a global skill: %v", err)
	}
	if err := c.Delete(ctx, "bob", "notes"); !errors.Is(err, skills.ErrPermission) {
		t.Fatalf("a reader deletes: %v", err)
	}
	if err := c.Delete(ctx, "alice", "notes"); err != nil {
		t.Fatalf("the creator deletes: %v", err)
	}
}

func TestImportFromAgentFolders(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	home, project := t.TempDir(), t.TempDir()
	// The user's own folder wins over the project's for the same slug, as
	// in Claude Code; the project's is reported as shadowed, not failed.
	skillDir(t, filepath.Join(project, ".claude", "skills", "notes"), "name: notes\ndescription: project notes")
	skillDir(t, filepath.Join(home, ".claude", "skills", "notes"), "name: notes\ndescription: user notes")
	skillDir(t, filepath.Join(home, ".agents", "skills", "Nice Tool"), "name: Nice Tool\ndescription: lenient name")
	// No description: the body's first paragraph stands in, as in Claude Code.
	skillDir(t, filepath.Join(home, ".codex", "skills", "tools", "broken"), "name: broken")
	// Only what cannot be loaded fails.
	skillDir(t, filepath.Join(project, ".opencode", "skills", "unusable"), "name: unusable\n  description: [")

	list, err := c.Import(ctx, ImportRequest{Agents: true, AgentHome: home, Project: project, List: true})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Installed) != 0 || len(list.Available) != 3 || len(list.Shadowed) != 1 || len(list.Failed) != 1 {
		t.Fatalf("list = %+v", list)
	}
	for _, a := range list.Available {
		if a.Status != StatusInstall {
			t.Errorf("listed %s as %q, want %q", a.Slug, a.Status, StatusInstall)
		}
	}
	if l, _ := c.List(ctx, ""); len(l) != 0 {
		t.Fatalf("--list installed %v", l)
	}

	res, err := c.Import(ctx, ImportRequest{Agents: true, AgentHome: home, Project: project, All: true})
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	got := map[string]bool{}
	for _, in := range res.Installed {
		got[in.Slug] = true
	}
	if len(res.Installed) != 3 || !got["notes"] || !got["nice-tool"] || !got["broken"] {
		t.Fatalf("installed %+v, want notes, nice-tool and broken", res.Installed)
	}
	projectNotes := filepath.Join(project, ".claude", "skills", "notes")
	if len(res.Shadowed) != 1 || res.Shadowed[0].Source != projectNotes ||
		res.Shadowed[0].By != filepath.Join(home, ".claude", "skills", "notes") {
		t.Fatalf("shadowed %+v, want the project's notes, by the user's", res.Shadowed)
	}
	if len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Error, "unusable") {
		t.Fatalf("failed %+v, want only the unusable skill", res.Failed)
	}
	d, err := c.Show(ctx, "", "notes")
	if err != nil || d.Description != "user notes" {
		t.Fatalf("notes = %+v, %v; want the user's", d, err)
	}
	d, err = c.Show(ctx, "", "broken")
	if err != nil || d.Description != "body" {
		t.Fatalf("broken = %+v, %v; want the body as its description", d, err)
	}
	d, err = c.Show(ctx, "", "nice-tool")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(d.Path, "SKILL.md"))
	orig, _ := os.ReadFile(filepath.Join(home, ".agents", "skills", "Nice Tool", "SKILL.md"))
	// Stored as it is: read back as the daemon reads it, the name gives
	// the same slug, so nothing is rewritten.
	m, _, err := manifest.Parse(data, manifest.Lenient)
	if err != nil || m.Slug != "nice-tool" || m.Name != "Nice Tool" || !bytes.Equal(data, orig) {
		t.Fatalf("stored SKILL.md: %+v %v\n%s", m, err, data)
	}
}

func TestPrepareConfirmDiscard(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	home := filepath.Join(t.TempDir(), "home")
	c, err := Open(ctx, home, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.PutUser(ctx, "", skills.User{UID: "alice"}, true); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	skillDir(t, filepath.Join(src, "skills", "one"), "name: one\ndescription: first")
	skillDir(t, filepath.Join(src, "skills", "two"), "name: two\ndescription: second")

	d, err := c.Prepare(ctx, ImportRequest{Source: src, All: true, As: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Skills) != 2 || d.Skills[0].Slug != "one" || d.Skills[1].Description != "second" {
		t.Fatalf("draft skills %+v", d.Skills)
	}
	if list, _ := c.List(ctx, ""); len(list) != 0 {
		t.Fatalf("prepare installed %v", list)
	}
	// The source may change or vanish: the draft holds its own copy.
	os.RemoveAll(src)
	if _, err := c.Confirm(ctx, "bob", d.ID, nil); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("confirm as an unknown user: %v", err)
	}
	sh := &skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}
	if _, err := c.Confirm(ctx, "alice", d.ID, sh); !errors.Is(err, skills.ErrPermission) {
		t.Fatalf("a user confirms with a global share: %v", err)
	}
	res, err := c.Confirm(ctx, "alice", d.ID, nil)
	if err != nil || len(res.Installed) != 2 {
		t.Fatalf("confirm: %v %+v", err, res)
	}
	s, err := c.Show(ctx, "alice", "two")
	if err != nil || s.Creator != "alice" || !strings.HasSuffix(s.Source, "//skills/two") {
		t.Fatalf("installed %+v %v", s, err)
	}
	if _, err := c.Confirm(ctx, "alice", d.ID, nil); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("a confirmed draft is gone: %v", err)
	}

	// Discard, and expiry.
	src2 := skillDir(t, filepath.Join(t.TempDir(), "three"), "name: three\ndescription: third")
	d2, err := c.Prepare(ctx, ImportRequest{Source: src2})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Discard(ctx, "", d2.ID); err != nil {
		t.Fatal(err)
	}
	d3, err := c.Prepare(ctx, ImportRequest{Source: src2})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(DraftTTL + time.Second)
	if _, err := c.Confirm(ctx, "", d3.ID, nil); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("an expired draft confirms: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(home, draftsDir)); len(ents) != 0 {
		t.Fatalf("drafts left: %v", ents)
	}
	if _, err := c.Confirm(ctx, "", "../../etc", nil); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("a path as draft id: %v", err)
	}
}

func TestEdit(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	dir := skillDir(t, filepath.Join(t.TempDir(), "notes"), "name: notes\ndescription: one")
	os.MkdirAll(filepath.Join(dir, "scripts"), 0o755)
	os.WriteFile(filepath.Join(dir, "scripts", "run.sh"), []byte("#!/bin/sh\necho 1\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "logo.png"), []byte{0x89, 'P', 'N', 'G'}, 0o644)
	res, err := c.Import(ctx, ImportRequest{Source: dir})
	if err != nil {
		t.Fatal(err)
	}
	v1 := res.Installed[0].Version

	in, err := c.Edit(ctx, "", "notes", "scripts/run.sh", bytes.NewReader([]byte("#!/bin/sh\necho 2\n")))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := c.Show(ctx, "", "notes")
	if d.Version != in.Version || d.Versions[0].Previous != v1 || len(d.Versions) != 2 {
		t.Fatalf("after edit: %+v", d.Versions)
	}
	fi, err := os.Stat(filepath.Join(d.Path, "scripts", "run.sh"))
	if err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("edited script lost its execute bit: %v %v", fi.Mode(), err)
	}
	// The old version is untouched (copy-on-write).
	old, _ := os.ReadFile(filepath.Join(c.VersionPath("notes", v1), "scripts", "run.sh"))
	if string(old) != "#!/bin/sh\necho 1\n" {
		t.Fatalf("old version changed: %q", old)
	}
	// Editing SKILL.md updates the index.
	if _, err := c.Edit(ctx, "", "notes", "SKILL.md", bytes.NewReader([]byte("---\nname: notes\ndescription: two\n---\nnew body\n"))); err != nil {
		t.Fatal(err)
	}
	if d, _ := c.Show(ctx, "", "notes"); d.Description != "two" {
		t.Fatalf("description after edit = %q", d.Description)
	}
	bad := []struct {
		name, path string
		content    []byte
		want       error
	}{
		{"binary extension", "logo.png", []byte("x"), skills.ErrInvalid},
		{"not utf-8", "a.txt", []byte{0xff, 0xfe}, skills.ErrInvalid},
		{"escape", "../x.md", []byte("x"), skills.ErrUnsafePath},
		{"invalid manifest", "SKILL.md", []byte("---\nname: notes\n  description: [\n---\n"), skills.ErrInvalidManifest},
		{"slug change", "SKILL.md", []byte("---\nname: other\ndescription: x\n---\n"), skills.ErrInvalid},
		{"remove manifest", "SKILL.md", nil, skills.ErrInvalid},
		{"unregistered tool", "SKILL.md", []byte("---\nname: notes\ndescription: x\ntool_dependencies: [t]\n---\n"), skills.ErrDependency},
		{"NUL byte", "a.txt", []byte("text\x00more"), skills.ErrInvalid},
		{"rune cut at the end", "a.txt", []byte("caf\xc3"), skills.ErrInvalid},
		{"over the size limit", "big.txt", bytes.Repeat([]byte("a"), 2<<20), skills.ErrLimit},
		{"through a file", "SKILL.md/notes.md", []byte("x"), skills.ErrInvalid},
		{"onto a directory", "scripts", []byte("x"), skills.ErrInvalid},
		{"reserved name", ".skillfs-version.json", []byte("{}"), skills.ErrUnsafePath},
		{"remove a reserved name", ".skillfs-version.json", nil, skills.ErrUnsafePath},
		{"remove a directory", "scripts", nil, skills.ErrNotFound},
		// Names an import leaves out: the edit would be staged like an
		// import and change nothing, so it is refused naming the rule.
		{"into .git", ".git/config.md", []byte("x"), skills.ErrUnsafePath},
		{"into __MACOSX", "__MACOSX/x.md", []byte("x"), skills.ErrUnsafePath},
		{"into a deeper .DS_Store", "docs/.DS_Store/x.md", []byte("x"), skills.ErrUnsafePath},
		{".git as the file", "docs/.git", []byte("x"), skills.ErrUnsafePath},
		{"remove under .git", ".git/config.md", nil, skills.ErrUnsafePath},
	}
	c.lim.MaxFileBytes = 1 << 20
	before, _ := c.Show(ctx, "", "notes")
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			var content io.Reader
			if tc.content != nil {
				content = bytes.NewReader(tc.content)
			}
			_, err := c.Edit(ctx, "", "notes", tc.path, content)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), c.home) {
				t.Errorf("the message names the data directory: %v", err)
			}
			if strings.HasPrefix(tc.name, "into ") && !strings.Contains(err.Error(), "is never stored in a skill (imports leave out .git, .DS_Store, __MACOSX") {
				t.Errorf("the refusal does not name the rule: %v", err)
			}
			after, _ := c.Show(ctx, "", "notes")
			if after.Version != before.Version || len(after.Versions) != len(before.Versions) {
				t.Fatal("a refused edit changed the skill")
			}
		})
	}
	if l := leftovers(t, c); len(l) > 0 {
		t.Fatalf("leftovers: %v", l)
	}
	// Builtins are never edited.
	b := skillDir(t, filepath.Join(t.TempDir(), "sys"), "name: sys\ndescription: builtin")
	if _, err := c.Import(ctx, ImportRequest{Source: b, Builtin: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Edit(ctx, "", "sys", "x.md", bytes.NewReader([]byte("x"))); !errors.Is(err, skills.ErrPermission) {
		t.Fatalf("edit a builtin: %v", err)
	}
}

// endless yields bytes forever and counts them.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.n += int64(len(p))
	return len(p), nil
}

// An edit is streamed: endless content is cut at the limit, having read
// little more than the limit, and text split anywhere between reads is
// still text.
func TestEditStreams(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	c.lim.MaxFileBytes = 1 << 20
	dir := skillDir(t, filepath.Join(t.TempDir(), "notes"), "name: notes\ndescription: one")
	if _, err := c.Import(ctx, ImportRequest{Source: dir}); err != nil {
		t.Fatal(err)
	}
	src := &endless{}
	if _, err := c.Edit(ctx, "", "notes", "big.txt", src); !errors.Is(err, skills.ErrLimit) {
		t.Fatalf("endless edit = %v, want ErrLimit", err)
	}
	if src.n > c.lim.MaxFileBytes+256<<10 {
		t.Errorf("read %d bytes of endless content for a %d-byte limit", src.n, c.lim.MaxFileBytes)
	}
	text := strings.Repeat("naïve café 日本語 🎉\n", 1000)
	in, err := c.Edit(ctx, "", "notes", "utf8.md", iotest.OneByteReader(strings.NewReader(text)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(c.VersionPath("notes", in.Version), "utf8.md"))
	if err != nil || string(got) != text {
		t.Fatalf("stored %d bytes, %v; want the %d written", len(got), err, len(text))
	}
}

// --skill takes globs, --ignore leaves skills out.
func TestImportGlobsAndIgnore(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	for _, n := range []string{"pdf-read", "pdf-write", "docx", "xlsx"} {
		skillDir(t, filepath.Join(src, "skills", n), "name: "+n+"\ndescription: "+n)
	}
	for _, tc := range []struct {
		name   string
		req    ImportRequest
		want   []string
		wanted error
	}{
		{"glob", ImportRequest{Skills: []string{"pdf-*"}}, []string{"pdf-read", "pdf-write"}, nil},
		{"glob and a name", ImportRequest{Skills: []string{"pdf-r*", "xlsx"}}, []string{"pdf-read", "xlsx"}, nil},
		{"all but ignored", ImportRequest{All: true, Ignore: []string{"pdf-*"}}, []string{"docx", "xlsx"}, nil},
		{"glob by path", ImportRequest{Skills: []string{"skills/d*"}}, []string{"docx"}, nil},
		{"glob matching nothing", ImportRequest{Skills: []string{"zz*"}}, nil, skills.ErrNotFound},
		{"everything ignored", ImportRequest{All: true, Ignore: []string{"*"}}, nil, skills.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t)
			req := tc.req
			req.Source = src
			res, err := c.Import(ctx, req)
			if tc.wanted != nil {
				if !errors.Is(err, tc.wanted) {
					t.Fatalf("Import = %v, want %v", err, tc.wanted)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, in := range res.Installed {
				got = append(got, in.Slug)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("installed %v, want %v", got, tc.want)
			}
		})
	}
}

// A source may be narrowed to one of its folders (--path, or URL#ref:path
// for git); a skill keeps its identity whichever way it was reached.
func TestImportFromAFolderOfTheSource(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	skillDir(t, filepath.Join(src, "team-a", "skills", "alpha"), "name: alpha\ndescription: a")
	skillDir(t, filepath.Join(src, "team-a", "skills", "beta"), "name: beta\ndescription: b")
	skillDir(t, filepath.Join(src, "team-b", "skills", "gamma"), "name: gamma\ndescription: g")
	c := open(t)
	res, err := c.Import(ctx, ImportRequest{Source: src, Path: "team-a", All: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range res.Installed {
		got = append(got, in.Slug)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Fatalf("--path team-a installed %v", got)
	}
	// The same skill through the whole source is the same source: no -v2.
	again, err := c.Import(ctx, ImportRequest{Source: src, Skills: []string{"alpha"}})
	if err != nil || len(again.Installed) != 1 || again.Installed[0].Slug != "alpha" {
		t.Fatalf("alpha through the whole source = %+v, %v", again, err)
	}
	for _, bad := range []string{"../elsewhere", "/etc", "missing"} {
		if _, err := c.Import(ctx, ImportRequest{Source: src, Path: bad, All: true}); err == nil {
			t.Errorf("--path %q was accepted", bad)
		} else if !errors.Is(err, skills.ErrUnsafePath) && !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("--path %q: %v", bad, err)
		}
	}
}

// An imported skill whose SKILL.md only lenient reading accepts (a display
// name, no description) can still be edited: edits read it as import did.
func TestEditLenientSkill(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	src := filepath.Join(t.TempDir(), "tool")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "SKILL.md"), []byte("---\nname: Nice Tool\n---\nDoes nice things.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := c.Import(ctx, ImportRequest{Source: src})
	if err != nil || res.Installed[0].Slug != "nice-tool" {
		t.Fatalf("import: %v %+v", err, res)
	}
	if _, err := c.Edit(ctx, "", "nice-tool", "notes.md", strings.NewReader("# Notes\n")); err != nil {
		t.Fatalf("edit a file of a leniently read skill: %v", err)
	}
	// Renaming it would change its derived slug: refused, saying how to keep it.
	_, err = c.Edit(ctx, "", "nice-tool", "SKILL.md", strings.NewReader("---\nname: Other Tool\n---\nbody\n"))
	if !errors.Is(err, skills.ErrInvalid) || !strings.Contains(err.Error(), "slug: nice-tool") {
		t.Fatalf("rename: %v", err)
	}
	if _, err := c.Edit(ctx, "", "nice-tool", "SKILL.md", strings.NewReader("---\nname: Other Tool\nslug: nice-tool\n---\nbody\n")); err != nil {
		t.Fatalf("rename keeping the slug: %v", err)
	}
}

// --list says what --all then does for a skill whose SKILL.md is a link
// leading outside the source beside a skill.md: staging leaves the link out
// and installs the skill.md, so the listing must not call it refused.
func TestListAgreesWithImportOnALinkedManifest(t *testing.T) {
	ctx := context.Background()
	src, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "SKILL.md"), []byte("---\nname: evil\ndescription: outside\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(src, "skills", "one")
	if err := os.MkdirAll(one, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(one, "skill.md"), []byte("---\nname: one\ndescription: lower case\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "SKILL.md"), filepath.Join(one, "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	skillDir(t, filepath.Join(src, "skills", "two"), "name: two\ndescription: b")
	c := open(t)
	list := planOf(t, c, src)
	status := map[string]string{}
	for _, a := range list.Available {
		status[a.Path] = a.Status + " " + a.Slug + " " + a.Description + a.Error
	}
	if got := status["skills/one"]; got != "install one lower case" {
		t.Errorf("--list says %q for skills/one, want install one", got)
	}
	res, err := c.Import(ctx, ImportRequest{Source: src, All: true})
	if err != nil || len(res.Installed) != 2 || len(res.Failed) != 0 {
		t.Fatalf("--all: %+v, %v", res, err)
	}
}

// A skill imported through a folder of its source (--path) is the skill the
// whole source gives: same path, plugin, slug (plugin namespace included)
// and content (links to elsewhere in the source included), so it is the
// same skill, unchanged, not a second one.
func TestImportThroughAFolderKeepsTheIdentity(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	skillDir(t, filepath.Join(src, "plugins", "alpha", "skills", "setup"), "name: setup\ndescription: a")
	skillDir(t, filepath.Join(src, "plugins", "beta", "skills", "setup"), "name: setup\ndescription: b")
	if err := os.MkdirAll(filepath.Join(src, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "shared", "doc.md"), []byte("shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../shared/doc.md", filepath.Join(src, "plugins", "alpha", "skills", "setup", "doc.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("plugins/alpha", filepath.Join(src, "alpha")); err != nil {
		t.Fatal(err)
	}
	c := open(t)
	whole, err := c.Import(ctx, ImportRequest{Source: src, All: true})
	if err != nil || len(whole.Installed) != 2 {
		t.Fatalf("whole source: %+v, %v", whole, err)
	}
	for _, sub := range []string{"plugins/alpha", "plugins/alpha/skills", "alpha"} {
		res, err := c.Import(ctx, ImportRequest{Source: src, Path: sub, All: true})
		if err != nil || len(res.Installed) != 1 {
			t.Fatalf("--path %s: %+v, %v", sub, res, err)
		}
		if in := res.Installed[0]; in.Slug != "alpha-setup" || in.Name != "alpha:setup" || in.Version != whole.Installed[0].Version {
			t.Errorf("--path %s installed %+v; the whole source gave %+v", sub, in, whole.Installed[0])
		}
	}
	all, err := c.db.Skills(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("catalog holds %d skills, want the 2 of the whole source: %v", len(all), err)
	}
}

// --list checks dependencies as an import does, in the order the import
// installs in: a skill needing an unregistered tool or a missing skill is
// refused, one needing a skill of the same source listed after it is not.
func TestListChecksDependenciesAsImportDoes(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	skillDir(t, filepath.Join(src, "skills", "a-user"), "name: a-user\ndescription: uses z\nskill_dependencies: [z-lib]")
	skillDir(t, filepath.Join(src, "skills", "b-tool"), "name: b-tool\ndescription: needs a tool\ntool_dependencies: [nosuch]")
	skillDir(t, filepath.Join(src, "skills", "c-orphan"), "name: c-orphan\ndescription: needs a skill nobody has\nskill_dependencies: [missing]")
	skillDir(t, filepath.Join(src, "skills", "z-lib"), "name: z-lib\ndescription: a library")
	c := open(t)
	list := planOf(t, c, src)
	planned := map[string]string{}
	var order []string
	for _, a := range list.Available {
		planned[a.Slug] = a.Status
		order = append(order, a.Slug)
	}
	want := map[string]string{"a-user": StatusInstall, "b-tool": StatusRefused, "c-orphan": StatusRefused, "z-lib": StatusInstall}
	for slug, st := range want {
		if planned[slug] != st {
			t.Errorf("--list: %s %q, want %q (%+v)", slug, planned[slug], st, list.Available)
		}
	}
	if !slices.Equal(order, []string{"a-user", "b-tool", "c-orphan", "z-lib"}) {
		t.Errorf("--list order %v, want the discovery order", order)
	}
	res, err := c.Import(ctx, ImportRequest{Source: src, All: true})
	if err != nil {
		t.Fatal(err)
	}
	installed := map[string]bool{}
	for _, in := range res.Installed {
		installed[in.Slug] = true
	}
	for slug, st := range want {
		if installed[slug] != (st == StatusInstall) {
			t.Errorf("--all: %s installed %v, but --list said %q (failed: %+v)", slug, installed[slug], st, res.Failed)
		}
	}
}

// One SOURCE//PATH stays one skill when its plugin namespace comes or goes
// with the other skills of its source: a marketplace that gains a second
// "setup" does not turn the installed alpha "setup" into a second skill
// alpha-setup, and one that loses it does not leave alpha-setup behind.
func TestPluginNamespaceFollowsTheInstalledSkill(t *testing.T) {
	ctx := context.Background()
	for _, grow := range []bool{true, false} {
		src := t.TempDir()
		skillDir(t, filepath.Join(src, "plugins", "alpha", "skills", "setup"), "name: setup\ndescription: a")
		beta := filepath.Join(src, "plugins", "beta", "skills", "setup")
		if !grow {
			skillDir(t, beta, "name: setup\ndescription: b")
		}
		c := open(t)
		first, err := c.Import(ctx, ImportRequest{Source: src, All: true})
		if err != nil {
			t.Fatal(err)
		}
		slug := first.Installed[0].Slug
		if grow {
			skillDir(t, beta, "name: setup\ndescription: b")
		} else if err := os.RemoveAll(filepath.Dir(filepath.Dir(beta))); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, "plugins", "alpha", "skills", "setup", "more.md"), []byte("more\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Import(ctx, ImportRequest{Source: src, All: true}); err != nil {
			t.Fatal(err)
		}
		all, err := c.db.Skills(ctx)
		if err != nil {
			t.Fatal(err)
		}
		bySource := map[string][]string{}
		for _, s := range all {
			bySource[s.Source] = append(bySource[s.Source], s.Slug)
		}
		for source, slugs := range bySource {
			if len(slugs) != 1 {
				t.Errorf("grow=%v: %s is %d skills: %v", grow, source, len(slugs), slugs)
			}
		}
		d, err := c.Show(ctx, "", slug)
		if err != nil || len(d.Versions) != 2 {
			t.Fatalf("grow=%v: %s has %+v, %v; want 2 versions", grow, slug, d, err)
		}
		// The stored SKILL.md reads back, in a folder named by it, as slug.
		data, err := os.ReadFile(filepath.Join(d.Path, "SKILL.md"))
		if err != nil {
			t.Fatal(err)
		}
		if m, _, err := manifest.ParseStored(data, slug); err != nil || m.Slug != slug {
			t.Errorf("grow=%v: stored SKILL.md reads as %+v, %v; want slug %q", grow, m, err, slug)
		}
	}
}

// The limits are those of a source: a folder that every skill of the
// source links to is stored once per skill, and counts once per skill, so
// that a small repository cannot make the store hold it many times over.
// --list says the same as --all.
func TestSkillsOfOneSourceCountTogether(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "shared", "big.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"s1", "s2", "s3", "s4", "s5"} {
		d := skillDir(t, filepath.Join(src, "skills", n), "name: "+n+"\ndescription: links the shared folder")
		if err := os.Symlink("../../shared", filepath.Join(d, "data")); err != nil {
			t.Fatal(err)
		}
	}
	lim := skills.DefaultLimits()
	lim.MaxTotalBytes = 3 << 20 // the source holds a little over 1 MiB
	c := openWith(t, Options{Limits: lim})
	list := planOf(t, c, src)
	var planned []string
	for _, a := range list.Available {
		planned = append(planned, a.Slug+":"+a.Status)
	}
	want := []string{"s1:install", "s2:install", "s3:refused", "s4:refused", "s5:refused"}
	if !slices.Equal(planned, want) {
		t.Errorf("--list: %v, want %v", planned, want)
	}
	res, err := c.Import(ctx, ImportRequest{Source: src, All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Installed) != 2 || len(res.Failed) != 3 || !strings.Contains(res.Failed[0].Error, "count together") {
		t.Errorf("--all: installed %+v, failed %+v; want 2 installed within the source's limits", res.Installed, res.Failed)
	}
}

// Many skill folders may link to one large SKILL.md. Reading the source's
// skills reads their SKILL.md files only up to the source's total-bytes
// limit, keeps none of their bodies (2,000 links to one 4 MiB file kept
// 8 GiB in memory), and what --list refuses for it --all refuses too.
func TestReadingManySkillsOfOneLargeManifest(t *testing.T) {
	ctx := context.Background()
	src, names := sharedManifestSource(t, 6)
	cands, _, err := skillsource.Discover(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	fs := skillsource.ReadFound(src, cands, skills.DefaultLimits().MaxManifest, 3<<20)
	var refused []string
	for _, f := range fs {
		if f.Manifest != nil && f.Manifest.Body != "" {
			t.Errorf("%s: the body is kept (%d bytes)", f.Rel, len(f.Manifest.Body))
		}
		if f.Err != nil {
			if !errors.Is(f.Err, skills.ErrLimit) {
				t.Errorf("%s: %v", f.Rel, f.Err)
			}
			refused = append(refused, f.Name)
		}
	}
	if !slices.Equal(refused, names[3:]) {
		t.Errorf("refused %v unread, want %v: past 3 MiB of SKILL.md", refused, names[3:])
	}

	lim := skills.DefaultLimits()
	lim.MaxTotalBytes = 3 << 20
	c := openWith(t, Options{Limits: lim})
	list := planOf(t, c, src)
	planned := map[string]bool{}
	for _, a := range list.Available {
		planned[a.Path] = a.Status != StatusRefused
	}
	res, err := c.Import(ctx, ImportRequest{Source: src, All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Installed)+len(res.Failed) != len(names) {
		t.Fatalf("--all: %+v", res)
	}
	for _, f := range res.Failed {
		rel := f.Source[strings.Index(f.Source, "//")+2:]
		if planned[rel] {
			t.Errorf("--list said %s installs; --all: %s", rel, f.Error)
		}
		delete(planned, rel)
	}
	for rel, ok := range planned {
		if !ok {
			t.Errorf("--list refused %s; --all installed it", rel)
		}
	}
}

// prepare refuses what --list and import refuse when the SKILL.md files of
// a source add up past its total-bytes limit.
func TestPrepareRefusesPastTheManifestsBound(t *testing.T) {
	ctx := context.Background()
	src, _ := sharedManifestSource(t, 6)
	lim := skills.DefaultLimits()
	lim.MaxTotalBytes = 3 << 20
	c := openWith(t, Options{Limits: lim})
	// s6 alone stages within the limits, but its SKILL.md is read past them.
	d, err := c.Prepare(ctx, ImportRequest{Source: src, Skills: []string{"s1", "s6"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Skills) != 1 || d.Skills[0].Folder != "s1" || len(d.Failed) != 1 || !strings.Contains(d.Failed[0].Error, "count together") {
		t.Errorf("prepare: skills %+v, failed %+v; want s1 drafted and s6 refused", d.Skills, d.Failed)
	}
}

// A plugin with a long name still gives each of its skills its own slug:
// the plugin's part of <plugin>-<name> is cut, never the skill's name.
func TestLongPluginNamespace(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	long := strings.Repeat("longname-", 8) // 72 characters
	for _, p := range []string{long, "b"} {
		for _, s := range []string{"setup", "deploy"} {
			skillDir(t, filepath.Join(src, "plugins", p, "skills", s), "name: "+s+"\ndescription: "+p)
		}
	}
	c := open(t)
	res, err := c.Import(ctx, ImportRequest{Source: src, All: true})
	if err != nil || len(res.Installed) != 4 || len(res.Failed) != 0 {
		t.Fatalf("import: %+v, %v", res, err)
	}
	for _, in := range res.Installed {
		if !manifest.ValidSlug(in.Slug) || !strings.HasSuffix(in.Slug, "-setup") && !strings.HasSuffix(in.Slug, "-deploy") {
			t.Errorf("slug %q lost the skill's name", in.Slug)
		}
	}
	for _, tc := range []struct{ plugin, slug, want string }{
		{"alpha", "setup", "alpha-setup"},
		{"My Plugin!", "setup", "my-plugin-setup"},
		{"日本", "setup", ""},
		{long, "setup", "longname-longname-longname-longname-longname-longname-long-setup"},
		{"alpha", strings.Repeat("s", 63), ""},
		{"alpha", strings.Repeat("s", 62), "a-" + strings.Repeat("s", 62)},
	} {
		if got := skillsource.Namespaced(tc.plugin, tc.slug); got != tc.want || got != "" && !manifest.ValidSlug(got) {
			t.Errorf("Namespaced(%q, %q) = %q, want %q", tc.plugin, tc.slug, got, tc.want)
		}
	}
}

// Admins manage every skill that is not builtin, a reader loses a disabled
// skill as if it did not exist, and a skill one may not see is answered in
// the very words of a skill that does not exist.
func TestAdminsManageAndUnknownSkillsLookMissing(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	for _, u := range []skills.User{{UID: "alice", Role: "user"}, {UID: "bob", Role: "user"}, {UID: "adm", Role: "admin"}} {
		if err := c.PutUser(ctx, "", u, true); err != nil {
			t.Fatal(err)
		}
	}
	src := skillDir(t, filepath.Join(t.TempDir(), "notes"), "name: notes\ndescription: x")
	if _, err := c.Import(ctx, ImportRequest{Source: src, As: "alice"}); err != nil {
		t.Fatal(err)
	}
	// bob: alice's private skill and a skill that does not exist, op by op.
	for name, op := range map[string]func(slug string) error{
		"show":    func(s string) error { _, err := c.Show(ctx, "bob", s); return err },
		"delete":  func(s string) error { return c.Delete(ctx, "bob", s) },
		"disable": func(s string) error { _, err := c.SetEnabled(ctx, "bob", s, false); return err },
		"share": func(s string) error {
			_, err := c.Share(ctx, "bob", s, skills.Share{Read: skills.Scope{Kind: skills.ScopeUser, IDs: []string{"bob"}}})
			return err
		},
		"deps": func(s string) error { _, err := c.Deps(ctx, "bob", s, nil, nil, nil); return err },
	} {
		hidden, missing := op("notes"), op("nothing")
		if !errors.Is(hidden, skills.ErrNotFound) || !errors.Is(missing, skills.ErrNotFound) {
			t.Fatalf("%s: hidden %v, missing %v: want both not found", name, hidden, missing)
		}
		if got, want := hidden.Error(), strings.ReplaceAll(missing.Error(), "nothing", "notes"); got != want {
			t.Errorf("%s: a hidden skill says %q, a missing one %q", name, got, want)
		}
	}
	// The admin sees and manages it although it is private to alice.
	if list, err := c.List(ctx, "adm"); err != nil || len(list) != 1 {
		t.Fatalf("admin's list: %v %v", list, err)
	}
	if _, err := c.Share(ctx, "adm", "notes", skills.Share{Read: skills.Scope{Kind: skills.ScopeUser, IDs: []string{"alice", "bob"}}}); err != nil {
		t.Fatalf("admin shares alice's skill: %v", err)
	}
	// bob reads it now; disabled, it is gone for him, not refused.
	if _, err := c.SetEnabled(ctx, "adm", "notes", false); err != nil {
		t.Fatalf("admin disables: %v", err)
	}
	if err := c.Delete(ctx, "bob", "notes"); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("a reader deleting a disabled skill: %v, want not found", err)
	}
	if _, err := c.Show(ctx, "alice", "notes"); err != nil {
		t.Fatalf("the creator shows her disabled skill: %v", err)
	}
	if err := c.Delete(ctx, "adm", "notes"); err != nil {
		t.Fatalf("admin deletes alice's skill: %v", err)
	}
}

// A builtin's slug is reserved: another install is refused naming it, the
// operator's re-sync of the builtin itself still works.
func TestBuiltinSlugIsRefused(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	b := skillDir(t, filepath.Join(t.TempDir(), "triage"), "name: triage\ndescription: builtin")
	if _, err := c.Import(ctx, ImportRequest{Source: b, Builtin: true}); err != nil {
		t.Fatal(err)
	}
	other := skillDir(t, filepath.Join(t.TempDir(), "triage"), "name: triage\ndescription: mine")
	for _, req := range []ImportRequest{{Source: other}, {Source: other, Replace: true}, {Source: other, Builtin: true}} {
		res, err := c.Import(ctx, req)
		if !errors.Is(err, skills.ErrExists) || !strings.Contains(err.Error(), `builtin skill "triage"`) {
			t.Fatalf("import %+v: %v (%+v), want ErrExists naming the builtin", req, err, res)
		}
	}
	skillDir(t, b, "name: triage\ndescription: builtin, newer")
	res, err := c.Import(ctx, ImportRequest{Source: b, Builtin: true})
	if err != nil || res.Installed[0].Slug != "triage" {
		t.Fatalf("re-sync of the builtin: %v %+v", err, res)
	}
	list, _ := c.List(ctx, "")
	if len(list) != 1 {
		t.Fatalf("catalog holds %d skills, want the builtin alone", len(list))
	}
	if l := leftovers(t, c); len(l) > 0 {
		t.Fatalf("leftovers: %v", l)
	}
}

// addUsers registers users for a test.
func addUsers(t testing.TB, c *Catalog, us ...skills.User) {
	t.Helper()
	for _, u := range us {
		if err := c.PutUser(context.Background(), "", u, true); err != nil {
			t.Fatal(err)
		}
	}
}

// importAs makes req, which must install one skill, and returns it.
func importAs(t testing.TB, c *Catalog, req ImportRequest) Installed {
	t.Helper()
	res, err := c.Import(context.Background(), req)
	if err != nil || len(res.Installed) != 1 {
		t.Fatalf("import %+v: %v %+v", req, err, res)
	}
	return res.Installed[0]
}

// A same-source import is a new version of the existing skill only for those
// who manage it by explicit right (creator, manage scope); an admin's import
// of a source another user installed privately is a skill of the admin's
// own, with the share asked for, unless --replace.
func TestAdminImportDoesNotTakeOverASameSourceSkill(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	addUsers(t, c, skills.User{UID: "alice", Role: "user"}, skills.User{UID: "mgr", Role: "user"}, skills.User{UID: "adm", Role: "admin"})
	src := skillDir(t, filepath.Join(t.TempDir(), "pdf"), "name: pdf\ndescription: one")
	mine := importAs(t, c, ImportRequest{Source: src, As: "alice"})

	global := skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}
	skillDir(t, src, "name: pdf\ndescription: two")
	in := importAs(t, c, ImportRequest{Source: src, As: "adm", Share: &global})
	if in.Slug != "pdf-v2" || in.RenamedFrom != "pdf" {
		t.Fatalf("admin's import of alice's source: %+v, want a new skill pdf-v2 renamed from pdf", in)
	}
	if !strings.Contains(in.Note, `the slug "pdf" is taken`) || strings.Contains(in.Note, "another source") {
		t.Errorf("note %q: want it to say the slug is taken, nothing about its source", in.Note)
	}
	alices, err := c.Show(ctx, "alice", "pdf")
	if err != nil || alices.Version != mine.Version || len(alices.Versions) != 1 || alices.Share.Read.Kind != skills.ScopeUser {
		t.Fatalf("alice's skill after the admin's import: %+v %v, want it untouched", alices, err)
	}
	admins, err := c.Show(ctx, "adm", "pdf-v2")
	if err != nil || admins.Creator != "adm" || admins.Share.Read.Kind != skills.ScopeGlobal {
		t.Fatalf("admin's skill: %+v %v, want the admin's, shared globally", admins, err)
	}
	// The admin's next import of the source updates the admin's own skill.
	skillDir(t, src, "name: pdf\ndescription: three")
	if in := importAs(t, c, ImportRequest{Source: src, As: "adm"}); in.Slug != "pdf-v2" || in.RenamedFrom != "" {
		t.Fatalf("admin's re-import: %+v, want a new version of pdf-v2", in)
	}
	// A user in the manage scope of alice's skill updates it.
	if _, err := c.Share(ctx, "adm", "pdf", skills.Share{
		Read:   skills.Scope{Kind: skills.ScopeUser, IDs: []string{"alice", "mgr"}},
		Manage: skills.Scope{Kind: skills.ScopeUser, IDs: []string{"mgr"}},
	}); err != nil {
		t.Fatal(err)
	}
	skillDir(t, src, "name: pdf\ndescription: four")
	if in := importAs(t, c, ImportRequest{Source: src, As: "mgr"}); in.Slug != "pdf" {
		t.Fatalf("manager's import: %+v, want a new version of pdf", in)
	}
	// --replace is the admin's explicit way to make it a new version of
	// alice's skill, which keeps its share.
	skillDir(t, src, "name: pdf\ndescription: five")
	if in := importAs(t, c, ImportRequest{Source: src, As: "adm", Replace: true, Share: &global}); in.Slug != "pdf" {
		t.Fatalf("admin's --replace: %+v, want a new version of pdf", in)
	}
	alices, err = c.Show(ctx, "alice", "pdf")
	if err != nil || len(alices.Versions) != 3 || alices.Creator != "alice" || alices.Share.Read.Kind != skills.ScopeUser {
		t.Fatalf("alice's skill after --replace: %+v %v, want 3 versions, hers, her share", alices, err)
	}
}

// A skill installed as <builtin>-vN beside a builtin (as installs did before
// builtin slugs were reserved) is still updated by re-importing its source,
// by those who may update it; anyone else is refused as before.
func TestReimportOfASkillBesideABuiltin(t *testing.T) {
	c := open(t)
	addUsers(t, c, skills.User{UID: "alice", Role: "user"}, skills.User{UID: "bob", Role: "user"})
	b := skillDir(t, filepath.Join(t.TempDir(), "triage"), "name: triage\ndescription: builtin")
	importAs(t, c, ImportRequest{Source: b, Builtin: true})
	// Such a skill: slug triage-v2, of source src. Its SKILL.md is named so
	// for the first import, as an old import rewrote it.
	src := skillDir(t, filepath.Join(t.TempDir(), "triage"), "name: triage-v2\ndescription: mine")
	old := importAs(t, c, ImportRequest{Source: src, As: "alice"})
	if old.Slug != "triage-v2" {
		t.Fatalf("installed as %q", old.Slug)
	}
	// Its source now asks for the builtin's slug under a name of its own
	// (the builtin's name is reserved as its slug is: TestBuiltinNamesAreReserved).
	skillDir(t, src, "slug: triage\nname: Alice's triage\ndescription: mine, newer")
	in := importAs(t, c, ImportRequest{Source: src, As: "alice"})
	if in.Slug != "triage-v2" || in.Version == old.Version || in.RenamedFrom != "" {
		t.Fatalf("re-import: %+v, want a new version of triage-v2", in)
	}
	res, err := c.Import(context.Background(), ImportRequest{Source: src, As: "bob"})
	if !errors.Is(err, skills.ErrExists) || !strings.Contains(err.Error(), `"triage" is reserved`) {
		t.Fatalf("bob's import of the source: %v %+v, want the slug refused as reserved", err, res)
	}
}

// A builtin's display name is reserved as its slug is: no other install,
// new skill or new version, may take the builtin's name or slug as its
// display name, compared as policy.NameKey does; the refusal names the
// builtin only to who may know it. A skill that had the name before names
// were reserved keeps it in its new versions, and the builtin itself is
// re-synced under it.
func TestBuiltinNamesAreReserved(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	addUsers(t, c, skills.User{UID: "alice", Role: "user"}, skills.User{UID: "adm", Role: "admin"})
	b := skillDir(t, filepath.Join(t.TempDir(), "deploy-agent"), "name: Deploy Agent\nslug: deploy-agent\ndescription: builtin")
	importAs(t, c, ImportRequest{Source: b, Builtin: true})
	before, err := c.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, front := range []string{
		"name: deploy agent\nslug: mine\ndescription: d",            // the builtin's name, in another case
		"name: Deploy_Agent\nslug: mine\ndescription: d",            // ... with another separator
		"name: \"Deploy\\u200b Agent\"\nslug: mine\ndescription: d", // ... with a zero-width space
		"name: deploy-agent\nslug: mine\ndescription: d",            // the builtin's slug
	} {
		src := skillDir(t, filepath.Join(t.TempDir(), "mine"), front)
		_, err := c.Import(ctx, ImportRequest{Source: src, As: "alice"})
		if !errors.Is(err, skills.ErrExists) || !strings.Contains(err.Error(), "is reserved by the builtin skill \"deploy-agent\"") ||
			!strings.Contains(err.Error(), "give the skill another name") {
			t.Errorf("alice imports %q: %v, want the name refused as the builtin's", front, err)
		}
	}
	// A skill of hers renamed like the builtin by a new version: refused too.
	src := skillDir(t, filepath.Join(t.TempDir(), "mine"), "name: mine\ndescription: d")
	importAs(t, c, ImportRequest{Source: src, As: "alice"})
	skillDir(t, src, "name: Deploy Agent\nslug: mine\ndescription: d2")
	if _, err := c.Import(ctx, ImportRequest{Source: src, As: "alice"}); !errors.Is(err, skills.ErrExists) {
		t.Errorf("a new version taking the builtin's name: %v, want refused", err)
	}
	// Disabled, the builtin is not named to alice; its name stays reserved.
	if _, err := c.SetEnabled(ctx, "adm", "deploy-agent", false); err != nil {
		t.Fatal(err)
	}
	other := skillDir(t, filepath.Join(t.TempDir(), "other"), "name: Deploy Agent\nslug: other\ndescription: d")
	_, err = c.Import(ctx, ImportRequest{Source: other, As: "alice"})
	if !errors.Is(err, skills.ErrExists) || !strings.Contains(err.Error(), `name "Deploy Agent" is reserved: no install may take it`) ||
		strings.Contains(err.Error(), "builtin") {
		t.Errorf("the name of a disabled builtin, to alice: %v", err)
	}
	if _, err := c.Import(ctx, ImportRequest{Source: other, As: "adm"}); err == nil || !strings.Contains(err.Error(), "builtin skill \"deploy-agent\"") {
		t.Errorf("the name of a disabled builtin, to an admin: %v, want it named", err)
	}
	// The builtin itself is re-synced under its name.
	skillDir(t, b, "name: Deploy Agent\nslug: deploy-agent\ndescription: builtin, newer")
	importAs(t, c, ImportRequest{Source: b, Builtin: true})
	// A skill that had a builtin's name before that builtin came keeps it
	// in its new versions.
	early := skillDir(t, filepath.Join(t.TempDir(), "early"), "name: Triage\nslug: early\ndescription: first")
	importAs(t, c, ImportRequest{Source: early, As: "alice"})
	importAs(t, c, ImportRequest{Source: skillDir(t, filepath.Join(t.TempDir(), "triage"), "name: triage\ndescription: builtin"), Builtin: true})
	skillDir(t, early, "name: Triage\nslug: early\ndescription: second")
	if in := importAs(t, c, ImportRequest{Source: early, As: "alice"}); in.Slug != "early" {
		t.Errorf("a new version of a skill named before the builtin: %+v", in)
	}
	skillDir(t, early, "name: triage agent\nslug: early\ndescription: third")
	importAs(t, c, ImportRequest{Source: early, As: "alice"}) // another name is free
	skillDir(t, early, "name: Triage\nslug: early\ndescription: fourth")
	if _, err := c.Import(ctx, ImportRequest{Source: early, As: "alice"}); !errors.Is(err, skills.ErrExists) {
		t.Errorf("taking the builtin's name back: %v, want refused", err)
	}
	after, err := c.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)+3 { // mine, early, triage
		t.Errorf("the catalog went from %d to %d skills, want three more (mine, early, triage)", len(before), len(after))
	}
}

// A disabled builtin does not exist for ordinary users: the refusal of its
// slug says it is reserved and nothing more; an enabled one, and any
// builtin to an admin, is named.
func TestReservedSlugOfADisabledBuiltinNamesNothing(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	addUsers(t, c, skills.User{UID: "alice", Role: "user"}, skills.User{UID: "adm", Role: "admin"})
	b := skillDir(t, filepath.Join(t.TempDir(), "triage"), "name: triage\ndescription: builtin")
	importAs(t, c, ImportRequest{Source: b, Builtin: true})
	other := skillDir(t, filepath.Join(t.TempDir(), "triage"), "name: triage\ndescription: mine")
	refusal := func(as string) string {
		t.Helper()
		_, err := c.Import(ctx, ImportRequest{Source: other, As: as})
		if !errors.Is(err, skills.ErrExists) || !strings.Contains(err.Error(), `slug "triage" is reserved`) ||
			!strings.Contains(err.Error(), "give the skill another name") {
			t.Fatalf("import as %s: %v, want the slug refused as reserved, with the way on", as, err)
		}
		return err.Error()
	}
	if msg := refusal("alice"); !strings.Contains(msg, `builtin skill "triage"`) {
		t.Errorf("enabled builtin, ordinary user: %q, want the builtin named", msg)
	}
	if _, err := c.SetEnabled(ctx, "adm", "triage", false); err != nil {
		t.Fatal(err)
	}
	if msg := refusal("alice"); strings.Contains(msg, "builtin skill") {
		t.Errorf("disabled builtin, ordinary user: %q, want no word of a builtin", msg)
	}
	if msg := refusal("adm"); !strings.Contains(msg, `builtin skill "triage"`) {
		t.Errorf("disabled builtin, admin: %q, want the builtin named", msg)
	}
}

// user delete --force closes the sessions a user opened while being deleted
// (between the listing of their sessions and the delete) as it closes the
// others, and never deletes a user with a session left open.
func TestDeleteUserClosesSessionsOpenedMeanwhile(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	addUsers(t, c, skills.User{UID: "bob", Role: "user"}, skills.User{UID: "zed", Role: "user"})
	n := 0
	openSession := func(uid string) string {
		t.Helper()
		n++
		id := uid + strconv.Itoa(n)
		if err := c.db.CreateSession(ctx, &skills.Session{ID: id, UID: uid, CreatedAt: time.Now(), Host: c.HostID()}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// closer closes ids as the daemon would and, the first `racing` times,
	// a session of uid is created meanwhile.
	closer := func(uid string, racing int, calls *[][]string) CloseSessions {
		return func(ctx context.Context, ids []string) error {
			*calls = append(*calls, ids)
			if err := c.closeInIndex(ctx, ids); err != nil {
				return err
			}
			if len(*calls) <= racing {
				openSession(uid)
			}
			return nil
		}
	}

	first := openSession("bob")
	var calls [][]string
	res, err := c.DeleteUser(ctx, "", "bob", "", true, closer("bob", 1, &calls))
	if err != nil {
		t.Fatalf("delete --force: %v", err)
	}
	closed := res.Closed
	straggler := calls[len(calls)-1]
	if len(calls) != 2 || !slices.Equal(closed, []string{first, straggler[0]}) || straggler[0] == first {
		t.Fatalf("closed %v in calls %v, want %s and then the session opened meanwhile", closed, calls, first)
	}
	if ids, err := c.db.OpenSessionIDs(ctx, "bob"); err != nil || len(ids) != 0 {
		t.Fatalf("bob's open sessions after the delete: %v %v", ids, err)
	}
	if _, err := c.db.User(ctx, "bob"); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("bob after the delete: %v, want not found", err)
	}

	// A user whose sessions keep coming is not deleted, and says so.
	openSession("zed")
	calls = nil
	res, err = c.DeleteUser(ctx, "", "zed", "", true, closer("zed", deleteRounds, &calls))
	if !errors.Is(err, skills.ErrExists) || !strings.Contains(err.Error(), "keeps opening sessions") || len(calls) != deleteRounds {
		t.Fatalf("delete --force of a user who keeps opening sessions: %v after %d closes, want refused after %d", err, len(calls), deleteRounds)
	}
	// What it closed before giving up is reported, not lost.
	gone := res.Closed
	if len(gone) != deleteRounds || !strings.Contains(err.Error(), "sessions closed before it failed: "+gone[0]) {
		t.Fatalf("a refused delete --force closed %v and says %q", gone, err)
	}
	if _, err := c.db.User(ctx, "zed"); err != nil {
		t.Fatalf("zed after a refused delete: %v", err)
	}
}

// --replace onto a slug held by a skill the importer may not see (another
// user's private skill, a disabled one she only reads) answers exactly as
// the same import without --replace: a new skill beside it, whose -vN says
// no more than any import of a taken slug does. Only a skill she knows of
// but may not manage is refused, as that tells her nothing new.
func TestReplaceOfAHiddenSlugAnswersAsWithout(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	addUsers(t, c, skills.User{UID: "alice", Role: "user"}, skills.User{UID: "bob", Role: "user"})
	for _, name := range []string{"pdf", "old", "notes"} {
		importAs(t, c, ImportRequest{Source: skillDir(t, filepath.Join(t.TempDir(), name), "name: "+name+"\ndescription: bob's"), As: "bob"})
	}
	both := skills.Share{Read: skills.Scope{Kind: skills.ScopeUser, IDs: []string{"alice", "bob"}}}
	for _, slug := range []string{"old", "notes"} {
		if _, err := c.Share(ctx, "", slug, both); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.SetEnabled(ctx, "bob", "old", false); err != nil {
		t.Fatal(err)
	}
	before := map[string]*Detail{}
	for _, slug := range []string{"pdf", "old", "notes"} {
		before[slug], _ = c.Show(ctx, "bob", slug)
	}

	for _, slug := range []string{"pdf", "old"} {
		t.Run(slug, func(t *testing.T) {
			src := skillDir(t, filepath.Join(t.TempDir(), slug), "name: "+slug+"\ndescription: alice's")
			plan := func(replace bool) []Available {
				res, err := c.Import(ctx, ImportRequest{Source: src, As: "alice", List: true, Replace: replace})
				if err != nil {
					t.Fatal(err)
				}
				return res.Available
			}
			with, without := plan(true), plan(false)
			if !reflect.DeepEqual(with, without) {
				t.Errorf("--list with --replace:\n%+v\nwithout:\n%+v", with, without)
			}
			in := importAs(t, c, ImportRequest{Source: src, As: "alice", Replace: true})
			if in.Slug != slug+"-v2" || in.RenamedFrom != slug {
				t.Fatalf("--replace of a hidden %s: %+v, want a new skill %s-v2", slug, in, slug)
			}
			for _, w := range append(in.Warnings, in.Note) {
				if strings.Contains(w, "bob") || strings.Contains(w, "may not manage") || strings.Contains(w, "disabled") {
					t.Errorf("the answer tells about the hidden skill: %q", w)
				}
			}
		})
	}
	// A skill alice reads: --replace is refused, she knows it exists.
	src := skillDir(t, filepath.Join(t.TempDir(), "notes"), "name: notes\ndescription: alice's")
	if _, err := c.Import(ctx, ImportRequest{Source: src, As: "alice", Replace: true}); !errors.Is(err, skills.ErrPermission) {
		t.Fatalf("--replace of a skill alice reads but may not manage: %v, want a refusal", err)
	}
	for slug, d := range before {
		after, err := c.Show(ctx, "bob", slug)
		if err != nil || after.Version != d.Version || len(after.Versions) != 1 || after.Creator != "bob" {
			t.Errorf("bob's %s after alice's imports: %+v %v, want it untouched", slug, after, err)
		}
	}
}
