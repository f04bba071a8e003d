package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/skills"
	"skillfs/skills/git"
)

// A symlink of the repository stays a symlink, whatever it points at; the
// staging step then keeps it inside the repository or leaves it out.
func TestReadLocalGitSymlinks(t *testing.T) {
	requireGit(t)
	repo := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	testGit(t, repo, "init", "--quiet", "--initial-branch=main")
	writeTestFile(t, filepath.Join(repo, "SKILL.md"), []byte(testManifest), 0o644)
	writeTestFile(t, filepath.Join(repo, "docs", "guide.md"), []byte("guide\n"), 0o644)
	for link, target := range map[string]string{"passwd": "/etc/passwd", "up": "../../outside", "guide": "docs/guide.md"} {
		if err := os.Symlink(target, filepath.Join(repo, link)); err != nil {
			t.Fatal(err)
		}
	}
	testGit(t, repo, "add", "-A")
	testGit(t, repo, "commit", "--quiet", "-m", "links")

	dir, _ := readLocalRepo(t, git.Source{URL: "file://" + repo})
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
	wantFile(t, filepath.Join(staged, "guide"), "guide\n")
	for _, left := range []string{"passwd", "up"} {
		assertAbsent(t, filepath.Join(staged, left))
		if !strings.Contains(strings.Join(res.Warnings, "\n"), `"`+left+`"`) {
			t.Errorf("no warning names the link %s left out: %q", left, res.Warnings)
		}
	}
}
