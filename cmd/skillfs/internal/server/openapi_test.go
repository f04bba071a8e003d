package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/api/apitest"
)

// TestOpenAPIDocumentCoversEveryRoute: the document and the server have the
// same routes, method for method.
func TestOpenAPIDocumentCoversEveryRoute(t *testing.T) {
	c := apitest.Document(t)
	served := slices.Sorted(slices.Values(New(Config{}).Routes().Patterns()))
	documented := c.Patterns()
	for _, p := range served {
		if !slices.Contains(documented, p) {
			t.Errorf("route %q is served but not in openapi.json", p)
		}
	}
	for _, p := range documented {
		if !slices.Contains(served, p) {
			t.Errorf("route %q is in openapi.json but not served", p)
		}
	}
	if len(served) == 0 || len(served) != len(slices.Compact(slices.Clone(served))) {
		t.Errorf("served patterns %v: none, or one registered twice", served)
	}
}

// TestOpenAPIServed: the daemon serves the document it embeds, and the
// answer conforms to the document itself.
func TestOpenAPIServed(t *testing.T) {
	client := apitest.NewChecked(t, New(Config{}).Handler(""))
	code, hdr, body := client.Send("GET", "/v1/openapi.json", nil, nil)
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" || !bytes.Equal(body, api.OpenAPI) {
		t.Fatalf("GET /v1/openapi.json: %d %q, %d bytes; want the embedded document", code, hdr.Get("Content-Type"), len(body))
	}
}

// TestContractCatchesNonConformingAnswers: the checker is no rubber stamp.
// A handler answering off the document is reported, one answering by it
// is not.
func TestContractCatchesNonConformingAnswers(t *testing.T) {
	c := apitest.Document(t)
	for _, tc := range []struct {
		name, method, path, ctype, body string
		status                          int
		bad                             bool
	}{
		{"health as documented", "GET", "/v1/health", "application/json", `{"ok":true,"sessions":2}`, 200, false},
		{"a field missing", "GET", "/v1/health", "application/json", `{"ok":true}`, 200, true},
		{"a field too many", "GET", "/v1/health", "application/json", `{"ok":true,"sessions":1,"x":1}`, 200, true},
		{"an undocumented status", "GET", "/v1/health", "application/json", `{"error":"x","code":"internal"}`, 500, true},
		{"an error without its code", "GET", "/v1/sessions/x", "application/json", `{"error":"gone"}`, 404, true},
		{"an unknown error code", "GET", "/v1/sessions/x", "application/json", `{"error":"gone","code":"gone"}`, 404, true},
		{"the prompt as JSON", "GET", "/v1/sessions/x/prompt", "application/json", `"text"`, 200, true},
		{"a stream as documented", "GET", "/v1/events", "text/event-stream", "", 200, false},
		{"an unrouted path, JSON", "GET", "/v2/x", "application/json", `{"error":"no such route","code":"not_found"}`, 404, false},
		{"an unrouted path, text", "GET", "/v2/x", "text/plain", "404 page not found", 404, true},
		{"an unrouted path answered", "GET", "/v2/x", "application/json", `{}`, 200, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			srv := httptest.NewServer(h)
			defer srv.Close()
			tr := &apitest.Transport{Base: http.DefaultTransport, Contract: c}
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if v := tr.Take(); (len(v) > 0) != tc.bad {
				t.Errorf("violations %q; want some: %v", v, tc.bad)
			}
		})
	}
}

// TestOpenAPIOperationsAnswerRefusals: every operation of the document
// lists the answers any credential may get before its handler runs — 401
// (no credential), 403 (a reader, X-Skillfs-As beside a session's), 404 and
// 405 (a route a session credential may not call answers as one that does
// not exist) — so that a client generated from the document expects them.
func TestOpenAPIOperationsAnswerRefusals(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]any `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if op.Responses == nil {
				continue // a path's shared parameters, not an operation
			}
			for _, code := range []string{"401", "403", "404", "405"} {
				if _, ok := op.Responses[code]; !ok {
					t.Errorf("%s %s: no %s answer in openapi.json", strings.ToUpper(method), path, code)
				}
			}
		}
	}
}
