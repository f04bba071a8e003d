package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/index"
)

var discard = slog.New(slog.DiscardHandler)

// newJournal opens a new journal in a temporary directory.
func newJournal(t testing.TB) *journal {
	t.Helper()
	j, entries, torn, _, err := openJournal(filepath.Join(t.TempDir(), JournalName))
	if err != nil || torn != nil || len(entries) != 0 {
		t.Fatalf("openJournal of a new file = %d entries, %v, %v", len(entries), torn, err)
	}
	t.Cleanup(func() { j.close() })
	return j
}

func delta(session, slug string, opens int64, at time.Time) index.OpenDelta {
	return index.OpenDelta{Session: session, Slug: slug, Opens: opens, LastAt: at.UTC()}
}

// Records read back as written, first activations with their event, and
// what they add up to is what queries count in.
func TestJournalRoundTrip(t *testing.T) {
	j := newJournal(t)
	t0 := time.Unix(1000, 5).UTC()
	ev := &api.Event{Type: "activated", Session: "s1", Slug: "pdf", At: t0, Tools: []string{"ocr"}, MCPs: []string{}}
	in := []journalEntry{
		{ID: "a", First: ev, Deltas: []index.OpenDelta{delta("s1", "pdf", 1, t0)}},
		{ID: "b", Deltas: []index.OpenDelta{delta("s1", "pdf", 4, t0.Add(time.Second)), delta("s2", "doc", 2, t0)}},
	}
	for _, e := range in {
		if err := j.append(e); err != nil {
			t.Fatal(err)
		}
	}
	got, size, torn := readJournal(io.NewSectionReader(j.f, 0, 1<<62))
	if torn != nil || len(got) != 2 || size != j.end {
		t.Fatalf("read back %d records of %d bytes (written %d), %v", len(got), size, j.end, torn)
	}
	if f := got[0].First; f == nil || f.Slug != "pdf" || !f.At.Equal(t0) || len(f.Tools) != 1 || f.Tools[0] != "ocr" {
		t.Fatalf("first activation read back as %+v", got[0].First)
	}
	if got[1].First != nil || len(got[1].Deltas) != 2 || got[1].Deltas[0].Opens != 4 {
		t.Fatalf("batch read back as %+v", got[1])
	}
	p := j.pendingFor("s1")["pdf"]
	if p.Opens != 5 || !p.FirstAt.Equal(t0) || !p.LastAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("pending for s1/pdf = %+v", p)
	}
	if fs := j.firsts(); len(fs) != 1 || fs[0] != (actKey{"s1", "pdf"}) {
		t.Fatalf("firsts = %v", fs)
	}
}

// A record torn by a crash is dropped with a warning at the next open, the
// records before it kept, and the next record written in its place reads
// back.
func TestJournalDropsATornLastRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), JournalName)
	j, _, _, _, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(50, 0)
	for i := range 3 {
		if err := j.append(journalEntry{ID: fmt.Sprint(i), Deltas: []index.OpenDelta{delta("s", "x", int64(i+1), t0)}}); err != nil {
			t.Fatal(err)
		}
	}
	end := j.end
	j.close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The crash cut the last record short: its tail never reached the disk.
	cut := bytes.Clone(raw)
	clear(cut[end-5 : end])
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	j, entries, torn, _, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if torn == nil || len(entries) != 2 || entries[1].ID != "1" {
		t.Fatalf("after a torn write: %d records, torn %v; want 2 and a warning", len(entries), torn)
	}
	if p := j.pendingFor("s")["x"]; p.Opens != 3 {
		t.Fatalf("pending after dropping the torn record = %d opens, want 3", p.Opens)
	}
	if err := j.append(journalEntry{ID: "3", Deltas: []index.OpenDelta{delta("s", "x", 1, t0)}}); err != nil {
		t.Fatal(err)
	}
	again, _, torn := readJournal(io.NewSectionReader(j.f, 0, 1<<62))
	if torn != nil || len(again) != 3 || again[2].ID != "3" {
		t.Fatalf("after writing past the torn record: %d records, %v", len(again), torn)
	}
}

// Delivery stops at the first record the index does not take, keeps it and
// those after it, and clears the file once everything is delivered.
func TestJournalDeliverKeepsWhatFailed(t *testing.T) {
	j := newJournal(t)
	t0 := time.Unix(50, 0)
	for i := range 3 {
		if err := j.append(journalEntry{ID: fmt.Sprint(i), Deltas: []index.OpenDelta{delta("s", "x", 1, t0)}}); err != nil {
			t.Fatal(err)
		}
	}
	refuse := errors.New("index away")
	var took []string
	err := j.deliver(func(e journalEntry) error {
		if e.ID == "1" {
			return refuse
		}
		took = append(took, e.ID)
		return nil
	})
	if !errors.Is(err, refuse) || len(took) != 1 || j.pending() != 2 {
		t.Fatalf("deliver = %v, took %v, %d left; want record 0 taken, 2 left", err, took, j.pending())
	}
	took = nil
	if err := j.deliver(func(e journalEntry) error { took = append(took, e.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(took) != "[1 2]" || j.pending() != 0 || len(j.pendingFor("s")) != 0 {
		t.Fatalf("second delivery took %v, %d left", took, j.pending())
	}
	if entries, size, _ := readJournal(io.NewSectionReader(j.f, 0, 1<<62)); len(entries) != 0 || size != 0 || j.end != 0 {
		t.Fatalf("the file still holds %d records after everything was delivered", len(entries))
	}
}

// FuzzReadJournal: whatever follows the valid records of a journal — a
// record torn by a crash, garbage, zeros — reading it keeps every record
// before it, never fails badly, and what it yields is valid: written to a
// new journal, it reads back the same.
func FuzzReadJournal(f *testing.F) {
	var valid bytes.Buffer
	{
		j := newJournal(f)
		t0 := time.Unix(7, 0)
		ev := &api.Event{Type: "activated", Session: "s", Slug: "x", At: t0}
		j.append(journalEntry{ID: "a", First: ev, Deltas: []index.OpenDelta{delta("s", "x", 1, t0)}})
		j.append(journalEntry{ID: "b", Deltas: []index.OpenDelta{delta("s", "x", 3, t0)}})
		io.Copy(&valid, io.NewSectionReader(j.f, 0, j.end))
	}
	prefix := valid.Bytes()
	f.Add([]byte{})
	f.Add(prefix[:len(prefix)-4])
	f.Add(prefix[:20])
	f.Add([]byte("SKJL\x00\x00\x00\x02\x00\x00\x00\x00{}"))
	f.Add(make([]byte, journalHeader+3))
	f.Fuzz(func(t *testing.T, tail []byte) {
		for _, data := range [][]byte{tail, append(bytes.Clone(prefix), tail...)} {
			entries, size, _ := readJournal(bytes.NewReader(data))
			if size > int64(len(data)) {
				t.Fatalf("read %d bytes of %d", size, len(data))
			}
			if len(data) > len(tail) && (len(entries) < 2 || entries[0].ID != "a" || entries[1].ID != "b") {
				t.Fatalf("the valid records before the tail were not all kept: %d", len(entries))
			}
			var out []byte
			for _, e := range entries {
				rec, err := e.record()
				if err != nil {
					t.Fatalf("a record read back cannot be written: %v", err)
				}
				out = append(out, rec...)
			}
			again, _, torn := readJournal(bytes.NewReader(out))
			if torn != nil || len(again) != len(entries) {
				t.Fatalf("%d records written, %d read back, %v", len(entries), len(again), torn)
			}
		}
	})
}
