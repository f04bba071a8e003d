package integration

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// matrixOps are the columns of the live permission table, each one API call
// made as the row's user on the row's skill. A refusal is 403 to a user who
// can see the skill and 404 (the answer for a skill that does not exist) to
// one who cannot; a session naming only a skill it may not read is 404 for
// everyone.
var matrixOps = []struct {
	name string
	do   func(t *testing.T, api *apiClient, user, slug string) int
}{
	{"visible", func(t *testing.T, api *apiClient, user, slug string) int {
		return api.do(t, "GET", "/v1/skills/"+slug, user, nil, nil)
	}},
	{"edit", func(t *testing.T, api *apiClient, user, slug string) int {
		return api.doType(t, "PUT", "/v1/skills/"+slug+"/files/notes.md", user, "text/plain", []byte("by "+user), nil)
	}},
	{"share-global", func(t *testing.T, api *apiClient, user, slug string) int {
		return api.do(t, "PUT", "/v1/skills/"+slug+"/share", user, map[string]string{"read": "global"}, nil)
	}},
	{"share-self", func(t *testing.T, api *apiClient, user, slug string) int {
		return api.do(t, "PUT", "/v1/skills/"+slug+"/share", user, map[string]string{"read": "user:" + user}, nil)
	}},
	{"share-manage-global", func(t *testing.T, api *apiClient, user, slug string) int {
		return api.do(t, "PUT", "/v1/skills/"+slug+"/share", user, map[string]string{"read": "global", "manage": "global"}, nil)
	}},
	{"toggle", func(t *testing.T, api *apiClient, user, slug string) int {
		code := api.do(t, "POST", "/v1/skills/"+slug+"/disable", user, nil, nil)
		if code == http.StatusOK {
			if c := api.do(t, "POST", "/v1/skills/"+slug+"/enable", user, nil, nil); c != http.StatusOK {
				t.Fatalf("%s disabled %s but cannot enable it again: %d", user, slug, c)
			}
		}
		return code
	}},
	// A session of the row's user naming the skill: it opens reading the
	// skill, or is refused as naming only skills that do not exist (404,
	// whatever the user may do in the catalog).
	{"session", func(t *testing.T, api *apiClient, user, slug string) int {
		var s sessionJSON
		code := api.do(t, "POST", "/v1/sessions", "", map[string]any{"user": user, "skills": []string{slug}}, &s)
		if code == http.StatusOK {
			if !slices.Contains(s.Readable, slug) {
				t.Errorf("session of %s opened reading %v, not %s", user, s.Readable, slug)
			}
			if c := api.do(t, "DELETE", "/v1/sessions/"+s.ID, "", nil, nil); c != http.StatusOK {
				t.Fatalf("close session %s: %d", s.ID, c)
			}
		}
		return code
	}},
	{"delete", func(t *testing.T, api *apiClient, user, slug string) int {
		return api.do(t, "DELETE", "/v1/skills/"+slug, user, nil, nil)
	}},
}

// matrixShares are the share configs of the table: mgr manages the skill
// through its manage scope, dave reads it through his department or uid,
// eve is outside all but the global one.
var matrixShares = map[string][2]string{
	"global":     {"global", "user:mgr"},
	"department": {"department:eng,sales", "department:sales"},
	"user":       {"user:alice,dave,mgr", "user:mgr"},
}

// matrixWant is the table, per source and scope kind: per user one
// character per op of matrixOps, 'y' allowed, '-' refused. Superadmins and
// admins manage every skill that is not builtin; only superadmins hand
// management to everyone; ordinary users share only with themselves;
// builtins are read by all, toggled by admins, edited, reshared or deleted
// by nobody. Sessions read by share alone: root and adm, in no scope of the
// department and user shares, manage those skills but their sessions do not
// read them.
var matrixWant = map[string]map[string]map[string]string{
	"upload": {
		"global":     {"root": "yyyyyyyy", "adm": "yyyy-yyy", "alice": "yy-y-yyy", "mgr": "yy-y-yyy", "dave": "y-----y-", "eve": "y-----y-"},
		"department": {"root": "yyyyyy-y", "adm": "yyyy-y-y", "alice": "yy-y-yyy", "mgr": "yy-y-yyy", "dave": "y-----y-", "eve": "--------"},
		"user":       {"root": "yyyyyy-y", "adm": "yyyy-y-y", "alice": "yy-y-yyy", "mgr": "yy-y-yyy", "dave": "y-----y-", "eve": "--------"},
	},
	"builtin": {
		"global": {"root": "y----yy-", "adm": "y----yy-", "alice": "y-----y-", "mgr": "y-----y-", "dave": "y-----y-", "eve": "y-----y-"},
	},
}

var matrixUsers = []string{"root", "adm", "alice", "mgr", "dave", "eve"}

