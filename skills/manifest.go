package skills

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Mode selects how strictly ParseManifest applies the SKILL.md rules.
type Mode int

const (
	// Strict applies every rule and reports every problem at once; install
	// and edit use it.
	Strict Mode = iota
	// Lenient loads skills already on disk: everything but missing or
	// unparseable frontmatter, a missing description or an unusable name
	// becomes a warning.
	Lenient
)

// String returns "strict" or "lenient".
func (m Mode) String() string {
	switch m {
	case Strict:
		return "strict"
	case Lenient:
		return "lenient"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Limits of the SKILL.md fields, in characters (Unicode code points).
const (
	MaxNameLen          = 128
	MaxSlugLen          = 64
	MaxDescriptionLen   = 1024
	MaxCompatibilityLen = 500
)

// MaxFrontmatterBytes bounds the YAML between the fences. Real frontmatter
// is a few hundred bytes to a few KB; a YAML parser holds many times its
// input in memory, so megabytes of it (a SKILL.md may hold up to the
// single-file limit) would cost the daemon gigabytes.
const MaxFrontmatterBytes = 64 << 10

// Frontmatter keys that ParseManifest knows.
const (
	KeyName              = "name"
	KeySlug              = "slug"
	KeyDescription       = "description"
	KeyLicense           = "license"
	KeyCompatibility     = "compatibility"
	KeyMetadata          = "metadata"
	KeyAllowedTools      = "allowed-tools"
	KeySkillDependencies = "skill_dependencies"
	KeyToolDependencies  = "tool_dependencies"
	KeyMCPDependencies   = "mcp_dependencies"
)

// fieldFrontmatter is the Problem field of structural problems.
const fieldFrontmatter = "frontmatter"

var manifestKeys = map[string]bool{
	KeyName: true, KeySlug: true, KeyDescription: true, KeyLicense: true,
	KeyCompatibility: true, KeyMetadata: true, KeyAllowedTools: true,
	KeySkillDependencies: true, KeyToolDependencies: true, KeyMCPDependencies: true,
}

// Manifest is the parsed frontmatter (and body) of a SKILL.md.
type Manifest struct {
	Name              string            `json:"name"`                         // display name, trimmed
	Slug              string            `json:"slug"`                         // identity: frontmatter `slug`, else `name`; derived from the name in lenient mode
	Description       string            `json:"description"`                  // trimmed
	License           string            `json:"license,omitempty"`            // trimmed
	Compatibility     string            `json:"compatibility,omitempty"`      // trimmed
	Metadata          map[string]string `json:"metadata,omitempty"`           // values kept as their literal YAML text: `version: 1.0` -> "1.0"; nil when empty
	AllowedTools      string            `json:"allowed_tools,omitempty"`      // space-separated string as given (a YAML list is joined with spaces)
	SkillDependencies []string          `json:"skill_dependencies,omitempty"` // trimmed, de-duplicated, order kept, empty items dropped; nil when empty
	ToolDependencies  []string          `json:"tool_dependencies,omitempty"`  // as SkillDependencies
	MCPDependencies   []string          `json:"mcp_dependencies,omitempty"`   // as SkillDependencies
	Unknown           []string          `json:"unknown,omitempty"`            // unknown top-level keys, sorted; each also produces a warning
	Body              string            `json:"body,omitempty"`               // Markdown after the closing --- line, byte for byte
}

// Problem is one thing wrong with a SKILL.md.
type Problem struct {
	Field   string `json:"field"` // frontmatter key, or "frontmatter" for structural problems
	Message string `json:"message"`
}

// String returns "field: message".
func (p Problem) String() string { return p.Field + ": " + p.Message }

// ManifestError lists every problem found in a SKILL.md; it wraps
// ErrInvalidManifest.
type ManifestError struct {
	Problems []Problem
}

// Error returns "invalid SKILL.md: " followed by every problem.
func (e *ManifestError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return ErrInvalidManifest.Error() + ": " + strings.Join(parts, "; ")
}

// Unwrap returns ErrInvalidManifest.
func (e *ManifestError) Unwrap() error { return ErrInvalidManifest }

// ValidSlug reports whether s is a skill slug: ^[a-z0-9]+(-[a-z0-9]+)*$ and at
// most MaxSlugLen characters. A valid slug is always a safe single path
// element.
func ValidSlug(s string) bool {
	if s == "" || len(s) > MaxSlugLen || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && s[i-1] != '-':
		default:
			return false
		}
	}
	return true
}

