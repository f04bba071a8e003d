package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"skillfs/fs/readbench"
)

// streamEvent is one server-sent event: its id: line and its data.
type streamEvent struct {
	ID    string
	Event struct {
		ID      int64    `json:"id"`
		Type    string   `json:"type"`
		Session string   `json:"session"`
		Slug    string   `json:"slug"`
		Tools   []string `json:"tools"`
		MCPs    []string `json:"mcps"`
		Reason  string   `json:"reason"`
	}
}

// eventStream is an open event stream of the daemon.
type eventStream struct {
	events chan streamEvent // closed when the stream ends
	cancel context.CancelFunc
}

// openStream opens an event stream over the socket, resuming after
// lastID when it is not empty.
func openStream(t *testing.T, c *apiClient, path, lastID string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://skillfs"+path, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	s := &eventStream{events: make(chan streamEvent, 1000), cancel: cancel}
	go func() {
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var e streamEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				e.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.Event); err != nil {
					t.Errorf("event data %q: %v", line, err)
				}
			case line == "" && e.ID != "":
				s.events <- e
				e = streamEvent{}
			}
		}
	}()
	return s
}

// next waits for the next event; ok is false when the stream ended.
func (s *eventStream) next(t *testing.T) (streamEvent, bool) {
	t.Helper()
	return nextEvent(t, s.events)
}

// nextEvent waits for the next event of a stream's channel; ok is false
// when the channel closed (the stream ended).
func nextEvent(t testing.TB, events <-chan streamEvent) (streamEvent, bool) {
	t.Helper()
	select {
	case e, ok := <-events:
		return e, ok
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30 s")
		return streamEvent{}, false
	}
}

// describe is an event as "type slug".
func (e streamEvent) describe() string { return strings.TrimSpace(e.Event.Type + " " + e.Event.Slug) }

