package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
	"skillfs/skills/gittest"
	"skillfs/skills/skilltest"
)

// TestDraftsOnlyInsideImportRoots: through the API an admin
// and a superadmin (X-Skillfs-As) draft local paths only inside the import
// roots: /etc/shadow, /proc/self/environ, a link in a root leading out,
// are refused with 403, one answer for existing and missing paths, and no
// byte of them in it; a path inside a root is drafted.
func TestDraftsOnlyInsideImportRoots(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	root, out := filepath.Join(base, "root"), filepath.Join(base, "out")
	skilltest.WriteDir(t, filepath.Join(root, "pdf"), skilltest.Skill("name: pdf\ndescription: inside the root", "body\n", nil))
	skilltest.WriteDir(t, out, skilltest.Skill("name: secret\ndescription: OUTSIDE-SECRET", "body\n", nil))
	skilltest.WriteDir(t, root, fstest.MapFS{"link-out": skilltest.Symlink(out)})
	t.Setenv("SKILLFS_TEST_ENV_MARKER", "ENVIRON-SECRET") // in /proc/self/environ of this process, the daemon's
	d := newTestDaemonRoots(t, root)
	for _, u := range []skills.User{{UID: "carol", Role: skills.RoleAdmin}, {UID: "sam", Role: skills.RoleSuperadmin}} {
		if err := d.cat.PutUser(ctx, "", u, true); err != nil {
			t.Fatal(err)
		}
	}
	shadow, _ := os.ReadFile("/etc/shadow")
	client := apitest.NewChecked(t, d.http.Handler(""))
	draft := func(as, src string) (int, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"source": src})
		code, _, answer := client.Send("POST", "/v1/drafts", apitest.JSONHeader(api.ActAsHeader, as), body)
		for _, leak := range []string{"OUTSIDE-SECRET", "ENVIRON-SECRET"} {
			if bytes.Contains(answer, []byte(leak)) {
				t.Errorf("%s drafts %s: the answer holds %s: %s", as, src, leak, answer)
			}
		}
		if line, _, _ := strings.Cut(string(shadow), "\n"); line != "" && bytes.Contains(answer, []byte(line)) {
			t.Errorf("%s drafts %s: the answer holds a line of /etc/shadow", as, src)
		}
		var e api.Error
		json.Unmarshal(answer, &e)
		return code, strings.Replace(e.Error, src, "SOURCE", 1)
	}
	for _, as := range []string{"carol", "sam", "operator"} {
		var first string
		for _, src := range []string{"/etc/shadow", "/etc/no-such-file", "/proc/self/environ", "/proc/self/no-such",
			filepath.Join(root, "link-out"), filepath.Join(root, "link-out", "SKILL.md"), filepath.Join(root, "link-out", "missing"), "file:///etc/shadow#main"} {
			code, msg := draft(as, src)
			if code != http.StatusForbidden {
				t.Errorf("%s drafts %s: %d %s, want 403", as, src, code, msg)
			}
			if first == "" {
				first = msg
			} else if msg != first {
				t.Errorf("%s drafts %s: %q, unlike the others' %q", as, src, msg, first)
			}
		}
		if !strings.Contains(first, root) || !strings.Contains(first, "import root") {
			t.Errorf("%s: the refusal %q does not name the import roots", as, first)
		}
		if code, msg := draft(as, filepath.Join(root, "pdf")); code != http.StatusOK {
			t.Errorf("%s drafts a folder in the root: %d %s", as, code, msg)
		}
	}
}

// TestUpdateThroughTheAPIChecksTheSource: a user who
// installed a curated skill from an admin's local curated source updates it
// through the API at the curated ref only; a ref of an uncurated branch is
// refused with 403, as her draft of that source is, and changes nothing.
func TestUpdateThroughTheAPIChecksTheSource(t *testing.T) {
	ctx := context.Background()
	work := filepath.Join(t.TempDir(), "curated")
	skilltest.WriteDir(t, work, skilltest.Skill("name: pdf\ndescription: curated", "body\n", nil))
	git := func(args ...string) {
		t.Helper()
		gittest.Git(t, work, gittest.FixtureEnv, args...)
	}
	git("init", "-q", "-b", "main")
	git("add", ".")
	git("commit", "-q", "-m", "curated")
	git("checkout", "-q", "-b", "secretbranch")
	skilltest.WriteDir(t, work, skilltest.Skill("name: pdf\ndescription: UNCURATED-SECRET", "body\n", nil))
	git("commit", "-q", "-am", "not curated")
	git("checkout", "-q", "main")
	d := newTestDaemon(t)
	if err := d.cat.PutUser(ctx, "", skills.User{UID: "alice", Role: skills.RoleUser}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cat.AddCurated(ctx, catalog.CuratedRequest{Source: work, Ref: "main"}); err != nil { // the operator, at a shell
		t.Fatal(err)
	}
	client := apitest.NewChecked(t, d.http.Handler(""))
	if code, _, body := client.Send("POST", "/v1/curated/install", apitest.JSONHeader(api.ActAsHeader, "alice"), []byte(`{"name":"pdf"}`)); code != http.StatusOK {
		t.Fatalf("alice installs the curated pdf: %d %s", code, body)
	}
	before, _ := d.cat.Show(ctx, "alice", "pdf")
	body, _ := json.Marshal(map[string]string{"source": work})
	code, _, draft := client.Send("POST", "/v1/drafts", apitest.JSONHeader(api.ActAsHeader, "alice"), body)
	if code != http.StatusForbidden {
		t.Fatalf("alice drafts the curated source: %d %s", code, draft)
	}
	for _, req := range []string{`{"ref":"secretbranch"}`, `{"tag":"v1"}`} {
		code, _, answer := client.Send("POST", "/v1/skills/pdf/update", apitest.JSONHeader(api.ActAsHeader, "alice"), []byte(req))
		if code != http.StatusForbidden || apitest.ErrorCode(answer) != "permission" || !strings.Contains(string(answer), "admins only") ||
			bytes.Contains(answer, []byte("UNCURATED-SECRET")) {
			t.Errorf("alice updates pdf with %s: %d %s; want 403 as her draft gets", req, code, answer)
		}
	}
	if after, _ := d.cat.Show(ctx, "alice", "pdf"); after.Version != before.Version || after.Description != "curated" {
		t.Errorf("after the refused updates: %s", after.Description)
	}
	code, _, answer := client.Send("POST", "/v1/skills/pdf/update", apitest.JSONHeader(api.ActAsHeader, "alice"), []byte(`{}`))
	var res catalog.UpdateResult
	if json.Unmarshal(answer, &res); code != http.StatusOK || len(res.Skills) != 1 || res.Skills[0].Status != catalog.UpdateUnchanged || res.Skills[0].Ref != "main" {
		t.Errorf("alice updates pdf at the curated ref: %d %s", code, answer)
	}
}
