package integration

// Oracles and identity in the fault suite: what an ordinary user learns of
// other users and of skills she may not see, what a deleted user leaves
// behind for a new user of the same uid, and edits of names an import
// leaves out.

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"skillfs/skills/skilltest"
)

// TestUserProbesTellNothing: an ordinary user probing other users — an
// ordinary one, an admin, a superadmin, the default identity, one that does
// not exist — through every user route and command gets the same answer
// for each, but for the uid: nothing tells who exists or their role.
func TestUserProbesTellNothing(t *testing.T) {
	e := newEnv(t)
	e.serve("--examples=false")
	api := newHostileAPI(e.home)
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	e.ok("user", "add", "adm", "--role", "admin")
	e.ok("user", "add", "root", "--role", "superadmin")
	before := e.ok("user", "list", "--json")

	// answers is what alice is told about uid, everywhere, with uid
	// written as UID.
	answers := func(uid string) []string {
		t.Helper()
		norm := func(s string) string {
			return strings.NewReplacer(strconv.Quote(uid), `"UID"`, `\"`+uid+`\"`, `\"UID\"`).Replace(strings.TrimSpace(s))
		}
		var out []string
		for _, q := range []string{"", "?force=true", "?to=alice"} {
			a := api.send(t, "DELETE", "/v1/users/"+uid+q, "alice", "", nil, nil)
			out = append(out, "DELETE"+q+": "+strconv.Itoa(a.status)+" "+norm(string(a.body)))
		}
		for _, args := range [][]string{
			{"user", "delete", uid}, {"user", "delete", uid, "--force"}, {"user", "set", uid, "--department", "x"},
			{"user", "set", uid, "--role", "admin"}, {"user", "add", uid}, {"user", "add", uid, "--role", "superadmin"},
		} {
			r := e.run(append(args, "--as", "alice")...)
			out = append(out, strings.Join(args[:2], " ")+": exit "+strconv.Itoa(r.code)+" "+norm(r.stderr))
		}
		return out
	}
	missing := answers("nobody")
	for _, a := range missing {
		if !strings.Contains(a, ": 404 ") && !strings.Contains(a, ": exit 3 ") && !strings.HasPrefix(a, "user add: exit 4 ") {
			t.Errorf("alice about a user that does not exist: %s, want not found (add: refused)", a)
		}
	}
	probes := 0
	for _, uid := range []string{"bob", "adm", "root", "operator"} {
		got := answers(uid)
		probes += len(got)
		for i := range got {
			if got[i] != missing[i] {
				t.Errorf("alice about %s: %s\nwant what a missing user gets: %s", uid, got[i], missing[i])
			}
		}
	}
	var listed []struct{ UID string }
	e.okJSON(&listed, "user", "list", "--as", "alice")
	if len(listed) != 1 || listed[0].UID != "alice" {
		t.Errorf("user list as alice: %+v, want herself alone", listed)
	}
	// An admin gets real answers.
	if r := e.run("user", "delete", "root", "--as", "adm"); r.code != 4 || !strings.Contains(r.stderr, "needs a superadmin") {
		t.Errorf("adm deletes root: exit %d %s, want 4, needs a superadmin", r.code, r.stderr)
	}
	if after := e.ok("user", "list", "--json"); after != before {
		t.Errorf("users changed:\nbefore %s\nafter %s", before, after)
	}
	t.Logf("%d probes of 4 existing users (user, admin, superadmin, operator) each answered exactly as for a missing one: %d routes and commands", probes, len(missing))
}

