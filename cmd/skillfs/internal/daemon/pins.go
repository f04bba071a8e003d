package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"skillfs/index"
	"skillfs/policy"
	"skillfs/skills"
)

// requested is a session's skill list as read by readRequested.
type requested struct {
	roots  []string          // the slugs, in the order given
	pinned map[string]string // slug → the full hash of the version it asks for
	stored []string          // the list as the session records it: slug or slug@<full hash>
	// skipped are pinned versions that do not exist (reported as a
	// missing skill is).
	skipped []policy.Skipped
}

// readRequested reads a skill list of SLUG or SLUG@VERSION entries (see
// skills.ParseSkillRef; VERSION a unique prefix of a version's hash) for
// user u. A pin of a skill u may not read is left to the closure, which
// reports it exactly as a missing skill, so no version of it is looked up;
// an unknown version is skipped as missing; a prefix several versions
// share is an error (skills.ErrAmbiguousVersion). Changing a session's
// skill list reads the new list with it too. A recorded list (stored) may
// hold what sessions made before pins asked for: an entry that is no ref is
// a slug, missing as any unknown one.
func (d *Daemon) readRequested(ctx context.Context, set *index.SkillSet, u skills.User, list []string, stored bool) (*requested, error) {
	r := &requested{roots: []string{}, pinned: map[string]string{}, stored: []string{}}
	for _, entry := range distinctNonEmpty(list) {
		ref, err := skills.ParseSkillRef(entry)
		if err != nil && stored {
			ref, err = skills.SkillRef{Slug: entry}, nil
		}
		if err != nil {
			return nil, err
		}
		if _, dup := r.pinned[ref.Slug]; dup || slices.Contains(r.roots, ref.Slug) {
			if ref.Version != "" || r.pinned[ref.Slug] != "" {
				return nil, fmt.Errorf("skill %q is asked for twice (%s): ask for one version of it: %w", ref.Slug, entry, skills.ErrInvalid)
			}
			continue
		}
		if ref.Version != "" {
			if sk := set.Get(ref.Slug); sk != nil && policy.Visible(u, sk) {
				v, err := d.db.ResolveVersion(ctx, ref.Slug, ref.Version)
				switch {
				case errors.Is(err, skills.ErrNotFound):
					r.skipped = append(r.skipped, policy.Skipped{Slug: ref.Slug,
						Reason: fmt.Sprintf("it has no version %s (see `skillfs skill versions %s`)", ref.Version, ref.Slug)})
					continue
				case err != nil:
					return nil, err
				}
				r.pinned[ref.Slug] = v.Hash
				ref.Version = v.Hash
			}
		}
		r.roots = append(r.roots, ref.Slug)
		r.stored = append(r.stored, ref.String())
	}
	return r, nil
}

// pin puts the versions a session asked for into its pins.
func (r *requested) pin(pins []skills.Pin) []skills.Pin {
	for i, p := range pins {
		if h := r.pinned[p.Slug]; h != "" {
			pins[i].Version = h
		}
	}
	return pins
}

// pinnedList is the slug@version entries of a requested list.
func pinnedList(stored []string) []string {
	out := []string{}
	for _, e := range stored {
		if ref, err := skills.ParseSkillRef(e); err == nil && ref.Version != "" {
			out = append(out, e)
		}
	}
	return out
}

// pinnedVersions maps the slugs of a requested list's slug@version entries
// to their versions.
func pinnedVersions(stored []string) map[string]string {
	out := map[string]string{}
	for _, e := range stored {
		if ref, err := skills.ParseSkillRef(e); err == nil && ref.Version != "" {
			out[ref.Slug] = ref.Version
		}
	}
	return out
}
