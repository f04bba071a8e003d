package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/fs/bind/sandboxtest"
	"skillfs/skills"
)

// The tests of what a session's credential may do once its features meet:
// the API socket in its sandbox, the access table, sub-agents, installs
// and the turn. Every call of the sandbox's agent is curl inside the
// sandbox, as its uid.

// boxSocket is where the session's API socket is put in the sandboxes of
// these tests: beside the workspace, which the sandbox's uid owns.
const boxSocket = "/workspace/.skillfs.sock"

// boxAnswer is an answer as curl in the sandbox got it.
type boxAnswer struct {
	code int
	hdr  http.Header
	body []byte
}

func (a boxAnswer) String() string { return fmt.Sprintf("%d %s", a.code, a.body) }

// curlArgs is curl sending method path (with a JSON body unless "", and
// the headers hdr, "Name: value") through the API socket of the sandbox.
func curlArgs(method, path, body string, hdr ...string) []string {
	args := []string{"curl", "-sS", "--unix-socket", boxSocket, "-X", method}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "--data-binary", body)
	}
	for _, h := range hdr {
		args = append(args, "-H", h)
	}
	return append(args, "http://skillfs"+path)
}

// boxCall sends one request through the session's API socket from inside
// sandbox b, as its uid, and returns the answer.
func boxCall(t testing.TB, b *sandboxtest.Box, method, path, body string, hdr ...string) boxAnswer {
	t.Helper()
	args := curlArgs(method, path, body, hdr...)
	args = append(args[:2], append([]string{"-i"}, args[2:]...)...)
	var stderr bytes.Buffer
	cmd := b.Command(boxUID, boxUID, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl %s %s in the sandbox: %v %s", method, path, err, stderr.String())
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
	if err != nil {
		t.Fatalf("curl %s %s in the sandbox answered %q: %v", method, path, out, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return boxAnswer{code: resp.StatusCode, hdr: resp.Header, body: data}
}

// boxStream follows path's event stream through the sandbox's socket
// with curl inside it; the events come on the channel until the stream
// ends (its session closed, or the sandbox stopped).
func boxStream(t testing.TB, b *sandboxtest.Box, path string) <-chan apitest.SSE {
	t.Helper()
	cmd := b.Command(boxUID, boxUID, append(curlArgs("GET", path, ""), "-N")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan apitest.SSE, 64)
	go func() {
		defer close(ch)
		apitest.ParseSSE(t, out, func(e apitest.SSE) bool { ch <- e; return true })
		cmd.Wait()
	}()
	return ch
}

// nextOf is the next event of session id on stream ch (the events of
// others before it are passed over); the test fails if the stream ends
// first, or has none within a minute (a guard against a hang).
func nextOf(t testing.TB, ch <-chan apitest.SSE, id string) api.Event {
	t.Helper()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before an event of %s", id)
			}
			if e.Data.Session == id {
				return e.Data
			}
		case <-time.After(time.Minute):
			t.Fatalf("no event of %s in the stream after a minute", id)
		}
	}
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
	if got.code != want.code || got.hdr.Get("Content-Type") != want.hdr.Get("Content-Type") ||
		got.hdr.Get("Allow") != want.hdr.Get("Allow") ||
		!bytes.Equal(bytes.ReplaceAll(got.body, []byte(gotWord), []byte(wantWord)), want.body) {
		t.Errorf("%s: %s\nwant it answered as %s", what, got, want)
	}
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

	if a := boxCall(t, b, "GET", own+"/prompt", ""); a.code != http.StatusOK || !bytes.Contains(a.body, []byte("<name>a</name>")) ||
		bytes.Contains(a.body, []byte("<name>e</name>")) {
		t.Errorf("its prompt: %s", a)
	}
	a := boxCall(t, b, "POST", own+"/turn", `{"message":"use $d","format":"json"}`)
	var turn api.Turn
	if a.code != http.StatusOK || json.Unmarshal(a.body, &turn) != nil || len(turn.Selected) != 1 || turn.Selected[0].Slug != "d" ||
		turn.Selected[0].Why != api.WhyMentioned {
		t.Errorf("its turn: %s", a)
	}
	var act api.Activations
	if a := boxCall(t, b, "GET", own+"/activations", ""); a.code != http.StatusOK || json.Unmarshal(a.body, &act) != nil ||
		len(act.Activated) != 1 || act.Activated[0].Slug != "d" {
		t.Errorf("its activations after the turn: %s", a)
	}
	var who api.Whoami
	if a := boxCall(t, b, "GET", "/v1/whoami", ""); a.code != http.StatusOK || json.Unmarshal(a.body, &who) != nil ||
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
		if want.code != http.StatusNotFound && want.code != http.StatusMethodNotAllowed {
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
		if a := boxCall(t, b, "GET", path, ""); a.code != http.StatusMethodNotAllowed || a.hdr.Get("Allow") != "POST" {
			t.Errorf("GET %s: %s, want 405 allowing POST", path, a)
		}
	}
	for _, path := range []string{"/v1/skills", "/v1/skills/e", "/v1/skills/e/versions", "/v1/catalog", "/v1/curated", "/v1/events", "/v1/status", "/v1/health", "/metrics", "/v1/hosts", "/v1/tokens"} {
		got := boxCall(t, b, "GET", path, "")
		want := boxCall(t, b, "GET", "/v1/nothing-here", "")
		p, _, _ := strings.Cut(path, "?")
		sameAnswer(t, "GET "+path, got, want, p, "/v1/nothing-here")
	}
	if a := boxCall(t, b, "POST", "/v1/skills/e/disable", "{}"); a.code != http.StatusNotFound || apitest.ErrorCode(a.body) != "not_found" {
		t.Errorf("disable a skill: %s", a)
	}

	// No other credential rides on the socket.
	for _, hdr := range []string{api.ActAsHeader + ": alice", api.ActAsHeader + ": bob", api.ActAsHeader + ": operator"} {
		if a := boxCall(t, b, "GET", own+"/prompt", "", hdr); a.code != http.StatusForbidden || apitest.ErrorCode(a.body) != "permission" {
			t.Errorf("its prompt with %s: %s, want 403 permission", hdr, a)
		}
	}
	for _, tok := range []string{other.Token, bobs.Token, parent.Token, "wrong"} {
		if a := boxCall(t, b, "GET", own+"/prompt", "", "Authorization: Bearer "+tok); a.code != http.StatusForbidden ||
			apitest.ErrorCode(a.body) != "permission" || bytes.Contains(a.body, []byte(tok)) {
			t.Errorf("its prompt with a bearer token: %s, want 403 permission", a)
		}
	}
	if a := boxCall(t, b, "GET", "/v1/sessions/"+other.ID+"/prompt", "", "Authorization: Bearer "+other.Token); a.code != http.StatusForbidden {
		t.Errorf("another session's prompt with that session's token on the socket: %s, want 403", a)
	}

	// A child: of its session and user, a subset of its set, its events in
	// its session's stream.
	events := boxStream(t, b, own+"/events")
	a = boxCall(t, b, "POST", "/v1/sessions", `{"skills":["b"]}`)
	var child api.SessionInfo
	if a.code != http.StatusOK || json.Unmarshal(a.body, &child) != nil || child.Parent != parent.ID || child.User != "alice" ||
		!slices.Equal(child.Readable, []string{"b", "c"}) || child.Token == "" {
		t.Fatalf("create through the socket: %s", a)
	}
	for _, body := range []string{`{"skills":["e"]}`, `{"skills":["nope"]}`, `{"user":"bob"}`, `{"parent":"` + other.ID + `"}`, `{"parent":"` + none + `"}`} {
		if a := boxCall(t, b, "POST", "/v1/sessions", body); a.code == http.StatusOK {
			t.Errorf("create %s through the socket: %s", body, a)
		}
	}
	sameAnswer(t, "a create naming another session its parent", boxCall(t, b, "POST", "/v1/sessions", `{"parent":"`+other.ID+`"}`),
		boxCall(t, b, "POST", "/v1/sessions", `{"parent":"`+none+`"}`), other.ID, none)
	if kids, err := d.db.OpenChildren(ctx, parent.ID); err != nil || len(kids) != 1 {
		t.Errorf("children after the creates: %v, %v; want the one", kids, err)
	}
	if a := boxCall(t, b, "GET", "/v1/sessions/"+child.ID+"/prompt", ""); a.code != http.StatusOK || !bytes.Contains(a.body, []byte("<name>b</name>")) {
		t.Errorf("its child's prompt: %s", a)
	}
	readSKILL(t, d, child.ID, "b")
	if e := nextOf(t, events, child.ID); e.Type != skills.EventActivated || e.Parent != parent.ID || e.Slug != "b" {
		t.Errorf("the child's event in its parent's stream: %+v, want b activated", e)
	}
	if err := d.CloseSession(ctx, parent.ID); err != nil {
		t.Fatal(err)
	}
	for range events { // the stream ends with its session's close
	}
}
