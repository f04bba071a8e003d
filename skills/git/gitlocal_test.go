package git

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/skills"
	"skillfs/skills/gittest"
	"skillfs/skills/skilltest"
)

// readLocalRepo reads src from its objects, checking that it was (git
// archive ran, no clone), and returns the tree and the commit.
func readLocalRepo(t *testing.T, src Source) (dir, commit string) {
	t.Helper()
	commands := gittest.LogCommands(t)
	dir = filepath.Join(t.TempDir(), "tree")
	commit, err := Clone(context.Background(), src, dir, CloneOptions{})
	if err != nil {
		t.Fatalf("CloneGit(%v): %v", src, err)
	}
	if !gittest.RanSubcommand(commands(), "archive") || gittest.RanSubcommand(commands(), "clone") || gittest.RanSubcommand(commands(), "fetch") {
		t.Fatalf("%v was not read from its objects:\n%s", src, strings.Join(commands(), "\n"))
	}
	return dir, commit
}

func wantFile(t *testing.T, p, want string) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil || string(got) != want {
		t.Errorf("%s = %q, %v; want %q", filepath.Base(p), got, err, want)
	}
}

// A repository whose own configuration runs commands (a filter driver for
// every file, an fsmonitor, hooks, an LFS smudge) is read without any of
// them: git never runs in it. Its archive attributes are not honoured
// either, so the files are those a checkout writes, and LFS pointers stay
// pointers.
func TestReadLocalGitIgnoresRepositoryConfig(t *testing.T) {
	gittest.Require(t)
	repo := filepath.Join(t.TempDir(), "repo")
	marker := filepath.Join(t.TempDir(), "ran")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, repo, gittest.FixtureEnv, "init", "--quiet", "--initial-branch=main")
	skilltest.WriteFile(t, filepath.Join(repo, "SKILL.md"), []byte(skilltest.DemoManifest), 0o644)
	skilltest.WriteFile(t, filepath.Join(repo, "ignored.txt"), []byte("kept\n"), 0o644)
	skilltest.WriteFile(t, filepath.Join(repo, "subst.txt"), []byte("$Format:%H$\n"), 0o644)
	pointer := "version https://git-lfs.github.com/spec/v1\noid sha256:" + strings.Repeat("ab", 32) + "\nsize 12345\n"
	skilltest.WriteFile(t, filepath.Join(repo, "assets", "model.bin"), []byte(pointer), 0o644)
	skilltest.WriteFile(t, filepath.Join(repo, ".gitattributes"), []byte("*.txt filter=evil\n*.md filter=evil\n"+
		"*.bin filter=lfs diff=lfs merge=lfs -text\nignored.txt export-ignore\nsubst.txt export-subst\n"), 0o644)
	gittest.Git(t, repo, gittest.FixtureEnv, "add", "-A")
	gittest.Git(t, repo, gittest.FixtureEnv, "commit", "--quiet", "-m", "one")
	run := "touch '" + marker + "'; cat"
	for _, kv := range [][2]string{
		{"filter.evil.smudge", run}, {"filter.evil.clean", "cat"}, {"filter.evil.required", "true"},
		{"filter.lfs.smudge", run}, {"filter.lfs.process", run}, {"core.fsmonitor", run},
		{"core.hooksPath", filepath.Join(repo, "hooks")}, {"core.attributesFile", filepath.Join(repo, "attrs")},
	} {
		gittest.Git(t, repo, gittest.FixtureEnv, "config", kv[0], kv[1])
	}
	skilltest.WriteFile(t, filepath.Join(repo, "attrs"), []byte("* filter=evil\n"), 0o644)

	// Control: git archive run in the repository runs its filter.
	if out, err := exec.Command("git", "-C", repo, "archive", "--format=tar", "-o", filepath.Join(t.TempDir(), "a.tar"), "HEAD").CombinedOutput(); err != nil {
		t.Fatalf("control archive: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the repository's filter did not run in the control, so this test proves nothing: %v", err)
	}
	os.Remove(marker)

	for _, ref := range []string{"", "main"} {
		dir, _ := readLocalRepo(t, Source{URL: repo, Ref: ref})
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("ref %q: a command of the repository's configuration ran (marker: %v)", ref, err)
		}
		wantFile(t, filepath.Join(dir, "SKILL.md"), skilltest.DemoManifest)
		wantFile(t, filepath.Join(dir, "ignored.txt"), "kept\n")
		wantFile(t, filepath.Join(dir, "subst.txt"), "$Format:%H$\n")
		wantFile(t, filepath.Join(dir, "assets", "model.bin"), pointer)
	}
}

