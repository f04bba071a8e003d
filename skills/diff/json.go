package diff

import (
	"bufio"
	"encoding/json"
	"io"
	"unicode/utf8"
)

// JSONWriter writes a comparison of two versions of a skill as JSON while
// its files are compared — the object {"slug", "from", "to", "files",
// "diffstat"} — as json.Encoder with two spaces of indent writes it, but
// with "files" before "diffstat" (which is known last) and each file's
// "diff" last in it, written in pieces: what it holds is one file's
// change, never the answer.
type JSONWriter struct {
	w     *bufio.Writer
	files int
	err   error
}

// NewJSONWriter writes to w.
func NewJSONWriter(w io.Writer) *JSONWriter { return &JSONWriter{w: bufio.NewWriter(w)} }

// Start writes the head: the skill's slug and the versions compared
// (from "" for the empty tree).
func (j *JSONWriter) Start(slug, from, to string) error {
	j.raw("{\n  \"slug\": ")
	j.value(slug, "")
	j.raw(",\n  \"from\": ")
	j.value(from, "")
	j.raw(",\n  \"to\": ")
	j.value(to, "")
	j.raw(",\n  \"files\": [")
	return j.flush()
}

// File writes one file's change.
func (j *JSONWriter) File(fc *FileChange) error {
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

// End writes the diffstat and ends the object.
func (j *JSONWriter) End(st Stat) error {
	if j.files > 0 {
		j.raw("\n  ")
	}
	j.raw("],\n  \"diffstat\": ")
	j.value(st, "  ")
	j.raw("\n}\n")
	return j.flush()
}

func (j *JSONWriter) raw(s string) {
	if j.err == nil {
		_, j.err = j.w.WriteString(s)
	}
}

// value writes v as JSON indented under prefix.
func (j *JSONWriter) value(v any, prefix string) {
	b, err := json.MarshalIndent(v, prefix, "  ")
	if err != nil && j.err == nil {
		j.err = err
	}
	j.raw(string(b))
}

func (j *JSONWriter) flush() error {
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
