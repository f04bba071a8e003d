package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
)

// unrouted answers a request no route takes, in the error shape: 405 with
// the methods the path does take, else 404. Only the methods the request's
// principal may call count: to a session credential the API is the routes
// of its own session, and a route it may not call answers this, as one
// that does not exist (the access table's looks-missing).
func (a *API) unrouted(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	p := principalOrOperator(r.Context())
	var allow []string
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		_, pattern := mux.Handler(probe)
		if pattern == "" || pattern == "/" {
			continue
		}
		if a.judge(r.Context(), p, pattern, m, pathParam(pattern, r.URL.EscapedPath(), "id")) != missing {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, api.Error{
			Error: fmt.Sprintf("%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")),
			Code:  "invalid"})
		return
	}
	writeJSON(w, http.StatusNotFound, api.Error{Error: fmt.Sprintf("%s %s: no such route", r.Method, r.URL.Path), Code: "not_found"})
}

// writeErr answers err in the error shape, with the status of its kind
// (and a Retry-After when it is a BusyError), and tells the writers that
// count answers (statusWriter) its code.
func writeErr(w http.ResponseWriter, err error) {
	retryAfter(w, err)
	k, _ := skills.KindOf(err)
	for u := w; u != nil; {
		if sw, ok := u.(*statusWriter); ok {
			sw.code = k.Name
		}
		un, ok := u.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		u = un.Unwrap()
	}
	writeJSON(w, k.HTTP, api.Error{Error: skills.Message(err), Code: k.Name})
}

// reply answers v, or err when it is not nil.
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
