package integration

import (
	"bytes"
	"crypto/sha256"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/skills/skilltest"
)

// outsideSecret is the content of files outside an imported source: it must
// never reach the store or a mount.
const outsideSecret = "OUTSIDE THE REPOSITORY: NEVER IMPORTED\n"

// symlinkRepo writes a repository whose skills link to files and folders
// elsewhere in it, the way real skill repositories share references, and to
// places outside it. It returns the repository and the file outside.
func symlinkRepo(t testing.TB, base string) (*gitRepo, string) {
	t.Helper()
	outside := filepath.Join(base, "outside.md")
	skilltest.WriteFile(t, outside, []byte(outsideSecret), 0o644)
	g := newGitRepo(t, filepath.Join(base, "repo"))
	root := g.dir
	skilltest.WriteFile(t, filepath.Join(root, "shared", "style.md"), []byte("# House style\n\nShort sentences.\n"), 0o644)
	skilltest.WriteFile(t, filepath.Join(root, "shared", "templates", "report.md"), []byte("# Report\n\n{{body}}\n"), 0o644)
	skilltest.WriteFile(t, filepath.Join(root, "shared", "templates", "bin", "render.sh"), []byte("#!/bin/sh\necho render\n"), 0o755)
	skilltest.WriteFile(t, filepath.Join(root, "manifests", "linked.md"), goodManifest("linked-manifest"), 0o644)

	writeSkill(t, filepath.Join(root, "skills", "writer"), "name: writer\ndescription: Writes reports in the house style.", map[string]string{
		"references/guide.md": "# Guide\n",
	})
	skilltest.WriteDir(t, root, fstest.MapFS{
		"skills/writer/references/style.md":       skilltest.Symlink("../../../shared/style.md"), // a file elsewhere in the repository
		"skills/writer/references/guide-again.md": skilltest.Symlink("guide.md"),                 // a file in the skill
		"skills/writer/templates":                 skilltest.Symlink("../../shared/templates"),   // a folder elsewhere in the repository
		"skills/writer/references/outside.md":     skilltest.Symlink("../../../../outside.md"),   // leaves the repository
		"skills/writer/passwd":                    skilltest.Symlink("/etc/passwd"),              // absolute
		"skills/writer/dangling.md":               skilltest.Symlink("nowhere.md"),               // dangles
		"skills/writer/parent":                    skilltest.Symlink(".."),                       // its own ancestor
		// SKILL.md itself is a link.
		"skills/linked-manifest/SKILL.md": skilltest.Symlink("../../manifests/linked.md"),
		"skills/linked-manifest/style.md": skilltest.Symlink("../../shared/style.md"),
	})
	g.commit("skills that share files by links")
	return g, outside
}

