package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// scaleSkills is the catalog size BenchmarkCatalogScale builds:
// SKILLFS_SCALE_SKILLS, else 10,000.
func scaleSkills(b *testing.B) int {
	n := 10000
	if v := os.Getenv("SKILLFS_SCALE_SKILLS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < scaleBatch {
			b.Fatalf("SKILLFS_SCALE_SKILLS=%q: want a number of at least %d", v, scaleBatch)
		}
	}
	return n
}

const (
	scaleBatch = 1000 // skills per import
	scaleChain = 4    // every 4th skill starts a new dependency chain
)

// writeScaleBatch writes batch i of the scale catalog into a new folder:
// skills s<i>-<k>, each depending on the one before it in its chain of
// scaleChain, with a script beside the SKILL.md.
func writeScaleBatch(b *testing.B, root string, i int) string {
	dir := filepath.Join(root, fmt.Sprintf("batch%03d", i))
	for k := range scaleBatch {
		slug := fmt.Sprintf("s%03d-%04d", i, k)
		deps := ""
		if k%scaleChain != 0 {
			deps = fmt.Sprintf("skill_dependencies: [s%03d-%04d]\n", i, k-1)
		}
		writeSkill(b, filepath.Join(dir, slug),
			"name: "+slug+"\ndescription: skill "+slug+" of the scale catalog\n"+deps,
			map[string]string{"scripts/run.sh": "#!/bin/sh\necho " + slug + "\n"})
	}
	return dir
}

// BenchmarkCatalogScale imports a catalog of SKILLFS_SCALE_SKILLS skills
// (default 10,000) with dependency chains, 1,000 per import, beside a running
// daemon, then creates sessions on it through the API. It reports the import
// rate of the first and last batch, and the median and 90th percentile of a
// session create for 5 requested skills (their closure is up to 20) and for
// all skills. Run it once: -benchtime 1x.
func BenchmarkCatalogScale(b *testing.B) {
	n := scaleSkills(b)
	for range b.N {
		e := newEnv(b)
		e.serve("--examples=false")
		src := b.TempDir()
		var rates []float64
		for i := range n / scaleBatch {
			dir := writeScaleBatch(b, src, i)
			start := time.Now()
			e.ok("skill", "import", dir, "--all")
			rates = append(rates, scaleBatch/time.Since(start).Seconds())
			os.RemoveAll(dir)
		}
		b.ReportMetric(rates[0], "skills/s-first1k")
		b.ReportMetric(rates[len(rates)-1], "skills/s-last1k")
		b.Logf("import rate per batch of %d (skills/s): %.0f", scaleBatch, rates)

		api := newTimingClient(e.home) // times the daemon, not the contract check
		create := func(req map[string]any) time.Duration {
			var out struct {
				ID       string   `json:"id"`
				Readable []string `json:"readable"`
			}
			start := time.Now()
			if code := api.do(b, "POST", "/v1/sessions", "", req, &out); code != http.StatusOK {
				b.Fatalf("create session: status %d", code)
			}
			d := time.Since(start)
			if code := api.do(b, "DELETE", "/v1/sessions/"+out.ID, "", nil, nil); code != http.StatusOK {
				b.Fatalf("close session: status %d", code)
			}
			return d
		}
		var five, all []time.Duration
		for j := range 200 {
			var want []string
			for k := range 5 {
				want = append(want, fmt.Sprintf("s%03d-%04d", (j+k)%(n/scaleBatch), (j*37+k*211)%scaleBatch))
			}
			five = append(five, create(map[string]any{"user": "operator", "skills": want}))
		}
		for range 20 {
			all = append(all, create(map[string]any{"user": "operator", "all": true}))
		}
		slices.Sort(five)
		slices.Sort(all)
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		b.ReportMetric(ms(five[len(five)/2]), "create5-p50-ms")
		b.ReportMetric(ms(five[len(five)*9/10]), "create5-p90-ms")
		b.ReportMetric(ms(all[len(all)/2]), "createall-p50-ms")
		b.ReportMetric(ms(all[len(all)*9/10]), "createall-p90-ms")
	}
}
