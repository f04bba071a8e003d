package server

import (
	"log/slog"
	"net/http"
	"skillfs/skills"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the API's Prometheus metrics: its requests by route and
// status, the import stages, the requests refused busy, and what the
// listeners' limits hold. They go into the daemon's registry (NewMetrics).
// A nil *Metrics counts nothing.
type Metrics struct {
	api           *prometheus.HistogramVec // by route and status
	imports       *prometheus.CounterVec   // by stage and outcome
	importSeconds *prometheus.HistogramVec // by stage
	busy          *prometheus.CounterVec   // by limit

	listeners atomic.Pointer[[]*listenerLimits] // the API's, read at scrape time
}

// The limits a request may be refused at (skillfs_api_busy_total's label).
const (
	LimitStreams = "event_streams"
	LimitDiffs   = "diff_memory"
	LimitGlobs   = "globs"
	// LimitSandboxReads: the reads of paths in sandboxes outstanding,
	// on the host or of one user (a session's install).
	LimitSandboxReads = "sandbox_reads"
)

// Buckets of the latency histograms, in seconds: API calls on the socket
// take well under a millisecond, a git import minutes.
var (
	apiBuckets    = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	importBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

// NewMetrics makes the API's metrics and registers them in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		api: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "skillfs_api_request_duration_seconds",
			Help:    "API requests by route pattern and status, and how long they took (an event stream: how long it was open).",
			Buckets: apiBuckets}, []string{"route", "status"}),
		imports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skillfs_imports_total",
			Help: "Imports through the API by stage (prepare: POST /v1/drafts; confirm: POST /v1/drafts/{id}/confirm) and outcome (ok or the error code)."},
			[]string{"stage", "outcome"}),
		importSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "skillfs_import_duration_seconds",
			Help: "How long the import stages through the API took.", Buckets: importBuckets}, []string{"stage"}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skillfs_api_busy_total",
			Help: "Requests answered 503 busy at one of the daemon's limits: limit event_streams (a listener's --max-streams) diff_memory (--diff-memory, comparing versions), globs (globs requests running at once) or sandbox_reads (a session's install of a path, while the reads of sandbox paths outstanding are at the host's or the user's cap)."},
			[]string{"limit"}),
	}
	for _, l := range []string{LimitStreams, LimitDiffs, LimitGlobs, LimitSandboxReads} {
		m.busy.WithLabelValues(l)
	}
	// The import series exist from the start, at 0: a rate over them
	// needs no first import to be defined.
	for _, stage := range []string{"prepare", "confirm"} {
		m.importSeconds.WithLabelValues(stage)
		for _, outcome := range importOutcomes {
			m.imports.WithLabelValues(stage, outcome)
		}
	}
	reg.MustRegister(m.api, m.imports, m.importSeconds, m.busy, listenerCollector{m})
	return m
}

// metricsHandler serves the metrics of g in the text format (or
// OpenMetrics when asked); a part that cannot be read is logged and left
// out, the rest served. Without g it answers 404.
func metricsHandler(g prometheus.Gatherer, log *slog.Logger) http.Handler {
	if g == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// Refused counts a request answered busy at limit.
func (m *Metrics) Refused(limit string) {
	if m == nil {
		return
	}
	m.busy.WithLabelValues(limit).Inc()
}

// addListener keeps the limits of a listener for the scrapes.
func (m *Metrics) addListener(lim *listenerLimits) {
	if m == nil {
		return
	}
	var all []*listenerLimits
	if old := m.listeners.Load(); old != nil {
		all = append(all, *old...)
	}
	all = append(all, lim)
	m.listeners.Store(&all)
}

// importStage counts the requests of one import stage that h answers, by
// outcome: "ok", or the code of the error it answered (see writeErr).
func (m *Metrics) importStage(stage string, h http.HandlerFunc) http.Handler {
	if m == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		outcome := sw.code
		switch {
		case outcome != "":
		case sw.status >= http.StatusBadRequest:
			outcome = skills.ClassInternal.Name // an answer not in the error shape
		default:
			outcome = "ok"
		}
		m.imports.WithLabelValues(stage, outcome).Inc()
		m.importSeconds.WithLabelValues(stage).Observe(time.Since(start).Seconds())
	})
}

// importOutcomes are the outcomes an import is counted under: "ok" and
// every error code.
var importOutcomes = func() []string {
	out := []string{"ok"}
	for _, c := range skills.Classes {
		out = append(out, c.Name)
	}
	return out
}()

// instrument counts the API requests h answers, by the pattern of the route
// mux chose (never the raw path: the label stays bounded) and status.
// Requests no route takes, and those refused before routing (a missing
// token), count under the route "unrouted" unless mux has a pattern for them.
func (m *Metrics) instrument(mux *http.ServeMux, h http.Handler) http.Handler {
	if m == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		// Counted even when the handler cuts its answer short (a panic of
		// http.ErrAbortHandler).
		defer func() {
			route := r.Pattern // set by mux on this request
			if route == "" {
				_, route = mux.Handler(r)
			}
			if route == "" || route == "/" {
				route = "unrouted"
			}
			m.api.WithLabelValues(route, sw.statusText()).Observe(time.Since(start).Seconds())
		}()
		h.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status a handler answered, and the code of
// the error it answered (writeErr), if any.
type statusWriter struct {
	http.ResponseWriter
	status int
	code   string
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush keeps the event streams working through the wrapper.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) statusText() string {
	if w.status == 0 {
		return "200" // a handler that wrote nothing answers 200
	}
	return strconv.Itoa(w.status)
}

// listenerCollector reads at scrape time what the listeners' limits hold:
// each listener's connections and event streams.
type listenerCollector struct{ m *Metrics }

var (
	descConns = prometheus.NewDesc("skillfs_api_connections",
		"API connections open, by listener (socket, tcp).", []string{"listener"}, nil)
	descIdleClosed = prometheus.NewDesc("skillfs_api_idle_connections_closed_total",
		"Connections waiting for a request that were closed to make room for a new client at the listener's cap.", []string{"listener"}, nil)
	descStreams = prometheus.NewDesc("skillfs_event_streams",
		"Event streams open, by listener.", []string{"listener"}, nil)
)

func (c listenerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConns, descIdleClosed, descStreams} {
		ch <- d
	}
}

func (c listenerCollector) Collect(ch chan<- prometheus.Metric) {
	ls := c.m.listeners.Load()
	if ls == nil {
		return
	}
	for _, l := range *ls {
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(l.conns.Open()), l.name)
		ch <- prometheus.MustNewConstMetric(descIdleClosed, prometheus.CounterValue, float64(l.conns.evicted.Load()), l.name)
		ch <- prometheus.MustNewConstMetric(descStreams, prometheus.GaugeValue, float64(l.streams.open.Load()), l.name)
	}
}
