package catalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"skillfs/skills"
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
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
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
