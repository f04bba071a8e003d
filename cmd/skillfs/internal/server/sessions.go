package server

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
)

// sessionRoutes are the calls on sessions: making, changing, binding and
// closing them, and what an agent's tooling asks of one.
func (a *API) sessionRoutes(mux *Mux) {
	mux.HandleFunc("GET /v1/sessions", a.listSessions)
	mux.HandleFunc("POST /v1/sessions", a.createSession)
	mux.HandleFunc("GET /v1/sessions/{id}", a.sessionInfo)
	mux.HandleFunc("PATCH /v1/sessions/{id}", a.setSkills)
	mux.HandleFunc("DELETE /v1/sessions/{id}", a.closeSession)
	mux.HandleFunc("POST /v1/sessions/{id}/move", a.moveSession)
	mux.HandleFunc("POST /v1/sessions/{id}/refresh", a.refresh)
	mux.HandleFunc("POST /v1/sessions/{id}/mounts", a.bind)
	mux.HandleFunc("DELETE /v1/sessions/{id}/mounts", a.unbind)
	mux.HandleFunc("GET /v1/sessions/{id}/activations", a.activations)
	mux.HandleFunc("GET /v1/sessions/{id}/audit", a.audit)
	mux.HandleFunc("GET /v1/sessions/{id}/prompt", a.prompt)
	mux.HandleFunc("POST /v1/sessions/{id}/mentions", a.mentions)
	mux.HandleFunc("GET /v1/sessions/{id}/resolve", a.resolve)
	mux.HandleFunc("POST /v1/sessions/{id}/turn", a.turn)
	mux.HandleFunc("POST /v1/sessions/{id}/globs", a.globs)
	mux.HandleFunc("GET /v1/sessions/{id}/events", a.sessionEvents)
	mux.HandleFunc("GET /v1/events", a.allEvents)
}

// listSessions answers one page of the open sessions, oldest first:
// ?limit=N (default api.DefaultSessionPage, at most api.MaxSessionPage)
// sessions after the session ?after=ID, of every host or of the host
// ?host=ID, narrowed to those of ?user=UID, with client key ?key=K, and
// carrying every ?label=k=v given (repeatable). The body is the JSON array
// of the page; when more sessions follow, a Link header names the next
// page (rel="next"), whose cursor is the last session of this one, with
// the same narrowing.
func (a *API) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := api.DefaultSessionPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			writeErr(w, fmt.Errorf("limit %q: want a positive number: %w", v, skills.ErrInvalid))
			return
		}
		limit = min(n, api.MaxSessionPage)
	}
	labels, err := skills.ParseLabels(q["label"])
	if err != nil {
		writeErr(w, fmt.Errorf("query parameter label: %w", err))
		return
	}
	after := q.Get("after")
	find := api.SessionQuery{Host: q.Get("host"), User: q.Get("user"), Key: q.Get("key"), Labels: labels}
	list, err := a.Sessions.Sessions(r.Context(), find, after, limit+1)
	if err != nil {
		writeErr(w, err)
		return
	}
	if len(list) > limit {
		list = list[:limit]
		next := url.Values{"after": {list[limit-1].ID}, "limit": {strconv.Itoa(limit)}}
		for _, k := range []string{"host", "user", "key"} {
			if v := q.Get(k); v != "" {
				next.Set(k, v)
			}
		}
		if len(q["label"]) > 0 {
			next["label"] = q["label"]
		}
		w.Header().Set("Link", fmt.Sprintf(`</v1/sessions?%s>; rel="next"`, next.Encode()))
	}
	writeJSON(w, http.StatusOK, list)
}

