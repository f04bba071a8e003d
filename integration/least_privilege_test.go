package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/fs/bind/sandboxtest"
	"skillfs/skills/skilltest"
)

// agentSocket is where the tests of this file put a session's API socket
// in its sandbox: beside its view at /home/gem/skills.
const agentSocket = "/home/gem/.skillfs.sock"

// call sends one request through the sandbox's API socket, as the agent's
// uid, and returns the answer as sent.
func (sb *agentSandbox) call(method, path, body string, hdr ...string) sandboxtest.Answer {
	sb.t.Helper()
	r := sb.run(agentUID, sandboxtest.Curl(agentSocket, []string{"-i", "--raw"}, method, path, body, hdr...)...)
	if r.code != 0 {
		sb.t.Fatalf("curl %s %s in the sandbox: exit %d %s", method, path, r.code, r.stderr)
	}
	a, err := sandboxtest.ParseAnswer([]byte(r.stdout))
	if err != nil {
		sb.t.Fatalf("%s %s: %v", method, path, err)
	}
	return a
}

// stream follows path's event stream through the sandbox's socket (curl
// inside, as the agent's uid); its events come on the channel until the
// stream ends.
func (sb *agentSandbox) stream(path string) <-chan apitest.SSE {
	sb.t.Helper()
	cmd := sb.command(agentUID, sandboxtest.Curl(agentSocket, []string{"-N"}, "GET", path, "")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		sb.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		sb.t.Fatal(err)
	}
	sb.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return apitest.Stream(sb.t, out)
}

// answersAs fails unless got is want's answer byte for byte, once the word
// each asked for (gotWord, wantWord) is swapped.
func answersAs(t testing.TB, what string, got, want sandboxtest.Answer, gotWord, wantWord string) {
	t.Helper()
	if !got.Same(want, gotWord, wantWord) {
		t.Errorf("%s: %s\nwant it answered as %s", what, got, want)
	}
}

// workspaceSkill writes a skill folder named name into the sandbox's home,
// the agent's.
func (sb *agentSandbox) workspaceSkill(name string) {
	sb.t.Helper()
	dir := filepath.Join(sb.home, name)
	skilltest.WriteDir(sb.t, dir, skilltest.Skill("name: "+name+"\ndescription: "+name+" from the workspace", "body of "+name+"\n",
		map[string]string{"notes.md": "notes of " + name}))
	uid, _ := strconv.Atoi(agentUID)
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, uid, uid)
		}
		return nil
	})
}

// keyedCreated is what a create answers: the session and, this once, its
// token.
type keyedCreated struct {
	keyedSession
	Token string `json:"token"`
}

