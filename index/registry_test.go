package index

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"skillfs/skills"
)

func TestUsers(t *testing.T) { forEachBackend(t, testUsers) }

func testUsers(t *testing.T, b backend) {
	db := openBare(t, b.target(t))
	ctx := context.Background()
	us, err := db.Users(ctx)
	if err != nil || us == nil || len(us) != 0 {
		t.Fatalf("Users on empty index = %#v, %v", us, err)
	}
	registered := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	db.now = func() time.Time { return registered }
	bob := skills.User{UID: "bob", Role: skills.RoleUser, Department: "eng"}
	root := skills.User{UID: "root", Role: skills.RoleSuperadmin}
	for _, u := range []skills.User{bob, root} {
		if err := db.PutUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	bob.CreatedAt, root.CreatedAt = registered, registered
	// Put again updates in place, and keeps when the user was registered.
	db.now = func() time.Time { return registered.Add(time.Hour) }
	bob.Role, bob.Department = skills.RoleAdmin, "ops"
	if err := db.PutUser(ctx, bob); err != nil {
		t.Fatal(err)
	}
	got, err := db.User(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "bob", got, bob)
	us, err = db.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "users", us, []skills.User{bob, root})

	if err := deleteUser(ctx, db, "bob"); err != nil {
		t.Fatal(err)
	}
	_, err = db.User(ctx, "bob")
	wantErr(t, "User after delete", err, skills.ErrNotFound)
	wantErr(t, "DeleteUser twice", deleteUser(ctx, db, "bob"), skills.ErrNotFound)

	for _, tc := range []struct {
		name string
		u    skills.User
	}{
		{"empty uid", skills.User{Role: skills.RoleUser}},
		{"unknown role", skills.User{UID: "eve", Role: "owner"}},
		{"empty role", skills.User{UID: "eve"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, "PutUser", db.PutUser(ctx, tc.u), skills.ErrInvalid)
		})
	}
	if _, err := db.User(ctx, "eve"); err == nil {
		t.Fatal("invalid user was stored")
	}
}

// registry is the add/delete/list triple of tools and of MCP servers.
type registry struct {
	add, del func(context.Context, string) error
	list     func(context.Context) ([]string, error)
}

func TestToolsAndMCPs(t *testing.T) { forEachBackend(t, testToolsAndMCPs) }

func testToolsAndMCPs(t *testing.T, b backend) {
	db := b.open(t)
	for name, r := range map[string]registry{
		"tools":       {db.AddTool, db.DeleteTool, db.Tools},
		"MCP servers": {db.AddMCP, db.DeleteMCP, db.MCPs},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			got, err := r.list(ctx)
			if err != nil || got == nil || len(got) != 0 {
				t.Fatalf("empty list = %#v, %v", got, err)
			}
			for _, n := range []string{"rg", "git", "jq"} {
				if err := r.add(ctx, n); err != nil {
					t.Fatal(err)
				}
			}
			wantErr(t, "add twice", r.add(ctx, "git"), skills.ErrExists)
			wantErr(t, "add empty", r.add(ctx, ""), skills.ErrInvalid)
			got, err = r.list(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "sorted", got, []string{"git", "jq", "rg"})
			if err := r.del(ctx, "jq"); err != nil {
				t.Fatal(err)
			}
			wantErr(t, "delete missing", r.del(ctx, "jq"), skills.ErrNotFound)
			got, err = r.list(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "after delete", got, []string{"git", "rg"})
		})
	}
	// The two registries are separate tables.
	tools, _ := db.Tools(context.Background())
	mcps, _ := db.MCPs(context.Background())
	mustEqual(t, "tools", tools, []string{"git", "rg"})
	mustEqual(t, "mcps", mcps, []string{"git", "rg"})
	if err := db.DeleteTool(context.Background(), "git"); err != nil {
		t.Fatal(err)
	}
	mcps, _ = db.MCPs(context.Background())
	mustEqual(t, "mcps after deleting the tool git", mcps, []string{"git", "rg"})
}

// deleteUser deletes uid from db, handing nothing: what the tests of the
// users' rows and sessions need.
func deleteUser(ctx context.Context, db *DB, uid string) error {
	_, err := db.DeleteUser(ctx, uid, "root", nil)
	return err
}

