package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
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

// TestRecorderPublishesThroughTheHub: a session's first open of a skill is
// published on the hub as the activated event the log stores, with its id;
// a later open publishes nothing.
func TestRecorderPublishesThroughTheHub(t *testing.T) {
	db := openDB(t)
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
