// Package api is the contract of the daemon's HTTP API: its OpenAPI
// document, the JSON bodies of its requests and answers, its headers and the
// client the CLI calls it with. The server (cmd/skillfs/internal/server),
// the daemon, the CLI and the tests all speak through these types, so the
// wire has one definition. The document's checker for tests is apitest.
package api

import (
	_ "embed"
	"net/url"
	"strings"
)

// OpenAPI is the API's contract, an OpenAPI 3.1 document served at
// GET /v1/openapi.json: every route the server registers is in it, and the
// tests check what the daemon answers against it.
//
//go:embed openapi.json
var OpenAPI []byte

// SocketName is the API socket inside the data directory.
const SocketName = "skillfs.sock"

// ActAsHeader names the user a catalog API call acts for; without it the
// call acts as the operator. Whoever can reach the API (the 0600 socket, or
// the token) is trusted to say whom it acts for, as a platform's backend
// does for its users.
const ActAsHeader = "X-Skillfs-As"

// Pages of the session list: their size when the request names none, and
// the largest a request may ask for.
const (
	DefaultSessionPage = 100
	MaxSessionPage     = 1000
)

// NextPage returns the path and query of the page a Link header names as
// next (rel="next"), or "" when there is none.
func NextPage(link string) string {
	for part := range strings.SplitSeq(link, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ">")
		if !ok || !strings.HasPrefix(target, "<") || !strings.Contains(params, `rel="next"`) {
			continue
		}
		if u, err := url.Parse(target[1:]); err == nil {
			return u.RequestURI()
		}
	}
	return ""
}

// Error is the body of every failed request. Code lets clients map it back
// to an error kind without matching messages (skills.CodeError).
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// NonNil is l, or an empty list for nil: a list the API (and the CLI's
// JSON) answers is [] when empty, never null.
func NonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}