// A crafted tree naming an entry twice, a link out of the repository and
// then a folder of the same name, is refused before anything is written
// through the link.
func TestReadLocalGitRefusesEntryNamedTwice(t *testing.T) {
	r := newCraftRepo(t)
	outside := t.TempDir()
	link := r.blob(strings.NewReader(outside))
	inner := r.tree(file(r.blob(strings.NewReader("pwned\n")), "x"))
	var in strings.Builder
	in.WriteString("100644 blob " + r.manifest() + "\tSKILL.md\x00")
	in.WriteString("120000 blob " + link + "\ta\x00")
	in.WriteString("040000 tree " + inner + "\ta\x00")
	r.commit("main", testGitInput(t, r.dir, strings.NewReader(in.String()), "mktree", "-z"))

	dir := filepath.Join(t.TempDir(), "tree")
	_, err := Clone(context.Background(), Source{URL: r.dir}, dir, CloneOptions{})
	wantRefused(t, err, skills.ErrUnsafePath, dir)
	if !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("error %q does not name the path", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written outside the repository: %v", ents)
	}
}

// A linked worktree's path reads the repository it belongs to, and a
// repository in the SHA-256 object format reads as well.
func TestReadLocalGitLayouts(t *testing.T) {
	r := makeFixtureRepo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	gittest.Git(t, r.dir, gittest.FixtureEnv, "worktree", "add", "--quiet", wt, "feature")
	dir, commit := readLocalRepo(t, Source{URL: wt, Ref: "v1"})
	if commit != r.c1 {
		t.Errorf("commit %s, want %s", commit, r.c1)
	}
	wantFile(t, filepath.Join(dir, "SKILL.md"), "---\nname: demo\ndescription: first\n---\n# v1\n")

	sha := filepath.Join(t.TempDir(), "sha256")
	cmd := exec.Command("git", "init", "--quiet", "--object-format=sha256", "--initial-branch=main", sha)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("this git cannot make a SHA-256 repository: %v\n%s", err, out)
	}
	skilltest.WriteFile(t, filepath.Join(sha, "SKILL.md"), []byte(skilltest.DemoManifest), 0o644)
	gittest.Git(t, sha, gittest.FixtureEnv, "add", "-A")
	gittest.Git(t, sha, gittest.FixtureEnv, "commit", "--quiet", "-m", "one")
	head := gittest.Git(t, sha, gittest.FixtureEnv, "rev-parse", "HEAD")
	for _, ref := range []string{"", "main", head, head[:12]} {
		dir, commit := readLocalRepo(t, Source{URL: sha, Ref: ref})
		if commit != head {
			t.Errorf("ref %q: commit %s, want %s", ref, commit, head)
		}
		wantFile(t, filepath.Join(dir, "SKILL.md"), skilltest.DemoManifest)
	}
}

func TestLocalRepoPath(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"/srv/repo", "/srv/repo", true},
		{"./repo", "./repo", true},
		{"file:///srv/repo", "/srv/repo", true},
		{"FILE:///srv/repo", "/srv/repo", true},
		{"file://localhost/srv/repo", "/srv/repo", true},
		{"file:///srv/a%20b", "/srv/a b", true},
		{"file://host/srv/repo", "", false},
		{"https://example.org/repo.git", "", false},
		{"git@example.org:repo.git", "", false},
		{"host:repo", "", false},
	} {
		got, ok := localRepoPath(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("localRepoPath(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