// TestEventsReplayAcrossReaderLossAndRestart: a tool loader's reader dies
// mid-stream; events go on, the daemon restarts, more events come; the
// loader reconnects with Last-Event-ID and gets every event it missed, once,
// in order, with the ids the index gave, and the activated events name the
// tools and MCP servers their skill adds.
func TestEventsReplayAcrossReaderLossAndRestart(t *testing.T) {
	e := newEnv(t)
	d := e.serve("--examples=false")
	e.ok("tool", "add", "grep")
	e.ok("mcp", "add", "github")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "first"), "name: first\ndescription: f\ntool_dependencies: [grep]\nmcp_dependencies: [github]", nil)
	writeSkill(t, filepath.Join(src, "second"), "name: second\ndescription: s", nil)
	writeSkill(t, filepath.Join(src, "third"), "name: third\ndescription: t\ntool_dependencies: [grep]", nil)
	e.ok("skill", "import", src, "--all", "--share", "global")
	s := e.newSession("operator", "--skills", "first,second,third")
	c := newAPIClient(e.home)
	path := "/v1/sessions/" + s.ID + "/events"

	live := openStream(t, c, path, "")
	if _, err := readbench.ReadCold(filepath.Join(s.Path, "first", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	first, _ := live.next(t)
	if first.describe() != "activated first" || !slices.Equal(first.Event.Tools, []string{"grep"}) || !slices.Equal(first.Event.MCPs, []string{"github"}) ||
		first.ID != strconv.FormatInt(first.Event.ID, 10) {
		t.Fatalf("first event %+v, want the activation of first with grep and github", first)
	}
	live.cancel() // the reader dies

	if _, err := readbench.ReadCold(filepath.Join(s.Path, "second", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	e.ok("session", "refresh", s.ID)
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d\n%s", code, d.logs())
	}
	e.serve("--examples=false")
	if _, err := readbench.ReadCold(filepath.Join(s.Path, "third", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	e.ok("session", "close", s.ID)

	resumed := openStream(t, c, path, first.ID)
	var got []string
	var ids []int64
	var third streamEvent
	for {
		ev, ok := resumed.next(t)
		if !ok {
			break // a session's stream ends after its close
		}
		got = append(got, ev.describe())
		ids = append(ids, ev.Event.ID)
		if ev.Event.Slug == "third" {
			third = ev
		}
	}
	if want := []string{"activated second", "refreshed", "activated third", "closed"}; !slices.Equal(got, want) {
		t.Fatalf("resumed after id %s: %v, want %v", first.ID, got, want)
	}
	for i, id := range ids {
		if id != first.Event.ID+int64(i)+1 {
			t.Fatalf("ids %v after %d: want each next id once", ids, first.Event.ID)
		}
	}
	if !slices.Equal(third.Event.Tools, []string{"grep"}) || third.Event.MCPs == nil || len(third.Event.MCPs) != 0 {
		t.Fatalf("third's event after the restart %+v, want grep and no MCP server", third)
	}
}

// auditRow is one entry of GET /v1/sessions/{id}/audit.
type auditRow struct {
	Slug    string    `json:"slug"`
	Path    string    `json:"path"`
	FirstAt time.Time `json:"first_at"`
	Reads   int64     `json:"reads"`
}

// TestReadAuditSurvivesRestart: files read through a session's mount are
// listed by the audit exactly, with their first times and the reads that
// reached skillfs; reads made just before a stop are flushed at shutdown,
// and the audit is the same after the restart.
func TestReadAuditSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	d := e.serve("--examples=false")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "docs"), "name: docs\ndescription: d", map[string]string{
		"references/api.md": "api", "references/unused.md": "never read", "scripts/run.sh": "#!/bin/sh\n"})
	writeSkill(t, filepath.Join(src, "other"), "name: other\ndescription: o", nil)
	e.ok("skill", "import", src, "--all", "--share", "global")
	s := e.newSession("operator", "--skills", "docs,other")
	bystander := e.newSession("operator", "--skills", "docs")
	c := newAPIClient(e.home)

	read := func(dir, rel string, times int) {
		t.Helper()
		for range times {
			if _, err := readbench.ReadCold(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := time.Now()
	read(s.Path, "docs/SKILL.md", 2)
	read(s.Path, "docs/references/api.md", 3)
	read(bystander.Path, "docs/scripts/run.sh", 1) // another session's read
	audit := func() []auditRow {
		var rows []auditRow
		c.get(t, "/v1/sessions/"+s.ID+"/audit", &rows)
		return rows
	}
	got := audit()
	read(s.Path, "other/SKILL.md", 1) // just before the stop: flushed at shutdown
	end := time.Now()
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d\n%s", code, d.logs())
	}
	describe := func(rows []auditRow) (out []string) {
		for _, r := range rows {
			out = append(out, fmt.Sprintf("%s/%s %d", r.Slug, r.Path, r.Reads))
			if r.FirstAt.Before(start) || r.FirstAt.After(end) {
				t.Errorf("%s/%s first read at %v, not between %v and %v", r.Slug, r.Path, r.FirstAt, start, end)
			}
		}
		return out
	}
	if want := []string{"docs/SKILL.md 2", "docs/references/api.md 3"}; !slices.Equal(describe(got), want) {
		t.Fatalf("audit while serving: %v, want %v", describe(got), want)
	}
	e.serve("--examples=false")
	after := audit()
	if want := []string{"docs/SKILL.md 2", "docs/references/api.md 3", "other/SKILL.md 1"}; !slices.Equal(describe(after), want) {
		t.Fatalf("audit after a restart: %v, want %v", describe(after), want)
	}
	for i := range got {
		if !after[i].FirstAt.Equal(got[i].FirstAt) {
			t.Errorf("%s/%s: first read %v before the restart, %v after", got[i].Slug, got[i].Path, got[i].FirstAt, after[i].FirstAt)
		}
	}
	// The command line shows the same.
	var cli []auditRow
	e.okJSON(&cli, "session", "audit", s.ID)
	if !slices.Equal(describe(cli), describe(after)) {
		t.Errorf("session audit --json: %v, want %v", describe(cli), describe(after))
	}
	table := e.ok("session", "audit", s.ID)
	if !strings.Contains(table, "references/api.md") || !strings.HasPrefix(table, "SKILL") {
		t.Errorf("session audit:\n%s", table)
	}
}
