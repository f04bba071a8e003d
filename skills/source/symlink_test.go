package source

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"skillfs/skills"
	"skillfs/skills/skilltest"
	"skillfs/skills/store"
)

// secret is the content of files outside a source's root: it must never
// appear in anything staged from the source.
const secret = "TOP SECRET, OUTSIDE THE SOURCE ROOT"

// linkRepo builds a repository with one skill, skills/demo, beside files
// it may link to (shared/) and next to a folder outside the repository
// holding secret files. It returns the outside folder, the repository root
// and the skill folder.
func linkRepo(tb testing.TB) (outside, root, skill string) {
	tb.Helper()
	base, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	outside = filepath.Join(base, "outside")
	root = filepath.Join(base, "repo")
	skill = filepath.Join(root, "skills", "demo")
	skilltest.WriteDir(tb, outside, fstest.MapFS{
		"secret.txt":    skilltest.File(secret),
		"dir/secret.md": skilltest.File(secret),
	})
	skilltest.WriteDir(tb, root, fstest.MapFS{
		"shared/doc.md":                   skilltest.File("shared doc\n"),
		"shared/dir/a.md":                 skilltest.File("a in shared dir\n"),
		"shared/dir/sub/run.sh":           skilltest.Executable("#!/bin/sh\necho shared\n"),
		"skills/demo/SKILL.md":            skilltest.File(skilltest.DemoManifest),
		"skills/demo/references/local.md": skilltest.File("local reference\n"),
	})
	return outside, root, skill
}

// stageLinks stages skill with root as its confinement root and fails the
// test on error.
func stageLinks(tb testing.TB, skill, root string, lim skills.Limits) (*StageResult, string) {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), "staged")
	res, err := StageDirOpts(skill, dst, lim, StageOptions{Root: root})
	if err != nil {
		tb.Fatalf("StageDirOpts: %v", err)
	}
	return res, dst
}

// checkPlain fails unless the staged tree holds only regular files and
// directories, none of them holding the secret.
func checkPlain(tb testing.TB, tree fstest.MapFS) {
	tb.Helper()
	for p, e := range tree {
		if !e.Mode.IsRegular() && !e.Mode.IsDir() {
			tb.Errorf("%s is staged as %v: only files and folders may be", p, e.Mode)
		}
		if strings.Contains(string(e.Data), secret) {
			tb.Errorf("%s holds a file from outside the source root", p)
		}
	}
}

// skippedLink is the warning StageDirOpts gives for a link it leaves out.
func skippedLink(rel, target, why string) string {
	return `skipped symlink "` + rel + `" -> "` + target + `": ` + why
}

