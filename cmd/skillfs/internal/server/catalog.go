package server

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/diff"
	skillsource "skillfs/skills/source"
	"skillfs/skills/store"
)

// catalogRoutes are the management calls of the catalog: the CLI's skill
// commands for front ends that talk to the daemon. Changes that can revoke
// reach every session before the call returns.
func (a *API) catalogRoutes(mux *Mux) {
	mux.HandleFunc("GET /v1/skills", a.listSkills)
	mux.HandleFunc("GET /v1/skills/{slug}", a.showSkill)
	mux.HandleFunc("GET /v1/skills/{slug}/export", a.export)
	mux.HandleFunc("GET /v1/skills/{slug}/versions", a.versions)
	mux.HandleFunc("GET /v1/skills/{slug}/diff", a.diff)
	mux.HandleFunc("POST /v1/skills/{slug}/rollback", a.rollback)
	mux.HandleFunc("POST /v1/skills/{slug}/update", a.updateOne)
	mux.HandleFunc("POST /v1/skills/update", a.updateMany)
	mux.HandleFunc("POST /v1/skills/{slug}/enable", a.enable)
	mux.HandleFunc("POST /v1/skills/{slug}/disable", a.disable)
	mux.HandleFunc("DELETE /v1/skills/{slug}", a.deleteSkill)
	mux.HandleFunc("PUT /v1/skills/{slug}/deps", a.setDeps)
	mux.HandleFunc("PUT /v1/skills/{slug}/share", a.share)
	mux.HandleFunc("DELETE /v1/users/{uid}", a.deleteUser)
	mux.HandleFunc("PUT /v1/skills/{slug}/files/{path...}", a.putFile)
	mux.HandleFunc("DELETE /v1/skills/{slug}/files/{path...}", a.deleteFile)
	// The two-step install: prepare a source, then confirm with a share
	// scope, or discard.
	mux.Handle("POST /v1/drafts", a.Metrics.importStage("prepare", a.prepare))
	mux.Handle("POST /v1/drafts/{id}/confirm", a.Metrics.importStage("confirm", a.confirm))
	mux.HandleFunc("DELETE /v1/drafts/{id}", a.discard)
}

func (a *API) listSkills(w http.ResponseWriter, r *http.Request) {
	list, err := a.Skills.List(r.Context(), actingAs(r))
	out := make([]catalog.Summary, len(list))
	for i, s := range list {
		out[i] = catalog.Summarize(s)
	}
	reply(w, out, err)
}

// skillDetail is the answer of GET /v1/skills/{slug}: the skill's summary
// with its versions.
type skillDetail struct {
	catalog.Summary
	Versions []*skills.Version `json:"versions"`
}

func (a *API) showSkill(w http.ResponseWriter, r *http.Request) {
	det, err := a.Skills.Show(r.Context(), actingAs(r), r.PathValue("slug"))
	if err != nil {
		writeErr(w, err)
		return
	}
	reply(w, skillDetail{catalog.Summarize(det.Skill), det.Versions}, nil)
}

