package catalog

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"unicode/utf8"

	"skillfs/skills/diff"
)

// DiffGate bounds the memory that comparisons of versions hold together:
// the daemon's, shared by every request; the command line, a process of
// its own for one comparison, has none.
type DiffGate interface {
	// Acquire waits until bytes more may be held, and returns the function
	// that gives them back; when they cannot be held soon, an error that
	// is skills.ErrBusy.
	Acquire(ctx context.Context, bytes int64) (release func(), err error)
}

// LimitDiffs has every comparison of versions from now on (a diff, a
// listing's diffstats, an update's) hold what it needs of g while it runs
// (diff.TreeDiff.Memory). Call it before the catalog is shared.
func (c *Catalog) LimitDiffs(g DiffGate) { c.gate = g }

// compare compares the trees a and b (either "" for the empty tree) within
// budget: listed first, it is granted what it will hold by the gate, then
// calls start (nil: none) and hands each file that changed to each.
func (c *Catalog) compare(ctx context.Context, a, b string, text bool, budget *diff.Budget,
	start func() error, each func(*diff.FileChange) error) error {
	td, err := diff.Open(a, b)
	if err != nil {
		return err
	}
	if c.gate != nil {
		release, err := c.gate.Acquire(ctx, td.Memory(text))
		if err != nil {
			return err
		}
		defer release()
	}
	if start != nil {
		if err := start(); err != nil {
			return err
		}
	}
	return td.Each(text, 0, budget, each)
}

// DiffJSON writes a Diff as JSON while its files are made, as
// json.Encoder with two spaces of indent writes it, but with "files"
// before "diffstat" (which is known last) and each file's "diff" last in
// it, written in pieces: what it holds is one file's change, never the
// answer.
type DiffJSON struct {
	w     *bufio.Writer
	files int
	err   error
}

// NewDiffJSON writes to w.
func NewDiffJSON(w io.Writer) *DiffJSON { return &DiffJSON{w: bufio.NewWriter(w)} }

// Start writes the head of the Diff d: its slug and versions.
func (j *DiffJSON) Start(d *Diff) error {
	j.raw("{\n  \"slug\": ")
	j.value(d.Slug, "")
	j.raw(",\n  \"from\": ")
	j.value(d.From, "")
	j.raw(",\n  \"to\": ")
	j.value(d.To, "")
	j.raw(",\n  \"files\": [")
	return j.flush()
}

// File writes one file's change.
func (j *DiffJSON) File(fc *diff.FileChange) error {
	if j.files > 0 {
		j.raw(",")
	}
	j.files++
	j.raw("\n    ")
	head := *fc
	head.Diff = ""
	b, err := json.MarshalIndent(head, "    ", "  ")
	if err != nil {
		return err // a FileChange always encodes
	}
	if fc.Diff == "" {
		j.raw(string(b))
		return j.flush()
	}
	j.raw(string(b[:len(b)-len("\n    }")]))
	j.raw(",\n      \"diff\": \"")
	for s := fc.Diff; s != ""; {
		piece := prefixOf(s, 16<<10)
		q, _ := json.Marshal(piece) // a string always encodes
		j.raw(string(q[1 : len(q)-1]))
		s = s[len(piece):]
	}
	j.raw("\"\n    }")
	return j.flush()
}

// End writes the diffstat and ends the Diff.
func (j *DiffJSON) End(st diff.Stat) error {
	if j.files > 0 {
		j.raw("\n  ")
	}
	j.raw("],\n  \"diffstat\": ")
	j.value(st, "  ")
	j.raw("\n}\n")
	return j.flush()
}

func (j *DiffJSON) raw(s string) {
	if j.err == nil {
		_, j.err = j.w.WriteString(s)
	}
}

// value writes v as JSON indented under prefix.
func (j *DiffJSON) value(v any, prefix string) {
	b, err := json.MarshalIndent(v, prefix, "  ")
	if err != nil && j.err == nil {
		j.err = err
	}
	j.raw(string(b))
}

func (j *DiffJSON) flush() error {
	if j.err == nil {
		j.err = j.w.Flush()
	}
	return j.err
}

// prefixOf is the longest prefix of s of at most n bytes that ends between
// two characters (at least one character).
func prefixOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if n == 0 {
		_, n = utf8.DecodeRuneInString(s)
	}
	return s[:n]
}
