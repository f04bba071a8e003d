package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestCommands(t *testing.T) {
	known := func(s string) bool { return s != "secret" }
	for _, tc := range []struct {
		text string
		want []Command
	}{
		{"/skill:pdf", []Command{{Slug: "pdf"}}},
		{"/skill:pdf extract the tables  ", []Command{{Slug: "pdf", Args: "extract the tables"}}},
		{"  \t/skill:pdf\targs\r\nnext line is the message", []Command{{Slug: "pdf", Args: "args"}}},
		{"hello\n/skill:web-search find $pdf\n/skill:pdf a\n/skill:pdf b", []Command{{Slug: "web-search", Args: "find $pdf"}, {Slug: "pdf", Args: "a"}}},
		{"see /skill:pdf here", nil},
		{"/skill:PDF", nil},
		{"/skill:pdf.", nil},
		{"/skill:pdf-", nil},
		{"/skill:a--b", nil},
		{"/skill:", nil},
		{"/skill: pdf", nil},
		{"/skills:pdf", nil},
		{"/skill:secret now", nil},
		{"/skill:" + strings.Repeat("a", 65), nil},
		{"/skill:" + strings.Repeat("a", 64), []Command{{Slug: strings.Repeat("a", 64)}}},
		{"$pdf", nil},
	} {
		if got := Commands(tc.text, known); !slices.Equal(got, tc.want) {
			t.Errorf("Commands(%q) = %+v, want %+v", tc.text, got, tc.want)
		}
	}
}

func FuzzCommands(f *testing.F) {
	for _, s := range []string{
		"/skill:pdf", "/skill:pdf args here\n/skill:docx", " \t/skill:a-b x\r\n", "/skill:PDF", "/skill:pdf.",
		"x /skill:pdf", "/skill:a\xff b", "/skill:a b\xff", "/skill:", "\r\n/skill:a\r",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		all := Commands(text, func(string) bool { return true })
		seen := make(map[string]bool)
		lines := strings.Split(text, "\n")
		for _, c := range all {
			if !validSlug(c.Slug) {
				t.Fatalf("Commands(%q) returned invalid slug %q", text, c.Slug)
			}
			if seen[c.Slug] {
				t.Fatalf("Commands(%q) returned %q twice", text, c.Slug)
			}
			seen[c.Slug] = true
			if strings.ContainsAny(c.Args, "\n") || c.Args != strings.TrimSpace(c.Args) {
				t.Fatalf("Commands(%q): arguments %q span lines or are not trimmed", text, c.Args)
			}
			// Some line holds the command and its arguments.
			if !slices.ContainsFunc(lines, func(l string) bool {
				l = strings.TrimLeft(l, " \t")
				return strings.HasPrefix(l, CommandPrefix+c.Slug) && strings.Contains(l, c.Args)
			}) {
				t.Fatalf("Commands(%q) returned %+v, which no line holds", text, c)
			}
		}
		// Filtering by known keeps the order of the unfiltered answer.
		odd := func(s string) bool { return len(s)%2 == 1 }
		var want []Command
		for _, c := range all {
			if odd(c.Slug) {
				want = append(want, c)
			}
		}
		if got := Commands(text, odd); !slices.Equal(got, want) {
			t.Fatalf("filtered Commands(%q) = %+v, want %+v", text, got, want)
		}
	})
}
