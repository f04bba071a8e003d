package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"skillfs/skills"
)

// Access is who may call a route, by the role of the request's principal
// (see Principal). The operator may call every route.
type Access int

const (
	// AccessOperator routes are the operator's alone: everything that
	// changes the catalog, the fleet or a session's skills and binds.
	AccessOperator Access = iota + 1
	// AccessRead routes are reads, open to reader tokens too: the session
	// list, the event stream of every session, the catalog's listing, the
	// daemon's status.
	AccessRead
	// AccessSessionRead routes read one session ({id}): open to reader
	// tokens (they change nothing, POSTs included), and to the credential
	// of that session, or of its parent (Parents).
	AccessSessionRead
	// AccessSessionAct routes act in one session ({id}) for its agent:
	// open to the credential of that session, not to readers.
	AccessSessionAct
	// AccessSessionCreate is the route that opens a session: a session
	// credential may call it too (what it opens is its own child).
	AccessSessionCreate
	// AccessAnyone routes answer every principal about itself.
	AccessAnyone
	// AccessChildClose is closing a session: the operator's, and the
	// credential's of the session that opened it (an agent ends the
	// sub-agents it opened, which count against its cap of open children).
	AccessChildClose
)

// routeAccess is the access of every route pattern the API registers
// (TestEveryRouteHasAnAccess fails for one left out; one left out is the
// operator's alone), and of routes to come. For a session principal a
// route it may not call answers exactly as a route that does not exist
// (looksMissing); for a reader, 403.
var routeAccess = map[string]Access{
	// The daemon's own.
	"GET /v1/openapi.json":     AccessRead,
	"GET /v1/health":           AccessRead,
	"GET /v1/status":           AccessRead,
	"GET /v1/ready":            AccessRead,
	"GET /v1/hosts":            AccessRead,
	"GET /metrics":             AccessRead,
	"POST /v1/catalog/changed": AccessOperator,
	"GET /v1/whoami":           AccessAnyone,

	// Sessions.
	"GET /v1/sessions":                  AccessRead,
	"POST /v1/sessions":                 AccessSessionCreate,
	"GET /v1/sessions/{id}":             AccessSessionRead,
	"PATCH /v1/sessions/{id}":           AccessOperator,
	"DELETE /v1/sessions/{id}":          AccessChildClose,
	"POST /v1/sessions/{id}/move":       AccessOperator,
	"POST /v1/sessions/{id}/refresh":    AccessOperator,
	"POST /v1/sessions/{id}/mounts":     AccessOperator,
	"DELETE /v1/sessions/{id}/mounts":   AccessOperator,
	"POST /v1/sessions/{id}/token":      AccessOperator,
	"GET /v1/sessions/{id}/activations": AccessSessionRead,
	"GET /v1/sessions/{id}/audit":       AccessSessionRead,
	"GET /v1/sessions/{id}/prompt":      AccessSessionRead,
	"POST /v1/sessions/{id}/mentions":   AccessSessionAct, // records what it resolves as activated
	"GET /v1/sessions/{id}/resolve":     AccessSessionAct, // a SKILL.md read activates
	"GET /v1/sessions/{id}/events":      AccessSessionRead,
	"POST /v1/sessions/{id}/turn":       AccessSessionAct, // refreshes, activates
	"POST /v1/sessions/{id}/globs":      AccessSessionRead,
	"POST /v1/sessions/{id}/skills":     AccessSessionAct,
	"GET /v1/events":                    AccessRead,

	// Platform tokens.
	"POST /v1/tokens":          AccessOperator,
	"GET /v1/tokens":           AccessOperator,
	"DELETE /v1/tokens/{name}": AccessOperator,

	// The catalog: its listing is a read; versions' content (export,
	// diff) and every change are the operator's.
	"GET /v1/skills":                           AccessRead,
	"GET /v1/skills/{slug}":                    AccessRead,
	"GET /v1/skills/{slug}/versions":           AccessRead,
	"GET /v1/skills/{slug}/export":             AccessOperator,
	"GET /v1/skills/{slug}/diff":               AccessOperator,
	"POST /v1/skills/{slug}/rollback":          AccessOperator,
	"POST /v1/skills/{slug}/update":            AccessOperator,
	"POST /v1/skills/update":                   AccessOperator,
	"POST /v1/skills/{slug}/enable":            AccessOperator,
	"POST /v1/skills/{slug}/disable":           AccessOperator,
	"DELETE /v1/skills/{slug}":                 AccessOperator,
	"PUT /v1/skills/{slug}/deps":               AccessOperator,
	"PUT /v1/skills/{slug}/share":              AccessOperator,
	"DELETE /v1/users/{uid}":                   AccessOperator,
	"PUT /v1/skills/{slug}/files/{path...}":    AccessOperator,
	"DELETE /v1/skills/{slug}/files/{path...}": AccessOperator,
	"POST /v1/drafts":                          AccessOperator,
	"POST /v1/drafts/{id}/confirm":             AccessOperator,
	"DELETE /v1/drafts/{id}":                   AccessOperator,
	"GET /v1/curated":                          AccessRead,
	"POST /v1/curated":                         AccessOperator,
	"DELETE /v1/curated":                       AccessOperator,
	"POST /v1/curated/refresh":                 AccessOperator,
	"GET /v1/catalog":                          AccessRead,
	"GET /v1/curated/skills":                   AccessRead,
	"POST /v1/curated/install":                 AccessOperator,
}

