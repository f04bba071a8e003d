// Package apitest checks HTTP requests and answers against the daemon's
// OpenAPI document (api.OpenAPI, cmd/skillfs/api/openapi.json). Tests use
// it: the server's and the daemon's in-process handler tests (Checked) and
// the integration suite, which route every request they make through a
// checking http.RoundTripper (Transport).
//
// The document's paths are routed the way the daemon routes them, with an
// http.ServeMux: a path parameter marked "x-skillfs-rest" takes the rest of
// the path, slashes included, as a {name...} wildcard does.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

func init() {
	// SKILL.md uploads are text.
	openapi3filter.RegisterBodyDecoder("text/markdown", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/x-markdown", openapi3filter.PlainBodyDecoder)
}

// RestExtension marks a path parameter that takes the rest of the path.
const RestExtension = "x-skillfs-rest"

// Contract is a loaded, valid document with its routes.
type Contract struct {
	doc      *openapi3.T
	mux      *http.ServeMux
	patterns []string
}

// Load parses and validates an OpenAPI document.
func Load(data []byte) (*Contract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	c := &Contract{doc: doc, mux: http.NewServeMux()}
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for method, op := range item.Operations() {
			pattern, err := muxPattern(method, path, item, op)
			if err != nil {
				return nil, err
			}
			route := &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
			c.mux.HandleFunc(pattern, func(_ http.ResponseWriter, r *http.Request) {
				m := r.Context().Value(matchKey{}).(*match)
				m.route = route
				m.params = map[string]string{}
				for _, p := range op.Parameters {
					if p.Value.In == openapi3.ParameterInPath {
						m.params[p.Value.Name] = r.PathValue(p.Value.Name)
					}
				}
				for _, p := range item.Parameters {
					if p.Value.In == openapi3.ParameterInPath {
						m.params[p.Value.Name] = r.PathValue(p.Value.Name)
					}
				}
			})
			c.patterns = append(c.patterns, pattern)
		}
	}
	slices.Sort(c.patterns)
	return c, nil
}

// muxPattern is the ServeMux pattern of an operation: "GET /v1/x/{id}".
func muxPattern(method, path string, item *openapi3.PathItem, op *openapi3.Operation) (string, error) {
	params := slices.Concat(item.Parameters, op.Parameters)
	for _, p := range params {
		if p.Value.In != openapi3.ParameterInPath || p.Value.Extensions[RestExtension] != true {
			continue
		}
		seg := "{" + p.Value.Name + "}"
		if !strings.HasSuffix(path, "/"+seg) {
			return "", fmt.Errorf("%s %s: parameter %q is marked %s but is not the last segment", method, path, p.Value.Name, RestExtension)
		}
		path = strings.TrimSuffix(path, seg) + "{" + p.Value.Name + "...}"
	}
	return method + " " + path, nil
}

// Patterns lists the ServeMux pattern of every operation, sorted.
func (c *Contract) Patterns() []string { return slices.Clone(c.patterns) }

type matchKey struct{}

type match struct {
	route  *routers.Route
	params map[string]string
}

// find routes a request to its operation, or returns nil.
func (c *Contract) find(r *http.Request) *match {
	m := &match{}
	probe := r.Clone(context.WithValue(r.Context(), matchKey{}, m))
	probe.Body = http.NoBody
	c.mux.ServeHTTP(httptest.NewRecorder(), probe)
	if m.route == nil {
		return nil
	}
	return m
}

var options = &openapi3filter.Options{
	AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	IncludeResponseStatus: true,
}

// Check checks one exchange: the request with its body, and the answer
// with its body (nil for a stream, whose body is not read). It returns what
// does not conform, or nil.
//
// A request outside the document must be refused (4xx): the tests send bad
// input on purpose, and the daemon refusing it conforms. A request no route
// of the document takes must get the error shape with 404, or 405 with an
// Allow header (or 401: the token is checked first).
func (c *Contract) Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) []string {
	what := req.Method + " " + req.URL.RequestURI()
	m := c.find(req)
	if m == nil {
		return c.checkUnrouted(what, resp, respBody)
	}
	var out []string
	probe := req.Clone(context.Background())
	probe.Body = io.NopCloser(bytes.NewReader(reqBody))
	probe.GetBody = nil
	in := &openapi3filter.RequestValidationInput{Request: probe, PathParams: m.params, Route: m.route, Options: options}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && resp.StatusCode < 400 {
		out = append(out, fmt.Sprintf("%s: the request does not conform, yet was answered %d: %v", what, resp.StatusCode, err))
	}
	ropts := *options
	ropts.ExcludeResponseBody = respBody == nil
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
		Header: resp.Header, Body: io.NopCloser(bytes.NewReader(respBody)), Options: &ropts}
	if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
		out = append(out, fmt.Sprintf("%s: answer %d does not conform: %v", what, resp.StatusCode, err))
	}
	if respBody == nil {
		// The body was not read: check at least its content type.
		if r := m.route.Operation.Responses.Status(resp.StatusCode); r != nil && r.Value.Content.Get(resp.Header.Get("Content-Type")) == nil {
			out = append(out, fmt.Sprintf("%s: answer %d has content type %q, not in the document", what, resp.StatusCode, resp.Header.Get("Content-Type")))
		}
	}
	return out
}

func (c *Contract) checkUnrouted(what string, resp *http.Response, body []byte) []string {
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusUnauthorized: // the token is checked before the route
	case http.StatusMethodNotAllowed:
		if resp.Header.Get("Allow") == "" {
			return []string{what + ": 405 without an Allow header"}
		}
	default:
		return []string{fmt.Sprintf("%s: no route of the document takes it, yet it was answered %d", what, resp.StatusCode)}
	}
	if err := c.CheckSchema("Error", resp.Header.Get("Content-Type"), body); err != nil {
		return []string{fmt.Sprintf("%s: answer %d: %v", what, resp.StatusCode, err)}
	}
	return nil
}

// CheckSchema checks a JSON value against a schema of the document's
// components.
func (c *Contract) CheckSchema(name, contentType string, data []byte) error {
	if mt, _, _ := mime.ParseMediaType(contentType); mt != "application/json" {
		return fmt.Errorf("content type %q, want application/json", contentType)
	}
	ref := c.doc.Components.Schemas[name]
	if ref == nil {
		return fmt.Errorf("no schema %q in the document", name)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := ref.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Transport checks every exchange that goes through it and keeps what does
// not conform until Take. Answers of type text/event-stream are streamed to
// the caller unread: only their status and header are checked.
type Transport struct {
	Base     http.RoundTripper
	Contract *Contract

	mu         sync.Mutex
	checked    int
	violations []string
}

// RoundTrip sends req through Base and checks the exchange.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := t.Base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	var respBody []byte
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		respBody, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if respBody == nil {
			respBody = []byte{}
		}
		resp.Body = io.NopCloser(bytes.NewReader(respBody))
	}
	v := t.Contract.Check(req, body, resp, respBody)
	t.mu.Lock()
	t.checked++
	t.violations = append(t.violations, v...)
	t.mu.Unlock()
	return resp, nil
}

// Checked counts the exchanges checked so far.
func (t *Transport) Checked() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.checked
}

// Take returns the violations seen since the last Take.
func (t *Transport) Take() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := t.violations
	t.violations = nil
	return v
}
