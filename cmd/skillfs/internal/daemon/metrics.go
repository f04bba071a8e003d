package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the daemon's Prometheus metrics, in a registry of its own (not
// the process-wide default), served at GET /metrics. Counters the daemon
// moves itself live here; what other parts already count or the index
// already knows is read at scrape time (stateCollector).
type metrics struct {
	reg *prometheus.Registry

	opens       *prometheus.CounterVec // by skill
	activations *prometheus.CounterVec // by skill
	// skills are the slugs that have opens and activations series. An
	// open counts under the read lock and forgetGone removes under the
	// write lock, so no series is counted into once found gone (which
	// would leave it behind, unknown here).
	skillsMu sync.RWMutex
	skills   map[string]struct{}

	api *prometheus.HistogramVec // by route and status

	imports       *prometheus.CounterVec   // by stage and outcome
	importSeconds *prometheus.HistogramVec // by stage

	flushSeconds  prometheus.Histogram
	flushFailures prometheus.Counter

	busy *prometheus.CounterVec // by limit
}

// The limits a request may be refused at (busy's label).
const (
	limitStreams = "event_streams"
	limitDiffs   = "diff_memory"
)

// scrapeTimeout bounds the index query of one scrape.
const scrapeTimeout = 5 * time.Second

// Buckets of the latency histograms, in seconds: API calls on the socket
// take well under a millisecond, a git import minutes.
var (
	apiBuckets    = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	importBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	flushBuckets  = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
)

func newMetrics(d *Daemon) *metrics {
	m := &metrics{
		reg:    prometheus.NewRegistry(),
		skills: map[string]struct{}{},
		opens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skillfs_skill_opens_total",
			Help: "Opens of a skill's SKILL.md the daemon saw and recorded (every open with --count-opens; else the reads the kernel's cache did not serve, the first in each session among them)."},
			[]string{"skill"}),
		activations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skillfs_skill_activations_total",
			Help: "First activations of a skill: sessions whose first read of its SKILL.md the daemon recorded."},
			[]string{"skill"}),
		api: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "skillfs_api_request_duration_seconds",
			Help:    "API requests by route pattern and status, and how long they took (an event stream: how long it was open).",
			Buckets: apiBuckets}, []string{"route", "status"}),
		imports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skillfs_imports_total",
			Help: "Imports through the API by stage (prepare: POST /v1/drafts; confirm: POST /v1/drafts/{id}/confirm) and outcome (ok or the error code)."},
			[]string{"stage", "outcome"}),
		importSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "skillfs_import_duration_seconds",
			Help: "How long the import stages through the API took.", Buckets: importBuckets}, []string{"stage"}),
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "skillfs_activation_flush_duration_seconds",
			Help: "How long writing a batch of opens to the index took (successful or not).", Buckets: flushBuckets}),
		flushFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "skillfs_activation_flush_failures_total",
			Help: "Batches of opens the index refused or could not be reached for; their opens stay in memory and are retried, or go to the activation journal while it cannot be reached."}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skillfs_api_busy_total",
			Help: "Requests answered 503 busy at one of the daemon's limits: limit event_streams (a listener's --max-streams) or diff_memory (--diff-memory, comparing versions)."},
			[]string{"limit"}),
	}
	for _, l := range []string{limitStreams, limitDiffs} {
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
	journaled := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skillfs_activation_journal_records",
		Help: "Records of the activation journal not yet delivered to the index: first activations and batches of opens kept while it could not be reached, or refused at the last shutdown."},
		func() float64 {
			if d.rec == nil {
				return 0
			}
			return float64(d.rec.JournalRecords())
		})
	m.reg.MustRegister(m.opens, m.activations, m.api, m.imports, m.importSeconds, m.flushSeconds, m.flushFailures, journaled, m.busy,
		stateCollector{d},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves the metrics in the text format (or OpenMetrics when asked);
// a part that cannot be read is logged and left out, the rest served.
func (m *metrics) handler(log *slog.Logger) http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// opened counts an open the recorder recorded, and the activation when it
// was the skill's first in its session. A nil m counts nothing.
func (m *metrics) opened(slug string, first bool) {
	if m == nil {
		return
	}
	count := func() {
		m.opens.WithLabelValues(slug).Inc()
		if first {
			m.activations.WithLabelValues(slug).Inc()
		}
	}
	m.skillsMu.RLock()
	if _, ok := m.skills[slug]; ok {
		count()
		m.skillsMu.RUnlock()
		return
	}
	m.skillsMu.RUnlock()
	m.skillsMu.Lock()
	defer m.skillsMu.Unlock()
	m.skills[slug] = struct{}{}
	count()
}

// forgetGone removes the series of every skill that exists no more (a
// delete, here or on another host of the fleet), so that the skill label
// stays bounded by the catalog, and returns how many skills it forgot. A
// nil m forgets nothing.
func (m *metrics) forgetGone(exists func(slug string) bool) int {
	if m == nil {
		return 0
	}
	m.skillsMu.Lock()
	defer m.skillsMu.Unlock()
	n := 0
	for slug := range m.skills {
		if exists(slug) {
			continue
		}
		m.opens.DeleteLabelValues(slug)
		m.activations.DeleteLabelValues(slug)
		delete(m.skills, slug)
		n++
	}
	return n
}

// refused counts a request answered busy at limit.
func (m *metrics) refused(limit string) {
	if m == nil {
		return
	}
	m.busy.WithLabelValues(limit).Inc()
}

// flushed observes one batch written to the index (or refused).
func (m *metrics) flushed(took time.Duration, err error) {
	if m == nil {
		return
	}
	m.flushSeconds.Observe(took.Seconds())
	if err != nil {
		m.flushFailures.Inc()
	}
}

// importStage counts the requests of one import stage that h answers, by
// outcome: "ok", or the error code (ErrorCode) its status stands for.
func (m *metrics) importStage(stage string, h http.HandlerFunc) http.Handler {
	if m == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		m.imports.WithLabelValues(stage, outcomeOf(sw.status)).Inc()
		m.importSeconds.WithLabelValues(stage).Observe(time.Since(start).Seconds())
	})
}