// accessOf is the access of route pattern: the operator's alone when the
// table has no entry.
func accessOf(pattern string) Access {
	if a, ok := routeAccess[pattern]; ok {
		return a
	}
	return AccessOperator
}

// Parents are the parents of sessions (sub-agents, Config.Parents): the
// session that opened session id, "" for one that none did, an error for
// an unknown id. With them, a session's credential reads its children's
// sessions as its own (AccessSessionRead; not AccessSessionAct). Without
// them, a session credential reaches its own session only.
type Parents interface {
	SessionParent(ctx context.Context, id string) (string, error)
}

// verdict is what the access table says of a request.
type verdict int

const (
	allowed   verdict = iota
	forbidden         // 403: a reader calling what is not a read
	missing           // a session principal calling what is not its own: looks like no route
)

// judge says whether principal p may call route pattern with method on
// session id (the route's {id}, "" for none).
func (a *API) judge(ctx context.Context, p Principal, pattern, method, id string) verdict {
	acc := accessOf(pattern)
	switch p.Role {
	case RoleOperator:
		return allowed
	case RoleReader:
		if acc == AccessAnyone || acc == AccessSessionRead || acc == AccessRead && (method == http.MethodGet || method == http.MethodHead) {
			return allowed
		}
		return forbidden
	case RoleSession:
		switch acc {
		case AccessAnyone, AccessSessionCreate:
			return allowed
		case AccessSessionAct:
			if id != "" && id == p.Session {
				return allowed
			}
		case AccessSessionRead:
			if id != "" && (id == p.Session || a.isChild(ctx, id, p.Session)) {
				return allowed
			}
		case AccessChildClose:
			if id != "" && a.isChild(ctx, id, p.Session) {
				return allowed
			}
		}
	}
	return missing
}

// isChild says whether session id was opened by session parent.
func (a *API) isChild(ctx context.Context, id, parent string) bool {
	if a.Parents == nil {
		return false
	}
	got, err := a.Parents.SessionParent(ctx, id)
	return err == nil && got != "" && got == parent
}

// guard puts route pattern's access in front of h: a request the
// principal may not make is refused before h sees it.
func (a *API) guard(mux *http.ServeMux, pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalOrOperator(r.Context())
		switch a.judge(r.Context(), p, pattern, r.Method, r.PathValue("id")) {
		case allowed:
			h.ServeHTTP(w, r)
		case forbidden:
			writeErr(w, fmt.Errorf("%s %s: not open to a %s token: %w", r.Method, r.URL.Path, p.Role, skills.ErrPermission))
		default:
			a.unrouted(mux, w, r)
		}
	})
}

// principalOrOperator is the principal ctx carries; a request served
// without the authentication in front (a test of the routes alone) is the
// operator's. Every listener serves Handler, which always sets one.
func principalOrOperator(ctx context.Context) Principal {
	if p, ok := PrincipalOf(ctx); ok {
		return p
	}
	return Principal{Role: RoleOperator}
}

// pathParam is the value the segment {name} of pattern takes in path, ""
// when pattern has none or path does not fit it: what r.PathValue gives
// once the mux has routed r, for a request it has not (unrouted's probes).
func pathParam(pattern, path, name string) string {
	_, p, _ := strings.Cut(pattern, " ")
	want := strings.Split(p, "/")
	i := slices.Index(want, "{"+name+"}")
	got := strings.Split(path, "/")
	if i < 0 || i >= len(got) {
		return ""
	}
	v, err := url.PathUnescape(got[i])
	if err != nil {
		return ""
	}
	return v
}

// accessRows are the rows of the permission table API.md shows, one per
// kind of access, for the routes patterns (those registered): who may
// call them, and the routes, in the order given.
func accessRows(patterns []string) string {
	classes := []struct {
		acc                   Access
		name, reader, session string
	}{
		{AccessAnyone, "anyone", "yes", "yes"},
		{AccessRead, "read", "yes (GET)", "looks missing"},
		{AccessSessionRead, "own session, read", "yes", "its own session, or a child's"},
		{AccessSessionAct, "own session, act", "403", "its own session"},
		{AccessSessionCreate, "session create", "403", "yes (opens a child of its session)"},
		{AccessChildClose, "session close", "403", "a child of its session"},
		{AccessOperator, "operator", "403", "looks missing"},
	}
	var b strings.Builder
	b.WriteString("| access | operator | reader token | session token | routes |\n|---|---|---|---|---|\n")
	for _, c := range classes {
		var routes []string
		for _, p := range patterns {
			if accessOf(p) == c.acc {
				routes = append(routes, "`"+p+"`")
			}
		}
		if len(routes) == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | yes | %s | %s | %s |\n", c.name, c.reader, c.session, strings.Join(routes, ", "))
	}
	return b.String()
}