// Slugify derives a slug from a display name on a best-effort basis: ASCII
// letters are lower-cased, every run of other characters becomes one '-',
// and the result is trimmed of hyphens and cut to MaxSlugLen. It returns ""
// when nothing usable is left. A non-empty result always satisfies ValidSlug.
func Slugify(s string) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(s) && b.Len() < MaxSlugLen; i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			if b.Len() < MaxSlugLen {
				b.WriteByte(c)
			}
			continue
		}
		dash = true
	}
	return strings.TrimRight(b.String(), "-")
}

// slugProblems explains why s is not a valid slug, in the words of the Agent
// Skills validator. It returns nil exactly when ValidSlug(s).
func slugProblems(s string) []string {
	if s == "" {
		return []string{"must not be empty"}
	}
	var out []string
	if n := utf8.RuneCountInString(s); n > MaxSlugLen {
		out = append(out, fmt.Sprintf("exceeds %d characters (%d)", MaxSlugLen, n))
	}
	if strings.ToLower(s) != s {
		out = append(out, fmt.Sprintf("%q must be lowercase", s))
	}
	if strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") {
		out = append(out, "must not start or end with a hyphen")
	}
	if strings.Contains(s, "--") {
		out = append(out, "must not contain consecutive hyphens")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			out = append(out, fmt.Sprintf("%q contains invalid characters; only lowercase letters, digits and hyphens are allowed", s))
			break
		}
	}
	return out
}

// ParseManifest parses and validates a SKILL.md. In Strict mode every
// problem is collected into one *ManifestError. In Lenient mode only missing
// or unparseable frontmatter, a missing description, or a name from which no
// slug can be derived fail; everything else becomes a warning, and an invalid
// or missing slug is derived from the name. Warnings (unknown keys among them)
// are returned even when err is not nil.
func ParseManifest(data []byte, mode Mode) (m *Manifest, warnings []string, err error) {
	if mode != Strict && mode != Lenient {
		return nil, nil, fmt.Errorf("parse %s: unknown mode %d: %w", ManifestName, int(mode), ErrInvalid)
	}
	p := &manifestParser{mode: mode}
	m = p.parse(data)
	if len(p.problems) > 0 {
		return nil, p.warnings, &ManifestError{Problems: p.problems}
	}
	return m, p.warnings, nil
}

type manifestParser struct {
	mode     Mode
	problems []Problem
	warnings []string
}

