package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"skillfs/cmd/skillfs/internal/activation/activationtest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/cmd/skillfs/internal/events"
	"skillfs/skills"
)

// series returns the value of every series the registry of m gathers, keyed
// by name and labels sorted by label name (`skillfs_binds`,
// `skillfs_imports_total{outcome=ok,stage=prepare}`); a histogram gives
// its count under name_count.
func series(t testing.TB, m *metrics) map[string]float64 {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			key := f.GetName()
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				key += "_count"
				out[key+braced(labels)] = float64(s.GetHistogram().GetSampleCount())
			case dto.MetricType_COUNTER:
				out[key+braced(labels)] = s.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key+braced(labels)] = s.GetGauge().GetValue()
			}
		}
	}
	return out
}

func braced(labels []string) string {
	if len(labels) == 0 {
		return ""
	}
	return "{" + strings.Join(labels, ",") + "}"
}

// wantSeries fails for every series in want whose value differs in got (a
// missing series counts as 0).
func wantSeries(t testing.TB, got, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// TestMetricsCountWhatTheRecorderRecords: opens and first activations by
// skill move exactly with what the recorder records, in the index or
// pending: an open the recorder refuses counts nothing; a failed flush
// counts a failure and keeps the opens counted once.
func TestMetricsCountWhatTheRecorderRecords(t *testing.T) {
	ctx := context.Background()
	db := activationtest.OpenDB(t)
	if err := db.CreateSession(ctx, &skills.Session{ID: "s2", UID: "bob", Requested: []string{}, Preload: []string{},
		Pins: []skills.Pin{}, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	m := newMetrics(&Daemon{})
	r := newRecorder(db, events.NewHub(db), slog.New(slog.DiscardHandler), m)
	for _, o := range []struct{ session, slug string }{
		{"s1", "a"}, {"s1", "a"}, {"s1", "b"}, {"s1", "a"}, {"s2", "a"}, {"s2", "a"},
	} {
		if err := r.Opened(o.session, o.slug); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Opened("no-such-session", "a"); err == nil {
		t.Fatal("an open in an unknown session was recorded")
	}
	want := map[string]float64{
		"skillfs_skill_opens_total{skill=a}":       5,
		"skillfs_skill_opens_total{skill=b}":       1,
		"skillfs_skill_activations_total{skill=a}": 2,
		"skillfs_skill_activations_total{skill=b}": 1,
	}
	recorded := func() map[string]float64 {
		out := map[string]float64{}
		for _, s := range []string{"s1", "s2"} {
			acts, err := r.Activations(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range acts {
				out["skillfs_skill_opens_total{skill="+a.Slug+"}"] += float64(a.Opens)
				out["skillfs_skill_activations_total{skill="+a.Slug+"}"]++
			}
		}
		return out
	}
	wantSeries(t, recorded(), want) // the workload is what the recorder holds
	wantSeries(t, series(t, m), want)

	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r.Opened("s1", "b")
	db.Close()
	if err := r.Flush(ctx); err == nil {
		t.Fatal("flush into a closed index succeeded")
	}
	want["skillfs_skill_opens_total{skill=b}"]++
	want["skillfs_activation_flush_duration_seconds_count"] = 2
	want["skillfs_activation_flush_failures_total"] = 1
	wantSeries(t, series(t, m), want)
}

// TestAPIMetrics: GET /metrics serves the daemon's registry on the socket's
// routes and behind the token on the TCP listener's; requests count by the
// route's pattern and status (refused ones and unrouted ones too), import
// stages by outcome, and the gauges read the mount and the index.
func TestAPIMetrics(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	install(t, d, "name: x\ndescription: one skill", skills.ScopeGlobal)
	install(t, d, "name: y\ndescription: another skill", skills.ScopeGlobal)
	info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{"x", "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.db.AddBind(ctx, info.ID, d.host, skills.Bind{Target: "/sandbox/skills"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := os.ReadFile(filepath.Join(d.fs.Mountpoint(), info.ID, "x", "SKILL.md")); err != nil {
			t.Fatal(err)
		}
	}

	sock, tcp := d.http.Handler(""), d.http.Handler("tok")
	do := func(h http.Handler, method, path, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, c := range []struct {
		h             http.Handler
		method, path  string
		token         string
		status, times int
	}{
		{sock, "GET", "/v1/sessions/" + info.ID, "", 200, 3},
		{sock, "GET", "/v1/sessions/nope", "", 404, 1},
		{sock, "GET", "/v1/nope", "", 404, 2},
		{sock, "DELETE", "/v1/health", "", 405, 1},
		{tcp, "GET", "/v1/health", "", 401, 1},
		{tcp, "GET", "/metrics", "wrong", 401, 1},
		{tcp, "GET", "/v1/health", "tok", 200, 1},
	} {
		for range c.times {
			if rec := do(c.h, c.method, c.path, c.token); rec.Code != c.status {
				t.Fatalf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.status)
			}
		}
	}
	code, _ := post(t, d, "/v1/drafts", "", "application/json", []byte("{"))
	if code != http.StatusBadRequest {
		t.Fatalf("a draft from a broken body: %d", code)
	}
	code, dr := post(t, d, "/v1/drafts", "", "text/markdown", []byte("---\nname: z\ndescription: uploaded\n---\nbody\n"))
	if code != http.StatusOK {
		t.Fatalf("a draft from a SKILL.md: %d %v", code, dr)
	}
	if code, out := post(t, d, "/v1/drafts/"+fmt.Sprint(dr["draft"])+"/confirm", "", "application/json", []byte(`{"share":"global"}`)); code != http.StatusOK {
		t.Fatalf("confirm: %d %v", code, out)
	}

	versions, err := d.db.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	for _, slug := range []string{"x", "y", "z"} {
		det, err := d.cat.Show(ctx, "", slug)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range det.Versions {
			bytes += v.Bytes
		}
	}
	got := series(t, d.metrics)
	wantSeries(t, got, map[string]float64{
		"skillfs_sessions_open":                    1,
		"skillfs_binds":                            1,
		"skillfs_skills":                           3,
		"skillfs_store_versions":                   float64(versions.Versions),
		"skillfs_store_bytes":                      float64(bytes),
		"skillfs_skill_opens_total{skill=x}":       1,
		"skillfs_skill_activations_total{skill=x}": 1,

		"skillfs_api_request_duration_seconds_count{route=GET /v1/sessions/{id},status=200}": 3,
		"skillfs_api_request_duration_seconds_count{route=GET /v1/sessions/{id},status=404}": 1,
		"skillfs_api_request_duration_seconds_count{route=unrouted,status=404}":              2,
		"skillfs_api_request_duration_seconds_count{route=unrouted,status=405}":              1,
		"skillfs_api_request_duration_seconds_count{route=GET /v1/health,status=401}":        1,
		"skillfs_api_request_duration_seconds_count{route=GET /metrics,status=401}":          1,
		"skillfs_api_request_duration_seconds_count{route=GET /v1/health,status=200}":        1,
		"skillfs_api_request_duration_seconds_count{route=POST /v1/drafts,status=400}":       1,
		"skillfs_api_request_duration_seconds_count{route=POST /v1/drafts,status=200}":       1,
		"skillfs_imports_total{outcome=invalid,stage=prepare}":                               1,
		"skillfs_imports_total{outcome=ok,stage=prepare}":                                    1,
		"skillfs_imports_total{outcome=ok,stage=confirm}":                                    1,
		"skillfs_import_duration_seconds_count{stage=prepare}":                               2,
		"skillfs_import_duration_seconds_count{stage=confirm}":                               1,
	})
	if versions.Versions != 3 || bytes == 0 {
		t.Errorf("the catalog holds %d versions of %d bytes, want 3 and some", versions.Versions, bytes)
	}
	if got["skillfs_fuse_requests_total{op=READ}"] == 0 || got["skillfs_fuse_requests_total{op=LOOKUP}"] == 0 {
		t.Errorf("FUSE requests after reads through the mount: %v", got)
	}

	// The scrape itself, on the socket's routes and with the token on the
	// TCP listener's: the text format, the Go and process collectors too.
	for _, h := range []struct {
		h     http.Handler
		token string
	}{{sock, ""}, {tcp, "tok"}} {
		rec := do(h.h, "GET", "/metrics", h.token)
		body := rec.Body.String()
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
			t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Header().Get("Content-Type"))
		}
		for _, line := range []string{"skillfs_sessions_open 1\n", `skillfs_skill_activations_total{skill="x"} 1` + "\n",
			"go_goroutines ", "process_resident_memory_bytes "} {
			if !strings.Contains(body, line) {
				t.Errorf("GET /metrics lacks %q", line)
			}
		}
	}
}

// BenchmarkMetricsScrape serves GET /metrics on a catalog of
// SKILLFS_SCALE_SKILLS skills (default 10,000), before any skill was opened
// and once every one was opened and activated (the largest label sets the
// catalog allows), and runs the scrape's one index query alone: the
// store's size comes from the index, never a walk of the store.
func BenchmarkMetricsScrape(b *testing.B) {
	n := scaleSkills()
	d := newTestDaemon(b)
	scaleCatalog(b, d, n)
	h := d.http.Handler("")
	scrape := func(b *testing.B) {
		var size int
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			if rec.Code != http.StatusOK {
				b.Fatalf("GET /metrics: %d", rec.Code)
			}
			size = rec.Body.Len()
		}
		b.ReportMetric(float64(size), "scrape-bytes")
	}
	b.Run("index-query", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.db.Totals(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("none-opened", scrape)
	for i := range n {
		d.metrics.opened(fmt.Sprintf("s%05d", i), true)
	}
	b.Run("all-activated", scrape)
}

// skillSeries counts the series of the skill label (skillfs_skill_*).
func skillSeries(t testing.TB, m *metrics) int {
	t.Helper()
	n := 0
	for k := range series(t, m) {
		if strings.HasPrefix(k, "skillfs_skill_") {
			n++
		}
	}
	return n
}

// TestDeletedSkillsLeaveNoSeries: rounds of install, read, delete through
// the API leave the skill series as they were before the first round; the
// series of a skill that stays are kept, with their counts.
func TestDeletedSkillsLeaveNoSeries(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	install(t, d, "name: keep\ndescription: stays", skills.ScopeGlobal)
	keep, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{"keep"}})
	if err != nil {
		t.Fatal(err)
	}
	readSKILL(t, d, keep.ID, "keep")
	baseline := skillSeries(t, d.metrics)
	if baseline != 2 {
		t.Fatalf("%d skill series after reading one skill, want its opens and activations", baseline)
	}
	h := d.http.Handler("")
	const rounds = 20
	for i := range rounds {
		slug := fmt.Sprintf("gone%02d", i)
		install(t, d, "name: "+slug+"\ndescription: deleted again", skills.ScopeGlobal)
		s, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{slug}})
		if err != nil {
			t.Fatal(err)
		}
		readSKILL(t, d, s.ID, slug)
		if n := skillSeries(t, d.metrics); n != baseline+2 {
			t.Fatalf("round %d: %d skill series with %s read, want %d", i, n, slug, baseline+2)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("DELETE", "/v1/skills/"+slug, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("delete %s: %d %s", slug, rec.Code, rec.Body)
		}
		if n := skillSeries(t, d.metrics); n != baseline {
			t.Fatalf("round %d: %d skill series after deleting %s, want %d as before", i, n, slug, baseline)
		}
	}
	wantSeries(t, series(t, d.metrics), map[string]float64{
		"skillfs_skill_opens_total{skill=keep}":       1,
		"skillfs_skill_activations_total{skill=keep}": 1,
	})
}

// TestFleetDeleteLeavesNoSeries: a skill deleted on one host of a fleet
// loses its series on another host once that host follows the change.
func TestFleetDeleteLeavesNoSeries(t *testing.T) {
	ctx := context.Background()
	a, b := newFleet(t)
	install(t, a, "name: x\ndescription: for everyone", skills.ScopeGlobal)
	share(t, a, b)
	if err := b.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := b.CreateSession(ctx, api.CreateRequest{User: "alice", Skills: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	readSKILL(t, b, info.ID, "x")
	if n := skillSeries(t, b.metrics); n != 2 {
		t.Fatalf("b has %d skill series after a read of x, want 2", n)
	}
	if err := a.cat.Delete(ctx, "", "x"); err != nil {
		t.Fatal(err)
	}
	if err := a.Reevaluate(ctx); err != nil {
		t.Fatal(err)
	}
	if n := skillSeries(t, b.metrics); n != 2 {
		t.Fatalf("b dropped its series before looking: %d", n)
	}
	if err := b.catchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if n := skillSeries(t, b.metrics); n != 0 {
		t.Fatalf("b has %d skill series after following the delete of x, want none", n)
	}
}
