package catalog

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"skillfs/cmd/skillfs/api"
	"skillfs/policy"
	"skillfs/skills"
	skillsource "skillfs/skills/source"
)

// Edit changes one text file of a skill — writes it, or removes it when
// content is nil — as a new version, copy-on-write: sessions keep the version
// they pinned until they refresh. The new content is streamed into place and
// checked as it arrives: it is cut at the file size limit and refused at its
// first byte that is not UTF-8 text, never buffered whole. Editing the root
// SKILL.md re-validates it and updates the index (name, description,
// dependencies); its slug cannot change. It returns the new version, or the
// current one when nothing changed.
func (c *Catalog) Edit(ctx context.Context, as, slug, rel string, content io.Reader) (*Installed, error) {
	actor, s, err := c.lookup(ctx, as, slug)
	if err != nil {
		return nil, err
	}
	if err := policy.CheckEdit(actor, s); err != nil {
		return nil, err
	}
	clean, err := skills.CleanRelPath(rel)
	if err != nil {
		return nil, err
	}
	if err := skillsource.CheckEditable(clean, content != nil); err != nil {
		return nil, err
	}
	current, err := c.versionDir(ctx, slug, s.Version)
	if err != nil {
		return nil, err
	}
	unlock, err := c.sharedLock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Copy the current version into a work tree, change it there, then stage
	// the result like any import, with every check and limit.
	if err := os.MkdirAll(filepath.Join(c.home, tmpDir), 0o700); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(filepath.Join(c.home, tmpDir), "edit-")
	if err != nil {
		return nil, err
	}
	defer skills.RemoveTree(work)
	tree := filepath.Join(work, "tree")
	if _, err := skillsource.StageDir(current, tree, c.lim); err != nil {
		return nil, fmt.Errorf("copy the current version: %w", err)
	}
	if err := skillsource.EditFile(tree, clean, content, c.lim.MaxFileBytes); err != nil {
		return nil, err
	}
	staging, err := c.store.NewStaging()
	if err != nil {
		return nil, err
	}
	defer skills.RemoveTree(staging) // a no-op once published
	st, err := c.stageTree(actor, s, tree, staging)
	if err != nil {
		return nil, err
	}
	unlockPub, err := c.publishLock()
	if err != nil {
		return nil, err
	}
	defer unlockPub()
	s, err = c.db.Skill(ctx, slug) // the current version may have moved meanwhile
	if err != nil {
		return nil, err
	}
	// A new version of the skill as it is, its provenance kept; the
	// version records the edit.
	st.existing, st.plugin, st.origin = s, s.Plugin, s.Source
	st.prov = skills.Version{SourceType: s.SourceType, Source: "edit:" + clean}
	if err := st.hashTree(); err != nil {
		return nil, err
	}
	if st.unchanged() {
		return &Installed{Slug: slug, Name: skills.DisplayName(s.Plugin, s.Name), Version: st.hash, Warnings: append(st.warnings, "no change: no new version")}, nil
	}
	next, err := st.Publish(ctx)
	if err != nil {
		return nil, err
	}
	c.log.Info("skill edited", "slug", slug, "file", clean, "version", st.hash, "by", actor.UID)
	return &Installed{Slug: slug, Name: skills.DisplayName(next.Plugin, next.Name), Version: st.hash, Warnings: api.NonNil(st.warnings)}, nil
}
