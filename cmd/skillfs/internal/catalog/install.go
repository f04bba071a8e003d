package catalog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"skillfs/cmd/skillfs/api"
	"skillfs/policy"
	"skillfs/skills"
	skillsource "skillfs/skills/source"
)

// install imports every selected skill; per-skill failures go to
// res.Failed. It fails when nothing could be installed.
func (c *Catalog) install(ctx context.Context, actor skills.User, req ImportRequest, sel *selection, res *ImportResult) error {
	run := &importRun{c: c, actor: actor, req: req, src: sel.src}
	var errs []error
	for _, f := range sel.found {
		inst, err := (*Installed)(nil), f.Err // refused as --list says, e.g. past the source's limits
		if err == nil {
			inst, err = run.importOne(ctx, f)
		}
		if err != nil {
			where := req.where(f)
			res.Failed = append(res.Failed, Failed{Source: where, Error: err.Error()})
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			c.log.Info("import failed", "source", where, "err", err)
			continue
		}
		inst.Warnings = api.NonNil(append(slices.Clone(sel.src.Warnings), inst.Warnings...))
		res.Installed = append(res.Installed, *inst)
	}
	if len(res.Installed) == 0 && len(res.Failed) > 0 {
		if len(errs) == 1 {
			return errs[0]
		}
		return fmt.Errorf("no skill of %d imported from %q: %w", len(errs), req.display(), errors.Join(errs...))
	}
	return nil
}

// importOne stages one skill of the source, validates it, settles its slug
// and publishes it. On any error nothing is left: no staging, no content,
// no row.
func (r *importRun) importOne(ctx context.Context, f skillsource.Found) (*Installed, error) {
	c := r.c
	staging, err := c.store.NewStaging()
	if err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	defer skills.RemoveTree(staging) // a no-op once published (renamed away)
	st, err := r.stage(f, staging)
	if err != nil {
		return nil, err
	}
	// Settle the slug, publish and record under the publish lock, so no
	// other import (in any process) decides between our check and our row.
	unlock, err := c.publishLock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := c.stillRegistered(ctx, r.actor); err != nil {
		return nil, err
	}
	if err := st.settleSlug(ctx, nil); err != nil {
		return nil, err
	}
	if err := st.writeSlug(); err != nil {
		return nil, err
	}
	if err := st.hashTree(); err != nil {
		return nil, fmt.Errorf("hash staged skill: %w", err)
	}
	if st.unchanged() {
		ex := st.existing
		return &Installed{Slug: st.slug, Name: skills.DisplayName(ex.Plugin, ex.Name), Version: st.hash,
			Warnings: api.NonNil(append(st.warnings, "content identical to the current version: no new version")),
			Readable: policy.FormatScope(ex.Share.Read)}, nil
	}
	if r.req.Vet != nil {
		if err := r.req.Vet(ctx, st.slug, st.existing, st.bytes); err != nil {
			return nil, err
		}
	}
	sk, err := st.Publish(ctx)
	if err != nil {
		return nil, err
	}
	c.log.Info("skill installed", "slug", st.slug, "version", st.hash, "source", st.origin)
	in := &Installed{Slug: st.slug, Name: skills.DisplayName(sk.Plugin, sk.Name), Version: st.hash, Warnings: api.NonNil(st.warnings),
		Readable: policy.FormatScope(sk.Share.Read)}
	if want := st.wantedSlug(); st.existing == nil && st.slug != want && strings.HasPrefix(st.slug, want+"-v") {
		in.RenamedFrom = want
		in.Note = renameNote(want, st.slug)
	}
	return in, nil
}

// plan says what importing each skill would do, staging each as an import
// would (every check and limit, dependencies included) and keeping nothing.
// The skills are planned in the order an import installs them, each seeing
// the slugs and catalog entries of those before it; the listing keeps the
// discovery order.
func (r *importRun) plan(ctx context.Context, fs []skillsource.Found) []Available {
	out := make([]Available, len(fs))
	at := make(map[string]int, len(fs)) // by folder: the position in fs
	for i, f := range fs {
		at[f.Dir] = i
		out[i] = available(f)
	}
	snap, err := r.c.snapshot(ctx)
	taken := map[string]bool{}
	for _, f := range skillsource.DependencyOrder(fs) {
		a := &out[at[f.Dir]]
		switch {
		case f.Err != nil:
		case err != nil:
			a.Status, a.Error = StatusRefused, err.Error()
		default:
			if err := r.planOne(ctx, f, a, taken, snap); err != nil {
				a.Status, a.Error = StatusRefused, err.Error()
			}
		}
	}
	return out
}

// planOne fills a with what importing f would do. On success the slug it
// would have joins taken, and the skill it would become joins snap, for
// the dependencies of the skills planned after it.
func (r *importRun) planOne(ctx context.Context, f skillsource.Found, a *Available, taken map[string]bool, snap policy.Catalog) error {
	staging, err := r.c.store.NewStaging()
	if err != nil {
		return err
	}
	defer skills.RemoveTree(staging)
	st, err := r.stage(f, filepath.Join(staging, "skill"))
	if err != nil {
		return err
	}
	if err := st.settleSlug(ctx, taken); err != nil {
		return err
	}
	if err := st.writeSlug(); err != nil {
		return err
	}
	if err := st.hashTree(); err != nil {
		return err
	}
	status := StatusUnchanged
	if !st.unchanged() {
		sk, err := st.checked(snap, r.c.now().UTC())
		if err != nil {
			return err
		}
		snap.Skills[st.slug] = sk
		status = StatusUpdate
		if st.existing == nil {
			status = StatusInstall
		}
	}
	taken[st.slug] = true
	a.Slug, a.Name, a.Description = st.slug, skills.DisplayName(f.Plugin, st.m.Name), st.m.Description
	a.Warnings = api.NonNil(append(slices.Clone(r.src.Warnings), st.warnings...))
	a.Status = status
	return nil
}
