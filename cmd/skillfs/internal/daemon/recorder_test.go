package daemon

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
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

func opens(t testing.TB, db *index.DB, r *recorder) map[string]int64 {
	t.Helper()
	acts, err := r.activations(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, a := range acts {
		out[a.Slug] = a.Opens
	}
	return out
}

func TestRecorderFirstDurableThenBatched(t *testing.T) {
	db := openDB(t)
	h := newHub(db)
	sub := h.subscribe("s1")
	defer h.unsubscribe(sub)
	r := newRecorder(db, h, slog.New(slog.DiscardHandler))

	if err := r.Opened("s1", "pdf"); err != nil {
		t.Fatal(err)
	}
	// Durable at once: the index has it without any flush.
	stored, _ := db.Activations(context.Background(), "s1")
	if len(stored) != 1 || stored[0].Opens != 1 {
		t.Fatalf("after the first open the index holds %+v", stored)
	}
	if evs, _, _ := sub.take(); len(evs) != 1 || evs[0].Type != "activated" || evs[0].Slug != "pdf" || evs[0].ID != 1 {
		t.Fatalf("events %+v, want pdf's activation", evs)
	}

	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				r.Opened("s1", "pdf")
			}
		}()
	}
	wg.Wait()
	if got := opens(t, db, r); got["pdf"] != 201 {
		t.Fatalf("opens with pending = %v, want 201", got)
	}
	if evs, _, _ := sub.take(); len(evs) > 0 {
		t.Fatalf("a later open published %+v", evs)
	}
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	stored, _ = db.Activations(context.Background(), "s1")
	if stored[0].Opens != 201 {
		t.Fatalf("after close the index holds %d opens, want 201", stored[0].Opens)
	}
	if err := r.Opened("s1", "pdf"); !errors.Is(err, errShuttingDown) {
		t.Fatalf("open after close: %v, want errShuttingDown", err)
	}
}

// TestActivationsNeverMissAFlushingBatch: a query during a flush sees every
// open, never a batch that has left memory but is not stored yet.
func TestActivationsNeverMissAFlushingBatch(t *testing.T) {
	db := openDB(t)
	r := newRecorder(db, newHub(db), slog.New(slog.DiscardHandler))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // flush as often as possible
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				r.flush(context.Background())
			}
		}
	}()
	var last int64
	for i := range 2000 {
		r.Opened("s1", "pdf")
		got := opens(t, db, r)["pdf"]
		if got != int64(i+1) {
			close(stop)
			wg.Wait()
			t.Fatalf("after %d opens the query saw %d (previous %d)", i+1, got, last)
		}
		last = got
	}
	close(stop)
	wg.Wait()
}

func TestRecorderKeepsOpensWhenFlushFails(t *testing.T) {
	db := openDB(t)
	r := newRecorder(db, newHub(db), slog.New(slog.DiscardHandler))
	r.Opened("s1", "a")
	r.Opened("s1", "a")
	db.Close()
	if err := r.flush(context.Background()); err == nil {
		t.Fatal("flush into a closed index succeeded")
	}
	if p := r.pendingFor("s1"); p["a"].Opens != 1 {
		t.Fatalf("pending after a failed flush = %+v, want the one later open kept", p)
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
