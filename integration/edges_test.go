package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// skippedAs returns the reasons of a session's skipped list: what its user
// learns about the skills left out, slugs aside.
func skippedAs(s sessionJSON) []string {
	var out []string
	for _, k := range s.Skipped {
		out = append(out, k.Reason)
	}
	return out
}

// TestSessionSkillsLive: a session naming only skills its user cannot read
// is refused naming them (exit 3, 404); a mix opens and reports the missing
// ones; a skill the user may not read, or a disabled one she only reads, is
// reported exactly like one that does not exist; a builtin's slug is
// refused over the API too.
func TestSessionSkillsLive(t *testing.T) {
	e := newEnv(t)
	e.serve("--examples=false")
	e.ok("user", "add", "alice", "--department", "eng")
	e.ok("user", "add", "eve", "--department", "hr")
	api := newAPIClient(e.home)
	src := t.TempDir()
	for _, name := range []string{"secret", "shared", "off"} {
		writeSkill(t, filepath.Join(src, name), "name: "+name+"\ndescription: "+name, nil)
		e.ok("skill", "import", filepath.Join(src, name), "--as", "alice")
	}
	e.ok("skill", "share", "shared", "--read", "global")
	e.ok("skill", "share", "off", "--read", "global")
	e.ok("skill", "disable", "off")

	// None readable: refused, naming each, in the words of a missing skill,
	// to eve herself. (The operator, who manages alice's skills, is told
	// why: TestPrivateSkillLeftOutSaysWhy.)
	r := e.run("session", "create", "--user", "eve", "--skills", "nope,secret,off", "--as", "eve")
	if r.code != 3 {
		t.Fatalf("session of unreadable skills: exit %d, want 3\n%s", r.code, r.stderr)
	}
	for _, w := range []string{`"nope" (missing)`, `"secret" (missing)`, `"off" (missing)`} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q does not say %s", r.stderr, w)
		}
	}
	if code := api.do(t, "POST", "/v1/sessions", "eve", map[string]any{"user": "eve", "skills": []string{"secret"}}, nil); code != http.StatusNotFound {
		t.Fatalf("API session of an unreadable skill: %d, want 404", code)
	}
	var list []sessionJSON
	api.do(t, "GET", "/v1/sessions", "", nil, &list)
	if len(list) != 0 {
		t.Fatalf("refused sessions were opened: %+v", list)
	}

	// A mix opens, reporting the others alike, through the CLI and the API.
	var cli, viaAPI sessionJSON
	e.okJSON(&cli, "session", "create", "--user", "eve", "--skills", "shared,secret,nope,off", "--as", "eve")
	if code := api.do(t, "POST", "/v1/sessions", "eve", map[string]any{"user": "eve", "skills": []string{"shared", "secret", "nope", "off"}}, &viaAPI); code != 200 {
		t.Fatalf("API session of a mix: %d", code)
	}
	for _, s := range []sessionJSON{cli, viaAPI} {
		if !slices.Equal(s.Readable, []string{"shared"}) || !slices.Equal(skippedAs(s), []string{"missing", "missing", "missing"}) {
			t.Fatalf("eve's session: readable %v, skipped %+v; want shared, three alike missing", s.Readable, s.Skipped)
		}
		if _, err := os.Stat(filepath.Join(s.Path, "shared", "SKILL.md")); err != nil {
			t.Fatalf("the readable skill is not served: %v", err)
		}
	}
	// The raw answers differ in the slugs alone.
	raw := e.ok("session", "create", "--user", "eve", "--skills", "shared,secret,nope", "--json", "--as", "eve")
	var skipped struct {
		Skipped []map[string]any `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(raw), &skipped); err != nil || len(skipped.Skipped) != 2 {
		t.Fatalf("decode %q: %v", raw, err)
	}
	skipped.Skipped[0]["slug"], skipped.Skipped[1]["slug"] = "X", "X"
	a, _ := json.Marshal(skipped.Skipped[0])
	b, _ := json.Marshal(skipped.Skipped[1])
	if string(a) != string(b) {
		t.Fatalf("a hidden skill is reported as %s, a missing one as %s", a, b)
	}
	// Its creator manages the disabled one: she is told it is disabled.
	var hers sessionJSON
	e.okJSON(&hers, "session", "create", "--user", "alice", "--skills", "shared,off")
	if !slices.Equal(skippedAs(hers), []string{"disabled"}) {
		t.Fatalf("alice's session skipped %+v, want off disabled", hers.Skipped)
	}
	// In the CLI's words too.
	out := e.ok("session", "create", "--user", "eve", "--skills", "shared,secret", "--as", "eve")
	if !strings.Contains(out, "left out: secret (missing)") {
		t.Fatalf("session create says %q", out)
	}
	// The operator, who manages alice's skills, opening eve's session, is
	// told that secret's share is why.
	if out := e.ok("session", "create", "--user", "eve", "--skills", "shared,secret"); !strings.Contains(out, "left out: secret (not readable)") {
		t.Fatalf("session create as the operator says %q", out)
	}

	// A builtin's slug is refused over the API as well, naming it.
	writeSkill(t, filepath.Join(src, "sys"), "name: sys\ndescription: builtin", nil)
	e.ok("skill", "import", filepath.Join(src, "sys"), "--builtin")
	code := api.doType(t, "POST", "/v1/drafts", "alice", "text/markdown", []byte("---\nname: sys\ndescription: mine\n---\nbody\n"), nil)
	if code != http.StatusConflict {
		t.Fatalf("prepare a builtin's slug: %d, want 409", code)
	}
}

// TestUserDeleteWithSessionsLive: deleting a user with open sessions is
// refused unless forced, which closes them (their views go at once), through
// the CLI and the API, with the daemon running or not; only superadmins touch
// admins.
func TestUserDeleteWithSessionsLive(t *testing.T) {
	e := newEnv(t)
	d := e.serve("--examples=false")
	for _, u := range [][]string{{"bob"}, {"zed"}, {"yan"}, {"carol", "--role", "admin"}, {"dan", "--role", "admin"}} {
		e.ok(append([]string{"user", "add"}, u...)...)
	}
	src := filepath.Join(t.TempDir(), "shared")
	writeSkill(t, src, "name: shared\ndescription: for all", nil)
	e.ok("skill", "import", src, "--share", "global")
	api := newAPIClient(e.home)
	open := func(uid string) sessionJSON {
		var s sessionJSON
		e.okJSON(&s, "session", "create", "--user", uid, "--skills", "shared")
		return s
	}
	served := func(s sessionJSON) bool {
		_, err := os.Stat(filepath.Join(s.Path, "shared", "SKILL.md"))
		return err == nil
	}

	// Only superadmins touch admins.
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"user", "delete", "dan", "--as", "carol"}, 4},
		{[]string{"user", "add", "newadm", "--role", "admin", "--as", "carol"}, 4},
		{[]string{"user", "set", "bob", "--role", "admin", "--as", "carol"}, 4},
		{[]string{"user", "set", "dan", "--department", "x", "--as", "carol"}, 4},
		{[]string{"user", "delete", "carol", "--as", "bob"}, 3}, // an ordinary user knows no one else
		{[]string{"user", "add", "plain", "--as", "carol"}, 0},
		{[]string{"user", "delete", "plain", "--as", "carol"}, 0},
	} {
		if r := e.run(tc.args...); r.code != tc.code {
			t.Errorf("skillfs %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), r.code, tc.code, r.stderr)
		}
	}
	if code := api.do(t, "DELETE", "/v1/users/dan", "carol", nil, nil); code != http.StatusForbidden {
		t.Errorf("an admin deletes an admin over the API: %d, want 403", code)
	}

	// CLI: refused while bob has a session, then forced.
	sb := open("bob")
	r := e.run("user", "delete", "bob", "--as", "carol")
	if r.code != 6 || !strings.Contains(r.stderr, "1 open session") || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("delete bob with a session: exit %d, stderr %q; want 6 naming the count and --force", r.code, r.stderr)
	}
	if !served(sb) {
		t.Fatal("a refused delete closed the session")
	}
	var gone struct {
		Deleted string   `json:"deleted"`
		Closed  []string `json:"closed"`
	}
	e.okJSON(&gone, "user", "delete", "bob", "--force", "--as", "carol")
	if gone.Deleted != "bob" || !slices.Equal(gone.Closed, []string{sb.ID}) {
		t.Fatalf("delete --force said %+v, want bob and %s", gone, sb.ID)
	}
	if _, err := os.Stat(sb.Path); !os.IsNotExist(err) {
		t.Fatalf("bob's session is still served after delete --force: %v", err)
	}
	if r := e.run("session", "show", sb.ID); r.code != 3 {
		t.Fatalf("bob's session after delete --force: exit %d, want 3 (closed)", r.code)
	}

	// API: the same with force=true.
	sz := open("zed")
	if code := api.do(t, "DELETE", "/v1/users/zed", "carol", nil, nil); code != http.StatusConflict {
		t.Fatalf("API delete of a user with a session: %d, want 409", code)
	}
	if code := api.do(t, "DELETE", "/v1/users/zed?force=maybe", "carol", nil, nil); code != http.StatusBadRequest {
		t.Fatalf("force=maybe: %d, want 400", code)
	}
	if !served(sz) {
		t.Fatal("a refused API delete closed the session")
	}
	var del struct {
		Deleted string   `json:"deleted"`
		Closed  []string `json:"closed"`
	}
	if code := api.do(t, "DELETE", "/v1/users/zed?force=true", "carol", nil, &del); code != 200 || !slices.Equal(del.Closed, []string{sz.ID}) {
		t.Fatalf("API delete force=true: %d %+v", code, del)
	}
	if _, err := os.Stat(sz.Path); !os.IsNotExist(err) {
		t.Fatalf("zed's session is still served: %v", err)
	}
	if code := api.do(t, "DELETE", "/v1/users/zed", "carol", nil, nil); code != http.StatusNotFound {
		t.Fatalf("delete a deleted user: %d, want 404", code)
	}

	// With the daemon down the sessions are closed in the index, and the
	// next daemon does not serve them.
	sy := open("yan")
	if code := d.stop(); code != 0 {
		t.Fatalf("daemon exit %d", code)
	}
	if r := e.run("user", "delete", "yan"); r.code != 6 {
		t.Fatalf("delete yan with the daemon down: exit %d, want 6\n%s", r.code, r.stderr)
	}
	e.okJSON(&gone, "user", "delete", "yan", "--force")
	if !slices.Equal(gone.Closed, []string{sy.ID}) {
		t.Fatalf("delete --force without a daemon closed %v, want %s", gone.Closed, sy.ID)
	}
	e.serve("--examples=false")
	var left []sessionJSON
	e.okJSON(&left, "session", "list")
	if len(left) != 0 {
		t.Fatalf("open sessions after every user was deleted: %+v", left)
	}
}
