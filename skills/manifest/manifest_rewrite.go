package manifest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
	"skillfs/skills"
)

// RewriteSlug returns data with the frontmatter key `slug` set to slug and
// every other byte unchanged: an existing top-level slug value (or its line)
// is replaced, otherwise a `slug:` line is inserted after the opening ---
// line, with the file's line ending. A file without frontmatter, which
// Lenient mode reads as all body, gets a frontmatter holding only the slug
// in front of it (after a BOM). Frontmatter that parses only after the
// repair of Lenient mode is written repaired, its quoted values in quotes,
// so that every agent reads it as Lenient mode did, and then edited.
// Frontmatter that holds only a null value (`~`) is replaced by the slug
// line. The display name is kept. The result is parsed again and checked to hold the same frontmatter
// apart from the slug; a layout that cannot be edited in place (a flow
// mapping with an escaped slug, say) is refused with ErrInvalidManifest
// rather than rewritten.
func RewriteSlug(data []byte, slug string) ([]byte, error) {
	if !ValidSlug(slug) {
		return nil, fmt.Errorf("rewrite slug of %s: %q is not a valid slug: %w", skills.ManifestName, slug, skills.ErrInvalid)
	}
	fm, msg := splitFM(data)
	if msg == msgNoOpening {
		return insertFrontmatter(data, slug)
	}
	if msg == "" {
		var root *yaml.Node
		if root, msg = decodeFM(fm.front); msg == "" {
			return rewriteSlug(data, fm, root, slug)
		}
		// Store the repaired text: it reads the same in every YAML parser,
		// where the original needs Claude Code's retry, and the edit below
		// can be checked against it.
		if text, r, _ := repairFM(fm.front); r != nil {
			repaired := make([]byte, 0, len(data)+len(text)-len(fm.front))
			repaired = append(append(append(repaired, data[:fm.open]...), text...), data[fm.close:]...)
			if rfm, msg := splitFM(repaired); msg == "" {
				return rewriteSlug(repaired, rfm, r, slug)
			}
		}
	}
	return nil, fmt.Errorf("rewrite slug of %s: %w", skills.ManifestName,
		&Error{Problems: []Problem{{Field: fieldFrontmatter, Message: msg}}})
}

// insertFrontmatter puts a frontmatter holding only the slug in front of a
// file that has none, after a BOM, with the line ending of the file's first
// line.
func insertFrontmatter(data []byte, slug string) ([]byte, error) {
	start := 0
	if bytes.HasPrefix(data, manifestBOM) {
		start = len(manifestBOM)
	}
	eol := "\n"
	if i := bytes.IndexByte(data[start:], '\n'); i > 0 && data[start+i-1] == '\r' {
		eol = "\r\n"
	}
	block := "---" + eol + KeySlug + ": " + slug + eol + "---" + eol
	out := make([]byte, 0, len(data)+len(block))
	out = append(out, data[:start]...)
	out = append(out, block...)
	out = append(out, data[start:]...)
	if !sameApartFromSlug(nil, fmParts{body: data[start:]}, out, slug) {
		return nil, fmt.Errorf("rewrite slug of %s: %w", skills.ManifestName,
			&Error{Problems: []Problem{{Field: KeySlug, Message: "cannot be added to this file"}}})
	}
	return out, nil
}

