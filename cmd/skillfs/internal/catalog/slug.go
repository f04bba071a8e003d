package catalog

import (
	"context"
	"errors"
	"fmt"

	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/manifest"
	skillsource "skillfs/skills/source"
)

// maxSuffix bounds the -vN search for a free slug.
const maxSuffix = 100

// settleSlug decides the slug of a staged skill: the slug it asks for (its
// own, or its plugin-namespaced one), or the next free -vN when another
// source's skill holds it; existing is the skill it becomes a new version
// of. Its warnings say how it was settled when not as asked. The caller
// that publishes holds the publish lock. taken holds the slugs that skills
// listed before this one in the same plan or draft will have.
//
// Whether a plugin's skill is namespaced depends on the other skills its
// source holds, which change: when this skill of this source is installed
// already under the other form (its own slug, or the namespaced one), that
// skill gets the new version and keeps its slug, so that one SOURCE//PATH
// stays one skill.
func (st *staged) settleSlug(ctx context.Context, taken map[string]bool) error {
	own, want := st.m.Slug, st.wantedSlug()
	var warnings []string
	if want != own {
		warnings = append(warnings, fmt.Sprintf("another skill of this source is also %q: installed as %q, the slug of plugin %q", own, want, st.plugin))
	}
	if st.plugin != "" {
		other := own
		if want == own {
			other = skillsource.Namespaced(st.plugin, own)
		}
		if other != "" && other != want {
			slug, existing, err := st.sameSource(ctx, other, taken)
			if err != nil {
				return err
			}
			if existing != nil {
				st.slug, st.existing = slug, existing
				st.warnings = append(st.warnings, fmt.Sprintf("this skill of this source is installed as %q already: a new version of it, not %q", slug, want))
				return nil
			}
		}
	}
	slug, existing, err := st.chooseSlug(ctx, want, taken)
	if err != nil {
		return err
	}
	if slug != want {
		warnings = append(warnings, fmt.Sprintf("slug %q is taken: installed as %q "+
			"(whoever manages %q can import with --replace to make this a new version of it instead)", want, slug, want))
	}
	st.slug, st.existing = slug, existing
	st.warnings = append(st.warnings, warnings...)
	return nil
}

// wantedSlug is the slug the staged skill asks for (see settleSlug).
func (st *staged) wantedSlug() string {
	if st.want != "" && st.plugin != "" {
		return st.want
	}
	return st.m.Slug
}

// renameNote says plainly that a skill became a new one beside the skill
// holding its slug, and how to update that one instead. It says nothing
// about that skill (its source, its owner): the importer may not see it.
func renameNote(want, slug string) string {
	return fmt.Sprintf("the slug %q is taken, so this one is a new skill %q "+
		"(two skills never overwrite each other by name). To make it a new version of %q instead, whoever manages %q "+
		"imports it with --replace; to pick up changes of %q's own source, they run `skillfs skill update %s`",
		want, slug, want, want, want, want)
}

