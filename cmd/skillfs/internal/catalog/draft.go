package catalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/policy"
	"skillfs/skills"
	skillsource "skillfs/skills/source"
)

// DraftTTL is how long a prepared import waits for its confirmation.
const DraftTTL = time.Hour

const draftsDir = "drafts"

// maxDraftBytes bounds a draft record read back.
const maxDraftBytes = 16 << 20

// Draft is a prepared import: the source was read, checked and copied, the
// skills parsed; nothing is in the catalog until Confirm. Interactive front
// ends show it, ask for a share scope, then confirm or discard it.
type Draft struct {
	ID        string       `json:"draft"`
	Source    string       `json:"source"`
	Creator   string       `json:"creator"`
	CreatedAt time.Time    `json:"created_at"`
	ExpiresAt time.Time    `json:"expires_at"`
	Skills    []DraftSkill `json:"skills"`
	Failed    []Failed     `json:"failed"`

	// How to install it, fixed at prepare time.
	Key        string `json:"origin"`
	SourceType string `json:"source_type"`
	Ref        string `json:"ref,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Worktree   string `json:"worktree,omitempty"`
	Agents     bool   `json:"agents,omitempty"` // from the agents' skill folders
	Replace    bool   `json:"replace,omitempty"`
	Builtin    bool   `json:"builtin,omitempty"`
}

// DraftSkill is one skill of a draft. Slug is where it would install now;
// Confirm decides again, as the catalog may have changed meanwhile.
type DraftSkill struct {
	Slug        string   `json:"slug"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Warnings    []string `json:"warnings"`
	Folder      string   `json:"folder"`
	Rel         string   `json:"path"`
	Version     string   `json:"version"` // tree hash before any slug rewrite
	Plugin      string   `json:"plugin,omitempty"`
	Want        string   `json:"want,omitempty"` // the slug it asks for (a plugin namespace when one applies)
}

func (c *Catalog) draftPath(id string) (string, error) {
	if len(id) != 32 {
		return "", fmt.Errorf("draft %q: %w", id, skills.ErrNotFound)
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", fmt.Errorf("draft %q: %w", id, skills.ErrNotFound)
	}
	return filepath.Join(c.home, draftsDir, id), nil
}

// Prepare reads a source like Import, but stops before publishing: the
// selected skills are staged into a draft that Confirm installs.
func (c *Catalog) Prepare(ctx context.Context, req ImportRequest) (*Draft, error) {
	actor, err := c.Actor(ctx, req.As)
	if err != nil {
		return nil, err
	}
	if req.Builtin {
		if err := policy.CheckInstallBuiltin(actor); err != nil {
			return nil, err
		}
	}
	unlock, err := c.sharedLock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return c.prepare(ctx, actor, req)
}

// prepare does Prepare's work; the caller holds the import lock shared.
func (c *Catalog) prepare(ctx context.Context, actor skills.User, req ImportRequest) (*Draft, error) {
	res := &ImportResult{}
	sel, err := c.selectSkills(ctx, actor, req, res)
	if err != nil {
		return nil, err
	}
	if sel == nil {
		return nil, fmt.Errorf("prepare needs skills to install, not --list: %w", skills.ErrInvalid)
	}
	defer sel.src.Close()

	b := make([]byte, 16)
	rand.Read(b)
	now := c.now().UTC()
	d := &Draft{ID: hex.EncodeToString(b), Source: req.display(), Creator: actor.UID, CreatedAt: now,
		ExpiresAt: now.Add(DraftTTL), Skills: []DraftSkill{}, Failed: res.Failed,
		Key: sel.src.Key, SourceType: sel.src.Type, Ref: sel.src.Ref, Commit: sel.src.Commit, Worktree: sel.src.Worktree,
		Agents: req.Agents, Replace: req.Replace, Builtin: req.Builtin}
	if d.Failed == nil {
		d.Failed = []Failed{}
	}
	dir, _ := c.draftPath(d.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create draft: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			skills.RemoveTree(dir)
		}
	}()
	var errs []error
	run := &importRun{c: c, actor: actor, req: req, src: sel.src}
	taken := map[string]bool{}
	for i, f := range sel.found {
		ds, err := (*DraftSkill)(nil), f.Err // refused as --list and import refuse it
		if err == nil {
			ds, err = run.draftOne(ctx, f, filepath.Join(dir, strconv.Itoa(i)), taken)
		}
		if err != nil {
			d.Failed = append(d.Failed, Failed{Source: f.Rel, Error: err.Error()})
			errs = append(errs, fmt.Errorf("%s: %w", req.where(f), err))
			continue
		}
		ds.Warnings = api.NonNil(append(slices.Clone(sel.src.Warnings), ds.Warnings...))
		d.Skills = append(d.Skills, *ds)
	}
	if len(d.Skills) == 0 {
		if len(errs) == 1 {
			return nil, errs[0]
		}
		return nil, fmt.Errorf("no skill of %q can be installed: %w", req.display(), errors.Join(errs...))
	}
	if err := writeDraft(dir, d, registered(actor)); err != nil {
		return nil, err
	}
	keep = true
	c.log.Info("import prepared", "draft", d.ID, "source", req.display(), "skills", len(d.Skills))
	return d, nil
}

