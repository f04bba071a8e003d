package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"skillfs/index"
	"skillfs/skills"
	"skillfs/skills/diff"
	"skillfs/skills/skilltest"
	"skillfs/skills/store"
)

// putUsers adds ordinary users.
func putUsers(t testing.TB, c *Catalog, uids ...string) {
	t.Helper()
	for _, uid := range uids {
		if err := c.PutUser(context.Background(), "", skills.User{UID: uid, Role: "user"}, true); err != nil {
			t.Fatal(err)
		}
	}
}

// writeNotes rewrites notes.txt of a skill folder.
func writeNotes(t testing.TB, dir, body string) {
	t.Helper()
	skilltest.WriteFile(t, filepath.Join(dir, "notes.txt"), []byte(body), 0o644)
}

// TestUpdateRefusesAReaderUpFront: a user who reads a skill but may not
// change it is refused the update of it by name (skills.ErrPermission, for
// the whole request), not answered with a failed entry; --all leaves it out.
func TestUpdateRefusesAReaderUpFront(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	putUsers(t, c, "alice", "bob")
	src := skillDir(t, filepath.Join(t.TempDir(), "notes"), "name: notes\ndescription: x")
	if _, err := c.Import(ctx, ImportRequest{Source: src, As: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Share(ctx, "", "notes", skills.Share{Read: skills.Scope{Kind: skills.ScopeGlobal}}); err != nil {
		t.Fatal(err)
	}
	writeNotes(t, src, "new\n")
	for _, dry := range []bool{true, false} {
		res, err := c.Update(ctx, UpdateRequest{As: "bob", Slugs: []string{"notes"}, DryRun: dry})
		if !errors.Is(err, skills.ErrPermission) || len(res.Skills) != 0 {
			t.Fatalf("a reader updates by name (dry run %v): %v, %+v", dry, err, res.Skills)
		}
	}
	res, err := c.Update(ctx, UpdateRequest{As: "bob", All: true})
	if err != nil || len(res.Skills) != 0 {
		t.Fatalf("a reader's --all: %v, %+v", err, res.Skills)
	}
	if _, err := c.Update(ctx, UpdateRequest{As: "bob", Slugs: []string{"nosuch"}}); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("an unknown skill: %v", err)
	}
	res, err = c.Update(ctx, UpdateRequest{As: "alice", Slugs: []string{"notes"}})
	if err != nil || len(res.Skills) != 1 || res.Skills[0].Status != UpdateUpdated {
		t.Fatalf("the creator updates: %v, %+v", err, res.Skills)
	}
}

// updateOnly updates one skill as the operator and returns what it did.
func updateOnly(t testing.TB, c *Catalog, slug string, dry, force bool) Updated {
	t.Helper()
	res, err := c.Update(context.Background(), UpdateRequest{Slugs: []string{slug}, DryRun: dry, Force: force})
	if err != nil || len(res.Skills) != 1 {
		t.Fatalf("update %s: %v, %+v", slug, err, res)
	}
	return res.Skills[0]
}

func currentOf(t testing.TB, c *Catalog, slug string) (string, int) {
	t.Helper()
	d, err := c.Show(context.Background(), "", slug)
	if err != nil {
		t.Fatal(err)
	}
	return d.Version, len(d.Versions)
}

// TestUpdateHoldsARollbackAndAnEdit: a source that still holds what it
// delivered before does not undo a rollback or an online edit: the skill
// is held, nothing installed, until --force; a source with new content
// updates as before.
func TestUpdateHoldsARollbackAndAnEdit(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	src := skillDir(t, filepath.Join(t.TempDir(), "notes"), "name: notes\ndescription: x")
	writeNotes(t, src, "one\n")
	res, err := c.Import(ctx, ImportRequest{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	v1 := res.Installed[0].Version
	writeNotes(t, src, "two, bad\n")
	u := updateOnly(t, c, "notes", false, false)
	v2 := u.To
	if u.Status != UpdateUpdated || v2 == v1 {
		t.Fatalf("first update: %+v", u)
	}
	if _, err := c.Rollback(ctx, "", "notes", v1); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []bool{true, false} {
		u = updateOnly(t, c, "notes", dry, false)
		if u.Status != UpdateHeld || u.From != v1 || u.To != v2 || !strings.Contains(u.Note, "--force") || u.DiffStat == nil || u.DiffStat.FilesChanged != 1 {
			t.Fatalf("update after a rollback (dry run %v): %+v", dry, u)
		}
		if cur, n := currentOf(t, c, "notes"); cur != v1 || n != 2 {
			t.Fatalf("a held update installed something: current %s of %d versions", store.ShortHash(cur), n)
		}
	}
	if u = updateOnly(t, c, "notes", true, true); u.Status != UpdateAvailable {
		t.Fatalf("dry run with --force: %+v", u)
	}
	if u = updateOnly(t, c, "notes", false, true); u.Status != UpdateUpdated || u.From != v1 || u.To != v2 {
		t.Fatalf("--force: %+v", u)
	}
	if cur, n := currentOf(t, c, "notes"); cur != v2 || n != 2 {
		t.Fatalf("after --force: current %s of %d versions", store.ShortHash(cur), n)
	}

	// An online edit is held the same way.
	ed, err := c.Edit(ctx, "", "notes", "notes.txt", bytes.NewReader([]byte("two, fixed here\n")))
	if err != nil {
		t.Fatal(err)
	}
	if u = updateOnly(t, c, "notes", false, false); u.Status != UpdateHeld || u.From != ed.Version || u.To != v2 {
		t.Fatalf("update after an edit: %+v", u)
	}
	// New content at the source is installed over the edit.
	writeNotes(t, src, "three\n")
	if u = updateOnly(t, c, "notes", false, false); u.Status != UpdateUpdated || u.From != ed.Version {
		t.Fatalf("update to new content: %+v", u)
	}
	if cur, n := currentOf(t, c, "notes"); cur != u.To || n != 4 {
		t.Fatalf("after the new content: current %s of %d versions", store.ShortHash(cur), n)
	}
}

// wholly writes n files of 3,000 lines in dir, each line unlike those of
// another tag.
func wholly(t testing.TB, dir, tag string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		var b strings.Builder
		for j := 0; j < 3000; j++ {
			fmt.Fprintf(&b, "%s line %d\n", tag, j)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestVersionsDiffStatsAreBoundedAndKept: listing versions whose files
// all differ wholly stays within one comparison budget per listing (and a
// bounded memory); a diffstat the budget cut short says which files were
// not compared and is computed in full by the next listing; complete ones
// are kept in the index and not computed again.
func TestVersionsDiffStatsAreBoundedAndKept(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	c.diffLimit = [2]int64{0, 10 << 20} // a pair of 3,000-line files takes about 4 million steps: two pairs fit, four do not
	src := skillDir(t, filepath.Join(t.TempDir(), "notes"), "name: notes\ndescription: x")
	for _, tag := range []string{"one", "two", "three"} {
		wholly(t, src, tag, 2)
		if _, err := c.Import(ctx, ImportRequest{Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	var vs []VersionInfo
	var err error
	n := allocated(func() { vs, err = c.Versions(ctx, "", "notes") })
	if err != nil || len(vs) != 3 {
		t.Fatalf("versions: %v %+v", err, vs)
	}
	if n > 16<<20 {
		t.Errorf("listing allocated %d bytes", n)
	}
	// The newest pair took most of the budget; the one after it is cut
	// short: its files ("one"/"two" lines of the same size) not compared.
	full := diff.Stat{FilesChanged: 2, Insertions: 6000, Deletions: 6000}
	if vs[0].DiffStat == nil || *vs[0].DiffStat != full || vs[1].DiffStat == nil ||
		*vs[1].DiffStat != (diff.Stat{LinesUnknown: 2, NotCompared: 2}) || vs[2].DiffStat != nil {
		t.Fatalf("first listing: %+v / %+v / %+v", vs[0].DiffStat, vs[1].DiffStat, vs[2])
	}
	// The complete one is kept, the cut-short one is not.
	kept, err := c.db.DiffStats(ctx, "notes")
	if err != nil || len(kept) != 1 || kept[index.DiffStatKey{Hash: vs[0].Hash, Against: vs[1].Hash}] != full {
		t.Fatalf("kept after the first listing: %+v, %v", kept, err)
	}
	again, err := c.Versions(ctx, "", "notes")
	if err != nil || *again[0].DiffStat != full || *again[1].DiffStat != full {
		t.Fatalf("second listing: %v %+v", err, again)
	}
	if kept, _ = c.db.DiffStats(ctx, "notes"); len(kept) != 2 {
		t.Fatalf("kept after the second listing: %+v", kept)
	}

	// With the default budget, every pair is complete; a kept stat is
	// read, not computed: it stays when the content goes.
	c.diffLimit = [2]int64{}
	src2 := skillDir(t, filepath.Join(t.TempDir(), "other"), "name: other\ndescription: y")
	for _, tag := range []string{"one", "two"} {
		wholly(t, src2, tag, 2)
		if _, err := c.Import(ctx, ImportRequest{Source: src2}); err != nil {
			t.Fatal(err)
		}
	}
	vs, err = c.Versions(ctx, "", "other")
	if err != nil || vs[0].DiffStat == nil || *vs[0].DiffStat != (diff.Stat{FilesChanged: 2, Insertions: 6000, Deletions: 6000}) {
		t.Fatalf("default budget: %v %+v", err, vs)
	}
	skills.RemoveTree(c.store.VersionPath("other", vs[1].Hash))
	if again, err := c.Versions(ctx, "", "other"); err != nil || again[0].DiffStat == nil || *again[0].DiffStat != *vs[0].DiffStat || again[0].DiffStatError != "" {
		t.Fatalf("kept stat after the content went: %v %+v", err, again)
	}
}

// TestVersionsKeepOnlyCompleteStats: a file that does not fit the
// listing's budget leaves the others compared, and a diffstat with a file
// not compared is not kept: with a larger budget the next listing has it
// all, and `skill diff` shows the change.
func TestVersionsKeepOnlyCompleteStats(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	c.diffLimit = [2]int64{8 << 10, 0} // big.bin takes 16 KiB to compare
	src := skillDir(t, filepath.Join(t.TempDir(), "notes"), "name: notes\ndescription: x")
	if err := os.WriteFile(filepath.Join(src, "big.bin"), make([]byte, 8<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"one\n", "two\n"} {
		writeNotes(t, src, body)
		if _, err := c.Import(ctx, ImportRequest{Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	vs, err := c.Versions(ctx, "", "notes")
	if err != nil || len(vs) != 2 || vs[0].DiffStat == nil ||
		*vs[0].DiffStat != (diff.Stat{FilesChanged: 1, Insertions: 1, Deletions: 1, LinesUnknown: 1, NotCompared: 1}) {
		t.Fatalf("listing on a small budget: %v %+v", err, vs)
	}
	if kept, _ := c.db.DiffStats(ctx, "notes"); len(kept) != 0 {
		t.Fatalf("kept %+v: a stat with a file not compared", kept)
	}
	d, err := c.Diff(ctx, "", "notes", "", "")
	if err != nil || len(d.Files) != 2 || d.Files[1].Path != "notes.txt" || d.Files[1].Diff == "" {
		t.Fatalf("diff on a small budget: %v %+v", err, d)
	}
	c.diffLimit = [2]int64{}
	full := diff.Stat{FilesChanged: 1, Insertions: 1, Deletions: 1}
	if vs, err = c.Versions(ctx, "", "notes"); err != nil || *vs[0].DiffStat != full {
		t.Fatalf("listing on the default budget: %v %+v", err, vs[0].DiffStat)
	}
	if kept, _ := c.db.DiffStats(ctx, "notes"); len(kept) != 1 {
		t.Fatalf("kept after the complete listing: %+v", kept)
	}
}

// TestVersionsWithMissingContent: a version whose content is missing from
// the store does not fail the listing: the stats that need it say so.
func TestVersionsWithMissingContent(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	src := skillDir(t, filepath.Join(t.TempDir(), "notes"), "name: notes\ndescription: x")
	var hashes []string
	for _, body := range []string{"one\n", "two\n", "three\n"} {
		writeNotes(t, src, body)
		res, err := c.Import(ctx, ImportRequest{Source: src})
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, res.Installed[0].Version)
	}
	skills.RemoveTree(c.store.VersionPath("notes", hashes[0]))
	vs, err := c.Versions(ctx, "", "notes")
	if err != nil || len(vs) != 3 {
		t.Fatalf("versions with one missing: %v %+v", err, vs)
	}
	if vs[0].DiffStat == nil || vs[0].DiffStat.FilesChanged != 1 || vs[0].DiffStatError != "" {
		t.Errorf("the newest pair: %+v", vs[0])
	}
	if vs[1].DiffStat != nil || !strings.Contains(vs[1].DiffStatError, "version "+store.ShortHash(hashes[0])+" is missing from the store") ||
		strings.Contains(vs[1].DiffStatError, c.home) {
		t.Errorf("the pair with the missing version: %+v", vs[1])
	}
	if kept, _ := c.db.DiffStats(ctx, "notes"); len(kept) != 1 {
		t.Errorf("kept %+v: an error is not kept", kept)
	}
}

// TestUpdateComparesWithinOneBudget: the skills of one update share one
// comparison budget, with or without --dry-run: once it is spent the next
// skill's files are reported not compared.
func TestUpdateComparesWithinOneBudget(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	c.diffLimit = [2]int64{0, 10 << 20} // about two pairs of wholly different 3,000-line files
	var srcs []string
	for _, name := range []string{"alpha", "beta"} {
		src := skillDir(t, filepath.Join(t.TempDir(), name), "name: "+name+"\ndescription: x")
		wholly(t, src, "one", 2)
		if _, err := c.Import(ctx, ImportRequest{Source: src}); err != nil {
			t.Fatal(err)
		}
		wholly(t, src, "two", 2)
		srcs = append(srcs, src)
	}
	for _, dry := range []bool{true, false} {
		res, err := c.Update(ctx, UpdateRequest{Slugs: []string{"alpha", "beta"}, DryRun: dry})
		if err != nil || len(res.Skills) != 2 {
			t.Fatalf("update: %v %+v", err, res)
		}
		a, b := res.Skills[0].DiffStat, res.Skills[1].DiffStat
		if a == nil || b == nil || a.NotCompared != 0 || a.FilesChanged != 2 || b.NotCompared != 2 {
			t.Fatalf("dry run %v: alpha %+v, beta %+v", dry, a, b)
		}
	}
}

// An update re-reads the recorded source as the daemon reads one: a folder
// in the working directory named like the recorded URL is never taken for
// it, and neither is a repository enclosing the working directory (its
// git configuration does not apply).
func TestUpdateIgnoresTheWorkingDirectory(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	repo := skillDir(t, filepath.Join(root, "repo"), "name: notes\ndescription: from the repository")
	gitIn := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=a", "-c", "user.email=a@a"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	gitIn(repo, "init", "-q")
	gitIn(repo, "add", ".")
	gitIn(repo, "commit", "-q", "-m", "x")
	const url = "https://example.invalid/acme/notes.git"
	cfg := filepath.Join(root, "gitconfig")
	if err := os.WriteFile(cfg, []byte("[url \""+repo+"\"]\n\tinsteadOf = "+url+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", cfg)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	c := open(t)
	if _, err := c.Import(ctx, ImportRequest{Source: url}); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(root, "cwd")
	skillDir(t, filepath.Join(cwd, "https:", "example.invalid", "acme", "notes.git"), "name: notes\ndescription: planted in the working directory")
	gitIn(cwd, "init", "-q") // a repository around the working directory, with a rewrite of its own
	gitIn(cwd, "config", "url."+filepath.Join(cwd, "https:", "example.invalid", "acme", "notes.git")+".insteadOf", url)
	t.Chdir(cwd)
	if u := updateOnly(t, c, "notes", false, false); u.Status != UpdateUnchanged {
		t.Fatalf("update from %s with a look-alike in the working directory: %+v", cwd, u)
	}
	if d, err := c.Show(ctx, "", "notes"); err != nil || d.Description != "from the repository" {
		t.Fatalf("after the update: %+v, %v", d, err)
	}
}
