package daemon

import (
	"context"
	"fmt"
	"mime"
	"net/http"

	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/policy"
	"skillfs/skills"
	"skillfs/skills/diff"
	"skillfs/skills/store"
)

// ActAsHeader names the user a catalog API call acts for; without it the
// call acts as the operator. Whoever can reach the API (the 0600 socket, or
// the token) is trusted to say whom it acts for, as a platform's backend
// does for its users.
const ActAsHeader = "X-Skillfs-As"

// catalogRoutes are the management calls of the catalog: the CLI's skill
// commands for front ends that talk to the daemon. Changes that can revoke
// reach every session before the call returns.
func (d *Daemon) catalogRoutes(mux *apiMux) {
	mux.HandleFunc("GET /v1/skills", func(w http.ResponseWriter, r *http.Request) {
		list, err := d.cat.List(r.Context(), actingAs(r))
		out := make([]catalog.Summary, len(list))
		for i, s := range list {
			out[i] = catalog.Summarize(s)
		}
		reply(w, out, err)
	})
	mux.HandleFunc("GET /v1/skills/{slug}", func(w http.ResponseWriter, r *http.Request) {
		det, err := d.cat.Show(r.Context(), actingAs(r), r.PathValue("slug"))
		if err != nil {
			writeErr(w, err)
			return
		}
		reply(w, struct {
			catalog.Summary
			Versions []*skills.Version `json:"versions"`
		}{catalog.Summarize(det.Skill), det.Versions}, nil)
	})
	mux.HandleFunc("GET /v1/skills/{slug}/export", func(w http.ResponseWriter, r *http.Request) {
		slug := r.PathValue("slug")
		dir, err := d.cat.ExportPath(r.Context(), actingAs(r), slug, r.URL.Query().Get("version"))
		if err != nil {
			writeErr(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/zip")
		store.WriteZip(w, dir, slug+"/")
	})
	mux.HandleFunc("GET /v1/skills/{slug}/versions", func(w http.ResponseWriter, r *http.Request) {
		vs, err := d.cat.Versions(r.Context(), actingAs(r), r.PathValue("slug"))
		reply(w, vs, err)
	})
	mux.HandleFunc("GET /v1/skills/{slug}/diff", d.diff)
	mux.HandleFunc("POST /v1/skills/{slug}/rollback", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Version string `json:"version"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		d.changed(w, r, func(ctx context.Context) (any, error) {
			return d.cat.Rollback(ctx, actingAs(r), r.PathValue("slug"), req.Version)
		})
	})
	update := func(w http.ResponseWriter, r *http.Request, slugs []string) {
		var req struct {
			Skills []string `json:"skills"`
			All    bool     `json:"all"`
			DryRun bool     `json:"dry_run"`
			Force  bool     `json:"force"`
			Ref    string   `json:"ref"`
			Tag    string   `json:"tag"`
		}
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
		d.changed(w, r, func(ctx context.Context) (any, error) {
			return d.cat.Update(ctx, catalog.UpdateRequest{As: actingAs(r), Slugs: slugs, All: req.All, DryRun: req.DryRun, Force: req.Force, Ref: ref, API: true})
		})
	}
	mux.HandleFunc("POST /v1/skills/{slug}/update", func(w http.ResponseWriter, r *http.Request) {
		update(w, r, []string{r.PathValue("slug")})
	})
	mux.HandleFunc("POST /v1/skills/update", func(w http.ResponseWriter, r *http.Request) { update(w, r, nil) })
	mux.HandleFunc("POST /v1/skills/{slug}/enable", func(w http.ResponseWriter, r *http.Request) {
		d.changed(w, r, func(ctx context.Context) (any, error) {
			s, err := d.cat.SetEnabled(ctx, actingAs(r), r.PathValue("slug"), true)
			return summarize(s), err
		})
	})
	mux.HandleFunc("POST /v1/skills/{slug}/disable", func(w http.ResponseWriter, r *http.Request) {
		d.changed(w, r, func(ctx context.Context) (any, error) {
			s, err := d.cat.SetEnabled(ctx, actingAs(r), r.PathValue("slug"), false)
			return summarize(s), err
		})
	})
	mux.HandleFunc("DELETE /v1/skills/{slug}", func(w http.ResponseWriter, r *http.Request) {
		d.changed(w, r, func(ctx context.Context) (any, error) {
			return map[string]string{"deleted": r.PathValue("slug")}, d.cat.Delete(ctx, actingAs(r), r.PathValue("slug"))
		})
	})
	mux.HandleFunc("PUT /v1/skills/{slug}/deps", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Skills []string `json:"skill_dependencies"`
			Tools  []string `json:"tool_dependencies"`
			MCPs   []string `json:"mcp_dependencies"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		d.changed(w, r, func(ctx context.Context) (any, error) {
			s, err := d.cat.Deps(ctx, actingAs(r), r.PathValue("slug"), req.Skills, req.Tools, req.MCPs)
			return summarize(s), err
		})
	})
	mux.HandleFunc("PUT /v1/skills/{slug}/share", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Read   string `json:"read"`
			Manage string `json:"manage"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		sh, err := parseShare(req.Read, req.Manage)
		if err != nil {
			writeErr(w, err)
			return
		}
		d.changed(w, r, func(ctx context.Context) (any, error) {
			s, err := d.cat.Share(ctx, actingAs(r), r.PathValue("slug"), *sh)
			return summarize(s), err
		})
	})
	mux.HandleFunc("DELETE /v1/users/{uid}", func(w http.ResponseWriter, r *http.Request) {
		var force bool
		switch v := r.URL.Query().Get("force"); v {
		case "", "false":
		case "true":
			force = true
		default:
			writeErr(w, fmt.Errorf("force=%q: want true or false: %w", v, skills.ErrInvalid))
			return
		}
		d.changed(w, r, func(ctx context.Context) (any, error) {
			return d.DeleteUser(ctx, actingAs(r), r.PathValue("uid"), r.URL.Query().Get("to"), force)
		})
	})
	mux.HandleFunc("PUT /v1/skills/{slug}/files/{path...}", func(w http.ResponseWriter, r *http.Request) {
		// Streamed into the new version and cut at the file size limit:
		// never buffered whole.
		in, err := d.cat.Edit(r.Context(), actingAs(r), r.PathValue("slug"), r.PathValue("path"), r.Body)
		if err != nil {
			w.Header().Set("Connection", "close") // the rest of a refused body is not read
		}
		reply(w, in, err)
	})
	mux.HandleFunc("DELETE /v1/skills/{slug}/files/{path...}", func(w http.ResponseWriter, r *http.Request) {
		in, err := d.cat.Edit(r.Context(), actingAs(r), r.PathValue("slug"), r.PathValue("path"), nil)
		reply(w, in, err)
	})
	// The two-step install: prepare a source, then confirm with a share
	// scope, or discard. The source is the request body (a ZIP or a
	// SKILL.md, streamed and cut at the import limits), a remote git URL
	// or repository name, or — for admins only — an absolute path on the
	// daemon's machine inside one of its import roots.
	mux.Handle("POST /v1/drafts", d.metrics.importStage("prepare", func(w http.ResponseWriter, r *http.Request) {
		if kind := uploadKind(r.Header.Get("Content-Type")); kind != "" {
			q := r.URL.Query()
			dr, err := d.cat.PrepareUpload(r.Context(), catalog.ImportRequest{Skills: q["skill"],
				All: q.Get("all") == "true", Replace: q.Get("replace") == "true", As: actingAs(r)}, kind, q.Get("name"), r.Body)
			if err != nil {
				w.Header().Set("Connection", "close") // the rest of a refused body is not read
			}
			reply(w, dr, err)
			return
		}
		var req struct {
			Source  string   `json:"source"`
			Ref     string   `json:"ref"`
			Path    string   `json:"path"`
			Skills  []string `json:"skills"`
			All     bool     `json:"all"`
			Replace bool     `json:"replace"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		// The API has no working directory: only an absolute path is a
		// path, a name is that repository (nothing is looked up on disk).
		// What it may read on this machine the catalog checks (admins
		// only, inside the import roots) before anything is read.
		req.Source = catalog.APISource(req.Source)
		dr, err := d.cat.Prepare(r.Context(), catalog.ImportRequest{Source: req.Source, Ref: req.Ref, Path: req.Path,
			Skills: req.Skills, All: req.All, Replace: req.Replace, As: actingAs(r), API: true})
		reply(w, dr, err)
	}))
	mux.Handle("POST /v1/drafts/{id}/confirm", d.metrics.importStage("confirm", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Share string `json:"share"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		sh, err := readScope(req.Share)
		if err != nil {
			writeErr(w, err)
			return
		}
		res, err := d.cat.Confirm(r.Context(), actingAs(r), r.PathValue("id"), sh)
		reply(w, res, err)
	}))
	mux.HandleFunc("DELETE /v1/drafts/{id}", func(w http.ResponseWriter, r *http.Request) {
		err := d.cat.Discard(r.Context(), actingAs(r), r.PathValue("id"))
		reply(w, map[string]string{"discarded": r.PathValue("id")}, err)
	})
}

// diff answers the diff of two versions as the files are compared: the
// answer holds one file's change at a time, never the whole (see
// catalog.DiffJSON). A comparison the daemon cannot grant its memory soon
// is answered 503 busy with Retry-After (diffGate). A failure once the
// answer has begun (a file of the store gone, the client gone) cuts it
// short: the client gets no JSON that looks whole.
func (d *Daemon) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var j *catalog.DiffJSON
	st, err := d.cat.DiffEach(r.Context(), actingAs(r), r.PathValue("slug"), q.Get("a"), q.Get("b"), true,
		func(head *catalog.Diff) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			j = catalog.NewDiffJSON(w)
			return j.Start(head)
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
			d.log.Warn("diff cut short", "slug", r.PathValue("slug"), "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// changed runs a catalog change and applies it to every session before
// answering.
func (d *Daemon) changed(w http.ResponseWriter, r *http.Request, fn func(context.Context) (any, error)) {
	v, err := fn(r.Context())
	if err == nil {
		err = d.Reevaluate(r.Context())
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

// actingAs is the user a catalog request acts as (ActAsHeader; "" for the
// operator).
func actingAs(r *http.Request) string { return r.Header.Get(ActAsHeader) }

// caller is who a session call comes from: the user ActAsHeader names, else
// the operator. A session acts for its own user whoever asks; the caller
// is only told why the skills it manages were left out.
func caller(r *http.Request) string {
	if as := actingAs(r); as != "" {
		return as
	}
	return catalog.Operator
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

// DeleteUser deletes a user as the catalog does (catalog.DeleteUser: their
// skills go to the user to, "" for the acting user), closing their open
// sessions when force is set: here (views and binds gone) those this host
// serves; those other hosts serve go as those hosts follow the change (see
// follow).
func (d *Daemon) DeleteUser(ctx context.Context, as, uid, to string, force bool) (*catalog.UserDeleted, error) {
	res, err := d.cat.DeleteUser(ctx, as, uid, to, force, func(ctx context.Context, ids []string) error {
		for _, id := range ids {
			if err := d.Close(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
