package daemon

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/events"
	"skillfs/index"
	"skillfs/skills"
)

// The activation journal keeps, in a file in the data directory, the opens
// the index could not take when they happened: first activations while the
// shared index cannot be reached (the open succeeds once its record is on
// disk), batches of later opens while it stays away, and what the last
// flush at shutdown could not store. They are delivered when the index is
// back, or at the next start, in the order they were written.
//
// The file is a sequence of records, each appended and flushed to disk
// before the open or shutdown it keeps goes on: a header — magic, length,
// CRC-32 of the body — and a JSON body. Space is reserved ahead
// (fallocate), so a shutdown on a full disk can still write; the reserved
// space reads as zeros, and a zero magic ends the journal. A record torn by
// a crash can only be the last: it is dropped with a warning, and the ones
// before it are kept. Every record carries an id that the index records
// when it applies the record (index.DB.ApplySpill), so a record is counted
// exactly once even if the daemon stops between delivering it and clearing
// the file.

// JournalName is the activation journal inside the data directory.
const JournalName = "activations.journal"

const (
	journalReserve = 4 << 20    // bytes reserved ahead: some 40,000 (session, skill) counts
	journalHeader  = 12         // magic (4) | length (4) | crc32 (4)
	journalMagic   = 0x534b4a4c // "SKJL"
	journalMaxBody = 64 << 20   // a longer record is damage, not a batch
)

// journalEntry is one record: opens not yet in the index. With First set
// it is a first activation: Deltas holds its one open, and First is the
// activated event to store with it if the index has no row for it yet.
type journalEntry struct {
	ID     string
	Deltas []index.OpenDelta
	First  *api.Event
}

// journalRecord is the file's encoding of an entry: short keys, times in
// unix nanoseconds (spillDelta), and of a first activation's event only
// what the skill adds (its session, slug and time are the delta's).
type journalRecord struct {
	ID     string       `json:"id"`
	Deltas []spillDelta `json:"d"`
	First  *events.Adds `json:"f,omitempty"`
}

// encode is the record's body.
func (e journalEntry) encode() ([]byte, error) {
	r := journalRecord{ID: e.ID, Deltas: make([]spillDelta, len(e.Deltas))}
	for i, d := range e.Deltas {
		r.Deltas[i] = spillDelta{Session: d.Session, Slug: d.Slug, Opens: d.Opens, LastAt: d.LastAt.UnixNano()}
	}
	if e.First != nil {
		adds := events.AddsOf(*e.First)
		r.First = &adds
	}
	return json.Marshal(r)
}

// decodeJournalEntry reads a record's body and checks what delivering it
// needs: an id, deltas that name a session and a skill with a count that
// is not negative, and a first activation of exactly one open.
func decodeJournalEntry(body []byte) (journalEntry, error) {
	var r journalRecord
	if err := json.Unmarshal(body, &r); err != nil {
		return journalEntry{}, err
	}
	if r.ID == "" {
		return journalEntry{}, errors.New("a record without an id")
	}
	e := journalEntry{ID: r.ID, Deltas: make([]index.OpenDelta, len(r.Deltas))}
	for i, d := range r.Deltas {
		if d.Session == "" || d.Slug == "" || d.Opens < 0 || d.LastAt == 0 {
			return journalEntry{}, fmt.Errorf("record %s: a count without its session, skill or time", r.ID)
		}
		e.Deltas[i] = index.OpenDelta{Session: d.Session, Slug: d.Slug, Opens: d.Opens, LastAt: time.Unix(0, d.LastAt).UTC()}
	}
	if r.First != nil {
		if len(e.Deltas) != 1 || e.Deltas[0].Opens != 1 {
			return journalEntry{}, fmt.Errorf("record %s: a first activation of %d counts", r.ID, len(e.Deltas))
		}
		d := e.Deltas[0]
		first := r.First.Activated(d.Session, d.Slug, d.LastAt)
		e.First = &first
	}
	return e, nil
}

// errJournalEnd is the end of the records: the zeros of reserved space, or
// the end of the file.
var errJournalEnd = errors.New("end of the journal")

