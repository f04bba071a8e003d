package catalog

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"skillfs/skills/diff"
)

// TestDiffJSON: the JSON written a file at a time decodes to the Diff it
// was written from, is indented as json.Encoder indents, and carries a
// diff longer than one piece whole, characters of several bytes and
// control characters included.
func TestDiffJSON(t *testing.T) {
	long := strings.Repeat("+é\x01<tag> & \"quoted\" \\ ✓\n", 3000) // past a piece, pieces cut inside characters
	want := &Diff{Slug: "x", From: "", To: "abc", Files: []diff.FileChange{
		{Path: "a.txt", Status: diff.FileChanged, Added: 3000, Diff: long},
		{Path: "b.bin", Status: diff.FileAdded, Binary: true, LinesUnknown: true, Note: "binary files differ"},
		{Path: "c.md", Status: diff.FileRemoved, Removed: 1, Diff: "--- a/c.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"},
	}}
	want.DiffStat = diff.StatOf(want.Files)
	for _, files := range [][]diff.FileChange{want.Files, {}} {
		d := *want
		d.Files = files
		d.DiffStat = diff.StatOf(files)
		var out bytes.Buffer
		j := NewDiffJSON(&out)
		if err := j.Start(&d); err != nil {
			t.Fatal(err)
		}
		for i := range files {
			if err := j.File(&files[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.End(d.DiffStat); err != nil {
			t.Fatal(err)
		}
		var got Diff
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%d files: %v\n%s", len(files), err, out.String())
		}
		if !reflect.DeepEqual(&got, &d) {
			t.Errorf("%d files: decoded %+v, want %+v", len(files), got, d)
		}
		var compact, indented bytes.Buffer
		json.Compact(&compact, out.Bytes())
		json.Indent(&indented, compact.Bytes(), "", "  ")
		if indented.String()+"\n" != out.String() {
			t.Errorf("%d files: not indented as json.Encoder indents:\n%s\nwant:\n%s", len(files), out.String(), indented.String())
		}
	}
}
