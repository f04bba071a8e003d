package activation

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skillfs/cmd/skillfs/internal/activation/activationtest"
	"skillfs/index"
	"skillfs/skills"
)

// flakyRecorder is a recorder on db, seen through an index the test makes
// unreachable, with a journal at path; its events are kept in an eventLog.
func flakyRecorder(t testing.TB, db *index.DB, path string) (*Recorder, *activationtest.Flaky, *journal) {
	t.Helper()
	f := &activationtest.Flaky{DB: db}
	o, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	j := o.journal
	t.Cleanup(func() { j.close() })
	r := NewRecorder(f, &eventLog{}, discard, nil)
	r.useJournal(context.Background(), j)
	return r, f, j
}

func open(t testing.TB, r *Recorder, session, slug string, n int) {
	t.Helper()
	for range n {
		if err := r.Opened(session, slug); err != nil {
			t.Fatalf("open of %s in %s: %v", slug, session, err)
		}
	}
}

// While the index cannot be reached, opens succeed: a first activation is
// journaled before the open returns, later ones are journaled at the next
// flush, queries fail as unavailable, and no event is published. Once it
// is back, everything is delivered: exact counts, the first time of the
// first open, one activated event published with that time.
func TestOutageFirstActivationsAreJournaled(t *testing.T) {
	ctx := context.Background()
	db := activationtest.OpenDB(t)
	r, f, j := flakyRecorder(t, db, filepath.Join(t.TempDir(), JournalName))
	events := r.events.(*eventLog)

	open(t, r, "s1", "a", 1)
	f.Down.Store(true)
	open(t, r, "s1", "a", 3)
	before := time.Now()
	open(t, r, "s1", "b", 1)
	after := time.Now()
	open(t, r, "s1", "b", 2)
	if _, err := r.Activations(ctx, "s1"); !errors.Is(err, skills.ErrUnavailable) {
		t.Fatalf("activations during the outage: %v, want ErrUnavailable", err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatalf("flush during the outage = %v, want the opens journaled", err)
	}
	if n := j.pending(); n != 2 {
		t.Fatalf("%d records in the journal, want the first activation of b and one batch", n)
	}
	published := func() []publishedEvent {
		return events.take()
	}
	if evs := published(); len(evs) != 1 || evs[0].Slug != "a" {
		t.Fatalf("published before the index is back: %+v; want a's activation only", evs)
	}

	f.Down.Store(false)
	r.RetryNow()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := j.pending(); n != 0 || r.down.Load() {
		t.Fatalf("%d records left in the journal, down %v", n, r.down.Load())
	}
	acts, err := db.Activations(ctx, "s1")
	if err != nil || len(acts) != 2 || acts[0].Opens != 4 || acts[1].Opens != 3 {
		t.Fatalf("activations after the outage = %+v, %v; want a:4 b:3", acts, err)
	}
	if b := acts[1].FirstAt; b.Before(before) || b.After(after) {
		t.Fatalf("b first activated at %v, outside its first open (%v to %v)", b, before, after)
	}
	evs := published()
	if len(evs) != 1 || evs[0].Slug != "b" || !evs[0].At.Equal(acts[1].FirstAt) {
		t.Fatalf("published when the index came back: %+v; want b's activation at %v", evs, acts[1].FirstAt)
	}
	if got := activationtest.ActivatedEvents(t, db); got[activationtest.Key{Session: "s1", Slug: "a"}] != 1 || got[activationtest.Key{Session: "s1", Slug: "b"}] != 1 {
		t.Fatalf("activated events = %v, want one each", got)
	}
}

// A daemon that stops during an outage without a clean shutdown leaves its
// journal, which the next start delivers; one that stops after delivering
// it but before clearing the file finds it again and counts nothing twice.
func TestJournalReplayedAfterACrash(t *testing.T) {
	ctx := context.Background()
	db := activationtest.OpenDB(t)
	path := filepath.Join(t.TempDir(), JournalName)
	r, f, j := flakyRecorder(t, db, path)
	f.Down.Store(true)
	open(t, r, "s1", "a", 5)
	open(t, r, "s1", "b", 1)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	open(t, r, "s1", "a", 2) // in memory only: lost with the crash, as pending opens are
	j.close()                // the crash: no close, no flush
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	want := func(when string) {
		t.Helper()
		acts, err := db.Activations(ctx, "s1")
		if err != nil || len(acts) != 2 || acts[0].Opens != 5 || acts[1].Opens != 1 {
			t.Fatalf("%s: activations = %+v, %v; want a:5 b:1", when, acts, err)
		}
		if got := activationtest.ActivatedEvents(t, db); len(got) != 2 || got[activationtest.Key{Session: "s1", Slug: "a"}] != 1 || got[activationtest.Key{Session: "s1", Slug: "b"}] != 1 {
			t.Fatalf("%s: activated events = %v, want one each", when, got)
		}
	}
	_, _, j2 := flakyRecorder(t, db, path) // the next start, with the index back
	if j2.pending() != 0 {
		t.Fatalf("the next start left %d records", j2.pending())
	}
	want("after the restart")
	j2.close()
	// Delivered, but the crash came before the file was cleared.
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	r3, _, j3 := flakyRecorder(t, db, path)
	if j3.pending() != 0 {
		t.Fatalf("the records found again were left: %d", j3.pending())
	}
	want("after the same journal was found again")
	// The journal's first activations count as seen: a later open is not
	// a first one.
	open(t, r3, "s1", "b", 1)
	if err := r3.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if acts, _ := db.Activations(ctx, "s1"); acts[1].Opens != 2 {
		t.Fatalf("b after one more open = %d, want 2", acts[1].Opens)
	}
}

// A write that was stored but whose answer was lost (the connection broke
// after the commit) is journaled, and the journal's copy is skipped: a
// first activation by its time, a batch by its id.
func TestLostAnswersAreNotCountedTwice(t *testing.T) {
	ctx := context.Background()
	db := activationtest.OpenDB(t)
	r, f, j := flakyRecorder(t, db, filepath.Join(t.TempDir(), JournalName))
	f.Lose.Store(true)
	open(t, r, "s1", "a", 1)
	f.Lose.Store(false)
	if j.pending() != 1 || !r.down.Load() {
		t.Fatalf("the first activation whose answer was lost: %d records, down %v", j.pending(), r.down.Load())
	}
	r.RetryNow()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	open(t, r, "s1", "a", 2)
	f.Lose.Store(true)
	if err := r.Flush(ctx); err != nil {
		t.Fatalf("flush whose answer was lost = %v, want it journaled", err)
	}
	f.Lose.Store(false)
	r.RetryNow()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	acts, err := db.Activations(ctx, "s1")
	if err != nil || len(acts) != 1 || acts[0].Opens != 3 || j.pending() != 0 {
		t.Fatalf("activations = %+v, %v, %d records left; want a:3", acts, err, j.pending())
	}
	if got := activationtest.ActivatedEvents(t, db); got[activationtest.Key{Session: "s1", Slug: "a"}] != 1 {
		t.Fatalf("activated events = %v, want one", got)
	}
}
