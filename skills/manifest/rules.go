package manifest

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"skillfs/skills"
)

// Frontmatter keys of the rule-like skills (Cursor's rules, and the agents
// that read their keys in a SKILL.md): a skill always in context, and a
// skill that applies to the files its globs match.
const (
	KeyAlwaysApply = "alwaysApply"
	KeyGlobs       = "globs"
)

// Limits of the globs key: real rules name a handful of patterns of a few
// dozen characters; what matching one costs grows with its length and its
// alternatives (Glob.Cost), so neither may be unbounded.
const (
	MaxGlobs   = 64
	MaxGlobLen = 256
	// maxGlobAlternatives bounds what one glob's braces expand to.
	maxGlobAlternatives = 64
)

// rules reads alwaysApply and globs. A bad value is a problem in Strict
// mode (`skill validate`) and a warning in Lenient mode, where the value is
// ignored: alwaysApply keeps its default (false), a bad glob is dropped.
// Each message says where: the key, the item, and the line of the file.
func (p *manifestParser) rules(m *Manifest, always, globs *yaml.Node) {
	if always != nil {
		n := yamlDeref(always)
		switch {
		case n.Kind == yaml.ScalarNode && yamlIsNull(n):
		case n.Kind == yaml.ScalarNode && strings.EqualFold(strings.TrimSpace(n.Value), "true"):
			m.AlwaysApply = true
		case n.Kind == yaml.ScalarNode && strings.EqualFold(strings.TrimSpace(n.Value), "false"):
		case n.Kind == yaml.ScalarNode:
			p.badRule(KeyAlwaysApply, "ignored", "line %d: %q is not true or false", always.Line, n.Value)
		default:
			p.badRule(KeyAlwaysApply, "ignored", "line %d: must be true or false", always.Line)
		}
	}
	m.Globs = p.globs(globs)
}

