package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/sandbox"
	"skillfs/cmd/skillfs/internal/server"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/git"
	skillsource "skillfs/skills/source"
)

// Quotas bound what each user's sessions may install (see
// InstallForSession); a field zero or less is its default.
type Quotas struct {
	Skills       int   // skills a user created, at most
	Bytes        int64 // bytes of every version of those skills, at most
	InstallsHour int   // installs a user's sessions ask for in any hour, at most
}

// SandboxReadTimeout bounds the reading of a path in a session's sandbox.
// A variable so tests can shorten it.
var SandboxReadTimeout = 2 * time.Minute

// The default quotas.
const (
	DefaultQuotaSkills       = 50
	DefaultQuotaBytes        = 200 << 20
	DefaultQuotaInstallsHour = 30
)

func (q Quotas) withDefaults() Quotas {
	if q.Skills <= 0 {
		q.Skills = DefaultQuotaSkills
	}
	if q.Bytes <= 0 {
		q.Bytes = DefaultQuotaBytes
	}
	if q.InstallsHour <= 0 {
		q.InstallsHour = DefaultQuotaInstallsHour
	}
	return q
}

// QuotaError is an install refused by one of its user's quotas. It is a
// limit (skills.ErrLimit): the API answers 400 with code "invalid".
type QuotaError struct {
	User  string
	Quota string // "skills", "bytes" or "installs per hour"
	Value int64  // what the install would make it
	Max   int64
	Retry time.Time // for the hourly rate: when an install is counted no more
}

func (e *QuotaError) Error() string {
	msg := fmt.Sprintf("user %q is at the quota of %s: %d > %d", e.User, e.Quota, e.Value, e.Max)
	if !e.Retry.IsZero() {
		msg += fmt.Sprintf("; the next install is possible at %s", e.Retry.Format(time.RFC3339))
	}
	return msg
}

func (e *QuotaError) Unwrap() error { return skills.ErrLimit }

// outcomeQuota is how the install records name a refusal for a quota, which
// the hourly rate does not count.
const outcomeQuota = "quota"

// InstallForSession installs a skill for session id, as its user: from a
// path as the session's sandbox sees it (req.Path: read in the mount
// namespace of the process the session is bound into, with that process's
// own credentials, see package sandbox), from a remote git source under
// the drafts' rules (req.Source, req.Ref), or from up. The skill is private
// to the user (user:UID), gets the usual slug rules and builtin
// protection, and joins the session's requested skills (unless it asked
// for all): at its next refresh, or at once with req.Now. The user's quotas
// apply; every install is recorded, whatever its outcome. A sub-agent's
// session may not install (ErrPermission).
func (d *Daemon) InstallForSession(ctx context.Context, id string, req api.InstallRequest, up *catalog.Upload) (*api.SessionInstall, error) {
	s, err := d.servedSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.IsChild() {
		return nil, fmt.Errorf("session %s is a sub-agent's: it may not install skills: %w", id, skills.ErrPermission)
	}
	rec := &skills.Install{User: s.UID, Session: id}
	n := 0
	for _, given := range []bool{req.Path != "", req.Source != "", up != nil} {
		if given {
			n++
		}
	}
	switch {
	case up != nil:
		rec.Kind, rec.Source = skills.InstallUpload, cmp.Or(up.Name, "upload")
	case req.Path != "":
		rec.Kind, rec.Source = skills.InstallPath, req.Path
	default:
		// As shown everywhere: credentials in the URL hidden.
		rec.Kind, rec.Source = skills.InstallGit, git.ParseSpec(req.Source).String()
	}
	if n != 1 {
		return nil, fmt.Errorf("install for session %s: give one of a path, a git source or the skill as the body: %w", id, skills.ErrInvalid)
	}
	if up == nil && req.Ref != "" && req.Source == "" {
		return nil, fmt.Errorf("install for session %s: a ref goes with a git source: %w", id, skills.ErrInvalid)
	}
	done := d.installs.Lock(s.UID)
	defer done()
	in, err := d.installFor(ctx, s, req, up)
	d.recordInstall(rec, in, err)
	if err != nil {
		return nil, err
	}
	out := &api.SessionInstall{Slug: in.Slug, Name: in.Name, Version: in.Version, Warnings: api.NonNil(in.Warnings),
		RenamedFrom: in.RenamedFrom}
	if out.Joined, err = d.join(ctx, id, in.Slug, req.Now); err != nil {
		return out, fmt.Errorf("skill %s installed, but not joined to session %s: %w", in.Slug, id, err)
	}
	d.log.Info("skill installed for a session", "session", id, "user", s.UID, "kind", rec.Kind, "source", rec.Source,
		"slug", in.Slug, "version", in.Version, "joined", out.Joined)
	return out, nil
}

