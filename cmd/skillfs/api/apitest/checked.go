package apitest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"skillfs/cmd/skillfs/api"
)

var (
	documentOnce sync.Once
	document     *Contract
	documentErr  error
)

// Document is api.OpenAPI, loaded and validated once.
func Document(t testing.TB) *Contract {
	t.Helper()
	documentOnce.Do(func() { document, documentErr = Load(api.OpenAPI) })
	if documentErr != nil {
		t.Fatal(documentErr)
	}
	return document
}

// Checked sends requests to a handler over a real HTTP server and fails
// the test on every request or answer that does not conform to the
// document.
type Checked struct {
	t      testing.TB
	URL    string       // the server's
	Client *http.Client // checks every exchange
	tr     *Transport
	// Closed says whether the last answer closed its connection.
	Closed bool
}

// NewChecked serves h for the test and checks every exchange of the
// client it returns against the document.
func NewChecked(t testing.TB, h http.Handler) *Checked {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tr := &Transport{Base: srv.Client().Transport, Contract: Document(t)}
	c := &Checked{t: t, URL: srv.URL, Client: &http.Client{Transport: tr}, tr: tr}
	t.Cleanup(c.Conform)
	return c
}

// Conform fails the test for every violation seen since the last call.
func (c *Checked) Conform() {
	c.t.Helper()
	for _, v := range c.tr.Take() {
		c.t.Errorf("OpenAPI contract: %s", v)
	}
}

// Send sends one request with the given header and body, and returns the
// answer.
func (c *Checked) Send(method, path string, hdr http.Header, body []byte) (int, http.Header, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.URL+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body == nil {
		req.Body = http.NoBody
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	c.Conform()
	c.Closed = resp.Close
	return resp.StatusCode, resp.Header, data
}

// Header builds a header from name, value pairs.
func Header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// JSONHeader is Header with a JSON content type.
func JSONHeader(kv ...string) http.Header {
	return Header(append([]string{"Content-Type", "application/json"}, kv...)...)
}

// ErrorCode is the code of an error answer, or "" when the body is not the
// error shape.
func ErrorCode(body []byte) string {
	var e api.Error
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return ""
	}
	return e.Code
}
