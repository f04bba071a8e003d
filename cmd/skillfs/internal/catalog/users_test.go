package catalog

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"skillfs/skills"
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
		_, err := c.DeleteUser(ctx, as, uid, false, nil)
		say("delete", err)
		_, err = c.DeleteUser(ctx, as, uid, true, nil)
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
	if _, err := c.DeleteUser(ctx, "alice", "alice", false, nil); !errors.Is(err, skills.ErrPermission) {
		t.Errorf("alice deletes herself: %v, want a refusal", err)
	}

	// Admins know every user.
	if _, err := c.DeleteUser(ctx, "adm", "adm2", false, nil); !errors.Is(err, skills.ErrPermission) || !strings.Contains(err.Error(), "needs a superadmin") {
		t.Errorf("admin deletes an admin: %v, want needs a superadmin", err)
	}
	if _, err := c.DeleteUser(ctx, "adm", "nobody", false, nil); !errors.Is(err, skills.ErrNotFound) {
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