// TestImportSymlinksFromGitRepository imports a repository whose skills
// link into it: each link inside the repository is stored as a copy of its
// target and read byte for byte through a session's mount; each link out of
// it, dangling or looping is left out with a warning naming it, and the
// import succeeds.
func TestImportSymlinksFromGitRepository(t *testing.T) {
	e := newCatalogEnv(t)
	g, _ := symlinkRepo(t, t.TempDir())
	out := e.mustImport(g.url(), "--all", "--share", "global")
	if got := out.installedSlugs(); !slices.Equal(got, []string{"linked-manifest", "writer"}) || len(out.Failed) != 0 {
		t.Fatalf("installed %v, failed %+v", got, out.Failed)
	}
	warned := map[string][]string{}
	for _, in := range out.Installed {
		warned[in.Slug] = in.Warnings
	}
	wantWarn := []string{
		`skipped symlink "dangling.md" -> "nowhere.md": its target does not exist`,
		`skipped symlink "parent" -> "..": it leads to a folder that contains it`,
		`skipped symlink "passwd" -> "/etc/passwd": it leads outside the source`,
		`skipped symlink "references/outside.md" -> "../../../../outside.md": it leads outside the source`,
	}
	for _, w := range wantWarn {
		if !slices.Contains(warned["writer"], w) {
			t.Errorf("writer's warnings %q lack %q", warned["writer"], w)
		}
	}
	if n := len(warned["writer"]); n != len(wantWarn) {
		t.Errorf("writer has %d warnings, want %d: %q", n, len(wantWarn), warned["writer"])
	}
	if len(warned["linked-manifest"]) != 0 {
		t.Errorf("linked-manifest warnings %q", warned["linked-manifest"])
	}
	for _, w := range append(warned["writer"], warned["linked-manifest"]...) {
		checkNamesNoTemp(t, e, w)
	}

	// Through a session's mount, every link reads as its target.
	e.serve()
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "writer,linked-manifest")
	root := g.dir
	same := map[string]string{ // path in the mount -> file in the repository
		"writer/references/style.md":       "shared/style.md",
		"writer/references/guide-again.md": "skills/writer/references/guide.md",
		"writer/references/guide.md":       "skills/writer/references/guide.md",
		"writer/templates/report.md":       "shared/templates/report.md",
		"writer/templates/bin/render.sh":   "shared/templates/bin/render.sh",
		"writer/SKILL.md":                  "skills/writer/SKILL.md",
		"linked-manifest/SKILL.md":         "manifests/linked.md",
		"linked-manifest/style.md":         "shared/style.md",
	}
	for p, src := range same {
		got, err := os.ReadFile(filepath.Join(s.Path, filepath.FromSlash(p)))
		if err != nil {
			t.Errorf("read %s through the mount: %v", p, err)
			continue
		}
		want, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(src)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s reads %q through the mount, want %q (%s)", p, got, want, src)
		}
	}
	if fi, err := os.Stat(filepath.Join(s.Path, "writer", "templates", "bin", "render.sh")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("render.sh through a linked folder: %v, %v; want executable", fi, err)
	}
	// Nothing else is there: no link, nothing left out, nothing from outside.
	var seen []string
	err := filepath.WalkDir(s.Path, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&iofs.ModeSymlink != 0 {
			t.Errorf("%s is a symlink in the mount", p)
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(s.Path, p)
			seen = append(seen, filepath.ToSlash(rel))
			if b, err := os.ReadFile(p); err != nil || bytes.Contains(b, []byte(outsideSecret)) || bytes.Contains(b, []byte("root:x:0:0")) {
				t.Errorf("%s: read error %v or content from outside the repository", rel, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(seen)
	var want []string
	for p := range same {
		want = append(want, p)
	}
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		t.Errorf("the mount shows %q, want %q", seen, want)
	}
	checkNoLeftovers(t, e)
}

// TestImportSymlinksFromZip: an archive's link entries inside it are
// stored as copies of their targets; absolute and escaping ones are left
// out with a warning naming the entry.
func TestImportSymlinksFromZip(t *testing.T) {
	e := newCatalogEnv(t)
	p := filepath.Join(t.TempDir(), "skills.zip")
	skilltest.WriteFile(t, p, zipBytes(t, zipWith(
		skilltest.ZipEntry{Name: "shared/style.md", Data: []byte("# House style\n")},
		skilltest.ZipEntry{Name: "skill/style.md", Mode: os.ModeSymlink | 0o777, Data: []byte("../shared/style.md")},
		skilltest.ZipEntry{Name: "skill/shared", Mode: os.ModeSymlink | 0o777, Data: []byte("../shared")},
		skilltest.ZipEntry{Name: "skill/up", Mode: os.ModeSymlink | 0o777, Data: []byte("../../../etc")},
		skilltest.ZipEntry{Name: "skill/passwd", Mode: os.ModeSymlink | 0o777, Data: []byte("/etc/passwd")},
	)), 0o644)
	out := e.mustImport(p)
	if len(out.Installed) != 1 {
		t.Fatalf("installed %+v", out.Installed)
	}
	w := strings.Join(out.Installed[0].Warnings, "\n")
	for _, want := range []string{
		`skipped symlink entry "skill/up" -> "../../../etc": it leads outside the archive`,
		`skipped symlink entry "skill/passwd" -> "/etc/passwd": its target is absolute`,
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q lack %q", w, want)
		}
	}
	checkNamesNoTemp(t, e, w)
	stored := readTree(t, e.show(out.Installed[0].Slug).Path)
	for _, name := range []string{"style.md", "shared/style.md"} {
		if got := stored[name]; got.sum != sha256.Sum256([]byte("# House style\n")) {
			t.Errorf("stored %s: %+v", name, got)
		}
	}
	for _, name := range []string{"up", "passwd"} {
		if _, ok := stored[name]; ok {
			t.Errorf("%s was stored", name)
		}
	}
	checkNoLeftovers(t, e)
}

// TestImportSymlinksFromLocalFolder: a plain folder is its own root: a skill
// may link to a file beside it, not above it.
func TestImportSymlinksFromLocalFolder(t *testing.T) {
	e := newCatalogEnv(t)
	base := t.TempDir()
	skilltest.WriteFile(t, filepath.Join(base, "outside.md"), []byte(outsideSecret), 0o644)
	src := filepath.Join(base, "src")
	skilltest.WriteFile(t, filepath.Join(src, "common", "notes.md"), []byte("common notes\n"), 0o644)
	writeSkill(t, filepath.Join(src, "skills", "notes"), "name: notes\ndescription: Takes notes.", nil)
	for target, name := range map[string]string{"../../common/notes.md": "notes.md", "../../../outside.md": "outside.md"} {
		if err := os.Symlink(target, filepath.Join(src, "skills", "notes", name)); err != nil {
			t.Fatal(err)
		}
	}
	out := e.mustImport(src, "--all")
	if len(out.Installed) != 1 {
		t.Fatalf("installed %+v", out.Installed)
	}
	want := []string{`skipped symlink "outside.md" -> "../../../outside.md": it leads outside the source`}
	if got := out.Installed[0].Warnings; !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	stored := readTree(t, e.show("notes").Path)
	if stored["notes.md"].sum != sha256.Sum256([]byte("common notes\n")) {
		t.Errorf("notes.md stored as %+v", stored["notes.md"])
	}
	if _, ok := stored["outside.md"]; ok {
		t.Error("outside.md was stored")
	}
}
