package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
)

// sseEvent is one event as a client parses it off the wire.
type sseEvent struct {
	id   string // the id: line
	name string // the event: line
	data Event  // the data: line
}

// parseSSE reads server-sent events until r ends, handing each to got; it
// stops when got returns false.
func parseSSE(t testing.TB, r io.Reader, got func(sseEvent) bool) {
	sc := bufio.NewScanner(r)
	var e sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			e.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			e.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.data); err != nil {
				t.Errorf("data line %q: %v", line, err)
			}
		case line == "" && e.name != "":
			if strconv.FormatInt(e.data.ID, 10) != e.id || e.data.Type != e.name {
				t.Errorf("event lines disagree: id %q event %q, data %+v", e.id, e.name, e.data)
			}
			if !got(e) {
				return
			}
			e = sseEvent{}
		}
	}
}

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
	srv := httptest.NewServer(d.routes(""))
	defer srv.Close()
	info, err := d.CreateSession(ctx, CreateRequest{User: catalog.Operator, All: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := openEvents(t, srv.URL, "/v1/sessions/"+info.ID+"/events", "")
	defer resp.Body.Close()
	readSKILL(t, d, info.ID, "tooly")
	readSKILL(t, d, info.ID, "plain")
	readSKILL(t, d, info.ID, "tooly") // not a first: no event
	if err := d.Close(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	var got []sseEvent
	parseSSE(t, resp.Body, func(e sseEvent) bool { got = append(got, e); return true }) // ends after closed
	if len(got) != 3 {
		t.Fatalf("events %+v, want activated, activated, closed", got)
	}
	tooly, plain, closed := got[0].data, got[1].data, got[2].data
	if tooly.Type != "activated" || tooly.Slug != "tooly" || !slices.Equal(tooly.Tools, []string{"grep", "jq"}) || !slices.Equal(tooly.MCPs, []string{"github"}) {
		t.Errorf("tooly's event %+v", tooly)
	}
	if plain.Type != "activated" || plain.Tools == nil || plain.MCPs == nil || len(plain.Tools)+len(plain.MCPs) != 0 {
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
func oneSkillSession(t *testing.T) (*Daemon, *httptest.Server, *SessionInfo) {
	t.Helper()
	d := newTestDaemon(t)
	install(t, d, "name: x\ndescription: one skill", skills.ScopeGlobal)
	srv := httptest.NewServer(d.routes(""))
	t.Cleanup(srv.Close)
	info, err := d.CreateSession(context.Background(), CreateRequest{User: catalog.Operator, Skills: []string{"x"}})
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
		parseSSE(t, resp.Body, func(e sseEvent) bool {
			ids = append(ids, e.data.ID)
			last = e.id
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

// gatedWriter is a ResponseWriter whose writes wait until open is closed:
// a client that does not read.
type gatedWriter struct {
	header  http.Header
	started chan struct{} // closed at the first write
	once    sync.Once
	open    chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func newGatedWriter() *gatedWriter {
	return &gatedWriter{header: http.Header{}, started: make(chan struct{}), open: make(chan struct{})}
}

func (g *gatedWriter) Header() http.Header { return g.header }
func (g *gatedWriter) WriteHeader(int)     {}
func (g *gatedWriter) Flush()              {}
func (g *gatedWriter) Write(b []byte) (int, error) {
	g.once.Do(func() { close(g.started) })
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(b)
}

func (g *gatedWriter) events(t testing.TB) []sseEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []sseEvent
	parseSSE(t, bytes.NewReader(g.buf.Bytes()), func(e sseEvent) bool { out = append(out, e); return true })
	return out
}

// slowStream runs the stream of every session for a client that reads
// nothing until the events of produce have been published, then reads
// until stop says it has what it waits for, or the stream ends.
func slowStream(t *testing.T, d *Daemon, produce func(), stop func([]sseEvent) bool) []sseEvent {
	t.Helper()
	w := newGatedWriter()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		d.stream(w, httptest.NewRequestWithContext(ctx, "GET", "/v1/events", nil), "", nil)
	}()
	<-w.started // subscribed, and blocked in its first write
	produce()
	close(w.open)
	deadline := time.After(time.Minute)
	for {
		select {
		case <-ended:
			return w.events(t)
		case <-deadline:
			t.Fatalf("the stream sent only %d events", len(w.events(t)))
		case <-time.After(10 * time.Millisecond):
		}
		if got := w.events(t); stop(got) {
			cancel()
			<-ended
			return w.events(t)
		}
	}
}

// addEvents stores and publishes n events in one transaction.
func addEvents(t testing.TB, d *Daemon, n int) {
	t.Helper()
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = Event{Type: "refreshed", Session: fmt.Sprintf("s%d", i%3), At: time.Now().UTC()}
	}
	if err := d.events.record(func(st ...*skills.Event) error { return d.events.db.AddEvents(context.Background(), st...) }, evs...); err != nil {
		t.Fatal(err)
	}
}

// TestSlowReaderGetsEveryEvent: a client that reads nothing while far more
// events happen than its buffer holds gets every one of them, in order,
// caught up from the log.
func TestSlowReaderGetsEveryEvent(t *testing.T) {
	db := openDB(t)
	d := &Daemon{events: newHub(db)}
	const total = 4 * subscriberBuffer
	got := slowStream(t, d, func() { addEvents(t, d, total) }, func(got []sseEvent) bool { return len(got) >= total })
	if len(got) != total {
		t.Fatalf("%d events, want %d", len(got), total)
	}
	for i, e := range got {
		if e.data.ID != int64(i+1) || e.name != "refreshed" {
			t.Fatalf("event %d is %+v, want id %d", i, e, i+1)
		}
	}
}

// TestSlowReaderPastRetentionIsToldToResync: when the events a slow client
// missed were pruned meanwhile, it gets what it can without a gap, then a
// resync event naming the id to resume from, and the stream ends.
func TestSlowReaderPastRetentionIsToldToResync(t *testing.T) {
	db := openDB(t)
	d := &Daemon{events: newHub(db)}
	const total = 2 * subscriberBuffer
	got := slowStream(t, d, func() {
		addEvents(t, d, total)
		if _, err := db.PruneEvents(context.Background(), time.Now(), 0); err != nil {
			t.Fatal(err)
		}
	}, func([]sseEvent) bool { return false }) // until the stream ends
	if len(got) == 0 {
		t.Fatal("no events")
	}
	end := got[len(got)-1]
	if end.name != "resync" || end.data.ID != total || !strings.Contains(end.data.Reason, "no longer kept") {
		t.Fatalf("the stream ended with %+v, want a resync at id %d", end, total)
	}
	for i, e := range got[:len(got)-1] {
		if e.data.ID != int64(i+1) {
			t.Fatalf("before the resync: event %d has id %d (a gap)", i, e.data.ID)
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
	if err := d.Close(ctx, info.ID); err != nil { // id 10
		t.Fatal(err)
	}
	if _, err := d.cat.DB().PruneEvents(ctx, time.Unix(0, 0), 6); err != nil { // ids 1-4 go
		t.Fatal(err)
	}
	all := func(path, last string) (*http.Response, []sseEvent) {
		t.Helper()
		resp, _ := openEvents(t, srv.URL, path, last)
		defer resp.Body.Close()
		var got []sseEvent
		if resp.StatusCode == http.StatusOK {
			parseSSE(t, resp.Body, func(e sseEvent) bool { got = append(got, e); return true })
		}
		return resp, got
	}
	ids := func(evs []sseEvent) (out []string) {
		for _, e := range evs {
			out = append(out, e.name+":"+e.id)
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

// FuzzParseEventID: an id a client sends back is accepted only as a plain
// non-negative decimal number, read exactly.
func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"0", "17", "007", "", "-1", "+1", " 1", "1e3", "9223372036854775807", "9223372036854775808", "١"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseEventID(s)
		if err != nil {
			if n != 0 {
				t.Fatalf("%q: error %v with id %d", s, err, n)
			}
			return
		}
		if n < 0 || s == "" || strings.TrimLeft(s, "0123456789") != "" {
			t.Fatalf("%q accepted as %d", s, n)
		}
		if back, err := strconv.ParseInt(s, 10, 64); err != nil || back != n {
			t.Fatalf("%q read as %d, not %d", s, n, back)
		}
	})
}

// A session closed while its new stream starts is never missed: the stream
// asks whether the session is closed only once it is subscribed and knows
// the newest id, so a close right after that question reaches it as the
// closed event, which ends it (here the question itself closes the session
// after reading it open).
func TestStreamSeesACloseWhileItStarts(t *testing.T) {
	d, _, info := oneSkillSession(t)
	w := newGatedWriter()
	close(w.open)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d.stream(w, httptest.NewRequestWithContext(ctx, "GET", "/v1/sessions/"+info.ID+"/events", nil), info.ID,
		func(ctx context.Context) (bool, error) {
			if err := d.Close(ctx, info.ID); err != nil {
				t.Error(err)
			}
			return false, nil // read just before the close
		})
	if ctx.Err() != nil {
		t.Fatal("the stream did not end after the session closed")
	}
	got := w.events(t)
	if len(got) != 1 || got[0].data.Type != "closed" {
		t.Fatalf("events %+v, want the closed event", got)
	}
}

// TestIdleStreamHoldsNoBuffer: subscribing allocates a few words, not a
// buffer of subscriberBuffer events: thousands of idle streams cost next to
// nothing until events wait for them.
func TestIdleStreamHoldsNoBuffer(t *testing.T) {
	h := newHub(nil)
	const n = 1000
	subs := make([]*subscriber, 0, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		subs = append(subs, h.subscribe(""))
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per subscriber (a buffer of %d events would be %d)", per, subscriberBuffer, subscriberBuffer*unsafe.Sizeof(Event{}))
	if per > 1024 {
		t.Fatalf("a subscriber allocates %d bytes before any event", per)
	}
	for _, s := range subs {
		h.unsubscribe(s)
	}
}