// TestLeastPrivilegeThroughTheBinary: a session mounted into a sandbox
// with its API socket, called by curl inside as the agent's uid. It reads
// its prompt, activations, turn and events and learns who it is; another
// session's id answers as no session's, the catalog and the daemon's
// routes as no route; X-Skillfs-As and a bearer token are refused on the
// socket. A create on the socket opens a child of that session (a retry
// with its key the same child), whose events are in its parent's stream;
// the child may not install nor open children, by its socket or its
// token, the catalog unchanged. A skill the agent installs from its
// sandbox joins at its session's next turn, not at its child's. A reader
// token finds the session by key and label and opens none. The agent
// closes a child it opened, and no other session. Rotated, the
// old token is refused; closed, every token of the family is. The daemon's
// log, at debug level, holds none of the tokens.
func TestLeastPrivilegeThroughTheBinary(t *testing.T) {
	e, d, tcp := newCredEnv(t, "--debug")
	var s, other keyedCreated
	e.okJSON(&s, "session", "create", "--user", "alice", "--skills", "alpha,beta", "--key", "thread-1", "--label", "team=x")
	e.okJSON(&other, "session", "create", "--user", "alice", "--skills", "gamma")
	tokens := []string{s.Token, other.Token, credListener}
	sb := startAgentSandbox(t)
	sb.workspaceSkill("mine")
	e.ok("session", "mount", s.ID, "/home/gem/skills", "--pid", strconv.Itoa(sb.pid), "--api-socket", agentSocket)
	own := "/v1/sessions/" + s.ID

	// Its own session.
	if a := sb.call("GET", own+"/prompt", ""); a.Code != 200 || !bytes.Contains(a.Body, []byte("alpha")) || bytes.Contains(a.Body, []byte("gamma")) {
		t.Errorf("its prompt: %s", a)
	}
	var turn struct {
		Prompt   string `json:"prompt"`
		Selected []struct {
			Slug string `json:"slug"`
			Why  string `json:"why"`
		} `json:"selected"`
	}
	if a := sb.call("POST", own+"/turn", `{"message":"use $beta"}`); a.Code != 200 || json.Unmarshal(a.Body, &turn) != nil ||
		len(turn.Selected) != 1 || turn.Selected[0].Slug != "beta" {
		t.Errorf("its turn: %s", a)
	}
	if a := sb.call("GET", own+"/activations", ""); a.Code != 200 || !bytes.Contains(a.Body, []byte(`"beta"`)) {
		t.Errorf("its activations: %s", a)
	}
	var who struct{ Role, Session, User, Token string }
	if a := sb.call("GET", "/v1/whoami", ""); a.Code != 200 || json.Unmarshal(a.Body, &who) != nil || who.Role != "session" ||
		who.Session != s.ID || who.User != "alice" {
		t.Errorf("whoami: %s", a)
	}

	// Others: as nothing there.
	const none = "0123456789abcdef0123456789abcdef"
	for _, route := range []struct{ method, suffix, body string }{
		{"GET", "", ""}, {"GET", "/prompt", ""}, {"GET", "/activations", ""}, {"GET", "/events?after=0", ""},
		{"POST", "/turn", `{}`}, {"POST", "/skills", `{"path":"/home/gem/mine"}`}, {"DELETE", "", ""},
	} {
		answersAs(t, route.method+" another session's "+route.suffix, sb.call(route.method, "/v1/sessions/"+other.ID+route.suffix, route.body),
			sb.call(route.method, "/v1/sessions/"+none+route.suffix, route.body), other.ID, none)
	}
	for _, path := range []string{"/v1/skills", "/v1/skills/gamma", "/v1/catalog", "/v1/events", "/v1/status", "/metrics", "/v1/tokens"} {
		answersAs(t, "GET "+path, sb.call("GET", path, ""), sb.call("GET", "/v1/nothing", ""), path, "/v1/nothing")
	}
	for _, hdr := range []string{"X-Skillfs-As: alice", "X-Skillfs-As: operator", "Authorization: Bearer " + other.Token,
		"Authorization: Bearer " + s.Token, "Authorization: Bearer " + credListener} {
		if a := sb.call("GET", own+"/prompt", "", hdr); a.Code != 403 || apitest.ErrorCode(a.Body) != "permission" {
			t.Errorf("its prompt with %.20s…: %s, want 403", hdr, a)
		}
	}

	// A child, by the socket.
	events := sb.stream(own + "/events")
	var child, again keyedCreated
	a := sb.call("POST", "/v1/sessions", `{"skills":["alpha"],"key":"thread-1"}`)
	if a.Code != 200 || json.Unmarshal(a.Body, &child) != nil || child.Parent != s.ID || child.User != "alice" ||
		!slices.Equal(child.Readable, []string{"alpha"}) || child.Token == "" || child.ID == s.ID {
		t.Fatalf("a child by the socket: %s", a)
	}
	tokens = append(tokens, child.Token)
	if a := sb.call("POST", "/v1/sessions", `{"skills":["beta"],"key":"thread-1"}`); a.Code != 200 || json.Unmarshal(a.Body, &again) != nil ||
		again.ID != child.ID || !again.Existing || again.Token != "" {
		t.Errorf("its retry: %s, want %s, existing, no token", a, child.ID)
	}
	if _, err := fetch(filepath.Join(child.Path, "alpha", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if ev := apitest.NextOf(t, events, child.ID); ev.Data.Type != "activated" || ev.Data.Parent != s.ID || ev.Data.Slug != "alpha" {
		t.Errorf("the child's event in its parent's stream: %+v", ev.Data)
	}
	if a := sb.call("GET", "/v1/sessions/"+child.ID+"/activations", ""); a.Code != 200 || !bytes.Contains(a.Body, []byte(`"alpha"`)) {
		t.Errorf("its child's activations: %s", a)
	}

	// The child may not install nor open children: by its own socket in a
	// sandbox of its own, and by its token.
	csb := startAgentSandbox(t)
	csb.workspaceSkill("mine")
	e.ok("session", "mount", child.ID, "/home/gem/skills", "--pid", strconv.Itoa(csb.pid), "--api-socket", agentSocket)
	catalog := e.ok("skill", "list", "--json")
	installs := "/v1/sessions/" + child.ID + "/skills"
	for _, body := range []string{`{"path":"/home/gem/mine"}`, `{"path":"/home/gem/mine","now":true}`} {
		if a := csb.call("POST", installs, body); a.Code != 403 || apitest.ErrorCode(a.Body) != "permission" {
			t.Errorf("the child's install %s by its socket: %s, want 403", body, a)
		}
		if code, _, out := tcp.send(t, "POST", installs, child.Token, "", json.RawMessage(body)); code != 403 {
			t.Errorf("the child's install %s by its token: %d %s, want 403", body, code, out)
		}
	}
	if a := csb.call("POST", "/v1/sessions", `{}`); a.Code != 403 || apitest.ErrorCode(a.Body) != "permission" {
		t.Errorf("the child's create by its socket: %s, want 403", a)
	}
	if code, _, out := tcp.send(t, "POST", "/v1/sessions", child.Token, "", map[string]any{"skills": []string{"alpha"}}); code != 403 {
		t.Errorf("the child's create by its token: %d %s, want 403", code, out)
	}
	if after := e.ok("skill", "list", "--json"); after != catalog {
		t.Fatalf("a child's refused installs changed the catalog:\n%s\n%s", catalog, after)
	}
	var family []keyedSession
	e.okJSON(&family, "session", "list", "--user", "alice")
	if len(family) != 3 {
		t.Errorf("alice's sessions after the child's creates: %+v, want 3", family)
	}

	// An install by the agent joins at its session's next turn.
	readMine := func(sb *agentSandbox) result { return sb.run(agentUID, "cat", "/home/gem/skills/mine/notes.md") }
	if a := sb.call("POST", own+"/skills", `{"path":"/home/gem/mine"}`); a.Code != 200 || !bytes.Contains(a.Body, []byte(`"slug": "mine"`)) ||
		bytes.Contains(a.Body, []byte(`"joined": true`)) {
		t.Fatalf("the agent's install: %s", a)
	}
	if r := readMine(sb); r.code == 0 {
		t.Fatalf("the skill is read before the next turn: %s", r.stdout)
	}
	if a := csb.call("POST", "/v1/sessions/"+child.ID+"/turn", `{"message":"$mine"}`); a.Code != 200 || bytes.Contains(a.Body, []byte("mine")) {
		t.Errorf("the child's turn: %s, want nothing of the skill installed", a)
	}
	if r := readMine(sb); r.code == 0 {
		t.Fatalf("the skill is read after a child's turn: %s", r.stdout)
	}
	if a := sb.call("POST", own+"/turn", `{"message":"hello"}`); a.Code != 200 || json.Unmarshal(a.Body, &turn) != nil ||
		!strings.Contains(turn.Prompt, "<name>mine</name>") {
		t.Errorf("the next turn: %s, want the skill installed listed", a)
	}
	if r := readMine(sb); r.code != 0 || r.stdout != "notes of mine" {
		t.Errorf("the skill after the next turn: exit %d %q %s", r.code, r.stdout, r.stderr)
	}

	// A reader finds, opens nothing.
	reader := strings.TrimSpace(e.ok("token", "create", "loader", "--role", "reader"))
	tokens = append(tokens, reader)
	for query, want := range map[string][]string{
		"key=thread-1&user=alice": {s.ID, child.ID}, "label=team=x": {s.ID}, "key=thread-2&user=alice": nil,
	} {
		code, _, body := tcp.send(t, "GET", "/v1/sessions?"+query, reader, "", nil)
		var list []keyedCreated
		var got []string
		json.Unmarshal(body, &list)
		for _, x := range list {
			got = append(got, x.ID)
			if x.Token != "" {
				t.Errorf("find %s answers a token", query)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if code != 200 || !slices.Equal(got, want) {
			t.Errorf("find %s with a reader token: %d %s, want %v", query, code, body, want)
		}
	}
	if code, _, body := tcp.send(t, "POST", "/v1/sessions", reader, "", map[string]any{"user": "alice", "key": "thread-1"}); code != 403 {
		t.Errorf("a reader's create: %d %s, want 403", code, body)
	}

	// The agent closes a sub-agent it opened, and nothing else.
	var brief keyedCreated
	if a := sb.call("POST", "/v1/sessions", `{"skills":["beta"]}`); a.Code != 200 || json.Unmarshal(a.Body, &brief) != nil {
		t.Fatalf("another child: %s", a)
	}
	tokens = append(tokens, brief.Token)
	for _, id := range []string{s.ID, other.ID} {
		if a := sb.call("DELETE", "/v1/sessions/"+id, ""); a.Code == 200 {
			t.Errorf("the agent closes session %s: %s", id, a)
		}
	}
	if a := sb.call("DELETE", "/v1/sessions/"+brief.ID, ""); a.Code != 200 {
		t.Errorf("the agent closes its child: %s", a)
	}
	if r := e.run("session", "show", brief.ID); r.code == 0 {
		t.Errorf("the child closed by the agent: %s", r.stdout)
	}

	// Rotated, then closed.
	rotated := strings.TrimSpace(e.ok("session", "token", s.ID, "--rotate"))
	tokens = append(tokens, rotated)
	if code, _, _ := tcp.send(t, "GET", own, s.Token, "", nil); code != 401 {
		t.Errorf("the token before its rotation: %d, want 401", code)
	}
	if code, _, body := tcp.send(t, "GET", own, rotated, "", nil); code != 200 {
		t.Errorf("the rotated token: %d %s", code, body)
	}
	e.ok("session", "close", s.ID)
	for _, tok := range []string{rotated, child.Token} {
		if code, _, _ := tcp.send(t, "GET", "/v1/whoami", tok, "", nil); code != 401 {
			t.Errorf("a token of the closed family: %d, want 401", code)
		}
	}
	if code := d.stop(); code != 0 {
		t.Errorf("SIGTERM exit %d", code)
	}
	logs := d.logs()
	if !strings.Contains(logs, "level=DEBUG") || !strings.Contains(logs, "peer_uid="+agentUID) {
		t.Errorf("the log has no debug lines or no peer of the socket:\n%s", logs)
	}
	for _, tok := range tokens {
		if strings.Contains(logs, tok) {
			t.Errorf("the daemon's log holds a token (%.10s…)", tok)
		}
	}
}

// TestSessionTokenDiesWithAMoveThroughTheBinary: on a fleet of two hosts,
// a session's token is refused on both once another host took the session
// over; the new host's rotation makes one that works there. Neither log
// holds a token.
func TestSessionTokenDiesWithAMoveThroughTheBinary(t *testing.T) {
	a, b := newFleet(t)
	da := a.serve("--host-name", "alpha", "--debug")
	a.ok("user", "add", "alice")
	db := b.serve("--host-name", "beta", "--debug")
	var s keyedCreated
	a.okJSON(&s, "session", "create", "--user", "alice", "--all")
	onA, onB := sockCredClient(a.home), sockCredClient(b.home)
	if code, _, body := onA.send(t, "GET", "/v1/sessions/"+s.ID, s.Token, "", nil); code != 200 {
		t.Fatalf("the token on its host: %d %s", code, body)
	}
	b.ok("session", "move", s.ID, "--force")
	for name, c := range map[string]*credClient{"alpha": onA, "beta": onB} {
		if code, _, body := c.send(t, "GET", "/v1/sessions/"+s.ID, s.Token, "", nil); code != 401 {
			t.Errorf("the token on %s after the move: %d %s, want 401", name, code, body)
		}
	}
	if r := a.run("session", "token", s.ID, "--rotate"); r.code == 0 {
		t.Errorf("the host it left rotates its token: %s", r.stdout)
	}
	fresh := strings.TrimSpace(b.ok("session", "token", s.ID, "--rotate"))
	if code, _, body := onB.send(t, "GET", "/v1/sessions/"+s.ID+"/prompt", fresh, "", nil); code != 200 {
		t.Errorf("the token its new host made: %d %s", code, body)
	}
	for _, d := range []*daemon{da, db} {
		d.stop()
		for _, tok := range []string{s.Token, fresh} {
			if strings.Contains(d.logs(), tok) {
				t.Errorf("a daemon's log holds a token (%.10s…)", tok)
			}
		}
	}
}
