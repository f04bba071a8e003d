package manifest

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file holds what Lenient mode does to read a SKILL.md the way the
// agents read it where Strict mode would refuse it.

// bodyDescription returns the text that stands in for a missing
// description: the first paragraph of the Markdown body, or, when the body
// has no paragraph, the text of its first heading, with from naming which.
// Claude Code documents "the first paragraph of markdown content" (its
// loader takes the first non-empty line, heading marks stripped); a leading
// "# Title" is a heading, not a paragraph, and says less about when to use a
// skill than the paragraph under it. A paragraph is a run of non-blank lines
// that are not headings, thematic breaks (--- *** ___), fenced code or HTML
// comments; its lines are trimmed, blockquote marks dropped, and joined with
// spaces.
func bodyDescription(body string) (text, from string) {
	var para []string
	heading := ""
	fence := ""      // the opening fence while inside fenced code
	comment := false // inside a multi-line HTML comment
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		case comment:
			comment = !strings.Contains(t, "-->")
			continue
		}
		var isBreak bool // the line ends a paragraph and is not part of one
		switch {
		case t == "":
			isBreak = true
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			fence = t[:len(t)-len(strings.TrimLeft(t, t[:1]))]
			isBreak = true
		case strings.HasPrefix(t, "<!--"):
			comment = !strings.Contains(t[len("<!--"):], "-->")
			isBreak = true
		case isATXHeading(t):
			if heading == "" && len(para) == 0 {
				heading = strings.TrimSpace(strings.TrimRight(strings.TrimLeft(t, "#"), "# \t"))
			}
			isBreak = true
		case isThematicBreak(t), stripBlockquote(t) == "":
			isBreak = true // a lone > separates paragraphs of a quote
		}
		if isBreak {
			if len(para) > 0 {
				break
			}
			continue
		}
		para = append(para, stripBlockquote(t))
	}
	if p := strings.TrimSpace(strings.Join(para, " ")); p != "" {
		return p, "first paragraph"
	}
	if heading != "" {
		return heading, "first heading"
	}
	return "", ""
}

// isATXHeading reports whether the trimmed line t is a "#" heading: one to
// six #, then a blank or the end. "#tag" is text.
func isATXHeading(t string) bool {
	n := len(t) - len(strings.TrimLeft(t, "#"))
	return n >= 1 && n <= 6 && (n == len(t) || t[n] == ' ' || t[n] == '\t')
}

// isThematicBreak reports whether the trimmed line t is three or more of
// the same -, * or _ (blanks between them allowed), or a setext underline of
// = signs.
func isThematicBreak(t string) bool {
	c := t[0]
	if c != '-' && c != '*' && c != '_' && c != '=' {
		return false
	}
	n := 0
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case c:
			n++
		case ' ', '\t':
		default:
			return false
		}
	}
	return n >= 3 || c == '='
}

// stripBlockquote drops the leading > marks of a blockquote line.
func stripBlockquote(t string) string {
	for strings.HasPrefix(t, ">") {
		t = strings.TrimSpace(t[1:])
	}
	return t
}

// cutRunes returns s cut to at most n characters, without trailing blanks.
func cutRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return strings.TrimRight(s[:pos], " \t")
		}
		i++
	}
	return s
}

// maxMetadataJSON bounds the JSON text of one metadata value: aliases can
// make a small frontmatter expand without bound.
const maxMetadataJSON = MaxFrontmatterBytes

// yamlJSON renders a YAML value as compact JSON text: mappings as objects
// in document order (keys as their text), sequences as arrays, null, booleans
// and numbers as such, everything else as a string. It reports false when
// the text would exceed maxMetadataJSON or nest deeper than 64 levels.
func yamlJSON(n *yaml.Node) (string, bool) {
	var b strings.Builder
	if !writeYAMLJSON(&b, n, 0) {
		return "", false
	}
	return b.String(), true
}

