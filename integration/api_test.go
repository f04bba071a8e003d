package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skillfs/skills/skilltest"
)

// do sends a request acting as user and decodes the answer into out.
func (c *apiClient) do(t testing.TB, method, path, user string, body, out any) int {
	t.Helper()
	return c.doType(t, method, path, user, "", body, out)
}

// doType is do with a Content-Type.
func (c *apiClient) doType(t testing.TB, method, path, user, contentType string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if b, ok := body.([]byte); ok {
		rd = bytes.NewReader(b)
	} else if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
		if contentType == "" {
			contentType = "application/json"
		}
	}
	req, _ := http.NewRequest(method, "http://skillfs"+path, rd)
	if user != "" {
		req.Header.Set("X-Skillfs-As", user)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	c.conform(t)
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

// TestCatalogAPI: a front end prepares, confirms, edits and disables skills
// over the API, acting for its users, and sessions follow at once.
func TestCatalogAPI(t *testing.T) {
	e := newEnv(t)
	root := t.TempDir() // where the API may read local paths
	e.serve("--examples=false", "--import-root", root)
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	api := newAPIClient(e.home)
	src := filepath.Join(root, "notes")
	writeSkill(t, src, "name: notes\ndescription: alice's notes", map[string]string{"tips.md": "one"})

	var draft struct {
		ID     string `json:"draft"`
		Skills []struct {
			Slug string `json:"slug"`
		} `json:"skills"`
	}
	// An ordinary user may not have the daemon read a path on its machine;
	// she sends the skill itself.
	if code := api.do(t, "POST", "/v1/drafts", "alice", map[string]any{"source": src}, &draft); code != 403 {
		t.Fatalf("a user prepares a local path: %d, want 403", code)
	}
	if code := api.doType(t, "POST", "/v1/drafts?name=notes.zip", "alice", "application/zip", skilltest.ZipFS(t, os.DirFS(src), "notes/"), &draft); code != 200 || len(draft.Skills) != 1 {
		t.Fatalf("prepare an upload: %d %+v", code, draft)
	}
	var lone struct {
		Skills []struct {
			Slug string `json:"slug"`
		} `json:"skills"`
	}
	manifest := []byte("---\nname: bobs-notes\ndescription: one file\n---\nbody\n")
	if code := api.doType(t, "POST", "/v1/drafts", "bob", "text/markdown", manifest, &lone); code != 200 || len(lone.Skills) != 1 || lone.Skills[0].Slug != "bobs-notes" {
		t.Fatalf("prepare an uploaded SKILL.md: %d %+v", code, lone)
	}
	// The operator (a superadmin) may name a local path in an import root.
	var admin struct {
		ID string `json:"draft"`
	}
	if code := api.do(t, "POST", "/v1/drafts", "", map[string]any{"source": src}, &admin); code != 200 || admin.ID == "" {
		t.Fatalf("the operator prepares a local path: %d", code)
	}
	if code := api.do(t, "POST", "/v1/drafts/"+draft.ID+"/confirm", "bob", map[string]any{}, nil); code != 404 {
		t.Fatalf("bob confirms alice's draft: %d, want 404", code)
	}
	if code := api.do(t, "POST", "/v1/drafts/"+draft.ID+"/confirm", "alice", map[string]any{"share": "global"}, nil); code != 403 {
		t.Fatalf("a user confirms with a global share: %d, want 403", code)
	}
	var res struct {
		Installed []struct {
			Slug string `json:"slug"`
		} `json:"installed"`
	}
	if code := api.do(t, "POST", "/v1/drafts/"+draft.ID+"/confirm", "alice", map[string]any{}, &res); code != 200 || len(res.Installed) != 1 {
		t.Fatalf("confirm: %d %+v", code, res)
	}
	var list []struct {
		Slug string `json:"slug"`
	}
	api.do(t, "GET", "/v1/skills", "bob", nil, &list)
	if len(list) != 0 {
		t.Fatalf("bob lists %v", list)
	}
	if code := api.do(t, "DELETE", "/v1/skills/notes", "bob", nil, nil); code != 404 {
		t.Fatalf("bob deletes alice's skill: %d, want 404", code)
	}

	var s sessionJSON
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "notes")
	if code := api.do(t, "PUT", "/v1/skills/notes/files/tips.md", "alice", []byte("two"), nil); code != 200 {
		t.Fatalf("edit: %d", code)
	}
	// Copy-on-write: the session sees the pinned bytes until refresh.
	if b, _ := os.ReadFile(filepath.Join(s.Path, "notes", "tips.md")); string(b) != "one" {
		t.Fatalf("session sees %q before refresh", b)
	}
	e.ok("session", "refresh", s.ID)
	if b, _ := os.ReadFile(filepath.Join(s.Path, "notes", "tips.md")); string(b) != "two" {
		t.Fatalf("session sees %q after refresh", b)
	}
	if code := api.do(t, "POST", "/v1/skills/notes/disable", "alice", nil, nil); code != 200 {
		t.Fatalf("disable: %d", code)
	}
	if _, err := os.Stat(filepath.Join(s.Path, "notes")); !os.IsNotExist(err) {
		t.Fatalf("disabled over the API, still in the session: %v", err)
	}
}

