package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"skillfs/cmd/skillfs/api"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pyClient runs the Python client's command line (scripts/skillfs_client.py)
// on the host, with the connection flags given.
type pyClient struct {
	t      testing.TB
	python string
	flags  []string
}

func newPyClient(t testing.TB, flags ...string) pyClient {
	t.Helper()
	return pyClient{t: t, python: requireCommand(t, "python3"), flags: flags}
}

func (c pyClient) command(args ...string) *exec.Cmd {
	cmd := exec.Command(c.python, append(append([]string{clientScript}, c.flags...), args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	return cmd
}

// run runs the client and waits for it.
func (c pyClient) run(args ...string) result {
	c.t.Helper()
	return resultOf(c.t, c.command(args...))
}

// ok runs the client and fails the test unless it exits 0.
func (c pyClient) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("skillfs_client.py %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// json runs the client and decodes what it printed into v.
func (c pyClient) json(v any, args ...string) {
	c.t.Helper()
	out := c.ok(args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("skillfs_client.py %s: decode %q: %v", strings.Join(args, " "), out, err)
	}
}

// refused runs the client, wants it to exit with code and to print the
// API's error JSON with errCode on standard error, and returns the error's
// message.
func (c pyClient) refused(code int, errCode string, args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	var body struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if r.code != code || json.Unmarshal([]byte(r.stderr), &body) != nil || body.Code != errCode || body.Error == "" {
		c.t.Fatalf("skillfs_client.py %s: exit %d, stderr %q; want exit %d and the error JSON with code %q",
			strings.Join(args, " "), r.code, r.stderr, code, errCode)
	}
	return body.Error
}

// pyStream is the client's `events` command running: each line it prints
// is an event.
type pyStream struct {
	events chan streamEvent // closed when the command's output ends
	exited chan struct{}    // closed once it exited; then err and stderr hold
	err    error
	stderr bytes.Buffer
}

// stream starts `events args...` and reads its events. The command is
// killed when the test ends.
func (c pyClient) stream(args ...string) *pyStream {
	c.t.Helper()
	cmd := c.command(append([]string{"events"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	s := &pyStream{events: make(chan streamEvent, 1000), exited: make(chan struct{})}
	cmd.Stderr = &s.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start the Python client: %v", err)
	}
	t := c.t
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e streamEvent
			if err := json.Unmarshal(sc.Bytes(), &e.Event); err != nil {
				t.Errorf("the client printed %q, not an event: %v", sc.Text(), err)
				continue
			}
			e.ID = strconv.FormatInt(e.Event.ID, 10)
			s.events <- e
		}
		close(s.events)
		s.err = cmd.Wait()
		close(s.exited)
	}()
	c.t.Cleanup(func() { cmd.Process.Kill(); <-s.exited })
	return s
}

// next waits for the next event; ok is false when the stream ended.
func (s *pyStream) next(t testing.TB) (streamEvent, bool) {
	t.Helper()
	return nextEvent(t, s.events)
}

// ended waits for the stream's command to exit by itself, and fails t
// unless it exited 0 with nothing more to say.
func (s *pyStream) ended(t testing.TB) {
	t.Helper()
	if e, ok := s.next(t); ok {
		t.Fatalf("event %s %s after the stream should have ended", e.ID, e.describe())
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the Python client did not exit within 30 s of its stream's end")
	}
	if s.err != nil {
		t.Fatalf("the Python client's stream: %v\n%s", s.err, s.stderr.String())
	}
}

// wantEvents takes the next events of s and fails t unless they are want
// ("type slug", as describe), each with an id above the one before and
// above after.
func (s *pyStream) wantEvents(t testing.TB, after int64, want ...string) []streamEvent {
	t.Helper()
	var got []streamEvent
	last := after
	for _, w := range want {
		e, ok := s.next(t)
		if !ok {
			t.Fatalf("the stream ended after %v, want %q next\n%s", describeAll(got), w, s.stderr.String())
		}
		if e.describe() != w || e.Event.ID <= last {
			t.Fatalf("after %v (resuming after %d) the stream sent %s %q, want %q with an id above %d",
				describeAll(got), after, e.ID, e.describe(), w, last)
		}
		last = e.Event.ID
		got = append(got, e)
	}
	return got
}

// untilClosed takes the events of s up to its session's closed event and
// the end of the stream, and fails t unless each has an id above the one
// before and above after. It returns them, the closed event last.
func (s *pyStream) untilClosed(t testing.TB, after int64) []streamEvent {
	t.Helper()
	var got []streamEvent
	last := after
	for {
		e, ok := s.next(t)
		if !ok {
			t.Fatalf("the stream ended after %v without a closed event\n%s", describeAll(got), s.stderr.String())
		}
		if e.Event.ID <= last {
			t.Fatalf("after %v (resuming after %d) the stream sent %s %q again or out of order", describeAll(got), after, e.ID, e.describe())
		}
		last = e.Event.ID
		got = append(got, e)
		if e.Event.Type == "closed" {
			s.ended(t)
			return got
		}
	}
}

func describeAll(evs []streamEvent) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.ID+" "+e.describe())
	}
	return out
}

