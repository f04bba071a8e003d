package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
	"skillfs/skills/skilltest"
)

// Handlers served over fakes of their dependencies: no daemon, no mount.

// health is a fake Health: it reports what it holds.
type health struct {
	served    int
	readiness api.Readiness
}

func (h *health) SessionsServed() int                         { return h.served }
func (h *health) Status(context.Context) (*api.Status, error) { return nil, errors.New("not faked") }
func (h *health) Ready(context.Context) api.Readiness         { return h.readiness }

// TestReadyAnswersTheChecks: /v1/ready answers 200 with the checks when
// all pass, else 503 in the error shape naming each failed check, by the
// document; /v1/health counts the sessions served.
func TestReadyAnswersTheChecks(t *testing.T) {
	h := &health{served: 3, readiness: api.Readiness{Ready: true, Checks: []api.Check{{Name: "mount", OK: true}, {Name: "index", OK: true}}}}
	client := apitest.NewChecked(t, New(Config{Health: h}).Handler(""))
	if code, _, body := client.Send("GET", "/v1/health", nil, nil); code != http.StatusOK || !bytes.Contains(body, []byte(`"sessions": 3`)) {
		t.Errorf("GET /v1/health: %d %s", code, body)
	}
	if code, _, body := client.Send("GET", "/v1/ready", nil, nil); code != http.StatusOK {
		t.Errorf("GET /v1/ready, all checks passing: %d %s", code, body)
	}
	h.readiness = api.Readiness{Checks: []api.Check{{Name: "mount", OK: true}, {Name: "index", Error: "disk full"}, {Name: "store", Error: "gone"}}}
	code, _, body := client.Send("GET", "/v1/ready", nil, nil)
	var got api.NotReady
	if err := json.Unmarshal(body, &got); err != nil || code != http.StatusServiceUnavailable || got.Code != "unavailable" ||
		got.Error.Error != "not ready: index: disk full; store: gone" || got.Ready || len(got.Checks) != 3 {
		t.Errorf("GET /v1/ready, two checks failing: %d %s (%v)", code, body, err)
	}
}

// exportOf is a fake Skills whose every version exports dir.
type exportOf struct {
	skillsDeps // the calls the test makes none of
	dir        string
}

// skillsDeps is Skills under a name to embed.
type skillsDeps = Skills

func (e exportOf) ExportPath(context.Context, string, string, string) (string, error) {
	return e.dir, nil
}

// failingWriter takes limit bytes, then fails every write.
type failingWriter struct {
	http.ResponseWriter
	limit int
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.limit {
		n, _ := w.ResponseWriter.Write(p[:w.limit])
		w.limit = 0
		return n, errors.New("the client went away")
	}
	w.limit -= len(p)
	return w.ResponseWriter.Write(p)
}

// TestExportFailureIsNoArchive: an export that fails before its archive has
// begun is answered in the error shape; one that fails once it has begun is
// logged and cut short (http.ErrAbortHandler), never ended as if whole.
func TestExportFailureIsNoArchive(t *testing.T) {
	gone := New(Config{Skills: exportOf{dir: filepath.Join(t.TempDir(), "gone")}})
	rec := httptest.NewRecorder()
	gone.Routes().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/skills/x/export", nil))
	if rec.Code == http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") || apitest.ErrorCode(rec.Body.Bytes()) == "" {
		t.Fatalf("an export of a version whose files are gone: %d %q %s; want the error shape", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}

	dir := t.TempDir()
	big := make([]byte, 1<<20) // random: the archive cannot shrink it below the writer's buffer
	rand.Read(big)
	skilltest.WriteFile(t, filepath.Join(dir, "SKILL.md"), big, 0o644)
	var logged bytes.Buffer
	cut := New(Config{Skills: exportOf{dir: dir}, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	req := httptest.NewRequest("GET", "/v1/skills/x/export", nil)
	req.SetPathValue("slug", "x")
	w := &failingWriter{ResponseWriter: httptest.NewRecorder(), limit: 64 << 10}
	defer func() {
		if p := recover(); p != http.ErrAbortHandler {
			t.Errorf("an export whose client failed half-way: panic %v, want http.ErrAbortHandler", p)
		}
		if !strings.Contains(logged.String(), "export cut short") {
			t.Errorf("the cut was not logged: %q", logged.String())
		}
	}()
	cut.export(w, req)
	t.Error("an export whose writes failed returned as if whole")
}
