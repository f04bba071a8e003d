package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/fs/readbench"
	"skillfs/skills"
)

// readThrough reads a file with its cached pages dropped first, so that the read
// reaches the daemon.
func readThrough(t testing.TB, p string) {
	t.Helper()
	if _, err := readbench.ReadCold(p); err != nil {
		t.Fatal(err)
	}
}

// TestAuditAPI: the audit lists exactly the files a session read, ordered
// by slug and path, with the reads that reached the daemon, also those not
// flushed yet; other sessions' reads stay out; an unknown session is 404.
func TestAuditAPI(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	install(t, d, "name: b-skill\ndescription: b", skills.ScopeGlobal)
	install(t, d, "name: a-skill\ndescription: a", skills.ScopeGlobal)
	one, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, All: true})
	if err != nil {
		t.Fatal(err)
	}
	two, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, All: true})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	readThrough(t, filepath.Join(d.mountRoot, one.ID, "b-skill", "SKILL.md"))
	readThrough(t, filepath.Join(d.mountRoot, one.ID, "a-skill", "SKILL.md"))
	if err := d.audit.Flush(ctx); err != nil { // one batch stored, the next pending
		t.Fatal(err)
	}
	readThrough(t, filepath.Join(d.mountRoot, one.ID, "b-skill", "SKILL.md"))
	readThrough(t, filepath.Join(d.mountRoot, two.ID, "a-skill", "SKILL.md"))
	after := time.Now()

	srv := httptest.NewServer(d.http.Handler(""))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/sessions/" + one.ID + "/audit")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []skills.FileRead
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET audit: %s, %v", resp.Status, err)
	}
	if len(got) != 2 || got[0].Slug != "a-skill" || got[0].Reads != 1 || got[1].Slug != "b-skill" || got[1].Reads != 2 {
		t.Fatalf("audit %+v, want a-skill/SKILL.md read once, b-skill/SKILL.md twice", got)
	}
	for _, r := range got {
		if r.Path != "SKILL.md" || r.FirstAt.Before(before) || r.FirstAt.After(after) {
			t.Errorf("entry %+v: want SKILL.md first read between %v and %v", r, before, after)
		}
	}
	resp, err = http.Get(srv.URL + "/v1/sessions/nope/audit")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("audit of an unknown session: %s, want 404", resp.Status)
	}
}
