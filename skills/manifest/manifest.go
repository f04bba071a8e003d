package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
	"skillfs/skills"
)

// Mode selects how strictly Parse applies the SKILL.md rules.
type Mode int

const (
	// Strict applies every rule (those of the Agent Skills specification and
	// skillfs's own) and reports every problem at once: the authoring check,
	// `skill validate`.
	Strict Mode = iota
	// Lenient loads what the agents themselves load, as every import does:
	// only what makes a skill unusable is refused (frontmatter that is there
	// but does not parse, a limit, no name from which a slug can be derived,
	// even with the folder name); everything else is a warning, with a
	// derived value where one is needed.
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

// fieldFrontmatter is the Problem field of structural problems.
const fieldFrontmatter = "frontmatter"

// Manifest is the parsed frontmatter (and body) of a SKILL.md.
type Manifest struct {
	Name              string            `json:"name"`                         // display name, trimmed; in lenient mode the folder name (or the slug) when the frontmatter has none
	Slug              string            `json:"slug"`                         // identity: frontmatter `slug`, else `name`; derived from the name (or the folder name) in lenient mode
	Description       string            `json:"description"`                  // trimmed; in lenient mode the first paragraph of the body when the frontmatter has none, and possibly ""
	License           string            `json:"license,omitempty"`            // trimmed
	Compatibility     string            `json:"compatibility,omitempty"`      // trimmed
	Metadata          map[string]string `json:"metadata,omitempty"`           // scalars as their literal YAML text (`version: 1.0` -> "1.0"); in lenient mode a list or mapping as compact JSON text of its YAML value (`tags: [a, b]` -> `["a","b"]`); nil when empty
	AllowedTools      string            `json:"allowed_tools,omitempty"`      // space-separated string as given (a YAML list is joined with spaces)
	SkillDependencies []string          `json:"skill_dependencies,omitempty"` // trimmed, de-duplicated, order kept, empty items dropped; nil when empty
	ToolDependencies  []string          `json:"tool_dependencies,omitempty"`  // as SkillDependencies
	MCPDependencies   []string          `json:"mcp_dependencies,omitempty"`   // as SkillDependencies
	// DisableModelInvocation is `disable-model-invocation: true`: only a
	// user may invoke the skill; the model is not offered it.
	DisableModelInvocation bool `json:"disable_model_invocation,omitempty"`
	// UserInvocable is false only for `user-invocable: false`: the skill is
	// background knowledge for the model, not a command for the user.
	UserInvocable bool `json:"user_invocable"`
	// AlwaysApply is `alwaysApply: true` (Cursor's rules): the skill is
	// inlined into every turn of a session that reads it.
	AlwaysApply bool `json:"always_apply,omitempty"`
	// Globs are the file globs the skill applies to (`globs`, a string of
	// comma-separated globs or a list; see MatchGlob), trimmed, each once,
	// in order; nil when none.
	Globs   []string `json:"globs,omitempty"`
	Unknown []string `json:"unknown,omitempty"` // unknown top-level keys, sorted; each also produces a warning
	Body    string   `json:"body,omitempty"`    // Markdown after the closing --- line, byte for byte; the whole file (after a BOM) when it has no frontmatter
}

// Problem is one thing wrong with a SKILL.md.
type Problem struct {
	Field   string `json:"field"` // frontmatter key, or "frontmatter" for structural problems
	Message string `json:"message"`
}

// String returns "field: message".
func (p Problem) String() string { return p.Field + ": " + p.Message }

// Error lists every problem found in a SKILL.md; it wraps
// ErrInvalidManifest.
type Error struct {
	Problems []Problem
}

// Error returns "invalid SKILL.md: " followed by every problem.
func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return skills.ErrInvalidManifest.Error() + ": " + strings.Join(parts, "; ")
}

