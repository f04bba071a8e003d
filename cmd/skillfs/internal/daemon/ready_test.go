package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func getReady(t *testing.T, d *Daemon) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	d.routes("").ServeHTTP(rec, httptest.NewRequest("GET", "/v1/ready", nil))
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("decode %q: %v", rec.Body.String(), err)
	}
	return rec.Code, out
}

// Readiness tells the truth: each of the mount, the index and the store
// failing makes the daemon not ready, with the reason named.
func TestReadiness(t *testing.T) {
	d := newTestDaemon(t)
	if code, out := getReady(t, d); code != http.StatusOK || out["ready"] != true {
		t.Fatalf("fresh daemon: %d %v, want ready", code, out)
	}

	skillsDir := filepath.Join(d.cat.Store().Root, "skills")
	if err := os.Rename(skillsDir, skillsDir+".away"); err != nil {
		t.Fatal(err)
	}
	code, out := getReady(t, d)
	os.Rename(skillsDir+".away", skillsDir)
	if code != http.StatusServiceUnavailable || out["code"] != "unavailable" || !strings.Contains(out["error"].(string), "store: ") {
		t.Fatalf("store gone: %d %v, want 503 naming the store", code, out)
	}
	if r := d.Ready(context.Background()); r.Ready != true {
		t.Fatalf("store back: %+v", r)
	}

	d.fs.Unmount()
	code, out = getReady(t, d)
	if code != http.StatusServiceUnavailable || !strings.Contains(out["error"].(string), "mount: ") {
		t.Fatalf("mount gone: %d %v, want 503 naming the mount", code, out)
	}

	d.cat.Close()
	r := d.Ready(context.Background())
	if r.Ready || r.Checks[1].Name != "index" || r.Checks[1].OK {
		t.Fatalf("index closed: %+v, want the index check failing", r)
	}
}