// readJournalRecord reads the record at the start of r and its size in the
// file. It returns errJournalEnd at a clean end, and another error for a
// record that is torn or damaged.
func readJournalRecord(r *bufio.Reader) (journalEntry, int64, error) {
	var head [journalHeader]byte
	n, err := io.ReadFull(r, head[:])
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return journalEntry{}, 0, errJournalEnd
	case err != nil:
		return journalEntry{}, 0, fmt.Errorf("a header of %d bytes", n)
	}
	magic := binary.BigEndian.Uint32(head[0:])
	length := binary.BigEndian.Uint32(head[4:])
	sum := binary.BigEndian.Uint32(head[8:])
	if magic == 0 && length == 0 && sum == 0 {
		return journalEntry{}, 0, errJournalEnd
	}
	if magic != journalMagic {
		return journalEntry{}, 0, errors.New("no record header")
	}
	if length > journalMaxBody {
		return journalEntry{}, 0, fmt.Errorf("a record of %d bytes", length)
	}
	body := make([]byte, length)
	if n, err := io.ReadFull(r, body); err != nil {
		return journalEntry{}, 0, fmt.Errorf("a record of %d bytes cut after %d", length, n)
	}
	if crc32.ChecksumIEEE(body) != sum {
		return journalEntry{}, 0, errors.New("a record whose checksum does not match")
	}
	e, err := decodeJournalEntry(body)
	if err != nil {
		return journalEntry{}, 0, fmt.Errorf("a damaged record: %w", err)
	}
	return e, journalHeader + int64(length), nil
}

// readJournal reads the records of r in order until the journal ends and
// returns them with the size they take. torn says why reading stopped
// before a clean end: what follows the valid records is dropped.
func readJournal(r io.Reader) (entries []journalEntry, size int64, torn error) {
	br := bufio.NewReader(r)
	for {
		e, n, err := readJournalRecord(br)
		if errors.Is(err, errJournalEnd) {
			return entries, size, nil
		}
		if err != nil {
			return entries, size, fmt.Errorf("at byte %d: %w", size, err)
		}
		entries = append(entries, e)
		size += n
	}
}

// journal is an open activation journal: the file, and what its records
// not yet delivered add up to, which activation queries count in.
type journal struct {
	path string

	mu      sync.Mutex
	f       *os.File
	end     int64 // where the next record goes
	done    int64 // the records before it are delivered
	records int   // records not yet delivered
	// open is what the records not yet delivered add, by session and
	// skill; FirstAt is set while the key's first activation is among them.
	open map[actKey]*skills.Activation
}

// openJournal opens (creating and reserving) the journal at path and reads
// it. A torn last record is dropped from the file; torn says what was
// dropped. A file whose space cannot be reserved is still used; reserveErr
// says why it is not reserved.
func openJournal(path string) (j *journal, entries []journalEntry, torn, reserveErr, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("open the activation journal: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, nil, nil, fmt.Errorf("activation journal %s is not a regular file", path)
	}
	entries, size, torn := readJournal(io.NewSectionReader(f, 0, 1<<62))
	if torn != nil {
		// What follows the valid records goes, so that the next record
		// written there is not followed by a piece of the torn one.
		if err := f.Truncate(size); err != nil {
			f.Close()
			return nil, nil, nil, nil, fmt.Errorf("drop the torn end of the activation journal: %w", err)
		}
	}
	j = &journal{path: path, f: f, end: size, open: map[actKey]*skills.Activation{}}
	for _, e := range entries {
		j.count(e)
	}
	return j, entries, torn, j.reserve(), nil
}

// reserve allocates journalReserve bytes from the start of the file, read
// as zeros past the records, so that appending within them needs no new
// blocks.
func (j *journal) reserve() error {
	if err := unix.Fallocate(int(j.f.Fd()), 0, 0, journalReserve); err != nil {
		return fmt.Errorf("reserve space for the activation journal: %w", err)
	}
	return nil
}

// count adds an entry to what is not yet delivered. The caller holds mu
// (or owns j alone).
func (j *journal) count(e journalEntry) {
	j.records++
	for _, d := range e.Deltas {
		k := actKey{d.Session, d.Slug}
		a := j.open[k]
		if a == nil {
			a = &skills.Activation{Session: d.Session, Slug: d.Slug}
			j.open[k] = a
		}
		a.Opens += d.Opens
		if d.LastAt.After(a.LastAt) {
			a.LastAt = d.LastAt
		}
		if e.First != nil && (a.FirstAt.IsZero() || d.LastAt.Before(a.FirstAt)) {
			a.FirstAt = d.LastAt
		}
	}
}

