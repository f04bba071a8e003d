package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/skills"
	"skillfs/skills/git"
	"skillfs/skills/gittest"
	"skillfs/skills/skilltest"
)

// A symlink of the repository stays a symlink, whatever it points at; the
// staging step then keeps it inside the repository or leaves it out.
func TestReadLocalGitSymlinks(t *testing.T) {
	gittest.Require(t)
	repo := filepath.Join(t.TempDir(), "repo")
	skilltest.WriteDir(t, repo, fstest.MapFS{
		"SKILL.md":      skilltest.File(skilltest.DemoManifest),
		"docs/guide.md": skilltest.File("guide\n"),
		"passwd":        skilltest.Symlink("/etc/passwd"),
		"up":            skilltest.Symlink("../../outside"),
		"guide":         skilltest.Symlink("docs/guide.md"),
	})
	gittest.Git(t, repo, gittest.FixtureEnv, "init", "--quiet", "--initial-branch=main")
	gittest.Git(t, repo, gittest.FixtureEnv, "add", "-A")
	gittest.Git(t, repo, gittest.FixtureEnv, "commit", "--quiet", "-m", "links")

	// Read from its objects (git archive), not cloned.
	commands := gittest.LogCommands(t)
	dir := filepath.Join(t.TempDir(), "tree")
	if _, err := git.Clone(context.Background(), git.Source{URL: "file://" + repo}, dir, git.CloneOptions{}); err != nil {
		t.Fatalf("Clone: %v", err)
	}
	if lines := commands(); !gittest.RanSubcommand(lines, "archive") || gittest.RanSubcommand(lines, "clone") || gittest.RanSubcommand(lines, "fetch") {
		t.Fatalf("%s was not read from its objects:\n%s", repo, strings.Join(lines, "\n"))
	}
	for link, target := range map[string]string{"passwd": "/etc/passwd", "up": "../../outside", "guide": "docs/guide.md"} {
		if got, err := os.Readlink(filepath.Join(dir, link)); err != nil || got != target {
			t.Errorf("%s -> %q (%v), want a link to %q", link, got, err, target)
		}
	}
	staged := filepath.Join(t.TempDir(), "staged")
	res, err := StageDirOpts(dir, staged, skills.DefaultLimits(), StageOptions{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(staged, "guide")); err != nil || string(got) != "guide\n" {
		t.Errorf("guide = %q, %v; want the file it links to", got, err)
	}
	for _, left := range []string{"passwd", "up"} {
		skilltest.AssertAbsent(t, filepath.Join(staged, left))
		if !strings.Contains(strings.Join(res.Warnings, "\n"), `"`+left+`"`) {
			t.Errorf("no warning names the link %s left out: %q", left, res.Warnings)
		}
	}
}
