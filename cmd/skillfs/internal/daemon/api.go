package daemon

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"skillfs/skills"
)

// OpenAPI is the API's contract, an OpenAPI 3.1 document served at
// GET /v1/openapi.json: every route routes registers is in it, and the
// tests check what the daemon answers against it.
//
//go:embed openapi.json
var OpenAPI []byte

// apiMux is the API's ServeMux, keeping the pattern of every route
// registered on it, so that they can be compared with the document.
type apiMux struct {
	*http.ServeMux
	patterns []string
}

func (m *apiMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *apiMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// routes is the JSON HTTP API. With a token, every request must carry it as
// "Authorization: Bearer TOKEN" (the TCP listener); the Unix socket relies on
// its 0600 mode instead.
func (d *Daemon) routes(token string) http.Handler {
	mux := &apiMux{ServeMux: http.NewServeMux()}
	mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(OpenAPI)
	})
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "sessions": d.fs.NumSessions()})
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := d.Status(r.Context())
		reply(w, st, err)
	})
	mux.HandleFunc("GET /v1/ready", func(w http.ResponseWriter, r *http.Request) {
		rd := d.Ready(r.Context())
		if rd.Ready {
			writeJSON(w, http.StatusOK, rd)
			return
		}
		var why []string
		for _, c := range rd.Checks {
			if !c.OK {
				why = append(why, c.Name+": "+c.Error)
			}
		}
		writeJSON(w, http.StatusServiceUnavailable, struct {
			apiError
			Readiness
		}{apiError{Error: "not ready: " + strings.Join(why, "; "), Code: "unavailable"}, rd})
	})
	mux.HandleFunc("POST /v1/catalog/changed", func(w http.ResponseWriter, r *http.Request) {
		if err := d.Reevaluate(r.Context()); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	mux.HandleFunc("GET /v1/sessions", d.listSessions)
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		var req CreateRequest
		if !readJSON(w, r, &req) {
			return
		}
		req.Caller = caller(r)
		info, err := d.CreateSession(r.Context(), req)
		reply(w, info, err)
	})
	mux.HandleFunc("GET /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		info, err := d.SessionInfo(r.Context(), r.PathValue("id"))
		reply(w, info, err)
	})
	mux.HandleFunc("PATCH /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		var req SetRequest
		if !readJSON(w, r, &req) {
			return
		}
		req.Caller = caller(r)
		info, err := d.SetSkills(r.Context(), r.PathValue("id"), req)
		reply(w, info, err)
	})
	mux.HandleFunc("DELETE /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		err := d.Close(r.Context(), r.PathValue("id"))
		reply(w, map[string]string{"closed": r.PathValue("id")}, err)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/move", func(w http.ResponseWriter, r *http.Request) {
		var req MoveRequest
		if !readJSON(w, r, &req) {
			return
		}
		m, err := d.Move(r.Context(), r.PathValue("id"), req.Force)
		reply(w, m, err)
	})
	mux.HandleFunc("GET /v1/hosts", func(w http.ResponseWriter, r *http.Request) {
		list, err := d.Hosts(r.Context())
		reply(w, list, err)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/refresh", func(w http.ResponseWriter, r *http.Request) {
		info, err := d.Refresh(r.Context(), r.PathValue("id"))
		reply(w, info, err)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/mounts", func(w http.ResponseWriter, r *http.Request) {
		var req skills.Bind
		if !readJSON(w, r, &req) {
			return
		}
		b, err := d.Bind(r.Context(), r.PathValue("id"), req.Target, req.PID)
		reply(w, map[string]any{"session": r.PathValue("id"), "target": b.Target, "pid": b.PID}, err)
	})
	mux.HandleFunc("DELETE /v1/sessions/{id}/mounts", func(w http.ResponseWriter, r *http.Request) {
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
		err := d.Unbind(r.Context(), r.PathValue("id"), target, pid)
		reply(w, map[string]any{"session": r.PathValue("id"), "target": target, "pid": pid}, err)
	})
	mux.HandleFunc("GET /v1/sessions/{id}/activations", func(w http.ResponseWriter, r *http.Request) {
		a, err := d.Activations(r.Context(), r.PathValue("id"))
		reply(w, a, err)
	})
	mux.HandleFunc("GET /v1/sessions/{id}/audit", func(w http.ResponseWriter, r *http.Request) {
		a, err := d.Audit(r.Context(), r.PathValue("id"))
		reply(w, a, err)
	})
	mux.HandleFunc("GET /v1/sessions/{id}/prompt", func(w http.ResponseWriter, r *http.Request) {
		p, err := d.Prompt(r.Context(), r.PathValue("id"), r.URL.Query().Get("format"))
		if err != nil {
			writeErr(w, err)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, p)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/mentions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Text string `json:"text"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		m, err := d.Mentions(r.Context(), r.PathValue("id"), req.Text)
		reply(w, map[string]any{"mentions": m}, err)
	})
	mux.HandleFunc("GET /v1/sessions/{id}/resolve", func(w http.ResponseWriter, r *http.Request) {
		res, err := d.Resolve(r.Context(), r.PathValue("id"), r.URL.Query().Get("uri"))
		if err != nil {
			writeErr(w, err)
			return
		}
		w.Header().Set("Content-Type", res.ContentType)
		w.Header().Set("Last-Modified", res.ModTime.UTC().Format(http.TimeFormat))
		w.Write(res.Data)
	})
	mux.HandleFunc("GET /v1/sessions/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		d.stream(w, r, id, func(ctx context.Context) (bool, error) {
			s, err := d.cat.DB().Session(ctx, id)
			if err != nil {
				return false, fmt.Errorf("session %q: %w", id, err)
			}
			return !s.ClosedAt.IsZero(), nil
		})
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) { d.stream(w, r, "", nil) })
	d.catalogRoutes(mux)
	d.curatedRoutes(mux)
	mux.Handle("GET /metrics", d.metrics.handler(d.log))
	// The catch-all is no route of the document: it is left out of patterns.
	mux.ServeMux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { unrouted(mux.ServeMux, w, r) })

	if token == "" {
		return d.metrics.instrument(mux.ServeMux, mux)
	}
	return d.metrics.instrument(mux.ServeMux, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearerIs(r.Header.Get("Authorization"), token) {
			// Close the connection after the answer: one without the
			// token has nothing more to do here, and kept alive it would
			// hold a descriptor and one of the listener's slots.
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusUnauthorized, apiError{Error: "missing or wrong bearer token", Code: "permission"})
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

// bearerIs reports whether the Authorization header value auth carries
// the bearer token token: the scheme "Bearer" in any case (RFC 7235: the
// scheme is case-insensitive), one or more spaces, then the token, compared
// in constant time.
func bearerIs(auth, token string) bool {
	scheme, cred, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	cred = strings.TrimLeft(cred, " ")
	return subtle.ConstantTimeCompare([]byte(cred), []byte(token)) == 1
}

// Pages of the session list: their size when the request names none, and
// the largest a request may ask for.
const (
	DefaultSessionPage = 100
	MaxSessionPage     = 1000
)

// listSessions answers one page of the open sessions, oldest first:
// ?limit=N (default DefaultSessionPage, at most MaxSessionPage) sessions
// after the session ?after=ID, of every host or of the host ?host=ID. The
// body is the JSON array of the page; when more sessions follow, a Link
// header names the next page (rel="next"), whose cursor is the last session
// of this one.
func (d *Daemon) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := DefaultSessionPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			writeErr(w, fmt.Errorf("limit %q: want a positive number: %w", v, skills.ErrInvalid))
			return
		}
		limit = min(n, MaxSessionPage)
	}
	after, host := q.Get("after"), q.Get("host")
	list, err := d.Sessions(r.Context(), host, after, limit+1)
	if err != nil {
		writeErr(w, err)
		return
	}
	if len(list) > limit {
		list = list[:limit]
		next := url.Values{"after": {list[limit-1].ID}, "limit": {strconv.Itoa(limit)}}
		if host != "" {
			next.Set("host", host)
		}
		w.Header().Set("Link", fmt.Sprintf(`</v1/sessions?%s>; rel="next"`, next.Encode()))
	}
	writeJSON(w, http.StatusOK, list)
}

// NextPage returns the path and query of the page a Link header names as
// next (rel="next"), or "" when there is none.
func NextPage(link string) string {
	for part := range strings.SplitSeq(link, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ">")
		if !ok || !strings.HasPrefix(target, "<") || !strings.Contains(params, `rel="next"`) {
			continue
		}
		if u, err := url.Parse(target[1:]); err == nil {
			return u.RequestURI()
		}
	}
	return ""
}

// apiError is the body of every failed request. Code lets clients map it
// back to an error kind without matching messages.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// ErrorCode names the kind of err for API clients, with its HTTP status
// (skills.Kinds).
func ErrorCode(err error) (string, int) {
	k, _ := skills.KindOf(err)
	return k.Name, k.HTTP
}

// unrouted answers a request no route takes, in the error shape: 405 with
// the methods the path does take, else 404.
func unrouted(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, apiError{
			Error: fmt.Sprintf("%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")),
			Code:  "invalid"})
		return
	}
	writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("%s %s: no such route", r.Method, r.URL.Path), Code: "not_found"})
}

func writeErr(w http.ResponseWriter, err error) {
	retryAfter(w, err)
	code, status := ErrorCode(err)
	writeJSON(w, status, apiError{Error: skills.Message(err), Code: code})
}

func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// readJSON decodes a request body holding exactly one JSON value (1 MiB at
// most, no unknown fields) into v, or answers 400 and returns false.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, fmt.Errorf("request body: %v: %w", err, skills.ErrInvalid))
		return false
	}
	// Anything after the value but white space is refused: "{…}{…}" is
	// not one request, and acting on its first half would be a guess.
	var rest json.RawMessage
	if err := dec.Decode(&rest); err != io.EOF {
		writeErr(w, fmt.Errorf("request body: data after the JSON value: %w", skills.ErrInvalid))
		return false
	}
	return true
}