// TestDeleteUserRewritesSkills: the delete passes every skill to the
// rewrite in its own transaction and stores the creator and share of those
// it changed; an heir that is not registered, or the user itself, leaves
// everything as it was.
func TestDeleteUserRewritesSkills(t *testing.T) { forEachBackend(t, testDeleteUserRewritesSkills) }

func testDeleteUserRewritesSkills(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	mine, other := testSkill("mine"), testSkill("other")
	mine.Creator = "alice"
	mine.Share = skills.Share{Read: skills.Scope{Kind: skills.ScopeUser, IDs: []string{"alice"}}}
	other.Creator = "bob"
	for _, s := range []*skills.Skill{mine, other} {
		if err := db.InsertSkill(ctx, s, testVersion(s.Slug, "h1")); err != nil {
			t.Fatal(err)
		}
	}
	rewrite := func(s *skills.Skill) bool {
		if s.Creator != "alice" {
			return false
		}
		s.Creator, s.Share.Read.IDs = "root", []string{"root"}
		s.Name = "not stored" // only the creator and the share are
		return true
	}
	for _, heir := range []string{"nobody", "alice"} {
		if _, err := db.DeleteUser(ctx, "alice", heir, rewrite); err == nil {
			t.Fatalf("delete with heir %q: accepted", heir)
		}
		if _, err := db.User(ctx, "alice"); err != nil {
			t.Fatalf("alice after a refused delete (heir %q): %v", heir, err)
		}
	}
	changed, err := db.DeleteUser(ctx, "alice", "root", rewrite)
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 1 || changed[0].Slug != "mine" || changed[0].Creator != "root" {
		t.Fatalf("changed = %+v, want mine, now root's", changed)
	}
	got, err := db.Skill(ctx, "mine")
	if err != nil {
		t.Fatal(err)
	}
	if got.Creator != "root" || !slices.Equal(got.Share.Read.IDs, []string{"root"}) || got.Name != mine.Name {
		t.Errorf("mine after the delete: %+v", got)
	}
	if o, err := db.Skill(ctx, "other"); err != nil || o.Creator != "bob" {
		t.Errorf("other after the delete: %+v %v", o, err)
	}
	if _, err := db.User(ctx, "alice"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("alice after the delete: %v", err)
	}
}

// TestDeleteUserFindsEverySkillNamingThem: the delete hands the rewrite
// every skill whose creator or share names the user, whatever characters
// the uid holds (some of which JSON escapes, or LIKE reads as wildcards),
// and never one that does not name them.
func TestDeleteUserFindsEverySkillNamingThem(t *testing.T) {
	forEachBackend(t, testDeleteUserFindsEverySkillNamingThem)
}

func testDeleteUserFindsEverySkillNamingThem(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	for i, uid := range []string{"a<b>&c", `q"u\o`, "p_c%t", "ünï", "x\u2028y", "plain"} {
		if err := db.PutUser(ctx, skills.User{UID: uid, Role: skills.RoleUser}); err != nil {
			t.Fatal(err)
		}
		n := strconv.Itoa(i)
		mine, shared, other := testSkill("mine-"+n), testSkill("shared-"+n), testSkill("other-"+n)
		mine.Creator = uid
		shared.Creator, shared.Share = "bob", skills.Share{Read: skills.Scope{Kind: skills.ScopeUser, IDs: []string{"bob", uid}}}
		other.Creator, other.Share = "bob", skills.Share{Read: skills.Scope{Kind: skills.ScopeUser, IDs: []string{"bob", "pXcYt", "a<b>&"}}}
		for _, s := range []*skills.Skill{mine, shared, other} {
			if err := db.InsertSkill(ctx, s, testVersion(s.Slug, "h1")); err != nil {
				t.Fatal(err)
			}
		}
		var named []string
		if _, err := db.DeleteUser(ctx, uid, "root", func(s *skills.Skill) bool {
			if s.Creator == uid || slices.Contains(s.Share.Read.IDs, uid) {
				named = append(named, s.Slug)
			}
			return false
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(named, []string{"mine-" + n, "shared-" + n}) {
			t.Errorf("uid %q: the rewrite saw %v naming it, want mine-%s and shared-%s", uid, named, n, n)
		}
	}
}
