package fs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"skillfs/skills"
)

// The node-id journal. The kernel names what it holds of a mount by node
// ids (nodeids.go); when a server takes a kept connection back, the kernel
// still holds the ids and generations the previous one handed out. So every
// owner of ids (a session's directory, a grant) is written to the journal
// in StateDir as it is made, before any id of it reaches the kernel, and
// when it leaves the node table (the kernel holds none of its ids); so is
// every node of an owner (a slot: nodeids.go) as the kernel is first given
// it and as it forgets it. A server taking the connection back reads it and
// serves every owner still in it under the same id and generation, holding
// for the kernel exactly the nodes the journal says it may hold.
//
// The journal is appended to, one JSON object a line, and not synced: the
// writes of a killed process are in the page cache, and a machine that
// crashes ends the connection anyway. A line cut short by a crash in the
// middle of a write is the last one, and is ignored. The journal is
// rewritten (to a temporary file renamed over it) once it holds many more
// lines than it has live records: then it holds only the owners in the
// table and the nodes the kernel holds of them, so its size follows what
// the kernel holds, not how long the connection lived.

// journalName is the journal's file in StateDir.
const journalName = "nodes.journal"

// Journal records.
const (
	recSession = "session" // ID, Gen, Session
	recGrant   = "grant"   // ID, Gen, Session, Slug, Dir, Version
	recDrop    = "drop"    // ID
	recNext    = "next"    // ID: the next owner id is above it
	recSeen    = "seen"    // ID, Entry: the kernel was given the node (slot Entry)
	recUnseen  = "unseen"  // ID, Entry: the kernel forgot it
)

// journalRec is one line of the journal.
type journalRec struct {
	Op      string `json:"op"`
	ID      uint64 `json:"id"`
	Gen     uint32 `json:"gen,omitempty"`
	Session string `json:"session,omitempty"`
	Slug    string `json:"slug,omitempty"`
	Dir     string `json:"dir,omitempty"`
	Version string `json:"version,omitempty"`
	Entry   uint64 `json:"entry,omitempty"`
}

// Bounds of what a journal may hold.
const (
	maxJournalLine  = 16 << 10
	maxJournalBytes = 1 << 30
	maxOwnerID      = 1<<(64-inoShift) - 1
)

// check validates a record as read.
func (r *journalRec) check() error {
	if r.ID == 0 || r.ID > maxOwnerID {
		return fmt.Errorf("owner id %d out of range", r.ID)
	}
	switch r.Op {
	case recDrop, recNext:
		return nil
	case recSeen, recUnseen:
		if r.Entry > maxTreeEntries+1 {
			return fmt.Errorf("node %d of owner %d out of range", r.Entry, r.ID)
		}
		return nil
	case recSession:
	case recGrant:
		switch {
		case !validName(r.Slug):
			return fmt.Errorf("slug %q is not a valid name", r.Slug)
		case !filepath.IsAbs(r.Dir):
			return fmt.Errorf("version directory %q is not absolute", r.Dir)
		}
	default:
		return fmt.Errorf("unknown record %q", r.Op)
	}
	switch {
	case r.Gen == 0:
		return fmt.Errorf("owner %d has no generation", r.ID)
	case !validName(r.Session):
		return fmt.Errorf("session %q is not a valid name", r.Session)
	}
	return nil
}

// journalState is what a journal says: the owners in the node table, by
// id, the slots of each the kernel may hold, and the highest owner id ever
// used.
type journalState struct {
	owners map[uint64]journalRec
	seen   map[uint64]map[uint64]bool
	maxID  uint64
}

// held returns how many nodes of the owners the kernel may hold.
func (st *journalState) held() int {
	n := 0
	for _, m := range st.seen {
		n += len(m)
	}
	return n
}

