package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
)

// TestReadJSONRefusesTrailingData: exactly one JSON value per body.
func TestReadJSONRefusesTrailingData(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"user":"a"}`:                true,
		"{\"user\":\"a\"}\n \t\r\n":   true,
		`{"user":"a"}{"user":"b"}`:    false,
		`{"user":"a"} {"user":"b"}`:   false,
		`{"user":"a"}x`:               false,
		`{"user":"a"}]`:               false,
		`{"user":"a"}null`:            false,
		`{"user":"a"}` + "\n" + `"x"`: false,
	} {
		r, _ := http.NewRequest("POST", "/", strings.NewReader(body))
		w := httptest.NewRecorder()
		var req api.CreateRequest
		got := readJSON(w, r, &req)
		if got != ok {
			t.Errorf("body %q: accepted %v, want %v", body, got, ok)
		}
		if !ok && (w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"invalid"`)) {
			t.Errorf("body %q: answered %d %s, want 400 invalid", body, w.Code, w.Body.String())
		}
	}
}
