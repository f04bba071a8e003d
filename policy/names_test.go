package policy

import (
	"maps"
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
		{"a slug taken as a name leaves the skill without one", []NameRank{
			{Slug: "b", Name: "a", Class: NameBuiltin, Order: 0},
			{Slug: "c", Name: "b", Class: NameBuiltin, Order: 1},
			{Slug: "a", Name: "c", Class: NameOwn, Order: 2},
			{Slug: "d", Name: "a", Class: NameShared, Order: 3},
		}, map[string]string{"b": "a", "c": "b", "a": "c", "d": "d"}},
		{"name and slug both taken", []NameRank{
			{Slug: "p", Name: "q", Class: NameBuiltin, Order: 0},
			{Slug: "r", Name: "p", Class: NameBuiltin, Order: 1},
			{Slug: "q", Name: "p", Class: NameShared, Order: 2},
		}, map[string]string{"p": "q", "r": "p"}},
	} {
		got := PromptNames(tc.ranks)
		if !maps.Equal(got, tc.want) {
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