func rewriteSlug(data []byte, fm fmParts, root *yaml.Node, slug string) ([]byte, error) {
	var slugKey, slugVal, nextKey *yaml.Node // nextKey follows the slug entry
	if root != nil {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if k := yamlDeref(root.Content[i]); k.Kind == yaml.ScalarNode && k.Value == KeySlug {
				if slugKey != nil {
					return nil, fmt.Errorf("rewrite slug of %s: %w", skills.ManifestName,
						&Error{Problems: []Problem{{Field: fieldFrontmatter, Message: `duplicate key "slug"`}}})
				}
				slugKey, slugVal = root.Content[i], root.Content[i+1]
				if i+2 < len(root.Content) {
					nextKey = root.Content[i+2]
				}
			}
		}
	}
	front := fm.front
	// Each candidate edits the frontmatter text; the first one that parses
	// back to the intended frontmatter wins.
	var edits []fmEdit
	if slugKey != nil {
		if e, found := fmValueEdit(front, slugVal, slug, root.Style&yaml.FlowStyle != 0); found {
			edits = append(edits, e)
		}
		if e, found := fmLineEdit(front, slugKey, slugVal, slug, fm.eol); found {
			edits = append(edits, e)
		}
		if e, found := fmSpanEdit(front, slugKey, nextKey, slug, fm.eol); found && root.Style&yaml.FlowStyle == 0 {
			edits = append(edits, e)
		}
	} else {
		indent := ""
		if root != nil && len(root.Content) > 0 && root.Style&yaml.FlowStyle == 0 {
			if col := root.Content[0].Column - 1; col > 0 {
				indent = strings.Repeat(" ", col)
			}
		}
		line := indent + KeySlug + ": " + slug + fm.eol
		edits = append(edits, fmEdit{0, 0, line})
		if indent != "" {
			// The first key's column is not always the mapping's
			// indentation: an explicit key (`? `) starts after its
			// indicator.
			edits = append(edits, fmEdit{0, 0, KeySlug + ": " + slug + fm.eol})
		}
		if root != nil && len(root.Content) > 0 {
			if off, found := yamlOffset(front, root.Content[0].Line-1, 1); found && off > 0 {
				edits = append(edits, fmEdit{off, off, line})
			}
		}
		if root == nil && len(front) > 0 {
			// Frontmatter that decodes to nothing but is no blank text
			// (`~`, a bare tag) takes no line next to it: the slug line
			// replaces it, which loses no key.
			edits = append(edits, fmEdit{0, len(front), line})
		}
		if root != nil && root.Style&yaml.FlowStyle != 0 {
			if off, found := yamlOffset(front, root.Line-1, root.Column); found && off < len(front) && front[off] == '{' {
				text := KeySlug + ": " + slug
				if len(root.Content) > 0 {
					text += ", "
				}
				edits = append(edits, fmEdit{off + 1, off + 1, text})
			}
		}
	}
	for _, e := range edits {
		out := make([]byte, 0, len(data)+len(e.text))
		out = append(out, data[:fm.open+e.from]...)
		out = append(out, e.text...)
		out = append(out, data[fm.open+e.to:]...)
		if sameApartFromSlug(root, fm, out, slug) {
			return out, nil
		}
	}
	return nil, fmt.Errorf("rewrite slug of %s: %w", skills.ManifestName,
		&Error{Problems: []Problem{{Field: KeySlug, Message: "cannot be rewritten in place in this frontmatter layout"}}})
}

// fmEdit replaces front[from:to] with text.
type fmEdit struct {
	from, to int
	text     string
}