// TestStageSymlinksConfinedToRoot: links whose targets lie in the source's
// root are staged as copies of their targets (files and folders, inside
// and outside the skill folder, relative and absolute, links inside linked
// folders); every other link is left out with one warning naming it and its
// target, and nothing from outside the root is read.
func TestStageSymlinksConfinedToRoot(t *testing.T) {
	outside, root, skill := linkRepo(t)
	skilltest.WriteDir(t, skill, fstest.MapFS{
		// Inside the skill folder.
		"references/inskill.md": skilltest.Symlink("local.md"),
		"refs":                  skilltest.Symlink("references"),
		// Outside the skill folder, inside the repository.
		"references/shared.md": skilltest.Symlink("../../../shared/doc.md"),
		"shareddir":            skilltest.Symlink("../../shared/dir"),
		"absolute-inside.md":   skilltest.Symlink(filepath.Join(root, "shared", "doc.md")),
		"dotdot-inside.md":     skilltest.Symlink("references/../../../shared/doc.md"),
		// Escaping, dangling and looping.
		"escape.txt":     skilltest.Symlink("../../../outside/secret.txt"),
		"absolute.txt":   skilltest.Symlink(filepath.Join(outside, "secret.txt")),
		"escape-dir":     skilltest.Symlink("../../../outside/dir"),
		"slash":          skilltest.Symlink("/"),
		"dangling.md":    skilltest.Symlink("missing.md"),
		"through-a-file": skilltest.Symlink("references/local.md/x"),
		"loop-a":         skilltest.Symlink("loop-b"),
		"loop-b":         skilltest.Symlink("loop-a"),
		"self":           skilltest.Symlink("self"),
		"parent":         skilltest.Symlink(".."),
		"here":           skilltest.Symlink("."),
		"repo":           skilltest.Symlink("../.."),
		"references/up":  skilltest.Symlink("../.."),
		// A chain that ends outside, and one that passes outside and comes back:
		// neither is followed, since following would read a link outside.
		"chain-out.txt": skilltest.Symlink("../../shared/out-link"),
		"chain-back.md": skilltest.Symlink("../../../outside/back-in.md"),
	})
	// In a linked folder, a relative link resolved where it really lies and
	// one that escapes from there; the first link of a chain that ends
	// outside.
	skilltest.WriteDir(t, root, fstest.MapFS{
		"shared/dir/alias.md": skilltest.Symlink("a.md"),
		"shared/dir/up.txt":   skilltest.Symlink("../../../outside/secret.txt"),
		"shared/out-link":     skilltest.Symlink("../../outside/secret.txt"),
	})
	// The middle of a chain that passes outside and comes back.
	skilltest.WriteDir(t, outside, fstest.MapFS{
		"back-in.md": skilltest.Symlink(filepath.Join(root, "shared", "doc.md")),
	})

	res, dst := stageLinks(t, skill, root, skills.DefaultLimits())
	got := skilltest.ReadDir(t, dst)
	checkPlain(t, got)
	want := map[string]string{
		"SKILL.md":              skilltest.DemoManifest,
		"references/local.md":   "local reference\n",
		"references/inskill.md": "local reference\n",
		"references/shared.md":  "shared doc\n",
		"refs/local.md":         "local reference\n",
		"refs/inskill.md":       "local reference\n",
		"refs/shared.md":        "shared doc\n",
		"shareddir/a.md":        "a in shared dir\n",
		"shareddir/alias.md":    "a in shared dir\n",
		"shareddir/sub/run.sh":  "#!/bin/sh\necho shared\n",
		"absolute-inside.md":    "shared doc\n",
		"dotdot-inside.md":      "shared doc\n",
		"references":            "",
		"refs":                  "",
		"shareddir":             "",
		"shareddir/sub":         "",
	}
	for p, body := range want {
		e, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s was not staged", p)
		case body == "" && !e.Mode.IsDir():
			t.Errorf("%s is %v, want a folder", p, e.Mode)
		case body != "" && string(e.Data) != body:
			t.Errorf("%s holds %q, want %q", p, string(e.Data), body)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s was staged, and should not be", p)
		}
	}
	if m := got["shareddir/sub/run.sh"].Mode; m != 0o755 {
		t.Errorf("run.sh through a linked folder has mode %v, want 0755", m)
	}
	if m := got["references/shared.md"].Mode; m != 0o644 {
		t.Errorf("a linked file has mode %v, want 0644", m)
	}

	wantWarn := []string{
		skippedLink("shareddir/up.txt", "../../../outside/secret.txt", "it leads outside the source"),
		skippedLink("escape.txt", "../../../outside/secret.txt", "it leads outside the source"),
		skippedLink("absolute.txt", filepath.Join(outside, "secret.txt"), "it leads outside the source"),
		skippedLink("escape-dir", "../../../outside/dir", "it leads outside the source"),
		skippedLink("slash", "/", "it leads outside the source"),
		skippedLink("dangling.md", "missing.md", "its target does not exist"),
		skippedLink("through-a-file", "references/local.md/x", "its target does not exist"),
		skippedLink("loop-a", "loop-b", "it is a loop of symlinks"),
		skippedLink("loop-b", "loop-a", "it is a loop of symlinks"),
		skippedLink("self", "self", "it is a loop of symlinks"),
		skippedLink("parent", "..", "it leads to a folder that contains it"),
		skippedLink("here", ".", "it leads to a folder that contains it"),
		skippedLink("repo", "../..", "it leads to a folder that contains it"),
		skippedLink("references/up", "../..", "it leads to a folder that contains it"),
		// Seen again through refs -> references.
		skippedLink("refs/up", "../..", "it leads to a folder that contains it"),
		skippedLink("chain-out.txt", "../../shared/out-link", "it leads outside the source"),
		skippedLink("chain-back.md", "../../../outside/back-in.md", "it leads outside the source"),
	}
	slices.Sort(wantWarn)
	gotWarn := slices.Sorted(slices.Values(res.Warnings))
	if !slices.Equal(gotWarn, wantWarn) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(gotWarn, "\n"), strings.Join(wantWarn, "\n"))
	}
	for _, w := range res.Warnings {
		if strings.Contains(w, dst) || strings.Contains(w, skill) {
			t.Errorf("warning names a path of the machine: %s", w)
		}
	}
	if res.Files != 12 {
		t.Errorf("%d files counted, want 12", res.Files)
	}
	// The store takes it: it holds no link.
	if _, _, _, err := store.TreeHash(dst); err != nil {
		t.Fatalf("TreeHash of the staged tree: %v", err)
	}
}

