package source

import (
	"slices"
	"testing"

	"skillfs/skills/manifest"
)

// found is a skill of a source as Pick sees it.
func found(folder, rel, plugin, want, slug, name string) Found {
	return Found{Candidate: Candidate{Name: folder, Rel: rel, Dir: "/src/" + rel, Plugin: plugin},
		Manifest: &manifest.Manifest{Slug: slug, Name: name}, Want: want}
}

// A glob matches the plugin-qualified names of a plugin's skill
// (plugin:name, and its namespaced slug) only when it holds a ':'; a plain
// name matches them all.
func TestPickPluginQualifiedNames(t *testing.T) {
	fs := []Found{
		found("pdf", "skills/pdf", "document-skills", "pdf", "pdf", "pdf"),
		found("pptx", "skills/pptx", "document-skills", "pptx", "pptx", "pptx"),
		found("docx", "skills/docx", "document-skills", "docx", "docx", "docx"),
		found("notes", "doc/notes", "", "notes", "notes", "Doc notes"),
		found("xlsx", "x/xlsx", "document-skills", "document-skills-xlsx", "xlsx", "xlsx"),
		found("xlsx", "y/xlsx", "other", "other-xlsx", "xlsx", "xlsx"),
	}
	for _, tc := range []struct {
		names []string
		want  []string // Rel of the skills picked
	}{
		{[]string{"doc*"}, []string{"skills/docx"}},
		{[]string{"Doc*"}, []string{"doc/notes"}},
		{[]string{"document-skills:*"}, []string{"skills/pdf", "skills/pptx", "skills/docx", "x/xlsx"}},
		{[]string{"*:p*"}, []string{"skills/pdf", "skills/pptx"}},
		{[]string{"document-skills:pdf"}, []string{"skills/pdf"}},
		{[]string{"document-skills-xlsx"}, []string{"x/xlsx"}},
		{[]string{"document-skills-*"}, nil}, // the namespaced slugs are plugin-qualified too
		{[]string{"other:xlsx"}, []string{"y/xlsx"}},
		{[]string{"skills/*"}, []string{"skills/pdf", "skills/pptx", "skills/docx"}}, // a path is no name
	} {
		got, err := Pick(fs, tc.names)
		var rels []string
		if err == nil {
			for _, f := range got {
				rels = append(rels, f.Rel)
			}
		}
		if !slices.Equal(rels, tc.want) {
			t.Errorf("Pick %q = %q (%v), want %q", tc.names, rels, err, tc.want)
		}
	}
	if kept := Ignore(fs, []string{"doc*"}); len(kept) != len(fs)-1 {
		t.Errorf("Ignore doc* keeps %d of %d, want every skill but docx", len(kept), len(fs))
	}
}
