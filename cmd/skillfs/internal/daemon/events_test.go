package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
)

// openEvents opens an event stream at path with header Last-Event-ID set
// to last (none when empty); the stream's context ends with the test.
func openEvents(t testing.TB, base, path, last string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, cancel
}

// readSKILL reads a skill's SKILL.md through a session's mount: its first
// read activates it.
func readSKILL(t testing.TB, d *Daemon, session, slug string) {
	t.Helper()
	if _, err := os.ReadFile(filepath.Join(d.mountRoot, session, slug, "SKILL.md")); err != nil {
		t.Fatal(err)
	}
}

// TestActivatedEventNamesWhatTheSkillAdds: a first read of SKILL.md sends an
// activated event carrying the skill's tools and MCP servers; other events
// carry none, and the JSON keeps the fields old clients read.
func TestActivatedEventNamesWhatTheSkillAdds(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	for _, tool := range []struct {
		name string
		mcp  bool
	}{{"grep", false}, {"jq", false}, {"github", true}} {
		if err := d.cat.AddTool(ctx, catalog.Operator, tool.name, tool.mcp); err != nil {
			t.Fatal(err)
		}
	}
	install(t, d, "name: tooly\ndescription: t\ntool_dependencies: [grep, jq]\nmcp_dependencies: [github]", skills.ScopeGlobal)
	install(t, d, "name: plain\ndescription: p", skills.ScopeGlobal)
	srv := httptest.NewServer(d.http.Handler(""))
	defer srv.Close()
	info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, All: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := openEvents(t, srv.URL, "/v1/sessions/"+info.ID+"/events", "")
	defer resp.Body.Close()
	readSKILL(t, d, info.ID, "tooly")
	readSKILL(t, d, info.ID, "plain")
	readSKILL(t, d, info.ID, "tooly") // not a first: no event
	if err := d.CloseSession(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	var got []apitest.SSE
	apitest.ParseSSE(t, resp.Body, func(e apitest.SSE) bool { got = append(got, e); return true }) // ends after closed
	if len(got) != 3 {
		t.Fatalf("events %+v, want activated, activated, closed", got)
	}
	tooly, plain, closed := got[0].Data, got[1].Data, got[2].Data
	if tooly.Type != skills.EventActivated || tooly.Slug != "tooly" || !slices.Equal(tooly.Tools, []string{"grep", "jq"}) || !slices.Equal(tooly.MCPs, []string{"github"}) {
		t.Errorf("tooly's event %+v", tooly)
	}
	if plain.Type != skills.EventActivated || plain.Tools == nil || plain.MCPs == nil || len(plain.Tools)+len(plain.MCPs) != 0 {
		t.Errorf("plain's event %+v, want empty tools and mcps", plain)
	}
	if closed.Type != "closed" || closed.Tools != nil || closed.Session != info.ID || !(tooly.ID < plain.ID && plain.ID < closed.ID) {
		t.Errorf("events %+v", got)
	}
	// The JSON: what old clients read, plus id, and tools and mcps where
	// they mean something.
	b, _ := json.Marshal(plain)
	var keys map[string]any
	json.Unmarshal(b, &keys)
	for _, k := range []string{"id", "type", "session", "slug", "at", "tools", "mcps"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("activated event %s lacks %q", b, k)
		}
	}
	b, _ = json.Marshal(closed)
	if strings.Contains(string(b), "tools") || strings.Contains(string(b), "mcps") {
		t.Errorf("closed event %s names tools", b)
	}
}