// TestSessionListPages: the API lists sessions a page at a time, oldest
// first, naming the next page in a Link header; `session list` pages through
// all of them, or gives one page with --limit and --after.
func TestSessionListPages(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	var ids []string
	for range 5 {
		ids = append(ids, e.newSession("alice", "--skills", "release-notes").ID)
	}
	e.ok("session", "close", ids[1])
	open := slices.Delete(slices.Clone(ids), 1, 2)
	api := newAPIClient(e.home)

	var got []string
	pages := 0
	for next := "/v1/sessions?limit=2"; next != ""; pages++ {
		var page []sessionJSON
		next = api.page(t, next, &page)
		for _, s := range page {
			got = append(got, s.ID)
		}
	}
	if !slices.Equal(got, open) || pages != 2 {
		t.Errorf("API pages of 2: %v in %d pages, want %v in 2", got, pages, open)
	}
	var page []sessionJSON
	if next := api.page(t, "/v1/sessions", &page); len(page) != len(open) || next != "" {
		t.Errorf("API default page: %d sessions, next %q", len(page), next)
	}
	if code := api.do(t, "GET", "/v1/sessions?after=nope", "", nil, nil); code != http.StatusBadRequest {
		t.Errorf("API list after an unknown session: %d, want 400", code)
	}

	var all []sessionJSON
	e.okJSON(&all, "session", "list")
	if ids := sessionIDs(all); !slices.Equal(ids, open) {
		t.Errorf("session list: %v, want %v", ids, open)
	}
	r := e.run("session", "list", "--limit", "2", "--json")
	if r.code != 0 {
		t.Fatalf("session list --limit 2: exit %d: %s", r.code, r.stderr)
	}
	var first []sessionJSON
	if err := json.Unmarshal([]byte(r.stdout), &first); err != nil {
		t.Fatal(err)
	}
	if ids := sessionIDs(first); !slices.Equal(ids, open[:2]) || !strings.Contains(r.stderr, "--after "+open[1]+" --limit 2") {
		t.Errorf("session list --limit 2: %v, stderr %q; want %v and how to go on", ids, r.stderr, open[:2])
	}
	var rest []sessionJSON
	e.okJSON(&rest, "session", "list", "--limit", "2", "--after", open[1])
	if ids := sessionIDs(rest); !slices.Equal(ids, open[2:]) {
		t.Errorf("session list --limit 2 --after: %v, want %v", ids, open[2:])
	}
	if r := e.run("session", "list", "--after", "nope"); r.code != 5 {
		t.Errorf("session list --after an unknown session: exit %d, want 5: %s", r.code, r.stderr)
	}
}

// sessionIDs lists the ids of sessions.
func sessionIDs(list []sessionJSON) []string {
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	return ids
}

// page GETs one page of a paginated list into v and returns the path of the
// next page, or "" after the last.
func (c *apiClient) page(t testing.TB, path string, v any) string {
	t.Helper()
	return nextLink(t, c.getHeader(t, path, v).Get("Link"))
}

// nextLink returns the path of a Link header's rel="next" target, or "".
func nextLink(t testing.TB, h string) string {
	t.Helper()
	for link := range strings.SplitSeq(h, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(link), ">")
		if !ok || !strings.HasPrefix(target, "<") || !strings.Contains(params, `rel="next"`) {
			continue
		}
		u, err := url.Parse(target[1:])
		if err != nil {
			t.Fatalf("Link header %q: %v", h, err)
		}
		return u.RequestURI()
	}
	return ""
}

// TestOpenAPIServed: the daemon serves the OpenAPI document of the source
// tree, the one the suite checks every API exchange against.
func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t)
	e.serve("--examples=false")
	want, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	api := newAPIClient(e.home)
	resp, err := api.hc.Get("http://skillfs/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	api.conform(t)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("GET /v1/openapi.json: %d bytes, %v; want the %d bytes of %s", len(got), err, len(want), openAPIFile)
	}
}
