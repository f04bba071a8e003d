package git

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"skillfs/skills"
	"skillfs/skills/gittest"
	"skillfs/skills/skilltest"
)

// A local working tree reports its commit and whether the folder holds
// exactly that commit's files; nothing the repository configures runs.
func TestWorktreeState(t *testing.T) {
	gittest.Require(t)
	ctx := context.Background()
	repo := t.TempDir()
	gittest.Git(t, repo, gittest.FixtureEnv, "init", "--quiet", "-b", "main")
	skilltest.WriteFile(t, filepath.Join(repo, "skills", "x", "SKILL.md"), []byte("---\nname: x\ndescription: d\n---\n"), 0o644)
	skilltest.WriteFile(t, filepath.Join(repo, "skills", "x", "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	skilltest.WriteFile(t, filepath.Join(repo, "skills", "y", "SKILL.md"), []byte("---\nname: y\ndescription: d\n---\n"), 0o644)
	if err := os.Symlink("run.sh", filepath.Join(repo, "skills", "x", "link")); err != nil {
		t.Fatal(err)
	}
	// A repository that asks git to run programs: a filter driver for
	// every file and an fsmonitor hook, each leaving a marker if run.
	marker := filepath.Join(t.TempDir(), "ran")
	skilltest.WriteFile(t, filepath.Join(repo, ".gitattributes"), []byte("* filter=evil\n"), 0o644)
	gittest.Git(t, repo, gittest.FixtureEnv, "add", "-A")
	gittest.Git(t, repo, gittest.FixtureEnv, "commit", "--quiet", "-m", "one")
	head := gittest.Git(t, repo, gittest.FixtureEnv, "rev-parse", "HEAD")
	gittest.Git(t, repo, gittest.FixtureEnv, "config", "filter.evil.clean", "touch "+marker+"; cat")
	gittest.Git(t, repo, gittest.FixtureEnv, "config", "filter.evil.smudge", "touch "+marker+"; cat")
	gittest.Git(t, repo, gittest.FixtureEnv, "config", "core.fsmonitor", "touch "+marker+"; true")

	check := func(dir, wantCommit, wantState string) {
		t.Helper()
		commit, state, err := WorktreeState(ctx, dir)
		if err != nil || commit != wantCommit || state != wantState {
			t.Fatalf("WorktreeState(%s) = %q, %q, %v; want %q, %q", dir, commit, state, err, wantCommit, wantState)
		}
	}
	x := filepath.Join(repo, "skills", "x")
	check(x, head, skills.WorktreeClean)
	check(repo, head, skills.WorktreeClean)
	skilltest.WriteFile(t, filepath.Join(x, "run.sh"), []byte("#!/bin/sh\necho changed\n"), 0o755)
	check(x, head, skills.WorktreeModified)
	check(filepath.Join(repo, "skills", "y"), head, skills.WorktreeClean) // other folders are not this one's business
	gittest.Git(t, repo, gittest.FixtureEnv, "checkout", "--quiet", "--", "skills/x/run.sh")
	os.Remove(marker) // checkout itself ran the smudge filter: that was the test's git, not ours
	check(x, head, skills.WorktreeClean)
	skilltest.WriteFile(t, filepath.Join(x, "notes.md"), []byte("untracked\n"), 0o644)
	check(x, head, skills.WorktreeModified)
	os.Remove(filepath.Join(x, "notes.md"))
	os.Chmod(filepath.Join(x, "run.sh"), 0o644)
	check(x, head, skills.WorktreeModified) // an execute bit counts
	os.Chmod(filepath.Join(x, "run.sh"), 0o755)
	os.Remove(filepath.Join(x, "link"))
	check(x, head, skills.WorktreeModified) // a removed file counts
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a program the repository configures ran")
	}
	check(t.TempDir(), "", "") // no working tree
	empty := t.TempDir()
	gittest.Git(t, empty, gittest.FixtureEnv, "init", "--quiet")
	check(empty, "", "") // no commit yet
}
