// Package server is the daemon's HTTP API: the handlers of its routes, the
// event streams, the HTTP metrics and the listeners with their limits. It
// serves what its dependencies do, each a small interface declared here
// (Sessions, Queries, Skills, Events, ...): the daemon and the catalog
// implement them, and a test can serve one handler over a fake. The wire
// types, the OpenAPI document and the client are package api's.
package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/events"
	"skillfs/index"
	"skillfs/skills"
	"skillfs/skills/diff"
)

// Sessions are the calls that make, change and close the sessions this
// host serves, and apply catalog changes to them.
type Sessions interface {
	CreateSession(ctx context.Context, req api.CreateRequest) (*api.SessionInfo, error)
	SessionInfo(ctx context.Context, id string) (*api.SessionInfo, error)
	// Sessions lists at most limit open sessions after session after that
	// q matches.
	Sessions(ctx context.Context, q api.SessionQuery, after string, limit int) ([]*api.SessionInfo, error)
	SetSkills(ctx context.Context, id string, req api.SetRequest) (*api.SessionInfo, error)
	Refresh(ctx context.Context, id string) (*api.SessionInfo, error)
	CloseSession(ctx context.Context, id string) error
	// SessionClosed says whether session id, open or closed, is closed.
	SessionClosed(ctx context.Context, id string) (bool, error)
	// Reevaluate applies catalog changes to every session served here.
	Reevaluate(ctx context.Context) error
	// DeleteUser deletes a user, closing their sessions when force is set.
	DeleteUser(ctx context.Context, as, uid, to string, force bool) (*catalog.UserDeleted, error)
}

// Binds put a session's view at a target, in this or a sandbox's mount
// namespace (pid 0: the daemon's own), with the session's API socket beside
// it when asked (skills.Bind.APISocket), and take them away.
type Binds interface {
	Bind(ctx context.Context, id string, b skills.Bind) (skills.Bind, error)
	Unbind(ctx context.Context, id, target string, pid int) error
}

// Fleet is this host among the hosts of its catalog.
type Fleet interface {
	Hosts(ctx context.Context) ([]api.HostInfo, error)
	Move(ctx context.Context, id string, force bool) (*api.Moved, error)
}

// Queries are what an agent's tooling asks of a session.
type Queries interface {
	Activations(ctx context.Context, id string) (*api.Activations, error)
	Audit(ctx context.Context, id string) ([]skills.FileRead, error)
	Prompt(ctx context.Context, id, format string) (string, error)
	Mentions(ctx context.Context, id, text string) ([]api.Mention, error)
	Resolve(ctx context.Context, id, uri string) (*api.Resolved, error)
	// Turn is what a session's agent gets for one turn of its own.
	Turn(ctx context.Context, id string, req api.TurnRequest) (*api.Turn, error)
	// Globs says which of a session's skills apply to each of paths.
	Globs(ctx context.Context, id string, paths []string) (*api.Globs, error)
}

// Health is the daemon's state.
type Health interface {
	SessionsServed() int
	Status(ctx context.Context) (*api.Status, error)
	Ready(ctx context.Context) api.Readiness
}

// Skills are the catalog's calls on its skills, as user as ("" for the
// operator) makes them.
type Skills interface {
	List(ctx context.Context, as string) ([]*skills.Skill, error)
	Show(ctx context.Context, as, slug string) (*catalog.Detail, error)
	ExportPath(ctx context.Context, as, slug, version string) (string, error)
	Versions(ctx context.Context, as, slug string) ([]catalog.VersionInfo, error)
	DiffEach(ctx context.Context, as, slug, a, b string, text bool,
		start func(*catalog.Diff) error, each func(*diff.FileChange) error) (diff.Stat, error)
	Rollback(ctx context.Context, as, slug, version string) (*catalog.Installed, error)
	Update(ctx context.Context, req catalog.UpdateRequest) (*catalog.UpdateResult, error)
	SetEnabled(ctx context.Context, as, slug string, enabled bool) (*skills.Skill, error)
	Delete(ctx context.Context, as, slug string) error
	Deps(ctx context.Context, as, slug string, skillDeps, tools, mcps []string) (*skills.Skill, error)
	Share(ctx context.Context, as, slug string, sh skills.Share) (*skills.Skill, error)
	Edit(ctx context.Context, as, slug, rel string, content io.Reader) (*catalog.Installed, error)
}

