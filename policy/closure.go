package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"skillfs/skills"
)

// Reasons a slug is left out of a closure.
const (
	SkipMissing     = "missing"      // no skill has that slug
	SkipDisabled    = "disabled"     // the user could read it, but it is disabled
	SkipNotReadable = "not readable" // the user may not read it
)

// Skipped is a slug left out of a readable set, and why. Callers that must not
// reveal whether other users' skills exist pass it through Disclose.
type Skipped struct {
	Slug   string // the slug as it was named
	Reason string // SkipMissing, SkipDisabled or SkipNotReadable
	Via    string // the skill whose dependency list named it; "" for a root
}

// Closure returns a session's readable set: roots and, recursively, their
// skill dependencies, in depth-first pre-order. Each root is taken in the
// order given and is followed by its dependencies before the next root; each
// skill's dependencies are taken in the order it lists them; a slug already
// placed stays where it first appeared. For example, with alpha -> [beta,
// gamma] and beta -> [delta], roots [alpha, zeta] give [alpha, beta, delta,
// gamma, zeta].
//
// A slug that lookup does not find, or whose skill visible refuses, is left
// out and reported once in skipped (with the first skill that named it); its
// dependencies are not followed, so nothing is reached through a skill the
// user may not read. The walk is iterative and marks what it placed, so deep
// chains and cycles saved by an older catalog cost neither stack nor time.
func Closure(roots []string, lookup func(slug string) *skills.Skill, visible func(*skills.Skill) bool) (readable []string, skipped []Skipped) {
	type item struct{ slug, via string }
	placed := make(map[string]bool, len(roots))
	refused := make(map[string]bool)
	// The stack holds pending items, next on top. Marking on pop rather than
	// on push is what makes this match recursive pre-order.
	stack := make([]item, 0, len(roots))
	readable = make([]string, 0, len(roots))
	for _, r := range slices.Backward(roots) {
		stack = append(stack, item{slug: r})
	}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if placed[it.slug] || refused[it.slug] {
			continue
		}
		s := lookup(it.slug)
		if reason := skipReason(s, visible); reason != "" {
			refused[it.slug] = true
			skipped = append(skipped, Skipped{Slug: it.slug, Reason: reason, Via: it.via})
			continue
		}
		placed[it.slug] = true
		readable = append(readable, it.slug)
		for _, dep := range slices.Backward(s.SkillDependencies) {
			if !placed[dep] && !refused[dep] {
				stack = append(stack, item{slug: dep, via: it.slug})
			}
		}
	}
	return readable, skipped
}

// skipReason says why s is left out, or "" when it is visible. A disabled
// skill is reported as such only when enabling it would make it visible, so
// the reason tells nothing about skills the user could not read anyway.
func skipReason(s *skills.Skill, visible func(*skills.Skill) bool) string {
	switch {
	case s == nil:
		return SkipMissing
	case visible(s):
		return ""
	case !s.Enabled:
		enabled := *s
		enabled.Enabled = true
		if visible(&enabled) {
			return SkipDisabled
		}
	}
	return SkipNotReadable
}

// Disclose returns skipped as u may be told it: a slug naming a skill u does
// not know (see Known) — one u may not read, or a disabled one u reads but
// does not manage — is reported as SkipMissing, exactly like a slug that names
// no skill, so the answer reveals nothing about skills u may not see. A skill
// u knows but whose share does not reach u (an admin's, who manages it in the
// catalog) stays SkipNotReadable. managers are others who may be told the
// real reason for the skills they manage (whoever asks for u's session: the
// operator who made a skill and opens sessions for others learns that its
// share is why it is left out). lookup finds the skill of a slug (nil:
// none). skipped is not modified.
func Disclose(u skills.User, lookup func(slug string) *skills.Skill, skipped []Skipped, managers ...skills.User) []Skipped {
	out := make([]Skipped, len(skipped))
	for i, s := range skipped {
		if (s.Reason == SkipNotReadable || s.Reason == SkipDisabled) && !toldWhy(u, lookup(s.Slug), managers) {
			s.Reason = SkipMissing
		}
		out[i] = s
	}
	return out
}

// toldWhy reports whether the reason s is left out of u's set may be said:
// u knows s, or one of managers manages it.
func toldWhy(u skills.User, s *skills.Skill, managers []skills.User) bool {
	if Known(u, s) {
		return true
	}
	return slices.ContainsFunc(managers, func(m skills.User) bool { return s != nil && Permission(m, s) == Manage })
}

// CheckRoots refuses a session that named skills (roots) of which it may read
// none: the error wraps skills.ErrNotFound and names each root with its
// reason from skipped (pass it through Disclose first). Naming no skill at all
// is no error, nor is a mix of readable and missing ones: the caller reports
// the missing ones from skipped.
func CheckRoots(roots, readable []string, skipped []Skipped) error {
	if len(roots) == 0 || slices.ContainsFunc(roots, func(r string) bool { return slices.Contains(readable, r) }) {
		return nil
	}
	why := make(map[string]string, len(skipped))
	for _, s := range skipped {
		if s.Via == "" {
			why[s.Slug] = s.Reason
		}
	}
	names := make([]string, len(roots))
	for i, r := range roots {
		reason := why[r]
		if reason == "" {
			reason = SkipMissing
		}
		names[i] = fmt.Sprintf("%q (%s)", r, reason)
	}
	hint := ""
	if slices.Contains(slices.Collect(maps.Values(why)), SkipNotReadable) {
		hint = "; a skill that is not readable is not shared with the user: `skillfs skill share SLUG --read SCOPE` shares it"
	}
	return fmt.Errorf("none of the requested skills can be read: %s; `skillfs skill list --as USER` shows the skills a user can read%s: %w",
		strings.Join(names, ", "), hint, skills.ErrNotFound)
}
