package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/skills"
)

// TestParentReadsItsChildren: with its own token, a session reads each of
// its children as a reader would — the session, its prompt, activations,
// audit and event stream — but does not act in it: the per-turn call,
// mentions, resolve and install answer as no route, and record nothing.
// A child's token reads nothing of its parent, and a parent nothing of
// another session's child.
func TestParentReadsItsChildren(t *testing.T) {
	ctx := context.Background()
	d, srv, parent := familyDaemon(t)
	child, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID, Skills: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	nephew, err := d.CreateSession(ctx, api.CreateRequest{Parent: other.ID})
	if err != nil {
		t.Fatal(err)
	}
	readSKILL(t, d, child.ID, "b") // the child's one activation
	c := apitest.NewChecked(t, d.http.Handler(""))
	send := func(token, method, path, body string) (int, []byte) {
		t.Helper()
		h := bearerOf(token)
		if body != "" {
			h.Set("Content-Type", "application/json")
		}
		code, _, out := c.Send(method, path, h, []byte(body))
		return code, out
	}
	looksMissing := func(code int, out []byte) bool {
		return code == http.StatusNotFound && apitest.ErrorCode(out) == "not_found" && strings.Contains(string(out), "no such route")
	}

	base := "/v1/sessions/" + child.ID
	code, out := send(parent.Token, "GET", base, "")
	var info api.SessionInfo
	if err := json.Unmarshal(out, &info); code != http.StatusOK || err != nil || info.ID != child.ID || info.Parent != parent.ID {
		t.Fatalf("the parent shows its child: %d %s", code, out)
	}
	if code, out := send(parent.Token, "GET", base+"/prompt", ""); code != http.StatusOK || !strings.Contains(string(out), "<name>b</name>") ||
		strings.Contains(string(out), "<name>a</name>") {
		t.Errorf("the parent reads its child's prompt: %d %s, want b's (the child's), not a's", code, out)
	}
	code, out = send(parent.Token, "GET", base+"/activations", "")
	var act api.Activations
	if err := json.Unmarshal(out, &act); code != http.StatusOK || err != nil || len(act.Activated) != 1 || act.Activated[0].Slug != "b" {
		t.Errorf("the parent reads its child's activations: %d %s", code, out)
	}
	if code, out := send(parent.Token, "GET", base+"/audit", ""); code != http.StatusOK {
		t.Errorf("the parent reads its child's audit: %d %s", code, out)
	}
	if code, out := send(parent.Token, "POST", base+"/globs", `{"paths":["x.go"]}`); code != http.StatusOK {
		t.Errorf("the parent asks its child's globs: %d %s", code, out)
	}
	// The child's stream, replayed from the start: its activation.
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+base+"/events?after=0", nil)
	req.Header = bearerOf(parent.Token)
	streamCtx, stop := context.WithCancel(ctx)
	resp, err := http.DefaultClient.Do(req.WithContext(streamCtx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the parent opens its child's event stream: %d", resp.StatusCode)
	}
	var first api.Event
	apitest.ParseSSE(t, resp.Body, func(e apitest.SSE) bool { first = e.Data; return false })
	stop()
	resp.Body.Close()
	if first.Type != skills.EventActivated || first.Session != child.ID || first.Slug != "b" {
		t.Errorf("the first event of the child's stream: %+v, want its activation of b", first)
	}

	// Acting in the child: as no route, nothing recorded.
	for _, r := range [][3]string{
		{"POST", base + "/turn", `{"message":"$b"}`},
		{"POST", base + "/mentions", `{"text":"$c"}`},
		{"GET", base + "/resolve?uri=skill://c/SKILL.md", ""},
		{"POST", base + "/skills", `{"path":"/tmp"}`},
	} {
		if code, out := send(parent.Token, r[0], r[1], r[2]); !looksMissing(code, out) {
			t.Errorf("the parent's %s %s: %d %s, want it answered as no route", r[0], r[1], code, out)
		}
	}
	if act, err := d.Activations(ctx, child.ID); err != nil || len(act.Activated) != 1 {
		t.Errorf("the child's activations after its parent's refused acts: %+v, %v; want b's alone", act, err)
	}
	// The child acts in its own session (the routes work; the refusals were
	// the parent's).
	if code, out := send(child.Token, "POST", base+"/mentions", `{"text":"$c"}`); code != http.StatusOK || !strings.Contains(string(out), `"slug": "c"`) {
		t.Errorf("the child's own mentions: %d %s", code, out)
	}

	// The child reads nothing of its parent; the parent nothing of a child
	// of another session.
	for _, p := range []string{"", "/prompt", "/activations", "/audit", "/events?after=0"} {
		if code, out := send(child.Token, "GET", "/v1/sessions/"+parent.ID+p, ""); !looksMissing(code, out) {
			t.Errorf("the child reads its parent's %q: %d %s", p, code, out)
		}
		if code, out := send(parent.Token, "GET", "/v1/sessions/"+nephew.ID+p, ""); !looksMissing(code, out) {
			t.Errorf("the parent reads another session's child's %q: %d %s", p, code, out)
		}
	}
	if code, out := send(parent.Token, "GET", "/v1/sessions/nosuchsession", ""); !looksMissing(code, out) {
		t.Errorf("the parent shows an unknown session: %d %s", code, out)
	}
}

// TestReaderMentionsChangeNothing: a reader token reads a session but may
// not resolve the skills a message names in it, which would record their
// activation: 403, and no activation recorded.
func TestReaderMentionsChangeNothing(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	tok, err := d.CreateToken(ctx, api.TokenRequest{Name: "dash", Role: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	c := apitest.NewChecked(t, d.http.Handler(""))
	code, _, out := c.Send("POST", "/v1/sessions/"+parent.ID+"/mentions", apitest.JSONHeader("Authorization", "Bearer "+tok.Token), []byte(`{"text":"$a and /skill:d"}`))
	if code != http.StatusForbidden || apitest.ErrorCode(out) != "permission" {
		t.Errorf("a reader's mentions: %d %s, want 403 permission", code, out)
	}
	if code, _, out := c.Send("GET", "/v1/sessions/"+parent.ID+"/activations", bearerOf(tok.Token), nil); code != http.StatusOK {
		t.Errorf("a reader's read of the activations: %d %s", code, out)
	}
	act, err := d.Activations(ctx, parent.ID)
	if err != nil || !slices.Equal(act.Activated, []skills.Activation{}) {
		t.Errorf("activations after a reader's mentions: %+v, %v; want none", act, err)
	}
}
