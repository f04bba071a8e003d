package index

import (
	"context"
	"errors"
	"testing"
	"time"

	"skillfs/skills"
)

// eventTypes lists the type, session and slug of every event of a page.
func eventTypes(p *EventPage) []string {
	out := []string{}
	for _, e := range p.Events {
		out = append(out, string(e.Type)+" "+e.Session+" "+e.Slug)
	}
	return out
}

func mustEvents(t *testing.T, db *DB, session string, after int64, limit int) *EventPage {
	t.Helper()
	p, err := db.Events(context.Background(), session, after, limit)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEventsStoredWithTheirChange: an event is stored in the transaction of
// the change it reports, gets the next id, and is stored only when the
// change happens.
func TestEventsStoredWithTheirChange(t *testing.T) {
	forEachBackend(t, testEventsStoredWithTheirChange)
}

func testEventsStoredWithTheirChange(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	createSessions(t, db, "s1", "s2")
	ev := func(typ, session, slug string) *skills.Event {
		return &skills.Event{Type: skills.EventKind(typ), Session: session, Slug: slug, At: t0}
	}

	act := ev("activated", "s1", "pdf")
	act.Payload = []byte(`{"tools":["grep"],"mcps":[]}`)
	if first, err := db.RecordActivation(ctx, "s1", "pdf", t0, act); err != nil || !first || act.ID != 1 {
		t.Fatalf("first activation: first %v, id %d, %v", first, act.ID, err)
	}
	again := ev("activated", "s1", "pdf")
	if first, err := db.RecordActivation(ctx, "s1", "pdf", t0, again); err != nil || first || again.ID != 0 {
		t.Fatalf("second activation: first %v, id %d, %v; want no event", first, again.ID, err)
	}
	refreshed := ev("refreshed", "s2", "")
	if err := db.SetPins(ctx, "s2", []skills.Pin{{Slug: "pdf", Version: "v1"}}, refreshed); err != nil || refreshed.ID != 2 {
		t.Fatalf("set pins: id %d, %v", refreshed.ID, err)
	}
	closed := ev("closed", "s2", "")
	if err := db.CloseSession(ctx, "s2", closed); err != nil || closed.ID != 3 {
		t.Fatalf("close: id %d, %v", closed.ID, err)
	}
	// Closing again changes nothing and reports nothing.
	closedAgain := ev("closed", "s2", "")
	if err := db.CloseSession(ctx, "s2", closedAgain); err != nil || closedAgain.ID != 0 {
		t.Fatalf("close again: id %d, %v", closedAgain.ID, err)
	}
	// A change that fails stores no event.
	failed := ev("refreshed", "s2", "")
	if err := db.SetPins(ctx, "s2", nil, failed); !errors.Is(err, skills.ErrInvalid) || failed.ID != 0 {
		t.Fatalf("set pins of a closed session: id %d, %v", failed.ID, err)
	}
	revoked := ev("revoked", "s1", "pdf")
	if err := db.AddEvents(ctx, revoked); err != nil || revoked.ID != 4 {
		t.Fatalf("add events: id %d, %v", revoked.ID, err)
	}

	all := mustEvents(t, db, "", 0, 100)
	mustEqual(t, "every event", eventTypes(all), []string{"activated s1 pdf", "refreshed s2 ", "closed s2 ", "revoked s1 pdf"})
	if all.Last != 4 || all.Pruned != 0 {
		t.Fatalf("bounds: last %d, pruned %d; want 4, 0", all.Last, all.Pruned)
	}
	mustEqual(t, "the stored activation", all.Events[0], skills.Event{ID: 1, At: t0, Type: "activated", Session: "s1", Slug: "pdf",
		Payload: []byte(`{"tools":["grep"],"mcps":[]}`)})
	mustEqual(t, "events of s1 after 1", eventTypes(mustEvents(t, db, "s1", 1, 100)), []string{"revoked s1 pdf"})
	mustEqual(t, "one event after 1", eventTypes(mustEvents(t, db, "", 1, 1)), []string{"refreshed s2 "})
	if last, err := db.LastEventID(ctx); err != nil || last != 4 {
		t.Fatalf("last event id %d, %v", last, err)
	}
}

// TestBadEventsChangeNothing: an event without a type or time, or with a
// payload that is not a JSON object, fails its change entirely.
func TestBadEventsChangeNothing(t *testing.T) { forEachBackend(t, testBadEventsChangeNothing) }

func testBadEventsChangeNothing(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	createSessions(t, db, "s1")
	for name, e := range map[string]*skills.Event{
		"no type":         {Session: "s1", At: t0},
		"no time":         {Type: "activated", Session: "s1"},
		"payload list":    {Type: "activated", Session: "s1", At: t0, Payload: []byte(`[1]`)},
		"payload garbage": {Type: "activated", Session: "s1", At: t0, Payload: []byte(`{"tools":`)},
		"payload null":    {Type: "activated", Session: "s1", At: t0, Payload: []byte(`null`)},
	} {
		if _, err := db.RecordActivation(ctx, "s1", "pdf", t0, e); !errors.Is(err, skills.ErrInvalid) || e.ID != 0 {
			t.Fatalf("%s: id %d, %v; want ErrInvalid", name, e.ID, err)
		}
	}
	if acts, _ := db.Activations(ctx, "s1"); len(acts) != 0 {
		t.Fatalf("a failed event left activations %+v", acts)
	}
	if p := mustEvents(t, db, "", 0, 10); len(p.Events) != 0 || p.Last != 0 {
		t.Fatalf("failed changes left events %+v", p)
	}
	if _, err := db.Events(ctx, "", -1, 10); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("negative after: %v", err)
	}
}

