package server

import (
	"context"
	"net/http"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
)

// Installs are a session's installs of skills: its agent's install_skill.
type Installs interface {
	// InstallForSession installs a skill for session id from a path as
	// its sandbox sees it or a remote git source (req), or from up, the
	// skill's bytes (nil for none).
	InstallForSession(ctx context.Context, id string, req api.InstallRequest, up *catalog.Upload) (*api.SessionInstall, error)
}

// installRoutes are the installs of skills a session asks for.
func (a *API) installRoutes(mux *Mux) {
	mux.HandleFunc("POST /v1/sessions/{id}/skills", a.installForSession)
}

// installForSession installs a skill for the session, as its user. The
// body is JSON (api.InstallRequest: a path in the session's sandbox, or a
// remote git source and ref), or the skill itself: a ZIP or a SKILL.md,
// streamed and cut at the import limits, named by ?name= and joined at
// once with ?now=true.
func (a *API) installForSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if kind := uploadKind(r.Header.Get("Content-Type")); kind != "" {
		q := r.URL.Query()
		now := q.Get("now") == "true" || q.Get("now") == "1"
		out, err := a.Installs.InstallForSession(r.Context(), id, api.InstallRequest{Now: now},
			&catalog.Upload{Kind: kind, Name: q.Get("name"), Body: r.Body})
		replyUpload(w, out, err)
		return
	}
	var req api.InstallRequest
	if !readJSON(w, r, &req) {
		return
	}
	out, err := a.Installs.InstallForSession(r.Context(), id, req, nil)
	reply(w, out, err)
}

// replyUpload answers a request whose body was an upload: a refusal closes
// the connection, as the rest of a refused body is not read.
func replyUpload(w http.ResponseWriter, v any, err error) {
	if err != nil {
		w.Header().Set("Connection", "close")
	}
	reply(w, v, err)
}