// TestReplaceOntoAHiddenSlug: --replace (replace=true in the API) onto the
// slug of another user's private skill answers as the import without it —
// a new <slug>-vN beside it — rather than 403, which told that a skill she
// may not see exists; the hidden skill is untouched. Onto a skill she sees
// but may not manage, it is refused as before.
func TestReplaceOntoAHiddenSlug(t *testing.T) {
	e := newCatalogEnv(t)
	e.serve("--examples=false")
	api := newHostileAPI(e.home)
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "bob", "pdf"), "name: pdf\ndescription: bob's private pdf", map[string]string{"a.md": "bob\n"})
	writeSkill(t, filepath.Join(src, "bob", "notes"), "name: notes\ndescription: bob's notes, shared with alice", nil)
	e.ok("skill", "import", filepath.Join(src, "bob", "pdf"), "--as", "bob")
	e.ok("skill", "import", filepath.Join(src, "bob", "notes"), "--as", "bob")
	e.ok("skill", "share", "notes", "--read", "user:alice,bob")
	bobs := e.ok("skill", "show", "pdf", "--as", "bob", "--json")

	writeSkill(t, filepath.Join(src, "alice", "pdf"), "name: pdf\ndescription: alice's pdf", nil)
	alices := filepath.Join(src, "alice", "pdf")
	// The API: a draft of an upload, with and without replace.
	draftSlug := func(replace string) (string, []string) {
		t.Helper()
		a := api.send(t, "POST", "/v1/drafts?name=pdf.zip&replace="+replace, "alice", "application/zip", nil, bytes.NewReader(skilltest.ZipFS(t, os.DirFS(alices), "pdf/")))
		var d struct {
			ID     string `json:"draft"`
			Skills []struct {
				Slug     string   `json:"slug"`
				Warnings []string `json:"warnings"`
			} `json:"skills"`
		}
		if a.status != 200 || json.Unmarshal(a.body, &d) != nil || len(d.Skills) != 1 {
			t.Fatalf("alice prepares pdf.zip with replace=%s: %s", replace, a)
		}
		api.send(t, "DELETE", "/v1/drafts/"+d.ID, "alice", "", nil, nil)
		return d.Skills[0].Slug, d.Skills[0].Warnings
	}
	withSlug, withWarn := draftSlug("true")
	withoutSlug, withoutWarn := draftSlug("false")
	if withSlug != "pdf-v2" || withSlug != withoutSlug || !slices.Equal(withWarn, withoutWarn) {
		t.Errorf("draft with replace=true: %s %q; without: %s %q; want the same, pdf-v2", withSlug, withWarn, withoutSlug, withoutWarn)
	}
	// The CLI: --list says the same with and without --replace, and the
	// import installs beside bob's skill.
	with := e.ok("skill", "import", alices, "--list", "--replace", "--as", "alice", "--json")
	without := e.ok("skill", "import", alices, "--list", "--as", "alice", "--json")
	if with != without {
		t.Errorf("--list --replace:\n%s\n--list:\n%s", with, without)
	}
	var res struct {
		Installed []struct {
			Slug        string `json:"slug"`
			RenamedFrom string `json:"renamed_from"`
			Note        string `json:"note"`
		} `json:"installed"`
	}
	e.okJSON(&res, "skill", "import", alices, "--replace", "--as", "alice")
	if len(res.Installed) != 1 || res.Installed[0].Slug != "pdf-v2" || res.Installed[0].RenamedFrom != "pdf" || strings.Contains(res.Installed[0].Note, "bob") {
		t.Errorf("alice's import --replace onto bob's hidden pdf: %+v, want a new pdf-v2 and no word of bob", res)
	}
	if after := e.ok("skill", "show", "pdf", "--as", "bob", "--json"); after != bobs {
		t.Errorf("bob's pdf changed:\nbefore %s\nafter %s", bobs, after)
	}
	// A skill alice sees: --replace is refused, as it tells her nothing.
	writeSkill(t, filepath.Join(src, "alice", "notes"), "name: notes\ndescription: alice's notes", nil)
	if r := e.run("skill", "import", filepath.Join(src, "alice", "notes"), "--replace", "--as", "alice"); r.code != 4 || !strings.Contains(r.stderr, "may not manage") {
		t.Errorf("--replace of a skill alice reads: exit %d %s, want 4", r.code, r.stderr)
	}
	t.Logf("replace onto a hidden slug: draft %s (replace=true) = %s (replace=false); CLI import --replace installed %s", withSlug, withoutSlug, res.Installed[0].Slug)
}

