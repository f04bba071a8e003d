package policy

import (
	"fmt"
	"slices"
	"strings"

	"skillfs/skills"
)

// Catalog is the snapshot the dependency validators read. Callers build it
// from the index inside the transaction that writes the change, so the answer
// holds for what is committed.
type Catalog struct {
	// Skills by slug, laid over Base: an entry here (nil: none) hides
	// Base's skill of the same slug. Callers may add to it.
	Skills map[string]*skills.Skill
	// Base is the rest of the catalog, read only; nil for none. A large
	// catalog is read from memory this way rather than copied per check.
	Base  SkillSource
	Tools map[string]bool // registered tool names
	MCPs  map[string]bool // registered MCP server names
	Users []skills.User   // known users, for department membership and roles
	// LookupUser, when set, finds a user by uid instead of Users, so a
	// check reads only the users it names.
	LookupUser func(uid string) (skills.User, bool)
}

// userLookup returns how the checks find a user.
func (c Catalog) userLookup() func(uid string) (skills.User, bool) {
	if c.LookupUser != nil {
		return c.LookupUser
	}
	users := userIndex(c.Users)
	return func(uid string) (skills.User, bool) {
		u, ok := users[uid]
		return u, ok
	}
}

// SkillSource is a catalog's skills, read only.
type SkillSource interface {
	Get(slug string) *skills.Skill // nil when there is none
	All() []*skills.Skill          // every skill, sorted by slug
}

// skill returns the skill slug, or nil.
func (c Catalog) skill(slug string) *skills.Skill {
	if s, ok := c.Skills[slug]; ok {
		return s
	}
	if c.Base != nil {
		return c.Base.Get(slug)
	}
	return nil
}

// each calls fn for every skill of the catalog (Skills over Base).
func (c Catalog) each(fn func(slug string, s *skills.Skill)) {
	for k, s := range c.Skills {
		if s != nil {
			fn(k, s)
		}
	}
	if c.Base == nil {
		return
	}
	for _, s := range c.Base.All() {
		if _, hidden := c.Skills[s.Slug]; !hidden {
			fn(s.Slug, s)
		}
	}
}

// DependencyError lists every dependency problem of one skill, so that a user
// fixes them all in one go. It unwraps to skills.ErrDependency.
type DependencyError struct {
	Slug     string   // the skill whose dependencies were checked
	Problems []string // one sentence each, in a stable order
}

// Error joins the problems.
func (e *DependencyError) Error() string {
	return fmt.Sprintf("check dependencies of %q: %s: %v", e.Slug, strings.Join(e.Problems, "; "), skills.ErrDependency)
}

// Unwrap returns skills.ErrDependency.
func (e *DependencyError) Unwrap() error { return skills.ErrDependency }

// ValidateDependencies checks the dependency lists of s, the candidate about to
// be written (it takes the place of the catalog's entry of the same slug), and
// reports every problem at once in a *DependencyError:
//   - every tool and MCP server is registered;
//   - every skill dependency is another skill that exists and is enabled;
//   - every skill dependency is readable by everyone who can read s (its read
//     and manage scopes and its creator): a builtin or globally shared
//     dependency always is; departments must be inside the dependency's
//     department scopes by id; listed users and the creator must each be able
//     to read it in their sessions, judged by share with their department
//     from c.Users (ReadsByShare: an admin's role gives no session reads);
//   - no dependency leads back to s; each such cycle is named by its shortest
//     path, e.g. "cycle: a -> b -> a".
//
// Cycles that do not pass through s were saved before these rules and are not
// s's doing; they are left to Closure, which tolerates them.
func ValidateDependencies(c Catalog, s *skills.Skill) error {
	if s == nil {
		return fmt.Errorf("check dependencies: no skill given: %w", skills.ErrInvalid)
	}
	users := c.userLookup()
	var problems []string
	deps := uniq(s.SkillDependencies)
	for _, dep := range deps {
		if dep == s.Slug {
			problems = append(problems, fmt.Sprintf("skill %q depends on itself", s.Slug))
			continue
		}
		d := c.skill(dep)
		if d == nil {
			problems = append(problems, fmt.Sprintf("skill dependency %q does not exist", dep))
			continue
		}
		problems = append(problems, depProblems(users, s, dep, d)...)
	}
	for _, dep := range deps {
		if dep == s.Slug {
			continue
		}
		if path := pathTo(c, dep, s.Slug); path != nil {
			problems = append(problems, "cycle: "+s.Slug+" -> "+strings.Join(path, " -> "))
		}
	}
	for _, t := range uniq(s.ToolDependencies) {
		if !c.Tools[t] {
			problems = append(problems, fmt.Sprintf("tool %q is not registered", t))
		}
	}
	for _, m := range uniq(s.MCPDependencies) {
		if !c.MCPs[m] {
			problems = append(problems, fmt.Sprintf("MCP server %q is not registered", m))
		}
	}
	if len(problems) > 0 {
		return &DependencyError{Slug: s.Slug, Problems: problems}
	}
	return nil
}

