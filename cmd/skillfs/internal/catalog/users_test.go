package catalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"skillfs/skills"
	skillsource "skillfs/skills/source"
)

// An ordinary user learns nothing of other users: every answer about
// another user — an ordinary one, an admin, a superadmin — is the answer
// about a user that does not exist, word for word, and a create is refused
// the same way whoever it names. Admins get real answers.
func TestUsersAnswerOnlyWhatTheCallerMayKnow(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	addUsers(t, c, skills.User{UID: "alice", Role: "user"}, skills.User{UID: "bob", Role: "user"},
		skills.User{UID: "adm", Role: "admin"}, skills.User{UID: "adm2", Role: "admin"}, skills.User{UID: "root", Role: "superadmin"})

	// answers is what each call says about uid, with uid written as UID.
	answers := func(as, uid string) map[string]string {
		t.Helper()
		out := map[string]string{}
		say := func(op string, err error) {
			if err == nil {
				t.Fatalf("%s %s as %s: no error", op, uid, as)
			}
			kind, _ := skills.KindOf(err)
			out[op] = kind.Name + ": " + strings.ReplaceAll(err.Error(), strconv.Quote(uid), `"UID"`)
		}
		_, err := c.DeleteUser(ctx, as, uid, "", false, nil)
		say("delete", err)
		_, err = c.DeleteUser(ctx, as, uid, "", true, nil)
		say("delete --force", err)
		say("set", c.PutUser(ctx, as, skills.User{UID: uid, Department: "x"}, false))
		say("set --role admin", c.PutUser(ctx, as, skills.User{UID: uid, Role: "admin"}, false))
		say("add", c.PutUser(ctx, as, skills.User{UID: uid}, true))
		return out
	}
	missing := answers("alice", "nobody")
	for op, a := range missing {
		want := "not_found: "
		if op == "add" {
			want = "permission: " // ordinary users create nobody
		}
		if !strings.HasPrefix(a, want) {
			t.Errorf("%s of a missing user as alice: %s, want %s", op, a, want)
		}
	}
	for _, uid := range []string{"bob", "adm", "root", "operator"} {
		got := answers("alice", uid)
		for op, a := range got {
			if a != missing[op] {
				t.Errorf("%s %s as alice: %q, want what a missing user gets: %q", op, uid, a, missing[op])
			}
		}
	}
	if us, err := c.Users(ctx, "alice"); err != nil || len(us) != 1 || us[0].UID != "alice" {
		t.Errorf("users alice may list: %+v %v, want herself alone", us, err)
	}
	// Herself she knows: refused for want of a role, as before.
	if _, err := c.DeleteUser(ctx, "alice", "alice", "", false, nil); !errors.Is(err, skills.ErrPermission) {
		t.Errorf("alice deletes herself: %v, want a refusal", err)
	}

	// Admins know every user.
	if _, err := c.DeleteUser(ctx, "adm", "adm2", "", false, nil); !errors.Is(err, skills.ErrPermission) || !strings.Contains(err.Error(), "needs a superadmin") {
		t.Errorf("admin deletes an admin: %v, want needs a superadmin", err)
	}
	if _, err := c.DeleteUser(ctx, "adm", "nobody", "", false, nil); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("admin deletes a missing user: %v, want not found", err)
	}
	if err := c.PutUser(ctx, "adm", skills.User{UID: "bob"}, true); !errors.Is(err, skills.ErrExists) {
		t.Errorf("admin adds an existing user: %v, want exists", err)
	}
	if us, err := c.Users(ctx, "adm"); err != nil || len(us) != 6 {
		t.Errorf("users an admin may list: %+v %v, want all 6", us, err)
	}
	for _, uid := range []string{"alice", "bob", "adm", "adm2", "root"} {
		if _, err := c.db.User(ctx, uid); err != nil {
			t.Errorf("%s after the refusals: %v", uid, err)
		}
	}
}

