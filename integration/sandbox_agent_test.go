package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The end-to-end suite of agents in sandboxes holding session credentials:
// tokens, the session's own API socket in the sandbox, installs from the
// sandbox, sub-agents, the turn. Agents use curl and the Python client, as
// the README shows them.

// agentSession is a session as the API answers its create.
type agentSession struct {
	ID       string            `json:"id"`
	User     string            `json:"user"`
	Readable []string          `json:"readable"`
	Path     string            `json:"path"`
	Token    string            `json:"token"`
	Key      string            `json:"key"`
	Labels   map[string]string `json:"labels"`
	Parent   string            `json:"parent"`
	Existing bool              `json:"existing"`
}

// agentTurn is the answer of a turn.
type agentTurn struct {
	Prompt   string `json:"prompt"`
	Selected []struct {
		Slug    string `json:"slug"`
		Name    string `json:"name"`
		Path    string `json:"path"`
		Why     string `json:"why"`
		Args    string `json:"args"`
		Content string `json:"content"`
	} `json:"selected"`
	Text string `json:"text"`
}

// selected lists a turn's selection as "slug:why".
func (t agentTurn) selected() []string {
	out := []string{}
	for _, s := range t.Selected {
		out = append(out, s.Slug+":"+s.Why)
	}
	return out
}

// agentInstall is the answer of an install.
type agentInstall struct {
	Slug     string   `json:"slug"`
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	Joined   bool     `json:"joined"`
	Warnings []string `json:"warnings"`
}

// boxJSON runs script in the box and decodes its output into v.
func (b *agentBox) json(v any, script string) {
	b.t.Helper()
	out := b.ok(script)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		b.t.Fatalf("in the sandbox: %s: decode %q: %v", script, out, err)
	}
}

// refused runs script in the box, wants exit code and the client's error
// JSON with errCode on standard error, and returns the error's message.
func (b *agentBox) refused(code int, errCode, script string) string {
	b.t.Helper()
	r := b.run(script)
	var body struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if r.code != code || json.Unmarshal([]byte(r.stderr), &body) != nil || body.Code != errCode {
		b.t.Fatalf("in the sandbox: %s: exit %d, stdout %q, stderr %q; want exit %d with code %q", script, r.code, r.stdout, r.stderr, code, errCode)
	}
	return body.Error
}

// storeState is what a refused install must leave as it was: every skill of
// the catalog with its versions, and the store's counts.
func storeState(e *env) string {
	e.t.Helper()
	var st struct {
		Skills   int `json:"skills"`
		Versions int `json:"versions"`
	}
	e.okJSON(&st, "status")
	var list []struct {
		Slug    string `json:"slug"`
		Version string `json:"version"`
		Share   any    `json:"share"`
	}
	e.okJSON(&list, "skill", "list")
	return fmt.Sprintf("%d skills, %d versions: %+v", st.Skills, st.Versions, list)
}

// boundBox starts a box (with more bwrap options opts, as startAgentBox),
// binds session id's view into it at /home/gem/skills with its API socket
// at boxAPISocket, and returns it.
func boundBox(t *testing.T, e *env, id string, opts ...string) *agentBox {
	t.Helper()
	requireCommand(t, "curl")
	b := startAgentBox(t, opts...)
	e.ok("session", "mount", id, boxSkills, "--pid", b.pidArg(), "--api-socket", boxAPISocket)
	return b
}