// Unwrap returns ErrInvalidManifest.
func (e *Error) Unwrap() error { return skills.ErrInvalidManifest }

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
// letters are lower-cased, Latin letters with diacritics are spelled in ASCII
// ("é" as "e", "ß" as "ss") and combining accents dropped, every run of other
// characters becomes one '-', and the result is trimmed of hyphens and cut to
// MaxSlugLen. It returns "" when nothing usable is left. A non-empty result
// always satisfies ValidSlug. It is deterministic: the catalog relies on the
// same name giving the same slug.
func Slugify(s string) string {
	var b strings.Builder
	dash := false
	emit := func(c byte) {
		if dash && b.Len() > 0 {
			b.WriteByte('-')
		}
		dash = false
		if b.Len() < MaxSlugLen {
			b.WriteByte(c)
		}
	}
	for _, r := range s {
		if b.Len() >= MaxSlugLen {
			break
		}
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			emit(byte(r))
		case isCombiningMark(r):
		case latinFold[r] != "":
			for _, c := range []byte(latinFold[r]) {
				emit(c)
			}
		default:
			dash = true
		}
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

// slugFaults names briefly what keeps s from being a valid slug.
func slugFaults(s string) string {
	var out []string
	if utf8.RuneCountInString(s) > MaxSlugLen {
		out = append(out, fmt.Sprintf("over %d characters", MaxSlugLen))
	}
	if strings.ToLower(s) != s {
		out = append(out, "upper case")
	}
	if strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-')
	}) {
		out = append(out, "characters other than a-z, 0-9 and -")
	}
	if strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") {
		out = append(out, "a hyphen at an end")
	}
	if strings.Contains(s, "--") {
		out = append(out, "consecutive hyphens")
	}
	if len(out) == 0 {
		out = append(out, "empty")
	}
	return strings.Join(out, ", ")
}

// ParseOptions says how ParseWith reads a SKILL.md.
type ParseOptions struct {
	Mode Mode
	// Folder is the name (not the path) of the folder that holds the
	// SKILL.md, or "" when there is none, as for a lone uploaded file. In
	// Lenient mode a skill whose frontmatter has no usable name takes its
	// display name and its slug from it, the way the agents name such
	// skills. Strict mode does not use it.
	Folder string
}

// Parse is ParseWith without a folder name.
func Parse(data []byte, mode Mode) (m *Manifest, warnings []string, err error) {
	return ParseWith(data, ParseOptions{Mode: mode})
}

// ParseWith parses and validates a SKILL.md. In Strict mode every
// problem is collected into one *Error. In Lenient mode a skill is
// refused only when it cannot be served: frontmatter that is there but does
// not parse (after the repair the agents apply), frontmatter over
// MaxFrontmatterBytes, or no name from which a slug can be derived, even with
// opts.Folder. Everything else is a warning: a file without frontmatter is
// all body; a missing name comes from the folder; an invalid or missing slug
// is derived from the name; a missing description comes from the body;
// invalid fields are dropped or kept as described on Manifest. Warnings
// (unknown keys among them) are returned even when err is not nil.
//
// Lenient parsing is deterministic, and the folder is used only when the
// frontmatter itself yields no slug: whenever parsing without a folder
// succeeds, parsing with one gives the same slug.
func ParseWith(data []byte, opts ParseOptions) (m *Manifest, warnings []string, err error) {
	if opts.Mode != Strict && opts.Mode != Lenient {
		return nil, nil, fmt.Errorf("parse %s: unknown mode %d: %w", skills.ManifestName, int(opts.Mode), skills.ErrInvalid)
	}
	p := &manifestParser{mode: opts.Mode, folder: strings.TrimSpace(opts.Folder)}
	m = p.parse(data)
	if len(p.problems) > 0 {
		return nil, p.warnings, &Error{Problems: p.problems}
	}
	return m, p.warnings, nil
}