// fmValueEdit replaces just the scalar text of the slug value, keeping its
// tag, anchor, quotes, comments and everything around it. The end of the
// scalar is found by scanning its source text; the caller checks the result.
func fmValueEdit(front []byte, v *yaml.Node, slug string, flow bool) (fmEdit, bool) {
	// An anchored value may be aliased elsewhere, and those copies must not
	// change with it: fmLineEdit drops the anchor, and the check refuses the
	// result when an alias still needs it.
	if v.Kind != yaml.ScalarNode || v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 || v.Anchor != "" {
		return fmEdit{}, false
	}
	off, found := yamlOffset(front, v.Line-1, v.Column)
	if !found {
		return fmEdit{}, false
	}
	// Skip the node's tag; it stays.
	for off < len(front) && (front[off] == '!' || front[off] == '&') {
		for off < len(front) && !isYAMLSpace(front[off]) {
			off++
		}
		for off < len(front) && (front[off] == ' ' || front[off] == '\t') {
			off++
		}
	}
	end := off
	switch {
	case v.Style&yaml.DoubleQuotedStyle != 0:
		if end >= len(front) || front[end] != '"' {
			return fmEdit{}, false
		}
		for end++; end < len(front) && front[end] != '"'; end++ {
			if front[end] == '\\' {
				end++
			}
		}
		if end >= len(front) {
			return fmEdit{}, false
		}
		return fmEdit{off, end + 1, `"` + slug + `"`}, true
	case v.Style&yaml.SingleQuotedStyle != 0:
		if end >= len(front) || front[end] != '\'' {
			return fmEdit{}, false
		}
		for end++; end < len(front); end++ {
			if front[end] == '\'' {
				if end+1 < len(front) && front[end+1] == '\'' {
					end++
					continue
				}
				return fmEdit{off, end + 1, "'" + slug + "'"}, true
			}
		}
		return fmEdit{}, false
	}
	// A plain scalar ends at a line break, a comment, or in a flow
	// collection at a flow indicator. Multi-line plain values are left to
	// fmLineEdit.
	for end < len(front) && yamlLineBreak(front, end) == 0 {
		c := front[end]
		if c == '#' && end > off && isYAMLSpace(front[end-1]) {
			break
		}
		if flow && (c == ',' || c == '}' || c == ']') {
			break
		}
		end++
	}
	for end > off && isYAMLSpace(front[end-1]) {
		end--
	}
	if end == off {
		return fmEdit{}, false
	}
	return fmEdit{off, end, slug}, true
}

func isYAMLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// fmLineEdit replaces the whole `slug:` line of a block mapping, with the
// lines its value v starts or continues on, by `slug: <slug>`.
func fmLineEdit(front []byte, k, v *yaml.Node, slug, eol string) (fmEdit, bool) {
	start, found := yamlOffset(front, k.Line-1, 1)
	if !found {
		return fmEdit{}, false
	}
	indent := k.Column - 1
	if start+indent > len(front) || strings.Trim(string(front[start:start+indent]), " ") != "" {
		return fmEdit{}, false
	}
	end := yamlNextLine(front, start)
	// The value may start on a later line, even at the key's indentation
	// (a block scalar indicator, say).
	if vstart, found := yamlOffset(front, v.Line-1, 1); found && vstart >= end {
		end = yamlNextLine(front, vstart)
	}
	last := end // end of the last non-blank line of the value
	for end < len(front) {
		next := yamlNextLine(front, end)
		line := front[end:next]
		if len(bytes.TrimLeft(line, " \t\r\n")) == 0 {
			end = next
			continue
		}
		if len(line) <= indent || strings.Trim(string(line[:indent+1]), " \t") != "" {
			break
		}
		end, last = next, next
	}
	return fmEdit{start, last, strings.Repeat(" ", indent) + KeySlug + ": " + slug + eol}, true
}

// fmSpanEdit replaces the lines from the `slug:` key of a block mapping to
// the line of the next key (next, or nil for the end), trailing blank and
// comment lines excepted, by `slug: <slug>`. It covers values whose extent
// indentation does not show, such as a flow collection spread over lines at
// the key's own indentation.
func fmSpanEdit(front []byte, k, next *yaml.Node, slug, eol string) (fmEdit, bool) {
	start, found := yamlOffset(front, k.Line-1, 1)
	if !found || strings.Trim(string(front[start:min(start+k.Column-1, len(front))]), " ") != "" {
		return fmEdit{}, false
	}
	end := len(front)
	if next != nil {
		if end, found = yamlOffset(front, next.Line-1, 1); !found || end <= start {
			return fmEdit{}, false
		}
	}
	// Keep the blank and comment lines just above the next key.
	last := yamlNextLine(front, start)
	for pos := last; pos < end; {
		next := yamlNextLine(front, pos)
		if t := bytes.TrimLeft(front[pos:next], " \t"); len(bytes.TrimSpace(t)) != 0 && t[0] != '#' {
			last = next
		}
		pos = next
	}
	return fmEdit{start, last, strings.Repeat(" ", k.Column-1) + KeySlug + ": " + slug + eol}, true
}