// draftOne stages one skill into dst and says where it would go.
// Its slug joins taken.
func (r *importRun) draftOne(ctx context.Context, f skillsource.Found, dst string, taken map[string]bool) (*DraftSkill, error) {
	st, err := r.stage(f, dst)
	if err != nil {
		return nil, err
	}
	if err := st.hashTree(); err != nil {
		return nil, err
	}
	if err := st.settleSlug(ctx, taken); err != nil {
		return nil, err
	}
	taken[st.slug] = true
	return &DraftSkill{Slug: st.slug, Name: skills.DisplayName(f.Plugin, st.m.Name), Description: st.m.Description,
		Warnings: api.NonNil(st.warnings), Folder: f.Name, Rel: f.Rel, Version: st.hash,
		Plugin: f.Plugin, Want: f.Want}, nil
}

// draftRecord is a draft as its folder keeps it: the draft, and when its
// creator was registered, so that a user registered later under the same
// uid (the creator deleted meanwhile) does not take it for theirs.
type draftRecord struct {
	*Draft
	CreatorSince int64 `json:"creator_since,omitempty"`
}

// registered is when u was registered, in unix nanoseconds; 0 for a user
// registered before the index recorded it.
func registered(u skills.User) int64 {
	if u.CreatedAt.IsZero() {
		return 0
	}
	return u.CreatedAt.UnixNano()
}

func writeDraft(dir string, d *Draft, creatorSince int64) error {
	b, err := json.MarshalIndent(draftRecord{Draft: d, CreatorSince: creatorSince}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "draft.json.tmp"), b, 0o600); err != nil {
		return fmt.Errorf("write draft: %w", err)
	}
	return os.Rename(filepath.Join(dir, "draft.json.tmp"), filepath.Join(dir, "draft.json"))
}

// loadDraft reads a draft the actor may act on: their own, or any for a
// superadmin. A draft whose creator was deleted is no one's, also when a
// user of that uid was registered since (on another host sharing the index,
// the delete could not remove it): it is answered as not found, and swept.
func (c *Catalog) loadDraft(ctx context.Context, actor skills.User, id string) (*Draft, string, error) {
	dir, err := c.draftPath(id)
	if err != nil {
		return nil, "", err
	}
	b, err := skills.ReadRegular(filepath.Join(dir, "draft.json"), "draft.json", maxDraftBytes, false)
	if err != nil {
		return nil, "", fmt.Errorf("draft %q: %w", id, skills.ErrNotFound)
	}
	var d Draft
	rec := draftRecord{Draft: &d}
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, "", fmt.Errorf("draft %q: %v: %w", id, err, skills.ErrInvalid)
	}
	if d.Creator != actor.UID && actor.Role != skills.RoleSuperadmin {
		return nil, "", fmt.Errorf("draft %q: %w", id, skills.ErrNotFound) // another user's draft is not disclosed
	}
	if c.now().After(d.ExpiresAt) {
		skills.RemoveTree(dir)
		return nil, "", fmt.Errorf("draft %q expired at %s: prepare it again: %w", id, d.ExpiresAt.Format(time.RFC3339), skills.ErrNotFound)
	}
	switch creator, err := c.db.User(ctx, d.Creator); {
	case errors.Is(err, skills.ErrNotFound), err == nil && registered(creator) != rec.CreatorSince:
		skills.RemoveTree(dir)
		return nil, "", fmt.Errorf("draft %q: %w", id, skills.ErrNotFound)
	case err != nil:
		return nil, "", err
	}
	return &d, dir, nil
}

