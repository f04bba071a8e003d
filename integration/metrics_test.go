package integration

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// scrapeText reads a scrape in Prometheus's text format into the value of
// each series, keyed as the scrape prints it (`skillfs_binds`,
// `skillfs_skill_opens_total{skill="alpha"}`).
func scrapeText(t testing.TB, r io.Reader) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("scrape line %q: no value", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// scrape gets /metrics from the daemon's socket.
func (c *apiClient) scrape(t testing.TB) map[string]float64 {
	t.Helper()
	resp, err := c.hc.Get("http://skillfs/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	return scrapeText(t, resp.Body)
}

// checkSeries fails for each series of want whose value in got differs (a
// series missing from got counts as 0).
func checkSeries(t testing.TB, what string, got, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %v, want %v", what, k, got[k], v)
		}
	}
}

// apiCount names the request count of a route and status in a scrape.
func apiCount(route string, status int) string {
	return fmt.Sprintf(`skillfs_api_request_duration_seconds_count{route=%q,status="%d"}`, route, status)
}

// TestMetricsFollowAScriptedWorkload runs a known workload against the
// real daemon (sessions through the API, reads through the mount, an
// import through the API, a restart) and checks the scrapes on the socket
// hold exactly the opens and activations by skill the activations API
// reports, the sessions open, the requests made by route and status, the
// catalog's size; and that the TCP listener serves /metrics only with the
// token.
func TestMetricsFollowAScriptedWorkload(t *testing.T) {
	e := newEnv(t)
	token := "m3trics"
	args := []string{"--examples=false", "--listen", "127.0.0.1:0", "--token-file", writeTokenFile(t, token, 0o600)}
	d := e.serve(args...)
	e.importFixtures(fixtureSkills)
	e.ok("user", "add", "alice")
	c := newAPIClient(e.home)

	before := c.scrape(t)
	var a, b sessionInfo
	if code := c.do(t, "POST", "/v1/sessions", "", map[string]any{"user": "alice", "skills": []string{"alpha"}}, &a); code != 200 {
		t.Fatalf("create session: %d", code)
	}
	if code := c.do(t, "POST", "/v1/sessions", "", map[string]any{"user": "alice", "skills": []string{"alpha", "beta", "gamma"}}, &b); code != 200 {
		t.Fatalf("create session: %d", code)
	}
	read := func(p string, uncached bool) {
		t.Helper()
		var err error
		if uncached {
			_, err = fetch(p)
		} else {
			_, err = os.ReadFile(p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Session a: alpha read, then read again past the kernel's cache (the
	// daemon sees it: a second open), and a file that is not SKILL.md.
	read(filepath.Join(a.Path, "alpha", "SKILL.md"), false)
	read(filepath.Join(a.Path, "alpha", "SKILL.md"), true)
	read(filepath.Join(a.Path, "alpha", "references", "guide.md"), false)
	// Session b: alpha and beta once each; gamma only listed and stat'ed.
	read(filepath.Join(b.Path, "alpha", "SKILL.md"), false)
	read(filepath.Join(b.Path, "beta", "SKILL.md"), false)
	if _, err := os.Stat(filepath.Join(b.Path, "gamma", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(filepath.Join(b.Path, "gamma")); err != nil {
		t.Fatal(err)
	}
	if code := c.do(t, "GET", "/v1/sessions/no-such-session", "", nil, nil); code != 404 {
		t.Fatalf("GET an unknown session: %d", code)
	}

	// What the recorder recorded, through the API: the metrics must agree.
	recorded := map[string]float64{}
	for _, s := range []sessionInfo{a, b} {
		var acts activationsInfo
		if code := c.do(t, "GET", "/v1/sessions/"+s.ID+"/activations", "", nil, &acts); code != 200 {
			t.Fatalf("activations of %s: %d", s.ID, code)
		}
		for _, r := range acts.Activated {
			recorded[fmt.Sprintf(`skillfs_skill_opens_total{skill=%q}`, r.Slug)] += float64(r.Opens)
			recorded[fmt.Sprintf(`skillfs_skill_activations_total{skill=%q}`, r.Slug)]++
		}
	}
	want := map[string]float64{
		`skillfs_skill_opens_total{skill="alpha"}`:       3,
		`skillfs_skill_activations_total{skill="alpha"}`: 2,
		`skillfs_skill_opens_total{skill="beta"}`:        1,
		`skillfs_skill_activations_total{skill="beta"}`:  1,
		`skillfs_skill_opens_total{skill="gamma"}`:       0,
		`skillfs_skill_activations_total{skill="gamma"}`: 0,
	}
	checkSeries(t, "recorded by the activations API", recorded, want)
	if len(recorded) != 4 {
		t.Errorf("recorded %v, want alpha and beta only", recorded)
	}
	maps.Copy(want, map[string]float64{
		"skillfs_sessions_open":  2,
		"skillfs_binds":          0,
		"skillfs_skills":         3,
		"skillfs_store_versions": 3,
	})
	after := c.scrape(t)
	checkSeries(t, "after the reads", after, want)
	// Requests since the first scrape, by route and status: the first
	// scrape is counted once it is answered, so it shows in the second.
	for k, n := range map[string]float64{
		apiCount("POST /v1/sessions", 200):                 2,
		apiCount("GET /v1/sessions/{id}", 404):             1,
		apiCount("GET /v1/sessions/{id}/activations", 200): 2,
		apiCount("GET /metrics", 200):                      1,
		apiCount("GET /v1/sessions/{id}", 200):             0,
		apiCount("DELETE /v1/sessions/{id}", 200):          0,
	} {
		if got := after[k] - before[k]; got != n {
			t.Errorf("%s grew by %v, want %v", k, got, n)
		}
	}
	if after[`skillfs_fuse_requests_total{op="READ"}`] == 0 || after["go_goroutines"] == 0 || after["process_resident_memory_bytes"] == 0 {
		t.Errorf("FUSE, Go or process metrics missing: READ %v, goroutines %v, resident %v",
			after[`skillfs_fuse_requests_total{op="READ"}`], after["go_goroutines"], after["process_resident_memory_bytes"])
	}

	// An import through the API: a refused upload, then one prepared and
	// confirmed; the store grows by its version and bytes.
	var dr struct {
		ID string `json:"draft"`
	}
	if code := c.doType(t, "POST", "/v1/drafts", "", "application/json", []byte(`{"source": `), nil); code != 400 {
		t.Fatalf("a draft from a broken request: %d", code)
	}
	if code := c.doType(t, "POST", "/v1/drafts", "", "text/markdown", []byte("---\nname: delta\ndescription: uploaded\n---\nbody\n"), &dr); code != 200 {
		t.Fatalf("a draft of a SKILL.md: %d", code)
	}
	if code := c.do(t, "POST", "/v1/drafts/"+dr.ID+"/confirm", "", map[string]string{"share": "global"}, nil); code != 200 {
		t.Fatalf("confirm: %d", code)
	}
	var bytes float64
	for _, slug := range []string{"alpha", "beta", "gamma", "delta"} {
		var show struct {
			Versions []struct {
				Bytes int64 `json:"bytes"`
			} `json:"versions"`
		}
		if code := c.do(t, "GET", "/v1/skills/"+slug, "", nil, &show); code != 200 || len(show.Versions) != 1 {
			t.Fatalf("GET /v1/skills/%s: %d, %d versions", slug, code, len(show.Versions))
		}
		bytes += float64(show.Versions[0].Bytes)
	}
	// Closing a session leaves one open.
	if code := c.do(t, "DELETE", "/v1/sessions/"+a.ID, "", nil, nil); code != 200 {
		t.Fatalf("close session: %d", code)
	}
	checkSeries(t, "after an import and a close", c.scrape(t), map[string]float64{
		`skillfs_imports_total{outcome="invalid",stage="prepare"}`: 1,
		`skillfs_imports_total{outcome="ok",stage="prepare"}`:      1,
		`skillfs_imports_total{outcome="ok",stage="confirm"}`:      1,
		`skillfs_import_duration_seconds_count{stage="prepare"}`:   2,
		`skillfs_import_duration_seconds_count{stage="confirm"}`:   1,
		"skillfs_sessions_open":                                    1,
		"skillfs_skills":                                           4,
		"skillfs_store_versions":                                   4,
		"skillfs_store_bytes":                                      bytes,
	})

	// The TCP listener serves the same metrics, behind the token.
	addr := listenAddr(t, d)
	for tok, status := range map[string]int{"": 401, "wrong": 401, token: 200} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status || (status == 200 && !strings.Contains(string(body), "skillfs_sessions_open 1\n")) {
			t.Errorf("GET /metrics on TCP with token %q: %d, want %d", tok, resp.StatusCode, status)
		}
	}

	// After a restart the counters start again from zero, and follow what
	// is recorded from then on: b's alpha read again is an open, not a
	// first activation (the index knows it), gamma's first read is both.
	if code := d.stop(); code != 0 {
		t.Fatalf("serve exited %d\n%s", code, d.logs())
	}
	e.serve(args...)
	c = newAPIClient(e.home)
	read(filepath.Join(b.Path, "alpha", "SKILL.md"), true)
	read(filepath.Join(b.Path, "gamma", "SKILL.md"), false)
	checkSeries(t, "after a restart", c.scrape(t), map[string]float64{
		`skillfs_skill_opens_total{skill="alpha"}`:       1,
		`skillfs_skill_activations_total{skill="alpha"}`: 0,
		`skillfs_skill_opens_total{skill="beta"}`:        0,
		`skillfs_skill_opens_total{skill="gamma"}`:       1,
		`skillfs_skill_activations_total{skill="gamma"}`: 1,
		"skillfs_sessions_open":                          1,
		apiCount("POST /v1/sessions", 200):               0,
	})
	var acts activationsInfo
	c.get(t, "/v1/sessions/"+b.ID+"/activations", &acts)
	if acts.opens("alpha") != 2 || acts.opens("gamma") != 1 {
		t.Errorf("session b after the restart: %+v, want alpha opened twice, gamma once", acts.Activated)
	}
}