// fail records a problem that is fatal in every mode.
func (p *manifestParser) fail(field, format string, args ...any) {
	p.problems = append(p.problems, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

// bad records a problem that is fatal in Strict mode and a warning in
// Lenient mode.
func (p *manifestParser) bad(field, format string, args ...any) {
	if p.mode == Strict {
		p.fail(field, format, args...)
		return
	}
	p.warn(field, format, args...)
}

func (p *manifestParser) warn(field, format string, args ...any) {
	p.warnings = append(p.warnings, Problem{Field: field, Message: fmt.Sprintf(format, args...)}.String())
}

func (p *manifestParser) parse(data []byte) *Manifest {
	fm, err := splitFM(data)
	if err != "" {
		p.fail(fieldFrontmatter, "%s", err)
		return nil
	}
	if len(fm.front) > MaxFrontmatterBytes {
		p.fail(fieldFrontmatter, "%d bytes, over the %d-byte limit", len(fm.front), MaxFrontmatterBytes)
		return nil
	}
	root, err := decodeFM(fm.front)
	if err != "" {
		p.fail(fieldFrontmatter, "%s", err)
		return nil
	}
	m := &Manifest{Body: string(fm.body)}

	// Collect the top-level pairs; the last of duplicated keys wins, as in
	// most YAML loaders that tolerate them.
	fields := map[string]*yaml.Node{}
	dups := map[string]bool{}
	var unknown []string
	if root != nil {
		for i := 0; i+1 < len(root.Content); i += 2 {
			k, v := yamlDeref(root.Content[i]), root.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				p.bad(fieldFrontmatter, "key at line %d is not a string", root.Content[i].Line)
				continue
			}
			if _, dup := fields[k.Value]; dup {
				if !dups[k.Value] {
					p.bad(fieldFrontmatter, "duplicate key %q", k.Value)
				}
				dups[k.Value] = true
			} else if !manifestKeys[k.Value] {
				unknown = append(unknown, k.Value)
			}
			fields[k.Value] = v
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		p.warn(fieldFrontmatter, "unknown key %q kept", k)
	}
	if len(unknown) > 0 {
		m.Unknown = unknown
	}

	p.nameAndSlug(m, fields[KeyName], fields[KeySlug])

	switch desc, st := yamlString(fields[KeyDescription]); st {
	case fieldAbsent:
		p.fail(KeyDescription, "is required")
	case fieldInvalid:
		p.fail(KeyDescription, "must be a string")
	default:
		m.Description = strings.TrimSpace(desc)
		if m.Description == "" {
			p.fail(KeyDescription, "must not be empty")
		} else if n := utf8.RuneCountInString(m.Description); n > MaxDescriptionLen {
			p.bad(KeyDescription, "exceeds %d characters (%d)", MaxDescriptionLen, n)
		}
	}

	if s, st := yamlString(fields[KeyLicense]); st == fieldOK {
		m.License = strings.TrimSpace(s)
	} else if st == fieldInvalid {
		p.bad(KeyLicense, "must be a string")
	}

	if s, st := yamlString(fields[KeyCompatibility]); st == fieldOK {
		m.Compatibility = strings.TrimSpace(s)
		if n := utf8.RuneCountInString(m.Compatibility); n > MaxCompatibilityLen {
			p.bad(KeyCompatibility, "exceeds %d characters (%d)", MaxCompatibilityLen, n)
		}
	} else if st == fieldInvalid {
		p.bad(KeyCompatibility, "must be a string")
	}

	m.Metadata = p.metadata(fields[KeyMetadata])
	m.AllowedTools = p.allowedTools(fields[KeyAllowedTools])

	m.SkillDependencies = p.list(KeySkillDependencies, fields[KeySkillDependencies])
	m.ToolDependencies = p.list(KeyToolDependencies, fields[KeyToolDependencies])
	m.MCPDependencies = p.list(KeyMCPDependencies, fields[KeyMCPDependencies])
	m.SkillDependencies = slices.DeleteFunc(m.SkillDependencies, func(dep string) bool {
		switch {
		case !ValidSlug(dep):
			p.bad(KeySkillDependencies, "%q is not a valid skill slug", dep)
			return true
		case m.Slug != "" && dep == m.Slug:
			p.bad(KeySkillDependencies, "skill %q must not depend on itself", dep)
			return true
		}
		return false
	})
	if len(m.SkillDependencies) == 0 {
		m.SkillDependencies = nil
	}
	return m
}

// nameAndSlug settles the display name and the identity. An explicit slug
// makes the name a free display name; without one the name is the slug.
func (p *manifestParser) nameAndSlug(m *Manifest, nameNode, slugNode *yaml.Node) {
	name, nst := yamlString(nameNode)
	name = strings.TrimSpace(name)
	var nameMsg string // why there is no name
	switch {
	case nst == fieldAbsent:
		nameMsg = "is required"
	case nst == fieldInvalid:
		nameMsg = "must be a string"
	case name == "":
		nameMsg = "must not be empty"
	default:
		m.Name = name
	}
	if nameMsg != "" && p.mode == Strict {
		p.fail(KeyName, "%s", nameMsg)
	}
	if n := utf8.RuneCountInString(m.Name); n > MaxNameLen {
		p.bad(KeyName, "exceeds %d characters (%d)", MaxNameLen, n)
	}

	slug, sst := yamlString(slugNode)
	slug = strings.TrimSpace(slug)
	switch {
	case sst == fieldInvalid:
		p.bad(KeySlug, "must be a string")
	case sst == fieldOK && ValidSlug(slug):
		m.Slug = slug
	case sst == fieldOK:
		for _, msg := range slugProblems(slug) {
			p.bad(KeySlug, "%s", msg)
		}
	case m.Name != "" && ValidSlug(m.Name):
		m.Slug = m.Name
	case m.Name != "":
		for _, msg := range slugProblems(m.Name) {
			p.bad(KeyName, "%s", msg)
		}
	}
	if p.mode == Strict {
		return
	}

	// Lenient: derive a usable identity rather than skip the skill.
	if m.Slug == "" {
		derived := Slugify(m.Name)
		if derived == "" {
			derived = Slugify(slug)
		}
		if derived == "" {
			if nameMsg == "" {
				nameMsg = fmt.Sprintf("no usable slug can be derived from %q", m.Name)
			}
			p.fail(KeyName, "%s", nameMsg)
			return
		}
		p.warn(KeySlug, "using slug %q derived from the name", derived)
		m.Slug = derived
	}
	if nameMsg != "" {
		p.warn(KeyName, "%s; using the slug %q as the name", nameMsg, m.Slug)
		m.Name = m.Slug
	}
}

type fmFieldState int

const (
	fieldAbsent  fmFieldState = iota // key missing
	fieldOK                          // a scalar, or null (as "")
	fieldInvalid                     // a list or mapping where a string belongs
)

// yamlString reads a string field. Any scalar counts as a string, with its literal
// text, as the Agent Skills validator reads YAML; null reads as "".
func yamlString(n *yaml.Node) (string, fmFieldState) {
	if n == nil {
		return "", fieldAbsent
	}
	n = yamlDeref(n)
	if n.Kind != yaml.ScalarNode {
		return "", fieldInvalid
	}
	if yamlIsNull(n) {
		return "", fieldOK
	}
	return n.Value, fieldOK
}

func (p *manifestParser) metadata(n *yaml.Node) map[string]string {
	if n == nil || yamlIsNull(yamlDeref(n)) {
		return nil
	}
	n = yamlDeref(n)
	if n.Kind != yaml.MappingNode {
		p.bad(KeyMetadata, "must be a mapping of strings")
		return nil
	}
	md := map[string]string{}
	dups := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlDeref(n.Content[i]), yamlDeref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			p.bad(KeyMetadata, "key at line %d is not a string", n.Content[i].Line)
			continue
		}
		if v.Kind != yaml.ScalarNode {
			p.bad(KeyMetadata, "value of %q must be a string", k.Value)
			continue
		}
		if _, dup := md[k.Value]; dup && !dups[k.Value] {
			dups[k.Value] = true
			p.bad(KeyMetadata, "duplicate key %q", k.Value)
		}
		md[k.Value] = v.Value
	}
	if len(md) == 0 {
		return nil
	}
	return md
}

