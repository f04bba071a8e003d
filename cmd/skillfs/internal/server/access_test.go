package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
)

// routesToCome are routes other parts of the API register (or will): the
// access table has them already, and the tests below serve them beside
// the registered ones.
var routesToCome = []string{
	"POST /v1/sessions/{id}/turn",
	"POST /v1/sessions/{id}/globs",
	"POST /v1/sessions/{id}/skills",
}

// What each credential may call, written out here on its own (not read
// from routeAccess): a change to the table that is not made here too fails.
var (
	// readerMay are the routes a reader token may call: reads alone.
	readerMay = []string{
		"GET /v1/openapi.json", "GET /v1/health", "GET /v1/status", "GET /v1/ready", "GET /v1/hosts", "GET /metrics",
		"GET /v1/whoami", "GET /v1/sessions", "GET /v1/events",
		"GET /v1/sessions/{id}", "GET /v1/sessions/{id}/activations", "GET /v1/sessions/{id}/audit",
		"GET /v1/sessions/{id}/prompt",
		"GET /v1/sessions/{id}/events", "POST /v1/sessions/{id}/globs",
		"GET /v1/skills", "GET /v1/skills/{slug}", "GET /v1/skills/{slug}/versions",
		"GET /v1/curated", "GET /v1/catalog", "GET /v1/curated/skills",
	}
	// sessionMayOwn are the routes a session token may call on its own
	// session ({id} its session).
	sessionMayOwn = []string{
		"GET /v1/sessions/{id}", "GET /v1/sessions/{id}/activations", "GET /v1/sessions/{id}/audit",
		"GET /v1/sessions/{id}/prompt", "POST /v1/sessions/{id}/mentions", "GET /v1/sessions/{id}/resolve",
		"GET /v1/sessions/{id}/events", "POST /v1/sessions/{id}/turn", "POST /v1/sessions/{id}/globs",
		"POST /v1/sessions/{id}/skills",
	}
	// sessionMay are the routes a session token may call whatever they name.
	sessionMay = []string{"POST /v1/sessions", "GET /v1/whoami"}
	// childMay are the routes a session token may call on a child of its
	// session: sessionMayOwn but acting in it, and closing it.
	childMay = append(slices.DeleteFunc(slices.Clone(sessionMayOwn), func(p string) bool { return routeAccess[p] == AccessSessionAct }),
		"DELETE /v1/sessions/{id}")
)

// The outcomes of a request, as the table test tells them.
const (
	outAllowed      = "allowed"
	outUnauthorized = "401"
	outForbidden    = "403"
	outMissing      = "looks-missing"
)

// reachedStatus is what a stub route answers: the request got past the
// authentication and the route's access.
const reachedStatus = 299

// fakeCredentials prove the principals of their tokens.
type fakeCredentials struct {
	Credentials // the calls the tests make none of
	tokens      map[string]Principal
}

func (f fakeCredentials) Credential(_ context.Context, token string) (Principal, error) {
	p, ok := f.tokens[token]
	if !ok {
		return Principal{}, fmt.Errorf("no such token: %w", skills.ErrNotFound)
	}
	return p, nil
}

// sessionsDeps is Sessions under a name to embed.
type sessionsDeps = Sessions

// family is a fake Sessions that knows some sessions and their parents.
type family struct {
	sessionsDeps
	parents map[string]string // of every session it knows
}

func (f family) SessionParent(_ context.Context, id string) (string, error) {
	p, ok := f.parents[id]
	if !ok {
		return "", fmt.Errorf("session %q: %w", id, skills.ErrNotFound)
	}
	return p, nil
}

func (f family) SessionInfo(_ context.Context, id string) (*api.SessionInfo, error) {
	if _, ok := f.parents[id]; !ok {
		return nil, fmt.Errorf("session %q: %w", id, skills.ErrNotFound)
	}
	return &api.SessionInfo{ID: id, User: "alice", Readable: []string{}, Preload: []string{}, Skipped: []api.Skipped{},
		Binds: []skills.Bind{}, Pinned: []string{}}, nil
}

