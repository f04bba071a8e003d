package daemon

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"skillfs/index"
)

// A spill keeps batches of opens the index could not take — typically the
// last flush at shutdown on a full disk — in a file beside the index, until
// a later start applies them. Its space is reserved (fallocate) while there
// is space, so writing it needs no new blocks when the disk is full. The
// file has two slots written alternately, each with a sequence number and a
// checksum, so a write torn by a crash leaves the previous contents intact.
// Every batch carries an id that the index records when it applies it, so a
// batch is counted exactly once even if the daemon stops between applying
// it and clearing the file.

// SpillName is the spill file inside the data directory.
const SpillName = "activations.spill"

const (
	spillSlot   = 2 << 20    // bytes per slot: some 20,000 (session, skill) counts
	spillHeader = 16         // magic (4) | seq (4) | length (4) | crc32 (4)
	spillMagic  = 0x534b5350 // "SKSP"
)

// spillBatch is one batch of opens not yet in the index.
type spillBatch struct {
	ID     string
	Deltas []index.OpenDelta
}

// spillRecord is the file's encoding of a batch: short keys, times in unix
// nanoseconds, so a slot holds as many counts as it can.
type spillRecord struct {
	ID     string       `json:"id"`
	Deltas []spillDelta `json:"d"`
}

type spillDelta struct {
	Session string `json:"s"`
	Slug    string `json:"k"`
	Opens   int64  `json:"n"`
	LastAt  int64  `json:"t"`
}

// MarshalJSON writes the compact encoding.
func (b spillBatch) MarshalJSON() ([]byte, error) {
	r := spillRecord{ID: b.ID, Deltas: make([]spillDelta, len(b.Deltas))}
	for i, d := range b.Deltas {
		r.Deltas[i] = spillDelta{Session: d.Session, Slug: d.Slug, Opens: d.Opens, LastAt: d.LastAt.UnixNano()}
	}
	return json.Marshal(r)
}

// UnmarshalJSON reads the compact encoding.
func (b *spillBatch) UnmarshalJSON(data []byte) error {
	var r spillRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	b.ID, b.Deltas = r.ID, make([]index.OpenDelta, len(r.Deltas))
	for i, d := range r.Deltas {
		b.Deltas[i] = index.OpenDelta{Session: d.Session, Slug: d.Slug, Opens: d.Opens, LastAt: time.Unix(0, d.LastAt).UTC()}
	}
	return nil
}

// errSpillFull says a spill does not fit the reserved space.
var errSpillFull = errors.New("the activation spill file is full")

// spillFile is an open spill file.
type spillFile struct {
	f   *os.File
	seq uint32 // sequence number of the newest valid slot
}

// openSpill opens (creating and reserving) the spill file at path and
// returns the batches it holds. A file whose space cannot be reserved (the
// disk is full already, or the filesystem cannot) is still used; reserveErr
// says why it is not reserved.
func openSpill(path string) (sp *spillFile, batches []spillBatch, reserveErr, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open activation spill: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, nil, fmt.Errorf("activation spill %s is not a regular file", path)
	}
	sp = &spillFile{f: f}
	batches, seq, err := readSpill(f)
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	sp.seq = seq
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 2*spillSlot); err != nil {
		reserveErr = fmt.Errorf("reserve space for the activation spill: %w", err)
	}
	return sp, batches, reserveErr, nil
}

// readSpill returns the batches of the newest valid slot and its sequence
// number; a new or empty file holds none. A slot is valid when its checksum
// matches and its contents decode; sequence numbers compare with wrap-around.
func readSpill(f *os.File) ([]spillBatch, uint32, error) {
	var best []spillBatch
	var bestSeq uint32
	found := false
	for slot := range 2 {
		buf := make([]byte, spillSlot)
		n, err := f.ReadAt(buf, int64(slot)*spillSlot)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("read activation spill: %w", err)
		}
		buf = buf[:n]
		if len(buf) < spillHeader || binary.BigEndian.Uint32(buf) != spillMagic {
			continue
		}
		seq := binary.BigEndian.Uint32(buf[4:])
		length := binary.BigEndian.Uint32(buf[8:])
		sum := binary.BigEndian.Uint32(buf[12:])
		if int64(length) > int64(len(buf)-spillHeader) {
			continue
		}
		body := buf[spillHeader : spillHeader+int(length)]
		if crc32.ChecksumIEEE(body) != sum {
			continue // torn write: the other slot holds the previous state
		}
		var batches []spillBatch
		if err := json.Unmarshal(body, &batches); err != nil {
			continue
		}
		if !found || int32(seq-bestSeq) > 0 {
			best, bestSeq, found = batches, seq, true
		}
	}
	return best, bestSeq, nil
}

// write replaces the file's contents with batches, in the slot the newest
// state is not in, and flushes it to disk.
func (sp *spillFile) write(batches []spillBatch) error {
	if batches == nil {
		batches = []spillBatch{}
	}
	body, err := json.Marshal(batches)
	if err != nil {
		return fmt.Errorf("encode activation spill: %w", err)
	}
	if len(body) > spillSlot-spillHeader {
		return fmt.Errorf("%d bytes for %d reserved: %w", len(body), spillSlot-spillHeader, errSpillFull)
	}
	next := sp.seq + 1
	var buf bytes.Buffer
	var head [spillHeader]byte
	binary.BigEndian.PutUint32(head[0:], spillMagic)
	binary.BigEndian.PutUint32(head[4:], next)
	binary.BigEndian.PutUint32(head[8:], uint32(len(body)))
	binary.BigEndian.PutUint32(head[12:], crc32.ChecksumIEEE(body))
	buf.Write(head[:])
	buf.Write(body)
	if _, err := sp.f.WriteAt(buf.Bytes(), int64(next%2)*spillSlot); err != nil {
		return fmt.Errorf("write activation spill: %w", err)
	}
	if err := unix.Fdatasync(int(sp.f.Fd())); err != nil {
		return fmt.Errorf("write activation spill: %w", err)
	}
	sp.seq = next
	return nil
}

func (sp *spillFile) close() error { return sp.f.Close() }

// newSpillID makes the id of a batch.
func newSpillID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
