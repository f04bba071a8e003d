package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skillfs/index"
	"skillfs/skills"
)

// When the index cannot take the last opens at shutdown, they are kept in
// the spill file and applied at the next start — once, even if that start
// stops before it clears the file.
func TestRecorderSpillsWhatTheIndexCannotTake(t *testing.T) {
	ctx := context.Background()
	old := closeRetries
	closeRetries = []time.Duration{0, 10 * time.Millisecond}
	t.Cleanup(func() { closeRetries = old })
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "index.db")
	spillPath := filepath.Join(dir, SpillName)

	db, err := index.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	addUsers(t, db, "alice")
	if err := db.CreateSession(ctx, &skills.Session{ID: "s1", UID: "alice", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	sp, batches, reserveErr, err := openSpill(spillPath)
	if err != nil || len(batches) != 0 || reserveErr != nil {
		t.Fatalf("openSpill of a new file = %v, %v, %v", batches, reserveErr, err)
	}
	r := newRecorder(db, newHub(db), slog.New(slog.DiscardHandler))
	r.useSpill(ctx, sp, nil)
	for range 21 { // the first is durable at once; 20 wait for a flush
		if err := r.Opened("s1", "pdf"); err != nil {
			t.Fatal(err)
		}
	}
	db.Close() // from now on every write fails, as on a full disk
	if err := r.close(); err != nil {
		t.Fatalf("close with a failing index = %v, want the opens spilled", err)
	}
	sp.close()
	raw, err := os.ReadFile(spillPath)
	if err != nil {
		t.Fatal(err)
	}

	// The next start applies them.
	db = reopen(t, dbPath)
	if n := startWithSpill(t, db, spillPath); n != 21 {
		t.Fatalf("opens after the spill was applied = %d, want 21", n)
	}
	// A start that applied the spill but stopped before clearing the file
	// finds it again: nothing is counted twice.
	if err := os.WriteFile(spillPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := startWithSpill(t, db, spillPath); n != 21 {
		t.Fatalf("opens after the same spill was found again = %d, want 21", n)
	}
}

func reopen(t testing.TB, path string) *index.DB {
	t.Helper()
	db, err := index.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// startWithSpill does what a daemon start does with the spill file and
// returns the opens of pdf in s1.
func startWithSpill(t testing.TB, db *index.DB, path string) int64 {
	t.Helper()
	sp, batches, _, err := openSpill(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	r := newRecorder(db, newHub(db), slog.New(slog.DiscardHandler))
	r.useSpill(context.Background(), sp, batches)
	if len(r.spilled) != 0 {
		t.Fatalf("batches left unapplied: %+v", r.spilled)
	}
	if left, _, err := readSpill(sp.f); err != nil || len(left) != 0 {
		t.Fatalf("spill file after applying: %+v, %v", left, err)
	}
	acts, err := db.Activations(context.Background(), "s1")
	if err != nil || len(acts) != 1 {
		t.Fatalf("activations = %+v, %v", acts, err)
	}
	return acts[0].Opens
}

// A write torn by a crash leaves the previous state readable.
func TestSpillSurvivesATornWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), SpillName)
	sp, _, _, err := openSpill(path)
	if err != nil {
		t.Fatal(err)
	}
	first := []spillBatch{{ID: "a", Deltas: []index.OpenDelta{{Session: "s", Slug: "x", Opens: 3, LastAt: time.Unix(1, 0).UTC()}}}}
	if err := sp.write(first); err != nil {
		t.Fatal(err)
	}
	if err := sp.write(append(first, spillBatch{ID: "b"})); err != nil {
		t.Fatal(err)
	}
	// Tear the newest slot: garbage in the middle of its body.
	newest := int64(sp.seq%2) * spillSlot
	if _, err := sp.f.WriteAt([]byte("garbage"), newest+spillHeader+3); err != nil {
		t.Fatal(err)
	}
	got, _, err := readSpill(sp.f)
	if err != nil || len(got) != 1 || got[0].ID != "a" || got[0].Deltas[0].Opens != 3 {
		t.Fatalf("after a torn write: %+v, %v", got, err)
	}
	sp.close()
}

// Queries count opens that wait in the spill file for the index.
func TestActivationsCountSpilledOpens(t *testing.T) {
	db := openDB(t)
	r := newRecorder(db, newHub(db), slog.New(slog.DiscardHandler))
	if err := r.Opened("s1", "pdf"); err != nil {
		t.Fatal(err)
	}
	r.spilled = []spillBatch{{ID: "z", Deltas: []index.OpenDelta{{Session: "s1", Slug: "pdf", Opens: 5, LastAt: time.Now().UTC()}}}}
	if got := opens(t, db, r); got["pdf"] != 6 {
		t.Fatalf("opens with 5 waiting in the spill = %d, want 6", got["pdf"])
	}
}

// FuzzReadSpill: whatever a spill file holds, reading it never fails
// badly, and what it yields can be written and read back the same.
func FuzzReadSpill(f *testing.F) {
	dir := f.TempDir()
	seed := filepath.Join(dir, "seed")
	sp, _, _, err := openSpill(seed)
	if err != nil {
		f.Fatal(err)
	}
	sp.write([]spillBatch{{ID: "a", Deltas: []index.OpenDelta{{Session: "s", Slug: "x", Opens: 2, LastAt: time.Unix(5, 0).UTC()}}}})
	sp.close()
	b, _ := os.ReadFile(seed)
	f.Add(b[:spillHeader+200])
	f.Add([]byte{})
	f.Add([]byte("SKSP\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x00[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), SpillName)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		sp, batches, _, err := openSpill(p)
		if err != nil {
			return // refused as unreadable: the daemon says so at start
		}
		defer sp.close()
		if err := sp.write(batches); err != nil {
			return // too big to write back: not a round-trip failure
		}
		again, _, err := readSpill(sp.f)
		if err != nil || len(again) != len(batches) {
			t.Fatalf("written %d batches, read back %d, %v", len(batches), len(again), err)
		}
	})
}

// When more counts wait than the spill file holds, the most opened skills
// are kept and the loss is reported, never the whole batch dropped.
func TestSpillKeepsWhatFits(t *testing.T) {
	old := closeRetries
	closeRetries = []time.Duration{0}
	t.Cleanup(func() { closeRetries = old })
	dir := t.TempDir()
	db, err := index.Open(filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	sp, _, _, err := openSpill(filepath.Join(dir, SpillName))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	r := newRecorder(db, newHub(db), slog.New(slog.DiscardHandler))
	r.useSpill(context.Background(), sp, nil)
	const pairs = 40000
	now := time.Now().UTC()
	for i := range pairs {
		k := actKey{session: fmt.Sprintf("%032x", i), slug: fmt.Sprintf("skill-%d", i%50)}
		r.pending[k] = &index.OpenDelta{Session: k.session, Slug: k.slug, Opens: int64(1 + i%7), LastAt: now}
	}
	db.Close()
	err = r.close()
	if !errors.Is(err, errSpillFull) {
		t.Fatalf("close with more counts than the spill holds = %v, want errSpillFull", err)
	}
	got, _, err := readSpill(sp.f)
	if err != nil || len(got) != 1 {
		t.Fatalf("spill after close = %d batches, %v", len(got), err)
	}
	kept := got[0].Deltas
	if len(kept) < 10000 || len(kept) >= pairs {
		t.Fatalf("kept %d of %d counts", len(kept), pairs)
	}
	// Opens run 1..7 evenly: the largest 22,500-odd counts are 4 to 7.
	for _, d := range kept {
		if d.Opens < 4 {
			t.Fatalf("kept a count of %d opens while larger ones were dropped", d.Opens)
		}
	}
	t.Logf("a spill slot kept %d of %d (session, skill) counts", len(kept), pairs)
}