// The tokens of the tests.
const (
	listenerToken = "listener-secret"
	operatorToken = api.PlatformTokenPrefix + "op"
	readerToken   = api.PlatformTokenPrefix + "rd"
	tokenOfS      = api.SessionTokenPrefix + "S"
	tokenOfT      = api.SessionTokenPrefix + "T"
	tokenOfChild  = api.SessionTokenPrefix + "C"
)

// accessAPI is an API with fake credentials and sessions: S and T are
// sessions, C is S's child.
func accessAPI() *API {
	fam := family{parents: map[string]string{"S": "", "T": "", "C": "S"}}
	return New(Config{
		Credentials: fakeCredentials{tokens: map[string]Principal{
			operatorToken: {Role: RoleOperator, Token: "ci"},
			readerToken:   {Role: RoleReader, Token: "dash"},
			tokenOfS:      {Role: RoleSession, Session: "S"},
			tokenOfT:      {Role: RoleSession, Session: "T"},
			tokenOfChild:  {Role: RoleSession, Session: "C"},
		}},
		Sessions: fam,
		Parents:  fam,
	})
}

// allPatterns are the registered routes with those to come.
func allPatterns() []string {
	all := New(Config{}).Routes().Patterns()
	for _, p := range routesToCome {
		if !slices.Contains(all, p) {
			all = append(all, p)
		}
	}
	return all
}

// stubMux serves every pattern but leave out behind its access, each route
// answering reachedStatus.
func stubMux(a *API, leaveOut string) *Mux {
	mux := a.newMux()
	for _, p := range allPatterns() {
		if p == leaveOut {
			continue
		}
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Route", p)
			w.WriteHeader(reachedStatus)
		})
	}
	a.catchAll(mux)
	return mux
}

// requestOf is a request to route pattern, its {id} being id.
func requestOf(pattern, id string) *http.Request {
	method, path, _ := strings.Cut(pattern, " ")
	path = strings.NewReplacer("{id}", id, "{slug}", "pdf", "{path...}", "a/b.md", "{name}", "dash", "{uid}", "bob").Replace(path)
	return httptest.NewRequest(method, path, nil)
}

// credential is a kind of caller: the listener it comes in on (its token,
// "" for the socket) and the Authorization it sends.
type credential struct {
	name     string
	listener string
	auth     string
}

var credentials = []credential{
	{"operator on the socket", "", ""},
	{"operator with the listener's token", listenerToken, "Bearer " + listenerToken},
	{"operator platform token", listenerToken, "Bearer " + operatorToken},
	{"reader token", listenerToken, "Bearer " + readerToken},
	{"reader token on the socket", "", "Bearer " + readerToken},
	{"token of session S", listenerToken, "Bearer " + tokenOfS},
	{"token of session S on the socket", "", "bearer  " + tokenOfS},
	{"token of session T", listenerToken, "Bearer " + tokenOfT},
	{"token of S's child", listenerToken, "Bearer " + tokenOfChild},
	{"no token on TCP", listenerToken, ""},
	{"a wrong token on TCP", listenerToken, "Bearer nope"},
	{"an unknown session token on TCP", listenerToken, "Bearer " + api.SessionTokenPrefix + "gone"},
	{"an unknown platform token on the socket", "", "Bearer " + api.PlatformTokenPrefix + "gone"},
	{"a token of another scheme", listenerToken, "Basic " + listenerToken},
}

