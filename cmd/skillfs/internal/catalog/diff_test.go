package catalog

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"skillfs/skills/diff"
)

// TestDiffJSON: what diff.JSONWriter writes of a Diff, a file at a time,
// decodes to that Diff: the answer streamed is the answer Diff returns.
func TestDiffJSON(t *testing.T) {
	d := &Diff{Slug: "x", From: "", To: "abc", Files: []diff.FileChange{
		{Path: "a.txt", Status: diff.FileChanged, Added: 1, Diff: "--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+é\n"},
		{Path: "b.bin", Status: diff.FileAdded, Binary: true, LinesUnknown: true, Note: "binary files differ"},
	}}
	d.DiffStat = diff.StatOf(d.Files)
	var out bytes.Buffer
	j := diff.NewJSONWriter(&out)
	if err := j.Start(d.Slug, d.From, d.To); err != nil {
		t.Fatal(err)
	}
	for i := range d.Files {
		if err := j.File(&d.Files[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.End(d.DiffStat); err != nil {
		t.Fatal(err)
	}
	var got Diff
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !reflect.DeepEqual(&got, d) {
		t.Errorf("decoded %+v, want %+v", got, d)
	}
}
