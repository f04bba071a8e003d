package activation

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"skillfs/index"
)

// Earlier versions kept the opens the last flush at shutdown could not
// store in a spill file of two alternately written slots, each with a
// sequence number and a checksum. The activation journal does that now; a
// spill file left by an earlier version is moved into the journal at start
// (importSpill), its batches keeping their ids, so none is counted twice.

// SpillName is the spill file of earlier versions inside the data directory.
const SpillName = "activations.spill"

const (
	spillSlot   = 2 << 20    // bytes per slot
	spillHeader = 16         // magic (4) | seq (4) | length (4) | crc32 (4)
	spillMagic  = 0x534b5350 // "SKSP"
)

// spillBatch is one batch of opens not yet in the index.
type spillBatch struct {
	ID     string
	Deltas []index.OpenDelta
}

// spillRecord is the file's encoding of a batch: short keys, times in unix
// nanoseconds.
type spillRecord struct {
	ID     string       `json:"id"`
	Deltas []spillDelta `json:"d"`
}

// spillDelta is one count of a spill or journal record.
type spillDelta struct {
	Session string `json:"s"`
	Slug    string `json:"k"`
	Opens   int64  `json:"n"`
	LastAt  int64  `json:"t"`
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

// readSpill returns the batches of the newest valid slot; a new or empty
// file holds none. A slot is valid when its checksum matches and its
// contents decode; sequence numbers compare with wrap-around.
func readSpill(f io.ReaderAt) ([]spillBatch, error) {
	var best []spillBatch
	var bestSeq uint32
	found := false
	for slot := range 2 {
		buf := make([]byte, spillSlot)
		n, err := f.ReadAt(buf, int64(slot)*spillSlot)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read activation spill: %w", err)
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
	return best, nil
}

// importSpill moves the batches of a spill file at path into the journal
// and removes the file; it returns how many it moved. No file moves none.
func importSpill(path string, j *journal) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open activation spill: %w", err)
	}
	defer f.Close()
	batches, err := readSpill(f)
	if err != nil {
		return 0, err
	}
	for _, b := range batches {
		if b.ID == "" {
			continue
		}
		if err := j.append(journalEntry{ID: b.ID, Deltas: b.Deltas}); err != nil {
			return 0, err
		}
	}
	if err := os.Remove(path); err != nil {
		return len(batches), fmt.Errorf("remove the activation spill once in the journal: %w", err)
	}
	return len(batches), nil
}