// Drafts are the two-step install: prepare, then confirm or discard.
type Drafts interface {
	PrepareUpload(ctx context.Context, req catalog.ImportRequest, kind, name string, body io.Reader) (*catalog.Draft, error)
	Prepare(ctx context.Context, req catalog.ImportRequest) (*catalog.Draft, error)
	Confirm(ctx context.Context, as, id string, share *skills.Share) (*catalog.ImportResult, error)
	Discard(ctx context.Context, as, id string) error
}

// Curated are the curated sources and the recommended list.
type Curated interface {
	CuratedSources(ctx context.Context, as string) ([]skills.CuratedSource, error)
	AddCurated(ctx context.Context, req catalog.CuratedRequest) (*skills.CuratedSource, error)
	RemoveCurated(ctx context.Context, as, source string) error
	RefreshCurated(ctx context.Context, req catalog.CuratedRequest) ([]skills.CuratedSource, error)
	Entries(ctx context.Context, as string) ([]catalog.Entry, error)
	Curated(ctx context.Context, as string) ([]skills.CuratedSkill, error)
	InstallCurated(ctx context.Context, req catalog.CuratedRequest) (*catalog.ImportResult, error)
}

// Events are what the event streams read: the live events (events.Hub)
// and the log they are in.
type Events interface {
	Subscribe(session string) *events.Subscriber
	Unsubscribe(*events.Subscriber)
	Events(ctx context.Context, session string, after int64, limit int) (*index.EventPage, error)
	LastEventID(ctx context.Context) (int64, error)
}

// Config are the API's dependencies. A handler whose dependency is nil must
// not be called (tests leave out what they do not serve).
type Config struct {
	Sessions Sessions
	Binds    Binds
	Fleet    Fleet
	Queries  Queries
	Health   Health
	Skills   Skills
	Drafts   Drafts
	Curated  Curated
	Events   Events
	Installs Installs
	// Credentials are the session and platform tokens (nil: only the
	// socket and the TCP listener's own token are credentials).
	Credentials Credentials
	// Parents are the sessions' parents (nil: a session credential reaches
	// its own session only, never a child's).
	Parents Parents
	// SharedIndex says the index is shared with other hosts: the streams
	// then send every event from the log (see eventStream.fromLog).
	SharedIndex bool
	// KeepAlive is how often an idle event stream gets a comment line,
	// and its credential is checked again (0: DefaultKeepAlive).
	KeepAlive time.Duration
	// Metrics counts the requests (nil: nothing), Gatherer is what
	// GET /metrics serves (nil: 404).
	Metrics  *Metrics
	Gatherer prometheus.Gatherer
	Log      *slog.Logger
}

// API is the HTTP API over its dependencies.
type API struct {
	Config
	metricsHandler http.Handler
	streams        openStreams // the event streams open with a token
}

// New is the API over cfg.
func New(cfg Config) *API {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	a := &API{Config: cfg, metricsHandler: metricsHandler(cfg.Gatherer, cfg.Log)}
	return a
}

// Mux is the API's ServeMux, keeping the pattern of every route
// registered on it, so that they can be compared with the document.
type Mux struct {
	*http.ServeMux
	patterns []string
	// guard puts a route's access (routeAccess) in front of its handler.
	guard func(pattern string, h http.Handler) http.Handler
}

// Handle registers h at pattern, behind the route's access.
func (m *Mux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	if m.guard != nil {
		h = m.guard(pattern, h)
	}
	m.ServeMux.Handle(pattern, h)
}

