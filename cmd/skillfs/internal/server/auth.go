package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"skillfs/cmd/skillfs/api"
	"skillfs/skills"
)

// How a request's credential came (Principal.Via).
const (
	ViaSocket        = "socket"         // the daemon's 0600 Unix socket
	ViaTCP           = "tcp"            // the loopback TCP listener
	ViaSandboxSocket = "sandbox-socket" // a session's socket in its sandbox
)

// Credentials are the API's bearer tokens besides the TCP listener's own:
// session tokens (api.SessionTokenPrefix) and named platform tokens
// (api.PlatformTokenPrefix). Tokens are kept as hashes only; a token is
// looked up at every request that carries it, so that a revocation, an
// expiry or a session's close is effective at the next one; an event
// stream, the one request that lasts, asks again by the token's hash
// (Recheck) before it sends anything and whenever the daemon says a
// credential changed (API.TokenChanged, API.SessionChanged).
type Credentials interface {
	// Credential is the principal token proves: a session's (Role
	// RoleSession, Session) or a platform token's (its Role and name in
	// Token), with the token's Hash. A token that proves nothing —
	// unknown, expired, revoked, its session closed or moved — is an error
	// wrapping skills.ErrNotFound.
	Credential(ctx context.Context, token string) (Principal, error)
	// Recheck is nil while the token of hash p.Hash still proves p (its
	// Role, Session and Token), as Credential found it; once it proves
	// nothing, or another principal, an error wrapping skills.ErrNotFound.
	Recheck(ctx context.Context, p Principal) error
	// RotateSessionToken gives open session id a new token; the old one
	// no longer works.
	RotateSessionToken(ctx context.Context, id string) (*api.SessionToken, error)
	CreateToken(ctx context.Context, req api.TokenRequest) (*api.TokenCreated, error)
	Tokens(ctx context.Context) ([]api.TokenInfo, error)
	RevokeToken(ctx context.Context, name string) error
}

// errUnauthorized is a request whose credential proves nothing. Its answer
// says no more than that, whatever it carried: never the token, nor
// whether one like it ever existed.
var errUnauthorized = errors.New("missing or wrong bearer token")

// authenticate decides the principal of every request before h routes it,
// and puts it in the request's context:
//
//   - a connection whose context carries a principal already (a listener
//     whose connections are a credential, such as a sandbox's socket)
//     keeps it; an Authorization header on it is refused (403);
//   - without an Authorization header: the operator on the socket, 401 on
//     TCP;
//   - "Authorization: Bearer TOKEN": the listener's token is the
//     operator; a session or platform token (Credentials) is its
//     principal, on the socket and on TCP alike; any other is 401.
//
// A 401 closes the connection after its answer: a client without a
// credential has nothing more to do here, and kept alive it would hold a
// descriptor and one of the listener's slots. A session principal may not
// name a user to act for (api.ActAsHeader): 403.
func (a *API) authenticate(via, listenerToken string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.principal(r, via, listenerToken)
		if err != nil {
			refuse(w, err)
			return
		}
		if p.Role == RoleSession && r.Header.Get(api.ActAsHeader) != "" {
			writeErr(w, fmt.Errorf("%s: a session credential acts for its session's user only: %w", api.ActAsHeader, skills.ErrPermission))
			return
		}
		h.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// principal is who request r comes from (see authenticate).
func (a *API) principal(r *http.Request, via, listenerToken string) (Principal, error) {
	auth := r.Header.Get("Authorization")
	if p, ok := PrincipalOf(r.Context()); ok {
		if auth != "" {
			return Principal{}, fmt.Errorf("this connection is a credential of its own: send no Authorization header on it: %w", skills.ErrPermission)
		}
		return p, nil
	}
	switch {
	case via == ViaSandboxSocket:
		return Principal{}, errUnauthorized // a connection of such a listener without its principal
	case auth == "" && via == ViaSocket:
		return Principal{Role: RoleOperator, Via: via}, nil
	case auth == "":
		return Principal{}, errUnauthorized
	}
	cred, ok := bearer(auth)
	switch {
	case !ok:
		return Principal{}, errUnauthorized
	case listenerToken != "" && subtle.ConstantTimeCompare([]byte(cred), []byte(listenerToken)) == 1:
		return Principal{Role: RoleOperator, Via: via}, nil
	case a.Credentials == nil || !api.LooksLikeToken(cred):
		return Principal{}, errUnauthorized
	}
	p, err := a.Credentials.Credential(r.Context(), cred)
	if err != nil {
		return Principal{}, credentialErr(err)
	}
	p.Via = via
	return p, nil
}

// credentialErr is what a request is answered when the lookup of its
// credential failed with err: errUnauthorized for a token that proves
// nothing; else the index failed, and its error names no token (only
// hashes are looked up), but the answer says no more than its kind.
func credentialErr(err error) error {
	if errors.Is(err, skills.ErrNotFound) {
		return errUnauthorized
	}
	return fmt.Errorf("look up the request's credential: %w", kindOnly(err))
}

// refuse answers a request whose credential failed with err (principal,
// credentialErr).
func refuse(w http.ResponseWriter, err error) {
	if errors.Is(err, errUnauthorized) {
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusUnauthorized, api.Error{Error: errUnauthorized.Error(), Code: skills.ClassPermission.Name})
		return
	}
	writeErr(w, err)
}

// kindOnly is the sentinel of err's kind, without err's message.
func kindOnly(err error) error {
	for _, row := range skills.Kinds {
		if errors.Is(err, row.Err) {
			return row.Err
		}
	}
	return errors.New("internal error")
}

// bearer is the credential of an Authorization header value: the scheme
// "Bearer" in any case (RFC 7235: the scheme is case-insensitive), one or
// more spaces, then the credential.
func bearer(auth string) (string, bool) {
	scheme, cred, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimLeft(cred, " ")
	return cred, cred != ""
}