// TestPermissionMatrixLive runs every cell of the role × scope × operation
// table against the real daemon over the API, each row on a skill of its
// own, the share put back after every allowed reshare; then spot-checks the
// CLI's exit codes for the same rules.
func TestPermissionMatrixLive(t *testing.T) {
	e := newEnv(t)
	e.serve("--examples=false")
	e.ok("user", "add", "root", "--role", "superadmin", "--department", "ops")
	e.ok("user", "add", "adm", "--role", "admin", "--department", "ops")
	e.ok("user", "add", "alice", "--department", "eng")
	e.ok("user", "add", "mgr", "--department", "sales")
	e.ok("user", "add", "dave", "--department", "eng")
	e.ok("user", "add", "eve", "--department", "hr")
	api := newAPIClient(e.home)
	src := t.TempDir()

	builtin := filepath.Join(src, "sys")
	writeSkill(t, builtin, "name: sys\ndescription: a builtin", map[string]string{"notes.md": "x"})
	e.ok("skill", "import", builtin, "--builtin")

	for _, source := range []string{"upload", "builtin"} {
		for kind, rows := range matrixWant[source] {
			for _, user := range matrixUsers {
				want := rows[user]
				slug := "sys"
				if source == "upload" {
					// A skill of alice's per row, shared as the row's scope says.
					slug = fmt.Sprintf("%s-%s", kind, user)
					dir := filepath.Join(src, slug)
					writeSkill(t, dir, "name: "+slug+"\ndescription: a row of the table", map[string]string{"notes.md": "x"})
					e.ok("skill", "import", dir, "--as", "alice")
				}
				share := matrixShares[kind]
				restore := func() {
					if source == "upload" {
						if c := api.do(t, "PUT", "/v1/skills/"+slug+"/share", "root", map[string]string{"read": share[0], "manage": share[1]}, nil); c != http.StatusOK {
							t.Fatalf("share %s as %v: %d", slug, share, c)
						}
					}
				}
				restore()
				visible := want[0] == 'y'
				for i, op := range matrixOps {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", source, kind, user, op.name), func(t *testing.T) {
						code := op.do(t, api, user, slug)
						wantCode := http.StatusOK
						switch {
						case want[i] == 'y':
						case visible && op.name != "session":
							wantCode = http.StatusForbidden
						default:
							wantCode = http.StatusNotFound
						}
						if code != wantCode {
							t.Errorf("status %d, want %d", code, wantCode)
						}
					})
					if strings.HasPrefix(op.name, "share") && want[i] == 'y' {
						restore()
					}
				}
			}
		}
	}

	// A disabled skill is gone for its readers, as if it did not exist, and
	// stays with its managers, admins included.
	e.ok("skill", "import", filepath.Join(src, "global-dave"), "--as", "alice")
	e.ok("skill", "share", "global-dave", "--read", "global")
	e.ok("skill", "disable", "global-dave", "--as", "adm")
	for user, want := range map[string]int{"root": 200, "adm": 200, "alice": 200, "dave": 404, "eve": 404} {
		if code := api.do(t, "GET", "/v1/skills/global-dave", user, nil, nil); code != want {
			t.Errorf("%s shows a disabled skill: %d, want %d", user, code, want)
		}
	}
	// The CLI says the same, in exit codes: an admin reshares alice's skill,
	// may not hand its management to everyone, deletes it; a reader of it
	// is told it does not exist.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"skill", "show", "global-dave", "--as", "dave"}, 3, `skill "global-dave": not found`},
		{[]string{"skill", "delete", "global-dave", "--as", "dave"}, 3, `skill "global-dave": not found`},
		{[]string{"skill", "enable", "global-dave", "--as", "dave"}, 3, `skill "global-dave": not found`},
		{[]string{"skill", "show", "no-such-skill", "--as", "dave"}, 3, `skill "no-such-skill": not found`},
		{[]string{"skill", "share", "global-dave", "--read", "global", "--manage", "global", "--as", "adm"}, 4, "only superadmins may hand management to everyone"},
		{[]string{"skill", "share", "global-dave", "--read", "global", "--manage", "global", "--as", "root"}, 0, ""},
		{[]string{"skill", "share", "global-dave", "--read", "department:eng", "--manage", "department:eng", "--as", "adm"}, 0, ""},
		{[]string{"skill", "share", "global-dave", "--read", "global", "--as", "alice"}, 4, "only with themselves"},
		{[]string{"skill", "delete", "global-dave", "--as", "adm"}, 0, ""},
		{[]string{"skill", "disable", "sys", "--as", "alice"}, 4, "only admins"},
		{[]string{"skill", "disable", "sys", "--as", "adm"}, 0, ""},
		{[]string{"skill", "show", "sys", "--as", "adm"}, 0, ""},
		{[]string{"skill", "show", "sys", "--as", "alice"}, 3, `skill "sys": not found`},
		{[]string{"skill", "delete", "sys", "--as", "root"}, 4, "cannot be deleted"},
	} {
		r := e.run(tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("skillfs %s: exit %d, stderr %q; want exit %d saying %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.code, tc.want)
		}
	}
}