// TestStageSymlinkedManifest: SKILL.md may itself be a link into the
// root; one that leaves the root, dangles or names a folder is no manifest.
func TestStageSymlinkedManifest(t *testing.T) {
	cases := []struct {
		name    string
		target  func(outside, root string) string
		wantErr error
		wantMsg string
	}{
		{name: "inside the skill", target: func(_, _ string) string { return "docs/manual.md" }},
		{name: "inside the repository", target: func(_, _ string) string { return "../../manifests/demo.md" }},
		{name: "absolute inside", target: func(_, root string) string { return filepath.Join(root, "manifests", "demo.md") }},
		{name: "outside", target: func(_, _ string) string { return "../../../outside/secret.txt" }, wantErr: skills.ErrNoManifest,
			wantMsg: `"SKILL.md" -> "../../../outside/secret.txt": it leads outside the source`},
		{name: "absolute outside", target: func(outside, _ string) string { return filepath.Join(outside, "secret.txt") }, wantErr: skills.ErrNoManifest,
			wantMsg: "it leads outside the source"},
		{name: "dangling", target: func(_, _ string) string { return "nothing.md" }, wantErr: skills.ErrNoManifest,
			wantMsg: `"SKILL.md" -> "nothing.md": its target does not exist`},
		{name: "a folder", target: func(_, _ string) string { return "docs" }, wantErr: skills.ErrNoManifest, wantMsg: "directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			outside, root, skill := linkRepo(t)
			skilltest.WriteDir(t, root, fstest.MapFS{"manifests/demo.md": skilltest.File(skilltest.DemoManifest), "skills/demo/docs/manual.md": skilltest.File(skilltest.DemoManifest)})
			skilltest.WriteDir(t, skill, fstest.MapFS{skills.ManifestName: skilltest.Symlink(tc.target(outside, root))})
			dst := filepath.Join(t.TempDir(), "staged")
			res, err := StageDirOpts(skill, dst, skills.DefaultLimits(), StageOptions{Root: root})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("error %v, want %v naming %q", err, tc.wantErr, tc.wantMsg)
				}
				if strings.Contains(err.Error(), skill) {
					t.Errorf("error names the skill folder's path: %v", err)
				}
				skilltest.AssertAbsent(t, dst)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := skilltest.ReadDir(t, dst)
			checkPlain(t, got)
			if e := got[skills.ManifestName]; string(e.Data) != skilltest.DemoManifest || e.Mode != 0o644 {
				t.Errorf("SKILL.md staged as %v %q", e.Mode, string(e.Data))
			}
			if len(res.Warnings) != 0 {
				t.Errorf("warnings %q", res.Warnings)
			}
		})
	}
}

