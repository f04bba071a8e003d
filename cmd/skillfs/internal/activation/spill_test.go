package activation

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"skillfs/cmd/skillfs/internal/activation/activationtest"
	"testing"
	"time"
)

// legacySpill is a spill file as an earlier version wrote it: batches in
// slot seq%2 of two, behind a header with their checksum.
func legacySpill(t testing.TB, seq uint32, batches []spillRecord) []byte {
	t.Helper()
	body, err := json.Marshal(batches)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 2*spillSlot)
	slot := out[int(seq%2)*spillSlot:]
	binary.BigEndian.PutUint32(slot[0:], spillMagic)
	binary.BigEndian.PutUint32(slot[4:], seq)
	binary.BigEndian.PutUint32(slot[8:], uint32(len(body)))
	binary.BigEndian.PutUint32(slot[12:], crc32.ChecksumIEEE(body))
	copy(slot[spillHeader:], body)
	return out
}

// A spill file an earlier version left is moved into the journal at start
// and delivered — once, even when the same batch was applied before the
// file could be removed.
func TestSpillOfAnEarlierVersionIsDelivered(t *testing.T) {
	ctx := context.Background()
	db := activationtest.OpenDB(t)
	home := t.TempDir()
	at := time.Now().UTC().UnixNano()
	raw := legacySpill(t, 7, []spillRecord{{ID: "old-1", Deltas: []spillDelta{{Session: "s1", Slug: "pdf", Opens: 5, LastAt: at}}}})
	start := func() {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, SpillName), raw, 0o600); err != nil {
			t.Fatal(err)
		}
		o, err := openJournal(filepath.Join(home, JournalName))
		if err != nil || o.torn != nil {
			t.Fatalf("openJournal = %v, %v", o.torn, err)
		}
		j := o.journal
		defer j.close()
		if n, err := importSpill(filepath.Join(home, SpillName), j); err != nil || n != 1 {
			t.Fatalf("importSpill = %d, %v; want 1 batch", n, err)
		}
		if _, err := os.Stat(filepath.Join(home, SpillName)); !os.IsNotExist(err) {
			t.Fatalf("the spill file is still there: %v", err)
		}
		NewRecorder(db, &eventLog{}, discard, nil).useJournal(ctx, j)
		if n := j.pending(); n != 0 {
			t.Fatalf("%d records left in the journal", n)
		}
	}
	start()
	start() // the same file found again: applied before, by its id
	acts, err := db.Activations(ctx, "s1")
	if err != nil || len(acts) != 1 || acts[0].Opens != 5 {
		t.Fatalf("activations = %+v, %v; want pdf with 5 opens", acts, err)
	}
}

// A slot torn by a crash leaves the previous one readable.
func TestSpillSurvivesATornWrite(t *testing.T) {
	d := []spillDelta{{Session: "s", Slug: "x", Opens: 3, LastAt: time.Unix(1, 0).UnixNano()}}
	older := legacySpill(t, 1, []spillRecord{{ID: "a", Deltas: d}})
	newer := legacySpill(t, 2, []spillRecord{{ID: "a", Deltas: d}, {ID: "b"}})
	// Seq 2 is in slot 0, seq 1 in slot 1; garbage in the body of seq 2.
	file := append(newer[:spillSlot:spillSlot], older[spillSlot:]...)
	copy(file[spillHeader+3:], "garbage")
	got, err := readSpill(bytes.NewReader(file))
	if err != nil || len(got) != 1 || got[0].ID != "a" || got[0].Deltas[0].Opens != 3 {
		t.Fatalf("after a torn write: %+v, %v", got, err)
	}
}

// FuzzReadSpill: whatever a spill file of an earlier version holds,
// reading it never fails badly, and what it yields goes into a journal
// that reads back the same, or is refused as a whole.
func FuzzReadSpill(f *testing.F) {
	seed := legacySpill(f, 1, []spillRecord{{ID: "a", Deltas: []spillDelta{{Session: "s", Slug: "x", Opens: 2, LastAt: 5e9}}}})
	f.Add(seed[:spillHeader+200])
	f.Add([]byte{})
	f.Add([]byte("SKSP\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x00[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		batches, err := readSpill(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("reading bytes in memory failed: %v", err)
		}
		var journal []byte
		written := 0
		for _, b := range batches {
			if rec, err := (journalEntry{ID: b.ID, Deltas: b.Deltas}).record(); err == nil {
				journal = append(journal, rec...)
				written++
			}
		}
		entries, _, torn := readJournal(bytes.NewReader(journal))
		if torn != nil || len(entries) != written {
			t.Fatalf("journal of %d batches read back %d, %v", written, len(entries), torn)
		}
	})
}