// expect is what the route pattern, its {id} being S, answers c, by the
// lists above.
func expect(c credential, pattern string) string {
	switch {
	case strings.Contains(c.name, "operator"):
		return outAllowed
	case strings.HasPrefix(c.name, "reader"):
		if slices.Contains(readerMay, pattern) {
			return outAllowed
		}
		return outForbidden
	case strings.HasPrefix(c.name, "token of session S"):
		if slices.Contains(sessionMay, pattern) || slices.Contains(sessionMayOwn, pattern) {
			return outAllowed
		}
		return outMissing
	case c.name == "token of session T" || c.name == "token of S's child":
		if slices.Contains(sessionMay, pattern) {
			return outAllowed
		}
		return outMissing
	}
	return outUnauthorized
}

// outcome tells what answer rec is.
func outcome(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var e api.Error
	json.Unmarshal(rec.Body.Bytes(), &e)
	switch {
	case rec.Code == reachedStatus:
		return outAllowed
	case rec.Code == http.StatusUnauthorized && e.Code == "permission" && rec.Header().Get("Connection") == "close":
		return outUnauthorized
	case rec.Code == http.StatusForbidden && e.Code == "permission":
		return outForbidden
	case rec.Code == http.StatusNotFound && e.Code == "not_found" && strings.HasSuffix(e.Error, ": no such route"),
		rec.Code == http.StatusMethodNotAllowed && e.Code == "invalid" && strings.Contains(e.Error, "method not allowed"):
		return outMissing
	}
	return fmt.Sprintf("%d %s", rec.Code, rec.Body)
}

// serve answers r, sent with c, by h for the listener of c.
func serve(a *API, mux *Mux, c credential, r *http.Request) *httptest.ResponseRecorder {
	if c.auth != "" {
		r.Header.Set("Authorization", c.auth)
	}
	rec := httptest.NewRecorder()
	via := ViaTCP
	if c.listener == "" {
		via = ViaSocket
	}
	a.handler(mux, via, c.listener).ServeHTTP(rec, r)
	return rec
}