// TestPruneEvents: pruning by age and by count removes the oldest events,
// remembers how far it went, and never lets an id be given again, also
// after a reopen.
func TestPruneEvents(t *testing.T) { forEachBackend(t, testPruneEvents) }

func testPruneEvents(t *testing.T, b backend) {
	path := b.target(t)
	db := openAt(t, path)
	ctx := context.Background()
	add := func(n int, at time.Time) {
		t.Helper()
		for range n {
			if err := db.AddEvents(ctx, &skills.Event{Type: "refreshed", Session: "s", At: at}); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(3, t0)                  // ids 1-3
	add(4, t0.Add(time.Hour))   // ids 4-7
	add(3, t0.Add(2*time.Hour)) // ids 8-10
	n, err := db.PruneEvents(ctx, t0.Add(time.Hour), 100)
	if err != nil || n != 3 {
		t.Fatalf("prune by age removed %d, %v; want 3", n, err)
	}
	p := mustEvents(t, db, "", 0, 100)
	if p.Pruned != 3 || p.Last != 10 || len(p.Events) != 7 || p.Events[0].ID != 4 {
		t.Fatalf("after pruning by age: pruned %d, last %d, %d events from %d", p.Pruned, p.Last, len(p.Events), p.Events[0].ID)
	}
	if n, err := db.PruneEvents(ctx, t0, 5); err != nil || n != 2 {
		t.Fatalf("prune by count removed %d, %v; want 2", n, err)
	}
	if n, err := db.PruneEvents(ctx, t0, 5); err != nil || n != 0 {
		t.Fatalf("pruning again removed %d, %v", n, err)
	}
	if n, err := db.PruneEvents(ctx, t0.Add(24*time.Hour), 5); err != nil || n != 5 {
		t.Fatalf("prune everything removed %d, %v; want 5", n, err)
	}
	db.Close()
	db = openAt(t, path)
	add(1, t0.Add(3*time.Hour))
	p = mustEvents(t, db, "", 0, 100)
	if p.Pruned != 10 || p.Last != 11 || len(p.Events) != 1 || p.Events[0].ID != 11 {
		t.Fatalf("after a reopen: pruned %d, last %d, events %+v; want the next id 11", p.Pruned, p.Last, p.Events)
	}
	if _, err := db.PruneEvents(ctx, t0, -1); !errors.Is(err, skills.ErrInvalid) {
		t.Fatalf("negative keep: %v", err)
	}
}

// TestReadAudit: batches add up per file, keep the earliest first time, and
// come back ordered by slug and path; reads of unknown sessions are dropped
// and a bad entry writes nothing.
func TestReadAudit(t *testing.T) { forEachBackend(t, testReadAudit) }

func testReadAudit(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	createSessions(t, db, "s1", "s2")
	r := func(session, slug, path string, at time.Time, n int64) skills.FileRead {
		return skills.FileRead{Session: session, Slug: slug, Path: path, FirstAt: at, Reads: n}
	}
	if err := db.AddReads(ctx, []skills.FileRead{
		r("s1", "pdf", "SKILL.md", t0.Add(time.Second), 2),
		r("s1", "docx", "references/a.md", t0.Add(2*time.Second), 1),
		r("s2", "pdf", "SKILL.md", t0, 1),
		r("gone", "pdf", "SKILL.md", t0, 1),
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.AddReads(ctx, []skills.FileRead{
		r("s1", "pdf", "SKILL.md", t0, 3), // an earlier first time wins
		r("s1", "docx", "references/a.md", t0.Add(time.Hour), 1),
		r("s1", "docx", "SKILL.md", t0.Add(time.Hour), 1),
	}); err != nil {
		t.Fatal(err)
	}
	got, err := db.ReadAudit(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "audit of s1", got, []skills.FileRead{
		r("s1", "docx", "SKILL.md", t0.Add(time.Hour), 1),
		r("s1", "docx", "references/a.md", t0.Add(2*time.Second), 2),
		r("s1", "pdf", "SKILL.md", t0, 5),
	})
	for name, bad := range map[string]skills.FileRead{
		"no path":  r("s1", "pdf", "", t0, 1),
		"negative": r("s1", "pdf", "SKILL.md", t0, -1),
		"no time":  r("s1", "pdf", "SKILL.md", time.Time{}, 1),
	} {
		err := db.AddReads(ctx, []skills.FileRead{r("s1", "new", "SKILL.md", t0, 1), bad})
		if !errors.Is(err, skills.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if again, _ := db.ReadAudit(ctx, "s1"); len(again) != 3 {
		t.Fatalf("a refused batch changed the audit: %+v", again)
	}
	if _, err := db.ReadAudit(ctx, "gone"); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("audit of an unknown session: %v", err)
	}
}

// TestRestartEventIDs: a fresh log (a rebuilt index) restarted after an id
// gives only higher ids, and counts the ones up to it as pruned, so a
// client holding an id of the lost log is told to resync; a restart below
// where the log stands changes nothing.
func TestRestartEventIDs(t *testing.T) { forEachBackend(t, testRestartEventIDs) }

func testRestartEventIDs(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	if err := db.RestartEventIDsAfter(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	if err := db.AddEvents(ctx, &skills.Event{Type: "refreshed", Session: "s", At: t0}); err != nil {
		t.Fatal(err)
	}
	p := mustEvents(t, db, "", 41, 100)
	if p.Pruned != 1000 || p.Last != 1001 || len(p.Events) != 1 || p.Events[0].ID != 1001 {
		t.Fatalf("after a restart at 1000: pruned %d, last %d, events %+v", p.Pruned, p.Last, p.Events)
	}
	if err := db.RestartEventIDsAfter(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := db.AddEvents(ctx, &skills.Event{Type: "refreshed", Session: "s", At: t0}); err != nil {
		t.Fatal(err)
	}
	if p := mustEvents(t, db, "", 0, 100); p.Pruned != 1000 || p.Last != 1002 {
		t.Fatalf("a restart below the log moved it: pruned %d, last %d", p.Pruned, p.Last)
	}
}