// uncount removes a delivered entry from what is not yet delivered. The
// caller holds mu.
func (j *journal) uncount(e journalEntry) {
	j.records--
	for _, d := range e.Deltas {
		k := actKey{d.Session, d.Slug}
		a := j.open[k]
		if a == nil {
			continue
		}
		a.Opens -= d.Opens
		if e.First != nil {
			a.FirstAt = time.Time{}
		}
		if a.Opens <= 0 && a.FirstAt.IsZero() {
			delete(j.open, k)
		}
	}
}

// record is e as the file holds it: header and body.
func (e journalEntry) record() ([]byte, error) {
	body, err := e.encode()
	if err == nil {
		// What is written must read back: a record that does not would
		// end the journal at the next start.
		_, err = decodeJournalEntry(body)
	}
	if err != nil {
		return nil, fmt.Errorf("encode an activation journal record: %w", err)
	}
	buf := make([]byte, journalHeader+len(body))
	binary.BigEndian.PutUint32(buf[0:], journalMagic)
	binary.BigEndian.PutUint32(buf[4:], uint32(len(body)))
	binary.BigEndian.PutUint32(buf[8:], crc32.ChecksumIEEE(body))
	copy(buf[journalHeader:], body)
	return buf, nil
}

// append writes e at the end of the journal and flushes it to disk; e is
// kept once append returns nil.
func (j *journal) append(e journalEntry) error {
	buf, err := e.record()
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.WriteAt(buf, j.end); err != nil {
		return fmt.Errorf("write the activation journal: %w", err)
	}
	if err := unix.Fdatasync(int(j.f.Fd())); err != nil {
		// The open fails, so its record must not count later: the next
		// record goes in its place, and until then a zero header ends
		// the journal before it (best effort).
		j.f.WriteAt(make([]byte, journalHeader), j.end)
		return fmt.Errorf("write the activation journal: %w", err)
	}
	j.end += int64(len(buf))
	j.count(e)
	return nil
}

// pending returns the number of records not yet delivered.
func (j *journal) pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.records
}

// pendingFor returns what the records not yet delivered add to a
// session's activations, by slug.
func (j *journal) pendingFor(session string) map[string]skills.Activation {
	j.mu.Lock()
	defer j.mu.Unlock()
	return ofSession(j.open, session)
}

// firsts returns the keys whose first activation is not yet delivered.
func (j *journal) firsts() []actKey {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []actKey
	for k, a := range j.open {
		if !a.FirstAt.IsZero() {
			out = append(out, k)
		}
	}
	return out
}

// deliver hands the records not yet delivered to fn, oldest first, and
// marks each delivered when fn returns nil; it stops at the first error
// and returns it. Once every record is delivered the file is cleared. One
// deliver runs at a time; records appended meanwhile wait for the next.
func (j *journal) deliver(fn func(journalEntry) error) error {
	j.mu.Lock()
	from, to := j.done, j.end
	j.mu.Unlock()
	br := bufio.NewReader(io.NewSectionReader(j.f, from, to-from))
	for at := from; at < to; {
		e, n, err := readJournalRecord(br)
		if err != nil {
			// Only a record whose write failed can be unreadable: the
			// records after it are read at the next start.
			return fmt.Errorf("read the activation journal at byte %d: %w", at, err)
		}
		if err := fn(e); err != nil {
			return err
		}
		at += n
		j.mu.Lock()
		j.done = at
		j.uncount(e)
		j.mu.Unlock()
	}
	return j.clear()
}

// clear empties the file once everything in it is delivered. A crash
// before the truncation reaches the disk leaves delivered records, which
// the index skips by their ids.
func (j *journal) clear() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.done != j.end {
		return nil
	}
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("clear the activation journal: %w", err)
	}
	j.done, j.end = 0, 0
	j.reserve() // best effort: the space was just freed
	return nil
}

func (j *journal) close() error { return j.f.Close() }

// newEntryID makes the id of a journal record.
func newEntryID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
