package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"skillfs/cmd/skillfs/internal/server"
)

// metrics are the daemon's Prometheus metrics, in a registry of its own (not
// the process-wide default), served at GET /metrics with the API's
// (server.Metrics). Counters the daemon moves itself live here; what other
// parts already count or the index already knows is read at scrape time
// (stateCollector).
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

	flushSeconds  prometheus.Histogram
	flushFailures prometheus.Counter

	installs *prometheus.CounterVec // sessions' installs, by source kind and outcome

	http *server.Metrics // the API's, in the same registry
}

// scrapeTimeout bounds the index query of one scrape.
const scrapeTimeout = 5 * time.Second

// flushBuckets are the buckets of the flush latency histogram, in seconds.
var flushBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

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
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "skillfs_activation_flush_duration_seconds",
			Help: "How long writing a batch of opens to the index took (successful or not).", Buckets: flushBuckets}),
		flushFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "skillfs_activation_flush_failures_total",
			Help: "Batches of opens the index refused or could not be reached for; their opens stay in memory and are retried, or go to the activation journal while it cannot be reached."}),
		installs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skillfs_session_installs_total",
			Help: "Installs sessions asked for (POST /v1/sessions/{id}/skills), by source kind (path, git, upload) and outcome (ok, quota, or the error code)."},
			[]string{"kind", "outcome"}),
	}
	journaled := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skillfs_activation_journal_records",
		Help: "Records of the activation journal not yet delivered to the index: first activations and batches of opens kept while it could not be reached, or refused at the last shutdown."},
		func() float64 {
			if d.rec == nil {
				return 0
			}
			return float64(d.rec.JournalRecords())
		})
	sockets := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "skillfs_api_sockets",
		Help: "Session API sockets this daemon serves in sandboxes (binds made with an API socket)."},
		func() float64 { return float64(d.sockets.count()) })
	m.reg.MustRegister(m.opens, m.activations, m.flushSeconds, m.flushFailures, m.installs, journaled, sockets,
		stateCollector{d},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.http = server.NewMetrics(m.reg)
	return m
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

// stateCollector reads at scrape time what the daemon knows already: the
// sessions served, the FUSE requests the filesystem counts, the memory
// granted to comparisons, and the sizes the index holds (one query; the
// store is never walked).
type stateCollector struct{ d *Daemon }

var (
	descSessions = prometheus.NewDesc("skillfs_sessions_open", "Sessions the mount serves.", nil, nil)
	descBinds    = prometheus.NewDesc("skillfs_binds", "Binds of open sessions (the session's view mounted at a target).", nil, nil)
	descSkills   = prometheus.NewDesc("skillfs_skills", "Skills in the catalog.", nil, nil)
	descVersions = prometheus.NewDesc("skillfs_store_versions", "Skill versions kept in the store.", nil, nil)
	descBytes    = prometheus.NewDesc("skillfs_store_bytes", "Bytes of the files of the versions kept in the store, as the index recorded them at install.", nil, nil)
	descFuseReqs = prometheus.NewDesc("skillfs_fuse_requests_total", "FUSE requests the kernel sent, by operation.", []string{"op"}, nil)
	descFuseErrs = prometheus.NewDesc("skillfs_fuse_request_errors_total",
		"FUSE requests answered with an error, by operation and errno (some are expected answers: see the metrics in cmd/skillfs/api/API.md).", []string{"op", "errno"}, nil)
	descFetches      = prometheus.NewDesc("skillfs_content_fetches_total", "Versions fetched from the shared index into this host's store.", nil, nil)
	descFetchedBytes = prometheus.NewDesc("skillfs_content_fetched_bytes_total", "Bytes those fetches read from the shared index.", nil, nil)
	descFetchFails   = prometheus.NewDesc("skillfs_content_fetch_failures_total",
		"Fetches from the shared index that failed: the index unreachable, the content not stored or damaged.", nil, nil)
	descDamaged = prometheus.NewDesc("skillfs_content_damaged_total",
		"Copies of versions found not to hash to their name: this host's (never served again) or the shared index's (never published).", nil, nil)
	descDiffBytes = prometheus.NewDesc("skillfs_diff_memory_bytes",
		"Bytes the comparisons of versions running now were granted (what their files' sizes say they hold at most), at most --diff-memory.", nil, nil)
)

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSessions, descBinds, descSkills, descVersions, descBytes, descFuseReqs, descFuseErrs,
		descFetches, descFetchedBytes, descFetchFails, descDamaged, descDiffBytes} {
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
	if g := c.d.diffs; g != nil {
		ch <- prometheus.MustNewConstMetric(descDiffBytes, prometheus.GaugeValue, float64(g.held.Load()))
	}
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
	t, err := c.d.db.Totals(ctx)
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