// readJournal parses a journal.
func readJournal(r io.Reader) (journalState, error) {
	st := journalState{owners: make(map[uint64]journalRec), seen: make(map[uint64]map[uint64]bool)}
	br := bufio.NewReaderSize(r, 64<<10)
	var total int64
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) || len(b) > maxJournalLine {
			return st, fmt.Errorf("journal line %d: longer than %d bytes: %w", line, maxJournalLine, skills.ErrLimit)
		}
		if total += int64(len(b)); total > maxJournalBytes {
			return st, fmt.Errorf("journal: more than %d bytes: %w", maxJournalBytes, skills.ErrLimit)
		}
		if errors.Is(err, io.EOF) {
			return st, nil // a line cut short, if any, was never finished
		}
		if err != nil {
			return st, fmt.Errorf("read journal: %w", err)
		}
		var rec journalRec
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return st, fmt.Errorf("journal line %d: %v: %w", line, err, skills.ErrInvalid)
		}
		if err := rec.check(); err != nil {
			return st, fmt.Errorf("journal line %d: %v: %w", line, err, skills.ErrInvalid)
		}
		st.maxID = max(st.maxID, rec.ID)
		switch rec.Op {
		case recNext:
		case recDrop, recSeen, recUnseen:
			o, ok := st.owners[rec.ID]
			if !ok {
				return st, fmt.Errorf("journal line %d: %s of owner %d never made: %w", line, rec.Op, rec.ID, skills.ErrInvalid)
			}
			seen := st.seen[rec.ID]
			switch rec.Op {
			case recDrop:
				delete(st.owners, rec.ID)
				delete(st.seen, rec.ID)
			case recSeen:
				if o.Op == recSession && rec.Entry != 0 {
					return st, fmt.Errorf("journal line %d: node %d of session owner %d: %w", line, rec.Entry, rec.ID, skills.ErrInvalid)
				}
				if seen == nil {
					seen = make(map[uint64]bool)
					st.seen[rec.ID] = seen
				}
				seen[rec.Entry] = true
			case recUnseen:
				delete(seen, rec.Entry)
			}
		default:
			if _, dup := st.owners[rec.ID]; dup {
				return st, fmt.Errorf("journal line %d: owner %d made twice: %w", line, rec.ID, skills.ErrInvalid)
			}
			st.owners[rec.ID] = rec
		}
	}
}

// journal appends to the node-id journal of a mount with a keeper. A
// failed write does not lose what it holds: the live records stay in
// memory, and a later operation (at most once every journalRetry) or
// finish writes them anew, onRecover then writing the rest of the state.
type journal struct {
	path      string
	next      func() uint64 // the owner id counter, for rewrites
	onFail    func(error)   // called when a write fails
	onRecover func() error  // called once the journal is written again after failing

	lastTry time.Time // of a rewrite after failing
	closed  bool

	mu     sync.Mutex
	f      *os.File
	live   map[uint64][]byte          // the record of every owner in the table
	seen   map[uint64]map[uint64]bool // the slots of each the kernel holds
	held   int                        // how many slots seen holds
	lines  int                        // lines in the file
	failed bool
}

// journalRetry is how often a failed journal is tried again.
var journalRetry = time.Second

// openJournal opens the journal at path for appending, holding the owners
// of st (empty for a new mount, whose journal is made anew). It returns
// the journal even when the write fails: failed, it holds the owners and
// tries again later.
func openJournal(path string, st journalState, next func() uint64, onFail func(error)) (*journal, error) {
	j := &journal{path: path, next: next, onFail: onFail, live: make(map[uint64][]byte, len(st.owners)),
		seen: make(map[uint64]map[uint64]bool, len(st.seen))}
	for id, rec := range st.owners {
		b, _ := json.Marshal(rec)
		j.live[id] = append(b, '\n')
	}
	for id, m := range st.seen {
		if len(m) > 0 {
			j.seen[id] = maps.Clone(m)
			j.held += len(m)
		}
	}
	if err := j.rewrite(); err != nil {
		j.failed, j.lastTry = true, time.Now()
		return j, err
	}
	return j, nil
}