// allowedTools accepts the specified space-separated string, and also a list
// of strings (joined with spaces), as the Agent Skills validator does.
func (p *manifestParser) allowedTools(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	n = yamlDeref(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if yamlIsNull(n) {
			return ""
		}
		return strings.TrimSpace(n.Value)
	case yaml.SequenceNode:
		var tools []string
		for _, it := range n.Content {
			it = yamlDeref(it)
			if it.Kind != yaml.ScalarNode {
				p.bad(KeyAllowedTools, "list items must be strings")
				return ""
			}
			if t := strings.TrimSpace(it.Value); t != "" && !yamlIsNull(it) {
				tools = append(tools, t)
			}
		}
		return strings.Join(tools, " ")
	}
	p.bad(KeyAllowedTools, "must be a string or a list of strings")
	return ""
}

// list reads a dependency list. A single string is a one-item list, since
// that is the obvious intent of `skill_dependencies: pdf`.
func (p *manifestParser) list(key string, n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	n = yamlDeref(n)
	var items []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		items = []*yaml.Node{n}
	case yaml.SequenceNode:
		items = n.Content
	default:
		p.bad(key, "must be a list of strings")
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for i, it := range items {
		it = yamlDeref(it)
		if it.Kind != yaml.ScalarNode {
			p.bad(key, "item %d must be a string", i+1)
			continue
		}
		if yamlIsNull(it) {
			continue
		}
		v := strings.TrimSpace(it.Value)
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func yamlDeref(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

func yamlIsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// fmParts is a SKILL.md cut into its parts.
type fmParts struct {
	open  int    // offset of the first byte after the opening --- line
	close int    // offset of the closing --- line
	front []byte // data[open:close]
	body  []byte // everything after the closing line
	eol   string // line ending of the opening line
}

var manifestBOM = []byte{0xEF, 0xBB, 0xBF}

// isFMFence reports whether line (without its \n) is a --- line, allowing a
// \r and trailing blanks.
func isFMFence(line []byte) bool {
	return string(bytes.TrimRight(line, " \t\r")) == "---"
}

// splitFM finds the --- lines. The returned message is empty on
// success.
func splitFM(data []byte) (fmParts, string) {
	start := 0
	if bytes.HasPrefix(data, manifestBOM) {
		start = len(manifestBOM)
	}
	nl := bytes.IndexByte(data[start:], '\n')
	if nl < 0 {
		if isFMFence(data[start:]) {
			return fmParts{}, "not closed with a --- line"
		}
		return fmParts{}, "must start with a --- line"
	}
	first := data[start : start+nl]
	if !isFMFence(first) {
		return fmParts{}, "must start with a --- line"
	}
	fm := fmParts{open: start + nl + 1, eol: "\n"}
	if bytes.HasSuffix(first, []byte("\r")) {
		fm.eol = "\r\n"
	}
	for pos := fm.open; pos < len(data); {
		end, next := len(data), len(data)
		if i := bytes.IndexByte(data[pos:], '\n'); i >= 0 {
			end, next = pos+i, pos+i+1
		}
		if isFMFence(data[pos:end]) {
			fm.close = pos
			fm.front = data[fm.open:pos]
			fm.body = data[next:]
			return fm, ""
		}
		pos = next
	}
	return fmParts{}, "not closed with a --- line"
}

// decodeFM parses the YAML between the fences. It returns the root
// mapping, nil for an empty frontmatter, and a message when it is not a
// single YAML mapping.
func decodeFM(front []byte) (root *yaml.Node, msg string) {
	// The daemon must survive any file a user hands it, even one that trips
	// a bug in the YAML parser.
	defer func() {
		if r := recover(); r != nil {
			root, msg = nil, fmt.Sprintf("invalid YAML: parser failure: %v", r)
		}
	}()
	// A leading blank line stands for the opening --- line, so that YAML
	// line numbers, in messages and in nodes, are those of the file (after
	// a BOM).
	src := make([]byte, 0, len(front)+1)
	src = append(append(src, '\n'), front...)
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, ""
		}
		return nil, "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")
		}
		return nil, "must hold a single YAML document"
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, ""
	}
	root = doc.Content[0]
	switch {
	case root.Kind == yaml.MappingNode:
		return root, ""
	case root.Kind == yaml.SequenceNode:
		return nil, "must be a YAML mapping, not a list"
	case yamlIsNull(root):
		return nil, ""
	}
	return nil, "must be a YAML mapping"
}