// TestRoutePermissions: every route, for every kind of credential, is
// allowed, refused 401, refused 403 or answered as a route that does not
// exist, as the lists above say; a route a session token may not call
// answers byte for byte what the same request answers where the route is
// not served at all.
func TestRoutePermissions(t *testing.T) {
	a := accessAPI()
	mux := stubMux(a, "")
	for _, pattern := range allPatterns() {
		for _, c := range credentials {
			t.Run(pattern+"/"+c.name, func(t *testing.T) {
				want := expect(c, pattern)
				rec := serve(a, mux, c, requestOf(pattern, "S"))
				if got := outcome(t, rec); got != want {
					t.Fatalf("%s with %s: %s, want %s", pattern, c.name, got, want)
				}
				if want == outAllowed && rec.Header().Get("X-Route") != pattern {
					t.Fatalf("reached route %q", rec.Header().Get("X-Route"))
				}
				if want != outMissing {
					return
				}
				bare := serve(a, stubMux(a, pattern), c, requestOf(pattern, "S"))
				if rec.Code != bare.Code || !bytes.Equal(rec.Body.Bytes(), bare.Body.Bytes()) || !equalHeaders(rec.Header(), bare.Header()) {
					t.Fatalf("refused: %d %v %s\nnot served: %d %v %s", rec.Code, rec.Header(), rec.Body, bare.Code, bare.Header(), bare.Body)
				}
			})
		}
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestEveryRouteHasAnAccess: every route the API registers has its entry
// in the access table, and the table has the routes to come.
func TestEveryRouteHasAnAccess(t *testing.T) {
	for _, p := range allPatterns() {
		if _, ok := routeAccess[p]; !ok {
			t.Errorf("route %q has no entry in routeAccess", p)
		}
	}
}

// TestChildRoutes: a session's token reads its child's session as its own
// but does not act in it; the child's token does not reach its parent.
func TestChildRoutes(t *testing.T) {
	a := accessAPI()
	mux := stubMux(a, "")
	parent := credential{"token of session S", listenerToken, "Bearer " + tokenOfS}
	child := credential{"token of S's child", listenerToken, "Bearer " + tokenOfChild}
	for _, pattern := range allPatterns() {
		if !strings.Contains(pattern, "{id}") || !strings.HasPrefix(strings.SplitN(pattern, " ", 2)[1], "/v1/sessions/") {
			continue
		}
		want := outMissing
		if slices.Contains(childMay, pattern) {
			want = outAllowed
		}
		if got := outcome(t, serve(a, mux, parent, requestOf(pattern, "C"))); got != want {
			t.Errorf("%s on the child, with the parent's token: %s, want %s", pattern, got, want)
		}
		want = outMissing
		if slices.Contains(sessionMayOwn, pattern) {
			want = outAllowed
		}
		if got := outcome(t, serve(a, mux, child, requestOf(pattern, "C"))); got != want {
			t.Errorf("%s on the child, with its own token: %s, want %s", pattern, got, want)
		}
		if got := outcome(t, serve(a, mux, child, requestOf(pattern, "S"))); got != outMissing {
			t.Errorf("%s on the parent, with the child's token: %s, want %s", pattern, got, outMissing)
		}
	}
}

// TestNoOracle: to a session token, another session that exists, one that
// does not, a route it may not call and a path no route takes all answer
// alike: the same status, headers and body (its path aside), from the
// real routes.
func TestNoOracle(t *testing.T) {
	a := accessAPI()
	h := a.Handler(listenerToken)
	send := func(method, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("Authorization", "Bearer "+tokenOfS)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	same := func(what string, got, want *httptest.ResponseRecorder, gotPath, wantPath string) {
		t.Helper()
		body := bytes.ReplaceAll(got.Body.Bytes(), []byte(gotPath), []byte(wantPath))
		if got.Code != want.Code || !bytes.Equal(body, want.Body.Bytes()) || !equalHeaders(got.Header(), want.Header()) {
			t.Errorf("%s: %d %v %s\nwant %d %v %s", what, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
	for _, sub := range []string{"", "/prompt", "/activations", "/events", "/audit"} {
		other := send("GET", "/v1/sessions/T"+sub)
		none := send("GET", "/v1/sessions/NOPE"+sub)
		same("another session"+sub+" and none", other, none, "/v1/sessions/T", "/v1/sessions/NOPE")
		if other.Code != http.StatusNotFound {
			t.Errorf("another session%s: %d %s", sub, other.Code, other.Body)
		}
	}
	unknown := send("GET", "/v1/nothing/here")
	same("the catalog and a path no route takes", send("GET", "/v1/skills"), send("GET", "/v1/skillz"), "/v1/skills", "/v1/skillz")
	same("a catalog write and a path no route takes", send("DELETE", "/v1/skills/pdf"), send("DELETE", "/v1/nothing/here"), "/v1/skills/pdf", "/v1/nothing/here")
	same("tokens and a path no route takes", send("GET", "/v1/tokens"), unknown, "/v1/tokens", "/v1/nothing/here")
	// Its own session answers, with the methods it may call.
	if own := send("GET", "/v1/sessions/S"); own.Code != http.StatusOK {
		t.Errorf("its own session: %d %s", own.Code, own.Body)
	}
	if del := send("DELETE", "/v1/sessions/S"); del.Code != http.StatusMethodNotAllowed || del.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("closing its own session: %d %v %s; want 405 allowing GET, HEAD", del.Code, del.Header(), del.Body)
	}
}

// TestSessionCredentialActsForNoOneElse: X-Skillfs-As beside a session
// token is refused 403, on any route; beside a reader token it is taken
// for reads. A connection that is a credential of its own refuses an
// Authorization header and keeps its principal.
func TestSessionCredentialActsForNoOneElse(t *testing.T) {
	a := accessAPI()
	mux := stubMux(a, "")
	for _, path := range []string{"/v1/sessions/S/prompt", "/v1/skills", "/v1/nothing"} {
		r := requestOf("GET "+path, "S")
		r.Header.Set(api.ActAsHeader, "bob")
		rec := serve(a, mux, credential{"s", listenerToken, "Bearer " + tokenOfS}, r)
		if got := outcome(t, rec); got != outForbidden || !strings.Contains(rec.Body.String(), api.ActAsHeader) {
			t.Errorf("GET %s as bob with a session token: %s %s", path, got, rec.Body)
		}
	}
	r := requestOf("GET /v1/skills", "")
	r.Header.Set(api.ActAsHeader, "bob")
	if got := outcome(t, serve(a, mux, credential{"r", listenerToken, "Bearer " + readerToken}, r)); got != outAllowed {
		t.Errorf("a reader lists the catalog as bob: %s", got)
	}

	sandbox := WithPrincipal(context.Background(), Principal{Role: RoleSession, Session: "S", Via: ViaSandboxSocket})
	for _, c := range []credential{{"none", "", ""}, {"operator's", listenerToken, "Bearer " + listenerToken}} {
		r := requestOf("GET /v1/skills", "").WithContext(sandbox)
		if got := outcome(t, serve(a, mux, c, r)); c.auth == "" && got != outMissing || c.auth != "" && got != outForbidden {
			t.Errorf("the catalog on a session's own connection, with %s token: %s", c.name, got)
		}
		r = requestOf("GET /v1/sessions/{id}/prompt", "S").WithContext(sandbox)
		if got := outcome(t, serve(a, mux, c, r)); c.auth == "" && got != outAllowed || c.auth != "" && got != outForbidden {
			t.Errorf("its prompt on a session's own connection, with %s token: %s", c.name, got)
		}
	}
}

// TestConnHandlerNeedsItsPrincipal: on a listener whose connections are
// their own credential, a connection without its principal is refused,
// with or without a token, never taken for the operator's.
func TestConnHandlerNeedsItsPrincipal(t *testing.T) {
	a := accessAPI()
	h := a.ConnHandler()
	for _, auth := range []string{"", "Bearer " + listenerToken, "Bearer " + operatorToken} {
		r := httptest.NewRequest("GET", "/v1/whoami", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if got := outcome(t, rec); got != outUnauthorized {
			t.Errorf("a connection without its principal, Authorization %q: %s", auth, got)
		}
	}
	r := httptest.NewRequest("GET", "/v1/whoami", nil)
	r = r.WithContext(WithPrincipal(r.Context(), Principal{Role: RoleSession, Session: "S", Via: ViaSandboxSocket}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	var got api.Whoami
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK || got.Role != "session" || got.Session != "S" {
		t.Errorf("whoami on a connection of session S: %d %s", rec.Code, rec.Body)
	}
}

// TestWhoami: each credential is told what it proves.
func TestWhoami(t *testing.T) {
	a := accessAPI()
	h := a.Handler(listenerToken)
	for _, tc := range []struct {
		auth, as string
		want     api.Whoami
	}{
		{"Bearer " + listenerToken, "", api.Whoami{Role: "operator", User: "operator"}},
		{"Bearer " + listenerToken, "bob", api.Whoami{Role: "operator", User: "bob"}},
		{"Bearer " + operatorToken, "", api.Whoami{Role: "operator", User: "operator", Token: "ci"}},
		{"Bearer " + readerToken, "carol", api.Whoami{Role: "reader", User: "carol", Token: "dash"}},
		{"Bearer " + tokenOfS, "", api.Whoami{Role: "session", Session: "S", User: "alice"}},
	} {
		r := httptest.NewRequest("GET", "/v1/whoami", nil)
		r.Header.Set("Authorization", tc.auth)
		if tc.as != "" {
			r.Header.Set(api.ActAsHeader, tc.as)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var got api.Whoami
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK || got != tc.want {
			t.Errorf("whoami with %q as %q: %d %s, want %+v", tc.auth, tc.as, rec.Code, rec.Body, tc.want)
		}
	}
}