// HandleFunc registers h at pattern.
func (m *Mux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// Patterns are the patterns of the routes registered, in their order.
func (m *Mux) Patterns() []string { return append([]string(nil), m.patterns...) }

// Routes is the API's routes: every route of the document, and a
// catch-all answering those it has not in the error shape.
func (a *API) Routes() *Mux {
	mux := a.newMux()
	a.serviceRoutes(mux)
	a.sessionRoutes(mux)
	a.installRoutes(mux)
	a.catalogRoutes(mux)
	a.curatedRoutes(mux)
	a.tokenRoutes(mux)
	a.catchAll(mux)
	return mux
}

// newMux is an empty Mux whose routes are put behind their access.
func (a *API) newMux() *Mux {
	mux := &Mux{ServeMux: http.NewServeMux()}
	mux.guard = func(pattern string, h http.Handler) http.Handler { return a.guard(mux.ServeMux, pattern, h) }
	return mux
}

// catchAll answers what no route of mux takes (unrouted). It is no route
// of the document: it is left out of the patterns.
func (a *API) catchAll(mux *Mux) {
	mux.ServeMux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { a.unrouted(mux.ServeMux, w, r) })
}

// Handler is the JSON HTTP API, behind the authentication (see
// authenticate) and each route's access (routeAccess). With a token it is
// the TCP listener's: every request carries a bearer token, the
// listener's own or another credential. Without, it is the Unix socket's,
// whose 0600 mode makes a request without a token the operator's.
func (a *API) Handler(token string) http.Handler {
	if token == "" {
		return a.handler(a.Routes(), ViaSocket, "")
	}
	return a.handler(a.Routes(), ViaTCP, token)
}

// ConnHandler is the API for a listener whose every connection is a
// credential of its own (a session's socket in its sandbox): its
// ConnContext puts the connection's principal in (WithPrincipal). A request
// on a connection without one is refused 401, never taken for the
// operator's.
func (a *API) ConnHandler() http.Handler { return a.handler(a.Routes(), ViaSandboxSocket, "") }

// handler is the API over the routes of mux, for a listener reached via
// via, whose own token is token ("" for none).
func (a *API) handler(mux *Mux, via, token string) http.Handler {
	return a.Metrics.instrument(mux.ServeMux, a.authenticate(via, token, mux))
}

// serviceRoutes are the daemon's own: its document, health, status,
// readiness and metrics, and the word that the catalog changed.
func (a *API) serviceRoutes(mux *Mux) {
	mux.HandleFunc("GET /v1/openapi.json", a.openAPI)
	mux.HandleFunc("GET /v1/health", a.health)
	mux.HandleFunc("GET /v1/status", a.status)
	mux.HandleFunc("GET /v1/ready", a.ready)
	mux.HandleFunc("POST /v1/catalog/changed", a.catalogChanged)
	mux.HandleFunc("GET /v1/hosts", a.hosts)
	mux.Handle("GET /metrics", a.metricsHandler)
}

func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(api.OpenAPI)
}

func (a *API) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{OK: true, Sessions: a.Health.SessionsServed()})
}

func (a *API) status(w http.ResponseWriter, r *http.Request) {
	st, err := a.Health.Status(r.Context())
	reply(w, st, err)
}

// ready answers the readiness checks: 200 when all pass, else 503 in the
// error shape with the checks.
func (a *API) ready(w http.ResponseWriter, r *http.Request) {
	rd := a.Health.Ready(r.Context())
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
	writeJSON(w, http.StatusServiceUnavailable, api.NotReady{
		Error:     api.Error{Error: "not ready: " + strings.Join(why, "; "), Code: "unavailable"},
		Readiness: rd})
}

func (a *API) catalogChanged(w http.ResponseWriter, r *http.Request) {
	if err := a.Sessions.Reevaluate(r.Context()); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Ok{OK: true})
}

func (a *API) hosts(w http.ResponseWriter, r *http.Request) {
	list, err := a.Fleet.Hosts(r.Context())
	reply(w, list, err)
}