// sameJSON fails t unless a and b are the same JSON value.
func sameJSON(t testing.TB, what, a, b string) {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("%s: %q: %v", what, a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("%s: %q: %v", what, b, err)
	}
	if !reflect.DeepEqual(va, vb) {
		t.Errorf("%s: the Python client printed\n%s\nthe skillfs command line\n%s", what, a, b)
	}
}

// TestPythonClient: the Python client does what a tool loader does, over
// the daemon's socket, and answers as the skillfs command line does: it
// opens a session, reads its prompt and the skills a message names, sees
// the activations and audit of reads through the mount, follows the event
// stream and resumes it after the last event it saw (getting only newer
// ones), reads a file by its skill:// URI, closes the session, and reports
// refusals with the API's error and the command line's exit codes. Every
// request it sends, and every answer, conforms to the OpenAPI document.
func TestPythonClient(t *testing.T) {
	e := newEnv(t)
	e.serve()
	e.ok("user", "add", "alice")
	check := e.checkCLI(t)
	py := newPyClient(t, "--socket", filepath.Join(e.home, "skillfs.sock"))

	var s sessionInfo
	py.json(&s, "create", "--user", "alice", "--skills", "release-notes", "--preload", "release-notes")
	if s.ID == "" || s.User != "alice" || !reflect.DeepEqual(s.Readable, []string{"release-notes", "commit-messages"}) ||
		!reflect.DeepEqual(s.Preload, []string{"release-notes"}) {
		t.Fatalf("create: %+v", s)
	}
	sameJSON(t, "show", py.ok("show", s.ID), e.ok("session", "show", s.ID, "--json"))
	for _, format := range []string{"xml", "markdown"} {
		got, want := py.ok("prompt", s.ID, "--format", format), e.ok("session", "prompt", s.ID, "--format", format)
		if got != want || !strings.Contains(got, "commit-messages") {
			t.Errorf("prompt --format %s: the Python client printed\n%s\nthe command line\n%s", format, got, want)
		}
	}

	if a := py.ok("activations", s.ID); !strings.Contains(a, `"activated": []`) {
		t.Fatalf("activations before any read: %s", a)
	}
	for _, slug := range []string{"release-notes", "commit-messages"} {
		if _, err := fetch(filepath.Join(s.Path, slug, "SKILL.md")); err != nil {
			t.Fatal(err)
		}
	}
	var act activationsInfo
	py.json(&act, "activations", s.ID)
	if !reflect.DeepEqual(act.slugs(), []string{"release-notes", "commit-messages"}) || act.opens("release-notes") != 1 {
		t.Fatalf("activations after two reads: %+v", act)
	}
	sameJSON(t, "activations", py.ok("activations", s.ID), e.ok("session", "activations", s.ID, "--json"))
	sameJSON(t, "audit", py.ok("audit", s.ID), e.ok("session", "audit", s.ID, "--json"))

	// The two activations from the start of the log, then a resume after
	// the first: only what came after it, replayed and then live.
	first := py.stream(s.ID, "--after", "0", "--count", "2")
	seen := first.wantEvents(t, 0, "activated release-notes", "activated commit-messages")
	first.ended(t)
	resumed := py.stream(s.ID, "--after", seen[0].ID)
	resumed.wantEvents(t, seen[0].Event.ID, "activated commit-messages")
	py.ok("refresh", s.ID)
	resumed.wantEvents(t, seen[1].Event.ID, "refreshed")

	want, err := os.ReadFile(filepath.Join(s.Path, "release-notes", "assets", "template.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got := py.ok("resolve", s.ID, "skill://release-notes/assets/template.md"); got != string(want) {
		t.Errorf("resolve: %q, want %q", got, want)
	}
	// Both already activated: the mentions add no event to the stream.
	const message = "Draft the notes with /skill:release-notes v2.1, following $commit-messages."
	sameJSON(t, "mentions", py.ok("mentions", s.ID, message), e.ok("session", "mentions", s.ID, "--text", message, "--json"))
	var found []sessionInfo
	py.json(&found, "find")
	if len(found) != 1 || found[0].ID != s.ID {
		t.Errorf("the open sessions: %+v", found)
	}

	// Refusals: the API's error JSON, the command line's exit codes.
	py.refused(3, "not_found", "show", "0123456789abcdef0123456789abcdef")
	py.refused(3, "not_found", "create", "--user", "nobody", "--skills", "release-notes")
	if msg := py.refused(5, "invalid", "events", s.ID, "--after", "-1"); !strings.Contains(msg, "Last-Event-ID") {
		t.Errorf("a bad resume id: %q, want the header named", msg)
	}
	if r := py.run("resolve", s.ID, "skill://release-notes/../../etc/passwd"); r.code == 0 || r.stdout != "" {
		t.Errorf("resolve outside the skill: exit %d, %q", r.code, r.stdout)
	}

	var closed struct {
		Closed string `json:"closed"`
	}
	py.json(&closed, "close", s.ID)
	if closed.Closed != s.ID {
		t.Errorf("close: %+v", closed)
	}
	// The live stream saw the close, and ended with it.
	resumed.wantEvents(t, seen[1].Event.ID, "closed")
	resumed.ended(t)
	py.refused(3, "not_found", "show", s.ID)
	conformed(t, check)
	if n := check.Checked(); n < 20 {
		t.Errorf("the proxy checked %d exchanges: the client went around it", n)
	}
}

// TestPythonClientOverTCP: on the TCP listener the client sends the bearer
// token of --token-file (or SKILLFS_TOKEN); without it, or with another,
// the request is refused 401 with code permission (exit 4).
func TestPythonClientOverTCP(t *testing.T) {
	e := newEnv(t)
	const token = "s3cret-for-the-client"
	tokenFile := writeTokenFile(t, token, 0o600)
	d := e.serve("--listen", "127.0.0.1:0", "--token-file", tokenFile)
	addr := listenAddr(t, d)
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "commit-messages")
	url := "http://" + addr
	var health struct {
		OK       bool `json:"ok"`
		Sessions int  `json:"sessions"`
	}
	newPyClient(t, "--url", url, "--token-file", tokenFile).json(&health, "health")
	if !health.OK || health.Sessions != 1 {
		t.Errorf("health over TCP: %+v", health)
	}
	sameJSON(t, "show over TCP", newPyClient(t, "--url", url, "--token", token).ok("show", s.ID), e.ok("session", "show", s.ID, "--json"))
	for _, flags := range [][]string{{"--url", url}, {"--url", url, "--token", "wrong"}} {
		if msg := newPyClient(t, flags...).refused(4, "permission", "show", s.ID); strings.Contains(msg, token) {
			t.Errorf("the refusal names the token: %q", msg)
		}
	}
	env := newPyClient(t)
	cmd := env.command("show", s.ID)
	cmd.Env = append(cmd.Env, "SKILLFS_URL="+url, "SKILLFS_TOKEN="+token)
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), s.ID) {
		t.Errorf("with SKILLFS_URL and SKILLFS_TOKEN: %v, %s", err, out)
	}
	if r := newPyClient(t, "--url", "http://127.0.0.1:1").run("health"); r.code != 7 {
		t.Errorf("no daemon at the address: exit %d, want 7\n%s", r.code, r.stderr)
	}
}

