package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// skillSeriesOf counts the series of the skill label in a scrape.
func skillSeriesOf(scrape map[string]float64) int {
	n := 0
	for k := range scrape {
		if strings.HasPrefix(k, "skillfs_skill_") {
			n++
		}
	}
	return n
}

// TestDeletedSkillsLeaveNoMetricSeries: rounds of upload, a first read
// through a session's mount, and a delete (through the API, and through the
// CLI, which tells the daemon) leave the daemon's skill series where they
// were before the first round: the label stays bounded by the catalog.
func TestDeletedSkillsLeaveNoMetricSeries(t *testing.T) {
	e := newEnv(t)
	e.serve("--examples=false")
	c := newAPIClient(e.home)
	baseline := skillSeriesOf(c.scrape(t))
	const rounds = 30
	for i := range rounds {
		slug := fmt.Sprintf("round%02d", i)
		var dr struct{ Draft string }
		manifest := []byte("---\nname: " + slug + "\ndescription: uploaded, read and deleted again\n---\nbody\n")
		if code := c.doType(t, "POST", "/v1/drafts?name="+slug+".md", "", "text/markdown", manifest, &dr); code != http.StatusOK {
			t.Fatalf("round %d: upload: %d", i, code)
		}
		if code := c.do(t, "POST", "/v1/drafts/"+dr.Draft+"/confirm", "", map[string]string{"share": "global"}, nil); code != http.StatusOK {
			t.Fatalf("round %d: confirm: %d", i, code)
		}
		var s sessionInfo
		if code := c.do(t, "POST", "/v1/sessions", "", map[string]any{"user": "operator", "skills": []string{slug}}, &s); code != http.StatusOK {
			t.Fatalf("round %d: session: %d", i, code)
		}
		if _, err := os.ReadFile(filepath.Join(s.Path, slug, "SKILL.md")); err != nil {
			t.Fatalf("round %d: first read: %v", i, err)
		}
		if n := skillSeriesOf(c.scrape(t)); n != baseline+2 {
			t.Fatalf("round %d: %d skill series with %s read, want %d", i, n, slug, baseline+2)
		}
		if i%2 == 0 {
			if code := c.do(t, "DELETE", "/v1/skills/"+slug, "", nil, nil); code != http.StatusOK {
				t.Fatalf("round %d: delete: %d", i, code)
			}
		} else {
			e.ok("skill", "delete", slug)
		}
		if code := c.do(t, "DELETE", "/v1/sessions/"+s.ID, "", nil, nil); code != http.StatusOK {
			t.Fatalf("round %d: close: %d", i, code)
		}
	}
	got := skillSeriesOf(c.scrape(t))
	t.Logf("%d rounds of upload, read, delete: %d skill series before, %d after", rounds, baseline, got)
	if got != baseline {
		t.Fatalf("%d skill series after %d rounds of upload, read, delete; want %d as before", got, rounds, baseline)
	}
}