// TestStageDirConfinesToTheSkillFolder: without a root, the skill folder
// is the root: a link to its parent's files is left out.
func TestStageDirConfinesToTheSkillFolder(t *testing.T) {
	_, _, skill := linkRepo(t)
	skilltest.WriteDir(t, skill, fstest.MapFS{
		"shared.md": skilltest.Symlink("../../shared/doc.md"),
		"local.md":  skilltest.Symlink("references/local.md"),
	})
	dst := filepath.Join(t.TempDir(), "staged")
	res, err := StageDir(skill, dst, skills.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	got := skilltest.ReadDir(t, dst)
	if _, ok := got["shared.md"]; ok {
		t.Error("a link out of the skill folder was staged with no root given")
	}
	if string(got["local.md"].Data) != "local reference\n" {
		t.Errorf("local.md = %q", string(got["local.md"].Data))
	}
	want := []string{skippedLink("shared.md", "../../shared/doc.md", "it leads outside the source")}
	if !slices.Equal(res.Warnings, want) {
		t.Errorf("warnings %q, want %q", res.Warnings, want)
	}
}

// TestStageDirOptsSkillOutsideRoot: a skill folder must lie in its root.
func TestStageDirOptsSkillOutsideRoot(t *testing.T) {
	outside, root, _ := linkRepo(t)
	skilltest.WriteDir(t, outside, fstest.MapFS{"skill/SKILL.md": skilltest.File(skilltest.DemoManifest)})
	dst := filepath.Join(t.TempDir(), "staged")
	if _, err := StageDirOpts(filepath.Join(outside, "skill"), dst, skills.DefaultLimits(), StageOptions{Root: root}); !errors.Is(err, skills.ErrUnsafePath) {
		t.Fatalf("error %v, want ErrUnsafePath", err)
	}
	skilltest.AssertAbsent(t, dst)
}

// TestStageSymlinkFarmHitsLimits: links that copy one folder many times are
// bounded by the limits like any other content.
func TestStageSymlinkFarmHitsLimits(t *testing.T) {
	_, root, skill := linkRepo(t)
	farm := fstest.MapFS{}
	for i := 0; i < 5; i++ {
		farm["shared/big/f"+strconv.Itoa(i)] = skilltest.File(strings.Repeat("x", 10))
	}
	for i := 0; i < 10; i++ {
		farm["skills/demo/copy"+strconv.Itoa(i)] = skilltest.Symlink("../../shared/big")
	}
	skilltest.WriteDir(t, root, farm)
	dst := filepath.Join(t.TempDir(), "staged")
	_, err := StageDirOpts(skill, dst, skills.Limits{MaxFiles: 20}, StageOptions{Root: root})
	if limitOf(err) != skills.LimitFiles {
		t.Fatalf("error %v, want the files limit", err)
	}
	skilltest.AssertAbsent(t, dst)
	// A chain of folders linking to the next, each holding the link to the
	// next again, stops at the depth limit.
	_, root2, skill2 := linkRepo(t)
	skilltest.WriteDir(t, root2, fstest.MapFS{"shared/dir/again": skilltest.Symlink("../deep")})
	if err := os.Rename(filepath.Join(root2, "shared", "dir"), filepath.Join(root2, "shared", "deep")); err != nil {
		t.Fatal(err)
	}
	skilltest.WriteDir(t, skill2, fstest.MapFS{"deep": skilltest.Symlink("../../shared/deep")})
	res, err := StageDirOpts(skill2, dst, skills.DefaultLimits(), StageOptions{Root: root2})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{skippedLink("deep/again", "../deep", "it leads to a folder that contains it")}
	if !slices.Equal(res.Warnings, want) {
		t.Errorf("warnings %q, want %q", res.Warnings, want)
	}
}

// TestStageSpecialFilesAllNamed: fifos, sockets and links to them inside
// the root are errors, every one named at once by its path in the source.
func TestStageSpecialFilesAllNamed(t *testing.T) {
	mkfifo := func(tb testing.TB, p string) {
		tb.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	t.Run("a link to a fifo", func(t *testing.T) {
		_, root, skill := linkRepo(t)
		mkfifo(t, filepath.Join(root, "shared", "pipe"))
		skilltest.WriteDir(t, skill, fstest.MapFS{"references/pipe": skilltest.Symlink("../../../shared/pipe")})
		dst := filepath.Join(t.TempDir(), "staged")
		_, err := StageDirOpts(skill, dst, skills.DefaultLimits(), StageOptions{Root: root})
		var se *skills.SpecialFileError
		if !errors.Is(err, skills.ErrSpecialFile) || !errors.As(err, &se) || se.Path != "references/pipe" || se.Kind != "fifo" || se.Link != "../../../shared/pipe" {
			t.Fatalf("error %v (%+v), want a SpecialFileError for references/pipe", err, se)
		}
		if want := `"references/pipe" is a symlink to "../../../shared/pipe", a fifo`; !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
		skilltest.AssertAbsent(t, dst)
	})
	t.Run("several", func(t *testing.T) {
		_, root, skill := linkRepo(t)
		mkfifo(t, filepath.Join(skill, "a-pipe"))
		mkfifo(t, filepath.Join(skill, "scripts", "pipe"))
		mkfifo(t, filepath.Join(root, "shared", "pipe"))
		skilltest.WriteDir(t, skill, fstest.MapFS{
			"references/pipe": skilltest.Symlink("../../../shared/pipe"),
			"linked":          skilltest.Symlink("../../shared/dir"),
		})
		mkfifo(t, filepath.Join(root, "shared", "dir", "pipe"))
		dst := filepath.Join(t.TempDir(), "staged")
		_, err := StageDirOpts(skill, dst, skills.DefaultLimits(), StageOptions{Root: root})
		var all *skills.SpecialFilesError
		if !errors.Is(err, skills.ErrSpecialFile) || !errors.As(err, &all) {
			t.Fatalf("error %v, want a SpecialFilesError", err)
		}
		var paths []string
		for _, f := range all.Files {
			paths = append(paths, f.Path)
		}
		want := []string{"a-pipe", "linked/pipe", "references/pipe", "scripts/pipe"}
		if !slices.Equal(paths, want) {
			t.Errorf("named %q, want %q", paths, want)
		}
		for _, p := range want {
			if !strings.Contains(err.Error(), `"`+p+`"`) {
				t.Errorf("message %q does not name %s", err, p)
			}
		}
		var first *skills.SpecialFileError
		if !errors.As(err, &first) || first.Path != "a-pipe" {
			t.Errorf("errors.As finds %+v, want the first, a-pipe", first)
		}
		if strings.Contains(err.Error(), root) {
			t.Errorf("message names a path of the machine: %v", err)
		}
		skilltest.AssertAbsent(t, dst)
	})
}

// TestExtractZipSymlinks: symlink entries whose targets stay inside the
// archive are unpacked as links, which staging with the unpacked tree as
// root turns into copies; the others are left out with a warning naming
// the entry and its target.
func TestExtractZipSymlinks(t *testing.T) {
	zp := filepath.Join(t.TempDir(), "a.zip")
	skilltest.WriteFile(t, zp, skilltest.Zip(t,
		skilltest.ZipEntry{Name: "skill/SKILL.md", Data: []byte(skilltest.DemoManifest)},
		skilltest.ZipEntry{Name: "shared/doc.md", Data: []byte("shared doc\n")},
		skilltest.ZipEntry{Name: "shared/tools/run.sh", Data: []byte("#!/bin/sh\n"), Mode: 0o755},
		skilltest.ZipEntry{Name: "skill/references/doc.md", Data: []byte("../../shared/doc.md"), Mode: os.ModeSymlink | 0o777},
		skilltest.ZipEntry{Name: "skill/tools", Data: []byte("../shared/tools"), Mode: os.ModeSymlink | 0o777},
		skilltest.ZipEntry{Name: "skill/local.md", Data: []byte("SKILL.md"), Mode: os.ModeSymlink | 0o777},
		skilltest.ZipEntry{Name: "skill/up", Data: []byte("../../etc"), Mode: os.ModeSymlink | 0o777},
		skilltest.ZipEntry{Name: "skill/passwd", Data: []byte("/etc/passwd"), Mode: os.ModeSymlink | 0o777},
		skilltest.ZipEntry{Name: "skill/sneaky", Data: []byte("references/../../../x"), Mode: os.ModeSymlink | 0o777},
		skilltest.ZipEntry{Name: "skill/nul", Data: []byte("a\x00b"), Mode: os.ModeSymlink | 0o777},
		skilltest.ZipEntry{Name: "skill/back", Data: []byte(`..\..\x`), Mode: os.ModeSymlink | 0o777},
		skilltest.ZipEntry{Name: "skill/empty", Mode: os.ModeSymlink | 0o777},
		skilltest.ZipEntry{Name: "skill/long", Data: []byte(strings.Repeat("a/", 2049)), Mode: os.ModeSymlink | 0o777},
	), 0o644)
	dst := filepath.Join(t.TempDir(), "unpacked")
	warnings, err := ExtractZip(zp, dst, skills.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	wantWarn := []string{
		`skipped symlink entry "skill/long": its target is longer than 4096 bytes`,
		`skipped symlink entry "skill/up" -> "../../etc": it leads outside the archive`,
		`skipped symlink entry "skill/passwd" -> "/etc/passwd": its target is absolute`,
		`skipped symlink entry "skill/sneaky" -> "references/../../../x": it leads outside the archive`,
		`skipped symlink entry "skill/nul" -> "a\x00b": its target holds a NUL, a backslash or a control character`,
		`skipped symlink entry "skill/back" -> "..\\..\\x": its target holds a NUL, a backslash or a control character`,
		`skipped symlink entry "skill/empty" -> "": its target is empty`,
	}
	if !slices.Equal(warnings, wantWarn) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warnings, "\n"), strings.Join(wantWarn, "\n"))
	}
	for name, target := range map[string]string{"skill/references/doc.md": "../../shared/doc.md", "skill/tools": "../shared/tools", "skill/local.md": "SKILL.md"} {
		if got, err := os.Readlink(filepath.Join(dst, filepath.FromSlash(name))); err != nil || got != target {
			t.Errorf("%s: link to %q (%v), want %q", name, got, err, target)
		}
	}
	skilltest.AssertOnly(t, filepath.Join(dst, "skill"), "SKILL.md", "references", "tools", "local.md")

	staged := filepath.Join(t.TempDir(), "staged")
	res, err := StageDirOpts(filepath.Join(dst, "skill"), staged, skills.DefaultLimits(), StageOptions{Root: dst})
	if err != nil {
		t.Fatal(err)
	}
	got := skilltest.ReadDir(t, staged)
	checkPlain(t, got)
	if string(got["references/doc.md"].Data) != "shared doc\n" || string(got["tools/run.sh"].Data) != "#!/bin/sh\n" || got["tools/run.sh"].Mode != 0o755 || string(got["local.md"].Data) != skilltest.DemoManifest {
		t.Errorf("staged %v", got)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("staging warnings %q", res.Warnings)
	}
}