// recordInstall records an install's outcome. The record outlives the
// request: a client gone does not leave an install unrecorded.
func (d *Daemon) recordInstall(rec *skills.Install, in *catalog.Installed, err error) {
	rec.At = time.Now().UTC()
	rec.Outcome = skills.InstallOK
	var qe *QuotaError
	switch {
	case errors.As(err, &qe):
		rec.Outcome, rec.Error = outcomeQuota, err.Error()
	case err != nil:
		k, _ := skills.KindOf(err)
		rec.Outcome, rec.Error = k.Name, skills.Message(err)
	default:
		rec.Slug, rec.Version = in.Slug, in.Version
	}
	if d.metrics != nil {
		d.metrics.installs.WithLabelValues(rec.Kind, rec.Outcome).Inc()
	}
	if rerr := d.db.RecordInstall(context.Background(), rec); rerr != nil {
		d.log.Error("record an install", "session", rec.Session, "outcome", rec.Outcome, "err", rerr)
	}
}

// installFor reads the source of an install and imports its one skill.
func (d *Daemon) installFor(ctx context.Context, s *skills.Session, req api.InstallRequest, up *catalog.Upload) (*catalog.Installed, error) {
	q := d.opts.Quotas.withDefaults()
	now := time.Now().UTC()
	if times, err := d.db.InstallTimes(ctx, s.UID, now.Add(-time.Hour), outcomeQuota); err != nil {
		return nil, err
	} else if n := len(times); n >= q.InstallsHour {
		// Possible again when the install that is one too many for the
		// rate is an hour old.
		return nil, &QuotaError{User: s.UID, Quota: "installs per hour", Value: int64(n + 1), Max: int64(q.InstallsHour),
			Retry: times[n-q.InstallsHour].Add(time.Hour)}
	}
	ir := catalog.ImportRequest{As: s.UID, Share: &skills.Share{Read: policy.DefaultShare(s.UID).Read},
		Vet: d.vetInstall(s.UID, q)}
	var res *catalog.ImportResult
	var copied *sandbox.Copy
	var err error
	switch {
	case up != nil:
		res, err = d.cat.ImportUpload(ctx, ir, *up)
	case req.Path != "":
		var b skills.Bind
		if b, err = d.sandboxOf(ctx, s.ID); err != nil {
			return nil, err
		}
		// Bounded: a filesystem in the sandbox that hangs must not hold
		// the user's installs for longer; and the read holds its place
		// in the gate until it truly ends, however long after that.
		release, gerr := d.reads.enter(ctx, s.UID)
		if gerr != nil {
			return nil, gerr
		}
		rctx, cancel := context.WithTimeout(ctx, SandboxReadTimeout)
		defer cancel()
		read := sandbox.Request{PID: b.PID, NS: b.NS, Path: req.Path, Limits: d.cat.Limits(), AllowRoot: d.opts.InstallAsRoot,
			Done: release}
		started := false
		defer func() {
			if !started {
				release() // ImportCopy refused before it asked for the copy
			}
		}()
		res, err = d.cat.ImportCopy(ctx, ir, "sandbox:"+req.Path, func(dir string) (string, string, error) {
			started = true
			read.Dst = dir
			c, err := sandbox.Read(rctx, read)
			if err != nil {
				return "", "", err
			}
			copied = c
			return c.Path, "sandbox:" + req.Path, nil
		})
	default:
		// Read as the drafts' git sources are (API), and never from this
		// machine, whoever the user is (RemoteOnly), nor from a host of
		// the daemon's network unless the operator allows it (Remote).
		// A session is told no more of git's failure than its kind; the
		// operator finds git's own words in the log.
		ir.Source, ir.Ref, ir.API, ir.RemoteOnly = skillsource.ExpandNameNoWorkDir(req.Source), req.Ref, true, true
		p, _ := server.PrincipalOf(ctx)
		ir.Remote = &git.RemotePolicy{Hosts: d.opts.InstallGitHosts, Plain: p.Role == server.RoleSession}
		res, err = d.cat.Import(ctx, ir)
		var ge *git.Error
		if errors.As(err, &ge) && ge.Detail != "" {
			d.log.Info("a session's install from git failed", "session", s.ID, "user", s.UID, "source", git.ParseSpec(req.Source).String(),
				"reason", ge.Reason, "git", ge.Detail)
		}
	}
	if err != nil {
		return nil, err
	}
	if len(res.Installed) != 1 {
		return nil, fmt.Errorf("the source holds %d skills: install one at a time: %w", len(res.Installed), skills.ErrAmbiguous)
	}
	in := res.Installed[0]
	if copied != nil {
		in.Warnings = append(slices.Clone(copied.Warnings), in.Warnings...)
	}
	return &in, nil
}

