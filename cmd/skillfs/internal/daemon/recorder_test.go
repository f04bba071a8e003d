package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"skillfs/index"
	"skillfs/skills"
)

// openDB opens a new index with users alice and bob and alice's open
// session s1.
func openDB(t testing.TB) *index.DB {
	t.Helper()
	db, err := index.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	addUsers(t, db, "alice", "bob")
	s := &skills.Session{ID: "s1", UID: "alice", Requested: []string{}, Preload: []string{},
		Pins: []skills.Pin{}, CreatedAt: time.Now()}
	if err := db.CreateSession(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return db
}

// addUsers registers ordinary users, whom sessions may then name.
func addUsers(t testing.TB, db *index.DB, uids ...string) {
	t.Helper()
	for _, uid := range uids {
		if err := db.PutUser(context.Background(), skills.User{UID: uid, Role: skills.RoleUser}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecorderPublishesThroughTheHub: a session's first open of a skill is
// published on the hub as the activated event the log stores, with its id;
// a later open publishes nothing.
func TestRecorderPublishesThroughTheHub(t *testing.T) {
	db := openDB(t)
	h := newHub(db)
	sub := h.subscribe("s1")
	defer h.unsubscribe(sub)
	r := newRecorder(db, h, slog.New(slog.DiscardHandler), nil)
	if err := r.Opened("s1", "pdf"); err != nil {
		t.Fatal(err)
	}
	evs, _, _ := sub.take()
	if len(evs) != 1 || evs[0].Type != "activated" || evs[0].Slug != "pdf" || evs[0].ID != 1 ||
		evs[0].Tools == nil || evs[0].MCPs == nil {
		t.Fatalf("events %+v, want pdf's activation", evs)
	}
	page, err := db.Events(context.Background(), "", 0, 10)
	if err != nil || len(page.Events) != 1 || string(page.Events[0].Payload) != `{"tools":[],"mcps":[]}` {
		t.Fatalf("the log holds %+v, %v", page, err)
	}
	if err := r.Opened("s1", "pdf"); err != nil {
		t.Fatal(err)
	}
	if evs, _, _ := sub.take(); len(evs) > 0 {
		t.Fatalf("a later open published %+v", evs)
	}
}

func TestHubFiltersAndNeverBlocks(t *testing.T) {
	h := newHub(openDB(t))
	mine := h.subscribe("s1")
	defer h.unsubscribe(mine)
	all := h.subscribe("")
	defer h.unsubscribe(all)
	idle := h.subscribe("s3")
	defer h.unsubscribe(idle)
	for i := range subscriberBuffer {
		h.publish(Event{ID: int64(i + 1), Type: "activated", Session: []string{"s1", "s2"}[i%2]})
	}
	// What waits is queued, filtered by session; a stream nothing was
	// published to holds no buffer.
	evs, lagged, _ := mine.take()
	if len(evs) != subscriberBuffer/2 || lagged {
		t.Fatalf("s1's stream holds %d events (lagged %v), want %d", len(evs), lagged, subscriberBuffer/2)
	}
	for _, e := range evs {
		if e.Session != "s1" {
			t.Fatalf("session filter let through %+v", e)
		}
	}
	if cap(idle.queue) != 0 {
		t.Fatalf("a stream nothing was published to holds a buffer of %d events", cap(idle.queue))
	}
	if cap(mine.queue) != 0 {
		t.Fatalf("a stream whose events were taken still holds a buffer of %d", cap(mine.queue))
	}
	for i := range 1000 { // far more than a subscriber buffers: must not block
		h.publish(Event{ID: int64(subscriberBuffer + i + 1), Type: "activated", Session: []string{"s1", "s2"}[i%2]})
	}
	// A subscriber that missed events is told so, to catch up from the log,
	// and holds none of them meanwhile.
	for _, s := range []*subscriber{mine, all} {
		if len(s.queue) > subscriberBuffer {
			t.Fatalf("a subscriber holds %d events, more than its %d", len(s.queue), subscriberBuffer)
		}
		if _, lagged, _ := s.take(); !lagged {
			t.Fatal("a full subscriber was not told that it lagged")
		}
	}
	h.closeAll()
	select {
	case <-all.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("closeAll did not wake a stream")
	}
	if _, _, closed := all.take(); !closed {
		t.Fatal("closeAll left a stream open")
	}
}