// export answers a version of a skill as a ZIP archive, written as it is
// read. A failure before the archive has begun is answered in the error
// shape; once it has begun, it is logged and the answer cut short, so the
// client gets no archive that looks whole.
func (a *API) export(w http.ResponseWriter, r *http.Request) {
	slug := r.PathValue("slug")
	dir, err := a.Skills.ExportPath(r.Context(), actingAs(r), slug, r.URL.Query().Get("version"))
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/zip")
	cw := &countingWriter{w: w}
	if err := store.WriteZip(cw, dir, slug+"/"); err != nil {
		if cw.n == 0 {
			writeErr(w, err)
			return
		}
		if r.Context().Err() == nil {
			a.Log.Warn("export cut short", "slug", slug, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (a *API) versions(w http.ResponseWriter, r *http.Request) {
	vs, err := a.Skills.Versions(r.Context(), actingAs(r), r.PathValue("slug"))
	reply(w, vs, err)
}

// diff answers the diff of two versions as the files are compared: the
// answer holds one file's change at a time, never the whole (see
// diff.JSONWriter). A comparison the daemon cannot grant its memory soon
// is answered 503 busy with Retry-After (the daemon's diff gate). A failure
// once the answer has begun (a file of the store gone, the client gone)
// cuts it short: the client gets no JSON that looks whole.
func (a *API) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var j *diff.JSONWriter
	st, err := a.Skills.DiffEach(r.Context(), actingAs(r), r.PathValue("slug"), q.Get("a"), q.Get("b"), true,
		func(head *catalog.Diff) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			j = diff.NewJSONWriter(w)
			return j.Start(head.Slug, head.From, head.To)
		},
		func(fc *diff.FileChange) error { return j.File(fc) })
	if err == nil {
		err = j.End(st)
	}
	switch {
	case err == nil:
	case j == nil:
		writeErr(w, err)
	default:
		if r.Context().Err() == nil {
			a.Log.Warn("diff cut short", "slug", r.PathValue("slug"), "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

func (a *API) rollback(w http.ResponseWriter, r *http.Request) {
	var req api.RollbackRequest
	if !readJSON(w, r, &req) {
		return
	}
	a.changed(w, r, func(ctx context.Context) (any, error) {
		return a.Skills.Rollback(ctx, actingAs(r), r.PathValue("slug"), req.Version)
	})
}

func (a *API) updateOne(w http.ResponseWriter, r *http.Request) {
	a.update(w, r, []string{r.PathValue("slug")})
}

func (a *API) updateMany(w http.ResponseWriter, r *http.Request) { a.update(w, r, nil) }

// update updates the skills slugs, or those the request names when slugs
// is nil.
func (a *API) update(w http.ResponseWriter, r *http.Request, slugs []string) {
	var req api.UpdateRequest
	if !readJSON(w, r, &req) {
		return
	}
	if slugs == nil {
		slugs = req.Skills
	} else if len(req.Skills) > 0 || req.All {
		writeErr(w, fmt.Errorf("this route updates %s: give no skills or all: %w", slugs[0], skills.ErrInvalid))
		return
	}
	ref, err := catalog.UpdateRef(req.Ref, req.Tag)
	if err != nil {
		writeErr(w, err)
		return
	}
	a.changed(w, r, func(ctx context.Context) (any, error) {
		return a.Skills.Update(ctx, catalog.UpdateRequest{As: actingAs(r), Slugs: slugs, All: req.All, DryRun: req.DryRun, Force: req.Force, Ref: ref, API: true})
	})
}

func (a *API) enable(w http.ResponseWriter, r *http.Request)  { a.setEnabled(w, r, true) }
func (a *API) disable(w http.ResponseWriter, r *http.Request) { a.setEnabled(w, r, false) }

func (a *API) setEnabled(w http.ResponseWriter, r *http.Request, enabled bool) {
	a.changed(w, r, func(ctx context.Context) (any, error) {
		s, err := a.Skills.SetEnabled(ctx, actingAs(r), r.PathValue("slug"), enabled)
		return summarize(s), err
	})
}

func (a *API) deleteSkill(w http.ResponseWriter, r *http.Request) {
	a.changed(w, r, func(ctx context.Context) (any, error) {
		return api.Deleted{Deleted: r.PathValue("slug")}, a.Skills.Delete(ctx, actingAs(r), r.PathValue("slug"))
	})
}

func (a *API) setDeps(w http.ResponseWriter, r *http.Request) {
	var req api.DepsRequest
	if !readJSON(w, r, &req) {
		return
	}
	a.changed(w, r, func(ctx context.Context) (any, error) {
		s, err := a.Skills.Deps(ctx, actingAs(r), r.PathValue("slug"), req.Skills, req.Tools, req.MCPs)
		return summarize(s), err
	})
}

func (a *API) share(w http.ResponseWriter, r *http.Request) {
	var req api.ShareRequest
	if !readJSON(w, r, &req) {
		return
	}
	sh, err := parseShare(req.Read, req.Manage)
	if err != nil {
		writeErr(w, err)
		return
	}
	a.changed(w, r, func(ctx context.Context) (any, error) {
		s, err := a.Skills.Share(ctx, actingAs(r), r.PathValue("slug"), *sh)
		return summarize(s), err
	})
}

func (a *API) deleteUser(w http.ResponseWriter, r *http.Request) {
	var force bool
	switch v := r.URL.Query().Get("force"); v {
	case "", "false":
	case "true":
		force = true
	default:
		writeErr(w, fmt.Errorf("force=%q: want true or false: %w", v, skills.ErrInvalid))
		return
	}
	a.changed(w, r, func(ctx context.Context) (any, error) {
		return a.Sessions.DeleteUser(ctx, actingAs(r), r.PathValue("uid"), r.URL.Query().Get("to"), force)
	})
}

// putFile writes one file of a skill into a new version, streamed from the
// body and cut at the file size limit: never buffered whole.
func (a *API) putFile(w http.ResponseWriter, r *http.Request) {
	in, err := a.Skills.Edit(r.Context(), actingAs(r), r.PathValue("slug"), r.PathValue("path"), r.Body)
	if err != nil {
		w.Header().Set("Connection", "close") // the rest of a refused body is not read
	}
	reply(w, in, err)
}

func (a *API) deleteFile(w http.ResponseWriter, r *http.Request) {
	in, err := a.Skills.Edit(r.Context(), actingAs(r), r.PathValue("slug"), r.PathValue("path"), nil)
	reply(w, in, err)
}

// prepare prepares a draft. The source is the request body (a ZIP or a
// SKILL.md, streamed and cut at the import limits), a remote git URL or
// repository name, or — for admins only — an absolute path on the
// daemon's machine inside one of its import roots.
func (a *API) prepare(w http.ResponseWriter, r *http.Request) {
	if kind := uploadKind(r.Header.Get("Content-Type")); kind != "" {
		q := r.URL.Query()
		dr, err := a.Drafts.PrepareUpload(r.Context(), catalog.ImportRequest{Skills: q["skill"],
			All: q.Get("all") == "true", Replace: q.Get("replace") == "true", As: actingAs(r)}, kind, q.Get("name"), r.Body)
		replyUpload(w, dr, err)
		return
	}
	var req api.DraftRequest
	if !readJSON(w, r, &req) {
		return
	}
	// The API has no working directory: only an absolute path is a
	// path, a name is that repository (nothing is looked up on disk).
	// What it may read on this machine the catalog checks (admins
	// only, inside the import roots) before anything is read.
	req.Source = skillsource.ExpandNameNoWorkDir(req.Source)
	dr, err := a.Drafts.Prepare(r.Context(), catalog.ImportRequest{Source: req.Source, Ref: req.Ref, Path: req.Path,
		Skills: req.Skills, All: req.All, Replace: req.Replace, As: actingAs(r), API: true})
	reply(w, dr, err)
}

func (a *API) confirm(w http.ResponseWriter, r *http.Request) {
	var req api.ConfirmRequest
	if !readJSON(w, r, &req) {
		return
	}
	sh, err := readScope(req.Share)
	if err != nil {
		writeErr(w, err)
		return
	}
	res, err := a.Drafts.Confirm(r.Context(), actingAs(r), r.PathValue("id"), sh)
	reply(w, res, err)
}

func (a *API) discard(w http.ResponseWriter, r *http.Request) {
	err := a.Drafts.Discard(r.Context(), actingAs(r), r.PathValue("id"))
	reply(w, api.Discarded{Discarded: r.PathValue("id")}, err)
}

// changed runs a catalog change and applies it to every session before
// answering.
func (a *API) changed(w http.ResponseWriter, r *http.Request, fn func(context.Context) (any, error)) {
	v, err := fn(r.Context())
	if err == nil {
		err = a.Sessions.Reevaluate(r.Context())
	}
	reply(w, v, err)
}

func summarize(s *skills.Skill) any {
	if s == nil {
		return nil
	}
	return catalog.Summarize(s)
}

func parseShare(read, manage string) (*skills.Share, error) {
	var sh skills.Share
	var err error
	if sh.Read, err = policy.ParseScope(read); err != nil {
		return nil, err
	}
	if manage != "" {
		if sh.Manage, err = policy.ParseScope(manage); err != nil {
			return nil, err
		}
	}
	return &sh, nil
}

// readScope parses the read scope a request gives a new skill; "" (nil)
// keeps the private default.
func readScope(read string) (*skills.Share, error) {
	if read == "" {
		return nil, nil
	}
	return parseShare(read, "")
}

// uploadKind tells from a Content-Type whether a draft request carries the
// skill itself: a ZIP archive or a SKILL.md. "" means a JSON request.
func uploadKind(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	switch mt {
	case "application/zip", "application/x-zip-compressed":
		return catalog.UploadZip
	case "text/markdown", "text/x-markdown", "text/plain":
		return catalog.UploadManifest
	}
	return ""
}