// Confirm installs a draft with the share scope chosen now (nil: the
// default for the creator) and removes the draft.
func (c *Catalog) Confirm(ctx context.Context, as, id string, share *skills.Share) (*ImportResult, error) {
	res := &ImportResult{Installed: []Installed{}, Failed: []Failed{}}
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return res, err
	}
	if share != nil {
		sh, err := policy.NormalizeShare(*share)
		if err != nil {
			return res, err
		}
		share = &sh
	}
	unlock, err := c.sharedLock()
	if err != nil {
		return res, err
	}
	defer unlock()
	d, dir, err := c.loadDraft(ctx, actor, id)
	if err != nil {
		return res, err
	}
	installer, err := c.Actor(ctx, d.Creator)
	if err != nil {
		return res, err
	}
	req := ImportRequest{Source: d.Source, As: d.Creator, Share: share, Replace: d.Replace, Builtin: d.Builtin, Agents: d.Agents}
	src := &source{Tree: skillsource.Tree{Key: d.Key, Type: d.SourceType, Ref: d.Ref, Commit: d.Commit, Worktree: d.Worktree}}
	sel := &selection{src: src}
	for i, ds := range d.Skills {
		sel.found = append(sel.found, skillsource.Found{
			Candidate: skillsource.Candidate{Name: ds.Folder, Rel: ds.Rel, Dir: filepath.Join(dir, strconv.Itoa(i)), Plugin: ds.Plugin},
			Want:      ds.Want})
	}
	err = c.install(ctx, installer, req, sel, res)
	if err == nil {
		skills.RemoveTree(dir)
		c.log.Info("import confirmed", "draft", id, "installed", len(res.Installed))
	}
	return res, err
}

// Discard drops a draft.
func (c *Catalog) Discard(ctx context.Context, as, id string) error {
	actor, err := c.Actor(ctx, as)
	if err != nil {
		return err
	}
	_, dir, err := c.loadDraft(ctx, actor, id)
	if err != nil {
		return err
	}
	skills.RemoveTree(dir)
	return nil
}

// sweepDrafts removes expired drafts (and any without a readable record).
func (c *Catalog) sweepDrafts() {
	c.removeDrafts(func(d *Draft) bool { return d == nil || c.now().After(d.ExpiresAt) })
}

// removeDrafts removes the drafts of this data directory for which drop
// says so; it gets nil for one without a readable record. It returns how
// many it removed.
func (c *Catalog) removeDrafts(drop func(*Draft) bool) int {
	root := filepath.Join(c.home, draftsDir)
	ents, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		var d *Draft
		b, err := skills.ReadRegular(filepath.Join(dir, "draft.json"), "draft.json", maxDraftBytes, false)
		if err == nil {
			d = &Draft{}
			if json.Unmarshal(b, d) != nil {
				d = nil
			}
		}
		if drop(d) {
			skills.RemoveTree(dir)
			n++
		}
	}
	return n
}

// Upload kinds: what the bytes of PrepareUpload are.
const (
	UploadZip      = "zip"      // a ZIP archive of one or more skills
	UploadManifest = "manifest" // a lone SKILL.md
)

// PrepareUpload prepares a draft from bytes a front end sends rather than a
// path the daemon reads: a ZIP archive or a lone SKILL.md, streamed into the
// data directory's temporary area and cut at the import limits as it
// arrives (the whole archive at the total-bytes limit, a SKILL.md at the
// manifest limit). name, a file name, stands for the upload in messages and
// provenance: uploading the same name again makes new versions of the same
// skills. req says which skills to take and how, as for Prepare; its
// Source is ignored.
func (c *Catalog) PrepareUpload(ctx context.Context, req ImportRequest, kind, name string, body io.Reader) (*Draft, error) {
	var d *Draft
	err := c.received(ctx, req, kind, name, body, func(actor skills.User, req ImportRequest) (err error) {
		d, err = c.prepare(ctx, actor, req)
		return err
	})
	return d, err
}

// Upload is a skill sent as bytes: a ZIP or a SKILL.md (Kind UploadZip or
// UploadManifest), named Name (see PrepareUpload).
type Upload struct {
	Kind string
	Name string
	Body io.Reader
}