// TestAgentSessionToken: with the token its create answered, the Python
// client reads its own session (show, prompt, mentions, activations,
// audit, events with resume, a file by its URI, the turn) and nothing
// else: another session, the catalog and the daemon's status look like no
// route (exit 3), an upload to another session too, refused before its
// body is read; the session list and closing its own session look like a
// method the path does not take (405, exit 5), refreshing it like no
// route; naming a user to act for is refused (403, exit 4). Another
// session's answers are those of a session that does not exist, byte for
// byte. A rotation kills the old token, a close the new one (401, exit 4).
// No token is in the daemon's log, its metrics or the events.
func TestAgentSessionToken(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	sock := filepath.Join(e.home, "skillfs.sock")
	op := newPyClient(t, "--socket", sock)
	var s, other agentSession
	op.json(&s, "create", "--user", "alice", "--skills", "release-notes")
	op.json(&other, "create", "--user", "bob", "--skills", "commit-messages")
	if !strings.HasPrefix(s.Token, "sfs_s_") || s.Token == other.Token {
		t.Fatalf("the creates answered tokens %q and %q", s.Token, other.Token)
	}
	otherBefore := op.ok("show", other.ID)
	if strings.Contains(otherBefore, `"token"`) {
		t.Errorf("show answers a token: %s", otherBefore)
	}
	agent := newPyClient(t, "--socket", sock, "--token", s.Token)

	var who struct {
		Role    string `json:"role"`
		Session string `json:"session"`
		User    string `json:"user"`
		Token   string `json:"token"`
	}
	agent.json(&who, "whoami")
	if who.Role != "session" || who.Session != s.ID || who.User != "alice" || who.Token != "" {
		t.Errorf("whoami with the session's token: %+v", who)
	}
	sameJSON(t, "show with the token", agent.ok("show", s.ID), op.ok("show", s.ID))
	if got, want := agent.ok("prompt", s.ID), op.ok("prompt", s.ID); got != want {
		t.Errorf("prompt with the token %q, the operator's %q", got, want)
	}
	if _, err := fetch(filepath.Join(s.Path, "release-notes", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "activations with the token", agent.ok("activations", s.ID), op.ok("activations", s.ID))
	sameJSON(t, "audit with the token", agent.ok("audit", s.ID), op.ok("audit", s.ID))
	sameJSON(t, "mentions with the token", agent.ok("mentions", s.ID, "$commit-messages"), op.ok("mentions", s.ID, "$commit-messages"))
	first := agent.stream(s.ID, "--after", "0", "--count", "1")
	seen := first.wantEvents(t, 0, "activated release-notes")
	first.ended(t)
	manifest, err := os.ReadFile(filepath.Join(s.Path, "release-notes", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got := agent.ok("resolve", s.ID, "skill://release-notes/SKILL.md"); got != string(manifest) {
		t.Errorf("resolve with the token: %q", got)
	}
	var turn agentTurn
	agent.json(&turn, "turn", s.ID, "Write the notes.", "--format", "json")
	if !strings.Contains(turn.Prompt, "release-notes") {
		t.Errorf("the turn with the token: %+v", turn)
	}

	for _, args := range [][]string{
		{"show", other.ID},
		{"prompt", other.ID},
		{"activations", other.ID},
		{"audit", other.ID},
		{"mentions", other.ID, "$commit-messages"},
		{"resolve", other.ID, "skill://commit-messages/SKILL.md"},
		{"events", other.ID, "--after", "0", "--count", "1"},
		{"turn", other.ID, "hi"},
		// Larger than the socket's buffers: the refusal comes while the
		// client is still sending.
		{"install", other.ID, "--file", bigUpload(t)},
		{"close", other.ID},
		{"refresh", s.ID},
		{"token", s.ID},
		{"call", "GET", "/v1/events?after=0"},
		{"call", "GET", "/v1/skills"},
		{"call", "GET", "/v1/skills/release-notes"},
		{"call", "GET", "/v1/status"},
		{"call", "GET", "/v1/tokens"},
		{"call", "DELETE", "/v1/skills/release-notes"},
		{"call", "POST", "/v1/drafts", "--data", `{"source":"/etc"}`},
	} {
		t.Run("refused/"+strings.Join(args, " "), func(t *testing.T) {
			newPyClient(t, "--socket", sock, "--token", s.Token).refused(3, "not_found", args...)
		})
	}
	// What the credential may call on a path is all a refusal shows of it:
	// its own session's path takes GET, the session list's a create.
	for _, tc := range []struct {
		args  []string
		allow string
	}{
		{[]string{"close", s.ID}, "GET, HEAD"},
		{[]string{"find"}, "POST"},
		{[]string{"find", "--key", "thread-1", "--user", "bob"}, "POST"},
	} {
		if msg := agent.refused(5, "invalid", tc.args...); !strings.HasSuffix(msg, ": method not allowed (allowed: "+tc.allow+")") {
			t.Errorf("%v with the session's token: %q, want a method not allowed, allowed %s", tc.args, msg, tc.allow)
		}
	}
	noOracle(t, e.home, s.Token, s.ID, other.ID)
	for _, user := range []string{"bob", "alice", "operator"} {
		newPyClient(t, "--socket", sock, "--token", s.Token, "--as", user).refused(4, "permission", "show", s.ID)
	}
	if now := op.ok("show", other.ID); now != otherBefore {
		t.Errorf("the other session changed:\n%s\nwas\n%s", now, otherBefore)
	}

	var rotated struct {
		Session string `json:"session"`
		Token   string `json:"token"`
	}
	op.json(&rotated, "token", s.ID)
	if rotated.Session != s.ID || !strings.HasPrefix(rotated.Token, "sfs_s_") || rotated.Token == s.Token {
		t.Fatalf("rotate: %+v", rotated)
	}
	agent.refused(4, "permission", "show", s.ID)
	fresh := newPyClient(t, "--socket", sock, "--token", rotated.Token)
	fresh.ok("show", s.ID)
	// Its stream resumes with the new token (and is open before the close
	// kills the token: the activation the mention made came through it).
	again := fresh.stream(s.ID, "--after", seen[0].ID)
	mentioned := again.wantEvents(t, seen[0].Event.ID, "activated commit-messages")
	op.ok("close", s.ID)
	for _, ev := range again.untilClosed(t, mentioned[0].Event.ID) {
		if ev.Event.Session != s.ID || ev.describe() == "activated release-notes" {
			t.Errorf("resumed after %s, the stream sent %s %s of session %s", seen[0].ID, ev.ID, ev.describe(), ev.Event.Session)
		}
	}
	fresh.refused(4, "permission", "show", s.ID)
	fresh.refused(4, "permission", "whoami")

	metrics := op.ok("call", "GET", "/metrics")
	events := op.ok("events", "--after", "0", "--count", "2")
	for _, tok := range []string{s.Token, rotated.Token, other.Token} {
		for what, text := range map[string]string{"log": d.logs(), "metrics": metrics, "events": events} {
			if strings.Contains(text, tok) || strings.Contains(text, tok[len("sfs_s_"):]) {
				t.Errorf("the daemon's %s holds a session token", what)
			}
		}
	}
}

// bigUpload is a file of 8 MiB named as a ZIP.
func bigUpload(t *testing.T) string {
	t.Helper()
	return writeFileT(t, "big.zip", strings.Repeat("\x00", 8<<20))
}

// noOracle: with the token of session own, the answers (status, headers
// but the date, body) about session other, on every route of a session,
// are those about a session that does not exist, the id aside; about its
// own session, those of the operator's routes are too, but that its own
// session's path takes GET: there a method it may not call is one the path
// does not take (405, Allow naming what it may), not a path no route takes.
func noOracle(t *testing.T, home, token, own, other string) {
	t.Helper()
	c := sockCredClient(home)
	nobody := strings.Repeat("0", len(other))
	answer := func(method, pattern, id string, body any) string {
		path := strings.ReplaceAll(pattern, "{id}", id)
		code, hdr, data := c.send(t, method, path, token, "", body)
		hdr.Del("Date")
		var b strings.Builder
		fmt.Fprintf(&b, "%d\n", code)
		for _, k := range slices.Sorted(maps.Keys(hdr)) {
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(hdr[k], ", "))
		}
		b.Write(data)
		return strings.ReplaceAll(b.String(), id, "{id}")
	}
	for _, r := range []struct {
		method, path string
		body         any
		operators    bool // the operator's alone, on its own session too
	}{
		{"GET", "/v1/sessions/{id}", nil, false},
		{"PATCH", "/v1/sessions/{id}", map[string]any{"skills": []string{}}, true},
		{"DELETE", "/v1/sessions/{id}", nil, true},
		{"GET", "/v1/sessions/{id}/prompt", nil, false},
		{"GET", "/v1/sessions/{id}/activations", nil, false},
		{"GET", "/v1/sessions/{id}/audit", nil, false},
		{"POST", "/v1/sessions/{id}/mentions", map[string]any{"text": "$release-notes"}, false},
		{"GET", "/v1/sessions/{id}/resolve?uri=skill://release-notes/SKILL.md", nil, false},
		{"GET", "/v1/sessions/{id}/events?after=0", nil, false},
		{"POST", "/v1/sessions/{id}/turn", map[string]any{"message": "hi"}, false},
		{"POST", "/v1/sessions/{id}/globs", map[string]any{"paths": []string{"a.go"}}, false},
		{"POST", "/v1/sessions/{id}/skills", map[string]any{"path": "/etc"}, false},
		{"POST", "/v1/sessions/{id}/refresh", nil, true},
		{"POST", "/v1/sessions/{id}/token", nil, true},
		{"POST", "/v1/sessions/{id}/move", map[string]any{"host": "elsewhere"}, true},
		{"POST", "/v1/sessions/{id}/mounts", map[string]any{"target": "/tmp/x"}, true},
		{"DELETE", "/v1/sessions/{id}/mounts?target=/tmp/x", nil, true},
	} {
		none := answer(r.method, r.path, nobody, r.body)
		if !strings.HasPrefix(none, "404\n") || !strings.Contains(none, ": no such route") {
			t.Errorf("%s %s of no session with a session's token:\n%s", r.method, r.path, none)
		}
		if got := answer(r.method, r.path, other, r.body); got != none {
			t.Errorf("%s %s of another session with a session's token:\n%s\nof none:\n%s", r.method, r.path, got, none)
		}
		if !r.operators {
			continue
		}
		want := none
		if r.path == "/v1/sessions/{id}" {
			body := "{\n  \"error\": \"" + r.method + " /v1/sessions/{id}: method not allowed (allowed: GET, HEAD)\",\n  \"code\": \"invalid\"\n}\n"
			want = fmt.Sprintf("405\nAllow: GET, HEAD\nContent-Length: %d\nContent-Type: application/json\n%s",
				len(strings.ReplaceAll(body, "{id}", own)), body)
		}
		if got := answer(r.method, r.path, own, r.body); got != want {
			t.Errorf("%s %s of its own session with its token:\n%s\nwant:\n%s", r.method, r.path, got, want)
		}
	}
}

// TestAgentSessionKeys: a create with a client key answers the open
// session of that key for its user, never a second one, also when ten
// creates race; labels find sessions (every label given must match); a key
// is per user; once the session closes, the key opens a new one.
func TestAgentSessionKeys(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	op := newPyClient(t, "--socket", filepath.Join(e.home, "skillfs.sock"))
	var s, again agentSession
	op.json(&s, "create", "--user", "alice", "--skills", "release-notes", "--key", "thread-1", "--label", "team=core", "--label", "env=ci")
	if s.Key != "thread-1" || !reflect.DeepEqual(s.Labels, map[string]string{"team": "core", "env": "ci"}) || s.Existing || s.Token == "" {
		t.Fatalf("create with a key: %+v", s)
	}
	op.json(&again, "create", "--user", "alice", "--skills", "release-notes", "--key", "thread-1")
	if again.ID != s.ID || !again.Existing || again.Token != "" {
		t.Fatalf("the same key again: %+v, want %s existing, without a token", again, s.ID)
	}

	const racers = 10
	ids := make([]agentSession, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := op.run("create", "--user", "alice", "--skills", "commit-messages", "--key", "thread-2")
			if err := json.Unmarshal([]byte(r.stdout), &ids[i]); r.code != 0 || err != nil {
				t.Errorf("racing create %d: exit %d, %q %q", i, r.code, r.stdout, r.stderr)
			}
		}()
	}
	wg.Wait()
	made := 0
	for _, r := range ids {
		if r.ID != ids[0].ID {
			t.Errorf("racing creates with one key opened %s and %s", r.ID, ids[0].ID)
		}
		if !r.Existing {
			made++
			if r.Token == "" {
				t.Errorf("the create that made the session answered no token")
			}
		}
	}
	if made != 1 {
		t.Errorf("%d of the racing creates made the session, want 1", made)
	}

	find := func(args ...string) []string {
		var found []agentSession
		op.json(&found, append([]string{"find"}, args...)...)
		out := []string{}
		for _, f := range found {
			out = append(out, f.ID)
		}
		return out
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--key", "thread-1", "--user", "alice"}, []string{s.ID}},
		{[]string{"--key", "thread-2", "--user", "alice"}, []string{ids[0].ID}},
		{[]string{"--key", "thread-1", "--user", "bob"}, []string{}},
		{[]string{"--label", "team=core"}, []string{s.ID}},
		{[]string{"--label", "team=core", "--label", "env=ci"}, []string{s.ID}},
		{[]string{"--label", "team=core", "--label", "env=prod"}, []string{}},
		{[]string{"--label", "team=other"}, []string{}},
	} {
		if got := find(tc.args...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("find %v: %v, want %v", tc.args, got, tc.want)
		}
	}
	var bobs agentSession
	op.json(&bobs, "create", "--user", "bob", "--skills", "release-notes", "--key", "thread-1")
	if bobs.ID == s.ID || bobs.Existing {
		t.Errorf("bob's create with alice's key: %+v", bobs)
	}
	op.ok("close", s.ID)
	var next agentSession
	op.json(&next, "create", "--user", "alice", "--skills", "release-notes", "--key", "thread-1")
	if next.ID == s.ID || next.Existing || next.Token == "" {
		t.Errorf("the key after its session closed: %+v", next)
	}
}

// TestAgentInSandbox: an agent in a box, its session bound at
// /home/gem/skills with the session's API socket beside it: with curl and
// the Python client (no token: the socket is the credential) it learns who
// it is, reads its prompt, activations and events, asks for a turn (with
// and without a read tool) and for the skills that apply to file paths,
// and reads files by URI; it installs a skill from its workspace, which
// joins at the next turn (or at once with --now) as its user's alone; a
// sub-agent it opens reads a subset, shows up in its stream, may neither
// install nor open its own, and closes with it.
func TestAgentInSandbox(t *testing.T) {
	e := newEnv(t)
	sock := filepath.Join(e.home, "skillfs.sock")
	e.serve()
	e.ok("user", "add", "alice")
	e.ok("user", "add", "bob")
	src := t.TempDir()
	writeSkill(t, filepath.Join(src, "house-rules"), "name: house-rules\ndescription: Rules for every turn.\nalwaysApply: true", nil)
	writeSkill(t, filepath.Join(src, "go-style"), "name: go-style\ndescription: Go conventions.\nglobs: \"*.go, cmd/**\"", nil)
	for _, dir := range []string{"house-rules", "go-style"} {
		e.ok("skill", "import", filepath.Join(src, dir), "--as", "alice")
	}
	op := newPyClient(t, "--socket", sock)
	var s, bobs agentSession
	op.json(&s, "create", "--user", "alice", "--skills", "release-notes,house-rules,go-style", "--preload", "go-style")
	op.json(&bobs, "create", "--user", "bob", "--skills", "commit-messages")
	b := boundBox(t, e, s.ID)

	curl := "curl -sS --fail-with-body --unix-socket " + boxAPISocket + " http://skillfs"
	var who struct {
		Role, Session, User string
	}
	b.json(&who, curl+"/v1/whoami")
	if who.Role != "session" || who.Session != s.ID || who.User != "alice" {
		t.Errorf("whoami on the box's socket: %+v", who)
	}
	sameJSON(t, "whoami: curl and the client", b.ok(curl+"/v1/whoami"), b.ok(boxPy+" whoami"))
	manifest := b.ok("cat " + boxSkills + "/release-notes/SKILL.md")
	if got := b.ok(curl + "/v1/sessions/" + s.ID + "/resolve?uri=skill://release-notes/SKILL.md"); got != manifest {
		t.Errorf("curl's resolve %q, cat %q", got, manifest)
	}
	var act activationsInfo
	b.json(&act, boxPy+" activations "+s.ID)
	if act.opens("release-notes") < 1 {
		t.Errorf("activations after the agent's cat: %+v", act)
	}
	if p := b.ok(boxPy + " prompt " + s.ID); !strings.Contains(p, boxSkills+"/release-notes/SKILL.md") {
		t.Errorf("the prompt in the box: %s", p)
	}

	// The selection: the preloaded, then those always applied, then those
	// mentioned (SESSIONS.md); each with its SKILL.md as the view has it.
	var turn agentTurn
	b.json(&turn, boxPy+" turn "+s.ID+" 'Commit it with $commit-messages.' --format json")
	if !reflect.DeepEqual(turn.selected(), []string{"go-style:preloaded", "house-rules:always", "commit-messages:mentioned"}) ||
		!strings.Contains(turn.Prompt, "release-notes") {
		t.Fatalf("the turn: %+v", turn)
	}
	for _, sel := range turn.Selected {
		if view := b.ok("cat " + boxSkills + "/" + sel.Slug + "/SKILL.md"); sel.Content != view || sel.Path != boxSkills+"/"+sel.Slug+"/SKILL.md" {
			t.Errorf("the turn selected %s at %s with %q; the view has %q", sel.Slug, sel.Path, sel.Content, view)
		}
	}
	var blind agentTurn
	b.json(&blind, boxPy+" turn "+s.ID+" 'Commit it with $commit-messages.' --format json --no-read-tool")
	if blind.Prompt != "" || !reflect.DeepEqual(blind.selected(), turn.selected()) {
		t.Errorf("the turn without a read tool: %+v", blind)
	}
	var globs struct {
		Paths []struct {
			Path   string `json:"path"`
			Skills []struct {
				Slug string `json:"slug"`
			} `json:"skills"`
		} `json:"paths"`
	}
	b.json(&globs, boxPy+" globs "+s.ID+" main.go cmd/x/y.txt README.md")
	var matched []string
	for _, p := range globs.Paths {
		var slugs []string
		for _, sk := range p.Skills {
			slugs = append(slugs, sk.Slug)
		}
		matched = append(matched, p.Path+"="+strings.Join(slugs, ","))
	}
	if !reflect.DeepEqual(matched, []string{"main.go=go-style", "cmd/x/y.txt=go-style", "README.md="}) {
		t.Errorf("globs: %v", matched)
	}

	// What the box's socket does not reach.
	b.refused(3, "not_found", boxPy+" show "+bobs.ID)
	b.refused(3, "not_found", boxPy+" call GET /v1/skills")
	if msg := b.refused(5, "invalid", boxPy+" find"); !strings.HasSuffix(msg, "method not allowed (allowed: POST)") {
		t.Errorf("the session list on the box's socket: %q, want only a create allowed", msg)
	}
	b.refused(4, "permission", boxPy+" --as bob show "+s.ID)
	b.refused(4, "permission", boxPy+" --token "+bobs.Token+" show "+bobs.ID)
	if r := b.run(curl + "/v1/sessions/" + bobs.ID + "/prompt"); r.code == 0 || strings.Contains(r.stdout, "commit-messages") {
		t.Errorf("curl reads another session's prompt: %q", r.stdout)
	}

	// An install from the workspace joins at the next turn, private to alice.
	b.ok("mkdir -p " + boxWorkspace + "/my-notes && printf -- '---\\nname: my-notes\\ndescription: Notes the agent wrote.\\n---\\n# Notes\\n' > " + boxWorkspace + "/my-notes/SKILL.md")
	var inst agentInstall
	b.json(&inst, boxPy+" install "+s.ID+" --path "+boxWorkspace+"/my-notes")
	if inst.Slug != "my-notes" || inst.Joined || inst.Version == "" {
		t.Fatalf("install from the workspace: %+v", inst)
	}
	if ls := b.ok("ls " + boxSkills); strings.Contains(ls, "my-notes") {
		t.Errorf("the installed skill is in the view before the next turn: %q", ls)
	}
	b.json(&turn, boxPy+" turn "+s.ID+" 'next' --format json")
	if !strings.Contains(turn.Prompt, "my-notes") {
		t.Errorf("the turn after the install does not list it: %s", turn.Prompt)
	}
	if got := b.ok("cat " + boxSkills + "/my-notes/SKILL.md"); !strings.Contains(got, "# Notes") {
		t.Errorf("the installed skill in the view: %q", got)
	}
	var shown struct {
		Share struct {
			Read string `json:"read"`
		} `json:"share"`
	}
	e.okJSON(&shown, "skill", "show", "my-notes")
	if shown.Share.Read != "user:alice" {
		t.Errorf("the installed skill's share: %+v, want user:alice", shown.Share)
	}
	if out := e.ok("skill", "list", "--as", "bob", "--json"); strings.Contains(out, "my-notes") {
		t.Errorf("bob sees alice's installed skill: %s", out)
	}
	b.ok("mkdir -p " + boxWorkspace + "/quick && printf -- '---\\nname: quick\\ndescription: At once.\\n---\\nbody\\n' > " + boxWorkspace + "/quick/SKILL.md")
	b.json(&inst, boxPy+" install "+s.ID+" --path "+boxWorkspace+"/quick --now")
	if !inst.Joined || !strings.Contains(b.ok("ls "+boxSkills), "quick") {
		t.Errorf("install --now: %+v, view %q", inst, b.ok("ls "+boxSkills))
	}

	// A sub-agent, opened from inside: a subset, its own activations in its
	// parent's stream, no installs, no children, closed with its parent.
	if msg := b.refused(5, "invalid", boxPy+" create --skills skill-authoring"); !strings.Contains(msg, "skill-authoring") {
		t.Errorf("a sub-agent beyond its parent's skills: %q, want the skill named", msg)
	}
	var child agentSession
	b.json(&child, boxPy+" create --skills release-notes")
	if child.Parent != s.ID || child.User != "alice" || child.Token == "" {
		t.Fatalf("the sub-agent's session: %+v", child)
	}
	var parent agentSession
	op.json(&parent, "show", s.ID)
	for _, slug := range child.Readable {
		if !slices.Contains(parent.Readable, slug) {
			t.Errorf("the sub-agent reads %s, which its parent does not", slug)
		}
	}
	if !slices.Contains(child.Readable, "release-notes") || slices.Contains(child.Readable, "house-rules") {
		t.Errorf("the sub-agent reads %v", child.Readable)
	}
	// The parent's stream from its start: once its first event came, the
	// stream is subscribed, and the sub-agent's activation comes live.
	stream := newPyClient(t, "--socket", sock).stream(s.ID, "--after", "0")
	if ev, ok := stream.next(t); !ok || ev.Event.Session != s.ID {
		t.Fatalf("the parent's stream began with %+v, %v", ev.Event, ok)
	}
	if _, err := fetch(filepath.Join(child.Path, "release-notes", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	for {
		ev, ok := stream.next(t)
		if !ok {
			t.Fatalf("the parent's stream ended without the sub-agent's activation\n%s", stream.stderr.String())
		}
		if ev.Event.Session == child.ID {
			if ev.describe() != "activated release-notes" {
				t.Errorf("the sub-agent's first event in its parent's stream: %s", ev.describe())
			}
			break
		}
		if ev.Event.Session != s.ID {
			t.Errorf("the parent's stream sent an event of session %s", ev.Event.Session)
		}
	}
	childPy := newPyClient(t, "--socket", sock, "--token", child.Token)
	before := storeState(e)
	childPy.refused(4, "permission", "install", child.ID, "--file", writeFileT(t, "SKILL.md", "---\nname: child-skill\ndescription: x\n---\n"))
	childPy.refused(4, "permission", "create", "--skills", "release-notes")
	if after := storeState(e); after != before {
		t.Errorf("the sub-agent's refused install changed the store:\n%s\nwas\n%s", after, before)
	}
	op.ok("close", s.ID)
	op.refused(3, "not_found", "show", child.ID)
	childPy.refused(4, "permission", "show", child.ID)
	// The socket went with the session.
	if r := b.run(boxPy + " whoami"); r.code != 7 {
		t.Errorf("the box's socket after the close: exit %d, %q%q", r.code, r.stdout, r.stderr)
	}
}

// writeFileT writes content to a new file named name in a temporary
// folder and returns its path.
func writeFileT(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAgentInstallRefused: what an agent may not install from its box is
// refused with the error the API documents, and the catalog and the store
// stay as they were: a host path the box cannot see, `..` past its root,
// /proc/self/root and /proc/1/root, a link to /etc/shadow (the path itself,
// and SKILL.md in a folder), a file of root's the agent cannot read, a
// FIFO (never opened: the call returns), a 2 GiB file, a relative path;
// past the quota of skills, the next install is refused naming it.
func TestAgentInstallRefused(t *testing.T) {
	e := newEnv(t)
	e.serve("--install-max-skills", "1")
	e.ok("user", "add", "alice")
	op := newPyClient(t, "--socket", filepath.Join(e.home, "skillfs.sock"))
	var s agentSession
	op.json(&s, "create", "--user", "alice", "--skills", "release-notes")
	b := boundBox(t, e, s.ID)
	hostSkill := filepath.Join(t.TempDir(), "host-skill")
	writeSkill(t, hostSkill, "name: host-skill\ndescription: on the host only", nil)

	ws := boxWorkspace
	b.ok("ln -s /etc/shadow " + ws + "/shadow-link && mkdir " + ws + "/shadow-md && ln -s /etc/shadow " + ws + "/shadow-md/SKILL.md")
	b.ok("mkdir " + ws + "/shadowed && ln -s /etc/shadow " + ws + "/shadowed/SKILL.md")
	b.writeWorkspace("secret/SKILL.md", "---\nname: secret\ndescription: root's\n---\n", 0o600)
	if err := os.Chown(filepath.Join(b.workspace, "secret", "SKILL.md"), 0, 0); err != nil {
		t.Fatal(err)
	}
	b.ok("mkfifo " + ws + "/fifo && mkdir " + ws + "/piped && mkfifo " + ws + "/piped/SKILL.md")
	b.writeWorkspace("big/SKILL.md", "---\nname: big\ndescription: a big file beside\n---\n", 0o644)
	b.ok("truncate -s 2G " + ws + "/big/data.bin")
	b.ok("truncate -s 2G " + ws + "/SKILL.md")

	b.writeWorkspace("one/SKILL.md", "---\nname: one\ndescription: the first\n---\n", 0o644)
	before := storeState(e)
	for _, tc := range []struct {
		name, path string
		exit       int
		code       string
	}{
		{"a host path", hostSkill, 3, "not_found"},
		{"dot-dot past the root", ws + strings.Repeat("/..", 8) + hostSkill, 3, "not_found"},
		{"/proc/self/root", "/proc/self/root" + hostSkill, 3, "not_found"},
		// The box's pid 1 is root's: the agent may not look through it; its
		// own init's root is a magic link, never followed.
		{"/proc/1/root", "/proc/1/root" + hostSkill, 4, "permission"},
		{"/proc/INIT/root", "/proc/" + b.nsPID() + "/root" + hostSkill, 5, "invalid"},
		{"/proc/INIT/root to the workspace", "/proc/" + b.nsPID() + "/root" + ws + "/one", 5, "invalid"},
		// A file is a SKILL.md or a ZIP by its name, before it is opened.
		{"a link to /etc/shadow", ws + "/shadow-link", 5, "invalid"},
		{"/etc/shadow", "/etc/shadow", 5, "invalid"},
		{"a SKILL.md that links to /etc/shadow", ws + "/shadow-md/SKILL.md", 4, "permission"},
		{"SKILL.md a link to /etc/shadow", ws + "/shadowed", 5, "invalid"},
		{"a file of root's", ws + "/secret", 4, "permission"},
		{"a FIFO", ws + "/fifo", 5, "invalid"},
		{"SKILL.md a FIFO", ws + "/piped", 5, "invalid"},
		{"a 2 GiB file beside SKILL.md", ws + "/big", 5, "invalid"},
		{"a 2 GiB SKILL.md", ws + "/SKILL.md", 5, "invalid"},
		{"a relative path", "workspace/big", 5, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := b.refused(tc.exit, tc.code, boxPy+" --timeout 60 install "+s.ID+" --path '"+tc.path+"'")
			if strings.Contains(msg, "root:") {
				t.Errorf("the refusal shows /etc/shadow: %q", msg)
			}
		})
	}
	if after := storeState(e); after != before {
		t.Fatalf("refused installs changed the store:\n%s\nwas\n%s", after, before)
	}

	// The quota: one skill of alice's own, then no more.
	b.writeWorkspace("two/SKILL.md", "---\nname: two\ndescription: the second\n---\n", 0o644)
	b.ok(boxPy + " install " + s.ID + " --path " + ws + "/one")
	installed := storeState(e)
	if msg := b.refused(5, "invalid", boxPy+" install "+s.ID+" --path "+ws+"/two"); !strings.Contains(msg, "install-max-skills") && !strings.Contains(msg, "quota") {
		t.Errorf("past the quota: %q, want the quota named", msg)
	}
	if after := storeState(e); after != installed {
		t.Errorf("an install past the quota changed the store:\n%s\nwas\n%s", after, installed)
	}
}

// TestFiftyAgentsInstallAtOnce: fifty boxes, each with a session of a user
// of its own, install a skill of the same name from their workspaces at
// once: each gets it, private to its user, joined at once, and no box sees
// another's.
func TestFiftyAgentsInstallAtOnce(t *testing.T) {
	const n = 50
	e := newEnv(t)
	e.serve()
	op := newPyClient(t, "--socket", filepath.Join(e.home, "skillfs.sock"))
	boxes := make([]*agentBox, n)
	sessions := make([]agentSession, n)
	for i := range n {
		user := "agent" + strconv.Itoa(i)
		e.ok("user", "add", user)
		op.json(&sessions[i], "create", "--user", user, "--skills", "commit-messages")
		boxes[i] = boundBox(t, e, sessions[i].ID)
		boxes[i].writeWorkspace("notes/SKILL.md", fmt.Sprintf("---\nname: notes\ndescription: agent %d's notes\n---\nowner %d\n", i, i), 0o644)
	}
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = boxes[i].run(boxPy + " install " + sessions[i].ID + " --path " + boxWorkspace + "/notes --now")
		}()
	}
	wg.Wait()
	for i, r := range results {
		var inst agentInstall
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &inst) != nil || !inst.Joined {
			t.Errorf("box %d: exit %d %q %q", i, r.code, r.stdout, r.stderr)
			continue
		}
		if ls, want := boxes[i].ok("ls "+boxSkills), []string{"commit-messages", inst.Slug}; !slices.Equal(strings.Fields(ls), sortedCopy(want)) {
			t.Errorf("box %d sees %q, want %v", i, ls, want)
		}
		got := boxes[i].ok("cat " + boxSkills + "/" + inst.Slug + "/SKILL.md")
		if !strings.Contains(got, fmt.Sprintf("owner %d\n", i)) {
			t.Errorf("box %d reads %q as its installed skill", i, got)
		}
	}
}