// chooseSlug decides where a skill with the wanted slug goes: a new skill
// (existing == nil) or a new version of existing. A slug in taken counts as
// taken by a skill from elsewhere. A skill of the same source becomes a new
// version only for those who manage it by explicit right (its creator, its
// manage scope: policy.ManagesByShare), never by an admin's role alone, so an
// admin's import does not take over another user's skill; --replace is how
// any manager (admins included) makes an import a new version of the skill
// holding the wanted slug. --replace of a skill the actor knows of
// (policy.Known) but may not manage is refused (skills.ErrPermission); of
// one the actor may not see, it is ignored: the import answers exactly as
// without it (a -vN beside the slug), as refusing would tell that the skill
// exists and is not theirs. The slug of a builtin is refused (skills.ErrExists)
// unless the operator re-syncs that builtin from its own source, or the skill
// of this source was installed as a -vN beside it (before builtin slugs were
// reserved) and the actor may update it.
func (st *staged) chooseSlug(ctx context.Context, want string, taken map[string]bool) (string, *skills.Skill, error) {
	actor, key := st.actor, st.origin
	for n := 1; n <= maxSuffix; n++ {
		slug := want
		if n > 1 {
			slug = fmt.Sprintf("%s-v%d", want, n)
			if len(slug) > manifest.MaxSlugLen {
				return "", nil, fmt.Errorf("slug %q is taken and %q is too long: %w", want, slug, skills.ErrExists)
			}
		}
		if taken[slug] {
			continue
		}
		ex, err := st.c.db.Skill(ctx, slug)
		if errors.Is(err, skills.ErrNotFound) {
			return slug, nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		manages := policy.Permission(actor, ex) == policy.Manage
		builtin := ex.SourceType == skills.SourceBuiltin
		switch {
		case builtin && st.builtin && ex.Source == key:
			return slug, ex, nil // operator re-syncs a builtin from its source
		case builtin && n == 1:
			old, oldEx, err := st.sameSource(ctx, want, taken)
			if err != nil || oldEx != nil {
				return old, oldEx, err // a -vN from before builtin slugs were reserved
			}
			return "", nil, reserved(actor, ex)
		case builtin:
			continue // a -vN some builtin took as its own name
		case ex.Source == key && policy.ManagesByShare(actor, ex):
			return slug, ex, nil // reinstall from the same source: new version
		case st.replace && n == 1 && manages:
			return slug, ex, nil
		case st.replace && n == 1 && policy.Known(actor, ex):
			return "", nil, fmt.Errorf("replace %q: %s may not manage it: %w", slug, actor.UID, skills.ErrPermission)
		}
		// Held by a skill the actor may not update, or (with --replace)
		// one the actor does not know of: the next -vN, as without
		// --replace, so that --replace tells nothing about a skill the
		// actor may not see.
	}
	return "", nil, fmt.Errorf("slug %q: every suffix up to -v%d is taken: %w", want, maxSuffix, skills.ErrExists)
}

// reserved is the refusal of an install by actor that asks for the slug of
// builtin skill b: builtin slugs are reserved, never taken by another install
// nor turned into -vN, whether the builtin is enabled or not. The builtin is
// named only to an actor who may know it (policy.Known: it is enabled, or
// the actor is an admin); to anyone else a disabled builtin does not exist,
// so the slug is only said to be reserved.
func reserved(actor skills.User, b *skills.Skill) error {
	return reservedFor(actor, b, fmt.Sprintf("slug %q", b.Slug), "no other install may take a builtin's slug")
}

// reservedFor is the refusal of what (`slug "x"`, `name "X"`) to actor
// because builtin b holds it, by rule: b named only to an actor who may
// know it (see reserved).
func reservedFor(actor skills.User, b *skills.Skill, what, rule string) error {
	const rename = "give the skill another name in its SKILL.md and import it again"
	if !policy.Known(actor, b) {
		return fmt.Errorf("%s is reserved: no install may take it; %s: %w", what, rename, skills.ErrExists)
	}
	return fmt.Errorf("%s is reserved by the builtin skill %q (%s): %s; %s: %w",
		what, b.Slug, skills.DisplayName(b.Plugin, b.Name), rule, rename, skills.ErrExists)
}

// sameSource looks for the skill of the staged skill's source among base
// and its -vN slugs, up to the first free one, as chooseSlug would settle
// on it: a skill the actor manages by explicit right
// (policy.ManagesByShare; a builtin only when re-synced as one). existing
// is nil when there is none.
func (st *staged) sameSource(ctx context.Context, base string, taken map[string]bool) (string, *skills.Skill, error) {
	for n := 1; n <= maxSuffix; n++ {
		slug := base
		if n > 1 {
			slug = fmt.Sprintf("%s-v%d", base, n)
		}
		if taken[slug] {
			continue
		}
		ex, err := st.c.db.Skill(ctx, slug)
		if errors.Is(err, skills.ErrNotFound) {
			return "", nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		builtin := ex.SourceType == skills.SourceBuiltin
		if ex.Source == st.origin && (builtin && st.builtin || !builtin && policy.ManagesByShare(st.actor, ex)) {
			return slug, ex, nil
		}
	}
	return "", nil, nil
}

// reservedName refuses sk, the entry st would publish, when its display
// name is a builtin's name or slug (policy.ReservedBy): builtin names are
// reserved as builtin slugs are, enabled or not, and refused the same way
// (skills.ErrExists, the builtin named only to an actor who may know it).
// A new version of a skill that already had that name (installed before
// names were reserved) keeps it; a session's prompt still shows the
// builtin under it and the other skill under its slug (policy.PromptNames).
func (st *staged) reservedName(snap policy.Catalog, sk *skills.Skill) error {
	b := policy.ReservedBy(snap, sk)
	if b == nil {
		return nil
	}
	name := skills.DisplayName(sk.Plugin, sk.Name)
	if ex := st.existing; ex != nil && policy.NameKey(skills.DisplayName(ex.Plugin, ex.Name)) == policy.NameKey(name) {
		return nil
	}
	return reservedFor(st.actor, b, fmt.Sprintf("name %q", name), "no other skill may take a builtin's name or slug as its name")
}
