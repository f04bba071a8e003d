package skills

import (
	"fmt"
	"io"
)

// Names of the import limits, as reported in LimitError.Limit.
const (
	LimitTotalBytes  = "total-bytes"
	LimitFiles       = "files"
	LimitEntries     = "entries"
	LimitDepth       = "depth"
	LimitFileBytes   = "file-bytes"
	LimitCompression = "compression-ratio"
	LimitManifest    = "manifest-bytes"
)

// ratioFloor is the uncompressed size below which the compression ratio of an
// entry (or of a whole archive) is not checked: small, highly repetitive text
// files legitimately compress far better than any bomb threshold, and a few
// MiB of output is harmless.
const ratioFloor = 1 << 20

// Limits bounds what any import source may hold; checked while reading, before
// anything is published. A zero or negative field means the default from
// DefaultLimits.
type Limits struct {
	MaxTotalBytes  int64   // sum of file sizes
	MaxFiles       int     // regular files
	MaxEntries     int     // files + directories (+ every archive entry)
	MaxDepth       int     // path components below the source root
	MaxFileBytes   int64   // one file
	MaxCompression float64 // archive: uncompressed/compressed ratio, per entry over 1 MiB and in total
	MaxManifest    int64   // a skill's SKILL.md: it is read whole, parsed, and loaded into agents' context
}

// DefaultLimits returns limits that accept real public skill repositories
// (dozens of skills, hundreds of files, fonts, JSON schemas, tens of MB) with
// an order of magnitude to spare, while keeping a hostile source from filling
// the disk or the inode table.
func DefaultLimits() Limits {
	return Limits{
		MaxTotalBytes:  256 << 20,
		MaxFiles:       20000,
		MaxEntries:     40000,
		MaxDepth:       32,
		MaxFileBytes:   64 << 20,
		MaxCompression: 200,
		MaxManifest:    4 << 20,
	}
}

// WithDefaults fills unset fields from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxManifest <= 0 {
		l.MaxManifest = d.MaxManifest
	}
	if l.MaxCompression <= 0 {
		l.MaxCompression = d.MaxCompression
	}
	return l
}

// LimitError names the limit that was hit, the value seen and the limit. For
// the compression ratio, Value and Max are ratios rounded down.
type LimitError struct {
	Limit string // one of the Limit* constants
	Value int64
	Max   int64
	Path  string // slash path of the entry being read when the limit was hit, if any
}

// Error implements error.
func (e *LimitError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s limit exceeded: %d > %d", e.Limit, e.Value, e.Max)
	}
	return fmt.Sprintf("%s limit exceeded at %q: %d > %d", e.Limit, e.Path, e.Value, e.Max)
}

// Unwrap lets errors.Is(err, ErrLimit) match.
func (e *LimitError) Unwrap() error { return ErrLimit }

// budget counts what a source has yielded so far against its limits.
type Budget struct {
	Limits  Limits
	Files   int
	Entries int
	Bytes   int64
}

func NewBudget(lim Limits) *Budget { return &Budget{Limits: lim.WithDefaults()} }

// depth checks the component count of a clean slash path.
func (b *Budget) depth(rel string) error {
	d := 1
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' {
			d++
		}
	}
	if d > b.Limits.MaxDepth {
		return &LimitError{Limit: LimitDepth, Value: int64(d), Max: int64(b.Limits.MaxDepth), Path: rel}
	}
	return nil
}

// dir accounts for one directory entry.
func (b *Budget) Dir(rel string) error {
	if err := b.depth(rel); err != nil {
		return err
	}
	b.Entries++
	if b.Entries > b.Limits.MaxEntries {
		return &LimitError{Limit: LimitEntries, Value: int64(b.Entries), Max: int64(b.Limits.MaxEntries), Path: rel}
	}
	return nil
}

// file accounts for one regular file entry, before its bytes are read.
func (b *Budget) File(rel string) error {
	if err := b.depth(rel); err != nil {
		return err
	}
	b.Entries++
	if b.Entries > b.Limits.MaxEntries {
		return &LimitError{Limit: LimitEntries, Value: int64(b.Entries), Max: int64(b.Limits.MaxEntries), Path: rel}
	}
	b.Files++
	if b.Files > b.Limits.MaxFiles {
		return &LimitError{Limit: LimitFiles, Value: int64(b.Files), Max: int64(b.Limits.MaxFiles), Path: rel}
	}
	return nil
}

// size checks a file size (declared or counted so far) against the per-file
// limit without adding it to the total.
func (b *Budget) Size(rel string, n int64) error {
	if n > b.Limits.MaxFileBytes {
		return &LimitError{Limit: LimitFileBytes, Value: n, Max: b.Limits.MaxFileBytes, Path: rel}
	}
	return nil
}

// add adds n bytes read from rel to the total.
func (b *Budget) Add(rel string, n int64) error {
	b.Bytes += n
	if b.Bytes > b.Limits.MaxTotalBytes {
		return &LimitError{Limit: LimitTotalBytes, Value: b.Bytes, Max: b.Limits.MaxTotalBytes, Path: rel}
	}
	return nil
}

// ratio checks uncompressed/compressed against the compression limit once the
// uncompressed side passes ratioFloor.
func (b *Budget) Ratio(rel string, uncompressed, compressed uint64) error {
	if uncompressed <= ratioFloor {
		return nil
	}
	if compressed == 0 {
		compressed = 1
	}
	r := float64(uncompressed) / float64(compressed)
	if r > b.Limits.MaxCompression {
		return &LimitError{Limit: LimitCompression, Value: int64(r), Max: int64(b.Limits.MaxCompression), Path: rel}
	}
	return nil
}

// manifest checks the size of a skill's SKILL.md.
func (b *Budget) Manifest(rel string, n int64) error {
	if n > b.Limits.MaxManifest {
		return &LimitError{Limit: LimitManifest, Value: n, Max: b.Limits.MaxManifest, Path: rel}
	}
	return nil
}

// copyCounted copies r to w while enforcing the per-file and total limits on
// the bytes actually seen, not on any declared size, and adds them to the
// total. Read and write errors are returned as they are, for the caller to
// wrap; limit errors name rel.
func (b *Budget) CopyCounted(w io.Writer, r io.Reader, rel string) (int64, error) {
	return b.CopyCountedRatio(w, r, rel, nil)
}

// copyCountedRatio is copyCounted with a hook run after every chunk with the
// bytes of this file so far, for checks such as the compression ratio.
func (b *Budget) CopyCountedRatio(w io.Writer, r io.Reader, rel string, check func(n int64) error) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, rerr := r.Read(buf)
		if k > 0 {
			n += int64(k)
			if err := b.Size(rel, n); err != nil {
				return n, err
			}
			if err := b.Add(rel, int64(k)); err != nil {
				return n, err
			}
			if check != nil {
				if err := check(n); err != nil {
					return n, err
				}
			}
			if _, err := w.Write(buf[:k]); err != nil {
				return n, err
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
