package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/fs/bind/sandboxtest"
	"skillfs/skills"
	"skillfs/skills/skilltest"
)

// The tests of what a session's credential may do once its features meet:
// the API socket in its sandbox, the access table, sub-agents, installs
// and the turn. Every call of the sandbox's agent is curl inside the
// sandbox, as its uid.

// boxSocket is where the session's API socket is put in the sandboxes of
// these tests: beside the workspace, which the sandbox's uid owns.
const boxSocket = "/workspace/.skillfs.sock"

// boxAnswer is an answer as curl in the sandbox got it.
type boxAnswer = sandboxtest.Answer

// boxCall sends one request through the session's API socket from inside
// sandbox b, as its uid, and returns the answer.
func boxCall(t testing.TB, b *sandboxtest.Box, method, path, body string, hdr ...string) boxAnswer {
	t.Helper()
	var stderr bytes.Buffer
	cmd := b.Command(boxUID, boxUID, sandboxtest.Curl(boxSocket, []string{"-i", "--raw"}, method, path, body, hdr...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl %s %s in the sandbox: %v %s", method, path, err, stderr.String())
	}
	a, err := sandboxtest.ParseAnswer(out)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

// boxStream follows path's event stream through the sandbox's socket
// with curl inside it; the events come on the channel until the stream
// ends (its session closed, or the sandbox stopped).
func boxStream(t testing.TB, b *sandboxtest.Box, path string) <-chan apitest.SSE {
	t.Helper()
	cmd := b.Command(boxUID, boxUID, sandboxtest.Curl(boxSocket, []string{"-N"}, "GET", path, "")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return apitest.Stream(t, out)
}

// socketBox is a sandbox whose workspace holds the demo skills named, with
// session id bound into it at /skills and its API socket at boxSocket.
func socketBox(t *testing.T, d *Daemon, id string, names ...string) *sandboxtest.Box {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	for _, n := range names {
		demoSkill(t, ws, n, "body of "+n+"\n")
	}
	b := box(t, ws)
	if _, err := d.Bind(context.Background(), id, skills.Bind{Target: "/skills", PID: b.PID, APISocket: boxSocket}); err != nil {
		t.Fatal(err)
	}
	return b
}

// sameAnswer fails unless got answers as want does, byte for byte once
// what each asked for (gotWord, wantWord) is swapped in.
func sameAnswer(t testing.TB, what string, got, want boxAnswer, gotWord, wantWord string) {
	t.Helper()
	if !got.Same(want, gotWord, wantWord) {
		t.Errorf("%s: %s\nwant it answered as %s", what, got, want)
	}
}

// jsonBearer is the headers of a JSON request with token.
func jsonBearer(token string) http.Header {
	h := bearerOf(token)
	h.Set("Content-Type", "application/json")
	return h
}

// TestSandboxSocketIsItsSession: through the API socket a bind put into
// its sandbox, the agent (curl, the sandbox's uid) reads its session's
// prompt, activations, turn and events and learns who it is; another
// session's id answers byte for byte as an id no session has; the
// catalog's and the daemon's routes answer as routes that do not exist;
// X-Skillfs-As and an Authorization header are refused; a create opens a
// child of its session, whose events are in its session's stream.
func TestSandboxSocketIsItsSession(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	other, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := d.CreateSession(ctx, api.CreateRequest{User: "bob", Skills: []string{"e"}})
	if err != nil {
		t.Fatal(err)
	}
	b := socketBox(t, d, parent.ID)
	own := "/v1/sessions/" + parent.ID

	if a := boxCall(t, b, "GET", own+"/prompt", ""); a.Code != http.StatusOK || !bytes.Contains(a.Body, []byte("<name>a</name>")) ||
		bytes.Contains(a.Body, []byte("<name>e</name>")) {
		t.Errorf("its prompt: %s", a)
	}
	a := boxCall(t, b, "POST", own+"/turn", `{"message":"use $d","format":"json"}`)
	var turn api.Turn
	if a.Code != http.StatusOK || json.Unmarshal(a.Body, &turn) != nil || len(turn.Selected) != 1 || turn.Selected[0].Slug != "d" ||
		turn.Selected[0].Why != api.WhyMentioned {
		t.Errorf("its turn: %s", a)
	}
	var act api.Activations
	if a := boxCall(t, b, "GET", own+"/activations", ""); a.Code != http.StatusOK || json.Unmarshal(a.Body, &act) != nil ||
		len(act.Activated) != 1 || act.Activated[0].Slug != "d" {
		t.Errorf("its activations after the turn: %s", a)
	}
	var who api.Whoami
	if a := boxCall(t, b, "GET", "/v1/whoami", ""); a.Code != http.StatusOK || json.Unmarshal(a.Body, &who) != nil ||
		who.Role != "session" || who.Session != parent.ID || who.User != "alice" || who.Token != "" {
		t.Errorf("whoami: %s", a)
	}

	// Another session, of its user or another's, and one that does not
	// exist: the same answers, route by route.
	const none = "0123456789abcdef0123456789abcdef"
	for _, route := range []struct{ method, suffix, body string }{
		{"GET", "", ""}, {"GET", "/prompt", ""}, {"GET", "/activations", ""}, {"GET", "/audit", ""},
		{"POST", "/turn", `{"message":"hi"}`}, {"POST", "/mentions", `{"message":"hi"}`}, {"POST", "/globs", `{"paths":["a"]}`},
		{"POST", "/skills", `{"path":"/workspace"}`}, {"GET", "/events?after=0", ""}, {"GET", "/resolve?uri=skill://a", ""},
		{"DELETE", "", ""}, {"POST", "/refresh", "{}"}, {"POST", "/token", ""}, {"GET", "/skills", ""},
	} {
		want := boxCall(t, b, route.method, "/v1/sessions/"+none+route.suffix, route.body)
		if want.Code != http.StatusNotFound && want.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s of no session: %s", route.method, route.suffix, want)
		}
		for _, s := range []string{other.ID, bobs.ID} {
			got := boxCall(t, b, route.method, "/v1/sessions/"+s+route.suffix, route.body)
			sameAnswer(t, route.method+" another session's "+route.suffix, got, want, s, none)
		}
	}
	// The catalog, every session's events, the daemon's status and
	// metrics: as a route that does not exist. The session list is a
	// route it may POST to (a create), no more.
	for _, path := range []string{"/v1/sessions", "/v1/sessions?user=alice"} {
		if a := boxCall(t, b, "GET", path, ""); a.Code != http.StatusMethodNotAllowed || a.Header.Get("Allow") != "POST" {
			t.Errorf("GET %s: %s, want 405 allowing POST", path, a)
		}
	}
	for _, path := range []string{"/v1/skills", "/v1/skills/e", "/v1/skills/e/versions", "/v1/catalog", "/v1/curated", "/v1/events", "/v1/status", "/v1/health", "/metrics", "/v1/hosts", "/v1/tokens"} {
		got := boxCall(t, b, "GET", path, "")
		want := boxCall(t, b, "GET", "/v1/nothing-here", "")
		p, _, _ := strings.Cut(path, "?")
		sameAnswer(t, "GET "+path, got, want, p, "/v1/nothing-here")
	}
	if a := boxCall(t, b, "POST", "/v1/skills/e/disable", "{}"); a.Code != http.StatusNotFound || apitest.ErrorCode(a.Body) != "not_found" {
		t.Errorf("disable a skill: %s", a)
	}

	// No other credential rides on the socket.
	for _, hdr := range []string{api.ActAsHeader + ": alice", api.ActAsHeader + ": bob", api.ActAsHeader + ": operator"} {
		if a := boxCall(t, b, "GET", own+"/prompt", "", hdr); a.Code != http.StatusForbidden || apitest.ErrorCode(a.Body) != "permission" {
			t.Errorf("its prompt with %s: %s, want 403 permission", hdr, a)
		}
	}
	for _, tok := range []string{other.Token, bobs.Token, parent.Token, "wrong"} {
		if a := boxCall(t, b, "GET", own+"/prompt", "", "Authorization: Bearer "+tok); a.Code != http.StatusForbidden ||
			apitest.ErrorCode(a.Body) != "permission" || bytes.Contains(a.Body, []byte(tok)) {
			t.Errorf("its prompt with a bearer token: %s, want 403 permission", a)
		}
	}
	if a := boxCall(t, b, "GET", "/v1/sessions/"+other.ID+"/prompt", "", "Authorization: Bearer "+other.Token); a.Code != http.StatusForbidden {
		t.Errorf("another session's prompt with that session's token on the socket: %s, want 403", a)
	}

	// A child: of its session and user, a subset of its set, its events in
	// its session's stream.
	events := boxStream(t, b, own+"/events")
	a = boxCall(t, b, "POST", "/v1/sessions", `{"skills":["b"]}`)
	var child api.SessionInfo
	if a.Code != http.StatusOK || json.Unmarshal(a.Body, &child) != nil || child.Parent != parent.ID || child.User != "alice" ||
		!slices.Equal(child.Readable, []string{"b", "c"}) || child.Token == "" {
		t.Fatalf("create through the socket: %s", a)
	}
	for _, body := range []string{`{"skills":["e"]}`, `{"skills":["nope"]}`, `{"user":"bob"}`, `{"parent":"` + other.ID + `"}`, `{"parent":"` + none + `"}`} {
		if a := boxCall(t, b, "POST", "/v1/sessions", body); a.Code == http.StatusOK {
			t.Errorf("create %s through the socket: %s", body, a)
		}
	}
	sameAnswer(t, "a create naming another session its parent", boxCall(t, b, "POST", "/v1/sessions", `{"parent":"`+other.ID+`"}`),
		boxCall(t, b, "POST", "/v1/sessions", `{"parent":"`+none+`"}`), other.ID, none)
	if kids, err := d.db.OpenChildren(ctx, parent.ID); err != nil || len(kids) != 1 {
		t.Errorf("children after the creates: %v, %v; want the one", kids, err)
	}
	if a := boxCall(t, b, "GET", "/v1/sessions/"+child.ID+"/prompt", ""); a.Code != http.StatusOK || !bytes.Contains(a.Body, []byte("<name>b</name>")) {
		t.Errorf("its child's prompt: %s", a)
	}
	readSKILL(t, d, child.ID, "b")
	live := apitest.NextOf(t, events, child.ID)
	if e := live.Data; e.Type != skills.EventActivated || e.Parent != parent.ID || e.Slug != "b" {
		t.Errorf("the child's event in its parent's stream: %+v, want b activated", e)
	}
	// Resumed from the start, the stream has it again, as it was.
	if e := apitest.NextOf(t, boxStream(t, b, own+"/events?after=0"), child.ID); e.ID != live.ID || e.Data.Slug != "b" {
		t.Errorf("the child's event in its parent's stream resumed: %+v, want %+v", e, live)
	}
	if err := d.CloseSession(ctx, parent.ID); err != nil {
		t.Fatal(err)
	}
	for range events { // the stream ends with its session's close
	}
}

// TestChildMayNotInstallNorOpenChildren: a sub-agent's session, bound
// into a sandbox of its own with its API socket, may not install — through
// its socket, with its token, from a path of its sandbox or as bytes — nor
// open a session: 403 each time, the store, the index's skills and
// sessions and the install records unchanged. Its parent installs the same
// path.
func TestChildMayNotInstallNorOpenChildren(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	pb := socketBox(t, d, parent.ID, "demo")
	a := boxCall(t, pb, "POST", "/v1/sessions", `{"skills":["a"]}`)
	var child api.SessionInfo
	if a.Code != http.StatusOK || json.Unmarshal(a.Body, &child) != nil || child.Parent != parent.ID {
		t.Fatalf("a child through its parent's socket: %s", a)
	}
	cb := socketBox(t, d, child.ID, "demo")
	tok := apitest.NewChecked(t, d.http.Handler(""))
	auth := jsonBearer(child.Token)

	before := stateOf(t, d)
	sessions, err := d.db.OpenSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	route := "/v1/sessions/" + child.ID + "/skills"
	for _, body := range []string{`{"path":"/workspace/demo"}`, `{"path":"/workspace/demo","now":true}`, `{"source":"https://example.com/x.git"}`} {
		if a := boxCall(t, cb, "POST", route, body); a.Code != http.StatusForbidden || apitest.ErrorCode(a.Body) != "permission" {
			t.Errorf("the child's install %s through its socket: %s, want 403", body, a)
		}
		if code, _, out := tok.Send("POST", route, auth, []byte(body)); code != http.StatusForbidden || apitest.ErrorCode(out) != "permission" {
			t.Errorf("the child's install %s with its token: %d %s, want 403", body, code, out)
		}
	}
	manifest := "---\nname: posted\ndescription: sent as bytes\n---\nbody\n"
	if a := boxCall(t, cb, "POST", route+"?name=SKILL.md", "", "Content-Type: text/markdown"); a.Code != http.StatusForbidden {
		t.Errorf("the child's upload (no body) through its socket: %s, want 403", a)
	}
	up := bearerOf(child.Token)
	up.Set("Content-Type", "text/markdown")
	if code, _, out := tok.Send("POST", route+"?name=SKILL.md&now=true", up, []byte(manifest)); code != http.StatusForbidden {
		t.Errorf("the child's upload with its token: %d %s, want 403", code, out)
	}
	for _, body := range []string{`{}`, `{"skills":["a"]}`, `{"key":"k"}`} {
		if a := boxCall(t, cb, "POST", "/v1/sessions", body); a.Code != http.StatusForbidden || apitest.ErrorCode(a.Body) != "permission" {
			t.Errorf("the child's create %s through its socket: %s, want 403", body, a)
		}
		if code, _, out := tok.Send("POST", "/v1/sessions", auth, []byte(body)); code != http.StatusForbidden {
			t.Errorf("the child's create %s with its token: %d %s, want 403", body, code, out)
		}
	}
	sameState(t, "a child's refused installs", before, stateOf(t, d))
	if after, err := d.db.OpenSessions(ctx); err != nil || len(after) != len(sessions) {
		t.Errorf("open sessions after a child's creates: %d, want %d (%v)", len(after), len(sessions), err)
	}
	if recs, err := d.db.Installs(ctx, child.ID); err != nil || len(recs) != 0 {
		t.Errorf("the child's install records: %+v, %v; want none", recs, err)
	}
	if _, err := d.db.Skill(ctx, "demo"); err == nil {
		t.Error("a child's refused install made the skill")
	}
	if a := boxCall(t, pb, "POST", "/v1/sessions/"+parent.ID+"/skills", `{"path":"/workspace/demo"}`); a.Code != http.StatusOK {
		t.Errorf("the parent's install of the same path: %s", a)
	}
}

// TestInstallJoinsAtTheNextTurn: a skill the agent installs from its
// sandbox (without now) is not in its session until the session's next
// turn: not through the mount, not in a child's turn (a child's turn does
// not refresh); the parent's turn lists it, the mount then has it, and the
// child that reads all of its parent's follows.
func TestInstallJoinsAtTheNextTurn(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	b := socketBox(t, d, parent.ID, "demo")
	child, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	cat := func() error {
		return b.Command(boxUID, boxUID, "cat", "/skills/demo/SKILL.md").Run()
	}
	own := "/v1/sessions/" + parent.ID
	a := boxCall(t, b, "POST", own+"/skills", `{"path":"/workspace/demo"}`)
	var out api.SessionInstall
	if a.Code != http.StatusOK || json.Unmarshal(a.Body, &out) != nil || out.Slug != "demo" || out.Joined {
		t.Fatalf("install through the socket: %s", a)
	}
	if err := cat(); err == nil {
		t.Fatal("the sandbox reads the skill before the next turn")
	}
	turnOf := func(id string, c func(method, path, body string) boxAnswer) api.Turn {
		t.Helper()
		a := c("POST", "/v1/sessions/"+id+"/turn", `{"message":"$demo please"}`)
		var turn api.Turn
		if a.Code != http.StatusOK || json.Unmarshal(a.Body, &turn) != nil {
			t.Fatalf("the turn of %s: %s", id, a)
		}
		return turn
	}
	viaBox := func(method, path, body string) boxAnswer { return boxCall(t, b, method, path, body) }
	// The child's turn, by its parent's socket (which may not act for
	// it) and by the child's token.
	if a := boxCall(t, b, "POST", "/v1/sessions/"+child.ID+"/turn", `{}`); a.Code != http.StatusNotFound {
		t.Errorf("the parent's credential takes its child's turn: %s, want 404 (not its to act)", a)
	}
	viaToken := func(method, path, body string) boxAnswer {
		c := apitest.NewChecked(t, d.http.Handler(""))
		code, h, data := c.Send(method, path, jsonBearer(child.Token), []byte(body))
		return boxAnswer{Code: code, Header: h, Body: data}
	}
	ct := turnOf(child.ID, viaToken)
	if strings.Contains(ct.Prompt, "demo") || len(ct.Selected) != 0 {
		t.Errorf("the child's turn lists or selects the skill installed: %+v", ct)
	}
	for _, id := range []string{parent.ID, child.ID} {
		if info, err := d.SessionInfo(ctx, id); err != nil || slices.Contains(info.Readable, "demo") {
			t.Errorf("session %s after the child's turn reads %v (%v)", id, info.Readable, err)
		}
	}
	if err := cat(); err == nil {
		t.Fatal("the sandbox reads the skill after a child's turn")
	}

	pt := turnOf(parent.ID, viaBox)
	if !strings.Contains(pt.Prompt, "<name>demo</name>") || len(pt.Selected) != 1 || pt.Selected[0].Slug != "demo" ||
		!strings.Contains(pt.Selected[0].Content, "body of demo") {
		t.Errorf("the parent's next turn: %+v", pt)
	}
	if out, err := b.Command(boxUID, boxUID, "cat", "/skills/demo/ref/notes.md").Output(); err != nil || string(out) != "notes of demo" {
		t.Errorf("the sandbox reads %q (%v) after the turn", out, err)
	}
	if info, err := d.SessionInfo(ctx, child.ID); err != nil || !slices.Contains(info.Readable, "demo") {
		t.Errorf("the child reading all of its parent's after the parent's turn: %v (%v)", info.Readable, err)
	}
}

// TestKeysWithCredentials: a session credential's create with a key
// twice answers the one child (the second time as existing, with no
// token); a platform reader token finds sessions by key and by label but
// opens none.
func TestKeysWithCredentials(t *testing.T) {
	ctx := context.Background()
	d, _, _ := familyDaemon(t)
	top, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"a", "b"}, Key: "thread-9",
		Labels: map[string]string{"team": "x", "env": "ci"}})
	if err != nil {
		t.Fatal(err)
	}
	b := socketBox(t, d, top.ID)
	c := apitest.NewChecked(t, d.http.Handler(""))
	var first, again, viaToken api.SessionInfo
	a := boxCall(t, b, "POST", "/v1/sessions", `{"skills":["a"],"key":"thread-9"}`)
	if a.Code != http.StatusOK || json.Unmarshal(a.Body, &first) != nil || first.Parent != top.ID || first.Existing || first.Token == "" ||
		first.ID == top.ID {
		t.Fatalf("a child keyed as its parent is: %s", a)
	}
	a = boxCall(t, b, "POST", "/v1/sessions", `{"skills":["b"],"key":"thread-9"}`)
	if a.Code != http.StatusOK || json.Unmarshal(a.Body, &again) != nil || again.ID != first.ID || !again.Existing || again.Token != "" {
		t.Errorf("the retry through the socket: %s, want %s existing without a token", a, first.ID)
	}
	code, _, out := c.Send("POST", "/v1/sessions", jsonBearer(top.Token), []byte(`{"key":"thread-9"}`))
	if code != http.StatusOK || json.Unmarshal(out, &viaToken) != nil || viaToken.ID != first.ID || !viaToken.Existing || viaToken.Token != "" {
		t.Errorf("the retry with the parent's token: %d %s", code, out)
	}
	if kids, err := d.db.OpenChildren(ctx, top.ID); err != nil || len(kids) != 1 {
		t.Errorf("children: %v, %v; want one", kids, err)
	}

	reader, err := d.CreateToken(ctx, api.TokenRequest{Name: "loader", Role: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	find := func(query string) []string {
		t.Helper()
		code, _, out := c.Send("GET", "/v1/sessions?"+query, bearerOf(reader.Token), nil)
		var list []api.SessionInfo
		if code != http.StatusOK || json.Unmarshal(out, &list) != nil {
			t.Fatalf("find %s with a reader token: %d %s", query, code, out)
		}
		var ids []string
		for _, s := range list {
			if s.Token != "" {
				t.Errorf("find %s answers a token", query)
			}
			ids = append(ids, s.ID)
		}
		slices.Sort(ids)
		return ids
	}
	both := []string{top.ID, first.ID}
	slices.Sort(both)
	for query, want := range map[string][]string{
		"key=thread-9&user=alice":   both,
		"key=thread-9&user=bob":     nil,
		"label=team=x":              {top.ID},
		"label=team=x&label=env=ci": {top.ID},
		"label=team=x&label=env=no": nil,
	} {
		if got := find(query); !slices.Equal(got, want) {
			t.Errorf("find %s: %v, want %v", query, got, want)
		}
	}
	open, _ := d.db.OpenSessions(ctx)
	for _, body := range []string{`{"user":"alice","skills":["a"],"key":"thread-9"}`, `{"user":"alice","skills":["a"],"key":"new"}`,
		`{"parent":"` + top.ID + `"}`} {
		if code, _, out := c.Send("POST", "/v1/sessions", jsonBearer(reader.Token), []byte(body)); code != http.StatusForbidden || apitest.ErrorCode(out) != "permission" {
			t.Errorf("a reader's create %s: %d %s, want 403", body, code, out)
		}
	}
	if after, _ := d.db.OpenSessions(ctx); len(after) != len(open) {
		t.Errorf("open sessions after a reader's creates: %d, want %d", len(after), len(open))
	}
}

// TestReadersActivateNothing: what a reader token may call, and what a
// session's credential may call on its child, changes nothing in the
// session: no route of theirs activates a skill (a message's mentions are
// resolved and activated by the session's own credential alone), and the
// session's activations and events stay as they were.
func TestReadersActivateNothing(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	child, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := d.CreateToken(ctx, api.TokenRequest{Name: "dash", Role: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	c := apitest.NewChecked(t, d.http.Handler(""))
	bodies := map[string][]byte{
		"/mentions": []byte(`{"text":"/skill:d now\nand use $a"}`),
		"/turn":     []byte(`{"message":"/skill:d now\nand use $a"}`),
		"/globs":    []byte(`{"paths":["x"]}`),
	}
	for _, tc := range []struct {
		who, tok, id string
	}{
		{"a reader", reader.Token, parent.ID},
		{"a reader", reader.Token, child.ID},
		{"its parent's credential", parent.Token, child.ID},
	} {
		for route, body := range bodies {
			c.Send("POST", "/v1/sessions/"+tc.id+route, jsonBearer(tc.tok), body)
		}
		c.Send("GET", "/v1/sessions/"+tc.id+"/resolve?uri=skill://a/SKILL.md", bearerOf(tc.tok), nil)
		c.Send("GET", "/v1/sessions/"+tc.id+"/prompt", bearerOf(tc.tok), nil)
		act, err := d.Activations(ctx, tc.id)
		if err != nil || len(act.Activated) != 0 {
			t.Errorf("%s's calls on %s activated %+v (%v)", tc.who, tc.id, act, err)
		}
	}
	// The session's own credential does activate.
	if code, _, out := c.Send("POST", "/v1/sessions/"+child.ID+"/mentions", jsonBearer(child.Token), bodies["/mentions"]); code != http.StatusOK {
		t.Fatalf("the child's own mentions: %d %s", code, out)
	}
	if act, err := d.Activations(ctx, child.ID); err != nil || len(act.Activated) != 2 {
		t.Errorf("the child's own mentions activated %+v (%v), want a and d", act, err)
	}
}

// TestChildSocketGoesWithItsParent: a child's API socket, in a sandbox
// of its own, is withdrawn when its parent closes (which closes it): its
// file removed, nothing answering.
func TestChildSocketGoesWithItsParent(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	child, err := d.CreateSession(ctx, api.CreateRequest{Parent: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	pb := socketBox(t, d, parent.ID)
	cb := socketBox(t, d, child.ID)
	if a := boxCall(t, cb, "GET", "/v1/whoami", ""); a.Code != http.StatusOK || !bytes.Contains(a.Body, []byte(child.ID)) {
		t.Fatalf("the child's socket: %s", a)
	}
	if err := d.CloseSession(ctx, parent.ID); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*sandboxtest.Box{"parent": pb, "child": cb} {
		if err := b.Command(boxUID, boxUID, "test", "-e", boxSocket).Run(); err == nil {
			t.Errorf("the %s's socket is still in its sandbox after the parent closed", name)
		}
		if out, err := b.Command(boxUID, boxUID, sandboxtest.Curl(boxSocket, nil, "GET", "/v1/whoami", "")...).CombinedOutput(); err == nil {
			t.Errorf("the %s's socket answers after the parent closed: %s", name, out)
		}
	}
	if n := d.sockets.count(); n != 0 {
		t.Errorf("%d sockets served after the family closed", n)
	}
}

// TestInstallOfATakenSlugTellsNothingOfIt: the agent installing a skill
// whose slug another user's private skill or a shared skill has gets a
// skill of its user's under another slug; the skill that had the slug is
// unchanged, and the answer names none of its readers.
func TestInstallOfATakenSlugTellsNothingOfIt(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	dir := skilltest.WriteDir(t, filepath.Join(t.TempDir(), "diary"), skilltest.Skill("name: diary\ndescription: bob's own", "body\n", nil))
	if _, err := d.cat.Import(ctx, catalog.ImportRequest{Source: dir, Share: &skills.Share{Read: skills.Scope{Kind: skills.ScopeUser, IDs: []string{"bob"}}}}); err != nil {
		t.Fatal(err)
	}
	b := socketBox(t, d, parent.ID, "diary", "e")
	for _, slug := range []string{"diary", "e"} {
		held := sessionVersion(t, d, slug)
		a := boxCall(t, b, "POST", "/v1/sessions/"+parent.ID+"/skills", `{"path":"/workspace/`+slug+`"}`)
		var out api.SessionInstall
		if a.Code != http.StatusOK || json.Unmarshal(a.Body, &out) != nil || out.Slug == slug || out.RenamedFrom != slug ||
			bytes.Contains(a.Body, []byte("bob")) || bytes.Contains(a.Body, []byte("global")) {
			t.Errorf("the install of a skill named %s: %s; want another slug, naming no reader", slug, a)
			continue
		}
		if v := sessionVersion(t, d, slug); v != held {
			t.Errorf("the install changed %s: version %s, was %s", slug, v, held)
		}
		if sk, err := d.db.Skill(ctx, out.Slug); err != nil || !privateTo(sk, "alice") {
			t.Errorf("the skill installed as %s: %+v, %v; want alice's own", out.Slug, sk, err)
		}
	}
}

// TestSocketTellsNothingBeyondItsSet: through the socket, what names a
// skill of the catalog outside the session's readable set — a skill://
// read, a child's request, a message's mention in a turn, globs — answers
// as a skill that does not exist.
func TestSocketTellsNothingBeyondItsSet(t *testing.T) {
	d, _, parent := familyDaemon(t)
	install(t, d, "name: outsider\ndescription: read by everyone, not asked for", skills.ScopeGlobal)
	b := socketBox(t, d, parent.ID)
	own := "/v1/sessions/" + parent.ID
	for _, tc := range []struct{ method, path, body string }{
		{"GET", own + "/resolve?uri=skill://%s", ""},
		{"GET", own + "/resolve?uri=skill://%s/SKILL.md", ""},
		{"POST", "/v1/sessions", `{"skills":["%s"]}`},
		{"POST", own + "/turn", `{"message":"$%s and /skill:%s x"}`},
		{"POST", own + "/mentions", `{"text":"$%s"}`},
	} {
		call := func(slug string) boxAnswer {
			return boxCall(t, b, tc.method, strings.ReplaceAll(tc.path, "%s", slug), strings.ReplaceAll(tc.body, "%s", slug))
		}
		sameAnswer(t, tc.method+" "+tc.path+" "+tc.body, call("outsider"), call("nonesuch"), "outsider", "nonesuch")
	}
}

// TestMovedSessionLosesItsSocket: a session moved to another host while
// its socket is in a sandbox: the host it left installs nothing for it
// (that is the other host's to do) and, once it drops its binds of it,
// withdraws the socket.
func TestMovedSessionLosesItsSocket(t *testing.T) {
	ctx := context.Background()
	a, b := newFleet(t)
	s, err := a.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	box := socketBox(t, a, s.ID, "demo")
	if ans := boxCall(t, box, "GET", "/v1/whoami", ""); ans.Code != http.StatusOK {
		t.Fatalf("whoami before the move: %s", ans)
	}
	if _, err := b.Move(ctx, s.ID, true); err != nil {
		t.Fatal(err)
	}
	before := stateOf(t, a)
	if ans := boxCall(t, box, "POST", "/v1/sessions/"+s.ID+"/skills", `{"path":"/workspace/demo","now":true}`); ans.Code == http.StatusOK {
		t.Errorf("the host it left installs for the session: %s", ans)
	}
	sameState(t, "an install on the host a session left", before, stateOf(t, a))
	if err := a.dropStale(ctx); err != nil {
		t.Fatal(err)
	}
	if err := box.Command(boxUID, boxUID, "test", "-e", boxSocket).Run(); err == nil {
		t.Error("the socket is still in the sandbox after its host dropped the session's binds")
	}
	if n := a.sockets.count(); n != 0 {
		t.Errorf("the host it left serves %d sockets", n)
	}
}

// TestChildrenAreBounded: a session's credential opens at most
// MaxChildren open children; one more is refused, the index unchanged,
// while a retry with an open child's key still answers it; once it closes
// one (which it may: not itself, nor another session, nor its parent from
// a child), another may open.
func TestChildrenAreBounded(t *testing.T) {
	ctx := context.Background()
	d, _, parent := familyDaemon(t)
	c := apitest.NewChecked(t, d.http.Handler(""))
	create := func(body string) (int, api.SessionInfo, []byte) {
		t.Helper()
		code, _, out := c.Send("POST", "/v1/sessions", jsonBearer(parent.Token), []byte(body))
		var info api.SessionInfo
		json.Unmarshal(out, &info)
		return code, info, out
	}
	var first api.SessionInfo
	for i := range MaxChildren {
		code, info, out := create(fmt.Sprintf(`{"skills":["a"],"key":"k%d"}`, i))
		if code != http.StatusOK {
			t.Fatalf("child %d: %d %s", i, code, out)
		}
		if i == 0 {
			first = info
		}
	}
	code, _, out := create(`{"skills":["a"],"key":"one-more"}`)
	if code != http.StatusBadRequest || apitest.ErrorCode(out) != "invalid" || !strings.Contains(string(out), "the most it may have") {
		t.Errorf("one child more: %d %s", code, out)
	}
	if kids, err := d.db.OpenChildren(ctx, parent.ID); err != nil || len(kids) != MaxChildren {
		t.Errorf("open children: %d, %v; want %d", len(kids), err, MaxChildren)
	}
	if code, again, out := create(`{"key":"k0"}`); code != http.StatusOK || again.ID != first.ID || !again.Existing {
		t.Errorf("a retry with an open child's key at the cap: %d %s", code, out)
	}
	other, err := d.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tok, id string }{{parent.Token, parent.ID}, {parent.Token, other.ID}, {first.Token, parent.ID}, {first.Token, first.ID}} {
		if code, _, out := c.Send("DELETE", "/v1/sessions/"+tc.id, bearerOf(tc.tok), nil); code == http.StatusOK {
			t.Errorf("DELETE %s: %d %s", tc.id, code, out)
		}
	}
	for _, id := range []string{parent.ID, other.ID, first.ID} {
		if closed, err := d.SessionClosed(ctx, id); err != nil || closed {
			t.Errorf("session %s after the refused closes: closed %v, %v", id, closed, err)
		}
	}
	if code, _, out := c.Send("DELETE", "/v1/sessions/"+first.ID, bearerOf(parent.Token), nil); code != http.StatusOK {
		t.Fatalf("the parent closes its child: %d %s", code, out)
	}
	if code, _, out := create(`{"skills":["a"],"key":"one-more"}`); code != http.StatusOK {
		t.Errorf("a child after one closed: %d %s", code, out)
	}
}