// ImportUpload imports an upload (see PrepareUpload) at once, without a
// draft.
func (c *Catalog) ImportUpload(ctx context.Context, req ImportRequest, up Upload) (*ImportResult, error) {
	res := &ImportResult{Installed: []Installed{}, Failed: []Failed{}}
	err := c.received(ctx, req, up.Kind, up.Name, up.Body, func(actor skills.User, req ImportRequest) error {
		return c.importAs(ctx, actor, req, res)
	})
	return res, err
}

// received receives an upload into the temporary area and runs then on
// it, the request's source its copy there.
func (c *Catalog) received(ctx context.Context, req ImportRequest, kind, name string, body io.Reader, then func(skills.User, ImportRequest) error) error {
	var file string
	var max int64
	switch kind {
	case UploadZip:
		file, max = "upload.zip", c.lim.MaxTotalBytes
	case UploadManifest:
		file, max = skills.ManifestName, c.lim.MaxManifest
	default:
		return fmt.Errorf("upload kind %q: want %s or %s: %w", kind, UploadZip, UploadManifest, skills.ErrInvalid)
	}
	if name == "" {
		name = file
	}
	if err := checkUploadName(name); err != nil {
		return err
	}
	return c.copied(ctx, req, func(work string) (string, string, error) {
		path := filepath.Join(work, file)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", "", err
		}
		n, err := io.Copy(f, io.LimitReader(body, max+1))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", "", fmt.Errorf("receive upload %s: %w", name, err)
		}
		if n > max {
			return "", "", fmt.Errorf("upload %s: %w", name, &skills.LimitError{Limit: limitFor(kind), Value: n, Max: max, Path: name})
		}
		return path, "upload:" + name, nil
	}, func(actor skills.User, req ImportRequest) error {
		req.Display = name
		return then(actor, req)
	})
}

// ImportCopy imports, at once, a source the caller copies into the
// catalog's temporary area itself (a folder, a ZIP or a SKILL.md read where
// the daemon may not read as itself: a sandbox's view). fill gets an empty
// folder there and returns the path of what it copied and the provenance
// key the skills get; display names the source in messages. The copy is
// removed when the import is done. Builtins are never registered so.
func (c *Catalog) ImportCopy(ctx context.Context, req ImportRequest, display string, fill func(dir string) (path, origin string, err error)) (*ImportResult, error) {
	res := &ImportResult{Installed: []Installed{}, Failed: []Failed{}}
	err := c.copied(ctx, req, fill, func(actor skills.User, req ImportRequest) error {
		req.Display = display
		return c.importAs(ctx, actor, req, res)
	})
	return res, err
}

// copied has fill copy a source into a folder of the temporary area, held
// from its first byte (no sweep takes it away), and runs then on it as the
// request's source: the catalog's own copy, an upload.
func (c *Catalog) copied(ctx context.Context, req ImportRequest, fill func(dir string) (string, string, error), then func(skills.User, ImportRequest) error) error {
	actor, err := c.Actor(ctx, req.As)
	if err != nil {
		return err
	}
	req.Builtin = false // uploads never register builtins
	unlock, err := c.sharedLock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.MkdirAll(filepath.Join(c.home, tmpDir), 0o700); err != nil {
		return fmt.Errorf("create temporary directory: %w", err)
	}
	work, err := os.MkdirTemp(filepath.Join(c.home, tmpDir), "upload-")
	if err != nil {
		return fmt.Errorf("create temporary directory: %w", err)
	}
	defer skills.RemoveTree(work)
	path, origin, err := fill(work)
	if err != nil {
		return err
	}
	req.Source, req.Origin, req.Agents, req.upload = path, origin, false, true
	return then(actor, req)
}

func limitFor(kind string) string {
	if kind == UploadZip {
		return skills.LimitTotalBytes
	}
	return skills.LimitManifest
}

// checkUploadName accepts a plain file name.
func checkUploadName(name string) error {
	clean, err := skills.CleanRelPath(name)
	if err != nil || strings.Contains(clean, "/") || strings.HasPrefix(clean, ".") {
		return fmt.Errorf("upload name %q: want a plain file name: %w", name, skills.ErrInvalid)
	}
	return nil
}