func writeYAMLJSON(b *strings.Builder, n *yaml.Node, depth int) bool {
	if depth > 64 || b.Len() > maxMetadataJSON {
		return false
	}
	n = yamlDeref(n)
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k := yamlDeref(n.Content[i])
			key := k.Value
			if k.Kind != yaml.ScalarNode {
				var kb strings.Builder
				if !writeYAMLJSON(&kb, k, depth+1) {
					return false
				}
				key = kb.String()
			}
			b.WriteString(jsonQuote(key))
			b.WriteByte(':')
			if !writeYAMLJSON(b, n.Content[i+1], depth+1) {
				return false
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, it := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if !writeYAMLJSON(b, it, depth+1) {
				return false
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		b.WriteString(scalarJSON(n))
	default: // an alias whose anchor is missing; yaml.v3 reports those
		b.WriteString("null")
	}
	return b.Len() <= maxMetadataJSON
}

// scalarJSON renders a YAML scalar as JSON, by its resolved tag.
func scalarJSON(n *yaml.Node) string {
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!bool":
		var v bool
		if n.Decode(&v) == nil {
			return strconv.FormatBool(v)
		}
	case "!!int":
		var v int64
		if n.Decode(&v) == nil {
			return strconv.FormatInt(v, 10)
		}
	case "!!float":
		var v float64
		if n.Decode(&v) == nil && !math.IsInf(v, 0) && !math.IsNaN(v) {
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return jsonQuote(n.Value)
}

// jsonQuote quotes s as a JSON string, leaving <, > and & as they are.
func jsonQuote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes; invalid UTF-8 becomes U+FFFD
	return strings.TrimSuffix(buf.String(), "\n")
}

// fmRepairLine is a top-level `key: value` line, the only kind repairFM
// touches: the pattern of Claude Code's quoteProblematicValues. The value
// holds no YAML line break (\r, NEL, LS, PS), so that quoting never joins
// what YAML reads as separate lines; a trailing \r stays out of the quotes.
var fmRepairLine = regexp.MustCompile("^([a-zA-Z_-]+):[ \t]+([^\r\u0085\u2028\u2029]+?)(\r?)$")

// fmRepairSpecial are the characters (and ": ") that make a plain YAML value
// mean something else, as Claude Code lists them.
var fmRepairSpecial = regexp.MustCompile("[{}\\[\\]*&#!|>%@`]|: ")

// fmBlockHeader is a block scalar header (`|`, `>-`, `|2+ # note`), which
// needs no quoting: its value is on the following lines.
var fmBlockHeader = regexp.MustCompile(`^[|>][-+0-9]*[ \t]*(#.*)?$`)

// repairFM retries YAML that does not parse the way Claude Code does: every
// top-level `key: value` line whose unquoted value holds a YAML special
// character is double-quoted, so that `description: Use when: X` reads as the
// author meant. It returns the repaired text, its root mapping and the keys
// it quoted, or a nil root when the repaired text is still no single YAML
// mapping. Only quoting within
// lines happens, so line numbers stay those of the file. Unlike Claude Code,
// the repair leaves alone block scalar headers (`description: >-`) and
// values that are valid flow collections on their own (`tags: [a, b]`), so
// that one bad line elsewhere does not turn a folded description into ">-"
// or a list into a string.
func repairFM(front []byte) (text []byte, root *yaml.Node, keys []string) {
	lines := strings.Split(string(front), "\n")
	for i, line := range lines {
		m := fmRepairLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key, value, cr := m[1], m[2], m[3]
		if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
			continue
		}
		if !fmRepairSpecial.MatchString(value) || fmBlockHeader.MatchString(value) || isFlowCollection(value) {
			continue
		}
		value = strings.ReplaceAll(strings.ReplaceAll(value, `\`, `\\`), `"`, `\"`)
		lines[i] = key + `: "` + value + `"` + cr
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, nil, nil
	}
	text = []byte(strings.Join(lines, "\n"))
	root, msg := decodeFM(text)
	if msg != "" || root == nil {
		return nil, nil, nil
	}
	return text, root, keys
}

// isFlowCollection reports whether value is, on its own, a valid YAML flow
// sequence or mapping (`[Read, Grep]`), which the repair leaves a list.
func isFlowCollection(value string) bool {
	if value[0] != '[' && value[0] != '{' {
		return false
	}
	root, msg := decodeFM([]byte("k: " + value))
	if msg != "" || root == nil || len(root.Content) != 2 {
		return false
	}
	k := root.Content[1].Kind
	return k == yaml.SequenceNode || k == yaml.MappingNode
}

// quoteList renders keys as `"a", "b"`.
func quoteList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(k)
	}
	return strings.Join(q, ", ")
}

// latinFold spells the Latin letters with diacritics of Latin-1 and Latin
// Extended-A in plain ASCII, so that Slugify turns "Café" into "cafe" rather
// than "caf". Other scripts have no obvious ASCII spelling and stay
// separators.
var latinFold = func() map[rune]string {
	m := map[rune]string{}
	for _, g := range []struct{ letters, ascii string }{
		{"ÀÁÂÃÄÅàáâãäåĀāĂăĄą", "a"}, {"Ææ", "ae"}, {"ÇçĆćĈĉĊċČč", "c"},
		{"ÐðĎďĐđ", "d"}, {"ÈÉÊËèéêëĒēĔĕĖėĘęĚě", "e"}, {"ĜĝĞğĠġĢģ", "g"},
		{"ĤĥĦħ", "h"}, {"ÌÍÎÏìíîïĨĩĪīĬĭĮįİı", "i"}, {"Ĳĳ", "ij"}, {"Ĵĵ", "j"},
		{"Ķķĸ", "k"}, {"ĹĺĻļĽľĿŀŁł", "l"}, {"ÑñŃńŅņŇňŉŊŋ", "n"},
		{"ÒÓÔÕÖØòóôõöøŌōŎŏŐő", "o"}, {"Œœ", "oe"}, {"ŔŕŖŗŘř", "r"},
		{"ŚśŜŝŞşŠšſ", "s"}, {"ß", "ss"}, {"ŢţŤťŦŧ", "t"}, {"Þþ", "th"},
		{"ÙÚÛÜùúûüŨũŪūŬŭŮůŰűŲų", "u"}, {"Ŵŵ", "w"}, {"ÝýÿŶŷŸ", "y"}, {"ŹźŻżŽž", "z"},
	} {
		for _, r := range g.letters {
			m[r] = g.ascii
		}
	}
	return m
}()

// isCombiningMark reports whether r is a combining diacritical mark, the
// accent of a decomposed letter ("e" + U+0301), which Slugify drops.
func isCombiningMark(r rune) bool {
	return r >= 0x300 && r <= 0x36F
}
