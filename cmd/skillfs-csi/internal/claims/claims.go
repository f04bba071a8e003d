// Package claims is the CSI node plugin's policy: which users, and which of
// their skills, the pods of a namespace and service account may claim in a
// volume's attributes. Any pod author can write any user there, so nothing
// is allowed that no rule of the operator's file allows (deny by default).
//
// The file (YAML, strict: an unknown field, a second document, a wrong type
// is an error naming its line):
//
//	claims:
//	  - namespace: agents              # exact name, or "*"
//	    serviceAccounts: [runner]      # exact names, or ["*"]
//	    users: [alice, bob]            # users it may claim, or ["*"]
//	    skills: ["*"]                  # optional: skills it may ask for (default: any)
//
// Rules add up: a claim of user U with skills S by a pod of namespace N
// running as service account A is allowed when some rule matching N and A
// names U (or "*"), and every skill of S (and of its preloads) is allowed by
// one of the rules matching N, A and U (a rule without skills, or with "*",
// allows every skill the user may read, and alone allows "all"). Names are
// matched exactly; "*" is the only pattern.
package claims

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Limits of a policy file.
const (
	MaxFileSize = 1 << 20 // bytes
	MaxRules    = 4096    // rules of a file
	MaxNames    = 65536   // names of all its lists together
	MaxNameLen  = 253     // bytes of a name (a Kubernetes namespace or name, a user, a slug)
)

// Any is the pattern that matches every name.
const Any = "*"

// Rule is one entry of the file's claims.
type Rule struct {
	Namespace       string   `yaml:"namespace"`
	ServiceAccounts []string `yaml:"serviceAccounts"`
	Users           []string `yaml:"users"`
	// Skills nil (omitted) allows any skill, as ["*"] does.
	Skills []string `yaml:"skills"`
	// Line is where the rule starts in its file.
	Line int `yaml:"-"`
}

// Policy is a parsed file. The zero Policy denies everything.
type Policy struct {
	Claims []Rule `yaml:"claims"`
}

// Parse reads a policy file's text, strictly (see the package doc). The
// error names the line of what is wrong.
func Parse(data []byte) (*Policy, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%d bytes, want at most %d", len(data), MaxFileSize)
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return &Policy{}, nil // an empty file: no rules, every claim denied
		}
		return nil, err
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("line %d: a second YAML document; a policy file holds one", more.Line)
	}
	if err := checkSize(&root); err != nil {
		return nil, err
	}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	var p Policy
	if err := strict.Decode(&p); err != nil {
		return nil, err
	}
	lines := ruleLines(&root)
	if len(p.Claims) > MaxRules {
		return nil, fmt.Errorf("%d rules, want at most %d", len(p.Claims), MaxRules)
	}
	for i := range p.Claims {
		r := &p.Claims[i]
		if i < len(lines) {
			r.Line = lines[i]
		}
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("line %d: claims[%d]: %w", r.Line, i, err)
		}
	}
	return &p, nil
}

// checkSize bounds the names of the document before it is decoded (an
// alias may repeat a large list many times: every node is counted as
// often as it is reached, and counting stops at the limit).
func checkSize(root *yaml.Node) error {
	n := 0
	var walk func(*yaml.Node, int) error
	walk = func(node *yaml.Node, depth int) error {
		if depth > 16 {
			return fmt.Errorf("line %d: nested deeper than a policy file is", node.Line)
		}
		if n++; n > MaxNames+4*MaxRules+16 {
			return fmt.Errorf("line %d: more than %d names", node.Line, MaxNames)
		}
		if node.Kind == yaml.AliasNode && node.Alias != nil {
			return walk(node.Alias, depth+1)
		}
		for _, c := range node.Content {
			if err := walk(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root, 0)
}

// ruleLines is the line of each rule of the document's claims list.
func ruleLines(root *yaml.Node) []int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "claims" && m.Content[i+1].Kind == yaml.SequenceNode {
			var lines []int
			for _, item := range m.Content[i+1].Content {
				lines = append(lines, item.Line)
			}
			return lines
		}
	}
	return nil
}

func (r *Rule) check() error {
	if err := checkName("namespace", r.Namespace); err != nil {
		return err
	}
	for _, l := range []struct {
		field    string
		names    []string
		optional bool
	}{{"serviceAccounts", r.ServiceAccounts, false}, {"users", r.Users, false}, {"skills", r.Skills, true}} {
		if len(l.names) == 0 && !(l.optional && l.names == nil) {
			return fmt.Errorf("%s: want at least one name (or \"*\")", l.field)
		}
		for _, n := range l.names {
			if err := checkName(l.field, n); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkName(field, name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%s: name %q: want 1 to %d characters", field, clip(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' || c == ',' {
			return fmt.Errorf("%s: name %q: byte %d (%q) is not printable ASCII without spaces and commas", field, clip(name), i, c)
		}
	}
	if strings.Contains(name, Any) && name != Any {
		return fmt.Errorf("%s: name %q: \"*\" stands alone (names are matched exactly)", field, clip(name))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Claim is what one volume asks for, and who asks.
type Claim struct {
	Namespace      string
	ServiceAccount string
	User           string
	Skills         []string // asked for by slug
	All            bool     // every skill the user may read
	Preload        []string
}

// Denied is a claim the policy refuses; its message names the pod's
// namespace and service account and what was refused.
type Denied struct{ Msg string }

func (d *Denied) Error() string { return d.Msg }

// Allow reports whether the policy allows claim c: nil, or a *Denied.
func (p *Policy) Allow(c Claim) error {
	who := fmt.Sprintf("pods of namespace %q with service account %q", c.Namespace, c.ServiceAccount)
	if c.Namespace == "" || c.ServiceAccount == "" {
		return &Denied{fmt.Sprintf("the pod's namespace and service account are not known (%q, %q): the driver's CSIDriver object must set podInfoOnMount: true; nothing is claimed without them", c.Namespace, c.ServiceAccount)}
	}
	var pod []*Rule
	for i := range p.Claims {
		r := &p.Claims[i]
		if match(r.Namespace, c.Namespace) && matchAny(r.ServiceAccounts, c.ServiceAccount) {
			pod = append(pod, r)
		}
	}
	if len(pod) == 0 {
		return &Denied{fmt.Sprintf("%s may claim no user: no rule of the policy names them", who)}
	}
	var user []*Rule
	for _, r := range pod {
		if matchAny(r.Users, c.User) {
			user = append(user, r)
		}
	}
	if len(user) == 0 {
		return &Denied{fmt.Sprintf("%s may not claim user %q", who, c.User)}
	}
	anySkill := slices.ContainsFunc(user, func(r *Rule) bool { return r.Skills == nil || slices.Contains(r.Skills, Any) })
	if anySkill {
		return nil
	}
	if c.All {
		return &Denied{fmt.Sprintf("%s may not claim all skills of user %q, only those the policy names", who, c.User)}
	}
	var refused []string
	for _, s := range slices.Concat(c.Skills, c.Preload) {
		if slices.Contains(refused, s) {
			continue
		}
		if !slices.ContainsFunc(user, func(r *Rule) bool { return slices.Contains(r.Skills, s) }) {
			refused = append(refused, s)
		}
	}
	if len(refused) > 0 {
		return &Denied{fmt.Sprintf("%s may not claim skills %s of user %q", who, strings.Join(refused, ","), c.User)}
	}
	return nil
}

func match(pattern, name string) bool { return pattern == Any || pattern == name }

func matchAny(patterns []string, name string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, name) })
}
