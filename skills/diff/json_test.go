package diff

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// comparison is the object a JSONWriter writes.
type comparison struct {
	Slug     string       `json:"slug"`
	From     string       `json:"from"`
	To       string       `json:"to"`
	DiffStat Stat         `json:"diffstat"`
	Files    []FileChange `json:"files"`
}

// TestJSONWriter: the JSON written a file at a time decodes to the
// comparison it was written from, is indented as json.Encoder indents, and
// carries a diff longer than one piece whole, characters of several bytes
// and control characters included.
func TestJSONWriter(t *testing.T) {
	long := strings.Repeat("+é\x01<tag> & \"quoted\" \\ ✓\n", 3000) // past a piece, pieces cut inside characters
	all := []FileChange{
		{Path: "a.txt", Status: FileChanged, Added: 3000, Diff: long},
		{Path: "b.bin", Status: FileAdded, Binary: true, LinesUnknown: true, Note: "binary files differ"},
		{Path: "c.md", Status: FileRemoved, Removed: 1, Diff: "--- a/c.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"},
	}
	for _, files := range [][]FileChange{all, {}} {
		want := comparison{Slug: "x", From: "", To: "abc", Files: files, DiffStat: StatOf(files)}
		var out bytes.Buffer
		j := NewJSONWriter(&out)
		if err := j.Start(want.Slug, want.From, want.To); err != nil {
			t.Fatal(err)
		}
		for i := range files {
			if err := j.File(&files[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.End(want.DiffStat); err != nil {
			t.Fatal(err)
		}
		var got comparison
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%d files: %v\n%s", len(files), err, out.String())
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d files: decoded %+v, want %+v", len(files), got, want)
		}
		var compact, indented bytes.Buffer
		json.Compact(&compact, out.Bytes())
		json.Indent(&indented, compact.Bytes(), "", "  ")
		if indented.String()+"\n" != out.String() {
			t.Errorf("%d files: not indented as json.Encoder indents:\n%s\nwant:\n%s", len(files), out.String(), indented.String())
		}
	}
}
