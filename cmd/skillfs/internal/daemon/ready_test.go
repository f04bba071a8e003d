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
	d.http.Handler("").ServeHTTP(rec, httptest.NewRequest("GET", "/v1/ready", nil))
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

// A request no route takes is answered in the error shape: 404 for an
// unknown path, 405 with Allow for a known path and the wrong method.
func TestUnroutedRequests(t *testing.T) {
	d := newTestDaemon(t)
	h := d.http.Handler("")
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/v1/nope", http.StatusNotFound, "not_found", ""},
		{"GET", "/", http.StatusNotFound, "not_found", ""},
		{"DELETE", "/v1/health", http.StatusMethodNotAllowed, "invalid", "GET, HEAD"},
		{"PUT", "/v1/sessions", http.StatusMethodNotAllowed, "invalid", "GET, HEAD, POST"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: not JSON: %q", tc.method, tc.path, rec.Body.String())
		}
		if rec.Code != tc.status || out["code"] != tc.code || rec.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %v Allow %q, want %d %s Allow %q", tc.method, tc.path, rec.Code, out, rec.Header().Get("Allow"), tc.status, tc.code, tc.allow)
		}
	}
}

// A daemon whose index lost its -wal (or had its -shm replaced) under it
// goes on writing where no other process reads: /v1/ready and the status
// say so, naming the file and what to do, instead of the write that still
// succeeds. A daemon on a shared SQLite index outside the data directory is
// watched the same way.
func TestReadyNoticesIndexFilesChangedUnderTheDaemon(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shared bool
		damage func(t *testing.T, index string)
		want   []string
	}{
		{"own index, -wal removed", false, func(t *testing.T, p string) {
			if err := os.Remove(p + "-wal"); err != nil {
				t.Fatal(err)
			}
		}, []string{"-wal removed"}},
		{"own index, -wal and -shm removed", false, func(t *testing.T, p string) {
			for _, s := range []string{"-wal", "-shm"} {
				if err := os.Remove(p + s); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"-shm and ", "-wal removed"}},
		{"shared index, -shm replaced", true, func(t *testing.T, p string) {
			if err := os.WriteFile(p+"-shm.new", make([]byte, 32768), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(p+"-shm.new", p+"-shm"); err != nil {
				t.Fatal(err)
			}
		}, []string{"-shm replaced by another file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := ""
			if tc.shared {
				shared = filepath.Join(t.TempDir(), "fleet.db")
			}
			d := newTestHost(t, shared)
			p := d.db.Files()[0]
			if code, out := getReady(t, d); code != http.StatusOK || out["ready"] != true {
				t.Fatalf("fresh daemon: %d %v, want ready", code, out)
			}
			tc.damage(t, p)
			code, out := getReady(t, d)
			msg, _ := out["error"].(string)
			if code != http.StatusServiceUnavailable || !strings.Contains(msg, "index: ") {
				t.Fatalf("after the damage: %d %v, want 503 naming the index", code, out)
			}
			for _, want := range append(tc.want, p, "Restart the daemon with a clean stop", "Never delete or move the index's -wal or -shm") {
				if !strings.Contains(msg, want) {
					t.Errorf("ready's answer does not say %q:\n%s", want, msg)
				}
			}
			st, err := d.Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Readiness.Ready || st.Readiness.Checks[1].Name != "index" || !strings.Contains(st.Readiness.Checks[1].Error, tc.want[len(tc.want)-1]) {
				t.Errorf("status: %+v, want the index check failing", st.Readiness)
			}
		})
	}
}