// oneSkillSession is a daemon serving its API, with a session of one skill.
func oneSkillSession(t *testing.T) (*Daemon, *httptest.Server, *api.SessionInfo) {
	t.Helper()
	d := newTestDaemon(t)
	install(t, d, "name: x\ndescription: one skill", skills.ScopeGlobal)
	srv := httptest.NewServer(d.http.Handler(""))
	t.Cleanup(srv.Close)
	info, err := d.CreateSession(context.Background(), api.CreateRequest{User: catalog.Operator, Skills: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	return d, srv, info
}

// TestEventsResumeWithoutGapOrDuplicate: while sessions change without a
// pause, a client that drops its stream now and then and resumes with
// Last-Event-ID gets every event exactly once, in order; so does one that
// resumes with ?after=, where the header wins over the query.
func TestEventsResumeWithoutGapOrDuplicate(t *testing.T) {
	ctx := context.Background()
	d, srv, info := oneSkillSession(t)
	const total = 150
	produced := make(chan error, 1)
	go func() {
		for range total {
			if _, err := d.Refresh(ctx, info.ID); err != nil {
				produced <- err
				return
			}
		}
		produced <- nil
	}()
	var ids []int64
	last := "0"
	for conn := 0; len(ids) < total; conn++ {
		if conn > 2*total {
			t.Fatalf("no progress: %d events after %d connections", len(ids), conn)
		}
		path, header := "/v1/sessions/"+info.ID+"/events", last
		switch conn % 3 {
		case 1: // resume through the query
			path, header = path+"?after="+last, ""
		case 2: // a stale query, as a browser's reconnect sends: the header wins
			path += "?after=0"
		}
		resp, cancel := openEvents(t, srv.URL, path, header)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		n := 0
		apitest.ParseSSE(t, resp.Body, func(e apitest.SSE) bool {
			ids = append(ids, e.Data.ID)
			last = e.ID
			n++
			return n < 7 && len(ids) < total // then drop the stream mid-way
		})
		cancel()
		resp.Body.Close()
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if id != int64(i+1) {
			t.Fatalf("event ids %v: want 1..%d once each, in order", ids, total)
		}
	}
}

// TestResumeChecksTheLog: resuming from an id the log pruned, or one it
// never gave, gets a resync event; a bad id is a 400 and opens no stream; a
// closed session's stream replays up to its close and ends.
func TestResumeChecksTheLog(t *testing.T) {
	ctx := context.Background()
	d, srv, info := oneSkillSession(t)
	for range 9 {
		if _, err := d.Refresh(ctx, info.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.CloseSession(ctx, info.ID); err != nil { // id 10
		t.Fatal(err)
	}
	if _, err := d.db.PruneEvents(ctx, time.Unix(0, 0), 6); err != nil { // ids 1-4 go
		t.Fatal(err)
	}
	all := func(path, last string) (*http.Response, []apitest.SSE) {
		t.Helper()
		resp, _ := openEvents(t, srv.URL, path, last)
		defer resp.Body.Close()
		var got []apitest.SSE
		if resp.StatusCode == http.StatusOK {
			apitest.ParseSSE(t, resp.Body, func(e apitest.SSE) bool { got = append(got, e); return true })
		}
		return resp, got
	}
	ids := func(evs []apitest.SSE) (out []string) {
		for _, e := range evs {
			out = append(out, e.Name+":"+e.ID)
		}
		return out
	}
	session := "/v1/sessions/" + info.ID + "/events"
	for _, tc := range []struct {
		path, last string
		want       []string
	}{
		{session, "4", []string{"refreshed:5", "refreshed:6", "refreshed:7", "refreshed:8", "refreshed:9", "closed:10"}},
		{session, "8", []string{"refreshed:9", "closed:10"}},
		{session, "10", nil}, // saw everything: the session is closed, the stream ends
		{session, "3", []string{"resync:10"}},
		{session, "11", []string{"resync:10"}},
		{"/v1/events?after=3", "", []string{"resync:10"}},
	} {
		resp, got := all(tc.path, tc.last)
		if resp.StatusCode != http.StatusOK || !slices.Equal(ids(got), tc.want) {
			t.Errorf("GET %s from %q: %s %v, want %v", tc.path, tc.last, resp.Status, ids(got), tc.want)
		}
	}
	if resp, _ := all(session, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a closed session's stream without resuming: %s, want 404", resp.Status)
	}
	for _, bad := range []string{"abc", "-1", "+7", "1.5", "0x10", "99999999999999999999"} {
		resp, _ := openEvents(t, srv.URL, "/v1/events", bad)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Last-Event-ID") || !strings.Contains(string(body), `"invalid"`) {
			t.Errorf("Last-Event-ID %q: %s %s, want 400 invalid naming the header", bad, resp.Status, body)
		}
	}
	resp, _ := openEvents(t, srv.URL, "/v1/events?after=x", "")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "after") {
		t.Errorf("?after=x: %s %s, want 400 naming the query", resp.Status, body)
	}
}