// globs reads the globs key: a string of comma-separated globs (Cursor's
// form, `globs: "**/*.ts, src/**"`; a comma inside braces belongs to the
// glob) or a list of globs. Items are trimmed, empty ones dropped, repeats
// kept once, in order.
func (p *manifestParser) globs(node *yaml.Node) []string {
	if node == nil {
		return nil
	}
	n := yamlDeref(node)
	var items []string
	switch {
	case n.Kind == yaml.ScalarNode && yamlIsNull(n):
		return nil
	case n.Kind == yaml.ScalarNode:
		items = SplitGlobs(n.Value)
	case n.Kind == yaml.SequenceNode:
		for i, it := range n.Content {
			line := it.Line
			it = yamlDeref(it)
			if it.Kind != yaml.ScalarNode {
				p.badRule(KeyGlobs, "ignored", "line %d: item %d must be a string", line, i+1)
				continue
			}
			if !yamlIsNull(it) {
				items = append(items, it.Value)
			}
		}
	default:
		p.badRule(KeyGlobs, "ignored", "line %d: must be a string of comma-separated globs or a list of globs", node.Line)
		return nil
	}
	var out []string
	for _, g := range items {
		g = strings.TrimSpace(g)
		if g == "" || containsString(out, g) {
			continue
		}
		if err := CheckGlob(g); err != nil {
			p.badRule(KeyGlobs, "ignored", "line %d: %q: %v", node.Line, g, err)
			continue
		}
		if len(out) == MaxGlobs {
			p.badRule(KeyGlobs, "the rest are ignored", "line %d: more than %d globs", node.Line, MaxGlobs)
			break
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// badRule is bad for the rule keys: a problem in Strict mode, and in
// Lenient mode a warning that ends with what becomes of the value (then).
func (p *manifestParser) badRule(key, then, format string, args ...any) {
	if p.mode == Lenient {
		format += "; " + then
	}
	p.bad(key, format, args...)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SplitGlobs cuts Cursor's string form of globs at its commas, except
// those inside braces ("**/*.{ts,tsx}, docs/**" is two globs). Items are
// not trimmed.
func SplitGlobs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escaped character is never a separator
		case '{':
			depth++
		case '}':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// CheckGlob says why g is no glob MatchGlob can use: too long, not valid
// UTF-8, unbalanced braces, braces expanding to too many alternatives, or
// a segment path.Match refuses. nil when it is one.
func CheckGlob(g string) error {
	if g == "" {
		return fmt.Errorf("empty glob")
	}
	if n := len(g); n > MaxGlobLen {
		return fmt.Errorf("%d bytes long, over %d", n, MaxGlobLen)
	}
	if !utf8.ValidString(g) {
		return fmt.Errorf("not valid UTF-8")
	}
	alts, err := expandBraces(g)
	if err != nil {
		return err
	}
	for _, a := range alts {
		for _, seg := range strings.Split(a, "/") {
			if seg == "**" {
				continue
			}
			if _, err := path.Match(seg, ""); err != nil {
				return fmt.Errorf("segment %q is not a valid pattern", seg)
			}
		}
	}
	return nil
}

// MatchGlob reports whether the slash-separated path name matches glob g,
// as Cursor reads a rule's globs (doublestar): a segment "**" matches zero
// or more whole segments ("**/*.ts" matches "a.ts" and "src/a.ts", "src/**"
// matches "src" and everything under it); any other segment is a
// path.Match pattern of one segment ("*", "?", "[a-z]", "\\" escapes), so
// "*.ts" matches "a.ts" but not "src/a.ts"; "{a,b}" is either alternative.
// name is cleaned first (skills.SplitSlash). An invalid glob (CheckGlob) matches
// nothing.
func MatchGlob(g, name string) bool {
	c, err := CompileGlob(g)
	return err == nil && c.Match(skills.SplitSlash(name))
}

// Glob is a glob ready to match many paths: its brace alternatives, each
// cut into segments and compiled (nil for "**").
type Glob struct {
	Text string
	alts [][]*segPattern
	// perCell and perByte bound the steps of a match (Cost).
	perCell, perByte int64
}

// CompileGlob compiles g, or says why it is no glob (CheckGlob).
func CompileGlob(g string) (*Glob, error) {
	if err := CheckGlob(g); err != nil {
		return nil, err
	}
	alts, _ := expandBraces(g)
	c := &Glob{Text: g}
	for _, a := range alts {
		segs := skills.SplitSlash(a)
		pat := make([]*segPattern, len(segs))
		c.perCell++
		for i, seg := range segs {
			c.perCell++
			if seg == "**" {
				continue
			}
			sp, err := compileSegment(seg)
			if err != nil {
				return nil, fmt.Errorf("segment %q is not a valid pattern", seg)
			}
			pat[i] = sp
			c.perCell += int64(sp.fixed)
			c.perByte += int64(sp.perByte)
		}
		c.alts = append(c.alts, pat)
	}
	return c, nil
}

// Match reports whether the path of segments segs (skills.SplitSlash) matches.
// It costs at most Cost(len(segs)+1, the bytes of segs) steps.
func (c *Glob) Match(segs []string) bool {
	for _, a := range c.alts {
		if matchSegments(a, segs) {
			return true
		}
	}
	return false
}

// Cost bounds the steps (a step compares a byte, decodes a rune, tests a
// class range or fills one cell of the segment table) of matching paths
// of cells segments and bytes bytes in all, counting one more segment for
// each path: the cost is linear in both, so the bound of many paths is
// that of their sums. A segment pattern with a '?' or a class between two
// stars costs its size for each byte of each segment it is tried on;
// every other is found in time linear in the segment's length, or tried
// at a fixed number of offsets.
func (c *Glob) Cost(cells, bytes int64) int64 {
	return c.perCell*cells + c.perByte*bytes
}

// matchSegments matches pattern segments (nil for "**") against path
// segments, "**" matching any number of them, by dynamic programming:
// ok[j] says whether the pattern so far matches the first j path segments.
func matchSegments(pat []*segPattern, segs []string) bool {
	ok := make([]bool, len(segs)+1)
	next := make([]bool, len(segs)+1)
	ok[0] = true
	step(len(segs) + 1)
	for _, p := range pat {
		step(len(segs) + 1)
		if p == nil {
			reach := false
			for j := range ok {
				reach = reach || ok[j]
				next[j] = reach
			}
		} else {
			next[0] = false
			for j := 1; j <= len(segs); j++ {
				next[j] = ok[j-1] && p.match(segs[j-1])
			}
		}
		ok, next = next, ok
	}
	return ok[len(segs)]
}

// expandBraces expands the brace alternatives of g ("*.{ts,tsx}" is
// "*.ts" and "*.tsx"; braces nest), at most maxGlobAlternatives of them. A
// glob without braces is itself.
func expandBraces(g string) ([]string, error) {
	open := -1
	for i := 0; i < len(g); i++ {
		switch g[i] {
		case '\\':
			i++
		case '{':
			open = i
		case '}':
			return nil, fmt.Errorf("a } without its {")
		}
		if open >= 0 {
			break
		}
	}
	if open < 0 {
		return []string{g}, nil
	}
	// Find the matching close and the top-level commas inside.
	depth, cuts := 0, []int{open}
	end := -1
	for i := open; i < len(g) && end < 0; i++ {
		switch g[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				end = i
			}
		case ',':
			if depth == 1 {
				cuts = append(cuts, i)
			}
		}
	}
	if end < 0 {
		return nil, fmt.Errorf("a { without its }")
	}
	cuts = append(cuts, end)
	rest, err := expandBraces(g[end+1:])
	if err != nil {
		return nil, err
	}
	var out []string
	for k := 0; k+1 < len(cuts); k++ {
		inner, err := expandBraces(g[cuts[k]+1 : cuts[k+1]])
		if err != nil {
			return nil, err
		}
		for _, in := range inner {
			for _, r := range rest {
				if len(out) == maxGlobAlternatives {
					return nil, fmt.Errorf("its braces expand to more than %d alternatives", maxGlobAlternatives)
				}
				out = append(out, g[:open]+in+r)
			}
		}
	}
	return out, nil
}
