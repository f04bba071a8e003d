package source

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/skills"
	"skillfs/skills/git"
	"skillfs/skills/skilltest"
)

func TestSubRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "checkout")
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(realBase, "checkout")
	linkedRoot := filepath.Join(base, "linked-checkout")
	skilltest.WriteDir(t, base, fstest.MapFS{
		"checkout/skills/x/SKILL.md": skilltest.File(skilltest.DemoManifest),
		"checkout/file.txt":          skilltest.File("x"),
		"outside/secret/SKILL.md":    skilltest.File(skilltest.DemoManifest),
		"checkout/alias":             skilltest.Symlink("skills"),
		"checkout/escape":            skilltest.Symlink("../outside/secret"),
		"checkout/absolute":          skilltest.Symlink(filepath.Join(base, "outside")),
		"checkout/roundabout":        skilltest.Symlink("../checkout/skills"),
		"checkout/broken":            skilltest.Symlink("missing"),
		"checkout/absolute-inside":   skilltest.Symlink(filepath.Join(realBase, "checkout", "skills")),
		"linked-checkout":            skilltest.Symlink("checkout"),
	})

	tests := []struct {
		name, root, rel string
		want            string // relative to the real checkout
		err             error
		inErr           string // part of the error message
	}{
		{name: "empty is the root", root: root, rel: "", want: "."},
		{name: "dot is the root", root: root, rel: ".", want: "."},
		{name: "folder", root: root, rel: "skills/x", want: "skills/x"},
		{name: "cleaned", root: root, rel: "./skills//x/", want: "skills/x"},
		{name: "link inside the checkout", root: root, rel: "alias/x", want: "skills/x"},
		{name: "absolute link inside the checkout", root: root, rel: "absolute-inside/x", want: "skills/x"},
		{name: "root given through a link", root: linkedRoot, rel: "skills", want: "skills"},
		{name: "missing", root: root, rel: "skills/nope", err: skills.ErrNotFound, inErr: `"skills/nope": no such folder in the repository`},
		{name: "below a file", root: root, rel: "file.txt/x", err: skills.ErrNotFound},
		{name: "broken link", root: root, rel: "broken", err: skills.ErrNotFound},
		{name: "file", root: root, rel: "file.txt", err: skills.ErrInvalid, inErr: "not a folder"},
		{name: "dot-dot", root: root, rel: "../outside", err: skills.ErrUnsafePath},
		{name: "inner dot-dot", root: root, rel: "skills/../../outside", err: skills.ErrUnsafePath},
		{name: "encoded dot-dot", root: root, rel: "%2e%2e/outside", err: skills.ErrUnsafePath},
		{name: "absolute", root: root, rel: "/etc", err: skills.ErrUnsafePath},
		{name: "backslash", root: root, rel: `skills\x`, err: skills.ErrUnsafePath},
		{name: "drive letter", root: root, rel: "C:/x", err: skills.ErrUnsafePath},
		{name: "link leading outside", root: root, rel: "escape", err: skills.ErrUnsafePath, inErr: "leads outside"},
		{name: "absolute link leading outside", root: root, rel: "absolute/secret", err: skills.ErrUnsafePath},
		// The kernel would find it inside again, but the way leaves the
		// checkout, and nothing outside is looked at.
		{name: "link passing outside", root: root, rel: "roundabout/x", err: skills.ErrUnsafePath},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SubRoot(tc.root, tc.rel)
			if !errors.Is(err, tc.err) || tc.err != nil && err == nil {
				t.Fatalf("SubRoot(%q) = %q, %v; want error %v", tc.rel, got, err, tc.err)
			}
			if tc.inErr != "" && !strings.Contains(err.Error(), tc.inErr) {
				t.Errorf("error %q does not say %q", err, tc.inErr)
			}
			if tc.err != nil {
				return
			}
			if want := filepath.Join(real, filepath.FromSlash(tc.want)); got != want {
				t.Errorf("SubRoot(%q) = %q, want %q", tc.rel, got, want)
			}
		})
	}
}

