package activation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"skillfs/cmd/skillfs/internal/activation/activationtest"
	"sync"
	"testing"

	"skillfs/index"
	"skillfs/skills"
)

var discard = slog.New(slog.DiscardHandler)

// eventLog is the daemon's event log as the recorder sees it (Events): it
// stores activated events with the change they report, as the daemon's
// does, and keeps those stored, in order, as a stream gets them published.
type eventLog struct {
	mu        sync.Mutex // serialises records, as the daemon's does
	published []publishedEvent
}

// publishedEvent is an activated event as stored, with its id.
type publishedEvent struct {
	ID int64
	Activated
}

func (l *eventLog) RecordActivated(store func(evs ...*skills.Event) error, evs ...Activated) error {
	st := make([]*skills.Event, len(evs))
	for i, e := range evs {
		payload, err := json.Marshal(journalAdds{Tools: append([]string{}, e.Tools...), MCPs: append([]string{}, e.MCPs...)})
		if err != nil {
			return err
		}
		st[i] = &skills.Event{Type: "activated", Session: e.Session, Slug: e.Slug, At: e.At, Payload: payload}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := store(st...); err != nil {
		return err
	}
	for i, s := range st {
		if s.ID > 0 {
			l.published = append(l.published, publishedEvent{ID: s.ID, Activated: evs[i]})
		}
	}
	return nil
}

// take returns the events published since the last take.
func (l *eventLog) take() []publishedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	evs := l.published
	l.published = nil
	return evs
}

func opens(t testing.TB, db *index.DB, r *Recorder) map[string]int64 {
	t.Helper()
	acts, err := r.Activations(context.Background(), "s1")
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
	db := activationtest.OpenDB(t)
	events := &eventLog{}
	r := NewRecorder(db, events, discard, nil)

	if err := r.Opened("s1", "pdf"); err != nil {
		t.Fatal(err)
	}
	// Durable at once: the index has it without any flush.
	stored, _ := db.Activations(context.Background(), "s1")
	if len(stored) != 1 || stored[0].Opens != 1 {
		t.Fatalf("after the first open the index holds %+v", stored)
	}
	if evs := events.take(); len(evs) != 1 || evs[0].Session != "s1" || evs[0].Slug != "pdf" || evs[0].ID != 1 {
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
	if evs := events.take(); len(evs) > 0 {
		t.Fatalf("a later open published %+v", evs)
	}
	if err := r.Close(); err != nil {
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
	db := activationtest.OpenDB(t)
	r := NewRecorder(db, &eventLog{}, discard, nil)
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
				r.Flush(context.Background())
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
	db := activationtest.OpenDB(t)
	r := NewRecorder(db, &eventLog{}, discard, nil)
	r.Opened("s1", "a")
	r.Opened("s1", "a")
	db.Close()
	if err := r.Flush(context.Background()); err == nil {
		t.Fatal("flush into a closed index succeeded")
	}
	if p := r.pendingFor("s1"); p["a"].Opens != 1 {
		t.Fatalf("pending after a failed flush = %+v, want the one later open kept", p)
	}
}