// TestExtractZipSymlinkClashes: a link may not be a parent of another
// entry, nor share its name: nothing could be written through it.
func TestExtractZipSymlinkClashes(t *testing.T) {
	cases := map[string][]skilltest.ZipEntry{
		"link, then an entry below it": {skilltest.ZipEntry{Name: "SKILL.md", Data: []byte(skilltest.DemoManifest)}, skilltest.ZipEntry{Name: "d", Data: []byte("x"), Mode: os.ModeSymlink | 0o777}, skilltest.ZipEntry{Name: "d/f", Data: []byte("f")}},
		"entry, then a link above it":  {skilltest.ZipEntry{Name: "SKILL.md", Data: []byte(skilltest.DemoManifest)}, skilltest.ZipEntry{Name: "d/f", Data: []byte("f")}, skilltest.ZipEntry{Name: "d", Data: []byte("x"), Mode: os.ModeSymlink | 0o777}},
		"file and link of one name":    {skilltest.ZipEntry{Name: "SKILL.md", Data: []byte(skilltest.DemoManifest)}, skilltest.ZipEntry{Name: "f", Data: []byte("f")}, skilltest.ZipEntry{Name: "f", Data: []byte("SKILL.md"), Mode: os.ModeSymlink | 0o777}},
		"link twice":                   {skilltest.ZipEntry{Name: "SKILL.md", Data: []byte(skilltest.DemoManifest)}, skilltest.ZipEntry{Name: "l", Data: []byte("SKILL.md"), Mode: os.ModeSymlink | 0o777}, skilltest.ZipEntry{Name: "./l", Data: []byte("SKILL.md"), Mode: os.ModeSymlink | 0o777}},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			zp := filepath.Join(t.TempDir(), "a.zip")
			skilltest.WriteFile(t, zp, skilltest.Zip(t, entries...), 0o644)
			dst := filepath.Join(t.TempDir(), "out")
			if _, err := ExtractZip(zp, dst, skills.DefaultLimits()); !errors.Is(err, skills.ErrUnsafePath) {
				t.Fatalf("error %v, want ErrUnsafePath", err)
			}
			skilltest.AssertAbsent(t, dst)
		})
	}
}

