package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
)

// TestListSessionsPages: the session list comes a page at a time, oldest
// first, each page naming the next in a Link header, and the pages hold
// every open session once with its binds.
func TestListSessionsPages(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	install(t, d, "name: x\ndescription: one skill", skills.ScopeGlobal)
	var ids []string
	for range 7 {
		info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{"x"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	if err := d.CloseSession(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	bound := ids[4]
	if err := d.db.AddBind(ctx, bound, d.host, skills.Bind{Target: "/sandbox/skills"}); err != nil {
		t.Fatal(err)
	}
	open := slices.Delete(slices.Clone(ids), 2, 3)

	get := func(path string) (int, []api.SessionInfo, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		d.http.Handler("").ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var page []api.SessionInfo
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
		return rec.Code, page, api.NextPage(rec.Header().Get("Link"))
	}
	for _, limit := range []int{1, 2, 3, 6} {
		var got []string
		next := fmt.Sprintf("/v1/sessions?limit=%d", limit)
		for next != "" {
			code, page, more := get(next)
			if code != http.StatusOK || len(page) > limit || len(page) == 0 {
				t.Fatalf("GET %s: %d, %d sessions", next, code, len(page))
			}
			for _, s := range page {
				got = append(got, s.ID)
				want := 0
				if s.ID == bound {
					want = 1
				}
				if s.Binds == nil || len(s.Binds) != want {
					t.Errorf("session %s listed with binds %v", s.ID, s.Binds)
				}
			}
			next = more
		}
		if !slices.Equal(got, open) {
			t.Errorf("pages of %d: %v, want %v", limit, got, open)
		}
	}
	// Without a limit, one page of the default size: all seven here.
	if code, page, next := get("/v1/sessions"); code != http.StatusOK || len(page) != len(open) || next != "" {
		t.Errorf("default page: %d, %d sessions, next %q", code, len(page), next)
	}
	// A limit past the largest page is cut to it.
	if code, page, _ := get(fmt.Sprintf("/v1/sessions?limit=%d", api.MaxSessionPage+1)); code != http.StatusOK || len(page) != len(open) {
		t.Errorf("limit past the largest page: %d, %d sessions", code, len(page))
	}
	// A closed session still works as a cursor.
	if code, page, _ := get("/v1/sessions?limit=1&after=" + ids[2]); code != http.StatusOK || len(page) != 1 || page[0].ID != ids[3] {
		t.Errorf("after a closed session: %d %v", code, page)
	}
	for _, bad := range []string{"limit=0", "limit=-1", "limit=x", "after=nope"} {
		if code, _, _ := get("/v1/sessions?" + bad); code != http.StatusBadRequest {
			t.Errorf("GET /v1/sessions?%s: %d, want 400", bad, code)
		}
	}
}
