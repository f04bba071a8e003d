package policy

import (
	"cmp"
	"slices"
	"strings"
	"unicode"

	"skillfs/skills"
)

// NameKey is the form in which two display names are the same name: case
// folded, invisible format characters (zero-width spaces, joiners, bidi
// marks) removed, and every run of white space, '-' and '_' one space, so
// that "Deploy Agent", "deploy-agent" and "deploy\u200b_agent" are one
// name. A builtin's name and slug are reserved in this form, and a
// session's prompt shows no two skills whose names have the same key.
func NameKey(name string) string {
	var b strings.Builder
	sep := false
	for _, r := range name {
		switch {
		case unicode.Is(unicode.Cf, r):
		case unicode.IsSpace(r) || r == '-' || r == '_':
			sep = true
		default:
			if sep && b.Len() > 0 {
				b.WriteByte(' ')
			}
			sep = false
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// Name classes, in the order in which they keep a name in a prompt.
const (
	NameBuiltin = iota // a builtin skill
	NameOwn            // the session's user's own skill (its creator)
	NameShared         // a skill shared with the user
)

// NameRank is a readable skill of a session competing for its display
// name: its class, then its place in the readable set, decide.
type NameRank struct {
	Slug  string
	Name  string // its display name (plugin:name for a plugin's skill)
	Class int    // NameBuiltin, NameOwn or NameShared
	Order int    // its place in the readable set
}

// PromptNames gives each skill of a session the name its prompt shows it
// under, so that no two show under one name (NameKey): in the order of
// class (builtins first, then the user's own, then those shared with the
// user) and then of the readable set, each skill takes its own name unless
// a skill before it took that name or the name is another readable skill's
// slug (which names that skill, as $slug does); else it shows under its
// slug. A slug is never taken: slugs are unique and differ in key, and no
// skill takes another's slug as its name. Every skill of ranks is in the
// map.
func PromptNames(ranks []NameRank) map[string]string {
	order := slices.Clone(ranks)
	slices.SortStableFunc(order, func(a, b NameRank) int {
		return cmp.Or(cmp.Compare(a.Class, b.Class), cmp.Compare(a.Order, b.Order))
	})
	slugOf := map[string]string{} // slug's key -> slug
	for _, r := range ranks {
		slugOf[NameKey(r.Slug)] = r.Slug
	}
	taken := map[string]bool{}
	out := map[string]string{}
	for _, r := range order {
		name := r.Name
		k := NameKey(name)
		if owner, isSlug := slugOf[k]; k == "" || taken[k] || isSlug && owner != r.Slug {
			name, k = r.Slug, NameKey(r.Slug)
		}
		taken[k] = true
		out[r.Slug] = name
	}
	return out
}

// ReservedBy returns the builtin skill of c whose display name or slug is
// sk's display name (NameKey), or nil when there is none: a builtin's name
// is reserved as its slug is, so that no other skill can pass for it in a
// prompt. A builtin reserves nothing against another builtin, and a skill
// never against itself. When several builtins match, the one of the
// lowest slug is returned.
func ReservedBy(c Catalog, sk *skills.Skill) *skills.Skill {
	if sk.SourceType == skills.SourceBuiltin {
		return nil
	}
	key := NameKey(skills.DisplayName(sk.Plugin, sk.Name))
	if key == "" {
		return nil
	}
	var found *skills.Skill
	c.each(func(slug string, b *skills.Skill) {
		if b.SourceType != skills.SourceBuiltin || slug == sk.Slug {
			return
		}
		if NameKey(skills.DisplayName(b.Plugin, b.Name)) != key && NameKey(b.Slug) != key {
			return
		}
		if found == nil || b.Slug < found.Slug {
			found = b
		}
	})
	return found
}