// TestStagerConfinedByDescriptor: the last guard, on what the kernel says
// an open descriptor is: a file or folder outside the root is refused
// even when its path looked confined when it was resolved.
func TestStagerConfinedByDescriptor(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc: the check is skipped there")
	}
	outside, root, _ := linkRepo(t)
	s := &stager{root: root}
	in, err := os.Open(filepath.Join(root, "shared", "doc.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := s.confined(in, "doc.md"); err != nil {
		t.Errorf("a file inside the root: %v", err)
	}
	out, err := os.Open(filepath.Join(outside, "secret.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := s.confined(out, "x.md"); !errors.Is(err, skills.ErrUnsafePath) || !strings.Contains(err.Error(), `"x.md"`) {
		t.Errorf("a file outside the root: %v, want ErrUnsafePath naming x.md", err)
	}
	if _, err := s.readDir(filepath.Join(outside, "dir"), "d"); !errors.Is(err, skills.ErrUnsafePath) {
		t.Errorf("listing a folder outside the root: %v, want ErrUnsafePath", err)
	}
	// A folder swapped for a link is not listed through it.
	skilltest.WriteDir(t, root, fstest.MapFS{"swapped": skilltest.Symlink(filepath.Join(outside, "dir"))})
	if _, err := s.readDir(filepath.Join(root, "swapped"), "swapped"); !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("listing through a link: %v, want ELOOP or ENOTDIR", err)
	}
}