// retry writes a failed journal anew, and then the rest of the state
// (onRecover); force: whenever it was last tried. j.mu is held. It
// reports whether the journal is good.
func (j *journal) retry(force bool) bool {
	if !j.failed || j.closed {
		return !j.failed
	}
	if !force && time.Since(j.lastTry) < journalRetry {
		return false
	}
	j.lastTry = time.Now()
	err := j.rewrite()
	if err == nil && j.onRecover != nil {
		err = j.onRecover()
	}
	if err != nil {
		return false
	}
	j.failed = false
	return true
}

// finish tries once more to write a failed journal, and closes it; the
// error says the journal (and so the state) is not on disk.
func (j *journal) finish() error {
	j.mu.Lock()
	ok := j.retry(true)
	j.mu.Unlock()
	j.close()
	if !ok {
		return errors.New("the node journal could not be written")
	}
	return nil
}

// rewrite writes the live records to a new file renamed over the journal.
// j.mu is held (or j not shared yet).
func (j *journal) rewrite() error {
	tmp := j.path + ".tmp"
	f, err := createTemp(tmp, os.O_APPEND)
	if err != nil {
		return fmt.Errorf("write node journal: %w", err)
	}
	w := bufio.NewWriter(f)
	b, _ := json.Marshal(journalRec{Op: recNext, ID: max(j.next(), 1)})
	w.Write(append(b, '\n'))
	for id, line := range j.live {
		w.Write(line)
		for slot := range j.seen[id] {
			b, _ := json.Marshal(journalRec{Op: recSeen, ID: id, Entry: slot})
			w.Write(append(b, '\n'))
		}
	}
	err = w.Flush()
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write node journal %q: %w", j.path, err)
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.lines = f, len(j.live)+j.held+1
	return nil
}

// add records a new owner; it returns once the record is written.
func (j *journal) add(rec journalRec) {
	b, _ := json.Marshal(rec)
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	j.live[rec.ID] = b
	j.write(b)
}

// drop records that an owner left the node table, and rewrites the journal
// once it holds many more lines than owners.
func (j *journal) drop(id uint64) {
	b, _ := json.Marshal(journalRec{Op: recDrop, ID: id})
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.live, id)
	j.held -= len(j.seen[id])
	delete(j.seen, id)
	j.writeOrCompact(append(b, '\n'))
}

// node records that the kernel was given (held) or forgot a node of owner
// id, slot the node id's low bits.
func (j *journal) node(id, slot uint64, held bool) {
	rec := journalRec{Op: recUnseen, ID: id, Entry: slot}
	j.mu.Lock()
	defer j.mu.Unlock()
	m := j.seen[id]
	if held {
		if m == nil {
			m = make(map[uint64]bool)
			j.seen[id] = m
		}
		if m[slot] {
			return
		}
		m[slot] = true
		j.held++
		rec.Op = recSeen
	} else {
		if !m[slot] {
			return
		}
		delete(m, slot)
		if len(m) == 0 {
			delete(j.seen, id)
		}
		j.held--
	}
	b, _ := json.Marshal(rec)
	j.writeOrCompact(append(b, '\n'))
}

// writeOrCompact appends line b, or rewrites the journal instead once it
// holds many more lines than live records. j.mu is held.
func (j *journal) writeOrCompact(b []byte) {
	if j.lines > 2*(len(j.live)+j.held)+4096 && !j.failed {
		if err := j.rewrite(); err != nil {
			j.fail(err)
		}
		return
	}
	j.write(b)
}

// write appends one line. j.mu is held.
func (j *journal) write(b []byte) {
	if j.failed {
		j.retry(false) // a rewrite holds the line
		return
	}
	if _, err := j.f.Write(b); err != nil {
		j.fail(fmt.Errorf("write node journal %q: %w", j.path, err))
		return
	}
	j.lines++
}

// fail stops the journal until a retry: it no longer says what the kernel
// may hold, and onFail makes sure no later server trusts it. j.mu is held.
func (j *journal) fail(err error) {
	j.failed, j.lastTry = true, time.Now()
	if j.onFail != nil {
		j.onFail(err)
	}
}

func (j *journal) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	j.closed = true
}