// RewriteSlug returns data with the frontmatter key `slug` set to slug and
// every other byte unchanged: an existing top-level slug value (or its line)
// is replaced, otherwise a `slug:` line is inserted after the opening ---
// line, with the file's line ending. The display name is kept. The result is
// parsed again and checked to hold the same frontmatter apart from the slug;
// a layout that cannot be edited in place (a flow mapping with an escaped
// slug, say) is refused with ErrInvalidManifest rather than rewritten.
func RewriteSlug(data []byte, slug string) ([]byte, error) {
	if !ValidSlug(slug) {
		return nil, fmt.Errorf("rewrite slug of %s: %q is not a valid slug: %w", ManifestName, slug, ErrInvalid)
	}
	fm, msg := splitFM(data)
	if msg == "" {
		var root *yaml.Node
		if root, msg = decodeFM(fm.front); msg == "" {
			return rewriteSlug(data, fm, root, slug)
		}
	}
	return nil, fmt.Errorf("rewrite slug of %s: %w", ManifestName,
		&ManifestError{Problems: []Problem{{Field: fieldFrontmatter, Message: msg}}})
}

func rewriteSlug(data []byte, fm fmParts, root *yaml.Node, slug string) ([]byte, error) {
	var slugKey, slugVal *yaml.Node
	if root != nil {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if k := yamlDeref(root.Content[i]); k.Kind == yaml.ScalarNode && k.Value == KeySlug {
				if slugKey != nil {
					return nil, fmt.Errorf("rewrite slug of %s: %w", ManifestName,
						&ManifestError{Problems: []Problem{{Field: fieldFrontmatter, Message: `duplicate key "slug"`}}})
				}
				slugKey, slugVal = root.Content[i], root.Content[i+1]
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
	} else {
		indent := ""
		if root != nil && len(root.Content) > 0 && root.Style&yaml.FlowStyle == 0 {
			if col := root.Content[0].Column - 1; col > 0 {
				indent = strings.Repeat(" ", col)
			}
		}
		line := indent + KeySlug + ": " + slug + fm.eol
		edits = append(edits, fmEdit{0, 0, line})
		if root != nil && len(root.Content) > 0 {
			if off, found := yamlOffset(front, root.Content[0].Line-1, 1); found && off > 0 {
				edits = append(edits, fmEdit{off, off, line})
			}
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
	return nil, fmt.Errorf("rewrite slug of %s: %w", ManifestName,
		&ManifestError{Problems: []Problem{{Field: KeySlug, Message: "cannot be rewritten in place in this frontmatter layout"}}})
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