// TestSubRootOfParsedSource checks the two halves together: what
// git.ParseSource keeps of an unsafe path, SubRoot refuses.
func TestSubRootOfParsedSource(t *testing.T) {
	root := t.TempDir()
	skilltest.WriteDir(t, root, fstest.MapFS{"plugins/p/skills/s/SKILL.md": skilltest.File(skilltest.DemoManifest)})
	for _, p := range []string{"../x", "a/../../x", "/etc", `a\b`, "C:/x", "%2e%2e/x", "/"} {
		g := git.ParseSource("https://example.com/r.git#v1:" + p)
		if g.Path == "" {
			t.Errorf("%q: path dropped", p)
			continue
		}
		if _, err := SubRoot(root, g.Path); !errors.Is(err, skills.ErrUnsafePath) {
			t.Errorf("%q: SubRoot error %v, want ErrUnsafePath", p, err)
		}
	}
	g := git.ParseSource("https://example.com/r.git#:./plugins/p/")
	dir, err := SubRoot(root, g.Path)
	if err != nil {
		t.Fatal(err)
	}
	cands, _, err := Discover(dir, 0)
	if err != nil || len(cands) != 1 || cands[0].Rel != "skills/s" {
		t.Errorf("Discover in the sub-root = %+v, %v", cands, err)
	}
}

func TestResolveInRootNeverLooksOutside(t *testing.T) {
	// A link whose target lies outside is refused by its text alone: the
	// outside path here does not exist, and must not be needed to decide.
	root := t.TempDir()
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	skilltest.WriteDir(t, real, fstest.MapFS{"a": skilltest.Dir()})
	for i, target := range []string{"/nonexistent/x", "../nonexistent", "a/../../nonexistent", real + "-sibling/x", real + "/../x"} {
		link := "l" + string(rune('0'+i))
		skilltest.WriteDir(t, real, fstest.MapFS{link: skilltest.Symlink(target)})
		if _, _, err := resolveInRoot(real, link); !errors.Is(err, errOutside) {
			t.Errorf("link to %q: %v, want errOutside", target, err)
		}
	}
	skilltest.WriteDir(t, real, fstest.MapFS{"abs": skilltest.Symlink(real + "/a")})
	if got, fi, err := resolveInRoot(real, "abs"); err != nil || got != "a" || !fi.IsDir() {
		t.Errorf("absolute link inside: %q, %v", got, err)
	}
}

// ReadSkillManifest reads what staging stores: a SKILL.md that is a link
// leading outside the root (or a loop) is left out, and the skill.md beside
// it is the manifest; alone, it is no manifest, saying why.
func TestReadSkillManifestSkipsLinksAsStagingDoes(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "repo")
	skilltest.WriteDir(t, base, fstest.MapFS{
		"outside/SKILL.md":     skilltest.File("---\nname: outside\ndescription: x\n---\n"),
		"repo/out/skill.md":    skilltest.File(skilltest.DemoManifest),
		"repo/loop/skill.md":   skilltest.File(skilltest.DemoManifest),
		"repo/alone/README.md": skilltest.File("x"),
		"repo/out/SKILL.md":    skilltest.Symlink("../../outside/SKILL.md"),
		"repo/loop/SKILL.md":   skilltest.Symlink("SKILL.md"),
		"repo/alone/SKILL.md":  skilltest.Symlink("../../outside/SKILL.md"),
	})
	for _, dir := range []string{"out", "loop"} {
		data, err := ReadSkillManifest(root, filepath.Join(root, dir), 1<<20)
		if err != nil || string(data) != skilltest.DemoManifest {
			t.Errorf("%s: %q, %v; want the skill.md beside the link", dir, data, err)
		}
		// Staging agrees.
		st, err := StageDirOpts(filepath.Join(root, dir), filepath.Join(t.TempDir(), "s"), skills.DefaultLimits(), StageOptions{Root: root})
		if err != nil || st == nil {
			t.Errorf("%s: stage: %v", dir, err)
		}
	}
	if _, err := ReadSkillManifest(root, filepath.Join(root, "alone"), 1<<20); !errors.Is(err, skills.ErrNoManifest) || !strings.Contains(err.Error(), "outside") {
		t.Errorf("a lone SKILL.md leading outside: %v, want ErrNoManifest saying why", err)
	}
}