type manifestParser struct {
	mode     Mode
	folder   string // ParseOptions.Folder, trimmed; used in Lenient mode only
	problems []Problem
	warnings []string
	slugKey  bool   // the frontmatter has a slug key
	slugText string // its value, trimmed, when it is a string
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
	fm, root, ok := p.frontmatter(data)
	if !ok {
		return nil
	}
	m := &Manifest{Body: string(fm.body), UserInvocable: true}

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
	p.description(m, fields[KeyDescription])

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
	m.DisableModelInvocation = p.flag(KeyDisableModelInvocation, fields[KeyDisableModelInvocation], false)
	m.UserInvocable = p.flag(KeyUserInvocable, fields[KeyUserInvocable], true)
	p.rules(m, fields[KeyAlwaysApply], fields[KeyGlobs])

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

// frontmatter cuts data into frontmatter and body and decodes the YAML: the
// root mapping, or nil for an empty frontmatter. ok is false after a fatal
// problem. In Lenient mode a file that does not start with a --- line is all
// body, as the agents read it, and YAML that does not parse gets the repair
// Claude Code applies (see repairFM).
func (p *manifestParser) frontmatter(data []byte) (fm fmParts, root *yaml.Node, ok bool) {
	fm, msg := splitFM(data)
	if msg == msgNoOpening && p.mode == Lenient {
		p.warn(fieldFrontmatter, "none (the file does not start with a --- line); the whole file is the body")
		return fmParts{body: bytes.TrimPrefix(data, manifestBOM)}, nil, true
	}
	if msg != "" {
		p.fail(fieldFrontmatter, "%s", msg)
		return fmParts{}, nil, false
	}
	if len(fm.front) > MaxFrontmatterBytes {
		p.fail(fieldFrontmatter, "%d bytes, over the %d-byte limit", len(fm.front), MaxFrontmatterBytes)
		return fmParts{}, nil, false
	}
	root, msg = decodeFM(fm.front)
	if msg != "" && msg != msgAliasBomb && p.mode == Lenient {
		if _, r, keys := repairFM(fm.front); r != nil {
			p.warn(fieldFrontmatter, "%s; read after quoting the values of %s, as Claude Code does", msg, quoteList(keys))
			return fm, r, true
		}
	}
	if msg != "" {
		p.fail(fieldFrontmatter, "%s", msg)
		return fmParts{}, nil, false
	}
	return fm, root, true
}

// nameAndSlug settles the display name and the identity. An explicit slug
// makes the name a free display name; without one the name is the slug.
// In Lenient mode the identity is derived instead, from the name, the slug
// text, then the folder name, in that order, so that the folder matters only
// when the frontmatter yields nothing.
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
	p.slugKey, p.slugText = sst != fieldAbsent, slug
	// notSlug says, in Lenient mode, which value could not be the slug and
	// why: the warning about the slug derived instead says it.
	var notSlug string
	switch {
	case sst == fieldInvalid:
		p.bad(KeySlug, "must be a string")
	case sst == fieldOK && ValidSlug(slug):
		m.Slug = slug
	case sst == fieldOK && p.mode == Strict:
		for _, msg := range slugProblems(slug) {
			p.fail(KeySlug, "%s", msg)
		}
	case sst == fieldOK:
		notSlug = fmt.Sprintf("%q is not a valid slug (%s)", slug, slugFaults(slug))
	case m.Name != "" && ValidSlug(m.Name):
		m.Slug = m.Name
	case m.Name != "" && p.mode == Strict:
		for _, msg := range slugProblems(m.Name) {
			p.fail(KeyName, "%s", msg)
		}
	case m.Name != "":
		notSlug = fmt.Sprintf("name %q is not a valid slug (%s)", m.Name, slugFaults(m.Name))
	}
	if p.mode == Strict {
		return
	}

	// Lenient: derive a usable identity rather than skip the skill.
	if m.Slug == "" {
		derived, from := Slugify(m.Name), "the name"
		if derived == "" {
			derived, from = Slugify(slug), "the slug"
		}
		if derived == "" && p.folder != "" {
			derived, from = Slugify(p.folder), "the folder name"
		}
		if derived == "" {
			p.fail(KeyName, "%s", p.noSlugMessage(m.Name, nameMsg))
			return
		}
		if notSlug != "" {
			p.warn(KeySlug, "%s; using %q, derived from %s", notSlug, derived, from)
		} else {
			p.warn(KeySlug, "using slug %q derived from %s", derived, from)
		}
		m.Slug = derived
	}
	switch {
	case nameMsg == "":
	case p.folder != "":
		p.warn(KeyName, "%s; using the folder name %q", nameMsg, p.folder)
		m.Name = p.folder
		if n := utf8.RuneCountInString(m.Name); n > MaxNameLen {
			p.warn(KeyName, "exceeds %d characters (%d)", MaxNameLen, n)
		}
	default:
		p.warn(KeyName, "%s; using the slug %q as the name", nameMsg, m.Slug)
		m.Name = m.Slug
	}
}

// noSlugMessage says why no slug could be derived.
func (p *manifestParser) noSlugMessage(name, nameMsg string) string {
	switch {
	case nameMsg != "" && p.folder != "":
		return fmt.Sprintf("%s, and no usable slug can be derived from the folder name %q", nameMsg, p.folder)
	case nameMsg != "":
		return nameMsg
	case p.folder != "":
		return fmt.Sprintf("no usable slug can be derived from %q or from the folder name %q", name, p.folder)
	}
	return fmt.Sprintf("no usable slug can be derived from %q", name)
}