// importOutcomes are the outcomes outcomeOf names.
var importOutcomes = []string{"ok", "invalid", "permission", "not_found", "conflict", "damaged", "internal"}

// outcomeOf names the outcome of a request by its status: "ok", else the
// error code ErrorCode gives that status.
func outcomeOf(status int) string {
	switch status {
	case 0, http.StatusOK:
		return "ok"
	case http.StatusBadRequest:
		return "invalid"
	case http.StatusForbidden:
		return "permission"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusServiceUnavailable:
		return "damaged"
	}
	return "internal"
}

// instrument counts the API requests h answers, by the pattern of the route
// mux chose (never the raw path: the label stays bounded) and status.
// Requests no route takes, and those refused before routing (a missing
// token), count under the route "unrouted" unless mux has a pattern for them.
func (m *metrics) instrument(mux *http.ServeMux, h http.Handler) http.Handler {
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

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
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

// stateCollector reads at scrape time what the daemon knows already: the
// sessions served, the FUSE requests the filesystem counts, and the sizes
// the index holds (one query; the store is never walked).
type stateCollector struct{ d *Daemon }

var (
	descSessions = prometheus.NewDesc("skillfs_sessions_open", "Sessions the mount serves.", nil, nil)
	descBinds    = prometheus.NewDesc("skillfs_binds", "Binds of open sessions (the session's view mounted at a target).", nil, nil)
	descSkills   = prometheus.NewDesc("skillfs_skills", "Skills in the catalog.", nil, nil)
	descVersions = prometheus.NewDesc("skillfs_store_versions", "Skill versions kept in the store.", nil, nil)
	descBytes    = prometheus.NewDesc("skillfs_store_bytes", "Bytes of the files of the versions kept in the store, as the index recorded them at install.", nil, nil)
	descFuseReqs = prometheus.NewDesc("skillfs_fuse_requests_total", "FUSE requests the kernel sent, by operation.", []string{"op"}, nil)
	descFuseErrs = prometheus.NewDesc("skillfs_fuse_request_errors_total",
		"FUSE requests answered with an error, by operation and errno (some are expected answers: see the README).", []string{"op", "errno"}, nil)
	descFetches      = prometheus.NewDesc("skillfs_content_fetches_total", "Versions fetched from the shared index into this host's store.", nil, nil)
	descFetchedBytes = prometheus.NewDesc("skillfs_content_fetched_bytes_total", "Bytes those fetches read from the shared index.", nil, nil)
	descFetchFails   = prometheus.NewDesc("skillfs_content_fetch_failures_total",
		"Fetches from the shared index that failed: the index unreachable, the content not stored or damaged.", nil, nil)
	descDamaged = prometheus.NewDesc("skillfs_content_damaged_total",
		"Copies of versions found not to hash to their name: this host's (never served again) or the shared index's (never published).", nil, nil)
	descConns = prometheus.NewDesc("skillfs_api_connections",
		"API connections open, by listener (socket, tcp).", []string{"listener"}, nil)
	descIdleClosed = prometheus.NewDesc("skillfs_api_idle_connections_closed_total",
		"Connections waiting for a request that were closed to make room for a new client at the listener's cap.", []string{"listener"}, nil)
	descStreams = prometheus.NewDesc("skillfs_event_streams",
		"Event streams open, by listener.", []string{"listener"}, nil)
	descDiffBytes = prometheus.NewDesc("skillfs_diff_memory_bytes",
		"Bytes the comparisons of versions running now were granted (what their files' sizes say they hold at most), at most --diff-memory.", nil, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSessions, descBinds, descSkills, descVersions, descBytes, descFuseReqs, descFuseErrs,
		descFetches, descFetchedBytes, descFetchFails, descDamaged, descConns, descIdleClosed, descStreams, descDiffBytes} {
		ch <- d
	}
}

// Collect reads what exists: before the mount is made (or without a
// catalog) those parts are left out.
func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	if srv := c.d.fs; srv != nil {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(srv.NumSessions()))
		for op, n := range srv.Requests() {
			ch <- prometheus.MustNewConstMetric(descFuseReqs, prometheus.CounterValue, float64(n), op)
		}
		for op, byErrno := range srv.RequestErrors() {
			for errno, n := range byErrno {
				ch <- prometheus.MustNewConstMetric(descFuseErrs, prometheus.CounterValue, float64(n), op, errno)
			}
		}
	}
	c.collectLimits(ch)
	if c.d.cat == nil {
		return
	}
	st := c.d.cat.ContentStats()
	for d, v := range map[*prometheus.Desc]int64{descFetches: st.Fills, descFetchedBytes: st.FillBytes,
		descFetchFails: st.FillFailures, descDamaged: st.Damaged} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	t, err := c.d.cat.DB().Totals(ctx)
	if err != nil {
		for _, d := range []*prometheus.Desc{descBinds, descSkills, descVersions, descBytes} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	for d, v := range map[*prometheus.Desc]float64{descBinds: float64(t.Binds), descSkills: float64(t.Skills),
		descVersions: float64(t.Versions), descBytes: float64(t.Bytes)} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
}

// collectLimits reads what the API's limits hold: each listener's
// connections and event streams, and the memory granted to comparisons.
func (c stateCollector) collectLimits(ch chan<- prometheus.Metric) {
	if ls := c.d.listeners.Load(); ls != nil {
		for _, l := range *ls {
			ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(l.conns.Open()), l.name)
			ch <- prometheus.MustNewConstMetric(descIdleClosed, prometheus.CounterValue, float64(l.conns.evicted.Load()), l.name)
			ch <- prometheus.MustNewConstMetric(descStreams, prometheus.GaugeValue, float64(l.streams.open.Load()), l.name)
		}
	}
	if g := c.d.diffs; g != nil {
		ch <- prometheus.MustNewConstMetric(descDiffBytes, prometheus.GaugeValue, float64(g.held.Load()))
	}
}
