package policy

import (
	"maps"
	"strings"
	"testing"
)

func TestNameKey(t *testing.T) {
	same := [][]string{
		{"Deploy Agent", "deploy-agent", "DEPLOY_AGENT", " deploy \t agent ", "deploy\u200b-agent", "deploy--agent", "\u200edeploy agent"},
		{"PDF", "pdf"},
		{"Word / DOCX", "word / docx", "word-/-docx"},
		{"document-skills:pdf", "Document Skills:PDF"},
	}
	for _, group := range same {
		for _, n := range group {
			if NameKey(n) != NameKey(group[0]) {
				t.Errorf("NameKey(%q) = %q, NameKey(%q) = %q; want the same", n, NameKey(n), group[0], NameKey(group[0]))
			}
		}
	}
	for _, pair := range [][2]string{{"pdf", "pdfs"}, {"deployagent", "deploy agent"}, {"a:b", "a b"}, {"pdf", "document-skills:pdf"}} {
		if NameKey(pair[0]) == NameKey(pair[1]) {
			t.Errorf("NameKey(%q) == NameKey(%q) = %q", pair[0], pair[1], NameKey(pair[0]))
		}
	}
	if NameKey("\u200b - _") != "" {
		t.Errorf("a name of separators and invisible characters has key %q, want empty", NameKey("\u200b - _"))
	}
}

func TestPromptNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks []NameRank
		want  map[string]string
	}{
		{"distinct names", []NameRank{
			{Slug: "a", Name: "Alpha", Class: NameShared, Order: 0},
			{Slug: "b", Name: "Beta", Class: NameOwn, Order: 1},
		}, map[string]string{"a": "Alpha", "b": "Beta"}},
		{"a builtin keeps its name against the user's own and a shared one, whatever the order", []NameRank{
			{Slug: "mine", Name: "deploy agent", Class: NameOwn, Order: 0},
			{Slug: "theirs", Name: "Deploy-Agent", Class: NameShared, Order: 1},
			{Slug: "deploy-agent", Name: "deploy-agent", Class: NameBuiltin, Order: 2},
		}, map[string]string{"deploy-agent": "deploy-agent", "mine": "mine", "theirs": "theirs"}},
		{"the user's own before a shared one", []NameRank{
			{Slug: "shared-notes", Name: "Notes", Class: NameShared, Order: 0},
			{Slug: "notes", Name: "notes", Class: NameOwn, Order: 1},
		}, map[string]string{"notes": "notes", "shared-notes": "shared-notes"}},
		{"within a class the readable set's order", []NameRank{
			{Slug: "x1", Name: "X", Class: NameShared, Order: 1},
			{Slug: "x0", Name: "X", Class: NameShared, Order: 0},
		}, map[string]string{"x0": "X", "x1": "x1"}},
		{"a name that is another skill's slug yields to it", []NameRank{
			{Slug: "b", Name: "a", Class: NameBuiltin, Order: 0},
			{Slug: "c", Name: "b", Class: NameBuiltin, Order: 1},
			{Slug: "a", Name: "c", Class: NameOwn, Order: 2},
			{Slug: "d", Name: "a", Class: NameShared, Order: 3},
			{Slug: "e", Name: "E", Class: NameShared, Order: 4},
		}, map[string]string{"b": "b", "c": "c", "a": "a", "d": "d", "e": "E"}},
		{"a skill's own slug as its name", []NameRank{
			{Slug: "pdf", Name: "PDF", Class: NameShared, Order: 0},
			{Slug: "x", Name: "pdf", Class: NameBuiltin, Order: 1},
		}, map[string]string{"pdf": "PDF", "x": "x"}},
		{"an empty name", []NameRank{{Slug: "z", Name: "\u200b", Class: NameOwn}}, map[string]string{"z": "z"}},
	} {
		got := PromptNames(tc.ranks)
		if !maps.Equal(got, tc.want) || len(got) != len(tc.ranks) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		seen := map[string]string{}
		for slug, n := range got {
			if other, dup := seen[NameKey(n)]; dup {
				t.Errorf("%s: %s and %s both show as %q", tc.name, slug, other, n)
			}
			seen[NameKey(n)] = slug
		}
	}
}

// FuzzPromptNames: whatever the names, every skill gets one, and no two
// the same.
func FuzzPromptNames(f *testing.F) {
	f.Add("a", "b", "c", "a-b", "A B", "b", uint8(0x1b))
	f.Add("deploy-agent", "Deploy Agent", "x", "deploy agent", "y", "x", uint8(7))
	f.Fuzz(func(t *testing.T, s1, n1, s2, n2, s3, n3 string, classes uint8) {
		var ranks []NameRank
		seen := map[string]bool{}
		for i, sn := range [][2]string{{s1, n1}, {s2, n2}, {s3, n3}} {
			slug := strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
					return r
				}
				return '-'
			}, strings.ToLower(sn[0]))
			if !validSlug(slug) || seen[slug] {
				return
			}
			seen[slug] = true
			ranks = append(ranks, NameRank{Slug: slug, Name: sn[1], Class: int(classes>>(2*i)) % 3, Order: i})
		}
		got := PromptNames(ranks)
		if len(got) != len(ranks) {
			t.Fatalf("%v: names %v", ranks, got)
		}
		keys := map[string]string{}
		for slug, n := range got {
			k := NameKey(n)
			if other, dup := keys[k]; dup || k == "" {
				t.Fatalf("%v: %s and %s both show as %q", ranks, slug, other, n)
			}
			keys[k] = slug
		}
	})
}
