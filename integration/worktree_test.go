package integration

import (
	"os"
	"path/filepath"
	"testing"

	"skillfs/skills/skilltest"
)

// A local folder is read as it is on disk, working-tree edits included,
// with the commit it holds and whether it matches recorded; only a ref (or
// a file:// URL) reads a commit.
func TestImportLocalWorkingTree(t *testing.T) {
	repo := newGitRepo(t, filepath.Join(t.TempDir(), "repo"))
	skill := filepath.Join(repo.dir, "skills", "notes")
	writeSkill(t, skill, "name: notes\ndescription: committed", map[string]string{"tips.md": "committed\n"})
	head := repo.commit("one")
	committed := hashDir(t, skill)
	e := newCatalogEnv(t)

	// Clean: the commit is recorded, and the tree matches it.
	e.mustImport(repo.dir, "--all")
	s := checkStored(t, e, "notes")
	if v := s.Versions[0]; v.Commit != head || v.Worktree != "clean" || v.SourceType != "upload" || s.Version != committed {
		t.Fatalf("clean working tree: %+v (version %s, want %s)", v, s.Version, committed)
	}

	// Edited, not committed: the edit is what gets imported.
	skilltest.WriteFile(t, filepath.Join(skill, "tips.md"), []byte("edited, not committed\n"), 0o644)
	e.mustImport(repo.dir, "--all")
	s = checkStored(t, e, "notes")
	if v := s.Versions[0]; v.Commit != head || v.Worktree != "modified" {
		t.Fatalf("edited working tree: %+v", v)
	}
	if b, err := os.ReadFile(filepath.Join(s.Path, "tips.md")); err != nil || string(b) != "edited, not committed\n" {
		t.Fatalf("stored %q, %v; want the edit", b, err)
	}
	if s.Version != hashDir(t, skill) || len(s.Versions) != 2 {
		t.Fatalf("edit imported as %s with %d versions", s.Version, len(s.Versions))
	}

	// --ref reads the commit; so does a file:// URL, also narrowed to a
	// folder of the repository.
	for _, args := range [][]string{{repo.dir, "--ref", "main"}, {"file://" + repo.dir},
		{"file://" + repo.dir + "#main:skills"}, {"file://" + repo.dir + "#:skills/notes"}, {"file://" + repo.dir, "--path", "skills"}} {
		e := newCatalogEnv(t)
		e.mustImport(append(args, "--all")...)
		s := checkStored(t, e, "notes")
		if v := s.Versions[0]; s.Version != committed || v.Commit != head || v.Worktree != "" || v.SourceType != "remote" {
			t.Fatalf("import %v: version %s %+v, want the committed tree", args, s.Version, v)
		}
	}
}