// vetInstall checks, under the publish lock, what publishing a skill of
// a session's install would make of its user's quotas, and that a skill it
// updates is one the user keeps to themselves: a session's install never
// changes what other users read.
func (d *Daemon) vetInstall(uid string, q Quotas) func(context.Context, string, *skills.Skill, int64) error {
	return func(ctx context.Context, slug string, existing *skills.Skill, bytes int64) error {
		if existing != nil && !privateTo(existing, uid) {
			return fmt.Errorf("skill %s is read by others than %s (%s): a session's install may not change it: %w",
				slug, uid, policy.FormatScope(existing.Share.Read), skills.ErrPermission)
		}
		u, err := d.db.UserUsage(ctx, uid)
		if err != nil {
			return err
		}
		if existing == nil && u.Skills+1 > q.Skills {
			return &QuotaError{User: uid, Quota: "skills", Value: int64(u.Skills + 1), Max: int64(q.Skills)}
		}
		if u.Bytes+bytes > q.Bytes {
			return &QuotaError{User: uid, Quota: "bytes", Value: u.Bytes + bytes, Max: q.Bytes}
		}
		return nil
	}
}

// privateTo says whether sk is read by user uid alone.
func privateTo(sk *skills.Skill, uid string) bool {
	r := sk.Share.Read
	return r.Kind == skills.ScopeUser && len(r.IDs) == 1 && r.IDs[0] == uid
}

// sandboxOf is the bind of session id into a sandbox, whose process a path
// is read as. A session bound into no sandbox (or only into the daemon's
// own namespace, which is read as nobody) has none; one bound into several
// namespaces has no one sandbox to read in.
func (d *Daemon) sandboxOf(ctx context.Context, id string) (skills.Bind, error) {
	binds, err := d.db.Binds(ctx, id)
	if err != nil {
		return skills.Bind{}, err
	}
	var found []skills.Bind
	for _, b := range binds {
		if b.PID > 0 && !slices.ContainsFunc(found, func(f skills.Bind) bool { return f.NS == b.NS }) {
			found = append(found, b)
		}
	}
	switch len(found) {
	case 0:
		return skills.Bind{}, fmt.Errorf("session %s is bound into no sandbox: a path is read as the sandbox sees it; send the skill itself or a git source: %w",
			id, skills.ErrInvalid)
	case 1:
		return found[0], nil
	}
	ns := make([]string, len(found))
	for i, b := range found {
		ns[i] = fmt.Sprintf("pid %d (%s)", b.PID, b.NS)
	}
	return skills.Bind{}, fmt.Errorf("session %s is bound into %d sandboxes (%s): no one view to read a path in: %w",
		id, len(found), strings.Join(ns, ", "), skills.ErrAmbiguous)
}

// join adds slug to session id's requested skills (unless it asked for
// all, which takes it in anyway), with an installed event, and refreshes
// the session at once when now is set. It says whether the skill is in the
// session's readable set on return.
func (d *Daemon) join(ctx context.Context, id, slug string, now bool) (bool, error) {
	ctx = context.WithoutCancel(ctx) // installed: the session learns of it whatever the client does
	err := func() error {
		d.mu.Lock()
		defer d.mu.Unlock()
		s, err := d.servedSession(ctx, id)
		if err != nil {
			return err
		}
		next := *s
		if !s.All && !slices.ContainsFunc(s.Requested, func(r string) bool { return r == slug || strings.HasPrefix(r, slug+"@") }) {
			next.Requested = append(slices.Clone(s.Requested), slug)
		}
		return d.events.Record(func(evs ...*skills.Event) error { return d.db.SetSkills(ctx, &next, evs...) },
			api.Event{Type: skills.EventInstalled, Session: id, Slug: slug, At: time.Now().UTC()})
	}()
	if err != nil || !now {
		return false, err
	}
	info, err := d.Refresh(ctx, id)
	if err != nil {
		return false, err
	}
	return slices.Contains(info.Readable, slug), nil
}