// TestPythonClientResumesAcrossCrash: with --reconnect, the client's
// stream survives a kill -9 of the daemon and its restart: it reconnects
// with the last id it saw and gets the events after it, none twice, until
// the session closes.
func TestPythonClientResumesAcrossCrash(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "release-notes")
	py := newPyClient(t, "--socket", filepath.Join(e.home, "skillfs.sock"))
	stream := py.stream(s.ID, "--after", "0", "--reconnect")
	if _, err := fetch(filepath.Join(s.Path, "release-notes", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	seen := stream.wantEvents(t, 0, "activated release-notes")
	d.kill()
	e.serve()
	if _, err := fetch(filepath.Join(s.Path, "commit-messages", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	more := stream.wantEvents(t, seen[0].Event.ID, "activated commit-messages")
	e.ok("session", "close", s.ID)
	stream.wantEvents(t, more[0].Event.ID, "closed")
	stream.ended(t)
}

// TestPythonClientResync: resuming from an id older than the daemon keeps,
// the client yields the resync event and its stream ends; with --reconnect
// it goes on after the resync event's id and gets what follows, once.
func TestPythonClientResync(t *testing.T) {
	e := newEnv(t)
	d := e.serve()
	e.ok("user", "add", "alice")
	s := e.newSession("alice", "--skills", "release-notes")
	for _, slug := range []string{"release-notes", "commit-messages"} {
		if _, err := fetch(filepath.Join(s.Path, slug, "SKILL.md")); err != nil {
			t.Fatal(err)
		}
	}
	d.stop()
	e.serve("--event-retain-count", "1") // the first activation is pruned at the start
	py := newPyClient(t, "--socket", filepath.Join(e.home, "skillfs.sock"))

	lone := py.stream(s.ID, "--after", "0")
	resync := lone.wantEvents(t, 0, "resync")
	lone.ended(t)
	if !strings.Contains(resync[0].Event.Reason, "retention") && !strings.Contains(resync[0].Event.Reason, "no longer kept") {
		t.Errorf("the resync event's reason: %+v", resync[0].Event)
	}
	goOn := py.stream(s.ID, "--after", "0", "--reconnect")
	again := goOn.wantEvents(t, 0, "resync")
	if again[0].Event.ID != resync[0].Event.ID {
		t.Errorf("the second resync has id %d, the first %d", again[0].Event.ID, resync[0].Event.ID)
	}
	e.ok("session", "close", s.ID)
	closed := goOn.untilClosed(t, again[0].Event.ID)
	if got := describeAll(closed); len(got) != 1 {
		t.Errorf("after the resync the stream sent %v, want only the close", got)
	}
}

// pyParse is the Python client's parsing of streams and Link headers, run
// on inputs given on standard input as JSON.
const pyParse = `
import io, json, sys
sys.path.insert(0, sys.argv[1])
import skillfs_client as c
cases = json.load(sys.stdin)
print(json.dumps({
    "sse": [list(c.parse_sse(io.BytesIO(s.encode()).readlines())) for s in cases["sse"]],
    "links": [c._next_page(l) or "" for l in cases["links"]],
}))
`

// TestPythonClientParsers: the client parses the event stream as
// EventSource does for the fields skillfs sends (CRLF or LF line ends,
// comments, data lines joined, the space after the colon optional, an
// event without its blank line never dispatched), and finds the next page
// in a Link header as the Go client does.
func TestPythonClientParsers(t *testing.T) {
	py := newPyClient(t)
	sse := []struct {
		stream string
		want   []map[string]string
	}{
		{"id: 1\nevent: activated\ndata: {\"id\":1}\n\n", []map[string]string{{"id": "1", "event": "activated", "data": `{"id":1}`}}},
		{"id: 2\r\nevent: closed\r\ndata: x\r\n\r\n", []map[string]string{{"id": "2", "event": "closed", "data": "x"}}},
		{": subscribed\n\n: keep-alive\n\n", []map[string]string{}},
		{"data: a\ndata: b\n\n", []map[string]string{{"data": "a\nb"}}},
		{"data:x\n\ndata: y\n\n", []map[string]string{{"data": "x"}, {"data": "y"}}},
		{"data: {\"k\":\"a: b\"}\n\n", []map[string]string{{"data": `{"k":"a: b"}`}}},
		{"other: z\nretry: 5\ndata: w\n\n", []map[string]string{{"retry": "5", "data": "w"}}},
		{"id: 3\ndata: unterminated\n", []map[string]string{}},
		{"\n\n\n", []map[string]string{}},
	}
	links := []string{
		`</v1/sessions?after=a1&limit=2>; rel="next"`,
		``,
		`<http://skillfs/v1/sessions?after=b2&limit=100>; rel="next"`,
		`</v1/sessions?after=c0>; rel="prev", </v1/sessions?after=c3>; rel="next"`,
		`</v1/sessions?after=d4>; rel="prev"`,
		`garbage`,
	}
	in := map[string][]string{"links": links}
	for _, c := range sse {
		in["sse"] = append(in["sse"], c.stream)
	}
	data, _ := json.Marshal(in)
	cmd := exec.Command(py.python, "-c", pyParse, filepath.Dir(clientScript))
	cmd.Stdin = bytes.NewReader(data)
	r := resultOf(t, cmd)
	var out struct {
		SSE   [][]map[string]string `json:"sse"`
		Links []string              `json:"links"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Fatalf("the parsers: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for i, c := range sse {
		if !reflect.DeepEqual(out.SSE[i], c.want) {
			t.Errorf("stream %q: parsed %v, want %v", c.stream, out.SSE[i], c.want)
		}
	}
	for i, l := range links {
		if want := api.NextPage(l); out.Links[i] != want {
			t.Errorf("Link %q: next page %q, the Go client's %q", l, out.Links[i], want)
		}
	}
}
