package daemon

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// documentedMetrics reads the metrics table of API.md: each row's metric
// and its labels, as written ("`op`, `errno`").
func documentedMetrics(t *testing.T) map[string][]string {
	data, err := os.ReadFile(filepath.Join("..", "..", "api", "API.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	start := strings.Index(page, "| metric | type | labels | meaning |")
	if start < 0 {
		t.Fatal("API.md has no table of metrics")
	}
	table, _, _ := strings.Cut(page[start:], "\n\n")
	rows := map[string][]string{}
	for _, row := range strings.Split(table, "\n")[2:] {
		cells := strings.Split(strings.TrimPrefix(row, "|"), "|")
		if len(cells) < 4 {
			t.Fatalf("API.md: a row of the metrics table has %d cells: %s", len(cells), row)
		}
		var labels []string
		for _, l := range strings.Split(cells[2], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				labels = append(labels, l)
			}
		}
		rows[strings.Trim(strings.TrimSpace(cells[0]), "`")] = labels
	}
	return rows
}

var descName = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// TestMetricsDocumented: API.md's table of metrics names every metric the
// daemon registers, with its labels, and no other; the Go runtime's and the
// process's are one row, `go_*`, `process_*`.
func TestMetricsDocumented(t *testing.T) {
	documented := documentedMetrics(t)
	ch := make(chan *prometheus.Desc)
	go func() {
		newMetrics(&Daemon{}).reg.Describe(ch)
		close(ch)
	}()
	registered := map[string]bool{}
	for d := range ch {
		m := descName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		name := m[1]
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			name = "go_*`, `process_*"
		}
		if registered[name] {
			continue
		}
		registered[name] = true
		labels, ok := documented[name]
		if !ok {
			t.Errorf("metric %s is registered but not in API.md", name)
			continue
		}
		var want []string
		if m[2] != "" {
			want = strings.Split(m[2], ",")
		}
		if !strings.HasPrefix(name, "go_") && !slices.Equal(labels, want) {
			t.Errorf("API.md gives %s the labels %q, the daemon %q", name, labels, want)
		}
	}
	for name := range documented {
		if !registered[name] {
			t.Errorf("API.md lists %s, which the daemon does not register", name)
		}
	}
}
