package daemon

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"skillfs/cmd/skillfs/internal/events"
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
	h := events.NewHub(db)
	sub := h.Subscribe("s1")
	defer h.Unsubscribe(sub)
	r := newRecorder(db, h, slog.New(slog.DiscardHandler))

	if err := r.Opened("s1", "pdf"); err != nil {
		t.Fatal(err)
	}
	// Durable at once: the index has it without any flush.
	stored, _ := db.Activations(context.Background(), "s1")
	if len(stored) != 1 || stored[0].Opens != 1 {
		t.Fatalf("after the first open the index holds %+v", stored)
	}
	if evs, _, _ := sub.Take(); len(evs) != 1 || evs[0].Type != "activated" || evs[0].Slug != "pdf" || evs[0].ID != 1 {
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
	if evs, _, _ := sub.Take(); len(evs) > 0 {
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
	r := newRecorder(db, events.NewHub(db), slog.New(slog.DiscardHandler))
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
	r := newRecorder(db, events.NewHub(db), slog.New(slog.DiscardHandler))
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