// A uid is not an identity for ever: after alice is deleted, a new user
// registered as alice manages none of the old alice's skills, reads nothing
// that was shared with her, and cannot confirm her drafts, on this host or
// any other. Her skills went to the deleting admin (or the user named),
// whole; other users' skills only lost her from their shares.
func TestDeletedUsersUIDIsNotTheirIdentity(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	addUsers(t, c, skills.User{UID: "adm", Role: "admin"}, skills.User{UID: "alice", Role: "user"}, skills.User{UID: "bob", Role: "user"})
	users := func(ids ...string) skills.Scope { return skills.Scope{Kind: skills.ScopeUser, IDs: ids} }
	imp := func(as, name, extra string) {
		t.Helper()
		importAs(t, c, ImportRequest{Source: skillDir(t, filepath.Join(t.TempDir(), name), "name: "+name+"\ndescription: "+as+"'s"+extra), As: as})
	}
	share := func(slug string, sh skills.Share) {
		t.Helper()
		if _, err := c.Share(ctx, "adm", slug, sh); err != nil {
			t.Fatal(err)
		}
	}
	imp("bob", "b-comanaged", "")
	share("b-comanaged", skills.Share{Read: users("alice", "bob"), Manage: users("alice")})
	imp("bob", "b-for-alice", "")
	share("b-for-alice", skills.Share{Read: users("alice")})
	imp("alice", "a-private", "")
	imp("alice", "a-shared", "")
	share("a-shared", skills.Share{Read: users("alice", "bob")})
	imp("alice", "a-needs", "\nskill_dependencies: [b-for-alice]")
	draft, err := c.Prepare(ctx, ImportRequest{Source: skillDir(t, filepath.Join(t.TempDir(), "later"), "name: later\ndescription: x"), As: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the draft stands for one on another host's disk, which
	// the delete cannot reach.
	dir, _ := c.draftPath(draft.ID)
	elsewhere := filepath.Join(t.TempDir(), "draft")
	if err := os.CopyFS(elsewhere, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}

	res, err := c.DeleteUser(ctx, "adm", "alice", "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Owner != "adm" || !slices.Equal(res.Handed, []string{"a-needs", "a-private", "a-shared"}) ||
		!slices.Equal(res.Unshared, []string{"b-comanaged", "b-for-alice"}) {
		t.Fatalf("delete: %+v, want alice's three skills handed to adm, bob's two unshared", res)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "a-needs") || !strings.Contains(res.Warnings[0], "b-for-alice") {
		t.Errorf("warnings %q: want a-needs's dependency that adm cannot read", res.Warnings)
	}
	for slug, want := range map[string]struct {
		creator string
		share   skills.Share
	}{
		"a-private":   {"adm", skills.Share{Read: users("adm")}},
		"a-shared":    {"adm", skills.Share{Read: users("bob")}},
		"b-comanaged": {"bob", skills.Share{Read: users("bob")}},
		"b-for-alice": {"bob", skills.Share{Read: users("bob")}},
	} {
		s, err := c.db.Skill(ctx, slug)
		if err != nil || s.Creator != want.creator || !reflect.DeepEqual(s.Share, want.share) {
			t.Errorf("%s after the delete: %+v %v, want creator %s share %+v", slug, s, err, want.creator, want.share)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("alice's draft on this host after the delete: %v", err)
	}

	// A new alice.
	addUsers(t, c, skills.User{UID: "alice", Role: "user"})
	if list, err := c.List(ctx, "alice"); err != nil || len(list) != 0 {
		t.Errorf("the new alice sees %d skills (%v), want none", len(list), err)
	}
	for _, slug := range []string{"a-private", "a-shared", "b-comanaged", "b-for-alice"} {
		if err := c.Delete(ctx, "alice", slug); !errors.Is(err, skills.ErrNotFound) {
			t.Errorf("the new alice deletes %s: %v, want not found", slug, err)
		}
	}
	if err := os.CopyFS(dir, os.DirFS(elsewhere)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Confirm(ctx, "alice", draft.ID, nil); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("the new alice confirms the old alice's draft: %v, want not found", err)
	}
	// Her own drafts are hers.
	mine, err := c.Prepare(ctx, ImportRequest{Source: skillDir(t, filepath.Join(t.TempDir(), "mine"), "name: mine\ndescription: x"), As: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Confirm(ctx, "alice", mine.ID, nil); err != nil {
		t.Errorf("the new alice confirms her own draft: %v", err)
	}

	// --to names who takes the skills; never the user deleted, nor one
	// that does not exist.
	imp("bob", "b-own", "")
	for _, to := range []string{"bob", "nobody"} {
		if _, err := c.DeleteUser(ctx, "adm", "bob", to, false, nil); err == nil {
			t.Errorf("delete bob --to %s: accepted", to)
		}
	}
	if res, err := c.DeleteUser(ctx, "adm", "bob", "alice", false, nil); err != nil || res.Owner != "alice" ||
		!slices.Equal(res.Handed, []string{"b-comanaged", "b-for-alice", "b-own"}) {
		t.Fatalf("delete bob --to alice: %+v %v", res, err)
	}
	if s, err := c.Show(ctx, "alice", "b-own"); err != nil || s.Creator != "alice" {
		t.Errorf("b-own after bob's delete --to alice: %+v %v", s, err)
	}
}

// An import checks, under the publish lock the delete also takes, that its
// user is still the one it looked up: a user deleted meanwhile (or whose
// uid was registered again for someone else) installs nothing.
func TestImportOfAUserDeletedMeanwhile(t *testing.T) {
	ctx := context.Background()
	c := open(t)
	addUsers(t, c, skills.User{UID: "alice", Role: "user"})
	old, err := c.Actor(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.stillRegistered(ctx, old); err != nil {
		t.Fatalf("alice, registered: %v", err)
	}
	if _, err := c.DeleteUser(ctx, "", "alice", "", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.stillRegistered(ctx, old); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("alice, deleted: %v, want not found", err)
	}
	addUsers(t, c, skills.User{UID: "alice", Role: "user"})
	if err := c.stillRegistered(ctx, old); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("the old alice, with a new alice registered: %v, want not found", err)
	}
	src := skillDir(t, filepath.Join(t.TempDir(), "pdf"), "name: pdf\ndescription: x")
	sel := &selection{src: &source{Tree: skillsource.Tree{Key: src, Type: skills.SourceUpload}},
		found: []skillsource.Found{{Candidate: skillsource.Candidate{Name: "pdf", Rel: ".", Dir: src}}}}
	if err := c.install(ctx, old, ImportRequest{Source: src}, sel, &ImportResult{}); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("an import by the old alice: %v, want refused", err)
	}
	if _, err := c.db.Skill(ctx, "pdf"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("pdf after the old alice's import: %v, want none", err)
	}
}
