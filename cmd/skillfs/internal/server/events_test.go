package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/cmd/skillfs/internal/events"
	"skillfs/index"
	"skillfs/skills"
)

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

func (g *gatedWriter) events(t testing.TB) []apitest.SSE {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []apitest.SSE
	apitest.ParseSSE(t, bytes.NewReader(g.buf.Bytes()), func(e apitest.SSE) bool { out = append(out, e); return true })
	return out
}

// slowStream runs the stream of every session for a client that reads
// nothing until the events of produce have been published, then reads
// until stop says it has what it waits for, or the stream ends.
func slowStream(t *testing.T, a *API, produce func(), stop func([]apitest.SSE) bool) []apitest.SSE {
	t.Helper()
	w := newGatedWriter()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		a.stream(w, httptest.NewRequestWithContext(ctx, "GET", "/v1/events", nil), "", nil)
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
func addEvents(t testing.TB, h *events.Hub, db *index.DB, n int) {
	t.Helper()
	evs := make([]api.Event, n)
	for i := range evs {
		evs[i] = api.Event{Type: "refreshed", Session: fmt.Sprintf("s%d", i%3), At: time.Now().UTC()}
	}
	if err := h.Record(func(st ...*skills.Event) error { return db.AddEvents(context.Background(), st...) }, evs...); err != nil {
		t.Fatal(err)
	}
}

// TestSlowReaderGetsEveryEvent: a client that reads nothing while far more
// events happen than its buffer holds gets every one of them, in order,
// caught up from the log.
func TestSlowReaderGetsEveryEvent(t *testing.T) {
	db := openDB(t)
	h := events.NewHub(db)
	const total = 4 * events.SubscriberBuffer
	got := slowStream(t, New(Config{Events: h}), func() { addEvents(t, h, db, total) }, func(got []apitest.SSE) bool { return len(got) >= total })
	if len(got) != total {
		t.Fatalf("%d events, want %d", len(got), total)
	}
	for i, e := range got {
		if e.Data.ID != int64(i+1) || e.Name != "refreshed" {
			t.Fatalf("event %d is %+v, want id %d", i, e, i+1)
		}
	}
}

// TestSlowReaderPastRetentionIsToldToResync: when the events a slow client
// missed were pruned meanwhile, it gets what it can without a gap, then a
// resync event naming the id to resume from, and the stream ends.
func TestSlowReaderPastRetentionIsToldToResync(t *testing.T) {
	db := openDB(t)
	h := events.NewHub(db)
	const total = 2 * events.SubscriberBuffer
	got := slowStream(t, New(Config{Events: h}), func() {
		addEvents(t, h, db, total)
		if _, err := db.PruneEvents(context.Background(), time.Now(), 0); err != nil {
			t.Fatal(err)
		}
	}, func([]apitest.SSE) bool { return false }) // until the stream ends
	if len(got) == 0 {
		t.Fatal("no events")
	}
	end := got[len(got)-1]
	if end.Name != "resync" || end.Data.ID != total || !strings.Contains(end.Data.Reason, "no longer kept") {
		t.Fatalf("the stream ended with %+v, want a resync at id %d", end, total)
	}
	for i, e := range got[:len(got)-1] {
		if e.Data.ID != int64(i+1) {
			t.Fatalf("before the resync: event %d has id %d (a gap)", i, e.Data.ID)
		}
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
	db := openDB(t)
	h := events.NewHub(db)
	closing := &closingSessions{t: t, hub: h, db: db}
	a := New(Config{Events: h, Sessions: closing})
	w := newGatedWriter()
	close(w.open)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, "GET", "/v1/sessions/s1/events", nil)
	req.SetPathValue("id", "s1")
	a.sessionEvents(w, req)
	if ctx.Err() != nil {
		t.Fatal("the stream did not end after the session closed")
	}
	got := w.events(t)
	if len(got) != 1 || got[0].Data.Type != "closed" {
		t.Fatalf("events %+v, want the closed event", got)
	}
}

// sessions is Sessions under a name that embeds without hiding its
// method Sessions.
type sessions = Sessions

// closingSessions closes a session as it is asked whether it is closed,
// after reading it open.
type closingSessions struct {
	sessions // what the test calls none of
	t        testing.TB
	hub      *events.Hub
	db       *index.DB
}

func (c *closingSessions) SessionClosed(ctx context.Context, id string) (bool, error) {
	err := c.hub.Record(func(evs ...*skills.Event) error { return c.db.CloseSession(ctx, id, evs...) },
		api.Event{Type: skills.EventClosed, Session: id, At: time.Now().UTC()})
	if err != nil {
		c.t.Error(err)
	}
	return false, nil // read just before the close
}

// openDB opens a new index with user alice and her open session s1.
func openDB(t testing.TB) *index.DB {
	t.Helper()
	db, err := index.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PutUser(context.Background(), skills.User{UID: "alice", Role: skills.RoleUser}); err != nil {
		t.Fatal(err)
	}
	s := &skills.Session{ID: "s1", UID: "alice", Requested: []string{}, Preload: []string{},
		Pins: []skills.Pin{}, CreatedAt: time.Now()}
	if err := db.CreateSession(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return db
}
