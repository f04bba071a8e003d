package index

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"skillfs/skills"
)

// createSessions creates empty sessions with the given ids.
func createSessions(t testing.TB, db *DB, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := db.CreateSession(context.Background(), &skills.Session{ID: id, UID: "alice", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRecordActivation(t *testing.T) { forEachBackend(t, testRecordActivation) }

func testRecordActivation(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	createSessions(t, db, "s1", "s2")
	steps := []struct {
		name      string
		session   string
		slug      string
		at        time.Time
		wantFirst bool
	}{
		{"first of pdf", "s1", "pdf", t0, true},
		{"first of docx", "s1", "docx", t0.Add(time.Second), true},
		{"pdf again", "s1", "pdf", t0.Add(2 * time.Second), false},
		{"pdf in another session is new", "s2", "pdf", t0.Add(3 * time.Second), true},
		{"pdf a third time, clock behind", "s1", "pdf", t0.Add(time.Second), false},
		{"first of a skill with no catalog row", "s1", "deleted-skill", t0.Add(4 * time.Second), true},
	}
	for _, st := range steps {
		first, err := db.RecordActivation(ctx, st.session, st.slug, st.at)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if first != st.wantFirst {
			t.Fatalf("%s: first = %v, want %v", st.name, first, st.wantFirst)
		}
	}
	got, err := db.Activations(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "activations of s1", got, []skills.Activation{
		// last_at does not go back when a later call carries an earlier time.
		{Session: "s1", Slug: "pdf", FirstAt: t0, LastAt: t0.Add(2 * time.Second), Opens: 3},
		{Session: "s1", Slug: "docx", FirstAt: t0.Add(time.Second), LastAt: t0.Add(time.Second), Opens: 1},
		{Session: "s1", Slug: "deleted-skill", FirstAt: t0.Add(4 * time.Second), LastAt: t0.Add(4 * time.Second), Opens: 1},
	})
	got, err = db.Activations(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "activations of s2", got, []skills.Activation{
		{Session: "s2", Slug: "pdf", FirstAt: t0.Add(3 * time.Second), LastAt: t0.Add(3 * time.Second), Opens: 1},
	})

	for _, tc := range []struct {
		name, session, slug string
		at                  time.Time
		want                error
	}{
		{"unknown session", "missing", "pdf", t0, skills.ErrNotFound},
		{"zero time", "s1", "pdf", time.Time{}, skills.ErrInvalid},
		{"empty slug", "s1", "", t0, skills.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.RecordActivation(ctx, tc.session, tc.slug, tc.at)
			wantErr(t, "RecordActivation", err, tc.want)
		})
	}
	_, err = db.Activations(ctx, "missing")
	wantErr(t, "Activations of unknown session", err, skills.ErrNotFound)
	empty, err := db.Activations(ctx, "s2")
	if err != nil || len(empty) != 1 {
		t.Fatalf("failed calls changed s2: %v, %v", empty, err)
	}
}

// TestRecordActivationConcurrent counts opens of one skill from many
// goroutines over two handles: the count is exact and exactly one call saw
// the first activation.
func TestRecordActivationConcurrent(t *testing.T) { forEachBackend(t, testRecordActivationConcurrent) }

func testRecordActivationConcurrent(t *testing.T, b backend) {
	path := b.target(t)
	dbs := []*DB{openAt(t, path), openAt(t, path)}
	ctx := context.Background()
	createSessions(t, dbs[0], "s1")
	const goroutines, calls = 8, 200
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		firsts int
		errs   []error
	)
	start := time.Now()
	for g := range goroutines {
		db := dbs[g%len(dbs)]
		wg.Go(func() {
			for i := range calls {
				first, err := db.RecordActivation(ctx, "s1", "pdf", t0.Add(time.Duration(g*calls+i)*time.Millisecond))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				if first {
					firsts++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		t.Fatal(err)
	}
	if firsts != 1 {
		t.Fatalf("%d calls reported the first activation, want 1", firsts)
	}
	got, err := dbs[1].Activations(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := []skills.Activation{{Session: "s1", Slug: "pdf", FirstAt: t0,
		LastAt: t0.Add(time.Duration(goroutines*calls-1) * time.Millisecond), Opens: goroutines * calls}}
	// FirstAt is the time of whichever call came first, which is not
	// necessarily the earliest time passed in.
	if len(got) == 1 {
		want[0].FirstAt = got[0].FirstAt
	}
	mustEqual(t, "activations", got, want)
	t.Logf("%d durable activations in %v (%v each)", goroutines*calls, elapsed, elapsed/time.Duration(goroutines*calls))
}

func TestAddOpens(t *testing.T) { forEachBackend(t, testAddOpens) }

func testAddOpens(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	createSessions(t, db, "s1", "s2")
	if _, err := db.RecordActivation(ctx, "s1", "pdf", t0); err != nil {
		t.Fatal(err)
	}
	batch := []OpenDelta{
		{Session: "s1", Slug: "pdf", Opens: 5, LastAt: t0.Add(5 * time.Second)},
		{Session: "s2", Slug: "docx", Opens: 2, LastAt: t0.Add(7 * time.Second)}, // no row yet
		{Session: "s1", Slug: "pdf", Opens: 1, LastAt: t0.Add(3 * time.Second)},  // same key, older time
		{Session: "gone", Slug: "pdf", Opens: 9, LastAt: t0},                     // unknown session: dropped
		{Session: "s1", Slug: "zero", Opens: 0, LastAt: t0},                      // nothing to add
	}
	if err := db.AddOpens(ctx, batch); err != nil {
		t.Fatal(err)
	}
	s1, err := db.Activations(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "s1", s1, []skills.Activation{{Session: "s1", Slug: "pdf", FirstAt: t0, LastAt: t0.Add(5 * time.Second), Opens: 7}})
	s2, err := db.Activations(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "s2", s2, []skills.Activation{{Session: "s2", Slug: "docx", FirstAt: t0.Add(7 * time.Second), LastAt: t0.Add(7 * time.Second), Opens: 2}})
	if _, err := db.Session(ctx, "gone"); err == nil {
		t.Fatal("AddOpens created a session")
	}
	// A later RecordActivation of a row AddOpens created is not first.
	first, err := db.RecordActivation(ctx, "s2", "docx", t0.Add(8*time.Second))
	if err != nil || first {
		t.Fatalf("RecordActivation after AddOpens: first = %v, %v", first, err)
	}

	for _, tc := range []struct {
		name  string
		batch []OpenDelta
	}{
		{"negative", []OpenDelta{{Session: "s1", Slug: "pdf", Opens: 1, LastAt: t0}, {Session: "s1", Slug: "pdf", Opens: -1, LastAt: t0}}},
		{"zero time", []OpenDelta{{Session: "s1", Slug: "pdf", Opens: 1, LastAt: t0}, {Session: "s1", Slug: "pdf", Opens: 1}}},
		{"empty slug", []OpenDelta{{Session: "s1", Slug: "pdf", Opens: 1, LastAt: t0}, {Session: "s1", Opens: 1, LastAt: t0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, "AddOpens", db.AddOpens(ctx, tc.batch), skills.ErrInvalid)
			got, err := db.Activations(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			if got[0].Opens != 7 {
				t.Fatalf("invalid batch applied in part: opens = %d", got[0].Opens)
			}
		})
	}
	if err := db.AddOpens(ctx, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
}

// TestAddOpensLargeBatch flushes many keys at once and checks every count
// and the order of first activation.
func TestAddOpensLargeBatch(t *testing.T) { forEachBackend(t, testAddOpensLargeBatch) }

func testAddOpensLargeBatch(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	createSessions(t, db, "s1")
	const keys, rounds = 300, 3
	for r := range rounds {
		var batch []OpenDelta
		for k := range keys {
			batch = append(batch, OpenDelta{Session: "s1", Slug: fmt.Sprintf("skill-%03d", k), Opens: int64(k + 1), LastAt: t0.Add(time.Duration(r) * time.Minute)})
		}
		if err := db.AddOpens(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Activations(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != keys {
		t.Fatalf("%d activations, want %d", len(got), keys)
	}
	for k, a := range got {
		want := skills.Activation{Session: "s1", Slug: fmt.Sprintf("skill-%03d", k), FirstAt: t0,
			LastAt: t0.Add((rounds - 1) * time.Minute), Opens: int64(rounds * (k + 1))}
		mustEqual(t, "activation", a, want)
	}
}

// BenchmarkRecordActivation is the durability cost of a first activation:
// one synchronous commit (compare the first read of a SKILL.md through the
// mount, TestActivationLatency in the integration suite).
func BenchmarkRecordActivation(b *testing.B) { benchEachBackend(b, benchRecordActivation) }

func benchRecordActivation(b *testing.B, be backend) {
	db := be.open(b)
	ctx := context.Background()
	createSessions(b, db, "s")
	for i := 0; b.Loop(); i++ {
		if _, err := db.RecordActivation(ctx, "s", fmt.Sprintf("skill-%d", i), time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// An open that races its session's close records nothing: no activation,
// and no event after the closed one.
func TestRecordActivationOfAClosedSession(t *testing.T) {
	forEachBackend(t, testRecordActivationOfAClosedSession)
}

func testRecordActivationOfAClosedSession(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	createSessions(t, db, "s1")
	if err := db.CloseSession(ctx, "s1", &skills.Event{Type: "closed", Session: "s1", At: t0}); err != nil {
		t.Fatal(err)
	}
	last, err := db.LastEventID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev := &skills.Event{Type: "activated", Session: "s1", Slug: "pdf", At: t0, Payload: []byte(`{}`)}
	if _, err := db.RecordActivation(ctx, "s1", "pdf", t0, ev); !errors.Is(err, skills.ErrNotFound) {
		t.Fatalf("activation in a closed session: %v, want ErrNotFound", err)
	}
	if got, err := db.Activations(ctx, "s1"); err != nil || len(got) != 0 {
		t.Fatalf("activations of the closed session: %v, %v", got, err)
	}
	if now, err := db.LastEventID(ctx); err != nil || now != last {
		t.Fatalf("newest event %d after the refused activation, want %d (%v)", now, last, err)
	}
}

// A first activation kept in a journal is applied once, by its id, with
// its event stored only when it creates the row; one whose row has its
// time as first time was stored by a write whose answer was lost and adds
// nothing; one in a closed session creates nothing.
func TestApplySpillFirstActivations(t *testing.T) { forEachBackend(t, testApplySpillFirstActivations) }

func testApplySpillFirstActivations(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	createSessions(t, db, "s1", "s2")
	act := func(slug string, at time.Time) *skills.Event {
		return &skills.Event{Type: "activated", Session: "s1", Slug: slug, At: at, Payload: []byte(`{}`)}
	}
	first := func(id, session, slug string, at time.Time, ev *skills.Event) bool {
		t.Helper()
		applied, err := db.ApplySpill(ctx, id, []OpenDelta{{Session: session, Slug: slug, Opens: 1, LastAt: at}}, ev)
		if err != nil {
			t.Fatal(err)
		}
		return applied
	}
	opens := func(session string) map[string]int64 {
		t.Helper()
		acts, err := db.Activations(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, a := range acts {
			out[a.Slug] = a.Opens
		}
		return out
	}

	ev := act("a", t0)
	if !first("j1", "s1", "a", t0, ev) || ev.ID == 0 {
		t.Fatalf("a first activation that creates the row: event id %d", ev.ID)
	}
	again := act("a", t0)
	if first("j1", "s1", "a", t0, again) || again.ID != 0 {
		t.Fatalf("the same record applied twice, its event id %d", again.ID)
	}
	// Stored directly, its answer lost, then delivered from the journal.
	t1 := t0.Add(time.Second)
	if _, err := db.RecordActivation(ctx, "s1", "b", t1, act("b", t1)); err != nil {
		t.Fatal(err)
	}
	lost := act("b", t1)
	if !first("j2", "s1", "b", t1, lost) || lost.ID != 0 {
		t.Fatalf("a first activation stored before: applied with event id %d", lost.ID)
	}
	// A first open after a restart, of a skill activated before it.
	later := act("a", t1)
	first("j3", "s1", "a", t1, later)
	if got := opens("s1"); got["a"] != 2 || got["b"] != 1 || later.ID != 0 {
		t.Fatalf("opens = %v, event id %d; want a:2 b:1 and no second event", got, later.ID)
	}
	acts, _ := db.Activations(ctx, "s1")
	if !acts[0].FirstAt.Equal(t0) || !acts[0].LastAt.Equal(t1) {
		t.Fatalf("a's times = %v, %v", acts[0].FirstAt, acts[0].LastAt)
	}

	if err := db.CloseSession(ctx, "s2", &skills.Event{Type: "closed", Session: "s2", At: t0}); err != nil {
		t.Fatal(err)
	}
	closed := &skills.Event{Type: "activated", Session: "s2", Slug: "c", At: t1, Payload: []byte(`{}`)}
	if first("j4", "s2", "c", t1, closed); closed.ID != 0 || len(opens("s2")) != 0 {
		t.Fatalf("a first activation in a closed session: event id %d, opens %v", closed.ID, opens("s2"))
	}
	gone := &skills.Event{Type: "activated", Session: "gone", Slug: "c", At: t1, Payload: []byte(`{}`)}
	if first("j5", "gone", "c", t1, gone); gone.ID != 0 {
		t.Fatalf("a first activation in no session stored its event")
	}
}

// Ids of batches applied before the cut are forgotten, later ones kept: a
// batch applied after the cut is still skipped when found again.
func TestPruneApplied(t *testing.T) { forEachBackend(t, testPruneApplied) }

func testPruneApplied(t *testing.T, b backend) {
	db := b.open(t)
	ctx := context.Background()
	createSessions(t, db, "s1")
	d := []OpenDelta{{Session: "s1", Slug: "a", Opens: 1, LastAt: t0}}
	now := t0
	db.now = func() time.Time { return now }
	if _, err := db.ApplySpill(ctx, "old", d); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(time.Hour)
	if _, err := db.ApplySpill(ctx, "new", d); err != nil {
		t.Fatal(err)
	}
	if n, err := db.PruneApplied(ctx, t0.Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("PruneApplied = %d, %v; want 1", n, err)
	}
	if applied, err := db.ApplySpill(ctx, "new", d); err != nil || applied {
		t.Fatalf("a batch applied after the cut, again: applied %v, %v", applied, err)
	}
	if applied, err := db.ApplySpill(ctx, "old", d); err != nil || !applied {
		t.Fatalf("a batch whose id was forgotten: applied %v, %v", applied, err)
	}
}