// TestDeletedUserLeavesNothingToANamesake: after `user delete alice
// --force`, a new user registered as alice manages none of the old alice's
// nine skills, reads nothing that was shared with the old alice (in the
// catalog or through a session's mount), and the old skills are the
// deleting admin's, whole.
func TestDeletedUserLeavesNothingToANamesake(t *testing.T) {
	e := newCatalogEnv(t)
	e.serve("--examples=false")
	e.ok("user", "add", "adm", "--role", "admin")
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	src := t.TempDir()
	var nine []string
	for i := 1; i <= 9; i++ {
		name := "alice-" + strconv.Itoa(i)
		nine = append(nine, name)
		writeSkill(t, filepath.Join(src, "alice", "skills", name), "name: "+name+"\ndescription: the old alice's", nil)
	}
	e.ok("skill", "import", filepath.Join(src, "alice"), "--all", "--as", "alice")
	writeSkill(t, filepath.Join(src, "bob", "for-alice"), "name: for-alice\ndescription: bob's, shared with alice", map[string]string{"secret.md": "for alice's eyes\n"})
	e.ok("skill", "import", filepath.Join(src, "bob", "for-alice"), "--as", "bob")
	e.ok("skill", "share", "for-alice", "--read", "user:alice,bob", "--manage", "user:alice", "--as", "adm")
	old := e.newSession("alice", "--skills", "for-alice")
	if b, err := os.ReadFile(filepath.Join(old.Path, "for-alice", "secret.md")); err != nil || string(b) != "for alice's eyes\n" {
		t.Fatalf("the old alice reads for-alice: %q %v", b, err)
	}

	var del struct {
		Closed   []string `json:"closed"`
		Owner    string   `json:"owner"`
		Handed   []string `json:"handed"`
		Unshared []string `json:"unshared"`
	}
	e.okJSON(&del, "user", "delete", "alice", "--force", "--as", "adm")
	if !slices.Equal(del.Closed, []string{old.ID}) || del.Owner != "adm" || !slices.Equal(del.Handed, nine) || !slices.Equal(del.Unshared, []string{"for-alice"}) {
		t.Fatalf("user delete alice --force: %+v, want her session closed, her nine skills handed to adm, for-alice unshared", del)
	}
	if _, err := os.Stat(filepath.Join(old.Path, "for-alice", "secret.md")); err == nil {
		t.Error("the old alice's session still reads for-alice after the delete")
	}

	e.ok("user", "add", "alice")
	var listed []struct{ Slug string }
	e.okJSON(&listed, "skill", "list", "--as", "alice")
	if len(listed) != 0 {
		t.Errorf("the new alice lists %+v, want nothing", listed)
	}
	refused := 0
	for _, slug := range append(slices.Clone(nine), "for-alice") {
		for _, args := range [][]string{{"skill", "delete", slug}, {"skill", "disable", slug}, {"skill", "show", slug},
			{"skill", "share", slug, "--read", "user:alice"}} {
			if r := e.run(append(args, "--as", "alice")...); r.code != 3 {
				t.Errorf("the new alice: %s: exit %d %s, want 3 (not found)", strings.Join(args, " "), r.code, r.stderr)
			}
			refused++
		}
	}
	if r := e.run("session", "create", "--user", "alice", "--skills", "for-alice"); r.code != 3 {
		t.Errorf("a session of the new alice with for-alice: exit %d %s, want 3", r.code, r.stdout+r.stderr)
	}
	var all sessionJSON
	e.okJSON(&all, "session", "create", "--user", "alice", "--all")
	if len(all.Readable) != 0 {
		t.Errorf("a session of the new alice reads %v, want nothing", all.Readable)
	}
	if _, err := os.Stat(filepath.Join(all.Path, "for-alice", "secret.md")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("for-alice in the new alice's mount: %v, want none", err)
	}
	// The nine are adm's now; bob's skill is bob's alone.
	for _, slug := range nine {
		if s := e.shown(slug, "adm"); s.Creator != "adm" {
			t.Errorf("%s after the delete: creator %q, want adm", slug, s.Creator)
		}
	}
	var fa struct {
		Creator string
		Share   struct{ Read, Manage string }
	}
	e.okJSON(&fa, "skill", "show", "for-alice", "--as", "bob")
	if fa.Creator != "bob" || fa.Share.Read != "user:bob" || fa.Share.Manage != "" {
		t.Errorf("for-alice after the delete: %+v, want bob's, shared with bob alone", fa)
	}
	t.Logf("%d skills handed to %s, %d unshared; the new alice: %d commands on them refused as not found, a session reads %d skills", len(del.Handed), del.Owner, len(del.Unshared), refused, len(all.Readable))
}

// TestEditsOfLeftOutNamesRefused: an edit (API PUT or DELETE, `skill
// edit`) of a path through .git, .DS_Store or __MACOSX, which every import
// leaves out, is refused with 400 / exit 5 naming the rule, and changes
// nothing; it answered 200 and changed nothing.
func TestEditsOfLeftOutNamesRefused(t *testing.T) {
	e := newCatalogEnv(t)
	e.serve("--examples=false")
	api := newHostileAPI(e.home)
	e.ok("user", "add", "alice")
	notes := filepath.Join(t.TempDir(), "notes")
	writeSkill(t, notes, "name: notes\ndescription: alice's notes", map[string]string{"tips.md": "one\n"})
	e.ok("skill", "import", notes, "--as", "alice")
	before := hostileState(t, e)
	rule := "is never stored in a skill (imports leave out .git, .DS_Store, __MACOSX"
	tried := 0
	for _, p := range []string{".git/config.md", "__MACOSX/x.md", "docs/.DS_Store/x.md", ".git/hooks/pre-commit.sh"} {
		for _, method := range []string{"PUT", "DELETE"} {
			var body *strings.Reader
			if method == "PUT" {
				body = strings.NewReader("[core]\n")
			} else {
				body = strings.NewReader("")
			}
			a := api.send(t, method, "/v1/skills/notes/files/"+p, "alice", "text/plain", nil, body)
			checkRefusal(t, a, 400, p, rule)
			tried++
		}
		if r := e.runIn(strings.NewReader("[core]\n"), "skill", "edit", "notes", p, "--as", "alice"); r.code != 5 || !strings.Contains(r.stderr, rule) {
			t.Errorf("skill edit notes %s: exit %d %s, want 5 naming the rule", p, r.code, r.stderr)
		}
		if r := e.run("skill", "edit", "notes", p, "--delete", "--as", "alice"); r.code != 5 || !strings.Contains(r.stderr, rule) {
			t.Errorf("skill edit notes %s --delete: exit %d %s, want 5 naming the rule", p, r.code, r.stderr)
		}
		tried += 2
		checkUnchanged(t, e, before)
	}
	t.Logf("%d edits of left-out names refused (400 / exit 5), nothing changed", tried)
}