func (a *API) createSession(w http.ResponseWriter, r *http.Request) {
	var req api.CreateRequest
	if !readJSON(w, r, &req) {
		return
	}
	req.Caller = caller(r)
	if err := childOfCaller(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	info, err := a.Sessions.CreateSession(r.Context(), req)
	reply(w, info, err)
}

// reservedLabelPrefixes are the label keys a session's credential may not
// put on a sub-agent session: those the CSI node plugin marks its own
// sessions and their pods with, so that a pod cannot make a session pass
// for the plugin's (or another pod's).
var reservedLabelPrefixes = []string{"csi.", "k8s."}

// childOfCaller makes a create by a session's credential a sub-agent of
// that session: a request naming another parent is answered as if that
// session did not exist; one giving a label of a reserved prefix is
// refused.
func childOfCaller(r *http.Request, req *api.CreateRequest) error {
	p, ok := PrincipalOf(r.Context())
	if !ok || p.Role != RoleSession {
		return nil
	}
	if req.Parent != "" && req.Parent != p.Session {
		return fmt.Errorf("session %q: %w", req.Parent, skills.ErrNotFound)
	}
	for _, k := range slices.Sorted(maps.Keys(req.Labels)) {
		for _, pre := range reservedLabelPrefixes {
			if strings.HasPrefix(k, pre) {
				return fmt.Errorf("label %q: keys starting with %q are reserved (the CSI node plugin's); a session's credential may not give them: %w", k, pre, skills.ErrPermission)
			}
		}
	}
	req.Parent = p.Session
	return nil
}

func (a *API) sessionInfo(w http.ResponseWriter, r *http.Request) {
	info, err := a.Sessions.SessionInfo(r.Context(), r.PathValue("id"))
	reply(w, info, err)
}

func (a *API) setSkills(w http.ResponseWriter, r *http.Request) {
	var req api.SetRequest
	if !readJSON(w, r, &req) {
		return
	}
	req.Caller = caller(r)
	info, err := a.Sessions.SetSkills(r.Context(), r.PathValue("id"), req)
	reply(w, info, err)
}

func (a *API) closeSession(w http.ResponseWriter, r *http.Request) {
	err := a.Sessions.CloseSession(r.Context(), r.PathValue("id"))
	reply(w, api.Closed{Closed: r.PathValue("id")}, err)
}

func (a *API) moveSession(w http.ResponseWriter, r *http.Request) {
	var req api.MoveRequest
	if !readJSON(w, r, &req) {
		return
	}
	m, err := a.Fleet.Move(r.Context(), r.PathValue("id"), req.Force)
	reply(w, m, err)
}

func (a *API) refresh(w http.ResponseWriter, r *http.Request) {
	info, err := a.Sessions.Refresh(r.Context(), r.PathValue("id"))
	reply(w, info, err)
}

func (a *API) bind(w http.ResponseWriter, r *http.Request) {
	var req skills.Bind
	if !readJSON(w, r, &req) {
		return
	}
	b, err := a.Binds.Bind(r.Context(), r.PathValue("id"), skills.Bind{Target: req.Target, PID: req.PID, APISocket: req.APISocket})
	reply(w, api.BindResult{Session: r.PathValue("id"), Target: b.Target, PID: b.PID, APISocket: b.APISocket}, err)
}

func (a *API) unbind(w http.ResponseWriter, r *http.Request) {
	target := r.URL.Query().Get("target")
	pid := 0
	if p := r.URL.Query().Get("pid"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			writeErr(w, fmt.Errorf("pid %q: %w", p, skills.ErrInvalid))
			return
		}
		pid = n
	}
	err := a.Binds.Unbind(r.Context(), r.PathValue("id"), target, pid)
	reply(w, api.BindResult{Session: r.PathValue("id"), Target: target, PID: pid}, err)
}

func (a *API) activations(w http.ResponseWriter, r *http.Request) {
	act, err := a.Queries.Activations(r.Context(), r.PathValue("id"))
	reply(w, act, err)
}

func (a *API) audit(w http.ResponseWriter, r *http.Request) {
	reads, err := a.Queries.Audit(r.Context(), r.PathValue("id"))
	reply(w, reads, err)
}

func (a *API) prompt(w http.ResponseWriter, r *http.Request) {
	p, err := a.Queries.Prompt(r.Context(), r.PathValue("id"), r.URL.Query().Get("format"))
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, p)
}

func (a *API) mentions(w http.ResponseWriter, r *http.Request) {
	var req api.MentionsRequest
	if !readJSON(w, r, &req) {
		return
	}
	m, err := a.Queries.Mentions(r.Context(), r.PathValue("id"), req.Text)
	reply(w, api.Mentions{Mentions: m}, err)
}

// turn answers one turn's api.Turn, as JSON in every format: the format
// says how Text is rendered (json leaves it empty).
func (a *API) turn(w http.ResponseWriter, r *http.Request) {
	var req api.TurnRequest
	if !readJSON(w, r, &req) {
		return
	}
	t, err := a.Queries.Turn(r.Context(), r.PathValue("id"), req)
	reply(w, t, err)
}

func (a *API) globs(w http.ResponseWriter, r *http.Request) {
	var req api.GlobsRequest
	if !readJSON(w, r, &req) {
		return
	}
	g, err := a.Queries.Globs(r.Context(), r.PathValue("id"), req.Paths)
	reply(w, g, err)
}

func (a *API) resolve(w http.ResponseWriter, r *http.Request) {
	res, err := a.Queries.Resolve(r.Context(), r.PathValue("id"), r.URL.Query().Get("uri"))
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Type", res.ContentType)
	w.Header().Set("Last-Modified", res.ModTime.UTC().Format(http.TimeFormat))
	w.Write(res.Data)
}

// actingAs is the user a catalog request acts as (api.ActAsHeader; "" for
// the operator).
func actingAs(r *http.Request) string { return r.Header.Get(api.ActAsHeader) }

// caller is who a session call comes from: the user api.ActAsHeader
// names, else the operator. A session acts for its own user whoever asks;
// the caller is only told why the skills it manages were left out.
func caller(r *http.Request) string {
	if as := actingAs(r); as != "" {
		return as
	}
	return catalog.Operator
}
