package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/skills"
)

// TestImportOutcomesAreErrorCodes: an import answered with an error is
// counted under the code its body carries — each kind's, the three that
// share 503 told apart — and an import answered with a result under "ok";
// every outcome is among the series counted from the start.
func TestImportOutcomesAreErrorCodes(t *testing.T) {
	errs := []error{nil, errors.New("anything else")}
	for _, k := range skills.Kinds {
		errs = append(errs, fmt.Errorf("wrapped: %w", k.Err))
	}
	for _, err := range errs {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		h := m.importStage("prepare", func(w http.ResponseWriter, r *http.Request) { reply(w, struct{}{}, err) })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/drafts", nil))
		want := "ok"
		if err != nil {
			want = apitest.ErrorCode(rec.Body.Bytes())
		}
		if !slices.Contains(importOutcomes, want) {
			t.Errorf("%v: outcome %q is not among %v", err, want, importOutcomes)
		}
		counted := importsCounted(t, reg)
		if len(counted) != 1 || counted["prepare/"+want] != 1 {
			t.Errorf("%v: imports counted %v, want one under prepare/%s", err, counted, want)
		}
	}
}

// importsCounted is skillfs_imports_total as gathered from reg, by
// "stage/outcome", leaving out the series at 0.
func importsCounted(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "skillfs_imports_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if v := m.GetCounter().GetValue(); v != 0 {
				out[labels["stage"]+"/"+labels["outcome"]] = v
			}
		}
	}
	return out
}