// sameApartFromSlug parses the rewritten file and checks that its
// frontmatter holds exactly one slug, equal to slug, and otherwise the same
// keys and values as root, and that the body is untouched.
func sameApartFromSlug(root *yaml.Node, fm fmParts, out []byte, slug string) bool {
	nfm, msg := splitFM(out)
	if msg != "" || !bytes.Equal(nfm.body, fm.body) {
		return false
	}
	nroot, msg := decodeFM(nfm.front)
	if msg != "" || nroot == nil {
		return false
	}
	var want []*yaml.Node
	if root != nil {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if k := yamlDeref(root.Content[i]); !(k.Kind == yaml.ScalarNode && k.Value == KeySlug) {
				want = append(want, k, root.Content[i+1])
			}
		}
	}
	slugs := 0
	var got []*yaml.Node
	for i := 0; i+1 < len(nroot.Content); i += 2 {
		k, v := nroot.Content[i], nroot.Content[i+1]
		if dk := yamlDeref(k); dk.Kind == yaml.ScalarNode && dk.Value == KeySlug {
			slugs++
			if v = yamlDeref(v); v.Kind != yaml.ScalarNode || v.Value != slug {
				return false
			}
			continue
		}
		got = append(got, k, v)
	}
	return slugs == 1 && slices.EqualFunc(want, got, yamlSameNode)
}

// yamlSameNode compares two YAML trees by content, ignoring positions and
// comments. Aliases are compared by name, never followed, so cyclic or
// exponential alias graphs cost nothing.
func yamlSameNode(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Value != b.Value || a.Anchor != b.Anchor ||
		a.Style != b.Style || len(a.Content) != len(b.Content) {
		return false
	}
	return slices.EqualFunc(a.Content, b.Content, yamlSameNode)
}

// yamlLineBreak returns the length of the YAML line break at data[i], or 0.
// YAML (as parsed by yaml.v3) breaks lines at \r\n, \r, \n, NEL, LS and PS.
func yamlLineBreak(data []byte, i int) int {
	switch {
	case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
		return 2
	case data[i] == '\r' || data[i] == '\n':
		return 1
	case bytes.HasPrefix(data[i:], []byte("\u0085")):
		return 2
	case bytes.HasPrefix(data[i:], []byte("\u2028")), bytes.HasPrefix(data[i:], []byte("\u2029")):
		return 3
	}
	return 0
}

// yamlNextLine returns the offset of the line after the one holding data[i].
func yamlNextLine(data []byte, i int) int {
	for i < len(data) {
		if n := yamlLineBreak(data, i); n > 0 {
			return i + n
		}
		_, size := utf8.DecodeRune(data[i:])
		i += size
	}
	return len(data)
}

// yamlOffset converts a 1-based YAML line and column (counted in characters)
// into a byte offset of data.
func yamlOffset(data []byte, line, col int) (int, bool) {
	if line < 1 || col < 1 {
		return 0, false
	}
	off := 0
	for l := 1; l < line; l++ {
		if off >= len(data) {
			return 0, false
		}
		off = yamlNextLine(data, off)
	}
	for c := 1; c < col; c++ {
		if off >= len(data) || yamlLineBreak(data, off) > 0 {
			return 0, false
		}
		_, size := utf8.DecodeRune(data[off:])
		off += size
	}
	return off, true
}

// ParseStored reads a stored SKILL.md the way an agent reads it in a
// session's mount: leniently, in a folder named by its slug.
func ParseStored(data []byte, slug string) (*Manifest, []string, error) {
	return ParseWith(data, ParseOptions{Mode: Lenient, Folder: slug})
}

// SlugSettled reports whether a SKILL.md, read as a stored one is read
// (ParseStored, in a folder named slug), gives slug, and any slug key it has
// says exactly that: an import stores it unchanged then, and otherwise
// writes slug in with RewriteSlug.
func SlugSettled(data []byte, slug string) bool {
	p := &manifestParser{mode: Lenient, folder: slug}
	m := p.parse(data)
	if m == nil || len(p.problems) > 0 || m.Slug != slug {
		return false
	}
	return !p.slugKey || p.slugText == slug
}
