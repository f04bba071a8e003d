package policy

import (
	"slices"
	"strings"
	"testing"

	"skillfs/skills"
)

func withTools(tools, mcps []string) *skills.Skill {
	return &skills.Skill{ToolDependencies: tools, MCPDependencies: mcps}
}

func TestToolsToLoad(t *testing.T) {
	tests := []struct {
		name                   string
		active                 []*skills.Skill
		tools, mcps, conflicts []string
	}{
		{name: "none"},
		{
			name: "activation order, no duplicates",
			active: []*skills.Skill{
				withTools([]string{"ocr", "pdftotext"}, []string{"github"}),
				nil,
				withTools([]string{"pdftotext", "grep", "grep", ""}, []string{"slack", "github"}),
			},
			tools: []string{"ocr", "pdftotext", "grep"},
			mcps:  []string{"github", "slack"},
		},
		{
			name: "a name that is both",
			active: []*skills.Skill{
				withTools([]string{"browser"}, nil),
				withTools([]string{"x"}, []string{"browser", "x"}),
				withTools([]string{"browser"}, []string{"browser"}),
			},
			tools:     []string{"browser", "x"},
			mcps:      []string{"browser", "x"},
			conflicts: []string{"browser", "x"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tools, mcps, conflicts := ToolsToLoad(tc.active)
			if !slices.Equal(tools, tc.tools) || !slices.Equal(mcps, tc.mcps) || !slices.Equal(conflicts, tc.conflicts) {
				t.Errorf("ToolsToLoad = %q, %q, %q; want %q, %q, %q", tools, mcps, conflicts, tc.tools, tc.mcps, tc.conflicts)
			}
		})
	}
	// Dependencies of dependencies are not loaded: a skill's own lists only.
	top := &skills.Skill{Slug: "top", SkillDependencies: []string{"dep"}, ToolDependencies: []string{"shallow"}}
	if tools, _, _ := ToolsToLoad([]*skills.Skill{top}); !slices.Equal(tools, []string{"shallow"}) {
		t.Errorf("tools of top = %q, want [shallow]", tools)
	}
}

var knownSlugs = map[string]bool{"pdf": true, "pdf-tools": true, "docx": true, "a": true, "x1": true}

func known(s string) bool { return knownSlugs[s] }

func TestMentions(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
	}{
		{"plain", "use $pdf please", []string{"pdf"}},
		{"start of text", "$pdf", []string{"pdf"}},
		{"trailing period", "Use $pdf.", []string{"pdf"}},
		{"trailing punctuation", "($pdf), $docx! $a?", []string{"pdf", "docx", "a"}},
		{"trailing hyphen", "$pdf- and more", []string{"pdf"}},
		{"hyphenated", "$pdf-tools then $pdf", []string{"pdf-tools", "pdf"}},
		{"link form", "see [$pdf](skill://pdf) and [$docx](x)", []string{"pdf", "docx"}},
		{"escaped by a second dollar", "$$pdf", nil},
		{"escaped by backslash", `\$pdf`, nil},
		{"unknown", "$unknown and $pdf", []string{"pdf"}},
		{"upper case", "$PDF", nil},
		{"upper case tail", "$pdfX", nil},
		{"underscore tail", "$pdf_x", nil},
		{"letter tail beyond ASCII", "$pdfé", nil},
		{"inside a word", "a$pdf", nil},
		{"after a digit", "9$pdf", nil},
		{"after a non-ASCII letter", "é$pdf", nil},
		{"after non-ASCII punctuation", "«$pdf»", []string{"pdf"}},
		{"in a URL path", "https://x/$pdf", nil},
		{"dedupe in order", "$docx $pdf $docx $pdf", []string{"docx", "pdf"}},
		{"double hyphen", "$pdf--tools", nil},
		{"leading hyphen", "$-pdf", nil},
		{"bare dollar", "$ $", nil},
		{"digits", "$x1", []string{"x1"}},
		{"mention after mention", "$pdf$docx", []string{"pdf"}},
		{"newline before", "x\n$docx\n", []string{"docx"}},
		{"too long", "$" + strings.Repeat("a", 65), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Mentions(tc.text, known); !slices.Equal(got, tc.want) {
				t.Errorf("Mentions(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
	long := strings.Repeat("a", 64)
	if got := Mentions("$"+long, func(string) bool { return true }); !slices.Equal(got, []string{long}) {
		t.Errorf("64-character slug: got %q", got)
	}
}

func FuzzMentions(f *testing.F) {
	for _, s := range []string{
		"use $pdf.", "[$pdf](x)", "$$pdf", "$PDF", "a$b", "https://x/$pdf", "$pdf-tools- $docx",
		"$a--b", "«$a»", "\\$a", "$", "$-", "$a\xff", "\xff$a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		all := Mentions(text, func(string) bool { return true })
		seen := make(map[string]bool)
		for _, m := range all {
			if !validSlug(m) {
				t.Fatalf("Mentions(%q) returned invalid slug %q", text, m)
			}
			if seen[m] {
				t.Fatalf("Mentions(%q) returned %q twice", text, m)
			}
			seen[m] = true
			if !strings.Contains(text, "$"+m) {
				t.Fatalf("Mentions(%q) returned %q, which the text does not contain", text, m)
			}
		}
		// Filtering by known keeps the order of the unfiltered answer.
		odd := func(s string) bool { return len(s)%2 == 1 }
		var want []string
		for _, m := range all {
			if odd(m) {
				want = append(want, m)
			}
		}
		if got := Mentions(text, odd); !slices.Equal(got, want) {
			t.Fatalf("filtered Mentions(%q) = %q, want %q", text, got, want)
		}
	})
}