// description reads the description. Strict mode requires a non-empty
// string of at most MaxDescriptionLen characters. Lenient mode keeps a
// longer one with a warning and, where there is none (absent, empty, or not
// a string), takes the first paragraph of the body, as Claude Code does; with
// no paragraph either, the description is empty, which still serves.
func (p *manifestParser) description(m *Manifest, n *yaml.Node) {
	var why string // why the frontmatter gives no description
	switch desc, st := yamlString(n); st {
	case fieldAbsent:
		why = "is required"
	case fieldInvalid:
		why = "must be a string"
	default:
		m.Description = strings.TrimSpace(desc)
		if m.Description == "" {
			why = "must not be empty"
		} else if n := utf8.RuneCountInString(m.Description); n > MaxDescriptionLen {
			p.bad(KeyDescription, "exceeds %d characters (%d)", MaxDescriptionLen, n)
		}
	}
	if why == "" {
		return
	}
	if p.mode == Strict {
		p.fail(KeyDescription, "%s", why)
		return
	}
	text, from := bodyDescription(m.Body)
	if text == "" {
		p.warn(KeyDescription, "%s, and the body has no paragraph to take it from; it is empty", why)
		return
	}
	p.warn(KeyDescription, "%s; using the %s of the body", why, from)
	if n := utf8.RuneCountInString(text); n > MaxDescriptionLen {
		text = cutRunes(text, MaxDescriptionLen)
		p.warn(KeyDescription, "the %s of the body is %d characters long; cut to %d", from, n, MaxDescriptionLen)
	}
	m.Description = text
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
		value := v.Value
		if v.Kind != yaml.ScalarNode {
			if p.mode == Strict {
				p.fail(KeyMetadata, "value of %q must be a string", k.Value)
				continue
			}
			// Agents read metadata as free-form YAML; keep the value, as
			// text, rather than lose what the author wrote.
			text, ok := yamlJSON(v)
			if !ok {
				p.warn(KeyMetadata, "value of %q is not a string, and too large or deep to keep as JSON text; dropped", k.Value)
				continue
			}
			p.warn(KeyMetadata, "value of %q is not a string; kept as JSON text", k.Value)
			value = text
		}
		if _, dup := md[k.Value]; dup && !dups[k.Value] {
			dups[k.Value] = true
			p.bad(KeyMetadata, "duplicate key %q", k.Value)
		}
		md[k.Value] = value
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

// msgNoOpening is the message of splitFM for a file without frontmatter,
// which Lenient mode reads as all body.
const msgNoOpening = "must start with a --- line"

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
		return fmParts{}, msgNoOpening
	}
	first := data[start : start+nl]
	if !isFMFence(first) {
		return fmParts{}, msgNoOpening
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

// maxFMExpandedNodes bounds the size of a frontmatter with its aliases
// expanded, as the YAML libraries of most agents expand them: a few lines of
// nested aliases (a "billion laughs") must not reach them.
const maxFMExpandedNodes = 100_000

// msgAliasBomb is decodeFM's message for a frontmatter over
// maxFMExpandedNodes. No repair is tried on it: it parsed, and the repair
// would only hide the aliases from the check.
var msgAliasBomb = fmt.Sprintf("its aliases expand to more than %d YAML nodes (an alias bomb), which every agent's YAML parser would have to build", maxFMExpandedNodes)

// yamlExpandedNodes counts the nodes of n with every alias expanded, up to
// just past maxFMExpandedNodes; a node is sized once (memo), and an alias
// back into a node being sized counts as one node.
func yamlExpandedNodes(n *yaml.Node, memo map[*yaml.Node]int) int {
	if v, ok := memo[n]; ok {
		return v
	}
	memo[n] = 1 // being sized: a cycle back here counts once
	size := 1
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		size = yamlExpandedNodes(n.Alias, memo)
	}
	for _, c := range n.Content {
		if size += yamlExpandedNodes(c, memo); size > maxFMExpandedNodes {
			break
		}
	}
	size = min(size, maxFMExpandedNodes+1)
	memo[n] = size
	return size
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
	if n := yamlExpandedNodes(root, map[*yaml.Node]int{}); n > maxFMExpandedNodes {
		return nil, msgAliasBomb
	}
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