// Dependents returns, sorted, the slugs of the skills whose skill
// dependencies name slug: what a delete, disable or narrower share of slug
// would break. A skill naming itself is not its own dependent.
func Dependents(c Catalog, slug string) []string {
	var out []string
	c.each(func(k string, s *skills.Skill) {
		if k != slug && slices.Contains(s.SkillDependencies, slug) {
			out = append(out, k)
		}
	})
	slices.Sort(out)
	return out
}

// CheckDependents reports what replacing the catalog's skill slug with next
// would break for the skills that depend on it; next == nil means slug is being
// deleted. Use it before a delete, a disable or a narrower share. Problems are
// reported as "needed by a: ..." in a *DependencyError for slug.
func CheckDependents(c Catalog, slug string, next *skills.Skill) error {
	users := c.userLookup()
	var problems []string
	for _, k := range Dependents(c, slug) {
		if next == nil {
			problems = append(problems, fmt.Sprintf("needed by %q", k))
			continue
		}
		for _, p := range depProblems(users, c.skill(k), slug, next) {
			problems = append(problems, fmt.Sprintf("needed by %q: %s", k, p))
		}
	}
	if len(problems) > 0 {
		return &DependencyError{Slug: slug, Problems: problems}
	}
	return nil
}

// depProblems returns why d, the skill named dep, cannot be a dependency of s.
func depProblems(users func(string) (skills.User, bool), s *skills.Skill, dep string, d *skills.Skill) []string {
	var out []string
	if !d.Enabled {
		out = append(out, fmt.Sprintf("skill dependency %q is disabled", dep))
	}
	if who := uncoveredReaders(users, s, d); len(who) > 0 {
		out = append(out, fmt.Sprintf("skill dependency %q is not readable by everyone who can read %q (not by %s)",
			dep, s.Slug, strings.Join(who, ", ")))
	}
	return out
}

// uncoveredReaders names the readers of s who may not read d. Departments are
// compared by id, since their future members are unknown; users are judged
// one by one as their sessions read (ReadsByShare), so departments and d's
// creator count, roles do not.
func uncoveredReaders(users func(string) (skills.User, bool), s, d *skills.Skill) []string {
	if d.SourceType == skills.SourceBuiltin || d.Share.Read.Kind == skills.ScopeGlobal || d.Share.Manage.Kind == skills.ScopeGlobal {
		return nil
	}
	if s.SourceType == skills.SourceBuiltin {
		return []string{"everyone, as builtin skills are readable by all"}
	}
	var depts, uids []string
	for _, sc := range []skills.Scope{s.Share.Read, s.Share.Manage} {
		switch sc.Kind {
		case skills.ScopeGlobal:
			return []string{"everyone"}
		case skills.ScopeDepartment:
			depts = append(depts, sc.IDs...)
		case skills.ScopeUser:
			uids = append(uids, sc.IDs...)
		}
	}
	if s.Creator != "" {
		uids = append(uids, s.Creator)
	}
	slices.Sort(depts)
	slices.Sort(uids)
	var out []string
	for _, dept := range slices.Compact(depts) {
		member := skills.User{Department: dept}
		if !InScope(member, d.Share.Read) && !InScope(member, d.Share.Manage) {
			out = append(out, "department "+dept)
		}
	}
	for _, uid := range slices.Compact(uids) {
		u, ok := users(uid)
		if !ok {
			u = skills.User{UID: uid, Role: skills.RoleUser}
		}
		if !ReadsByShare(u, d) {
			out = append(out, "user "+uid)
		}
	}
	return out
}

// pathTo returns the shortest dependency path from start to target in c
// (start first, target last), or nil when there is none. Ties go to the
// dependency listed first. Breadth-first and iterative, so deep chains and old
// cycles cost no stack.
func pathTo(c Catalog, start, target string) []string {
	parent := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == target {
			var path []string
			for n := cur; n != ""; n = parent[n] {
				path = append(path, n)
			}
			slices.Reverse(path)
			return path
		}
		s := c.skill(cur)
		if s == nil {
			continue
		}
		for _, next := range s.SkillDependencies {
			if _, seen := parent[next]; !seen && next != "" {
				parent[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// userIndex maps uids to users.
func userIndex(list []skills.User) map[string]skills.User {
	m := make(map[string]skills.User, len(list))
	for _, u := range list {
		m[u.UID] = u
	}
	return m
}

// uniq returns list without repeats, first occurrence kept.
func uniq(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := make([]string, 0, len(list))
	for _, x := range list {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
