package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]*)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	fence     = regexp.MustCompile("(?ms)^```.*?^```$")
	codeSpan  = regexp.MustCompile("`[^`\n]*`")
)

// prose is a Markdown text without its code blocks and code spans.
func prose(text string) string {
	return codeSpan.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
}

// anchor is the fragment GitHub gives a heading: lower case, spaces as
// hyphens, punctuation but hyphens and underscores dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the fragments of a Markdown file's headings (outside code
// blocks), a repeated one numbered as GitHub numbers it.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		a := anchor(strings.TrimSpace(m[1]))
		for i, name := 1, a; ; i++ {
			if !out[name] {
				out[name] = true
				break
			}
			name = a + "-" + strconv.Itoa(i)
		}
	}
	return out
}

// TestMarkdownLinks: every relative link of every Markdown file of the
// repository leads to a file that exists and, with a fragment, to one of
// its headings.
func TestMarkdownLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	var pages []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("only %d Markdown files found under %s", len(pages), root)
	}
	texts := map[string]string{}
	read := func(path string) (string, bool) {
		if s, ok := texts[path]; ok {
			return s, true
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return "", false
		}
		texts[path] = string(data)
		return texts[path], true
	}
	for _, page := range pages {
		text, _ := read(page)
		for _, m := range mdLink.FindAllStringSubmatch(prose(text), -1) {
			target := m[1]
			if target == "" {
				t.Errorf("%s: a link to nothing: %s", page, m[0])
				continue
			}
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
			}
			info, err := os.Stat(dest)
			if err != nil {
				t.Errorf("%s: link %s: %v", page, target, err)
				continue
			}
			if frag == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %s: a fragment of what is not a Markdown file", page, target)
				continue
			}
			if s, _ := read(dest); !anchors(s)[frag] {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, dest, frag)
			}
		}
	}
}
