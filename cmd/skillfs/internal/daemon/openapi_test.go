package daemon

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"skillfs/cmd/skillfs/apicontract"
)

var (
	contractOnce sync.Once
	contract     *apicontract.Contract
	contractErr  error
)

// loadContract is the embedded OpenAPI document, loaded and validated once.
func loadContract(t testing.TB) *apicontract.Contract {
	t.Helper()
	contractOnce.Do(func() { contract, contractErr = apicontract.Load(OpenAPI) })
	if contractErr != nil {
		t.Fatal(contractErr)
	}
	return contract
}

// TestOpenAPIDocumentCoversEveryRoute: the document and the server have the
// same routes, method for method.
func TestOpenAPIDocumentCoversEveryRoute(t *testing.T) {
	c := loadContract(t)
	mux, ok := (&Daemon{events: newHub(nil)}).routes("").(*apiMux)
	if !ok {
		t.Fatal("routes does not return its apiMux: the registered routes cannot be listed")
	}
	served := slices.Sorted(slices.Values(mux.patterns))
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
	api := newCheckedAPI(t, (&Daemon{events: newHub(nil)}).routes(""))
	code, hdr, body := api.send("GET", "/v1/openapi.json", nil, nil)
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" || !bytes.Equal(body, OpenAPI) {
		t.Fatalf("GET /v1/openapi.json: %d %q, %d bytes; want the embedded document", code, hdr.Get("Content-Type"), len(body))
	}
}

// TestContractCatchesNonConformingAnswers: the checker is no rubber stamp.
// A handler answering off the document is reported, one answering by it
// is not.
func TestContractCatchesNonConformingAnswers(t *testing.T) {
	c := loadContract(t)
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
			tr := &apicontract.Transport{Base: http.DefaultTransport, Contract: c}
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

// checkedAPI sends requests to a handler over a real HTTP server and fails
// the test on every request or answer that does not conform to the
// document.
type checkedAPI struct {
	t   testing.TB
	url string
	hc  *http.Client
	tr  *apicontract.Transport
	// closed says whether the last answer closed its connection.
	closed bool
}

func newCheckedAPI(t testing.TB, h http.Handler) *checkedAPI {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tr := &apicontract.Transport{Base: srv.Client().Transport, Contract: loadContract(t)}
	api := &checkedAPI{t: t, url: srv.URL, hc: &http.Client{Transport: tr}, tr: tr}
	t.Cleanup(api.conform)
	return api
}

// conform fails the test for every violation seen since the last call.
func (a *checkedAPI) conform() {
	a.t.Helper()
	for _, v := range a.tr.Take() {
		a.t.Errorf("OpenAPI contract: %s", v)
	}
}

// send sends one request with the given header and body, and returns the
// answer.
func (a *checkedAPI) send(method, path string, hdr http.Header, body []byte) (int, http.Header, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.url+path, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if body == nil {
		req.Body = http.NoBody
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	a.conform()
	a.closed = resp.Close
	return resp.StatusCode, resp.Header, data
}

// hdr builds a header from name, value pairs.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// jsonHdr is hdr with a JSON content type.
func jsonHdr(kv ...string) http.Header {
	return hdr(append([]string{"Content-Type", "application/json"}, kv...)...)
}

// errCode is the code of an error answer, or "" when the body is not the
// error shape.
func errCode(body []byte) string {
	var e apiError
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return ""
	}
	return e.Code
}