// Skills staged with one Usage are held together to the limits: a folder
// they all link to counts once for each, and Used adds up what each stored.
func TestStageUsageOfOneSource(t *testing.T) {
	_, root, skill := linkRepo(t)
	skilltest.WriteDir(t, skill, fstest.MapFS{"shared": skilltest.Symlink("../../shared")})
	lim := skills.DefaultLimits()
	one, _ := stageLinks(t, skill, root, lim)
	lim.MaxFiles = 2*one.Files + 1 // room for two copies, not three
	var used Usage
	for i := 0; i < 3; i++ {
		res, err := StageDirOpts(skill, filepath.Join(t.TempDir(), "s"), lim, StageOptions{Root: root, Used: &used})
		switch {
		case i < 2 && err != nil:
			t.Fatalf("copy %d: %v", i+1, err)
		case i < 2 && (res.Files != one.Files || res.Bytes != one.Bytes):
			t.Errorf("copy %d: %d files, %d bytes; want this skill's own %d, %d", i+1, res.Files, res.Bytes, one.Files, one.Bytes)
		case i == 2 && !errors.Is(err, skills.ErrLimit):
			t.Fatalf("a third copy: %v, want the files limit", err)
		}
	}
	if used.Files != 2*one.Files || used.Bytes != 2*one.Bytes {
		t.Errorf("used %+v after two copies of %d files, %d bytes", used, one.Files, one.Bytes)
	}
}

// TestStageSymlinkIntoGitLeftOut: a link into the checkout's .git (the
// folder or a file in it) is left out, as .git itself is: its config and
// hooks are never stored.
func TestStageSymlinkIntoGitLeftOut(t *testing.T) {
	_, root, skill := linkRepo(t)
	skilltest.WriteDir(t, root, fstest.MapFS{".git/config": skilltest.File("[core]\n"), ".git/hooks/post-checkout": skilltest.Executable("#!/bin/sh\n")})
	skilltest.WriteDir(t, skill, fstest.MapFS{"git": skilltest.Symlink("../../.git"), "config": skilltest.Symlink("../../.git/config")})
	res, dst := stageLinks(t, skill, root, skills.DefaultLimits())
	for _, name := range []string{"git", "config"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was staged: %v", name, err)
		}
	}
	for _, w := range []string{skippedLink("git", "../../.git", "it leads into .git, which is never stored"),
		skippedLink("config", "../../.git/config", "it leads into .git, which is never stored")} {
		if !slices.Contains(res.Warnings, w) {
			t.Errorf("warnings %q lack %q", res.Warnings, w)
		}
	}
}
