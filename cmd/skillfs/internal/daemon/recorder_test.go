package daemon

import (
	"context"
	"log/slog"
	"skillfs/cmd/skillfs/internal/activation/activationtest"
	"testing"

	"skillfs/cmd/skillfs/internal/events"
	"skillfs/skills"
)

// TestRecorderPublishesThroughTheHub: a session's first open of a skill is
// published on the hub as the activated event the log stores, with its id;
// a later open publishes nothing.
func TestRecorderPublishesThroughTheHub(t *testing.T) {
	db := activationtest.OpenDB(t)
	h := events.NewHub(db)
	sub := h.Subscribe("s1")
	defer h.Unsubscribe(sub)
	r := newRecorder(db, h, slog.New(slog.DiscardHandler), nil)
	if err := r.Opened("s1", "pdf"); err != nil {
		t.Fatal(err)
	}
	evs, _, _ := sub.Take()
	if len(evs) != 1 || evs[0].Type != skills.EventActivated || evs[0].Slug != "pdf" || evs[0].ID != 1 ||
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
	if evs, _, _ := sub.Take(); len(evs) > 0 {
		t.Fatalf("a later open published %+v", evs)
	}
}
