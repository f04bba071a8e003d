package index

import (
	"context"
	"testing"

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
	bob := skills.User{UID: "bob", Role: skills.RoleUser, Department: "eng"}
	root := skills.User{UID: "root", Role: skills.RoleSuperadmin}
	for _, u := range []skills.User{bob, root} {
		if err := db.PutUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	// Put again updates in place.
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

	if err := db.DeleteUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	_, err = db.User(ctx, "bob")
	wantErr(t, "User after delete", err, skills.ErrNotFound)
	wantErr(t, "DeleteUser twice", db.DeleteUser(ctx, "bob"), skills.ErrNotFound)

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
